//! Ansible's `jsonfile` fact cache, filled with the setup plugin's facts, so playbooks with
//! `gathering = smart` or `gather_facts: false` use them without gathering.
//!
//! ansible-core 2.19 changed the cache's layout: it reads `s1_<host>` holding
//! `{"__payload__": "<facts as JSON>"}`, where earlier versions read `<host>` holding the facts.
//! Files are written atomically (a temporary file renamed into place) and readable as Ansible's
//! own.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

/// The setup plugin's name, whose results hold the facts.
pub const SETUP_PLUGIN: &str = "setup";
/// The setup plugin's artifact, in its results and in bundles.
pub const FACTS_ARTIFACT: &str = "ansible_facts.json";
/// Largest facts file accepted from a bundle; real ones are tens of kilobytes.
pub const MAX_FACTS_BYTES: u64 = 64 * 1024 * 1024;
/// ansible-core 2.19's cache schema: keys are prefixed `s<id>_`, values wrapped.
const SCHEMA_PREFIX: &str = "s1_";
const PAYLOAD_KEY: &str = "__payload__";

/// Which cache file layout to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Both layouts below.
    Both,
    /// ansible-core 2.19 and later: `s1_<host>` with the facts under `__payload__`.
    Schema1,
    /// ansible-core 2.18 and earlier: `<host>` with the facts.
    Plain,
}

/// What was written for one host.
#[derive(Debug)]
pub struct Written {
    /// The inventory name.
    pub host: String,
    /// The cache files written.
    pub files: Vec<PathBuf>,
    /// How many facts they hold.
    pub facts: usize,
}

/// A facts file's JSON object, or why it is not one.
pub fn parse_facts(bytes: &[u8]) -> Result<Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(facts)) => Ok(facts),
        Ok(other) => Err(format!(
            "{FACTS_ARTIFACT} holds a JSON {}, not an object of facts",
            json_kind(&other)
        )),
        Err(e) => Err(format!("{FACTS_ARTIFACT} is not valid JSON: {e}")),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Writes one host's cache file(s) in the chosen layout into `dir` (Ansible's
/// `fact_caching_connection`), each name starting with `prefix` (its `fact_caching_prefix`).
pub fn write_host(
    dir: &Path,
    prefix: &str,
    host: &str,
    mut facts: Map<String, Value>,
    layout: Layout,
) -> anyhow::Result<Written> {
    check_host_name(host)?;
    // What Ansible's gather_facts records; `gathering = smart` skips hosts that have it.
    facts.insert("_ansible_facts_gathered".into(), Value::Bool(true));
    let count = facts.len();
    let facts = Value::Object(facts);
    let mut files = Vec::new();
    if matches!(layout, Layout::Both | Layout::Schema1) {
        let payload = json!({ PAYLOAD_KEY: facts.to_string() });
        let path = dir.join(format!("{prefix}{SCHEMA_PREFIX}{host}"));
        write_atomically(&path, payload.to_string().as_bytes())?;
        files.push(path);
    }
    if matches!(layout, Layout::Both | Layout::Plain) {
        let path = dir.join(format!("{prefix}{host}"));
        write_atomically(&path, facts.to_string().as_bytes())?;
        files.push(path);
    }
    Ok(Written {
        host: host.to_owned(),
        files,
        facts: count,
    })
}

/// An inventory name becomes a file name: it must stay one.
fn check_host_name(host: &str) -> anyhow::Result<()> {
    if host.is_empty() || host == "." || host == ".." || host.contains('/') || host.contains('\0') {
        bail!("{host:?} cannot be a cache file name (empty, `.`, `..`, or containing `/` or NUL)");
    }
    Ok(())
}

/// Writes `bytes` to a temporary file next to `path` and renames it into place, so Ansible
/// never reads half a file; mode 0644 as Ansible's own cache files.
fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let temporary = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        std::fs::rename(&temporary, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result.with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_both_layouts_with_the_gathered_marker() {
        let dir = tempfile::tempdir().unwrap();
        let facts = parse_facts(br#"{"ansible_hostname": "web1", "module_setup": true}"#).unwrap();
        let done = write_host(dir.path(), "", "web1", facts, Layout::Both).unwrap();
        assert_eq!(done.facts, 3);
        let wrapped: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("s1_web1")).unwrap()).unwrap();
        let inner: Value = serde_json::from_str(wrapped["__payload__"].as_str().unwrap()).unwrap();
        assert_eq!(inner["ansible_hostname"], "web1");
        assert_eq!(inner["_ansible_facts_gathered"], true);
        let plain: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("web1")).unwrap()).unwrap();
        assert_eq!(plain, inner);
    }

    #[test]
    fn refuses_names_and_documents_that_are_not_facts() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["", "..", "a/b"] {
            assert!(write_host(dir.path(), "", bad, Map::new(), Layout::Plain).is_err());
        }
        assert!(parse_facts(b"[1, 2]").unwrap_err().contains("JSON array"));
        assert!(
            parse_facts(b"{truncated")
                .unwrap_err()
                .contains("not valid JSON")
        );
    }
}

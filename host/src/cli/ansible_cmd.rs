//! `factbuoy ansible fact-cache`: hands setup facts to Ansible through its `jsonfile` fact
//! cache, so playbooks with `gathering = smart` or `gather_facts: false` use them without
//! gathering.
//!
//! The facts come from the bundled `setup` plugin run on this host now, or from a run's bundle
//! (`.tar.gz`) or its extracted directory, one cache file per node. ansible-core 2.19 changed
//! the cache's layout: it reads `s1_<host>` holding `{"__payload__": "<facts as JSON>"}`, where
//! earlier versions read `<host>` holding the facts. Both are written unless `--layout` says
//! otherwise, atomically (a temporary file renamed into place) and readable as Ansible's own.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Map, Value, json};

use super::{Format, Outcome, emit};
use crate::plugin::PluginRef;
use crate::plugin::params;
use crate::runtime::sink::MemorySink;
use crate::runtime::{Limits, RunRequest, Runtime, RuntimeOptions};

/// The setup plugin's artifact, in its results and in bundles.
const FACTS_ARTIFACT: &str = "ansible_facts.json";
/// Where a bundle keeps the setup plugin's results: `plugins/setup/results/<node>/...`.
const SETUP_RESULTS: &str = "plugins/setup/results";
/// Largest facts file accepted from a bundle; real ones are tens of kilobytes.
const MAX_FACTS_BYTES: u64 = 64 * 1024 * 1024;
/// ansible-core 2.19's cache schema: keys are prefixed `s<id>_`, values wrapped.
const SCHEMA_PREFIX: &str = "s1_";
const PAYLOAD_KEY: &str = "__payload__";

#[derive(Debug, Subcommand)]
pub enum AnsibleCommand {
    /// Write setup facts into an Ansible `jsonfile` fact cache directory, one file per host.
    ///
    /// Point Ansible at it with `fact_caching = jsonfile` and `fact_caching_connection = DIR`
    /// (or ANSIBLE_CACHE_PLUGIN=jsonfile ANSIBLE_CACHE_PLUGIN_CONNECTION=DIR), and use
    /// `gathering = smart` or `gather_facts: false`.
    FactCache(FactCacheArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Layout {
    /// Both layouts below.
    Both,
    /// ansible-core 2.19 and later: `s1_<host>` with the facts under `__payload__`.
    Schema1,
    /// ansible-core 2.18 and earlier: `<host>` with the facts.
    Plain,
}

#[derive(Debug, Args)]
pub struct FactCacheArgs {
    /// The cache directory (Ansible's `fact_caching_connection`); created if missing.
    dir: PathBuf,
    /// Take the facts from a run's bundle (`.tar.gz`) or its extracted directory, one cache
    /// file per node. Without it, the setup plugin runs on this host now.
    #[arg(long, value_name = "BUNDLE")]
    from: Option<PathBuf>,
    /// The inventory name of this host, for facts gathered now [default: the host's name,
    /// `ansible_nodename`]. Use `localhost` for `ansible-playbook -i localhost,`.
    #[arg(long)]
    host: Option<String>,
    /// Ansible's `fact_caching_prefix`.
    #[arg(long, default_value = "")]
    prefix: String,
    /// Which file layout to write.
    #[arg(long, value_enum, default_value_t = Layout::Both)]
    layout: Layout,
    /// A parameter for the setup plugin, as NAME=VALUE (for example gather_subset=!hardware).
    #[arg(short, long = "param", value_name = "NAME=VALUE", value_parser = params::parse_assignment)]
    params: Vec<(String, String)>,
    /// Host directory the plugin's granted paths are mapped onto (`/host` in a pod).
    #[arg(long, default_value = "/", value_name = "DIR")]
    root: PathBuf,
    /// Where compiled components are cached [default: $FACTBUOY_CACHE_DIR or ~/.cache/factbuoy].
    #[arg(long)]
    cache_dir: Option<PathBuf>,
}

pub async fn execute(command: AnsibleCommand, format: Format) -> anyhow::Result<Outcome> {
    match command {
        AnsibleCommand::FactCache(args) => fact_cache(args, format).await,
    }
}

/// What happened to one host's facts.
struct Written {
    host: String,
    files: Vec<PathBuf>,
    facts: usize,
}

async fn fact_cache(args: FactCacheArgs, format: Format) -> anyhow::Result<Outcome> {
    if args.from.is_some() && (args.host.is_some() || !args.params.is_empty()) {
        bail!(
            "--host and --param apply to facts gathered now; with --from, hosts are the bundle's nodes"
        );
    }
    let mut facts_by_host: BTreeMap<String, Result<Map<String, Value>, String>> = BTreeMap::new();
    match &args.from {
        Some(bundle) => {
            for (node, read) in read_bundle(bundle)? {
                facts_by_host.insert(node, read.and_then(|bytes| parse_facts(&bytes)));
            }
            if facts_by_host.is_empty() {
                bail!(
                    "{} has no setup results ({SETUP_RESULTS}/<node>/{FACTS_ARTIFACT}); was the setup plugin part of the run?",
                    bundle.display()
                );
            }
        }
        None => {
            let facts = gather_here(&args).await?;
            let host = match &args.host {
                Some(host) => host.clone(),
                None => facts
                    .get("ansible_nodename")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .context("the facts have no ansible_nodename; name the host with --host")?,
            };
            facts_by_host.insert(host, Ok(facts));
        }
    }

    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating the cache directory {}", args.dir.display()))?;
    let mut written = Vec::new();
    let mut errors = Vec::new();
    for (host, facts) in facts_by_host {
        let result = facts.and_then(|facts| {
            write_host(&args.dir, &args.prefix, &host, facts, args.layout)
                .map_err(|e| format!("{e:#}"))
        });
        match result {
            Ok(done) => written.push(done),
            Err(e) => errors.push(format!("{host}: {e}")),
        }
    }

    match format {
        Format::Json => emit(
            &json!({
                "directory": args.dir,
                "written": written.iter().map(|w| json!({"host": w.host, "files": w.files, "facts": w.facts})).collect::<Vec<_>>(),
                "errors": errors,
            })
            .to_string(),
        ),
        Format::Text => {
            for w in &written {
                let files: Vec<String> = w.files.iter().map(|f| f.display().to_string()).collect();
                emit(&format!("{}: {} facts -> {}", w.host, w.facts, files.join(", ")));
            }
            for e in &errors {
                eprintln!("error: {e}");
            }
        }
    }
    Ok(if errors.is_empty() {
        Outcome::Success
    } else {
        Outcome::PluginFailed
    })
}

/// Runs the bundled setup plugin on this host and returns its facts.
async fn gather_here(args: &FactCacheArgs) -> anyhow::Result<Map<String, Value>> {
    let defaults = RuntimeOptions::default();
    let runtime = Runtime::new(RuntimeOptions {
        limits: Limits::default(),
        cache_dir: args.cache_dir.clone().or(defaults.cache_dir),
    })?;
    let plugin = PluginRef::parse("setup")?;
    let loaded = plugin.load(&runtime).await?;
    let params = params::resolve(&loaded.info.parameters, &args.params)
        .map_err(|e| anyhow::anyhow!("plugin \"setup\": {e}"))?;
    let memory = MemorySink::default();
    let report = runtime
        .run(
            &loaded,
            RunRequest {
                params,
                grants: plugin.default_grants(),
                host_root: args.root.clone(),
                sink: Arc::new(memory.clone()),
                observer: None,
                limits: None,
            },
        )
        .await;
    for warning in &report.warnings {
        tracing::warn!("setup: {warning}");
    }
    if let Some(line) = report.failure_line() {
        bail!("{line}");
    }
    let bytes = memory
        .contents()
        .into_iter()
        .find(|(name, _)| name.as_str() == FACTS_ARTIFACT)
        .map(|(_, bytes)| bytes)
        .context("the setup plugin wrote no ansible_facts.json")?;
    parse_facts(&bytes).map_err(anyhow::Error::msg)
}

/// A facts file's JSON object, or why it is not one.
fn parse_facts(bytes: &[u8]) -> Result<Map<String, Value>, String> {
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

/// A node's name and its facts file's bytes, or why they could not be read.
type NodeFacts = (String, Result<Vec<u8>, String>);

/// Each node's facts file in a bundle (`.tar.gz`) or an extracted bundle directory. A file
/// that cannot be read is an error for that node only.
fn read_bundle(path: &Path) -> anyhow::Result<Vec<NodeFacts>> {
    if path.is_dir() {
        let results = path.join(SETUP_RESULTS);
        let mut found = Vec::new();
        let entries = match std::fs::read_dir(&results) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
            Err(e) => return Err(e).with_context(|| format!("listing {}", results.display())),
        };
        for entry in entries {
            let entry = entry.with_context(|| format!("listing {}", results.display()))?;
            let node = entry.file_name().to_string_lossy().into_owned();
            let file = entry.path().join(FACTS_ARTIFACT);
            if !file.exists() {
                continue;
            }
            found.push((
                node,
                read_capped(File::open(&file), &file.display().to_string()),
            ));
        }
        return Ok(found);
    }
    let file =
        File::open(path).with_context(|| format!("opening the bundle {}", path.display()))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(BufReader::new(file)));
    let mut found = Vec::new();
    let unreadable = |found: &[NodeFacts]| {
        if found.is_empty() {
            format!(
                "{} is corrupt, truncated or not a .tar.gz bundle",
                path.display()
            )
        } else {
            format!(
                "{} is corrupt or truncated after the nodes read so far",
                path.display()
            )
        }
    };
    let entries = archive.entries().with_context(|| unreadable(&found))?;
    for entry in entries {
        let mut entry = match entry {
            Ok(entry) => entry,
            Err(e) if found.is_empty() => return Err(e).context(unreadable(&found)),
            Err(e) => {
                let error = format!("{}: {e}", unreadable(&found));
                found.push(("(rest of the bundle)".to_owned(), Err(error)));
                break;
            }
        };
        let name = entry
            .path()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(node) = name
            .strip_prefix(SETUP_RESULTS)
            .and_then(|rest| rest.strip_prefix('/'))
            .and_then(|rest| rest.strip_suffix(FACTS_ARTIFACT))
            .and_then(|rest| rest.strip_suffix('/'))
            .filter(|node| !node.is_empty() && !node.contains('/'))
        else {
            continue;
        };
        let node = node.to_owned();
        let mut bytes = Vec::new();
        let read = (&mut entry)
            .take(MAX_FACTS_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("reading {name}: {e}"))
            .and_then(|_| capped(bytes, &name));
        found.push((node, read));
    }
    Ok(found)
}

fn read_capped(file: std::io::Result<File>, name: &str) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    file.and_then(|f| f.take(MAX_FACTS_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("reading {name}: {e}"))?;
    capped(bytes, name)
}

fn capped(bytes: Vec<u8>, name: &str) -> Result<Vec<u8>, String> {
    if bytes.len() as u64 > MAX_FACTS_BYTES {
        return Err(format!(
            "{name} is larger than {MAX_FACTS_BYTES} bytes; that is not a facts file"
        ));
    }
    Ok(bytes)
}

/// Writes one host's cache file(s) in the chosen layout.
fn write_host(
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

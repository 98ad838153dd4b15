//! Ansible's `jsonfile` fact cache, filled with the setup plugin's facts, so playbooks with
//! `gathering = smart` or `gather_facts: false` use them without gathering.
//!
//! ansible-core 2.19 changed the cache's layout: it reads `s1_<host>` holding
//! `{"__payload__": "<facts as JSON>"}`, where earlier versions read `<host>` holding the facts.
//! Files are written atomically (a temporary file renamed into place) and readable as Ansible's
//! own. The facts are transcoded entry by entry from the artifact's bytes into each file, never
//! parsed into a tree: memory stays at the artifact's size plus its largest single string, not a
//! multiple of it.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};

/// The setup plugin's name, whose results hold the facts.
pub const SETUP_PLUGIN: &str = "setup";
/// The setup plugin's artifact, in its results and in bundles.
pub const FACTS_ARTIFACT: &str = "ansible_facts.json";
/// Each node's setup facts document in the bundle at `bundle` (a `.tar.gz` or its extracted
/// folder), or why that node's could not be read.
pub fn facts_from_bundle(
    bundle: &Path,
) -> anyhow::Result<BTreeMap<String, Result<Vec<u8>, String>>> {
    let facts_by_host: BTreeMap<String, Result<Vec<u8>, String>> =
        factbuoy_bundle::reader::node_files(
            bundle,
            SETUP_PLUGIN,
            FACTS_ARTIFACT,
            crate::MAX_FACTS_BYTES,
        )?
        .into_iter()
        .collect();
    if facts_by_host.is_empty() {
        bail!(
            "{} has no setup results ({}/{FACTS_ARTIFACT}); was the setup plugin part of the run?",
            bundle.display(),
            factbuoy_bundle::layout::result_dir(
                SETUP_PLUGIN,
                "<node>",
                factbuoy_bundle::layout::ResultKind::Results
            )
        );
    }
    Ok(facts_by_host)
}

/// ansible-core 2.19's cache schema: keys are prefixed `s<id>_`, values wrapped.
const SCHEMA_PREFIX: &str = "s1_";
const PAYLOAD_KEY: &str = "__payload__";
/// What Ansible's gather_facts records; `gathering = smart` skips hosts that have it.
const GATHERED_KEY: &str = "_ansible_facts_gathered";
/// The fact that names the host when no inventory name is given.
const NODENAME_KEY: &str = "ansible_nodename";

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

/// The host's `ansible_nodename` in a facts document, if it has one as a string; fails if the
/// document is not a JSON object. Reads the document once, keeping nothing but that value.
pub fn node_name(facts: &[u8]) -> Result<Option<String>, String> {
    struct Find;
    impl<'de> Visitor<'de> for Find {
        type Value = Option<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object of facts")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut found = None;
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key == NODENAME_KEY {
                    found = map
                        .next_value::<serde_json::Value>()?
                        .as_str()
                        .map(str::to_owned);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(found)
        }
    }
    let mut document = serde_json::Deserializer::from_slice(facts);
    let found = document
        .deserialize_map(Find)
        .and_then(|found| document.end().map(|()| found));
    found.map_err(|e| not_facts(&e))
}

fn not_facts(e: &serde_json::Error) -> String {
    match e.classify() {
        serde_json::error::Category::Data => {
            format!("{FACTS_ARTIFACT} is not a JSON object of facts: {e}")
        }
        _ => format!("{FACTS_ARTIFACT} is not valid JSON: {e}"),
    }
}

/// What [`write_cache`] did: each host written, and each host whose facts could not be.
#[derive(Debug, Default)]
pub struct CacheWrite {
    /// The hosts written, in the order of their names.
    pub written: Vec<Written>,
    /// `host: why` for each host whose facts could not be written.
    pub errors: Vec<String>,
}

/// Writes a cache file (or two, for [`Layout::Both`]) per host in `dir`, which it creates. A
/// host whose facts are an error, or cannot be written, is one of [`CacheWrite::errors`]; the
/// others are written all the same.
pub fn write_cache(
    dir: &Path,
    prefix: &str,
    layout: Layout,
    facts_by_host: BTreeMap<String, Result<Vec<u8>, String>>,
) -> anyhow::Result<CacheWrite> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating the cache directory {}", dir.display()))?;
    let mut done = CacheWrite::default();
    for (host, facts) in facts_by_host {
        let result = facts.and_then(|facts| {
            write_host(dir, prefix, &host, &facts, layout).map_err(|e| format!("{e:#}"))
        });
        match result {
            Ok(written) => done.written.push(written),
            Err(e) => done.errors.push(format!("{host}: {e}")),
        }
    }
    Ok(done)
}

/// Writes one host's cache files from its facts document (`ansible_facts.json`'s bytes), with
/// the gathered marker added.
pub fn write_host(
    dir: &Path,
    prefix: &str,
    host: &str,
    facts: &[u8],
    layout: Layout,
) -> anyhow::Result<Written> {
    check_host_name(host)?;
    // The whole document is checked before any file is written.
    node_name(facts).map_err(anyhow::Error::msg)?;
    let mut files = Vec::new();
    let mut count = 0;
    if matches!(layout, Layout::Both | Layout::Schema1) {
        // `{"__payload__": "<the facts as JSON>"}`: the facts document, escaped into a string.
        let path = dir.join(format!("{prefix}{SCHEMA_PREFIX}{host}"));
        count = write_atomically(&path, |file| {
            write!(file, "{{\"{PAYLOAD_KEY}\":\"")?;
            let count = transcode_facts(facts, JsonStringEscape(&mut *file))?;
            file.write_all(b"\"}")?;
            Ok(count)
        })?;
        files.push(path);
    }
    if matches!(layout, Layout::Both | Layout::Plain) {
        let path = dir.join(format!("{prefix}{host}"));
        count = write_atomically(&path, |file| transcode_facts(facts, file))?;
        files.push(path);
    }
    Ok(Written {
        host: host.to_owned(),
        files,
        facts: count,
    })
}

/// Copies the facts object into `out` as compact JSON, the gathered marker first, entry by entry;
/// returns how many facts it wrote.
fn transcode_facts<W: Write>(facts: &[u8], out: W) -> io::Result<usize> {
    let mut serializer = serde_json::Serializer::new(out);
    let mut document = serde_json::Deserializer::from_slice(facts);
    let count = document
        .deserialize_map(Facts {
            serializer: &mut serializer,
        })
        .and_then(|count| document.end().map(|()| count))
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, not_facts(&e)))?;
    Ok(count)
}

/// Visits the facts object, writing each entry as it is read.
struct Facts<'s, W: Write> {
    serializer: &'s mut serde_json::Serializer<W>,
}

impl<'de, W: Write> Visitor<'de> for Facts<'_, W> {
    type Value = usize;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of facts")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<usize, A::Error> {
        let mut out = self
            .serializer
            .serialize_map(None)
            .map_err(de::Error::custom)?;
        out.serialize_entry(GATHERED_KEY, &true)
            .map_err(de::Error::custom)?;
        let mut count = 1;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == GATHERED_KEY {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            map.next_value_seed(Entry {
                out: &mut out,
                key: &key,
            })?;
            count += 1;
        }
        SerializeMap::end(out).map_err(de::Error::custom)?;
        Ok(count)
    }
}

/// One fact's value, transcoded into the output map under its key.
struct Entry<'a, M> {
    out: &'a mut M,
    key: &'a str,
}

impl<'de, M: SerializeMap> DeserializeSeed<'de> for Entry<'_, M> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, value: D) -> Result<(), D::Error> {
        self.out
            .serialize_entry(self.key, &serde_transcode::Transcoder::new(value))
            .map_err(de::Error::custom)
    }
}

/// Writes what it is given as the inside of a JSON string: quotes, backslashes and control
/// characters escaped (the facts' own JSON, compact, has no raw control characters, but the
/// escape does not rely on it).
struct JsonStringEscape<W>(W);

impl<W: Write> Write for JsonStringEscape<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let mut plain = 0;
        for (i, &b) in bytes.iter().enumerate() {
            let escaped: Option<&[u8]> = match b {
                b'"' => Some(b"\\\""),
                b'\\' => Some(b"\\\\"),
                b'\n' => Some(b"\\n"),
                b'\r' => Some(b"\\r"),
                b'\t' => Some(b"\\t"),
                _ => None,
            };
            if escaped.is_none() && b >= 0x20 {
                continue;
            }
            self.0.write_all(&bytes[plain..i])?;
            match escaped {
                Some(escape) => self.0.write_all(escape)?,
                None => write!(self.0, "\\u{:04x}", b)?,
            }
            plain = i + 1;
        }
        self.0.write_all(&bytes[plain..])?;
        Ok(bytes.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// An inventory name becomes a file name: it must stay one.
fn check_host_name(host: &str) -> anyhow::Result<()> {
    if host.is_empty() || host == "." || host == ".." || host.contains('/') || host.contains('\0') {
        bail!("{host:?} cannot be a cache file name (empty, `.`, `..`, or containing `/` or NUL)");
    }
    Ok(())
}

/// Writes a file through `fill` into a temporary file next to `path` and renames it into place,
/// so Ansible never reads half a file; mode 0644 as Ansible's own cache files.
fn write_atomically<T>(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<T>,
) -> anyhow::Result<T> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let temporary = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = BufWriter::new(File::create(&temporary)?);
        let filled = fill(&mut file)?;
        let file = file.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        std::fs::rename(&temporary, path)?;
        Ok::<_, io::Error>(filled)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result.with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn read(path: PathBuf) -> Value {
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    #[test]
    fn writes_both_layouts_with_the_gathered_marker() {
        let dir = tempfile::tempdir().unwrap();
        let facts = br#"{"ansible_hostname": "web1", "module_setup": true,
            "_ansible_facts_gathered": false, "odd": "a \"quote\", a \\ and a \n\u0001"}"#;
        let done = write_host(dir.path(), "", "web1", facts, Layout::Both).unwrap();
        assert_eq!(done.facts, 4);
        let wrapped = read(dir.path().join("s1_web1"));
        let inner: Value = serde_json::from_str(wrapped["__payload__"].as_str().unwrap()).unwrap();
        assert_eq!(inner["ansible_hostname"], "web1");
        assert_eq!(inner["_ansible_facts_gathered"], true);
        assert_eq!(inner["odd"], "a \"quote\", a \\ and a \n\u{1}");
        assert_eq!(inner.as_object().unwrap().len(), 4);
        assert_eq!(read(dir.path().join("web1")), inner);
    }

    #[test]
    fn finds_the_node_name() {
        assert_eq!(
            node_name(br#"{"a": [1, {"ansible_nodename": "no"}], "ansible_nodename": "web1"}"#),
            Ok(Some("web1".to_owned()))
        );
        assert_eq!(node_name(br#"{"ansible_nodename": 7}"#), Ok(None));
    }

    #[test]
    fn refuses_names_and_documents_that_are_not_facts() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["", "..", "a/b"] {
            assert!(write_host(dir.path(), "", bad, b"{}", Layout::Plain).is_err());
        }
        for (bad, why) in [
            (&b"[1, 2]"[..], "not a JSON object of facts"),
            (b"{truncated", "not valid JSON"),
            (b"{} {}", "not valid JSON"),
        ] {
            assert!(node_name(bad).unwrap_err().contains(why));
            let error = write_host(dir.path(), "", "h", bad, Layout::Both).unwrap_err();
            assert!(format!("{error:#}").contains(why), "{error:#}");
        }
        // Nothing half-written is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}

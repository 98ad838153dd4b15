//! What `factbuoy inspect` answers about a bundle, each in one streaming pass of
//! [`factbuoy_bundle::reader::Bundle::walk`]: whether every file matches `meta/index.json` ([`verify`]),
//! the run at a glance ([`summary`]), a node's facts ([`facts`]) and one path into every node's
//! facts ([`query`]). docs/inspect.md describes them for users.

use std::collections::{BTreeMap, HashMap};

use factbuoy_protocol::types::StatusDocument;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use factbuoy_bundle::layout;
use factbuoy_bundle::reader::{Bundle, MAX_INDEX_BYTES, MAX_META_BYTES, ReadError, safe_path};

/// The most of one facts document read into memory.
pub use crate::ansible_cache::MAX_FACTS_BYTES;

/// The plugins whose results are facts, and the artifact that holds them (docs/setup.md,
/// docs/host-facts.md).
pub const FACT_SOURCES: [(&str, &str); 2] = [
    ("setup", "ansible_facts.json"),
    ("host-facts", "host-facts.json"),
];

/// One problem [`verify`] found, and the entry it is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The entry's path (or the bundle's, for a problem of the whole archive).
    pub entry: String,
    /// What is wrong with it.
    pub problem: String,
}

/// What [`verify`] found.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    /// The regular files read.
    pub files: u64,
    /// Their content's bytes.
    pub bytes: u64,
    /// The entries `meta/index.json` lists.
    pub indexed: u64,
    /// The `.tar.gz` file's size and sha-256 (none for a folder), to compare with `tar_info`.
    pub bundle_size: Option<u64>,
    /// See `bundle_size`.
    pub bundle_sha256: Option<String>,
    /// Everything wrong; empty when the bundle is whole.
    pub problems: Vec<Problem>,
}

#[derive(Deserialize)]
struct IndexEntry {
    path: String,
    size: u64,
    sha256: String,
}

/// Checks every file of `bundle` against `meta/index.json` (size and sha-256, streamed), and
/// lists files present but not indexed, indexed but missing, and every refused entry. When
/// `expected_sha256` is given, the `.tar.gz` file's own digest is checked against it too.
pub fn verify(bundle: &Bundle, expected_sha256: Option<&str>) -> Verification {
    let mut problems = Vec::new();
    // Names are needed for "present but not indexed"; digests are kept raw (32 bytes, not 88).
    let mut found: HashMap<String, (u64, [u8; 32])> = HashMap::new();
    let mut index: Option<Vec<IndexEntry>> = None;
    let (mut files, mut bytes) = (0, 0);
    let walked = bundle.walk_and_digest(|visited| {
        let entry = match visited {
            Ok(entry) => entry,
            Err(refused) => {
                problems.push(Problem {
                    entry: refused.entry.clone(),
                    problem: refused.to_string(),
                });
                return Ok(());
            }
        };
        files += 1;
        if entry.path() == layout::INDEX {
            bytes += entry.size();
            match entry.read_json(MAX_INDEX_BYTES) {
                Ok(read) => index = Some(read),
                Err(e @ (ReadError::Read { .. } | ReadError::Corrupt { .. })) => return Err(e),
                Err(e) => problems.push(Problem {
                    entry: layout::INDEX.into(),
                    problem: e.to_string(),
                }),
            }
            return Ok(());
        }
        let (size, sha256) = entry.digest()?;
        bytes += size;
        found.insert(entry.path().to_owned(), (size, sha256));
        Ok(())
    });
    let (mut bundle_size, mut bundle_sha256) = (None, None);
    let whole = match walked {
        Ok(digest) => {
            if let Some((size, sha256)) = digest {
                if let Some(expected) = expected_sha256
                    && !expected.eq_ignore_ascii_case(&sha256)
                {
                    problems.push(Problem {
                        entry: bundle.path().display().to_string(),
                        problem: format!(
                            "the bundle's sha-256 is {sha256}, not the {expected} expected"
                        ),
                    });
                }
                bundle_size = Some(size);
                bundle_sha256 = Some(sha256);
            }
            true
        }
        Err(e) => {
            problems.push(Problem {
                entry: e.entry().to_owned(),
                problem: e.to_string(),
            });
            false
        }
    };
    let indexed = index.as_ref().map_or(0, |i| i.len() as u64);
    match index {
        None if whole => problems.push(Problem {
            entry: layout::INDEX.into(),
            problem: "no usable index: the bundle's files cannot be checked".into(),
        }),
        None => {}
        Some(index) => {
            let mut listed = std::collections::HashSet::new();
            for item in index {
                if safe_path(&item.path).ok().as_deref() != Some(item.path.as_str()) {
                    problems.push(Problem {
                        entry: item.path.clone(),
                        problem: "meta/index.json lists a path no bundle entry can have".into(),
                    });
                    continue;
                }
                if !listed.insert(item.path.clone()) {
                    problems.push(Problem {
                        entry: item.path.clone(),
                        problem: "meta/index.json lists it twice".into(),
                    });
                    continue;
                }
                match found.get(&item.path) {
                    // Past a corrupt stretch the rest was never reached: not "missing".
                    None if !whole => {}
                    None => problems.push(Problem {
                        entry: item.path.clone(),
                        problem: "indexed but missing from the bundle".into(),
                    }),
                    Some((size, _)) if *size != item.size => problems.push(Problem {
                        entry: item.path.clone(),
                        problem: format!("{size} bytes, but meta/index.json says {}", item.size),
                    }),
                    Some((_, sha256))
                        if !hex::encode(sha256).eq_ignore_ascii_case(&item.sha256) =>
                    {
                        problems.push(Problem {
                            entry: item.path.clone(),
                            problem: format!(
                                "sha-256 {}, but meta/index.json says {}",
                                hex::encode(sha256),
                                item.sha256
                            ),
                        })
                    }
                    Some(_) => {}
                }
            }
            let mut unlisted: Vec<&String> =
                found.keys().filter(|p| !listed.contains(*p)).collect();
            unlisted.sort();
            for path in unlisted {
                problems.push(Problem {
                    entry: path.clone(),
                    problem: "present but not in meta/index.json".into(),
                });
            }
        }
    }
    Verification {
        files,
        bytes,
        indexed,
        bundle_size,
        bundle_sha256,
        problems,
    }
}

/// The run as `meta/run.json` and `meta/status.json` tell it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunSummary {
    /// The run's id.
    pub run_id: String,
    /// Its final status (`complete` or `failed`).
    pub status: String,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// When it was created, RFC 3339 UTC.
    pub created: Option<String>,
    /// The latest heartbeat or progress any node sent, RFC 3339 UTC.
    pub last_activity: Option<String>,
    /// The factbuoy version that ran it.
    pub factbuoy_version: Option<String>,
    /// Each plugin's name and version.
    pub plugins: Vec<PluginVersion>,
    /// The nodes, `global` included when a plugin ran once per run.
    pub nodes: Vec<String>,
}

/// A plugin of the run and its version.
#[derive(Debug, Clone, Serialize)]
pub struct PluginVersion {
    /// The plugin's name.
    pub name: String,
    /// Its version, from its definition.
    pub version: Option<String>,
}

/// One (plugin, node) pair's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The plugin.
    pub plugin: String,
    /// The node, or `global`.
    pub node: String,
    /// The pair's status (`complete`, `timeout`, ...).
    pub status: String,
    /// `passed` or `failed`, once a result was committed.
    pub result_status: Option<String>,
}

/// A failed pair and why, from its `error.json`.
#[derive(Debug, Clone, Serialize)]
pub struct PairError {
    /// The plugin.
    pub plugin: String,
    /// The node, or `global`.
    pub node: String,
    /// The whole error message.
    pub error: String,
}

/// Where the bundle's bytes are.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Sizes {
    /// The `.tar.gz` file's size (none for a folder).
    pub bundle_bytes: Option<u64>,
    /// The regular files.
    pub files: u64,
    /// Their content's bytes, uncompressed.
    pub content_bytes: u64,
    /// Content bytes under `plugins/<plugin>/`, by plugin name.
    pub by_plugin: Vec<PluginBytes>,
    /// Content bytes of each node's results and errors, by node name.
    pub by_node: Vec<NodeBytes>,
}

/// The bytes of one plugin's results and errors.
#[derive(Debug, Clone, Serialize)]
pub struct PluginBytes {
    /// The plugin.
    pub plugin: String,
    /// Content bytes.
    pub bytes: u64,
}

/// The bytes of one node's results and errors.
#[derive(Debug, Clone, Serialize)]
pub struct NodeBytes {
    /// The node, or `global`.
    pub node: String,
    /// Content bytes.
    pub bytes: u64,
}

/// What [`summary`] returns.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The run.
    pub run: RunSummary,
    /// Every (plugin, node) pair, in the status document's order.
    pub results: Vec<Outcome>,
    /// The failed pairs' errors.
    pub errors: Vec<PairError>,
    /// Sizes.
    pub sizes: Sizes,
}

#[derive(Deserialize)]
struct ErrorFile {
    error: String,
}

/// `plugins/<plugin>/<results|errors>/<node>/<rest>` split into its parts.
pub(crate) fn result_parts(path: &str) -> Option<(&str, &str, &str, &str)> {
    let rest = path.strip_prefix("plugins/")?;
    let (plugin, rest) = rest.split_once('/')?;
    let (kind, rest) = rest.split_once('/')?;
    let (node, file) = rest.split_once('/')?;
    Some((plugin, kind, node, file))
}

/// The run, the nodes × plugins outcomes, the errors with their messages, and sizes.
pub fn summary(bundle: &Bundle) -> Result<Summary, ReadError> {
    let mut run: Option<Value> = None;
    let mut status: Option<StatusDocument> = None;
    let mut errors = Vec::new();
    let mut sizes = Sizes::default();
    let mut by_plugin: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_node: BTreeMap<String, u64> = BTreeMap::new();
    bundle.walk(|visited| {
        let entry = visited.map_err(ReadError::Refused)?;
        let path = entry.path().to_owned();
        sizes.files += 1;
        sizes.content_bytes += entry.size();
        if let Some(rest) = path.strip_prefix("plugins/")
            && let Some((plugin, _)) = rest.split_once('/')
        {
            *by_plugin.entry(plugin.to_owned()).or_default() += entry.size();
        }
        if path == layout::RUN {
            run = Some(entry.read_json(MAX_META_BYTES)?);
        } else if path == layout::STATUS {
            status = Some(entry.read_json(MAX_META_BYTES)?);
        } else if let Some((plugin, kind, node, file)) = result_parts(&path) {
            *by_node.entry(node.to_owned()).or_default() += entry.size();
            if kind == "errors" && file == layout::ERROR_FILE {
                let error: ErrorFile = entry.read_json(MAX_META_BYTES)?;
                errors.push(PairError {
                    plugin: plugin.to_owned(),
                    node: node.to_owned(),
                    error: error.error,
                });
            }
        }
        Ok(())
    })?;
    sizes.by_plugin = by_plugin
        .into_iter()
        .map(|(plugin, bytes)| PluginBytes { plugin, bytes })
        .collect();
    sizes.by_node = by_node
        .into_iter()
        .map(|(node, bytes)| NodeBytes { node, bytes })
        .collect();
    if !bundle.is_folder() {
        sizes.bundle_bytes = std::fs::metadata(bundle.path()).ok().map(|m| m.len());
    }
    let status = status.ok_or_else(|| missing(bundle, layout::STATUS))?;
    let run = run.ok_or_else(|| missing(bundle, layout::RUN))?;
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let nodes = nodes_of(&status);
    let last_activity = status
        .plugins
        .iter()
        .flat_map(|p| {
            [
                p.last_heartbeat.clone(),
                p.progress.as_ref().map(|p| p.timestamp.clone()),
            ]
        })
        .flatten()
        .max();
    let plugins = run["plugins"]
        .as_array()
        .map(|plugins| {
            plugins
                .iter()
                .map(|p| PluginVersion {
                    name: text(&p["name"]).unwrap_or_default(),
                    version: text(&p["definition"]["version"]),
                })
                .collect()
        })
        .unwrap_or_default();
    let results = status
        .plugins
        .iter()
        .map(|p| Outcome {
            plugin: p.plugin.clone(),
            node: p.node.clone(),
            status: wire(&p.status),
            result_status: p.result_status.as_ref().map(wire),
        })
        .collect();
    errors.sort_by(|a, b| (&a.plugin, &a.node).cmp(&(&b.plugin, &b.node)));
    Ok(Summary {
        run: RunSummary {
            run_id: status.run_id.clone(),
            status: wire(&status.status),
            error: status.error.clone(),
            created: text(&run["created"]),
            last_activity,
            factbuoy_version: text(&run["factbuoy_version"]),
            plugins,
            nodes,
        },
        results,
        errors,
        sizes,
    })
}

pub(crate) fn missing(bundle: &Bundle, entry: &str) -> ReadError {
    ReadError::Read {
        entry: entry.into(),
        cause: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "{} has no {entry}: is it a factbuoy bundle?",
                bundle.path().display()
            ),
        ),
    }
}

/// The nodes of a run, in the order its status document first names them.
pub(crate) fn nodes_of(status: &StatusDocument) -> Vec<String> {
    let mut nodes: Vec<String> = Vec::new();
    for pair in &status.plugins {
        if !nodes.contains(&pair.node) {
            nodes.push(pair.node.clone());
        }
    }
    nodes
}

/// An enum's wire spelling (`post-processing`).
pub(crate) fn wire(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(text)) => text,
        _ => String::new(),
    }
}

/// Calls `found(node, plugin, facts)` for each facts document of the bundle as it streams
/// past (one in memory at a time), for the nodes and plugins `wanted` accepts.
pub fn each_facts(
    bundle: &Bundle,
    wanted: impl Fn(&str, &str) -> bool,
    mut found: impl FnMut(&str, &str, Value),
) -> Result<(), ReadError> {
    bundle.walk(|visited| {
        let entry = visited.map_err(ReadError::Refused)?;
        let path = entry.path().to_owned();
        let Some((plugin, "results", node, file)) = result_parts(&path) else {
            return Ok(());
        };
        let is_facts = FACT_SOURCES
            .iter()
            .any(|(p, artifact)| *p == plugin && *artifact == file);
        if is_facts && wanted(node, plugin) {
            let facts: Value = entry.read_json(MAX_FACTS_BYTES)?;
            found(node, plugin, facts);
        }
        Ok(())
    })
}

/// A bundle's `meta/run.json` (when it has one) and `meta/status.json`.
pub(crate) struct RunDocuments {
    pub run: Option<Value>,
    pub status: StatusDocument,
}

/// Reads the run's documents and hands every facts document to `found(node, source, facts)`
/// (`source` is an index into [`FACT_SOURCES`]) as it streams past, in one pass. The first
/// error `found` returns ends the walk and is returned.
pub(crate) fn run_and_facts<E: From<ReadError>>(
    bundle: &Bundle,
    mut found: impl FnMut(&str, usize, Value) -> Result<(), E>,
) -> Result<RunDocuments, E> {
    let mut run: Option<Value> = None;
    let mut status: Option<StatusDocument> = None;
    let mut stopped: Option<E> = None;
    let walked = bundle.walk(|visited| {
        let entry = visited.map_err(ReadError::Refused)?;
        let path = entry.path().to_owned();
        if path == layout::RUN {
            run = Some(entry.read_json(MAX_META_BYTES)?);
        } else if path == layout::STATUS {
            status = Some(entry.read_json(MAX_META_BYTES)?);
        } else if let Some((plugin, "results", node, file)) = result_parts(&path)
            && let Some(source) = FACT_SOURCES
                .iter()
                .position(|(p, artifact)| *p == plugin && *artifact == file)
        {
            let facts: Value = entry.read_json(MAX_FACTS_BYTES)?;
            if let Err(e) = found(node, source, facts) {
                stopped = Some(e);
                // A walk ends on an error of its own kind; `stopped` is what is returned.
                return Err(ReadError::Read {
                    entry: path,
                    cause: std::io::Error::other("stopped"),
                });
            }
        }
        Ok(())
    });
    if let Some(e) = stopped {
        return Err(e);
    }
    walked?;
    let status = status.ok_or_else(|| missing(bundle, layout::STATUS))?;
    Ok(RunDocuments { run, status })
}

/// One plugin's facts document.
#[derive(Debug, Clone, Serialize)]
pub struct PluginFacts {
    /// `setup` or `host-facts`.
    pub plugin: String,
    /// The document, as the plugin wrote it.
    pub facts: Value,
}

/// `node`'s facts, from each [`FACT_SOURCES`] plugin (only `plugin`'s when given), by plugin
/// name. Empty when the bundle has none for the node.
pub fn facts(
    bundle: &Bundle,
    node: &str,
    plugin: Option<&str>,
) -> Result<Vec<PluginFacts>, ReadError> {
    let mut facts = Vec::new();
    each_facts(
        bundle,
        |n, p| n == node && plugin.is_none_or(|wanted| wanted == p),
        |_, p, document| {
            facts.push(PluginFacts {
                plugin: p.to_owned(),
                facts: document,
            });
        },
    )?;
    facts.sort_by(|a, b| a.plugin.cmp(&b.plugin));
    Ok(facts)
}

/// A path into the facts, as [`FactPath::parse`] reads it.
#[derive(Debug, Clone)]
pub struct FactPath {
    given: String,
    written: String,
    path: serde_json_path::JsonPath,
}

/// A path [`FactPath::parse`] cannot read.
#[derive(Debug, thiserror::Error)]
#[error(
    "{path:?} is not a path into the facts ({cause}); write it as a.b[*].c, or as RFC 9535 JSONPath starting with $"
)]
pub struct PathError {
    path: String,
    cause: serde_json_path::ParseError,
}

impl FactPath {
    /// Reads `a.b[0].c`, `a.b[*].c` (the form the issue asks for) as the RFC 9535 JSONPath
    /// `$.a.b[0].c`; a path starting with `$` is taken as JSONPath as it is
    /// (`$..mount`, `$.ansible_mounts[?@.size_total > 1000000000].mount`).
    pub fn parse(written: &str) -> Result<FactPath, PathError> {
        let full = if written.starts_with('$') {
            written.to_owned()
        } else if written.starts_with('[') {
            format!("${written}")
        } else {
            format!("$.{written}")
        };
        let path = serde_json_path::JsonPath::parse(&full).map_err(|cause| PathError {
            path: written.into(),
            cause,
        })?;
        Ok(FactPath {
            given: written.to_owned(),
            written: full,
            path,
        })
    }

    /// The path as it was given.
    pub fn given(&self) -> &str {
        &self.given
    }

    /// The path as JSONPath.
    pub fn as_jsonpath(&self) -> &str {
        &self.written
    }

    /// The values at this path in `facts`, in document order.
    pub fn values(&self, facts: &Value) -> Vec<Value> {
        self.path.query(facts).all().into_iter().cloned().collect()
    }
}

/// One node's answer to [`query`]: the values found in each plugin's facts.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    /// The node.
    pub node: String,
    /// The values at the path in each plugin's facts, by plugin name.
    pub plugins: Vec<PluginValues>,
}

/// The values at a path in one plugin's facts.
#[derive(Debug, Clone, Serialize)]
pub struct PluginValues {
    /// `setup` or `host-facts`.
    pub plugin: String,
    /// The values, in document order; empty when the facts lack the path.
    pub values: Vec<Value>,
}

/// The values at `path` in every node's facts, by node name. Only the answers are kept: each
/// facts document is dropped once asked.
pub fn query(bundle: &Bundle, path: &FactPath) -> Result<Vec<Answer>, ReadError> {
    let mut answers: BTreeMap<String, BTreeMap<String, Vec<Value>>> = BTreeMap::new();
    each_facts(
        bundle,
        |_, _| true,
        |node, plugin, facts| {
            answers
                .entry(node.to_owned())
                .or_default()
                .insert(plugin.to_owned(), path.values(&facts));
        },
    )?;
    Ok(answers
        .into_iter()
        .map(|(node, values)| Answer {
            node,
            plugins: values
                .into_iter()
                .map(|(plugin, values)| PluginValues { plugin, values })
                .collect(),
        })
        .collect())
}

/// Every leaf of `facts` with its path in the form [`FactPath::parse`] takes: `a.b[0].c`, and
/// `a['/dev/x']` for a key that is not a plain name. An empty object or array is a leaf.
pub fn leaves(facts: &Value) -> Vec<(String, &Value)> {
    let mut found = Vec::new();
    flatten(String::new(), facts, &mut found);
    found
}

fn flatten<'v>(path: String, value: &'v Value, leaves: &mut Vec<(String, &'v Value)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, value) in map {
                let plain = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                    && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                let next = match (plain, path.is_empty()) {
                    (true, true) => key.clone(),
                    (true, false) => format!("{path}.{key}"),
                    (false, _) => {
                        let quoted = key.replace('\\', "\\\\").replace('\'', "\\'");
                        format!("{path}['{quoted}']")
                    }
                };
                flatten(next, value, leaves);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, value) in items.iter().enumerate() {
                flatten(format!("{path}[{i}]"), value, leaves);
            }
        }
        leaf => leaves.push((path, leaf)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simple_form_is_read_as_jsonpath() {
        let facts = serde_json::json!({
            "cpu": {"cores": 4},
            "ansible_mounts": [{"mount": "/"}, {"mount": "/boot"}],
        });
        let values = |p: &str| FactPath::parse(p).unwrap().values(&facts);
        assert_eq!(values("cpu.cores"), vec![Value::from(4)]);
        assert_eq!(
            values("ansible_mounts[*].mount"),
            vec![Value::from("/"), Value::from("/boot")]
        );
        assert_eq!(values("$..mount").len(), 2);
        assert!(values("nothing.here").is_empty());
        assert!(FactPath::parse("a..[").is_err());
    }
}

//! The facts in a bundle: every artifact a plugin declares a facts document (`setup`'s and
//! `host-facts`' as any other's, [`crate::declared`]), a node's facts ([`facts`]), one path
//! into every node's facts ([`query`], with paths read by [`FactPath`]), and the leaves of a
//! facts document ([`leaves`]) that `diff`, `sql` and `export` compare and tabulate. Each facts
//! document is read as it streams past in [`Bundle::walk`], one in memory at a time.

use std::collections::BTreeMap;
use std::io::{BufRead, Read};
use std::marker::PhantomData;

use factbuoy_bundle::layout::{self, result_parts};
use factbuoy_bundle::reader::{Bundle, Entry, MAX_META_BYTES, ReadError, Visited};
use factbuoy_protocol::artifacts::ListKeys;
use factbuoy_protocol::types::StatusDocument;
use serde::Serialize;
use serde_json::Value;

use crate::declared::Declared;
use crate::meta::missing;
use crate::raw::only_field;

/// The most of one facts document read into memory; real ones are tens of kilobytes.
pub const MAX_FACTS_BYTES: u64 = 64 * 1024 * 1024;

/// Calls `found(node, source, list_keys, facts)` for each facts document of the bundle as it
/// streams past (one in memory at a time), for the nodes and sources `wanted` accepts. A
/// source is the plugin, or `plugin/artifact` when it declares several facts documents.
pub(crate) fn each_facts(
    bundle: &Bundle,
    wanted: impl Fn(&str, &str) -> bool,
    found: impl FnMut(&str, &str, &[ListKeys], Value),
) -> Result<(), ReadError> {
    each_facts_read(bundle, wanted, read_facts, found)
}

/// As [`each_facts`], each document read by `read`.
fn each_facts_read<F>(
    bundle: &Bundle,
    wanted: impl Fn(&str, &str) -> bool,
    read: impl Fn(&mut Entry<'_>) -> Result<F, ReadError>,
    mut found: impl FnMut(&str, &str, &[ListKeys], F),
) -> Result<(), ReadError> {
    let mut declared = Declared::default();
    bundle.walk(|visited| {
        let entry = visited.map_err(ReadError::Refused)?;
        let path = entry.path().to_owned();
        if let Some(plugin) = Declared::definition_of(&path) {
            declared.learn(plugin, &entry.read_json(MAX_META_BYTES)?);
        } else if let Some((plugin, "results", node, file)) = result_parts(&path)
            && let Some((source, list_keys)) = declared.facts_source(plugin, file)
            && wanted(node, &source)
        {
            found(node, &source, list_keys, read(entry)?);
        }
        Ok(())
    })
}

/// The longest row of a table artifact read: real ones are hundreds of bytes.
pub const MAX_ROW_BYTES: u64 = 1024 * 1024;

/// Calls `row` with each row of a table artifact (JSON Lines: one object per line, blank lines
/// passed over) as it streams past, one in memory at a time. A line longer than
/// [`MAX_ROW_BYTES`] or one that is not a JSON object is an error naming the entry and the line;
/// the first error `row` returns ends the reading and is returned.
pub(crate) fn each_row<E: From<ReadError>>(
    rows: &mut Entry<'_>,
    mut row: impl FnMut(serde_json::Map<String, Value>) -> Result<(), E>,
) -> Result<(), E> {
    let entry = rows.path().to_owned();
    let reader = std::io::BufReader::with_capacity(ROW_BUFFER_BYTES, rows);
    each_line(&entry, reader, |number, line| {
        row(parse_row(&entry, number, line, PhantomData)?)
    })
}

/// How much of a table artifact is read at once: most lines are handed over from this buffer
/// without a copy.
pub(crate) const ROW_BUFFER_BYTES: usize = 256 * 1024;

/// Line `number` of the table artifact `entry` read by `seed` (`PhantomData::<T>` reads a `T`),
/// or an error naming the entry and the line.
pub(crate) fn parse_row<'a, S: serde::de::DeserializeSeed<'a>>(
    entry: &str,
    number: u64,
    line: &'a [u8],
    seed: S,
) -> Result<S::Value, ReadError> {
    fn whole<'de, R: serde_json::de::Read<'de>, S: serde::de::DeserializeSeed<'de>>(
        mut json: serde_json::Deserializer<R>,
        seed: S,
    ) -> serde_json::Result<S::Value> {
        let read = seed.deserialize(&mut json)?;
        json.end()?;
        Ok(read)
    }
    // The line checked as UTF-8 at once is read faster than each of its strings checked apart;
    // a line that is not UTF-8 is read as bytes for serde_json's error, which says where.
    match std::str::from_utf8(line) {
        Ok(text) => whole(serde_json::Deserializer::from_str(text), seed),
        Err(_) => whole(serde_json::Deserializer::from_slice(line), seed),
    }
    .map_err(|cause| ReadError::InvalidJson {
        entry: format!("{entry} line {number}"),
        cause,
    })
}

/// Calls `line(number, bytes)` with each line of the table artifact `entry` read from `rows`
/// (its newline included) but blank ones, most straight from `rows`' buffer. A line longer
/// than [`MAX_ROW_BYTES`] is an error naming
/// the entry and the line; the first error `line` returns ends the reading and is returned.
pub(crate) fn each_line<E: From<ReadError>>(
    entry: &str,
    mut rows: impl BufRead,
    mut line: impl FnMut(u64, &[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let read_error = |cause| ReadError::Read {
        entry: entry.to_owned(),
        cause,
    };
    // A line that is not whole in `rows`' buffer is gathered here.
    let mut long = Vec::new();
    for number in 1.. {
        let buffer = rows.fill_buf().map_err(read_error)?;
        if buffer.is_empty() {
            break;
        }
        let whole = memchr::memchr(b'\n', buffer)
            // The limit counts the newline.
            .filter(|&end| (end as u64) < MAX_ROW_BYTES)
            .map(|end| end + 1);
        let text = match whole {
            Some(taken) => &buffer[..taken],
            None => {
                long.clear();
                (&mut rows)
                    .take(MAX_ROW_BYTES + 1)
                    .read_until(b'\n', &mut long)
                    .map_err(read_error)?;
                &long[..]
            }
        };
        if text.len() as u64 > MAX_ROW_BYTES {
            return Err(ReadError::TooLarge {
                entry: format!("{entry} line {number}"),
                size: text.len() as u64,
                limit: MAX_ROW_BYTES,
            }
            .into());
        }
        if !text.trim_ascii().is_empty() {
            line(number, text)?;
        }
        if let Some(taken) = whole {
            rows.consume(taken);
        }
    }
    Ok(())
}

/// A bundle's `meta/run.json` (when it has one) and `meta/status.json`.
pub(crate) struct RunDocuments {
    pub run: Option<Value>,
    pub status: StatusDocument,
}

/// What [`run_and_facts`] hands over as the walk passes it.
pub(crate) enum Found<'f, 'e, F = Value> {
    /// A node's facts document, from `source` (as [`each_facts`] names sources): parsed, or
    /// its bytes for [`run_and_raw_facts_digesting`].
    Facts {
        node: &'f str,
        source: &'f str,
        list_keys: &'f [ListKeys],
        facts: F,
    },
    /// A node's table artifact, to be read row by row ([`each_row`]) if wanted; `row_keys`
    /// are the columns that identify a row (none: nothing does).
    Table {
        node: &'f str,
        plugin: &'f str,
        artifact: &'f str,
        row_keys: &'f [String],
        rows: &'f mut Entry<'e>,
    },
}

/// Reads the run's documents and hands every facts document and table to `found` as it
/// streams past, in one pass, with the run's id when the status document came before it (it
/// does in every bundle factbuoy writes). The first error `found` returns ends the walk and is
/// returned.
pub(crate) fn run_and_facts<E: From<ReadError>>(
    bundle: &Bundle,
    found: impl FnMut(Found<'_, '_>, Option<&str>) -> Result<(), E>,
) -> Result<RunDocuments, E> {
    walk_run(bundle, Wanted::FACTS, read_facts, found).map(|(documents, _)| documents)
}

fn read_facts(entry: &mut Entry<'_>) -> Result<Value, ReadError> {
    entry.read_json(MAX_FACTS_BYTES)
}

/// As [`run_and_facts`], each facts document handed over as its entry's path and its bytes,
/// unchecked (at most [`MAX_FACTS_BYTES`]): the caller checks them as [`run_and_facts`] parses
/// them, and refuses a document with the error parsing it whole gives
/// ([`ReadError::InvalidJson`] naming the entry), so that bytes it has seen before need not be
/// checked again.
pub(crate) fn run_and_unchecked_facts<E: From<ReadError>>(
    bundle: &Bundle,
    found: impl FnMut(Found<'_, '_, (String, Vec<u8>)>, Option<&str>) -> Result<(), E>,
) -> Result<RunDocuments, E> {
    let read = |entry: &mut Entry<'_>| Ok((entry.path().to_owned(), read_bytes(entry)?));
    walk_run(bundle, Wanted::FACTS, read, found).map(|(documents, _)| documents)
}

/// As [`run_and_facts`], but only tables are handed over: facts documents are passed over
/// unparsed.
pub(crate) fn run_and_tables<E: From<ReadError>>(
    bundle: &Bundle,
    found: impl FnMut(Found<'_, '_>, Option<&str>) -> Result<(), E>,
) -> Result<RunDocuments, E> {
    let wanted = Wanted {
        facts: false,
        digest: false,
    };
    walk_run(bundle, wanted, read_facts, found).map(|(documents, _)| documents)
}

/// As [`run_and_facts`], each facts document handed over as its bytes, unparsed (at most
/// [`MAX_FACTS_BYTES`]), and also the `.tar.gz`'s size and sha-256, from the same read.
pub(crate) fn run_and_raw_facts_digesting<E: From<ReadError>>(
    bundle: &Bundle,
    found: impl FnMut(Found<'_, '_, Vec<u8>>, Option<&str>) -> Result<(), E>,
) -> Result<(RunDocuments, Option<(u64, String)>), E> {
    let wanted = Wanted {
        facts: true,
        digest: true,
    };
    walk_run(bundle, wanted, read_bytes, found)
}

fn read_bytes(entry: &mut Entry<'_>) -> Result<Vec<u8>, ReadError> {
    entry.read_bytes(MAX_FACTS_BYTES)
}

/// What a walk of [`walk_run`] hands over besides tables: facts documents, the digest.
#[derive(Clone, Copy)]
struct Wanted {
    facts: bool,
    digest: bool,
}

impl Wanted {
    const FACTS: Wanted = Wanted {
        facts: true,
        digest: false,
    };
}

fn walk_run<F, E: From<ReadError>>(
    bundle: &Bundle,
    wanted: Wanted,
    read_facts: impl Fn(&mut Entry<'_>) -> Result<F, ReadError>,
    mut found: impl FnMut(Found<'_, '_, F>, Option<&str>) -> Result<(), E>,
) -> Result<(RunDocuments, Option<(u64, String)>), E> {
    let mut run: Option<Value> = None;
    let mut status: Option<StatusDocument> = None;
    let mut declared = Declared::default();
    let mut stopped: Option<E> = None;
    let visit = |visited: Visited<'_, '_>| {
        let entry = visited.map_err(ReadError::Refused)?;
        let path = entry.path().to_owned();
        if path == layout::RUN {
            run = Some(entry.read_json(MAX_META_BYTES)?);
        } else if path == layout::STATUS {
            status = Some(entry.read_json(MAX_META_BYTES)?);
        } else if let Some(plugin) = Declared::definition_of(&path) {
            declared.learn(plugin, &entry.read_json(MAX_META_BYTES)?);
        } else if let Some((plugin, "results", node, file)) = result_parts(&path) {
            let run_id = status.as_ref().map(|status| status.run_id.as_str());
            let facts_source = declared.facts_source(plugin, file).filter(|_| wanted.facts);
            let handed = if let Some((source, list_keys)) = facts_source {
                let facts = read_facts(entry)?;
                found(
                    Found::Facts {
                        node,
                        source: &source,
                        list_keys,
                        facts,
                    },
                    run_id,
                )
            } else if let Some(row_keys) = declared.table(plugin, file) {
                found(
                    Found::Table {
                        node,
                        plugin,
                        artifact: file,
                        row_keys,
                        rows: &mut *entry,
                    },
                    run_id,
                )
            } else {
                Ok(())
            };
            if let Err(e) = handed {
                stopped = Some(e);
                // A walk ends on an error of its own kind; `stopped` is what is returned.
                return Err(ReadError::Read {
                    entry: path,
                    cause: std::io::Error::other("stopped"),
                });
            }
        }
        Ok(())
    };
    let walked = if wanted.digest {
        bundle.walk_and_digest(visit)
    } else {
        bundle.walk(visit).map(|()| None)
    };
    if let Some(e) = stopped {
        return Err(e);
    }
    let digest = walked?;
    let status = status.ok_or_else(|| missing(bundle, layout::STATUS))?;
    Ok((RunDocuments { run, status }, digest))
}

/// One plugin's facts document.
#[derive(Debug, Clone, Serialize)]
pub struct PluginFacts {
    /// The plugin (`setup`, `host-facts`, any other that declares a facts document), or
    /// `plugin/artifact` when it declares several.
    pub plugin: String,
    /// The document, as the plugin wrote it.
    pub facts: Value,
}

/// `node`'s facts, from each plugin that declares a facts document (only `plugin`'s when
/// given), by plugin name. Empty when the bundle has none for the node.
pub fn facts(
    bundle: &Bundle,
    node: &str,
    plugin: Option<&str>,
) -> Result<Vec<PluginFacts>, ReadError> {
    let mut facts = Vec::new();
    each_facts(
        bundle,
        |n, p| n == node && plugin.is_none_or(|wanted| wanted == p),
        |_, p, _, document| {
            facts.push(PluginFacts {
                plugin: p.to_owned(),
                facts: document,
            });
        },
    )?;
    facts.sort_by(|a, b| a.plugin.cmp(&b.plugin));
    Ok(facts)
}

/// Whose facts a bundle holds, for a reader who named no node.
#[derive(Debug, Clone)]
pub enum OnlyNode {
    /// One node's, by plugin name, as [`facts`] gives them.
    One(String, Vec<PluginFacts>),
    /// Several nodes', named in the order they were found.
    Several(Vec<String>),
    /// No node's.
    None,
}

/// The facts of the bundle's one node with facts (only `plugin`'s when given): a one-node
/// bundle needs no node named.
pub fn only_node_facts(bundle: &Bundle, plugin: Option<&str>) -> Result<OnlyNode, ReadError> {
    let nodes = std::cell::RefCell::new(Vec::<String>::new());
    let mut facts = Vec::new();
    each_facts(
        bundle,
        |n, p| {
            if plugin.is_some_and(|wanted| wanted != p) {
                return false;
            }
            let mut nodes = nodes.borrow_mut();
            if !nodes.iter().any(|seen| seen == n) {
                nodes.push(n.to_owned());
            }
            nodes[0] == n
        },
        |_, p, _, document| {
            facts.push(PluginFacts {
                plugin: p.to_owned(),
                facts: document,
            });
        },
    )?;
    let mut nodes = nodes.into_inner();
    facts.sort_by(|a, b| a.plugin.cmp(&b.plugin));
    Ok(match nodes.len() {
        0 => OnlyNode::None,
        1 => OnlyNode::One(nodes.remove(0), facts),
        _ => OnlyNode::Several(nodes),
    })
}

/// A path into the facts, as [`FactPath::parse`] reads it.
#[derive(Debug, Clone)]
pub struct FactPath {
    given: String,
    written: String,
    path: serde_json_path::JsonPath,
    /// The top-level field every value it finds lies in, when it names one (`$.a...`, no
    /// other `$` in it: a filter may compare with another field of the document).
    field: Option<String>,
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
        // As serde_json_path writes it back, a first segment `.name` is a field's name.
        let normal = path.to_string();
        let field = normal
            .strip_prefix("$.")
            .map(|rest| &rest[..rest.find(['.', '[']).unwrap_or(rest.len())])
            .filter(|name| !name.is_empty() && *name != "*" && !normal[1..].contains('$'))
            .map(str::to_owned);
        Ok(FactPath {
            given: written.to_owned(),
            written: full,
            path,
            field,
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
    /// The plugin, as [`PluginFacts`] names it.
    pub plugin: String,
    /// The values, in document order; empty when the facts lack the path.
    pub values: Vec<Value>,
}

/// The values at `path` in every node's facts, by node name. Only the answers are kept: each
/// facts document is dropped once asked.
pub fn query(bundle: &Bundle, path: &FactPath) -> Result<Vec<Answer>, ReadError> {
    let mut answers: BTreeMap<String, BTreeMap<String, Vec<Value>>> = BTreeMap::new();
    // A path into one field: only that field of each document is parsed into a tree, the
    // rest checked as it would be parsed (a document refused whole is refused as before).
    let read = |entry: &mut Entry<'_>| match &path.field {
        Some(name) => {
            let bytes = read_bytes(entry)?;
            match only_field(&bytes, name) {
                Some(only) => Ok(only),
                None => serde_json::from_slice(&bytes).map_err(|cause| ReadError::InvalidJson {
                    entry: entry.path().to_owned(),
                    cause,
                }),
            }
        }
        None => read_facts(entry),
    };
    each_facts_read(
        bundle,
        |_, _| true,
        read,
        |node, plugin, _, facts| {
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

/// Adds every leaf of `value`, found at `path`, to `leaves` (see [`leaves`]).
pub(crate) fn flatten<'v>(path: String, value: &'v Value, leaves: &mut Vec<(String, &'v Value)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, value) in map {
                let mut next = path.clone();
                push_field(&mut next, key);
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

/// Adds the field `key` to `path`: `a.key`, or `a['/dev/x']` for a key that is not a plain
/// name.
pub(crate) fn push_field(path: &mut String, key: &str) {
    let plain = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
    } else {
        path.push_str("['");
        for c in key.chars() {
            if c == '\\' || c == '\'' {
                path.push('\\');
            }
            path.push(c);
        }
        path.push_str("']");
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
        let field = |p: &str| FactPath::parse(p).unwrap().field;
        assert_eq!(field("cpu.cores").as_deref(), Some("cpu"));
        assert_eq!(
            field("$.ansible_mounts[*].mount").as_deref(),
            Some("ansible_mounts")
        );
        for whole in ["$..mount", "$.*", "$['cpu']", "$.a[?@.b == $.c]", "$"] {
            assert_eq!(field(whole), None, "{whole}");
        }
        assert!(values("nothing.here").is_empty());
        assert!(FactPath::parse("a..[").is_err());
    }
}

//! Every node's facts, small enough for a page of thousands of nodes. The nodes of a fleet share
//! most of their facts, so the first document of each source is written whole, as its leaves
//! (the base), and every document as the leaves where it differs from that base: those set or
//! changed, and those it lacks. The differences are gzip-compressed into chunks written as
//! base64, which the page inflates with the browser's own `DecompressionStream`.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use base64::Engine as _;
use flate2::Compression;
use flate2::write::GzEncoder;
use serde::Serialize;
use serde_json::Value;

use super::embed::{group_mark, script};
use crate::facts::{flatten, leaves, push_field};

/// The uncompressed bytes of differences that make a chunk: small enough that the page inflates
/// one while the next is read, large enough that gzip sees the repeated paths of many nodes.
const CHUNK_BYTES: usize = 4 * 1024 * 1024;

/// A source's base document.
struct Base {
    facts: Value,
}

/// Writes facts documents into a page as bases and compressed differences.
pub(super) struct Packer {
    bases: HashMap<String, Base>,
    chunk: Option<GzEncoder<Vec<u8>>>,
    chunk_bytes: usize,
    /// The group of the page the documents are of, when it has several.
    group: Option<usize>,
}

/// One document as its differences from its source's base, as the page reads it.
#[derive(Serialize)]
struct Difference<'a> {
    node: &'a str,
    source: &'a str,
    /// The leaves the base lacks or has another value for, with this document's values.
    set: Vec<(&'a str, &'a Value)>,
    /// The base's leaves this document lacks.
    unset: Vec<&'a str>,
}

/// A source's base, as the page reads it.
#[derive(Serialize)]
struct BaseScript<'a> {
    source: &'a str,
    leaves: &'a [(String, &'a Value)],
}

impl Packer {
    pub(super) fn new(group: Option<usize>) -> Packer {
        Packer {
            bases: HashMap::new(),
            chunk: None,
            chunk_bytes: 0,
            group,
        }
    }

    /// Adds `node`'s document of `source`; the first of a source is its base, written at once.
    pub(super) fn add(
        &mut self,
        out: &mut impl Write,
        node: &str,
        source: &str,
        facts: &Value,
    ) -> io::Result<()> {
        if !self.bases.contains_key(source) {
            let found = leaves(facts);
            script(
                out,
                "facts-base",
                None,
                self.group,
                &BaseScript {
                    source,
                    leaves: &found,
                },
            )?;
            let base = Base {
                facts: facts.clone(),
            };
            self.bases.insert(source.to_owned(), base);
        }
        let base = &self.bases[source];
        let (mut set, mut unset) = (Vec::new(), Vec::new());
        differ(
            &mut String::new(),
            Some(&base.facts),
            Some(facts),
            &mut set,
            &mut unset,
        );
        let set: Vec<(&str, &Value)> = set
            .iter()
            .map(|(path, value)| (path.as_str(), *value))
            .collect();
        let unset: Vec<&str> = unset.iter().map(String::as_str).collect();
        let difference = Difference {
            node,
            source,
            set,
            unset,
        };
        let bytes = serde_json::to_vec(&difference)?;
        let chunk = self.chunk.get_or_insert_with(|| {
            let mut gz = GzEncoder::new(Vec::new(), Compression::default());
            // A chunk is a JSON array of differences.
            gz.write_all(b"[").expect("writing to memory");
            gz
        });
        if self.chunk_bytes > 0 {
            chunk.write_all(b",")?;
        }
        chunk.write_all(&bytes)?;
        self.chunk_bytes += bytes.len() + 1;
        if self.chunk_bytes >= CHUNK_BYTES {
            self.flush(out)?;
        }
        Ok(())
    }

    /// Writes the chunk being filled, if any.
    pub(super) fn flush(&mut self, out: &mut impl Write) -> io::Result<()> {
        let Some(mut chunk) = self.chunk.take() else {
            return Ok(());
        };
        chunk.write_all(b"]")?;
        let compressed = chunk.finish()?;
        self.chunk_bytes = 0;
        // Base64 has no `<`: nothing in it can end the element.
        writeln!(
            out,
            "<script type=\"application/octet-stream\" class=\"facts-gz\"{}>{}</script>",
            group_mark(self.group),
            base64::engine::general_purpose::STANDARD.encode(compressed)
        )
    }
}

/// Adds to `set` the leaves of `doc` that `base` lacks or has another value for, and to `unset`
/// the leaves of `base` that `doc` lacks, both found at `path` (built in place). Subtrees that
/// are equal are passed over without naming their leaves: most of a node's facts are its
/// fleet's, and naming every leaf of every node would cost most of the report's time.
fn differ<'v>(
    path: &mut String,
    base: Option<&Value>,
    doc: Option<&'v Value>,
    set: &mut Vec<(String, &'v Value)>,
    unset: &mut Vec<String>,
) {
    match (base, doc) {
        (Some(b), Some(d)) if b == d => {}
        (Some(Value::Object(b)), Some(Value::Object(d))) if !b.is_empty() && !d.is_empty() => {
            let at = path.len();
            for (key, value) in d {
                push_field(path, key);
                differ(path, b.get(key), Some(value), set, unset);
                path.truncate(at);
            }
            for (key, value) in b.iter().filter(|(key, _)| !d.contains_key(*key)) {
                push_field(path, key);
                differ(path, Some(value), None, set, unset);
                path.truncate(at);
            }
        }
        (Some(Value::Array(b)), Some(Value::Array(d))) if !b.is_empty() && !d.is_empty() => {
            let at = path.len();
            for i in 0..b.len().max(d.len()) {
                path.push_str(&format!("[{i}]"));
                differ(path, b.get(i), d.get(i), set, unset);
                path.truncate(at);
            }
        }
        _ => {
            // Different in kind here (or only on one side): the leaves of each, by path.
            let mut mine = Vec::new();
            if let Some(d) = doc {
                flatten(path.clone(), d, &mut mine);
            }
            let mut theirs = Vec::new();
            if let Some(b) = base {
                flatten(path.clone(), b, &mut theirs);
            }
            let mine_paths: HashSet<&str> = mine.iter().map(|(p, _)| p.as_str()).collect();
            let theirs_values: HashMap<&str, &Value> =
                theirs.iter().map(|(p, v)| (p.as_str(), *v)).collect();
            for (p, _) in &theirs {
                if !mine_paths.contains(p.as_str()) {
                    unset.push(p.clone());
                }
            }
            for (p, v) in mine {
                if theirs_values.get(p.as_str()) != Some(&v) {
                    set.push((p, v));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use flate2::read::GzDecoder;
    use serde_json::json;

    use super::*;

    /// The page's view of what was written: the bases and the differences.
    fn read_back(page: &str) -> (Vec<Value>, Vec<Value>) {
        let between = |class: &str| -> Vec<String> {
            let open = format!("class=\"{class}\">");
            page.split(&open)
                .skip(1)
                .map(|rest| rest[..rest.find("</script>").unwrap()].to_owned())
                .collect()
        };
        let bases = between("facts-base")
            .iter()
            .map(|text| serde_json::from_str(text).unwrap())
            .collect();
        let mut differences = Vec::new();
        for chunk in between("facts-gz") {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(chunk)
                .unwrap();
            let mut text = String::new();
            GzDecoder::new(&bytes[..])
                .read_to_string(&mut text)
                .unwrap();
            let items: Vec<Value> = serde_json::from_str(&text).unwrap();
            differences.extend(items);
        }
        (bases, differences)
    }

    #[test]
    fn a_document_is_written_as_what_differs_from_the_first_of_its_source() {
        let mut page = Vec::new();
        let mut packer = Packer::new(None);
        let first = json!({"os": "debian", "kernel": "6.1", "mounts": [{"at": "/"}]});
        let second = json!({"os": "debian", "kernel": "6.12", "extra": {"x": 1}});
        packer.add(&mut page, "n1", "setup", &first).unwrap();
        packer.add(&mut page, "n2", "setup", &second).unwrap();
        packer.flush(&mut page).unwrap();
        let (bases, differences) = read_back(&String::from_utf8(page).unwrap());
        assert_eq!(
            bases,
            [
                json!({"source": "setup", "leaves": [["kernel", "6.1"], ["mounts[0].at", "/"], ["os", "debian"]]})
            ]
        );
        assert_eq!(
            differences,
            [
                json!({"node": "n1", "source": "setup", "set": [], "unset": []}),
                json!({"node": "n2", "source": "setup", "set": [["extra.x", 1], ["kernel", "6.12"]],
                       "unset": ["mounts[0].at"]}),
            ]
        );
    }

    #[test]
    fn a_document_rebuilt_from_the_base_and_its_differences_has_exactly_its_leaves() {
        let base = json!({"a": {"b": 1, "c": [1, 2, {"d": "x"}]}, "e": {}, "f": "s", "g": [1]});
        for doc in [
            json!({"a": {"b": 1, "c": [1, 2, {"d": "x"}]}, "e": {}, "f": "s", "g": [1]}),
            json!({"a": {"b": 2, "c": [1]}, "e": {"new": true}, "g": 5}),
            json!({"a": "scalar now", "e": [], "f": {"deeper": ["s"]}, "h": null}),
            json!({}),
            json!([1, {"a": 2}]),
        ] {
            let (mut set, mut unset) = (Vec::new(), Vec::new());
            differ(
                &mut String::new(),
                Some(&base),
                Some(&doc),
                &mut set,
                &mut unset,
            );
            // The page's rebuilding (app.js, leavesOf): the base's leaves, changed or left
            // out, then those it lacks.
            let mut rebuilt: Vec<(String, Value)> = Vec::new();
            for (path, value) in leaves(&base) {
                if unset.contains(&path) {
                    continue;
                }
                match set.iter().find(|(p, _)| *p == path) {
                    Some((_, v)) => rebuilt.push((path, (*v).clone())),
                    None => rebuilt.push((path, value.clone())),
                }
            }
            for (path, value) in &set {
                if !rebuilt.iter().any(|(p, _)| p == path) {
                    rebuilt.push((path.clone(), (*value).clone()));
                }
            }
            rebuilt.sort_by(|a, b| a.0.cmp(&b.0));
            let mut expected: Vec<(String, Value)> = leaves(&doc)
                .into_iter()
                .map(|(p, v)| (p, v.clone()))
                .collect();
            expected.sort_by(|a, b| a.0.cmp(&b.0));
            assert_eq!(rebuilt, expected, "{doc}");
        }
    }

    #[test]
    fn differences_are_cut_into_chunks_each_whole() {
        let mut page = Vec::new();
        let mut packer = Packer::new(None);
        let big = "x".repeat(600 * 1024);
        for i in 0..20 {
            packer
                .add(
                    &mut page,
                    &format!("n{i}"),
                    "p",
                    &json!({"v": format!("{big}{i}")}),
                )
                .unwrap();
        }
        packer.flush(&mut page).unwrap();
        let page = String::from_utf8(page).unwrap();
        assert!(page.matches("class=\"facts-gz\"").count() >= 2);
        let (_, differences) = read_back(&page);
        let nodes: Vec<&str> = differences
            .iter()
            .map(|d| d["node"].as_str().unwrap())
            .collect();
        assert_eq!(nodes, (0..20).map(|i| format!("n{i}")).collect::<Vec<_>>());
    }
}

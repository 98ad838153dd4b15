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

use super::script;
use crate::facts::leaves;

/// The uncompressed bytes of differences that make a chunk: small enough that the page inflates
/// one while the next is read, large enough that gzip sees the repeated paths of many nodes.
const CHUNK_BYTES: usize = 4 * 1024 * 1024;

/// A source's base: its leaves' paths in order, and each one's value.
struct Base {
    order: Vec<String>,
    values: HashMap<String, Value>,
}

/// Writes facts documents into a page as bases and compressed differences.
pub(super) struct Packer {
    bases: HashMap<String, Base>,
    chunk: Option<GzEncoder<Vec<u8>>>,
    chunk_bytes: usize,
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
    pub(super) fn new() -> Packer {
        Packer {
            bases: HashMap::new(),
            chunk: None,
            chunk_bytes: 0,
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
        let found = leaves(facts);
        if !self.bases.contains_key(source) {
            script(
                out,
                "facts-base",
                None,
                &BaseScript {
                    source,
                    leaves: &found,
                },
            )?;
            let base = Base {
                order: found.iter().map(|(path, _)| path.clone()).collect(),
                values: found
                    .iter()
                    .map(|(path, value)| (path.clone(), (*value).clone()))
                    .collect(),
            };
            self.bases.insert(source.to_owned(), base);
        }
        let base = &self.bases[source];
        let set = found
            .iter()
            .filter(|(path, value)| base.values.get(path) != Some(value))
            .map(|(path, value)| (path.as_str(), *value))
            .collect();
        let has: HashSet<&str> = found.iter().map(|(path, _)| path.as_str()).collect();
        let unset = base
            .order
            .iter()
            .map(String::as_str)
            .filter(|path| !has.contains(path))
            .collect();
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
            "<script type=\"application/octet-stream\" class=\"facts-gz\">{}</script>",
            base64::engine::general_purpose::STANDARD.encode(compressed)
        )
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
        let mut packer = Packer::new();
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
    fn differences_are_cut_into_chunks_each_whole() {
        let mut page = Vec::new();
        let mut packer = Packer::new();
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

//! The JSON report of `factbuoy plugin run -o json` with each artifact's content in it, streamed
//! from the artifact's file: JSON transcoded into the report as JSON, JSON Lines (a table
//! artifact's media type) as an array of its rows, anything else as a string.
//! No artifact is ever held in memory whole, nor parsed into a tree, so a large artifact costs
//! the host a buffer, not a multiple of its size.

use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use factbuoy_protocol::artifacts::ArtifactKind;
use factbuoy_runtime::InvocationReport;

/// Bytes read from an artifact at a time.
const CHUNK_BYTES: usize = 64 << 10;

/// A run report whose artifacts' content is read from below `dir` as it is written.
pub struct JsonReport {
    fields: serde_json::Map<String, Value>,
    artifacts: Vec<(Value, PathBuf)>,
}

impl JsonReport {
    /// The report of `report`, whose artifacts are the files below `dir`.
    pub fn new(report: &InvocationReport, dir: &Path) -> serde_json::Result<Self> {
        // The report itself is small: the metadata budget bounds it.
        let Value::Object(mut fields) = serde_json::to_value(report)? else {
            return Err(serde_json::Error::custom("a report is an object"));
        };
        let entries = match fields.remove("artifacts") {
            Some(Value::Array(entries)) => entries,
            _ => Vec::new(),
        };
        let artifacts = entries
            .into_iter()
            .zip(&report.artifacts)
            .map(|(entry, record)| (entry, dir.join(record.name.to_relative_path())))
            .collect();
        Ok(JsonReport { fields, artifacts })
    }
}

impl Serialize for JsonReport {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.fields.len() + 1))?;
        for (key, value) in &self.fields {
            map.serialize_entry(key, value)?;
        }
        map.serialize_entry("artifacts", &Artifacts(&self.artifacts))?;
        map.end()
    }
}

struct Artifacts<'a>(&'a [(Value, PathBuf)]);

impl Serialize for Artifacts<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for (entry, path) in self.0 {
            seq.serialize_element(&Artifact { entry, path })?;
        }
        seq.end()
    }
}

struct Artifact<'a> {
    entry: &'a Value,
    path: &'a Path,
}

impl Serialize for Artifact<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let fields = self.entry.as_object();
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in fields.into_iter().flatten() {
            map.serialize_entry(key, value)?;
        }
        let rows = self.entry["media_type"].as_str().is_some_and(|media_type| {
            matches!(
                ArtifactKind::from_media_type(media_type),
                ArtifactKind::Table { .. }
            )
        });
        map.serialize_entry(
            "content",
            &Content {
                path: self.path,
                rows,
            },
        )?;
        map.end()
    }
}

/// An artifact's content: JSON as JSON, JSON Lines (when `rows`) as an array of its rows, other
/// bytes as lossy UTF-8 text.
struct Content<'a> {
    path: &'a Path,
    rows: bool,
}

impl Serialize for Content<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let open = || {
            File::open(self.path)
                .map(|file| BufReader::with_capacity(CHUNK_BYTES, file))
                .map_err(|e| S::Error::custom(format!("reading {}: {e}", self.path.display())))
        };
        if self.rows && is_json_lines(open()?) {
            // One row in memory at a time.
            let mut seq = serializer.serialize_seq(None)?;
            for row in serde_json::Deserializer::from_reader(open()?).into_iter::<Value>() {
                seq.serialize_element(&row.map_err(S::Error::custom)?)?;
            }
            seq.end()
        } else if !self.rows && is_json(open()?) {
            let mut json = serde_json::Deserializer::from_reader(open()?);
            serde_transcode::Transcoder::new(&mut json).serialize(serializer)
        } else {
            serializer.collect_str(&LossyText(self.path))
        }
    }
}

/// Whether `reader` holds JSON values one after the other (JSON Lines); reads them through
/// without keeping them.
fn is_json_lines(reader: impl Read) -> bool {
    serde_json::Deserializer::from_reader(reader)
        .into_iter::<serde::de::IgnoredAny>()
        .all(|row| row.is_ok())
}

/// Whether `reader` holds exactly one JSON value; reads it through without keeping it.
fn is_json(reader: impl Read) -> bool {
    let mut json = serde_json::Deserializer::from_reader(reader);
    serde::de::IgnoredAny::deserialize(&mut json).is_ok() && json.end().is_ok()
}

/// A file's bytes as lossy UTF-8, read a chunk at a time when displayed: a serializer's
/// `collect_str` escapes it as it comes.
struct LossyText<'a>(&'a Path);

impl fmt::Display for LossyText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut file = File::open(self.0).map_err(|_| fmt::Error)?;
        let mut buffer = vec![0u8; CHUNK_BYTES];
        // Bytes of a character cut by the end of the last read, moved to the buffer's start.
        let mut carried = 0;
        loop {
            let read = file.read(&mut buffer[carried..]).map_err(|_| fmt::Error)?;
            let end = carried + read;
            let at_end = read == 0;
            carried = 0;
            let mut chunks = buffer[..end].utf8_chunks().peekable();
            while let Some(chunk) = chunks.next() {
                f.write_str(chunk.valid())?;
                let invalid = chunk.invalid();
                if invalid.is_empty() {
                    continue;
                }
                if chunks.peek().is_none() && !at_end && invalid.len() < 4 {
                    carried = invalid.len();
                } else {
                    f.write_str(char::REPLACEMENT_CHARACTER.encode_utf8(&mut [0; 4]))?;
                }
            }
            if at_end {
                return Ok(());
            }
            buffer.copy_within(end - carried..end, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_decoded_across_chunk_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        // A two-byte character straddling the first chunk's end, and an invalid byte.
        let mut bytes = vec![b'x'; CHUNK_BYTES - 1];
        bytes.extend_from_slice("é".as_bytes());
        bytes.extend_from_slice(b"\xffend");
        std::fs::write(&path, &bytes).unwrap();
        let text = LossyText(&path).to_string();
        assert!(
            text.ends_with("xé\u{fffd}end"),
            "{}",
            &text[text.len() - 10..]
        );
        assert_eq!(text.len(), CHUNK_BYTES - 1 + 2 + 3 + 3);
        assert!(is_json(&b" [1, {\"a\": 2}] "[..]));
        assert!(!is_json(&b"[1] [2]"[..]));
        assert!(!is_json(&b"[1"[..]));
        assert!(is_json_lines(&b"{\"a\": 1}\n{\"a\": 2}\n"[..]));
        assert!(is_json_lines(&b""[..]));
        assert!(!is_json_lines(&b"{\"a\": 1}\n{oops\n"[..]));
    }
}

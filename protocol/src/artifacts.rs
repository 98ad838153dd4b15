//! What a plugin declares about each artifact it writes, as definitions spell it in JSON
//! (`plugin info -o json`, a bundle's `plugins/<plugin>/definition.json` and `meta/run.json`):
//! its name, media type and kind, which tells `factbuoy inspect` how to read it (contract 0.2's
//! `artifact-kind`, docs/bundle.md).

use serde::{Deserialize, Serialize};

/// One artifact a plugin declares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Written")]
pub struct ArtifactDefinition {
    /// Its name: a relative path below the plugin's result.
    pub name: String,
    /// Its media type, e.g. `application/json`.
    pub media_type: String,
    /// What it holds.
    pub description: String,
    /// How it is read: `"kind": "facts"` with `list_keys`, `"table"` with `row_keys`, `"log"` or
    /// `"opaque"`.
    #[serde(flatten)]
    pub kind: ArtifactKind,
}

/// What kind of data an artifact holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ArtifactKind {
    /// One JSON document about the node, an object at its top.
    Facts {
        /// The lists whose items are told apart by keys.
        list_keys: Vec<ListKeys>,
    },
    /// JSON Lines, one row per item.
    Table {
        /// The columns that identify a row; none: the whole row does.
        row_keys: Vec<String>,
    },
    /// Time-ordered entries with the journal's field names, one JSON object per line.
    Log,
    /// Kept, not interpreted.
    Opaque,
}

/// The fields that tell the items of one list of a facts document apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListKeys {
    /// The fields leading to the list from the document's top, joined by `.`; lists on the way
    /// are passed through (`interfaces.addresses`) and `*` stands for any one field name.
    pub path: String,
    /// The fields of an item that together identify it.
    pub keys: Vec<String>,
}

impl ArtifactKind {
    /// The kind an artifact declared without one most likely has (by a plugin built against
    /// contract 0.1, or in a bundle written before 0.2): a JSON document is facts, JSON Lines a
    /// table, anything else opaque. Nothing is known of its keys.
    pub fn from_media_type(media_type: &str) -> Self {
        let essence = media_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            "application/jsonl"
            | "application/x-ndjson"
            | "application/x-jsonlines"
            | "application/jsonlines" => ArtifactKind::Table {
                row_keys: Vec::new(),
            },
            "application/json" => ArtifactKind::Facts {
                list_keys: Vec::new(),
            },
            other if other.starts_with("application/") && other.ends_with("+json") => {
                ArtifactKind::Facts {
                    list_keys: Vec::new(),
                }
            }
            _ => ArtifactKind::Opaque,
        }
    }

    /// The kind's name as definitions write it.
    pub fn name(&self) -> &'static str {
        match self {
            ArtifactKind::Facts { .. } => "facts",
            ArtifactKind::Table { .. } => "table",
            ArtifactKind::Log => "log",
            ArtifactKind::Opaque => "opaque",
        }
    }
}

/// A definition's artifact as read, with or without a kind.
#[derive(Deserialize)]
struct Written {
    name: String,
    media_type: String,
    #[serde(default)]
    description: String,
    kind: Option<String>,
    #[serde(default)]
    list_keys: Vec<ListKeys>,
    #[serde(default)]
    row_keys: Vec<String>,
}

impl From<Written> for ArtifactDefinition {
    fn from(written: Written) -> Self {
        let kind = match written.kind.as_deref() {
            None => ArtifactKind::from_media_type(&written.media_type),
            Some("facts") => ArtifactKind::Facts {
                list_keys: written.list_keys,
            },
            Some("table") => ArtifactKind::Table {
                row_keys: written.row_keys,
            },
            Some("log") => ArtifactKind::Log,
            // A kind a later factbuoy added: kept, as anything this one cannot read.
            Some(_) => ArtifactKind::Opaque,
        };
        ArtifactDefinition {
            name: written.name,
            media_type: written.media_type,
            description: written.description,
            kind,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn artifacts_without_a_kind_get_the_one_their_media_type_suggests() {
        let facts = ArtifactKind::Facts { list_keys: vec![] };
        let table = ArtifactKind::Table { row_keys: vec![] };
        for (media_type, kind) in [
            ("application/json", &facts),
            ("Application/JSON; charset=utf-8", &facts),
            ("application/ld+json", &facts),
            ("application/jsonl", &table),
            ("application/x-ndjson", &table),
            ("application/vnd.fdo.journal", &ArtifactKind::Opaque),
            ("text/plain", &ArtifactKind::Opaque),
            ("", &ArtifactKind::Opaque),
        ] {
            assert_eq!(
                &ArtifactKind::from_media_type(media_type),
                kind,
                "{media_type}"
            );
        }
    }

    #[test]
    fn definitions_are_written_flat_and_read_with_or_without_a_kind() {
        let declared = ArtifactDefinition {
            name: "facts.json".into(),
            media_type: "application/json".into(),
            description: "d".into(),
            kind: ArtifactKind::Facts {
                list_keys: vec![ListKeys {
                    path: "mounts".into(),
                    keys: vec!["mount".into()],
                }],
            },
        };
        let written = serde_json::to_value(&declared).unwrap();
        assert_eq!(
            written,
            json!({"name": "facts.json", "media_type": "application/json", "description": "d",
                   "kind": "facts", "list_keys": [{"path": "mounts", "keys": ["mount"]}]})
        );
        assert_eq!(
            serde_json::from_value::<ArtifactDefinition>(written).unwrap(),
            declared
        );
        let before_kinds = json!({"name": "rows.jsonl", "media_type": "application/x-ndjson",
                                  "description": ""});
        let read: ArtifactDefinition = serde_json::from_value(before_kinds).unwrap();
        assert_eq!(read.kind, ArtifactKind::Table { row_keys: vec![] });
        let from_the_future = json!({"name": "x", "media_type": "application/json",
                                     "kind": "hologram"});
        let read: ArtifactDefinition = serde_json::from_value(from_the_future).unwrap();
        assert_eq!(read.kind, ArtifactKind::Opaque);
    }
}

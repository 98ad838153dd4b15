//! What each plugin of a bundle declares about its artifacts, learnt from
//! `plugins/<plugin>/definition.json` as a walk passes it (the writer puts every definition
//! before any result): which artifacts are facts documents, tables or logs, and the keys of
//! their lists and rows. Every plugin is read through this, the bundled ones included; a
//! definition written before artifacts had kinds gets the kind its media type suggests, and a
//! plugin without a definition in the bundle has its `.json` results read as facts.

use std::collections::HashMap;

use factbuoy_bundle::layout;
use factbuoy_protocol::artifacts::{ArtifactDefinition, ArtifactKind, ListKeys};
use serde_json::Value;

/// The declared artifacts of a bundle's plugins.
#[derive(Debug, Default)]
pub(crate) struct Declared {
    /// Each plugin's artifacts, as its definition lists them.
    artifacts: HashMap<String, Vec<ArtifactDefinition>>,
}

impl Declared {
    /// The plugin whose definition is at `path`, if `path` is one.
    pub(crate) fn definition_of(path: &str) -> Option<&str> {
        let plugin = path
            .strip_prefix("plugins/")?
            .strip_suffix("/definition.json")?;
        (layout::definition(plugin) == path && !plugin.contains('/')).then_some(plugin)
    }

    /// Learns `plugin`'s declarations from its definition. A definition without a readable
    /// `artifacts` list declares nothing.
    pub(crate) fn learn(&mut self, plugin: &str, definition: &Value) {
        let artifacts: Vec<ArtifactDefinition> = definition
            .get("artifacts")
            .and_then(|list| serde_json::from_value(list.clone()).ok())
            .unwrap_or_default();
        self.artifacts.insert(plugin.to_owned(), artifacts);
    }

    /// The name the facts of `plugin`'s artifact `file` go by, and the keys of their lists,
    /// when the plugin declares it a facts document: the plugin's name, or `plugin/file` when
    /// the plugin declares more than one facts document.
    pub(crate) fn facts_source(&self, plugin: &str, file: &str) -> Option<(String, &[ListKeys])> {
        let Some(artifacts) = self.artifacts.get(plugin) else {
            // No definition of the plugin (a bundle put together by hand or by another tool):
            // a JSON file is taken for its facts, as its media type would suggest.
            return file
                .ends_with(".json")
                .then(|| (plugin.to_owned(), &[][..]));
        };
        let ArtifactKind::Facts { list_keys } = &artifacts.iter().find(|a| a.name == file)?.kind
        else {
            return None;
        };
        let facts = artifacts
            .iter()
            .filter(|a| matches!(a.kind, ArtifactKind::Facts { .. }))
            .count();
        let name = if facts > 1 {
            format!("{plugin}/{file}")
        } else {
            plugin.to_owned()
        };
        Some((name, list_keys))
    }

    /// The columns that identify a row of `plugin`'s artifact `file`, when it is a declared
    /// table; without the plugin's definition, a JSON Lines file (`.jsonl`, `.ndjson`) is
    /// taken for a table nothing in a row identifies.
    pub(crate) fn table(&self, plugin: &str, file: &str) -> Option<&[String]> {
        match self.artifacts.get(plugin) {
            Some(artifacts) => artifacts.iter().find_map(|a| match &a.kind {
                ArtifactKind::Table { row_keys } if a.name == file => Some(row_keys.as_slice()),
                _ => None,
            }),
            None => (file.ends_with(".jsonl") || file.ends_with(".ndjson")).then_some(&[][..]),
        }
    }
}

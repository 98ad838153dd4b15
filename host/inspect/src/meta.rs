//! What the answers share about a bundle's `meta/` documents: the error for one that is
//! missing, the nodes a status document names, and the words it uses as they are written.

use factbuoy_bundle::reader::{Bundle, ReadError};
use factbuoy_protocol::types::StatusDocument;
use serde::Serialize;
use serde_json::Value;

/// The error for a bundle without `entry` (`meta/status.json`, `meta/run.json`).
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

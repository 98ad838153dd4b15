//! What the answers share about a bundle's `meta/` documents: the error for one that is
//! missing, the nodes a status document names, and the words it uses as they are written.

use factbuoy_bundle::layout;
use factbuoy_bundle::reader::{Bundle, MAX_META_BYTES, ReadError};
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

/// `meta/run.json` of `bundle`, read without reading the rest (factbuoy writes it first).
pub(crate) fn run_first(bundle: &Bundle) -> Result<Value, ReadError> {
    let mut run: Option<Value> = None;
    let walked = bundle.walk(|visited| {
        let entry = visited.map_err(ReadError::Refused)?;
        if entry.path() == layout::RUN {
            run = Some(entry.read_json(MAX_META_BYTES)?);
        }
        // Whatever came first, the walk stops here: run.json is first when it is there.
        Err(ReadError::Read {
            entry: String::new(),
            cause: std::io::Error::other(STOP),
        })
    });
    match walked {
        Err(ReadError::Read { cause, .. }) if cause.to_string() == STOP => {}
        Err(e) => return Err(e),
        Ok(()) => {}
    }
    run.ok_or_else(|| missing(bundle, layout::RUN))
}

const STOP: &str = "read as far as run.json";

//! `factbuoy inspect summary`: the run at a glance (its status, plugins and nodes), every
//! (plugin, node) pair's outcome, the errors with their messages, and where the bundle's bytes
//! are, in one streaming pass of [`Bundle::walk`].

use std::collections::BTreeMap;

use factbuoy_bundle::layout::{self, result_parts};
use factbuoy_bundle::reader::{Bundle, MAX_META_BYTES, ReadError};
use factbuoy_protocol::types::StatusDocument;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::meta::{missing, nodes_of, wire};

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
pub struct PairOutcome {
    /// The plugin.
    pub plugin: String,
    /// The node, or `global`.
    pub node: String,
    /// The pair's status (`complete`, `timeout`, ...).
    pub status: String,
    /// `passed` or `failed`, once a result was committed.
    pub result_status: Option<String>,
    /// The result passed without a byte of artifacts: there was nothing to collect.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub empty: bool,
    /// The warnings and partial-output errors the result reports, as the status document
    /// keeps them (capped; the bundle's run report under `meta/reports/` has them all).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
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
    pub results: Vec<PairOutcome>,
    /// The failed pairs' errors.
    pub errors: Vec<PairError>,
    /// Sizes.
    pub sizes: Sizes,
}

#[derive(Deserialize)]
struct ErrorFile {
    error: String,
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
        .map(|p| PairOutcome {
            plugin: p.plugin.clone(),
            node: p.node.clone(),
            status: wire(&p.status),
            result_status: p.result_status.as_ref().map(wire),
            empty: p.empty,
            warnings: p.warnings.clone(),
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

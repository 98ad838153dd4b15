//! The enrolled nodes: one record per node name, in `nodes.json`, written by the serving fleet
//! only. A node is revoked by a file `revoked/<node>` (which `factbuoy fleet revoke` writes while
//! the fleet serves); the fleet looks for it at every request of the node, so a revoked node is
//! refused at its next request. A machine that joins under a revoked name replaces the record and
//! removes the file; the old machine's certificate then no longer matches the record.

use std::collections::BTreeMap;
use std::path::Path;

use factbuoy_protocol::names::NodeName;
use serde::{Deserialize, Serialize};

use super::FleetDir;

/// What the fleet knows of one enrolled node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// The node's name in every run.
    pub name: NodeName,
    /// When the machine joined, RFC 3339.
    pub enrolled_at: String,
    /// Lower-case hex SHA-256 of its current enrollment certificate: the only one accepted.
    pub certificate_sha256: String,
    /// When that certificate expires, RFC 3339 (the agent renews it before).
    pub certificate_expires: String,
    /// When it last asked for work, RFC 3339.
    #[serde(default)]
    pub last_seen: Option<String>,
    /// The `User-Agent` of its last request (`factbuoy/VERSION`).
    #[serde(default)]
    pub agent_version: Option<String>,
}

/// Every enrolled node, by name.
pub type Registry = BTreeMap<NodeName, NodeRecord>;

/// Reads `nodes.json` (none yet: an empty registry).
pub fn load(dir: &FleetDir) -> std::io::Result<Registry> {
    read(&dir.nodes())
}

fn read(path: &Path) -> std::io::Result<Registry> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Registry::new()),
        Err(e) => Err(e),
    }
}

/// Writes `nodes.json` atomically.
pub fn save(dir: &FleetDir, registry: &Registry) -> std::io::Result<()> {
    super::write_json_private(&dir.nodes(), registry)
}

/// Whether `node` is revoked.
pub fn is_revoked(dir: &FleetDir, node: &NodeName) -> bool {
    dir.revoked(node).exists()
}

/// Revokes `node`: refused at its next request, and left out of later runs.
pub fn revoke(dir: &FleetDir, node: &NodeName) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.revoked_dir())?;
    factbuoy_pki::write_private(&dir.revoked(node), &factbuoy_protocol::types::now_rfc3339())
        .map_err(std::io::Error::other)
}

/// Forgets a revocation: a new machine joined under the name.
pub fn unrevoke(dir: &FleetDir, node: &NodeName) -> std::io::Result<()> {
    match std::fs::remove_file(dir.revoked(node)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

//! The enrolled nodes: one record per node name, each in its own file `nodes/<node>.json`
//! written (and synced) when the node joins or renews, so a join costs one small write however
//! many nodes there are; when each was last seen and with which agent is `last-seen.json`,
//! written every few seconds. Both are written by the serving fleet only. A node is revoked by
//! a file `revoked/<node>` (which `factbuoy fleet revoke` writes while the fleet serves); the fleet looks for it at every request of the node, so a revoked node is
//! refused at its next request. A machine that joins under a revoked name replaces the record and
//! removes the file; the old machine's certificate then no longer matches the record.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use factbuoy_protocol::names::NodeName;
use serde::{Deserialize, Serialize};

use super::dir::FleetDir;
use crate::persistence::files::{read_dir_names, sync_dir};

/// What the fleet knows of one enrolled node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnrolledNode {
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
pub type Registry = BTreeMap<NodeName, EnrolledNode>;

/// When a node last asked for work, and with which agent; with the certificate it asked with,
/// so that a membership's times never show on the next one (a rejoin starts a fresh record).
/// Read as `Seen<String>`, written as `Seen<&str>`: writing copies none of the strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Seen<S> {
    last_seen: Option<S>,
    agent_version: Option<S>,
    #[serde(default)]
    certificate_sha256: Option<S>,
}

/// Reads every node's record (none yet: an empty registry).
pub fn load(dir: &FleetDir) -> std::io::Result<Registry> {
    let mut registry = Registry::new();
    let entries = match std::fs::read_dir(dir.nodes()) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(registry),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_none_or(|x| x != "json") {
            continue; // a temporary file a stop left
        }
        let record: EnrolledNode = read_json(&path)?;
        registry.insert(record.name.clone(), record);
    }
    if dir.last_seen().exists() {
        let seen: BTreeMap<NodeName, Seen<String>> = read_json(&dir.last_seen())?;
        for (name, seen) in seen {
            let current = |record: &EnrolledNode| {
                seen.certificate_sha256
                    .as_ref()
                    .is_none_or(|sha256| *sha256 == record.certificate_sha256)
            };
            if let Some(record) = registry.get_mut(&name).filter(|record| current(record)) {
                record.last_seen = seen.last_seen;
                record.agent_version = seen.agent_version;
            }
        }
    }
    Ok(registry)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> std::io::Result<T> {
    serde_json::from_slice(&std::fs::read(path)?).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

/// Writes one node's record, atomically and synced: the node is enrolled once this returns.
pub fn save_record(dir: &FleetDir, record: &EnrolledNode) -> std::io::Result<()> {
    stage_record(dir, record)?.commit()
}

/// A node's record written and synced beside its place, not yet in it: a join stages the
/// record first, so that whatever the disk refuses (space, inodes) it refuses before the token
/// is spent. [`StagedRecord::commit`] puts it in place; dropping it uncommitted removes it.
#[derive(Debug)]
pub(crate) struct StagedRecord {
    staged: PathBuf,
    path: PathBuf,
    committed: bool,
}

/// Writes `record` beside its place (`nodes/<node>.json.staged`, which [`load`] never reads).
pub(crate) fn stage_record(dir: &FleetDir, record: &EnrolledNode) -> std::io::Result<StagedRecord> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(dir.nodes())?;
    let path = dir.node(&record.name);
    let staged = StagedRecord {
        staged: path.with_extension("json.staged"),
        path,
        committed: false,
    };
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&staged.staged)?;
        file.write_all(&serde_json::to_vec_pretty(record)?)?;
        file.sync_all()
    })();
    // On an error the drop removes it: a full disk keeps no half-written record.
    written?;
    Ok(staged)
}

impl StagedRecord {
    /// Puts the record in place (a rename, which needs no space) and makes that durable.
    pub(crate) fn commit(mut self) -> std::io::Result<()> {
        std::fs::rename(&self.staged, &self.path)?;
        self.committed = true;
        sync_dir(self.path.parent().expect("records are in nodes/"))
    }
}

impl Drop for StagedRecord {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.staged);
        }
    }
}

/// When each node was last seen, as `last-seen.json` holds it ([`write_seen`] writes it).
pub fn seen_json(registry: &Registry) -> serde_json::Result<String> {
    let seen: BTreeMap<&NodeName, Seen<&str>> = registry
        .iter()
        .map(|(name, record)| {
            let seen = Seen {
                last_seen: record.last_seen.as_deref(),
                agent_version: record.agent_version.as_deref(),
                certificate_sha256: Some(record.certificate_sha256.as_str()),
            };
            (name, seen)
        })
        .collect();
    serde_json::to_string(&seen)
}

/// Writes `last-seen.json`, atomically and synced.
pub fn write_seen(dir: &FleetDir, json: &str) -> std::io::Result<()> {
    factbuoy_pki::write_private(&dir.last_seen(), json).map_err(std::io::Error::other)
}

/// Whether `node` is revoked.
pub fn is_revoked(dir: &FleetDir, node: &NodeName) -> bool {
    dir.revoked(node).exists()
}

/// Every revoked node. `revoke` writes beside the file and renames: names that are not nodes
/// (its temporary file among them) are left out by the check for the file itself.
pub(crate) fn revoked_nodes(dir: &FleetDir) -> std::io::Result<BTreeSet<NodeName>> {
    Ok(read_dir_names(&dir.revoked_dir())?
        .iter()
        .filter_map(|name| NodeName::parse(name).ok())
        .filter(|node| is_revoked(dir, node))
        .collect())
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

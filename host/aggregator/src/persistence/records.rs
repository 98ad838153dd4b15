//! The records that make a serving run's changes durable: small JSON files, each written
//! atomically (and synced) before its change takes effect, so that a restarted aggregator reads
//! them back and loses nothing. One file per change, so a record costs the same however large
//! the run is.
//!
//! ```text
//! <run dir>/commits/<plugin>/<node>.json   a committed result: its status and what it holds.
//!                                          Writing it is a commit's one commit point (see the
//!                                          crate's `commit`).
//! <run dir>/nodes/<node>.json              what the dispatcher said last about a node
//!                                          (expected, skipped, agent failed, gone)
//! ```
//!
//! A stop mid-write leaves a `.tmp` beside the record it was replacing, which still stands:
//! readers skip it.

use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::types::PairStatus;
use serde::{Deserialize, Serialize};

use super::files::write_atomically;
use super::run_dir::RunDir;
use crate::model::nodes::Disposition;
use crate::model::pair::Committed;

/// A committed result's record, `commits/<plugin>/<node>.json`, as read back.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct CommitRecord {
    /// The pair's status once the result is applied.
    pub(crate) status: PairStatus,
    /// The result.
    pub(crate) committed: Committed,
}

/// A node's record, `nodes/<node>.json`: what the run's dispatcher said about it last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DispositionRecord {
    /// The node.
    pub(crate) node: NodeName,
    /// What the dispatcher said last.
    #[serde(flatten)]
    pub(crate) disposition: Disposition,
}

impl RunDir {
    /// Writes the record of a pair's committed result, atomically: once it is on disk the
    /// commit has taken effect.
    pub(crate) fn write_commit_record(
        &self,
        plugin: &str,
        label: &str,
        status: PairStatus,
        committed: &Committed,
    ) -> std::io::Result<()> {
        /// [`CommitRecord`], as written.
        #[derive(Serialize)]
        struct Record<'a> {
            status: PairStatus,
            committed: &'a Committed,
        }
        let path = self.commit_record(plugin, label);
        std::fs::create_dir_all(path.parent().expect("record paths have a parent"))?;
        let bytes =
            serde_json::to_vec(&Record { status, committed }).map_err(std::io::Error::other)?;
        write_atomically(&path, &bytes)
    }

    /// The record of the pair's committed result; `None` if there is none to read.
    pub(crate) fn read_commit_record(
        &self,
        plugin: &str,
        label: &str,
    ) -> anyhow::Result<Option<CommitRecord>> {
        let path = self.commit_record(plugin, label);
        let Ok(bytes) = std::fs::read(&path) else {
            return Ok(None);
        };
        let record = serde_json::from_slice(&bytes)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        Ok(Some(record))
    }

    /// Writes a node's record, atomically.
    pub(crate) fn write_node_record(&self, record: &DispositionRecord) -> std::io::Result<()> {
        std::fs::create_dir_all(self.nodes())?;
        let bytes = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        write_atomically(&self.node_record(record.node.as_str()), &bytes)
    }

    /// Every node record of the run, in no particular order.
    pub(crate) fn read_node_records(&self) -> anyhow::Result<Vec<DispositionRecord>> {
        let dir = self.nodes();
        let entries = match std::fs::read_dir(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            other => other?,
        };
        let mut records = Vec::new();
        for entry in entries {
            let path = entry?.path();
            // A temporary a stop left behind: the record it was replacing still stands.
            if path.extension().is_some_and(|e| e == "tmp") {
                continue;
            }
            let bytes = std::fs::read(&path)?;
            let record: DispositionRecord = serde_json::from_slice(&bytes)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            records.push(record);
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_records_read_back() {
        let temporary = tempfile::tempdir().unwrap();
        let dir = RunDir::new(temporary.path());
        let record = DispositionRecord {
            node: NodeName::parse("a").unwrap(),
            disposition: Disposition::Skipped {
                reason: "taint x".into(),
            },
        };
        dir.write_node_record(&record).unwrap();
        assert_eq!(dir.read_node_records().unwrap(), [record]);
        let text = std::fs::read_to_string(dir.node_record("a")).unwrap();
        assert!(text.contains("\"disposition\":\"skipped\""), "{text}");
    }
}

//! What an instance's artifacts are: the sink they go to, the names taken, the bytes counted
//! against the output limit, and the record of each for the report.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::declared_keys::{FACTS_BUDGET_BYTES, KeyCheck};
use crate::bindings::ArtifactSpec;
use crate::bindings::factbuoy::plugin::output::OutputError;
use crate::sink::{ArtifactSink, ArtifactWriter};
use factbuoy_protocol::names::{ArtifactName, UnpackedNames};

/// The writing side of an artifact not yet finished.
pub(crate) struct OpenWriter {
    pub(crate) writer: ArtifactWriter,
    pub(crate) hasher: Sha256,
    /// Whether it has the keys its plugin declared, when it declared any.
    pub(crate) key_check: Option<KeyCheck>,
}

/// What the report says about one artifact.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ArtifactRecord {
    /// The name the plugin gave it, checked.
    pub name: ArtifactName,
    /// The media type the plugin declared, unchecked (`application/json`).
    pub media_type: String,
    /// Bytes stored, which is fewer than written when `truncated`.
    pub size_bytes: u64,
    /// Hex sha-256 of the bytes stored; set when the artifact is finished.
    pub sha256: Option<String>,
    /// The output limit cut this artifact short.
    pub truncated: bool,
    /// Storing it failed; the message says why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The `output` side of an instance: the sink, the artifacts created so far, and the bytes
/// counted against the run's output limit.
pub struct OutputState {
    pub(crate) sink: Arc<dyn ArtifactSink>,
    pub(crate) names: HashSet<ArtifactName>,
    /// The same names as they will be unpacked, case-folded: a bundle must unpack on macOS and
    /// Windows too.
    pub(crate) unpacked: UnpackedNames,
    pub(crate) records: Vec<ArtifactRecord>,
    /// Artifacts not yet finished, by record index; kept here rather than in the resource table
    /// so that those a trapped plugin left open can still be finished.
    pub(crate) open: BTreeMap<usize, OpenWriter>,
    pub(crate) written_bytes: u64,
    /// The artifacts the plugin declared, whose declared keys are checked as they are written.
    pub(crate) declared: Vec<ArtifactSpec>,
    /// What facts documents held for the key check may still take.
    pub(crate) facts_budget: usize,
    /// What the key checks found, for the report's warnings.
    pub(crate) warnings: Vec<String>,
}

impl OutputState {
    /// Nothing written yet; artifacts will go to `sink`.
    pub fn new(sink: Arc<dyn ArtifactSink>) -> Self {
        OutputState {
            sink,
            names: HashSet::new(),
            unpacked: UnpackedNames::default(),
            records: Vec::new(),
            open: BTreeMap::new(),
            written_bytes: 0,
            declared: Vec::new(),
            facts_budget: FACTS_BUDGET_BYTES,
            warnings: Vec::new(),
        }
    }

    /// The key check of the artifact `name`, when its plugin declared keys for it.
    pub(crate) fn key_check(&self, name: &ArtifactName) -> Option<KeyCheck> {
        self.declared
            .iter()
            .find(|spec| spec.name == name.as_str())
            .and_then(KeyCheck::of)
    }
}

impl OutputState {
    pub(crate) async fn finish(&mut self, record: usize) -> Result<(), OutputError> {
        let Some(OpenWriter {
            mut writer,
            hasher,
            key_check,
        }) = self.open.remove(&record)
        else {
            return Err(OutputError::Closed);
        };
        if let Some(check) = key_check {
            self.warnings.extend(check.finish(&mut self.facts_budget));
        }
        let record = &mut self.records[record];
        record.sha256 = Some(hex::encode(hasher.finalize()));
        writer.shutdown().await.map_err(|e| {
            record.error = Some(e.to_string());
            OutputError::Io(format!("finishing {}: {e}", record.name))
        })
    }

    /// Finishes every artifact the plugin left open (it trapped, or never called `finish`).
    pub(crate) async fn finish_all(&mut self) {
        let open: Vec<usize> = self.open.keys().copied().collect();
        for record in open {
            // A failure is already noted in the artifact's record.
            let _ = self.finish(record).await;
        }
    }
}

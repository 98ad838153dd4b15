//! Results on disk. Uploads stream into a temporary file while their digest is computed; a
//! file whose digest differs from its `Content-Digest` is deleted, never stored. Accepted files
//! wait in `staging/<plugin>/<node>/` with a sidecar recording size and digest, until a manifest
//! commits them: the staged directory is then renamed into the bundle tree in one step.
//!
//! ```text
//! <run dir>/staging/<plugin>/<node>/files/<artifact>      accepted, not yet committed
//! <run dir>/staging/<plugin>/<node>/digests/<artifact>    "<size> <sha256>"
//! <run dir>/results/plugins/<plugin>/results/<node>/...   committed successes
//! <run dir>/results/plugins/<plugin>/errors/<node>/...    committed failures, with error.json
//! <run dir>/results/meta/reports/<plugin>/<node>.json     each run's report from the agent
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use factbuoy_protocol::names::ArtifactName;
use factbuoy_protocol::types::{Outcome, ResultManifest};
use http_body_util::BodyExt;
use sha2::{Digest, Sha256};

use super::config::ServerLimits;

/// Bytes gathered before each write to disk: each write is a trip to the blocking pool, so
/// batching frames saves CPU, and one reused buffer per upload keeps memory bounded.
const WRITE_BATCH_BYTES: usize = 64 << 10;
use super::state::Committed;

/// Why an upload was refused. Each maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("the body is larger than the limit of {0} bytes")]
    TooLarge(u64),
    #[error("the upload stalled: no data for {0:?}")]
    Stalled(Duration),
    #[error("the upload is too slow: {rate} bytes/s, below the minimum of {minimum} bytes/s")]
    TooSlow { rate: u64, minimum: u64 },
    #[error("the body's sha-256 is {actual} but Content-Digest says {expected}; nothing was stored, upload it again")]
    DigestMismatch { expected: String, actual: String },
    #[error("the connection broke during the upload: {0}")]
    Interrupted(String),
    #[error("storing the upload: {0}")]
    Io(#[from] std::io::Error),
}

#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    #[error("the manifest names {0:?}, which was not uploaded (or not completely); upload it, then commit again")]
    MissingFile(String),
    #[error("the manifest says {name:?} is {expected}, but the uploaded file is {actual}")]
    Mismatch {
        name: String,
        expected: String,
        actual: String,
    },
    #[error(transparent)]
    Name(#[from] factbuoy_protocol::names::InvalidName),
    #[error("storing the result: {0}")]
    Io(#[from] std::io::Error),
}

pub struct Storage {
    run_dir: PathBuf,
    /// Held while a received file and its sidecar are put in place, and while a commit checks
    /// and moves them: two uploads of one name, or an upload and a commit, must not interleave,
    /// or a sidecar could describe the other file.
    settle: std::sync::Mutex<()>,
}

impl Storage {
    pub fn new(run_dir: &Path) -> Self {
        Storage { run_dir: run_dir.to_owned(), settle: std::sync::Mutex::new(()) }
    }

    fn staging(&self, plugin: &str, label: &str) -> PathBuf {
        self.run_dir.join("staging").join(plugin).join(label)
    }

    /// The tree that becomes the bundle.
    pub fn bundle_root(&self) -> PathBuf {
        self.run_dir.join("results")
    }

    fn destination(&self, plugin: &str, label: &str, outcome: Outcome) -> PathBuf {
        let kind = match outcome {
            Outcome::Succeeded => "results",
            Outcome::Failed => "errors",
        };
        self.bundle_root().join("plugins").join(plugin).join(kind).join(label)
    }

    /// Streams `body` into the staging area, checking size, pace and digest.
    pub async fn receive_file<B>(
        &self,
        plugin: &str,
        label: &str,
        name: &ArtifactName,
        expected_sha256: &str,
        mut body: B,
        limits: &ServerLimits,
    ) -> Result<u64, UploadError>
    where
        B: hyper::body::Body<Data = Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        let staging = self.staging(plugin, label);
        let incoming = staging.join("incoming");
        tokio::fs::create_dir_all(&incoming).await?;
        let temporary = incoming.join(format!("{:016x}", rand::random::<u64>()));
        let result = async {
            let mut file = Some(std::fs::File::create(&temporary)?);
            let mut batch = Vec::with_capacity(WRITE_BATCH_BYTES);
            let mut hasher = Sha256::new();
            let mut size: u64 = 0;
            let started = Instant::now();
            let idle = Duration::from_secs(limits.idle_timeout_seconds);
            let grace = Duration::from_secs(limits.upload_grace_seconds);
            loop {
                let frame = match tokio::time::timeout(idle, body.frame()).await {
                    Err(_) => return Err(UploadError::Stalled(idle)),
                    Ok(None) => break,
                    Ok(Some(Err(e))) => return Err(UploadError::Interrupted(e.to_string())),
                    Ok(Some(Ok(frame))) => frame,
                };
                let Ok(data) = frame.into_data() else { continue };
                size += data.len() as u64;
                if size > limits.max_file_bytes {
                    return Err(UploadError::TooLarge(limits.max_file_bytes));
                }
                hasher.update(&data);
                batch.extend_from_slice(&data);
                if batch.len() >= WRITE_BATCH_BYTES {
                    batch = write_batch(&mut file, batch).await?;
                }
                let elapsed = started.elapsed();
                if elapsed > grace {
                    let rate = (size as f64 / elapsed.as_secs_f64()) as u64;
                    if rate < limits.min_upload_bytes_per_second {
                        return Err(UploadError::TooSlow { rate, minimum: limits.min_upload_bytes_per_second });
                    }
                }
            }
            write_batch(&mut file, batch).await?;
            let actual = hex::encode(hasher.finalize());
            if actual != expected_sha256 {
                return Err(UploadError::DigestMismatch { expected: expected_sha256.to_owned(), actual });
            }
            Ok(size)
        }
        .await;
        let size = match result {
            Ok(size) => size,
            Err(e) => {
                let _ = tokio::fs::remove_file(&temporary).await;
                return Err(e);
            }
        };
        let target = staging.join("files").join(name.to_relative_path());
        let sidecar = staging.join("digests").join(name.to_relative_path());
        let _settling = self.settle.lock().unwrap();
        for path in [&target, &sidecar] {
            std::fs::create_dir_all(path.parent().expect("artifact paths have a parent"))?;
        }
        std::fs::rename(&temporary, &target)?;
        std::fs::write(&sidecar, format!("{size} {expected_sha256}"))?;
        Ok(size)
    }

    /// Commits the staged files the manifest names, replacing an earlier failed result.
    pub fn commit(&self, plugin: &str, label: &str, manifest: &ResultManifest) -> Result<Committed, CommitError> {
        let staging = self.staging(plugin, label);
        let _settling = self.settle.lock().unwrap();
        let mut files = BTreeMap::new();
        for entry in &manifest.files {
            let name = ArtifactName::parse(&entry.name)?;
            let sidecar = staging.join("digests").join(name.to_relative_path());
            let recorded = std::fs::read_to_string(&sidecar)
                .map_err(|_| CommitError::MissingFile(entry.name.clone()))?;
            let expected = format!("{} {}", entry.size, entry.sha256);
            if recorded != expected {
                return Err(CommitError::Mismatch { name: entry.name.clone(), expected, actual: recorded });
            }
            files.insert(entry.name.clone(), (entry.size, entry.sha256.clone()));
        }
        // Only the files the manifest names are kept.
        let staged_files = staging.join("files");
        std::fs::create_dir_all(&staged_files)?;
        remove_unlisted(&staged_files, &staged_files, &files)?;
        for outcome in [Outcome::Succeeded, Outcome::Failed] {
            let old = self.destination(plugin, label, outcome);
            if old.exists() {
                std::fs::remove_dir_all(&old)?;
            }
        }
        let destination = self.destination(plugin, label, manifest.outcome);
        std::fs::create_dir_all(destination.parent().expect("destination has a parent"))?;
        std::fs::rename(&staged_files, &destination)?;
        if manifest.outcome == Outcome::Failed {
            let error = serde_json::json!({
                "error": manifest.error.clone().unwrap_or_else(|| "the plugin failed".to_owned()),
                "plugin_version": manifest.plugin_version,
            });
            std::fs::write(destination.join("error.json"), serde_json::to_vec_pretty(&error).unwrap())?;
        }
        if let Some(report) = &manifest.report {
            let reports = self.bundle_root().join("meta").join("reports").join(plugin);
            std::fs::create_dir_all(&reports)?;
            std::fs::write(reports.join(format!("{label}.json")), serde_json::to_vec_pretty(report).unwrap())?;
        }
        std::fs::remove_dir_all(&staging)?;
        Ok(Committed { outcome: manifest.outcome, files, synthetic: false })
    }

    /// Writes an error result the aggregator made up (lost node, run timeout).
    pub fn synthetic_error(&self, plugin: &str, label: &str, message: &str) -> std::io::Result<Committed> {
        let destination = self.destination(plugin, label, Outcome::Failed);
        std::fs::create_dir_all(&destination)?;
        let error = serde_json::json!({ "error": message });
        std::fs::write(destination.join("error.json"), serde_json::to_vec_pretty(&error).unwrap())?;
        Ok(Committed { outcome: Outcome::Failed, files: BTreeMap::new(), synthetic: true })
    }
}

/// Writes `batch` to the file on the blocking pool and hands the emptied buffer back for reuse.
async fn write_batch(file: &mut Option<std::fs::File>, mut batch: Vec<u8>) -> std::io::Result<Vec<u8>> {
    use std::io::Write;
    let mut owned = file.take().expect("the file is back after every write");
    let (owned, batch) = tokio::task::spawn_blocking(move || {
        let written = owned.write_all(&batch);
        batch.clear();
        written.map(|()| (owned, batch))
    })
    .await
    .map_err(std::io::Error::other)??;
    *file = Some(owned);
    Ok(batch)
}

/// Deletes files below `dir` that `keep` does not name (relative to `root`).
fn remove_unlisted(root: &Path, dir: &Path, keep: &BTreeMap<String, (u64, String)>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            remove_unlisted(root, &path, keep)?;
        } else {
            let relative = path.strip_prefix(root).unwrap_or(&path);
            let name: Vec<String> = relative.iter().map(|c| c.to_string_lossy().into_owned()).collect();
            if !keep.contains_key(&name.join("/")) {
                std::fs::remove_file(&path)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use factbuoy_protocol::types::ManifestFile;
    use http_body_util::Full;

    fn sha(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    fn manifest(outcome: Outcome, files: &[(&str, &[u8])]) -> ResultManifest {
        ResultManifest {
            outcome,
            error: (outcome == Outcome::Failed).then(|| "boom".to_owned()),
            files: files
                .iter()
                .map(|(name, bytes)| ManifestFile { name: (*name).into(), size: bytes.len() as u64, sha256: sha(bytes) })
                .collect(),
            plugin_version: "1.0.0".into(),
            report: None,
        }
    }

    #[tokio::test]
    async fn an_upload_is_stored_only_with_the_right_digest() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::new(dir.path());
        let limits = ServerLimits::default();
        let name = ArtifactName::parse("logs/a.json").unwrap();
        let body = Full::new(Bytes::from_static(b"payload"));
        let wrong = sha(b"other");
        let error = storage.receive_file("p", "n1", &name, &wrong, body, &limits).await.unwrap_err();
        assert!(matches!(error, UploadError::DigestMismatch { .. }), "{error}");
        assert!(!dir.path().join("staging/p/n1/files/logs/a.json").exists());
        assert_eq!(std::fs::read_dir(dir.path().join("staging/p/n1/incoming")).unwrap().count(), 0);

        let body = Full::new(Bytes::from_static(b"payload"));
        let size = storage.receive_file("p", "n1", &name, &sha(b"payload"), body, &limits).await.unwrap();
        assert_eq!(size, 7);
        let committed = storage.commit("p", "n1", &manifest(Outcome::Succeeded, &[("logs/a.json", b"payload")])).unwrap();
        assert_eq!(committed.files["logs/a.json"], (7, sha(b"payload")));
        let stored = dir.path().join("results/plugins/p/results/n1/logs/a.json");
        assert_eq!(std::fs::read(stored).unwrap(), b"payload");
        assert!(!dir.path().join("staging/p/n1").exists());
    }

    #[tokio::test]
    async fn oversized_uploads_and_incomplete_manifests_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::new(dir.path());
        let limits = ServerLimits { max_file_bytes: 4, ..ServerLimits::default() };
        let name = ArtifactName::parse("a").unwrap();
        let body = Full::new(Bytes::from_static(b"12345"));
        let error = storage.receive_file("p", "n1", &name, &sha(b"12345"), body, &limits).await.unwrap_err();
        assert!(matches!(error, UploadError::TooLarge(4)));
        let error = storage.commit("p", "n1", &manifest(Outcome::Succeeded, &[("a", b"12345")])).unwrap_err();
        assert!(matches!(error, CommitError::MissingFile(_)), "{error}");
    }

    #[tokio::test]
    async fn a_retry_replaces_a_failed_result() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::new(dir.path());
        storage.commit("p", "n1", &manifest(Outcome::Failed, &[])).unwrap();
        let error_json = dir.path().join("results/plugins/p/errors/n1/error.json");
        assert!(std::fs::read_to_string(&error_json).unwrap().contains("boom"));
        let name = ArtifactName::parse("ok.txt").unwrap();
        let body = Full::new(Bytes::from_static(b"ok"));
        storage.receive_file("p", "n1", &name, &sha(b"ok"), body, &ServerLimits::default()).await.unwrap();
        storage.commit("p", "n1", &manifest(Outcome::Succeeded, &[("ok.txt", b"ok")])).unwrap();
        assert!(!error_json.exists());
        assert!(dir.path().join("results/plugins/p/results/n1/ok.txt").exists());
    }
}

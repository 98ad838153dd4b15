//! Results on disk. Uploads stream into a temporary file while their digest is computed; a
//! file whose digest differs from its `Content-Digest` is deleted, never stored. Accepted files
//! wait in `staging/<plugin>/<node>/` under a name that records their size and digest, until a
//! manifest commits them: the commit links the named files into a tree beside them, which is
//! then renamed into the bundle tree in one step.
//!
//! Staged files are flat, one directory per pair, and uploads in progress share one directory:
//! creating directories is the costliest file-system work an upload does (ext4 searches for a
//! spread-out inode for each), far more than writing a megabyte.
//!
//! ```text
//! <run dir>/staging/.incoming/<random>                                  uploads in progress
//! <run dir>/staging/<plugin>/<node>/<sha256 of name>.<size>.<sha256>    accepted, not committed
//! <run dir>/staging/<plugin>/<node>/commit/<artifact>                   a commit being assembled
//! <run dir>/results/plugins/<plugin>/results/<node>/...                 committed successes
//! <run dir>/results/plugins/<plugin>/errors/<node>/...                  committed failures, with error.json
//! <run dir>/results/meta/reports/<plugin>/<node>.json                   each run's report from the agent
//! ```

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use factbuoy_bundle::layout::{self, ResultKind};
use factbuoy_protocol::names::ArtifactName;
use factbuoy_protocol::types::{Outcome, ResultManifest};
use http_body_util::BodyExt;
use sha2::{Digest, Sha256};

use super::config::ServerLimits;
use super::run_dir::RunDir;

use super::state::Committed;

/// Why an upload was refused. Each maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The body passed the largest file size it holds, in bytes (413).
    #[error("the body is larger than the limit of {0} bytes")]
    TooLarge(u64),
    /// No data arrived for the idle timeout it holds (408).
    #[error("the upload stalled: no data for {0:?}")]
    Stalled(Duration),
    /// The average rate fell below the minimum once the grace had passed (408).
    #[error("the upload is too slow: {rate} bytes/s, below the minimum of {minimum} bytes/s")]
    TooSlow {
        /// The average rate so far, in bytes per second.
        rate: u64,
        /// The slowest accepted rate, in bytes per second.
        minimum: u64,
    },
    /// The body's digest differs from its `Content-Digest` (400).
    #[error(
        "the body's sha-256 is {actual} but Content-Digest says {expected}; nothing was stored, upload it again"
    )]
    DigestMismatch {
        /// Lower-case hex sha-256 from `Content-Digest`.
        expected: String,
        /// Lower-case hex sha-256 of the bytes received.
        actual: String,
    },
    /// The client's body broke off; holds the transport's error (400).
    #[error("the connection broke during the upload: {0}")]
    Interrupted(String),
    /// The file could not be written or put in place (500).
    #[error("storing the upload: {0}")]
    Io(#[from] std::io::Error),
}

/// Why a manifest could not be committed (answered with 400).
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The manifest names a file that was not uploaded; holds its name.
    #[error(
        "the manifest names {0:?}, which was not uploaded (or not completely); upload it, then commit again"
    )]
    MissingFile(String),
    /// A file was uploaded with another size or digest than the manifest says.
    #[error("the manifest says {name:?} is {expected}, but the uploaded file is {actual}")]
    Mismatch {
        /// The artifact's name.
        name: String,
        /// Size and sha-256 the manifest gives.
        expected: String,
        /// Size and sha-256 of the file uploaded.
        actual: String,
    },
    /// The manifest names a file with an invalid artifact name.
    #[error(transparent)]
    Name(#[from] factbuoy_protocol::names::InvalidName),
    /// The file system failed while assembling or moving the result.
    #[error("storing the result: {0}")]
    Io(#[from] std::io::Error),
}

/// Uploads and results of one run on disk: the staging area and the results tree.
pub struct Storage {
    staging: PathBuf,
    results: PathBuf,
    /// Held while a received file is put in place, and while a commit links and moves the staged
    /// files: an upload landing in a pair's directory as a commit removes it would be lost.
    settle: std::sync::Mutex<()>,
}

impl Storage {
    /// Storage below `run_dir`. Uploads a previous process left half-done are deleted: their
    /// agents never got a 201 and send them again.
    pub fn open(run_dir: &RunDir) -> std::io::Result<Self> {
        let storage = Storage {
            staging: run_dir.staging(),
            results: run_dir.results(),
            settle: std::sync::Mutex::new(()),
        };
        let incoming = storage.incoming();
        if incoming.exists() {
            std::fs::remove_dir_all(&incoming)?;
        }
        std::fs::create_dir_all(&incoming)?;
        Ok(storage)
    }

    fn incoming(&self) -> PathBuf {
        // A dot keeps it apart from plugin names, which start with a letter or digit.
        self.staging.join(".incoming")
    }

    fn staging(&self, plugin: &str, label: &str) -> PathBuf {
        self.staging.join(plugin).join(label)
    }

    /// The tree that becomes the bundle.
    pub fn bundle_root(&self) -> &Path {
        &self.results
    }

    fn destination(&self, plugin: &str, label: &str, outcome: Outcome) -> PathBuf {
        let kind = match outcome {
            Outcome::Succeeded => ResultKind::Results,
            Outcome::Failed => ResultKind::Errors,
        };
        self.results.join(layout::result_dir(plugin, label, kind))
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
        let temporary = self
            .incoming()
            .join(format!("{:016x}", rand::random::<u64>()));
        let result = async {
            let mut file = std::fs::File::create(&temporary)?;
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
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                size += data.len() as u64;
                if size > limits.max_file_bytes {
                    return Err(UploadError::TooLarge(limits.max_file_bytes));
                }
                hasher.update(&data);
                // Straight into the page cache on this thread, as nginx does. A trip to the
                // blocking pool per write cost more than the write (the server used about half
                // again the CPU per 1 MiB upload), and batching to save trips held 64 KiB per
                // connection.
                file.write_all(&data)?;
                let elapsed = started.elapsed();
                if elapsed > grace {
                    let rate = (size as f64 / elapsed.as_secs_f64()) as u64;
                    if rate < limits.min_upload_bytes_per_second {
                        return Err(UploadError::TooSlow {
                            rate,
                            minimum: limits.min_upload_bytes_per_second,
                        });
                    }
                }
            }
            let actual = hex::encode(hasher.finalize());
            if actual != expected_sha256 {
                return Err(UploadError::DigestMismatch {
                    expected: expected_sha256.to_owned(),
                    actual,
                });
            }
            Ok(size)
        }
        .await;
        let size = match result {
            Ok(size) => size,
            Err(e) => {
                let _ = std::fs::remove_file(&temporary);
                return Err(e);
            }
        };
        let staging = self.staging(plugin, label);
        let _settling = self.settle.lock().unwrap();
        std::fs::create_dir_all(&staging)?;
        std::fs::rename(
            &temporary,
            staging.join(StagedFile::file_name(name, size, expected_sha256)),
        )?;
        Ok(size)
    }

    /// Deletes a staged upload that arrived after its pair's result was completed, and the pair's
    /// staging folder if that leaves it empty. A file the commit already took is not there.
    pub fn discard(
        &self,
        plugin: &str,
        label: &str,
        name: &ArtifactName,
        size: u64,
        sha256: &str,
    ) -> std::io::Result<()> {
        let staging = self.staging(plugin, label);
        let _settling = self.settle.lock().unwrap();
        match std::fs::remove_file(staging.join(StagedFile::file_name(name, size, sha256))) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        // Fails, as it should, while other uploads wait there.
        let _ = std::fs::remove_dir(&staging);
        Ok(())
    }

    /// Commits the staged files the manifest names, replacing an earlier failed result.
    pub fn commit(
        &self,
        plugin: &str,
        label: &str,
        manifest: &ResultManifest,
    ) -> Result<Committed, CommitError> {
        let staging = self.staging(plugin, label);
        let _settling = self.settle.lock().unwrap();
        let staged = StagedFile::list(&staging)?;
        let mut files = BTreeMap::new();
        for entry in &manifest.files {
            let name = ArtifactName::parse(&entry.name)?;
            let key = StagedFile::name_key(&name);
            let versions: Vec<&StagedFile> = staged.iter().filter(|f| f.name_key == key).collect();
            if !versions
                .iter()
                .any(|f| f.size == entry.size && f.sha256 == entry.sha256)
            {
                let Some(other) = versions.first() else {
                    return Err(CommitError::MissingFile(entry.name.clone()));
                };
                return Err(CommitError::Mismatch {
                    name: entry.name.clone(),
                    expected: format!("{} bytes with sha-256 {}", entry.size, entry.sha256),
                    actual: format!("{} bytes with sha-256 {}", other.size, other.sha256),
                });
            }
            files.insert(entry.name.clone(), (name, entry.size, entry.sha256.clone()));
        }
        // The result's tree is built from links, so the staged files stay until the one rename
        // below: a commit cut short by a crash is simply sent again.
        let assembly = staging.join("commit");
        if assembly.exists() {
            std::fs::remove_dir_all(&assembly)?;
        }
        std::fs::create_dir_all(&assembly)?;
        for (name, size, sha256) in files.values() {
            let linked = assembly.join(name.to_relative_path());
            std::fs::create_dir_all(linked.parent().expect("artifact paths have a parent"))?;
            std::fs::hard_link(
                staging.join(StagedFile::file_name(name, *size, sha256)),
                &linked,
            )?;
        }
        for outcome in [Outcome::Succeeded, Outcome::Failed] {
            let old = self.destination(plugin, label, outcome);
            if old.exists() {
                std::fs::remove_dir_all(&old)?;
            }
        }
        let destination = self.destination(plugin, label, manifest.outcome);
        std::fs::create_dir_all(destination.parent().expect("destination has a parent"))?;
        std::fs::rename(&assembly, &destination)?;
        if manifest.outcome == Outcome::Failed {
            let error = serde_json::json!({
                "error": manifest.error.clone().unwrap_or_else(|| "the plugin failed".to_owned()),
                "plugin_version": manifest.plugin_version,
            });
            std::fs::write(
                destination.join(layout::ERROR_FILE),
                serde_json::to_vec_pretty(&error).unwrap(),
            )?;
        }
        if let Some(report) = &manifest.report {
            let path = self.results.join(layout::report(plugin, label));
            std::fs::create_dir_all(path.parent().expect("report paths have a parent"))?;
            std::fs::write(path, serde_json::to_vec_pretty(report).unwrap())?;
        }
        std::fs::remove_dir_all(&staging)?;
        let files = files
            .into_iter()
            .map(|(text, (_, size, sha256))| (text, (size, sha256)))
            .collect();
        Ok(Committed {
            outcome: manifest.outcome,
            files,
            synthetic: false,
        })
    }

    /// Writes an error result the aggregator made up (lost node, run timeout).
    pub fn synthetic_error(
        &self,
        plugin: &str,
        label: &str,
        message: &str,
    ) -> std::io::Result<Committed> {
        let destination = self.destination(plugin, label, Outcome::Failed);
        std::fs::create_dir_all(&destination)?;
        let error = serde_json::json!({ "error": message });
        std::fs::write(
            destination.join(layout::ERROR_FILE),
            serde_json::to_vec_pretty(&error).unwrap(),
        )?;
        Ok(Committed {
            outcome: Outcome::Failed,
            files: BTreeMap::new(),
            synthetic: true,
        })
    }
}

/// An accepted upload waiting for its commit. Its file name carries what the commit checks, so
/// nothing beside the file has to be written or kept in step with it.
struct StagedFile {
    /// The sha-256 of the artifact name: names may be longer than a file name can be.
    name_key: String,
    size: u64,
    sha256: String,
}

impl StagedFile {
    fn name_key(name: &ArtifactName) -> String {
        hex::encode(Sha256::digest(name.as_str().as_bytes()))
    }

    fn file_name(name: &ArtifactName, size: u64, sha256: &str) -> String {
        format!("{}.{size}.{sha256}", Self::name_key(name))
    }

    /// The staged files of one pair; none if nothing was uploaded.
    fn list(staging: &Path) -> std::io::Result<Vec<StagedFile>> {
        let entries = match std::fs::read_dir(staging) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut staged = Vec::new();
        for entry in entries {
            let file_name = entry?.file_name();
            let mut parts = file_name.to_str().unwrap_or_default().split('.');
            if let (Some(name_key), Some(Ok(size)), Some(sha256), None) = (
                parts.next(),
                parts.next().map(str::parse),
                parts.next(),
                parts.next(),
            ) {
                staged.push(StagedFile {
                    name_key: name_key.to_owned(),
                    size,
                    sha256: sha256.to_owned(),
                });
            }
        }
        Ok(staged)
    }
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
                .map(|(name, bytes)| ManifestFile {
                    name: (*name).into(),
                    size: bytes.len() as u64,
                    sha256: sha(bytes),
                })
                .collect(),
            plugin_version: "1.0.0".into(),
            report: None,
        }
    }

    #[tokio::test]
    async fn an_upload_is_stored_only_with_the_right_digest() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(&RunDir::new(dir.path())).unwrap();
        let limits = ServerLimits::default();
        let name = ArtifactName::parse("logs/a.json").unwrap();
        let body = Full::new(Bytes::from_static(b"payload"));
        let wrong = sha(b"other");
        let error = storage
            .receive_file("p", "n1", &name, &wrong, body, &limits)
            .await
            .unwrap_err();
        assert!(
            matches!(error, UploadError::DigestMismatch { .. }),
            "{error}"
        );
        assert!(!dir.path().join("staging/p/n1").exists());
        assert_eq!(
            std::fs::read_dir(dir.path().join("staging/.incoming"))
                .unwrap()
                .count(),
            0
        );

        let body = Full::new(Bytes::from_static(b"payload"));
        let size = storage
            .receive_file("p", "n1", &name, &sha(b"payload"), body, &limits)
            .await
            .unwrap();
        assert_eq!(size, 7);
        let committed = storage
            .commit(
                "p",
                "n1",
                &manifest(Outcome::Succeeded, &[("logs/a.json", b"payload")]),
            )
            .unwrap();
        assert_eq!(committed.files["logs/a.json"], (7, sha(b"payload")));
        let stored = dir.path().join("results/plugins/p/results/n1/logs/a.json");
        assert_eq!(std::fs::read(stored).unwrap(), b"payload");
        assert!(!dir.path().join("staging/p/n1").exists());
    }

    #[tokio::test]
    async fn oversized_uploads_and_incomplete_manifests_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(&RunDir::new(dir.path())).unwrap();
        let limits = ServerLimits {
            max_file_bytes: 4,
            ..ServerLimits::default()
        };
        let name = ArtifactName::parse("a").unwrap();
        let body = Full::new(Bytes::from_static(b"12345"));
        let error = storage
            .receive_file("p", "n1", &name, &sha(b"12345"), body, &limits)
            .await
            .unwrap_err();
        assert!(matches!(error, UploadError::TooLarge(4)));
        let error = storage
            .commit("p", "n1", &manifest(Outcome::Succeeded, &[("a", b"12345")]))
            .unwrap_err();
        assert!(matches!(error, CommitError::MissingFile(_)), "{error}");
    }

    #[tokio::test]
    async fn a_commit_names_the_staged_version_it_disagrees_with_and_survives_a_torn_commit() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(&RunDir::new(dir.path())).unwrap();
        let name = ArtifactName::parse("deep/er/a.json").unwrap();
        let body = Full::new(Bytes::from_static(b"first"));
        storage
            .receive_file(
                "p",
                "n1",
                &name,
                &sha(b"first"),
                body,
                &ServerLimits::default(),
            )
            .await
            .unwrap();
        let error = storage
            .commit(
                "p",
                "n1",
                &manifest(Outcome::Succeeded, &[("deep/er/a.json", b"second")]),
            )
            .unwrap_err();
        assert!(matches!(error, CommitError::Mismatch { .. }), "{error}");
        assert!(
            error
                .to_string()
                .contains(&format!("5 bytes with sha-256 {}", sha(b"first"))),
            "{error}"
        );
        // A commit a crash cut short left its half-built tree; the next one starts over.
        std::fs::create_dir_all(dir.path().join("staging/p/n1/commit/stray")).unwrap();
        storage
            .commit(
                "p",
                "n1",
                &manifest(Outcome::Succeeded, &[("deep/er/a.json", b"first")]),
            )
            .unwrap();
        let stored = dir.path().join("results/plugins/p/results/n1");
        assert_eq!(
            std::fs::read(stored.join("deep/er/a.json")).unwrap(),
            b"first"
        );
        assert!(!stored.join("stray").exists());
    }

    #[tokio::test]
    async fn a_retry_replaces_a_failed_result() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(&RunDir::new(dir.path())).unwrap();
        storage
            .commit("p", "n1", &manifest(Outcome::Failed, &[]))
            .unwrap();
        let error_json = dir.path().join("results/plugins/p/errors/n1/error.json");
        assert!(
            std::fs::read_to_string(&error_json)
                .unwrap()
                .contains("boom")
        );
        let name = ArtifactName::parse("ok.txt").unwrap();
        let body = Full::new(Bytes::from_static(b"ok"));
        storage
            .receive_file(
                "p",
                "n1",
                &name,
                &sha(b"ok"),
                body,
                &ServerLimits::default(),
            )
            .await
            .unwrap();
        storage
            .commit(
                "p",
                "n1",
                &manifest(Outcome::Succeeded, &[("ok.txt", b"ok")]),
            )
            .unwrap();
        assert!(!error_json.exists());
        assert!(
            dir.path()
                .join("results/plugins/p/results/n1/ok.txt")
                .exists()
        );
    }
}

//! Results on disk. Uploads stream into a temporary file while their digest is computed; a
//! file whose digest differs from its `Content-Digest` is deleted, never stored. Accepted files
//! wait in `staging/<plugin>/<node>/` under a name that records their size and digest, until a
//! manifest commits them.
//!
//! A commit is all or nothing, across a full disk and a crash. It links the named files into a
//! tree beside them (`commit-<id>/`, with `error.json` for a failed result) and writes the
//! agent's report beside it (`report-<id>`), and then writes (and syncs) the pair's commit record: that one atomic write is the commit point. Only then is the old result renamed
//! into `.trash/`, the new tree renamed into place and the staging directory cleared. Before the
//! record, any error removes the new tree and leaves the staged files for a retry; after it, a
//! stop is finished on the next start ([`Storage::recover`]), which also removes the trees of
//! commits that never reached their record.
//!
//! Staged files are flat, one directory per pair, and uploads in progress share one directory:
//! creating directories is the costliest file-system work an upload does (ext4 searches for a
//! spread-out inode for each), far more than writing a megabyte.
//!
//! ```text
//! <run dir>/staging/.incoming/<random>                                  uploads in progress
//! <run dir>/staging/.trash/<random>                                     replaced trees, being removed
//! <run dir>/staging/<plugin>/<node>/<sha256 of name>.<size>.<sha256>    accepted, not committed
//! <run dir>/staging/<plugin>/<node>/commit-<id>/<artifact>              a commit being assembled
//! <run dir>/staging/<plugin>/<node>/report-<id>                         its report, until it moves
//! <run dir>/results/plugins/<plugin>/results/<node>/...                 committed successes
//! <run dir>/results/plugins/<plugin>/errors/<node>/...                  committed failures, with error.json
//! <run dir>/results/meta/reports/<plugin>/<node>.json                   each run's report from the agent
//! ```

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use factbuoy_bundle::layout::{self, ResultKind};
use factbuoy_protocol::names::{ArtifactName, UnpackedNames};
use factbuoy_protocol::types::{
    MAX_PROGRESS_MESSAGE_BYTES, Outcome, ResultManifest, truncate_entries,
};
use http_body_util::BodyExt;
use sha2::{Digest, Sha256};

use factbuoy_protocol::types::PairStatus;

use super::config::ServerLimits;
use super::run_dir::{RunDir, sync_dir};
use super::state::{Committed, RunState, write_record};

/// Why an upload was refused. Each maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The body passed the largest file size it holds, in bytes (413).
    #[error("the body is larger than the limit of {0} bytes")]
    TooLarge(u64),
    /// No data arrived for the idle timeout it holds (408).
    #[error("the body stalled: no data for {0:?}")]
    Stalled(Duration),
    /// The average rate fell below the minimum once the grace had passed (408).
    #[error("the body is too slow: {rate} bytes/s, below the minimum of {minimum} bytes/s")]
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
    /// Two names of the manifest cannot both be unpacked (letter case, or file and directory).
    #[error("the manifest: {0}")]
    Collision(#[from] factbuoy_protocol::names::NameCollision),
    /// The file system failed before the commit took effect: nothing changed, and the staged
    /// files are kept for a retry.
    #[error(
        "storing the result: {0}; nothing was committed and the uploaded files are kept, commit again"
    )]
    Io(#[from] std::io::Error),
    /// The commit took effect (it is recorded) but its tree could not be moved into place; the
    /// next start of the aggregator finishes it.
    #[error("the result is recorded, but moving it into place failed: {1}")]
    Unfinished(Box<Committed>, std::io::Error),
}

impl CommitError {
    /// Whether the file system ran out of space (or inodes).
    pub fn is_disk_full(&self) -> bool {
        match self {
            CommitError::Io(e) | CommitError::Unfinished(_, e) => is_disk_full(e),
            _ => false,
        }
    }
}

/// Whether an I/O error says the disk is full (space or inodes, or the quota).
pub fn is_disk_full(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

/// Writes `body` into a new file at `path` at the pace `limits` asks, and keeps it only if it
/// is at most `limits.max_file_bytes` long and its sha-256 is `expected_sha256`; returns its
/// size. On any error the file is gone.
pub async fn write_verified<B>(
    body: &mut B,
    path: &Path,
    expected_sha256: &str,
    limits: &ServerLimits,
) -> Result<u64, UploadError>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let result = async {
        let mut file = std::fs::File::create(path)?;
        let mut hasher = Sha256::new();
        let mut size: u64 = 0;
        let mut pace = Pace::new(limits);
        while let Some(data) = pace.next(body).await? {
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
    if result.is_err() {
        let _ = std::fs::remove_file(path);
    }
    result
}

/// The pace rules every request body meets: no silence longer than the idle timeout, and once
/// the request is older than the grace, an average rate of at least the minimum.
pub struct Pace {
    started: Instant,
    received: u64,
    idle: Duration,
    grace: Duration,
    minimum: u64,
}

impl Pace {
    /// The rules of `limits`, counted from now.
    pub fn new(limits: &ServerLimits) -> Self {
        Pace {
            started: Instant::now(),
            received: 0,
            idle: Duration::from_secs(limits.idle_timeout_seconds),
            grace: Duration::from_secs(limits.upload_grace_seconds),
            minimum: limits.min_upload_bytes_per_second,
        }
    }

    /// The next piece of `body`, or `None` at its end. A body that is still sending when its
    /// rate falls below the minimum is cut off when the grace ends, not only at its next piece.
    pub async fn next<B>(&mut self, body: &mut B) -> Result<Option<Bytes>, UploadError>
    where
        B: hyper::body::Body<Data = Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        loop {
            // The latest moment the next piece may arrive: the idle timeout, or the time at
            // which what has arrived falls below the minimum rate, whichever comes first.
            let rate_deadline = match self.minimum {
                0 => Duration::MAX,
                minimum => self.grace.max(Duration::from_secs_f64(
                    (self.received + 1) as f64 / minimum as f64,
                )),
            };
            let idle_deadline = self.started.elapsed() + self.idle;
            let wait = rate_deadline
                .min(idle_deadline)
                .saturating_sub(self.started.elapsed());
            let frame = match tokio::time::timeout(wait, body.frame()).await {
                Err(_) if rate_deadline < idle_deadline => return Err(self.too_slow()),
                Err(_) => return Err(UploadError::Stalled(self.idle)),
                Ok(None) => return Ok(None),
                Ok(Some(Err(e))) => return Err(UploadError::Interrupted(e.to_string())),
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            self.received += data.len() as u64;
            let elapsed = self.started.elapsed();
            if elapsed > self.grace
                && (self.received as f64 / elapsed.as_secs_f64()) < self.minimum as f64
            {
                return Err(self.too_slow());
            }
            return Ok(Some(data));
        }
    }

    fn too_slow(&self) -> UploadError {
        let elapsed = self.started.elapsed().as_secs_f64().max(f64::EPSILON);
        UploadError::TooSlow {
            rate: (self.received as f64 / elapsed) as u64,
            minimum: self.minimum,
        }
    }
}

/// Uploads and results of one run on disk: the staging area and the results tree.
pub struct Storage {
    run_dir: RunDir,
    staging: PathBuf,
    results: PathBuf,
    /// One lock per pair, held while a received file is put in place and while a commit builds,
    /// records and moves its tree: an upload landing in a pair's directory as a commit removes
    /// it would be lost. Pairs never wait for each other.
    pairs: std::sync::Mutex<PairLocks>,
}

/// (plugin, node label) -> the pair's lock; only pairs the run expects get one.
type PairLocks = HashMap<(String, String), Arc<tokio::sync::Mutex<()>>>;

/// A pair's lock, held for as long as it lives.
pub type PairGuard = tokio::sync::OwnedMutexGuard<()>;

impl Storage {
    /// Storage below `run_dir`. Uploads a previous process left half-done are deleted: their
    /// agents never got a 201 and send them again. Call [`Storage::recover`] before serving.
    pub fn open(run_dir: &RunDir) -> std::io::Result<Self> {
        let storage = Storage {
            run_dir: run_dir.clone(),
            staging: run_dir.staging(),
            results: run_dir.results(),
            pairs: std::sync::Mutex::new(HashMap::new()),
        };
        let incoming = storage.incoming();
        if incoming.exists() {
            std::fs::remove_dir_all(&incoming)?;
        }
        std::fs::create_dir_all(&incoming)?;
        std::fs::create_dir_all(storage.trash())?;
        Ok(storage)
    }

    /// Finishes or rolls back what a stopped aggregator had in flight, as `state` (read back from
    /// the commit records) says: a commit whose record was written is finished (its tree moved
    /// into place), one whose record was not is undone (its half-built tree removed; the staged
    /// files stay, so the agent's retry succeeds). Then empties the trash.
    pub fn recover(&self, state: &RunState) -> std::io::Result<()> {
        for (plugin, nodes) in &state.pairs {
            for (scope, pair) in nodes {
                let label = scope.label();
                if let Some(committed) = &pair.committed
                    && !committed.commit_id.is_empty()
                    && self.assembly(plugin, label, &committed.commit_id).exists()
                {
                    tracing::info!(
                        "finishing the commit of {plugin} for {label} cut short by a stop"
                    );
                    self.finish(plugin, label, committed)?;
                }
            }
        }
        for plugin in read_dir_names(&self.staging)? {
            if plugin.starts_with('.') {
                continue;
            }
            let plugin_dir = self.staging.join(&plugin);
            for label in read_dir_names(&plugin_dir)? {
                let pair_dir = plugin_dir.join(&label);
                for entry in read_dir_names(&pair_dir)? {
                    if entry.starts_with(ASSEMBLY) || entry.starts_with(REPORT) {
                        tracing::info!(
                            "undoing a commit of {plugin} for {label} cut short by a stop"
                        );
                        remove_any(&pair_dir.join(entry))?;
                    }
                }
            }
        }
        self.empty_trash()
    }

    /// Waits for the lock of a pair; see [`Storage::commit`].
    pub async fn lock_pair(&self, plugin: &str, label: &str) -> PairGuard {
        let lock = self
            .pairs
            .lock()
            .unwrap()
            .entry((plugin.to_owned(), label.to_owned()))
            .or_default()
            .clone();
        lock.lock_owned().await
    }

    fn incoming(&self) -> PathBuf {
        // A dot keeps it apart from plugin names, which start with a letter or digit.
        self.staging.join(".incoming")
    }

    /// Old trees and spent staging directories, renamed here in one step and then removed.
    fn trash(&self) -> PathBuf {
        self.staging.join(".trash")
    }

    fn staging(&self, plugin: &str, label: &str) -> PathBuf {
        self.staging.join(plugin).join(label)
    }

    fn assembly(&self, plugin: &str, label: &str, commit_id: &str) -> PathBuf {
        self.staging(plugin, label)
            .join(format!("{ASSEMBLY}{commit_id}"))
    }

    fn pending_report(&self, plugin: &str, label: &str, commit_id: &str) -> PathBuf {
        self.staging(plugin, label)
            .join(format!("{REPORT}{commit_id}"))
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
        let size = write_verified(&mut body, &temporary, expected_sha256, limits).await?;
        let staging = self.staging(plugin, label);
        let _settling = self.lock_pair(plugin, label).await;
        let placed = std::fs::create_dir_all(&staging).and_then(|()| {
            std::fs::rename(
                &temporary,
                staging.join(StagedFile::file_name(name, size, expected_sha256)),
            )
        });
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&temporary);
            return Err(e.into());
        }
        Ok(size)
    }

    /// Deletes a staged upload that arrived after its pair's result was completed, and the pair's
    /// staging folder if that leaves it empty. A file the commit already took is not there.
    /// Call it holding the pair's lock ([`Storage::lock_pair`]).
    pub fn discard(
        &self,
        plugin: &str,
        label: &str,
        name: &ArtifactName,
        size: u64,
        sha256: &str,
    ) -> std::io::Result<()> {
        let staging = self.staging(plugin, label);
        match std::fs::remove_file(staging.join(StagedFile::file_name(name, size, sha256))) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        // Fails, as it should, while other uploads wait there.
        let _ = std::fs::remove_dir(&staging);
        Ok(())
    }

    /// Commits the staged files the manifest names, replacing an earlier failed result, all or
    /// nothing. The result's tree is assembled from links beside the staged files;
    /// writing the commit record is the one step that makes it take effect; the tree is then
    /// renamed into place. An error before the record leaves everything as it was (the staged
    /// files stay, a retry succeeds); a stop after it is finished by [`Storage::recover`].
    ///
    /// Blocking file-system work: call it off the async executor, holding the pair's lock.
    pub fn commit(
        &self,
        plugin: &str,
        label: &str,
        manifest: &ResultManifest,
    ) -> Result<Committed, CommitError> {
        let staging = self.staging(plugin, label);
        let staged = StagedFile::list(&staging)?;
        let mut files = BTreeMap::new();
        for entry in &manifest.files {
            let name = ArtifactName::parse(&entry.name)?;
            let key = StagedFile::name_key(&name);
            let versions = staged.get(&key).map(Vec::as_slice).unwrap_or_default();
            if !versions
                .iter()
                .any(|(size, sha256)| *size == entry.size && *sha256 == entry.sha256)
            {
                let Some((size, sha256)) = versions.first() else {
                    return Err(CommitError::MissingFile(entry.name.clone()));
                };
                return Err(CommitError::Mismatch {
                    name: entry.name.clone(),
                    expected: format!("{} bytes with sha-256 {}", entry.size, entry.sha256),
                    actual: format!("{size} bytes with sha-256 {sha256}"),
                });
            }
            files.insert(entry.name.clone(), (name, entry.size, entry.sha256.clone()));
        }
        let mut unpacked = UnpackedNames::default();
        for (name, _, _) in files.values() {
            unpacked.insert(name)?;
        }
        let commit_id = format!("{:016x}", rand::random::<u64>());
        let assembly = self.assembly(plugin, label, &commit_id);
        let report = self.pending_report(plugin, label, &commit_id);
        let built = (|| {
            std::fs::create_dir_all(&assembly)?;
            for (name, size, sha256) in files.values() {
                let linked = assembly.join(name.to_relative_path());
                std::fs::create_dir_all(linked.parent().expect("artifact paths have a parent"))?;
                std::fs::hard_link(
                    staging.join(StagedFile::file_name(name, *size, sha256)),
                    &linked,
                )?;
            }
            if manifest.outcome == Outcome::Failed {
                let error = serde_json::json!({
                    "error": manifest.error.clone().unwrap_or_else(|| "the plugin failed".to_owned()),
                    "plugin_version": manifest.plugin_version,
                });
                write_new(&assembly.join(layout::ERROR_FILE), &error)?;
            }
            if let Some(text) = &manifest.report {
                write_new(&report, text)?;
            }
            std::io::Result::Ok(())
        })();
        if let Err(e) = built {
            let _ = remove_any(&assembly);
            let _ = remove_any(&report);
            return Err(e.into());
        }
        let committed = Committed {
            outcome: manifest.outcome,
            files: files
                .into_iter()
                .map(|(text, (_, size, sha256))| (text, (size, sha256)))
                .collect(),
            synthetic: false,
            commit_id,
            report: manifest.report.is_some(),
            error: (manifest.outcome == Outcome::Failed).then(|| {
                cut_message(
                    manifest
                        .error
                        .as_deref()
                        .unwrap_or("the plugin failed and sent no reason"),
                )
            }),
            warnings: report_warnings(manifest.report.as_ref()),
        };
        self.take_effect(plugin, label, PairStatus::Complete, &committed)?;
        Ok(committed)
    }

    /// Writes an error result the aggregator made up (lost node, run timeout), as a commit.
    /// Blocking, as [`Storage::commit`].
    pub fn synthetic_error(
        &self,
        plugin: &str,
        label: &str,
        status: PairStatus,
        message: &str,
    ) -> Result<Committed, CommitError> {
        let commit_id = format!("{:016x}", rand::random::<u64>());
        let assembly = self.assembly(plugin, label, &commit_id);
        let built = std::fs::create_dir_all(&assembly).and_then(|()| {
            write_new(
                &assembly.join(layout::ERROR_FILE),
                &serde_json::json!({ "error": message }),
            )
        });
        if let Err(e) = built {
            let _ = remove_any(&assembly);
            return Err(e.into());
        }
        let committed = Committed {
            outcome: Outcome::Failed,
            files: BTreeMap::new(),
            synthetic: true,
            commit_id,
            report: false,
            error: Some(cut_message(message)),
            warnings: Vec::new(),
        };
        self.take_effect(plugin, label, status, &committed)?;
        Ok(committed)
    }

    /// Writes the record (the commit point) of an assembled tree, then finishes.
    fn take_effect(
        &self,
        plugin: &str,
        label: &str,
        status: PairStatus,
        committed: &Committed,
    ) -> Result<(), CommitError> {
        let assembly = self.assembly(plugin, label, &committed.commit_id);
        let report = self.pending_report(plugin, label, &committed.commit_id);
        let prepared = (|| {
            // Everything the finish creates, made now: after the record only renames remain.
            for outcome in [Outcome::Succeeded, Outcome::Failed] {
                let destination = self.destination(plugin, label, outcome);
                std::fs::create_dir_all(destination.parent().expect("destination has a parent"))?;
            }
            let report_path = self.results.join(layout::report(plugin, label));
            std::fs::create_dir_all(report_path.parent().expect("report paths have a parent"))?;
            // No fsync of the files: a sync per commit waits for every dirty page of the file
            // system (seconds under load). The record is synced; a crash of the process loses
            // nothing the page cache holds.
            write_record(&self.run_dir, plugin, label, status, committed)
        })();
        if let Err(e) = prepared {
            let _ = remove_any(&assembly);
            let _ = remove_any(&report);
            return Err(e.into());
        }
        // The commit has taken effect. A failure from here on is finished by the next start.
        self.finish(plugin, label, committed)
            .map_err(|e| CommitError::Unfinished(Box::new(committed.clone()), e))
    }

    /// Moves a recorded commit's tree and report into place, replacing the pair's earlier
    /// result, and clears its staging directory. Every step may be repeated after a stop: the
    /// assembled tree, renamed last, says whether it is done.
    fn finish(&self, plugin: &str, label: &str, committed: &Committed) -> std::io::Result<()> {
        let assembly = self.assembly(plugin, label, &committed.commit_id);
        if assembly.exists() {
            let report = self.pending_report(plugin, label, &committed.commit_id);
            let report_path = self.results.join(layout::report(plugin, label));
            if report.exists() {
                std::fs::rename(&report, &report_path)?;
            } else if !committed.report {
                remove_any(&report_path)?;
            }
            for outcome in [Outcome::Succeeded, Outcome::Failed] {
                let old = self.destination(plugin, label, outcome);
                if old.exists() {
                    std::fs::rename(&old, self.trash_entry())?;
                }
            }
            let destination = self.destination(plugin, label, committed.outcome);
            std::fs::rename(&assembly, &destination)?;
            sync_dir(destination.parent().expect("destination has a parent"))?;
        }
        let staging = self.staging(plugin, label);
        if staging.exists() {
            std::fs::rename(&staging, self.trash_entry())?;
        }
        self.empty_trash()
    }

    fn trash_entry(&self) -> PathBuf {
        self.trash().join(format!("{:016x}", rand::random::<u64>()))
    }

    fn empty_trash(&self) -> std::io::Result<()> {
        for entry in read_dir_names(&self.trash())? {
            remove_any(&self.trash().join(entry))?;
        }
        Ok(())
    }
}

/// Prefix of a commit's tree being assembled in a pair's staging directory.
const ASSEMBLY: &str = "commit-";
/// Prefix of a commit's report waiting beside its tree.
const REPORT: &str = "report-";

/// Writes `value` as JSON into a file that must not exist yet (never through a link to a staged
/// file).
fn write_new(path: &Path, value: &impl serde::Serialize) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::File::create_new(path)?;
    file.write_all(&serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?)
}

/// Removes a file or a tree; nothing there is fine.
fn remove_any(path: &Path) -> std::io::Result<()> {
    let removed = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match removed {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// The names in a directory; none if it does not exist.
fn read_dir_names(dir: &Path) -> std::io::Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut names = Vec::new();
    for entry in entries {
        names.push(entry?.file_name().to_string_lossy().into_owned());
    }
    Ok(names)
}

/// An accepted upload waiting for its commit. Its file name carries what the commit checks, so
/// nothing beside the file has to be written or kept in step with it.
/// Its name is `<sha-256 of the artifact name>.<size>.<sha-256>`: artifact names may be longer
/// than a file name can be.
struct StagedFile;

impl StagedFile {
    fn name_key(name: &ArtifactName) -> String {
        hex::encode(Sha256::digest(name.as_str().as_bytes()))
    }

    fn file_name(name: &ArtifactName, size: u64, sha256: &str) -> String {
        format!("{}.{size}.{sha256}", Self::name_key(name))
    }

    /// The staged files of one pair by name key, each with its versions' size and sha-256;
    /// none if nothing was uploaded.
    fn list(staging: &Path) -> std::io::Result<HashMap<String, Vec<(u64, String)>>> {
        let mut staged: HashMap<String, Vec<(u64, String)>> = HashMap::new();
        for file_name in read_dir_names(staging)? {
            let mut parts = file_name.split('.');
            if let (Some(name_key), Some(Ok(size)), Some(sha256), None) = (
                parts.next(),
                parts.next().map(str::parse),
                parts.next(),
                parts.next(),
            ) {
                staged
                    .entry(name_key.to_owned())
                    .or_default()
                    .push((size, sha256.to_owned()));
            }
        }
        Ok(staged)
    }
}

/// An error message as the status document carries it: at most a progress message's length.
fn cut_message(message: &str) -> String {
    let mut message = message.to_owned();
    factbuoy_protocol::types::truncate(&mut message, MAX_PROGRESS_MESSAGE_BYTES);
    message
}

/// The warnings and errors of an agent's run report (its `warnings` and `errors` lists of
/// text), capped for the status document: the agent is not trusted to keep them small (the
/// manifest as a whole is bounded by the request size limit).
fn report_warnings(report: Option<&serde_json::Value>) -> Vec<String> {
    let Some(report) = report else {
        return Vec::new();
    };
    let mut warnings: Vec<String> = ["errors", "warnings"]
        .iter()
        .filter_map(|key| report.get(key)?.as_array())
        .flatten()
        .filter_map(|entry| entry.as_str())
        .map(str::to_owned)
        .collect();
    truncate_entries(&mut warnings);
    warnings
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
        // A commit a crash cut short left its half-built tree; the next one builds its own.
        std::fs::create_dir_all(dir.path().join("staging/p/n1/commit-0123/stray")).unwrap();
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

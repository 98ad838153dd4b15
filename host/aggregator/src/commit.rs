//! Commits: a manifest turns a pair's staged files (the crate's `upload`) into its result, in
//! the bundle's layout; the watchdog commits error results the same way (a lost node, the run
//! timeout).
//!
//! A commit is all or nothing, across a full disk and a crash. It links the named files into a
//! tree beside them (`commit-<id>/`, with `error.json` for a failed result) and writes the
//! agent's report beside it (`report-<id>`), and then writes (and syncs) the pair's commit
//! record (`persistence::records`): that one atomic write is the commit point. Only then is the
//! old result renamed into `.trash/`, the new tree renamed into place and the staging directory
//! cleared. Before the record, any error removes the new tree and leaves the staged files for a
//! retry; after it, a stop is finished on the next start ([`ResultStore::recover`]), which also
//! removes the trees of commits that never reached their record.
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
//! <run dir>/commits/<plugin>/<node>.json                                the commit record
//! ```

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use factbuoy_bundle::layout::{self, ResultKind};
use factbuoy_protocol::names::{ArtifactName, UnpackedNames};
use factbuoy_protocol::types::{
    MAX_PROGRESS_MESSAGE_BYTES, Outcome, PairStatus, ResultManifest, truncate_entries,
};

use crate::model::pair::Committed;
use crate::model::state::RunState;
use crate::persistence::files::{is_disk_full, read_dir_names, remove_any, sync_dir};
use crate::persistence::run_dir::RunDir;
use crate::upload::{StagedFile, Staging};

/// Why a manifest could not be committed (answered with 400).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CommitError {
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
    pub(crate) fn is_disk_full(&self) -> bool {
        match self {
            CommitError::Io(e) | CommitError::Unfinished(_, e) => is_disk_full(e),
            _ => false,
        }
    }
}

/// The results of one run on disk: the staging area its commits take files from, and the
/// results tree that becomes the bundle.
pub(crate) struct ResultStore {
    run_dir: RunDir,
    staging: Staging,
    results: PathBuf,
}

impl ResultStore {
    /// The results of the run in `run_dir`, with its staging area ([`Staging::open`]). Call
    /// [`ResultStore::recover`] before serving.
    pub(crate) fn open(run_dir: &RunDir) -> std::io::Result<Self> {
        let store = ResultStore {
            run_dir: run_dir.clone(),
            staging: Staging::open(run_dir)?,
            results: run_dir.results(),
        };
        std::fs::create_dir_all(store.trash())?;
        Ok(store)
    }

    /// The staging area: uploads, and the pairs' locks.
    pub(crate) fn staging(&self) -> &Staging {
        &self.staging
    }

    /// Finishes or rolls back what a stopped aggregator had in flight, as `state` (read back from
    /// the commit records) says: a commit whose record was written is finished (its tree moved
    /// into place), one whose record was not is undone (its half-built tree removed; the staged
    /// files stay, so the agent's retry succeeds). Then empties the trash.
    pub(crate) fn recover(&self, state: &RunState) -> std::io::Result<()> {
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
        for plugin in read_dir_names(self.staging.root())? {
            if plugin.starts_with('.') {
                continue;
            }
            let plugin_dir = self.staging.root().join(&plugin);
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

    /// Old trees and spent staging directories, renamed here in one step and then removed.
    fn trash(&self) -> PathBuf {
        self.staging.root().join(".trash")
    }

    fn assembly(&self, plugin: &str, label: &str, commit_id: &str) -> PathBuf {
        self.staging
            .pair_dir(plugin, label)
            .join(format!("{ASSEMBLY}{commit_id}"))
    }

    fn pending_report(&self, plugin: &str, label: &str, commit_id: &str) -> PathBuf {
        self.staging
            .pair_dir(plugin, label)
            .join(format!("{REPORT}{commit_id}"))
    }

    /// The tree that becomes the bundle.
    pub(crate) fn bundle_root(&self) -> &Path {
        &self.results
    }

    fn destination(&self, plugin: &str, label: &str, outcome: Outcome) -> PathBuf {
        let kind = match outcome {
            Outcome::Succeeded => ResultKind::Results,
            Outcome::Failed => ResultKind::Errors,
        };
        self.results.join(layout::result_dir(plugin, label, kind))
    }

    /// Commits the staged files the manifest names, replacing an earlier failed result, all or
    /// nothing. The result's tree is assembled from links beside the staged files;
    /// writing the commit record is the one step that makes it take effect; the tree is then
    /// renamed into place. An error before the record leaves everything as it was (the staged
    /// files stay, a retry succeeds); a stop after it is finished by [`ResultStore::recover`].
    ///
    /// Blocking file-system work: call it off the async executor, holding the pair's lock.
    pub(crate) fn commit(
        &self,
        plugin: &str,
        label: &str,
        manifest: &ResultManifest,
    ) -> Result<Committed, CommitError> {
        let staging = self.staging.pair_dir(plugin, label);
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
    /// Blocking, as [`ResultStore::commit`].
    pub(crate) fn synthetic_error(
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
            self.run_dir
                .write_commit_record(plugin, label, status, committed)
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
        let staging = self.staging.pair_dir(plugin, label);
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
    use bytes::Bytes;
    use factbuoy_protocol::types::ManifestFile;
    use http_body_util::Full;
    use sha2::{Digest, Sha256};

    use super::*;
    use crate::model::config::ServerLimits;
    use crate::upload::UploadError;

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
        let storage = ResultStore::open(&RunDir::new(dir.path())).unwrap();
        let limits = ServerLimits::default();
        let name = ArtifactName::parse("logs/a.json").unwrap();
        let body = Full::new(Bytes::from_static(b"payload"));
        let wrong = sha(b"other");
        let error = storage
            .staging()
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
            .staging()
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
        let storage = ResultStore::open(&RunDir::new(dir.path())).unwrap();
        let limits = ServerLimits {
            max_file_bytes: 4,
            ..ServerLimits::default()
        };
        let name = ArtifactName::parse("a").unwrap();
        let body = Full::new(Bytes::from_static(b"12345"));
        let error = storage
            .staging()
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
        let storage = ResultStore::open(&RunDir::new(dir.path())).unwrap();
        let name = ArtifactName::parse("deep/er/a.json").unwrap();
        let body = Full::new(Bytes::from_static(b"first"));
        storage
            .staging()
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
        let storage = ResultStore::open(&RunDir::new(dir.path())).unwrap();
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
            .staging()
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

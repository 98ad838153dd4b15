//! Removing the directories local runs left in the state directory. A finished run is already
//! retired to its configuration and final status (its bundle holds the rest); pruning removes
//! those. Runs that ended without a bundle (a full disk, a killed process) hold the only copy of
//! their results: they are kept unless asked otherwise.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use serde::Serialize;

use factbuoy_aggregator::RunDir;

use factbuoy_protocol::types::{ResultStatus, StatusDocument, wire_name};

use crate::follow::ended;
use crate::state::StateDir;

/// How long pruning waits for a run's operator listener before taking its process for dead.
const LIVENESS_TIMEOUT: Duration = Duration::from_secs(1);

/// What to prune.
#[derive(Debug, Clone, Default)]
pub struct PruneOptions {
    /// Only runs whose state last changed longer ago than this.
    pub older_than: Duration,
    /// List what would be removed, and remove nothing.
    pub dry_run: bool,
    /// Also remove runs that ended without a bundle: their directory holds their only results.
    pub all: bool,
}

/// A run directory pruning removes, or keeps for want of [`PruneOptions::all`].
#[derive(Debug, Serialize)]
pub struct Pruned {
    /// The run's id.
    pub run_id: String,
    /// Its directory.
    pub run_dir: PathBuf,
    /// `complete`, `failed`, or `abandoned` (its aggregator died before the run ended).
    pub status: String,
    /// How many of its results failed.
    pub failed_results: usize,
    /// Whether the run's bundle was written: else its directory holds its only results.
    pub bundled: bool,
}

/// What pruning did (or would do): JSON `{"removed": [...], "kept": [...]}`.
#[derive(Debug, Default, Serialize)]
pub struct Pruning {
    /// Runs removed.
    pub removed: Vec<Pruned>,
    /// Runs that ended without a bundle, kept.
    pub kept: Vec<Pruned>,
}

/// Prunes the local runs in `state`'s runs directory that ended.
pub fn prune(state: &StateDir, options: &PruneOptions) -> anyhow::Result<Pruning> {
    let root = state.local_runs();
    let entries = match std::fs::read_dir(&root) {
        Ok(entries) => entries.collect::<Result<Vec<_>, _>>()?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e).with_context(|| format!("listing {}", root.display())),
    };
    let now = SystemTime::now();
    let mut pruning = Pruning::default();
    for entry in entries {
        let dir = RunDir::new(entry.path());
        let Some(run) = ended_run(&dir)? else {
            continue;
        };
        let changed = std::fs::metadata(dir.state())
            .or_else(|_| std::fs::metadata(dir.root()))?
            .modified()?;
        if now.duration_since(changed).unwrap_or_default() < options.older_than {
            continue;
        }
        if !run.bundled && !options.all {
            pruning.kept.push(run);
            continue;
        }
        if !options.dry_run {
            std::fs::remove_dir_all(dir.root())
                .with_context(|| format!("removing {}", dir.root().display()))?;
            state.forget_if_current(dir.root())?;
        }
        pruning.removed.push(run);
    }
    Ok(pruning)
}

/// The run in `dir`, if it has ended: retired, saved as complete or failed, or abandoned (its
/// operator listener no longer answers). `None` for a run still going, and for a directory
/// that holds no run.
fn ended_run(dir: &RunDir) -> anyhow::Result<Option<Pruned>> {
    let Ok(config) = dir.load_config() else {
        return Ok(None);
    };
    let run = |document: &StatusDocument| Pruned {
        run_id: config.run_id.clone(),
        run_dir: dir.root().to_owned(),
        status: wire_name(&document.status),
        failed_results: document
            .plugins
            .iter()
            .filter(|p| p.result_status == Some(ResultStatus::Failed))
            .count(),
        bundled: document.tar_info.is_some(),
    };
    if let Some(document) = dir.load_final_status()? {
        return Ok(Some(run(&document)));
    }
    let document = dir.saved_status()?;
    if ended(document.status) {
        return Ok(Some(run(&document)));
    }
    // The configuration holds the port the listener bound at its first start.
    let answering =
        std::net::TcpStream::connect_timeout(&config.operator_listen, LIVENESS_TIMEOUT).is_ok();
    Ok((!answering).then(|| Pruned {
        status: "abandoned".to_owned(),
        bundled: false,
        ..run(&document)
    }))
}

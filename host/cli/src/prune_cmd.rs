//! `factbuoy prune`: removes the directories local runs left in the state directory. A
//! finished run is already retired to its configuration and final status (its bundle holds the
//! rest); prune removes those. Runs that ended without a bundle (a full disk, a killed process)
//! hold the only copy of their results: prune keeps them unless told `--all`.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use clap::Args;
use serde::Serialize;

use factbuoy_aggregator::RunDir;
use factbuoy_protocol::types::RunStatus;

use crate::output::{ExitStatus, Format, emit, emit_document};
use crate::runs;
use crate::summary::wire_name;

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    factbuoy prune --dry-run          # what would be removed\n  \
    factbuoy prune --older-than 7d    # runs that ended more than a week ago\n  \
    factbuoy prune --all              # runs without a bundle too (their results go with them)")]
pub struct PruneArgs {
    /// Only runs whose state last changed longer ago than this, e.g. 12h or 7d.
    #[arg(long, default_value = "0s")]
    older_than: humantime::Duration,
    /// List what would be removed, and remove nothing.
    #[arg(long)]
    dry_run: bool,
    /// Also remove runs that ended without a bundle (a full disk, a killed process): their
    /// directory holds the only copy of their results.
    #[arg(long)]
    all: bool,
}

/// A run directory prune removes, or keeps for want of `--all`.
#[derive(Debug, Serialize)]
struct Pruned {
    run_id: String,
    run_dir: PathBuf,
    /// `complete`, `failed`, or `abandoned` (its aggregator died before the run ended).
    status: String,
    /// Whether the run's bundle was written: else its directory holds its only results.
    bundled: bool,
}

/// What prune did: JSON `{"removed": [...], "kept": [...]}`.
#[derive(Debug, Default, Serialize)]
struct Pruning {
    removed: Vec<Pruned>,
    kept: Vec<Pruned>,
}

/// How long prune waits for a run's operator listener before taking its process for dead.
const LIVENESS_TIMEOUT: Duration = Duration::from_secs(1);

pub fn prune(args: PruneArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let root = runs::local_runs_dir()?;
    let entries = match std::fs::read_dir(&root) {
        Ok(entries) => entries.collect::<Result<Vec<_>, _>>()?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e).with_context(|| format!("listing {}", root.display())),
    };
    let now = SystemTime::now();
    let mut pruning = Pruning::default();
    for entry in entries {
        let dir = RunDir::new(entry.path());
        let Some(run) = ended(&dir)? else {
            continue;
        };
        let changed = std::fs::metadata(dir.state())
            .or_else(|_| std::fs::metadata(dir.root()))?
            .modified()?;
        if now.duration_since(changed).unwrap_or_default() < *args.older_than {
            continue;
        }
        if !run.bundled && !args.all {
            pruning.kept.push(run);
            continue;
        }
        if !args.dry_run {
            std::fs::remove_dir_all(dir.root())
                .with_context(|| format!("removing {}", dir.root().display()))?;
            runs::forget_if_current(dir.root())?;
        }
        pruning.removed.push(run);
    }
    match format {
        Format::Table => {
            let verb = if args.dry_run {
                "would remove"
            } else {
                "removed"
            };
            let mut lines: Vec<String> = pruning
                .removed
                .iter()
                .map(|p| {
                    format!(
                        "{verb} run {} ({}): {}",
                        p.run_id,
                        p.status,
                        p.run_dir.display()
                    )
                })
                .collect();
            lines.extend(pruning.kept.iter().map(|p| {
                format!(
                    "kept run {} ({}, no bundle): its results are only in {}; --all removes it",
                    p.run_id,
                    p.status,
                    p.run_dir.display()
                )
            }));
            if lines.is_empty() {
                lines.push("nothing to prune".to_owned());
            }
            emit(&lines.join("\n"));
        }
        machine => emit_document(&pruning, machine),
    }
    Ok(ExitStatus::Success)
}

/// The run in `dir`, if it has ended: retired, saved as complete or failed, or abandoned (its
/// operator listener no longer answers). `None` for a run still going, and for a directory
/// that holds no run.
fn ended(dir: &RunDir) -> anyhow::Result<Option<Pruned>> {
    let Ok(config) = dir.load_config() else {
        return Ok(None);
    };
    let run = |status: String, bundled: bool| Pruned {
        run_id: config.run_id.clone(),
        run_dir: dir.root().to_owned(),
        status,
        bundled,
    };
    if let Some(document) = dir.load_final_status()? {
        let bundled = document.tar_info.is_some();
        return Ok(Some(run(wire_name(&document.status), bundled)));
    }
    let saved = dir.saved_status()?;
    if matches!(saved.status, RunStatus::Complete | RunStatus::Failed) {
        return Ok(Some(run(
            wire_name(&saved.status),
            saved.tar_info.is_some(),
        )));
    }
    // The configuration holds the port the listener bound at its first start.
    let answering =
        std::net::TcpStream::connect_timeout(&config.operator_listen, LIVENESS_TIMEOUT).is_ok();
    Ok((!answering).then(|| run("abandoned".to_owned(), false)))
}

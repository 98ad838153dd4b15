//! `factbuoy prune`: removes the directories local runs left in the state directory. A
//! finished run is already retired to its configuration and final status (its bundle holds the
//! rest); prune removes those too, and the directories of runs whose process died.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use clap::Args;
use serde::Serialize;

use factbuoy_aggregator::RunDir;
use factbuoy_aggregator::config::RunConfig;
use factbuoy_aggregator::state::RunState;
use factbuoy_protocol::types::RunStatus;

use crate::output::{ExitStatus, Format, emit, emit_document};
use crate::runs;

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    factbuoy prune --dry-run          # what would be removed\n  \
    factbuoy prune --older-than 7d    # runs that ended more than a week ago")]
pub struct PruneArgs {
    /// Only runs whose state last changed longer ago than this, e.g. 12h or 7d.
    #[arg(long, default_value = "0s")]
    older_than: humantime::Duration,
    /// List what would be removed, and remove nothing.
    #[arg(long)]
    dry_run: bool,
}

/// A run directory prune removes.
#[derive(Debug, Serialize)]
struct Pruned {
    run_id: String,
    run_dir: PathBuf,
    /// `complete`, `failed`, or `abandoned` (its aggregator died before the run ended).
    status: String,
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
    let mut pruned = Vec::new();
    for entry in entries {
        let dir = RunDir::new(entry.path());
        let Some((run_id, status)) = ended(&dir)? else {
            continue;
        };
        let changed = std::fs::metadata(dir.state())
            .or_else(|_| std::fs::metadata(dir.root()))?
            .modified()?;
        if now.duration_since(changed).unwrap_or_default() < *args.older_than {
            continue;
        }
        if !args.dry_run {
            std::fs::remove_dir_all(dir.root())
                .with_context(|| format!("removing {}", dir.root().display()))?;
            runs::forget_if_current(dir.root())?;
        }
        pruned.push(Pruned {
            run_id,
            run_dir: dir.root().to_owned(),
            status,
        });
    }
    match format {
        Format::Table => {
            let verb = if args.dry_run {
                "would remove"
            } else {
                "removed"
            };
            for p in &pruned {
                emit(&format!(
                    "{verb} run {} ({}): {}",
                    p.run_id,
                    p.status,
                    p.run_dir.display()
                ));
            }
            if pruned.is_empty() {
                emit("nothing to prune");
            }
        }
        machine => emit_document(&pruned, machine),
    }
    Ok(ExitStatus::Success)
}

/// The run id and final status of the run in `dir`, if it has ended: retired, saved as
/// complete or failed, or abandoned (its operator listener no longer answers). `None` for a run
/// still going, and for a directory that holds no run.
fn ended(dir: &RunDir) -> anyhow::Result<Option<(String, String)>> {
    let Ok(config) = RunConfig::load(dir) else {
        return Ok(None);
    };
    if let Some(document) = dir.load_final_status()? {
        return Ok(Some((
            config.run_id,
            crate::summary::wire_name(&document.status),
        )));
    }
    let state = RunState::load(dir, &config)?;
    if matches!(state.status, RunStatus::Complete | RunStatus::Failed) {
        return Ok(Some((
            config.run_id,
            crate::summary::wire_name(&state.status),
        )));
    }
    // The configuration holds the port the listener bound at its first start.
    let answering =
        std::net::TcpStream::connect_timeout(&config.operator_listen, LIVENESS_TIMEOUT).is_ok();
    Ok((!answering).then(|| (config.run_id, "abandoned".to_owned())))
}

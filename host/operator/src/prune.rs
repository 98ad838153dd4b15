//! Removing the directories finished runs left: local runs in the state directory ([`prune`]),
//! a fleet's runs in its directory, with their bundles ([`prune_fleet`]). A finished run is
//! already retired to its configuration and final status (its bundle holds the rest); pruning
//! removes those. Runs that ended without a bundle (a full disk, a killed process) hold the only
//! copy of their results: they are kept unless asked otherwise.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use serde::Serialize;

use factbuoy_aggregator::RunDir;
use factbuoy_aggregator::fleet::FleetDir;

use factbuoy_protocol::types::{ResultStatus, StatusDocument, wire_name};

use crate::follow::{ended, local_status};
use crate::state::StateDir;

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
    /// The bundle pruning removes with the run (a fleet's run, whose bundle the fleet keeps);
    /// a local run's bundle is in the folder its operator chose, and stays.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle: Option<PathBuf>,
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
    prune_runs(
        &state.local_runs(),
        None,
        options,
        Unfinished::AbandonedIfSilent,
        |dir| state.forget_if_current(dir.root()),
    )
}

/// Prunes the runs of the fleet in `fleet` that ended, each with its bundle in the fleet's
/// `bundles/`. A run still running is left alone, whether the fleet serves it now or will when
/// it starts again. It may prune while the fleet serves: a pruned run's bundle can no longer
/// be downloaded.
pub fn prune_fleet(fleet: &FleetDir, options: &PruneOptions) -> anyhow::Result<Pruning> {
    prune_runs(
        &fleet.runs(),
        Some(&fleet.bundles()),
        options,
        Unfinished::Kept,
        |_| Ok(()),
    )
}

/// What a run that did not end, as its directory says, is taken for.
#[derive(Clone, Copy)]
enum Unfinished {
    /// Abandoned when its operator listener does not answer (a local run's process died).
    AbandonedIfSilent,
    /// Still going (a fleet's run: the fleet serves it again when it starts).
    Kept,
}

/// Prunes the runs in the directories under `root` that ended, and their bundles in `bundles`
/// when given; `forget` is told of each run directory removed.
fn prune_runs(
    root: &Path,
    bundles: Option<&Path>,
    options: &PruneOptions,
    unfinished: Unfinished,
    forget: impl Fn(&RunDir) -> anyhow::Result<()>,
) -> anyhow::Result<Pruning> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries.collect::<Result<Vec<_>, _>>()?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e).with_context(|| format!("listing {}", root.display())),
    };
    let now = SystemTime::now();
    let mut pruning = Pruning::default();
    for entry in entries {
        let dir = RunDir::new(entry.path());
        let Some((mut run, bundle_name)) = ended_run(&dir, unfinished)? else {
            continue;
        };
        // The last change: the retirement, else the run's own state.
        let changed = std::fs::metadata(dir.final_status())
            .or_else(|_| std::fs::metadata(dir.state()))
            .or_else(|_| std::fs::metadata(dir.root()))?
            .modified()?;
        if now.duration_since(changed).unwrap_or_default() < options.older_than {
            continue;
        }
        if !run.bundled && !options.all {
            pruning.kept.push(run);
            continue;
        }
        run.bundle = bundles
            .zip(bundle_name)
            .map(|(bundles, name)| bundles.join(name))
            .filter(|bundle| bundle.exists());
        if !options.dry_run {
            std::fs::remove_dir_all(dir.root())
                .with_context(|| format!("removing {}", dir.root().display()))?;
            forget(&dir)?;
            if let Some(bundle) = &run.bundle {
                std::fs::remove_file(bundle)
                    .with_context(|| format!("removing {}", bundle.display()))?;
            }
        }
        pruning.removed.push(run);
    }
    Ok(pruning)
}

/// The run in `dir`, with the name of its bundle, if it has ended: retired, saved as complete
/// or failed, or (for `unfinished` runs taken so) abandoned, its operator listener no longer
/// answering. `None` for a run still going, and for a directory that holds no run.
fn ended_run(
    dir: &RunDir,
    unfinished: Unfinished,
) -> anyhow::Result<Option<(Pruned, Option<String>)>> {
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
        bundle: None,
    };
    // A name, never a path: the status is the run's own, but a file name is all it may give.
    let bundle_name = |document: &StatusDocument| {
        document
            .tar_info
            .as_ref()
            .map(|t| t.name.clone())
            .filter(|name| Path::new(name).file_name() == Some(name.as_ref()))
    };
    match unfinished {
        Unfinished::AbandonedIfSilent => {
            let local = local_status(dir.root())?;
            if local.abandoned {
                return Ok(Some((
                    Pruned {
                        status: "abandoned".to_owned(),
                        bundled: false,
                        ..run(&local.document)
                    },
                    None,
                )));
            }
            let document = local.document;
            Ok(ended(document.status).then(|| (run(&document), bundle_name(&document))))
        }
        Unfinished::Kept => {
            let document = match dir.load_final_status()? {
                Some(document) => document,
                None => dir.saved_status()?,
            };
            Ok(ended(document.status).then(|| (run(&document), bundle_name(&document))))
        }
    }
}

#[cfg(test)]
mod tests {
    use factbuoy_aggregator::Run;
    use factbuoy_aggregator::config::RunConfig;

    use super::*;

    #[test]
    fn a_fleet_run_still_running_is_never_pruned() {
        let work = tempfile::tempdir().unwrap();
        let fleet = FleetDir::new(work.path());
        // Served by no one now: the fleet serves it again when it starts.
        let dir = RunDir::new(fleet.runs().join("000001-r"));
        Run::create(dir.clone(), RunConfig::new(Vec::new()), &[]).unwrap();
        let everything = PruneOptions {
            older_than: Duration::ZERO,
            dry_run: false,
            all: true,
        };
        let pruning = prune_fleet(&fleet, &everything).unwrap();
        assert!(pruning.removed.is_empty(), "{pruning:?}");
        assert!(pruning.kept.is_empty(), "{pruning:?}");
        assert!(dir.config().exists());
    }
}

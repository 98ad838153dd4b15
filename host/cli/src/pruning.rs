//! What `prune` and `fleet prune` print: a line per run removed (and its bundle, for a fleet's
//! run) or kept for want of `--all`. `-o json` prints the operator library's `Pruning` as is.

use factbuoy_operator::prune::{Pruned, Pruning};

/// The lines of `pruning`, with "would remove" for a dry run.
pub fn lines(pruning: &Pruning, dry_run: bool) -> Vec<String> {
    let verb = if dry_run { "would remove" } else { "removed" };
    let mut lines: Vec<String> = pruning
        .removed
        .iter()
        .map(|p| {
            let bundle = p
                .bundle
                .as_ref()
                .map(|b| format!(" and its bundle {}", b.display()))
                .unwrap_or_default();
            format!(
                "{verb} run {} ({}): {}{bundle}",
                p.run_id,
                state(p),
                p.run_dir.display()
            )
        })
        .collect();
    lines.extend(pruning.kept.iter().map(|p| {
        format!(
            "kept run {} ({}, no bundle): its results are only in {}; --all removes it",
            p.run_id,
            state(p),
            p.run_dir.display()
        )
    }));
    if lines.is_empty() {
        lines.push("nothing to prune".to_owned());
    }
    lines
}

/// `complete`, or `complete, 1 failed` when results failed.
fn state(run: &Pruned) -> String {
    match run.failed_results {
        0 => run.status.clone(),
        n => format!("{}, {n} failed", run.status),
    }
}

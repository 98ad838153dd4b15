//! A run as a person reads it, for `run` (of every kind), `status` and `retrieve --wait`: a table of every
//! (plugin, node) pair with its final progress, then why each failed result failed and what
//! each result warned about, then where the bundle is. Everything in the status document is
//! the aggregator's to say (and a plugin's, in errors, warnings and progress), so all of it is
//! shown [`printable`].

use std::path::Path;
use std::time::Duration;

use factbuoy_protocol::text::printable;
use factbuoy_protocol::types::{
    PairStatus, PluginStatus, ProgressUpdate, ResultStatus, RunStatus, StatusDocument, wire_name,
};
use indicatif::{ProgressBar, ProgressStyle};

/// Failures and warnings listed by name; the rest are counted (a large cluster's status would
/// otherwise scroll the table away). `-o json` has them all.
const MAX_LISTED: usize = 20;

/// The whole summary: the table, the failures and warnings, and the bundle's place (`bundle`,
/// a directory, when the bundle is there or will be downloaded there).
pub fn text(document: &StatusDocument, bundle_dir: Option<&Path>) -> String {
    let mut text = table(document);
    let failures = listed(
        document
            .plugins
            .iter()
            .filter(|p| p.result_status == Some(ResultStatus::Failed))
            .map(|p| {
                format!(
                    "{} on {}: {}",
                    printable(&p.plugin),
                    printable(&p.node),
                    printable(p.error.as_deref().unwrap_or("no reason was given"))
                )
            }),
    );
    if !failures.is_empty() {
        text.push_str("\n\nFailed:\n");
        text.push_str(&failures);
    }
    let warnings = listed(document.plugins.iter().flat_map(|p| {
        p.warnings.iter().map(move |w| {
            let (plugin, node) = (printable(&p.plugin), printable(&p.node));
            format!("{plugin} on {node}: {}", printable(w))
        })
    }));
    if !warnings.is_empty() {
        text.push_str("\n\nWarnings:\n");
        text.push_str(&warnings);
    }
    if let Some(error) = &document.error {
        text.push_str(&format!("\n\nThe run failed: {}", printable(error)));
    }
    match (&document.tar_info, bundle_dir) {
        (Some(tar), Some(dir)) => text.push_str(&format!(
            "\n\nbundle: {} ({}, sha256 {})",
            printable(&dir.join(&tar.name).display().to_string()),
            crate::table::bytes(tar.size),
            printable(&tar.sha256)
        )),
        (Some(tar), None) => text.push_str(&format!(
            "\n\nbundle: {} ({}); `factbuoy retrieve` downloads it",
            printable(&tar.name),
            crate::table::bytes(tar.size)
        )),
        (None, _) if document.status == RunStatus::Running => {}
        (None, _) => text.push_str(&format!(
            "\n\nno bundle: the run is {}",
            wire_name(&document.status)
        )),
    }
    text
}

/// `  - line` for the first [`MAX_LISTED`] lines, then how many more there are.
fn listed(lines: impl Iterator<Item = String>) -> String {
    let lines: Vec<String> = lines.collect();
    let mut shown: Vec<String> = lines
        .iter()
        .take(MAX_LISTED)
        .map(|l| format!("  - {l}"))
        .collect();
    if lines.len() > MAX_LISTED {
        shown.push(format!(
            "  … and {} more (`factbuoy status -o json` lists them all)",
            lines.len() - MAX_LISTED
        ));
    }
    shown.join("\n")
}

/// The run's headline and one row per (plugin, node) pair.
pub fn table(document: &StatusDocument) -> String {
    let results = document
        .plugins
        .iter()
        .filter(|p| p.result_status.is_some())
        .count();
    let passed = document
        .plugins
        .iter()
        .filter(|p| p.result_status == Some(ResultStatus::Passed))
        .count();
    let mut rows = vec![vec![
        "PLUGIN".to_owned(),
        "NODE".to_owned(),
        "STATUS".to_owned(),
        "RESULT".to_owned(),
        "PROGRESS".to_owned(),
    ]];
    for p in &document.plugins {
        rows.push(vec![
            p.plugin.clone(),
            p.node.clone(),
            wire_name(&p.status),
            result(p),
            progress(p),
        ]);
    }
    let mut lines = vec![
        format!(
            "run {}: {} ({results} of {} results, {passed} passed)",
            printable(&document.run_id),
            state(document),
            document.plugins.len()
        ),
        String::new(),
    ];
    lines.extend(crate::table::aligned(&rows, 0));
    lines.join("\n")
}

/// A run's state as a person reads it: its status, and how many results failed when any did
/// (`complete, 1 failed`): a run completes when every result is in, passed or not.
pub fn state(document: &StatusDocument) -> String {
    let failed = document
        .plugins
        .iter()
        .filter(|p| p.result_status == Some(ResultStatus::Failed))
        .count();
    match failed {
        0 => wire_name(&document.status),
        n => format!("{}, {n} failed", wire_name(&document.status)),
    }
}

/// A result that passed with no artifacts, as `run`, `status` and `inspect summary` show it.
pub const EMPTY_PASS: &str = "passed (empty: nothing to collect)";

/// `passed`, `passed (empty)`, `failed`, or nothing yet.
fn result(pair: &PluginStatus) -> String {
    match pair.result_status {
        Some(ResultStatus::Passed) if pair.empty => EMPTY_PASS.into(),
        Some(status) => wire_name(&status),
        None => String::new(),
    }
}

/// What a pair last said it was doing. Once its result is in, only a progress that reached its
/// end (`9/9 collected`): a last `20/28 collecting dns` would read as if it stopped there.
fn progress(pair: &PluginStatus) -> String {
    let unfinished = |p: &&ProgressUpdate| p.total > 0 && p.completed < p.total;
    let Some(progress) = pair
        .progress
        .as_ref()
        .filter(|p| pair.result_status.is_none() || !unfinished(p))
    else {
        return String::new();
    };
    let message = printable(&progress.msg).into_owned();
    if progress.total > 0 {
        format!("{}/{} {message}", progress.completed, progress.total)
    } else {
        message
    }
}

/// A progress bar over a run's results, for a person at a terminal (hidden elsewhere, and for
/// `-o json|yaml`): it shows the pairs done and what a running plugin says it is doing. The
/// binary prints its log lines above it, and clears it before the summary prints.
pub fn progress_bar(document: &StatusDocument, show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(document.plugins.len() as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} results  {wide_msg}",
        )
        .expect("a valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// Moves `bar` to `document`'s state.
pub fn advance(bar: &ProgressBar, document: &StatusDocument) {
    let done = document
        .plugins
        .iter()
        .filter(|p| p.result_status.is_some())
        .count();
    bar.set_length(document.plugins.len() as u64);
    bar.set_position(done as u64);
    let running = document
        .plugins
        .iter()
        .find(|p| p.result_status.is_none() && p.status == PairStatus::Running);
    let message = running
        .filter(|p| p.progress.is_some())
        .map(|p| {
            let (plugin, node) = (printable(&p.plugin), printable(&p.node));
            format!("{plugin} on {node}: {}", progress(p))
        })
        .unwrap_or_default();
    bar.set_message(message);
}

/// What a run served by `aggregator serve` waits for, in a line: `run ID: 1 of 2 results in; waiting for hostile on
/// node-1, ...`, and when a silent node's results are given up.
pub fn waiting(document: &StatusDocument, lost_after: u64) -> String {
    let missing: Vec<String> = document
        .plugins
        .iter()
        .filter(|p| matches!(p.status, PairStatus::Pending | PairStatus::Running))
        .map(|p| format!("{} on {}", printable(&p.plugin), printable(&p.node)))
        .collect();
    let total = document.plugins.len();
    let head = format!(
        "run {}: {} of {total} results in",
        document.run_id,
        total - missing.len()
    );
    if missing.is_empty() {
        return format!("{head}; writing the bundle");
    }
    let shown = missing
        .iter()
        .take(5)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    let more = match missing.len() {
        0..=5 => String::new(),
        n => format!(" and {} more", n - 5),
    };
    format!(
        "{head}; waiting for {shown}{more} (a node silent for {lost_after}s is given up as lost, its missing results become error results, and the bundle is written with what was collected)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(status: PairStatus, result: Option<ResultStatus>) -> PluginStatus {
        PluginStatus {
            plugin: "setup".into(),
            node: "node-1".into(),
            status,
            result_status: result,
            progress: None,
            last_heartbeat: None,
            error: None,
            warnings: Vec::new(),
            empty: false,
        }
    }

    fn document(plugins: Vec<PluginStatus>) -> StatusDocument {
        StatusDocument {
            run_id: "r".into(),
            status: RunStatus::PostProcessing,
            plugins,
            tar_info: None,
            error: None,
        }
    }

    #[test]
    fn the_table_spells_statuses_as_the_wire_does() {
        let table = table(&document(vec![
            pair(PairStatus::AgentFailed, Some(ResultStatus::Failed)),
            pair(PairStatus::TimedOut, Some(ResultStatus::Failed)),
        ]));
        for spelled in ["post-processing", "agent-failed", "timed-out"] {
            assert!(table.contains(spelled), "{table}");
        }
    }

    #[test]
    fn a_run_with_failed_results_says_how_many_and_finished_pairs_show_no_progress() {
        let mut finished = pair(PairStatus::Complete, Some(ResultStatus::Passed));
        finished.progress = Some(ProgressUpdate {
            completed: 20,
            total: 28,
            msg: "collecting dns".into(),
            ..Default::default()
        });
        let mut doc = document(vec![
            finished,
            pair(PairStatus::AgentFailed, Some(ResultStatus::Failed)),
        ]);
        doc.status = RunStatus::Complete;
        let shown = table(&doc);
        assert!(
            shown.starts_with("run r: complete, 1 failed (2 of 2 results, 1 passed)"),
            "{shown}"
        );
        assert!(!shown.contains("collecting dns"), "{shown}");
        doc.plugins[0].progress.as_mut().unwrap().completed = 28;
        assert!(
            table(&doc).contains("28/28 collecting dns"),
            "{}",
            table(&doc)
        );
        doc.plugins.pop();
        assert_eq!(state(&doc), "complete");
    }

    #[test]
    fn failures_show_their_reason_and_long_lists_are_counted() {
        let mut failed = pair(PairStatus::Lost, Some(ResultStatus::Failed));
        failed.error = Some("node-1 stopped sending heartbeats".into());
        let mut empty = pair(PairStatus::Complete, Some(ResultStatus::Passed));
        empty.empty = true;
        empty.warnings = (0..25).map(|i| format!("warning {i}")).collect();
        let text = text(&document(vec![failed, empty]), None);
        assert!(
            text.contains("setup on node-1: node-1 stopped sending heartbeats"),
            "{text}"
        );
        assert!(text.contains("passed (empty"), "{text}");
        assert!(
            text.contains("warning 19") && !text.contains("warning 20"),
            "{text}"
        );
        assert!(text.contains("… and 5 more"), "{text}");
    }
}

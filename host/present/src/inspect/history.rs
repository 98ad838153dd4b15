//! `inspect history` as a person reads it: a node's runs and what changed in its facts.

use factbuoy_inspect::history::{History, NodeEventKind, NodeHistory, Update};

use super::cell;
use crate::table::{bytes, count, fitted};

/// A run's time without its fraction of a second: `2026-03-01T02:00:00Z`.
fn short(created: &str) -> String {
    match created.split_once('.') {
        Some((seconds, _)) if created.ends_with('Z') => format!("{seconds}Z"),
        _ => created.to_owned(),
    }
}

/// One node's history: when it appeared, went missing or was lost, and its facts' changes.
pub fn node_lines(node: &NodeHistory) -> Vec<String> {
    let mut lines = vec![format!(
        "{}: in {} from {} to {}",
        node.node,
        count(node.runs, "run"),
        short(&node.first_seen.created),
        short(&node.last_seen.created)
    )];
    for event in &node.events {
        // "run 4e302443c9a6 (2026-03-02T02:00:00Z)"
        let run = format!("run {} ({})", event.run.run_id, short(&event.run.created));
        let runs = count(event.runs.unwrap_or(1), "run");
        lines.push(match event.kind {
            NodeEventKind::Appeared => format!("  appeared in {run}"),
            NodeEventKind::Absent => format!("  absent from {runs} from {run}"),
            NodeEventKind::Lost => format!("  lost in {run}"),
            NodeEventKind::StoppedReporting => {
                format!("  stopped reporting: not in the last {runs}, from {run}")
            }
        });
    }
    if node.facts.is_empty() {
        lines.push("  no fact changed".into());
        return lines;
    }
    let mut rows = vec![vec![
        "PLUGIN".to_owned(),
        "PATH".into(),
        "FROM".into(),
        "TO".into(),
        "VALUE".into(),
        "WAS".into(),
    ]];
    for fact in &node.facts {
        for change in &fact.changes {
            rows.push(vec![
                fact.plugin.clone(),
                fact.path.clone(),
                short(&change.first_seen.created),
                short(&change.last_seen.created),
                if change.removed {
                    "(removed)".into()
                } else {
                    cell(&change.value)
                },
                change.previous.as_ref().map(cell).unwrap_or_default(),
            ]);
        }
    }
    lines.extend(fitted(&rows, 2));
    lines
}

/// `inspect history DIR`: the runs' span and origin, then each node's history.
pub fn history_lines(dir: &str, history: &History, nodes: &[NodeHistory]) -> Vec<String> {
    let (first, last) = (
        &history.bundles[0],
        &history.bundles[history.bundles.len() - 1],
    );
    let mut lines = vec![format!(
        "{} of {dir} from {} to {} (origin {})",
        count(history.bundles.len(), "run"),
        short(&first.created),
        short(&last.created),
        history.origin
    )];
    for node in nodes {
        lines.push(String::new());
        lines.extend(node_lines(node));
    }
    lines
}

/// `inspect history DIR` over a directory of several origins: each origin's history under its
/// name in words, apart, since their nodes are other machines whatever their names.
pub fn histories_lines(dir: &str, histories: &[(History, Vec<NodeHistory>)]) -> Vec<String> {
    let mut lines = vec![format!(
        "{dir} holds runs of {} origins, a history each (--origin reads one):",
        histories.len()
    )];
    for (history, nodes) in histories {
        lines.push(String::new());
        lines.push(format!("== {} ==", history.label));
        lines.extend(history_lines(dir, history, nodes));
    }
    lines
}

/// `inspect index DIR`: what the index holds and what bringing it up to date read.
pub fn index_lines(dir: &str, update: &Update) -> Vec<String> {
    let mut lines = vec![format!(
        "{dir}: {} indexed in {} ({}, for {} of bundles)",
        count(update.bundles, "bundle"),
        update.index.display(),
        bytes(update.index_bytes),
        bytes(update.bundle_bytes),
    )];
    lines.push(match &update.rebuilt {
        Some(why) => format!(
            "  built anew ({why}): read {}",
            count(update.added, "bundle")
        ),
        None => format!("  read {} added since", count(update.added, "bundle")),
    });
    for unreadable in &update.unreadable {
        lines.push(format!(
            "  left out {}: {}",
            unreadable.bundle, unreadable.error
        ));
    }
    lines
}

/// What bringing a history's index up to date did, for the log: what it indexed (when it did
/// anything), and the bundles it left out (unreadable, or copies of another).
pub fn update_notes(update: &Update) -> (Vec<String>, Vec<String>) {
    let mut done = Vec::new();
    if let Some(why) = &update.rebuilt {
        done.push(format!(
            "indexed {} into {} (built anew: {why})",
            count(update.added, "bundle"),
            update.index.display()
        ));
    } else if update.added > 0 {
        done.push(format!(
            "indexed {} more into {}",
            count(update.added, "bundle"),
            update.index.display()
        ));
    }
    let mut left_out: Vec<String> = update
        .unreadable
        .iter()
        .map(|unreadable| format!("{} is left out: {}", unreadable.bundle, unreadable.error))
        .collect();
    left_out.extend(duplicate_notes(update));
    (done, left_out)
}

/// The files left out as copies of another, and which is read.
pub fn duplicate_notes(update: &Update) -> Vec<String> {
    update
        .duplicates
        .iter()
        .map(|copy| {
            format!(
                "{} is left out: the same files as {} (run {}), which is read; a run counts once",
                copy.bundle, copy.kept, copy.run_id
            )
        })
        .collect()
}

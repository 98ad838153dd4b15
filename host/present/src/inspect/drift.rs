//! `inspect diff` as a person reads it: one run's nodes against each other ([`drift_lines`]), or
//! two runs against each other ([`changes_lines`]).

use factbuoy_inspect::drift::{self, BundleRun, ChangeKind, Changes, Drift};
use factbuoy_protocol::types::wire_name;
use serde_json::Value;

use super::{cell, names};
use crate::table::{count, fitted};

/// The most node sets a drift group is shown with as columns; past it, only its facts are
/// listed (`query` and `-o json` have every value).
const MAX_SET_COLUMNS: usize = 4;
/// The nodes with facts of their own listed, a line each; `-o json` has them all.
const MAX_ALONE_LINES: usize = 20;
/// `inspect diff BUNDLE`: how the nodes of one run differ, group by group.
pub fn drift_lines(drift: &Drift) -> Vec<String> {
    let facts: usize = drift.groups.iter().map(|g| g.facts.len()).sum();
    let mut lines = vec![format!(
        "{} of {} (run {}): {}",
        count(drift.nodes.len(), "node"),
        drift.bundle.bundle,
        drift.bundle.run_id,
        match (facts, drift.groups.len()) {
            (0, _) => "every fact compared is the same on every node".to_owned(),
            (facts, groups) => format!(
                "{} differ, in {}",
                count(facts, "fact"),
                count(groups, "group")
            ),
        }
    )];
    lines.push(ignored_line(&drift.ignored));
    for without in &drift.without_facts {
        lines.push(format!(
            "  {} has no {} facts: left out of their comparison",
            without.node,
            without.plugins.join(" or ")
        ));
    }
    for alone in drift.alone.iter().take(MAX_ALONE_LINES) {
        lines.push(format!(
            "  {} alone has {} of its own: {}{}",
            alone.node,
            count(alone.facts, &format!("{} fact", alone.plugin)),
            alone.first.join(", "),
            if alone.facts > alone.first.len() {
                ", ..."
            } else {
                ""
            }
        ));
    }
    if drift.alone.len() > MAX_ALONE_LINES {
        lines.push(format!(
            "  and {} more nodes with facts of their own (-o json lists them)",
            drift.alone.len() - MAX_ALONE_LINES
        ));
    }
    for (number, group) in drift.groups.iter().enumerate() {
        lines.push(String::new());
        let sets = group.node_sets.len();
        if sets > MAX_SET_COLUMNS {
            lines.push(format!(
                "Group {}: {} with {sets} different values among {} \
                 (`factbuoy inspect query BUNDLE PATH` shows them)",
                number + 1,
                count(group.facts.len(), "fact"),
                count(group.node_sets.iter().map(Vec::len).sum(), "node")
            ));
            let rows: Vec<Vec<String>> = group
                .facts
                .iter()
                .map(|f| vec![f.plugin.clone(), f.path.clone()])
                .collect();
            lines.extend(fitted(&rows, 2));
            continue;
        }
        lines.push(format!(
            "Group {}: {} split the nodes {}",
            number + 1,
            count(group.facts.len(), "fact"),
            group
                .node_sets
                .iter()
                .map(|set| set.len().to_string())
                .collect::<Vec<_>>()
                .join(" / ")
        ));
        let letters: Vec<String> = (0..sets)
            .map(|i| format!("[{}]", char::from(b'a' + i as u8)))
            .collect();
        for (letter, set) in letters.iter().zip(&group.node_sets) {
            lines.push(format!("  {letter} {}", names(set)));
        }
        let mut rows = vec![
            ["PLUGIN".to_owned(), "PATH".into()]
                .into_iter()
                .chain(letters.iter().cloned())
                .collect::<Vec<_>>(),
        ];
        for fact in &group.facts {
            let mut row = vec![fact.plugin.clone(), fact.path.clone()];
            for (i, value) in fact.values.iter().enumerate() {
                row.push(if fact.absent.contains(&i) {
                    "(absent)".into()
                } else {
                    cell(value)
                });
            }
            rows.push(row);
        }
        lines.extend(fitted(&rows, 2));
    }
    lines
}

/// `inspect diff EARLIER LATER` (or `--since`): what changed between two runs.
pub fn changes_lines(changes: &Changes) -> Vec<String> {
    let run = |r: &BundleRun| {
        let created = r.created.as_deref().unwrap_or("at an unknown time");
        format!("{} (run {}, created {created})", r.bundle, r.run_id)
    };
    let mut lines = Vec::new();
    if changes.reordered {
        lines.push(format!(
            "note: {} was created before {}, so it is the earlier: compared in the order the runs were created",
            changes.before.bundle, changes.after.bundle
        ));
    }
    lines.push(format!("before: {}", run(&changes.before)));
    lines.push(format!("after:  {}", run(&changes.after)));
    let list = |nodes: &[String]| {
        if nodes.is_empty() {
            "none".to_owned()
        } else {
            names(nodes)
        }
    };
    lines.push(format!("  nodes added: {}", list(&changes.nodes_added)));
    lines.push(format!("  nodes removed: {}", list(&changes.nodes_removed)));
    lines.push(format!(
        "  {} in both compared: {}",
        count(changes.nodes_compared, "node"),
        match changes.changes.len() {
            0 => "no fact changed".to_owned(),
            n => count(n, "change"),
        }
    ));
    lines.push(ignored_line(&changes.ignored));
    for skipped in &changes.not_compared {
        lines.push(format!(
            "  {}'s {} facts are missing from the {} bundle: not compared",
            skipped.node, skipped.plugin, skipped.missing_in
        ));
    }
    if !changes.subtrees.is_empty() {
        lines.push(String::new());
        for subtree in &changes.subtrees {
            let counted: Vec<String> = [
                (subtree.added, "added"),
                (subtree.removed, "removed"),
                (subtree.changed, "changed"),
            ]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
            lines.push(format!(
                "  {} {}: {}",
                subtree.plugin,
                subtree.subtree,
                counted.join(", ")
            ));
        }
    }
    if !changes.changes.is_empty() {
        lines.push(String::new());
        let mut rows = vec![
            ["PLUGIN", "PATH", "CHANGE", "BEFORE", "AFTER", "NODES"]
                .map(str::to_owned)
                .to_vec(),
        ];
        for change in &changes.changes {
            let side = |value: &Value, present: bool| {
                if present {
                    cell(value)
                } else {
                    "(absent)".into()
                }
            };
            rows.push(vec![
                change.plugin.clone(),
                change.path.clone(),
                wire_name(&change.kind),
                side(&change.before, change.kind != ChangeKind::Added),
                side(&change.after, change.kind != ChangeKind::Removed),
                names(&change.nodes),
            ]);
        }
        lines.extend(fitted(&rows, 0));
    }
    lines
}

/// The facts the ignore patterns left out, counted.
fn ignored_line(ignored: &drift::Ignored) -> String {
    if ignored.patterns.is_empty() {
        return "  no fact left out (--no-default-ignores)".into();
    }
    format!(
        "  {} left out by {} (-o json lists them; --no-default-ignores, --ignore)",
        count(ignored.facts, "fact"),
        count(ignored.patterns.len(), "ignore pattern")
    )
}

//! `factbuoy inspect diff`: drift across one bundle's nodes, or the changes between two
//! bundles, as computed by [`factbuoy_inspect::drift`], printed.

use std::path::PathBuf;

use clap::Args;
use factbuoy_bundle::reader::Bundle;
use factbuoy_inspect::drift::{self, BundleRun, ChangeKind, Changes, Drift, IgnoreList};
use serde_json::Value;

use super::history::{PileArgs, is_pile};
use super::show::{cell, emit_lines, names};
use factbuoy_protocol::types::wire_name;

use crate::output::{ExitStatus, Format, emit_document};
use crate::table::{count, fitted};

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The bundle whose nodes to compare, the earlier of two bundles to compare, or a
    /// directory of bundles (with --since).
    bundle: PathBuf,
    /// The later bundle of the same fleet.
    later: Option<PathBuf>,
    /// Of a directory of bundles: what changed from the first bundle from TIME on to the
    /// last, the net change. TIME is a duration back from now (7d ago, 12h), a day (a date,
    /// today, yesterday: its start, UTC), an RFC 3339 time, or another form `inspect logs
    /// --since` takes (2026-05-01 12:00).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    #[command(flatten)]
    pile: PileArgs,
    /// Leave out facts whose path matches PATTERN too (may be repeated).
    #[arg(long, value_name = "PATTERN")]
    ignore: Vec<String>,
    /// Compare the facts that always change too: leave out only what --ignore names.
    #[arg(long)]
    no_default_ignores: bool,
    /// Exit 1 when anything differs, as `diff` does.
    #[arg(long)]
    exit_code: bool,
}

pub fn diff(args: DiffArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let ignore = IgnoreList::new(!args.no_default_ignores, &args.ignore);
    let range = match (is_pile(&args.bundle), &args.since, &args.later) {
        (true, Some(since), None) => {
            let history = args.pile.open(&args.bundle)?;
            let (first, last) = history.since(since)?;
            Some((first.bundle.clone(), last.bundle.clone()))
        }
        (true, None, _) | (true, _, Some(_)) => anyhow::bail!(
            "{} is a directory of bundles: give --since TIME (and no second bundle) to see what changed over that time",
            args.bundle.display()
        ),
        (false, Some(_), _) => anyhow::bail!(
            "--since picks bundles of a directory of bundles; {} is a bundle",
            args.bundle.display()
        ),
        (false, None, _) => None,
    };
    let (earlier, later) = match range {
        Some((first, last)) => (first, Some(last)),
        None => (args.bundle.clone(), args.later.clone()),
    };
    let first = Bundle::open(&earlier)?;
    let differs = match &later {
        None => {
            let drift = drift::drift(&first, &ignore)?;
            if format == Format::Table {
                emit_lines(&drift_lines(&drift));
            } else {
                emit_document(&drift, format);
            }
            !drift.groups.is_empty()
        }
        Some(later) => {
            let changes = drift::changes(&first, &Bundle::open(later)?, &ignore)?;
            if format == Format::Table {
                emit_lines(&changes_lines(&changes));
            } else {
                emit_document(&changes, format);
            }
            !(changes.changes.is_empty()
                && changes.nodes_added.is_empty()
                && changes.nodes_removed.is_empty())
        }
    };
    Ok(if differs && args.exit_code {
        ExitStatus::Failed
    } else {
        ExitStatus::Success
    })
}

/// The most node sets a drift group is shown with as columns; past it, only its facts are
/// listed (`query` and `-o json` have every value).
const MAX_SET_COLUMNS: usize = 4;
/// The nodes with facts of their own listed, a line each; `-o json` has them all.
const MAX_ALONE_LINES: usize = 20;
fn drift_lines(drift: &Drift) -> Vec<String> {
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

fn changes_lines(changes: &Changes) -> Vec<String> {
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

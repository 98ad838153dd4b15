//! `factbuoy inspect diff`: drift across one bundle's nodes, or the changes between two
//! bundles, as computed by [`factbuoy_inspect::drift`], printed.

use std::path::PathBuf;

use clap::Args;
use factbuoy_bundle::reader::Bundle;
use factbuoy_inspect::drift::{self, IgnoreList};
use factbuoy_present::inspect::drift::{changes_lines, drift_lines};

use super::history::{PileArgs, is_pile};
use super::show::emit_lines;

use crate::output::{ExitStatus, Format, emit_document};

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

//! `factbuoy prune`: removes the state local runs left in the state directory (the operator
//! library's `prune`), listing what went and what was kept.

use clap::Args;
use factbuoy_operator::StateDir;
use factbuoy_operator::prune::{self, PruneOptions};

use crate::output::{ExitStatus, Format, emit, emit_document};

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

pub fn prune(args: PruneArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let options = PruneOptions {
        older_than: *args.older_than,
        dry_run: args.dry_run,
        all: args.all,
    };
    let pruning = prune::prune(&StateDir::from_env()?, &options)?;
    match format {
        Format::Table => emit(&crate::pruning::lines(&pruning, args.dry_run).join("\n")),
        machine => emit_document(&pruning, machine),
    }
    Ok(ExitStatus::Success)
}

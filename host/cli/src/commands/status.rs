//! `factbuoy status`: a run's status, the current run's or the one named, of any kind.

use clap::Args;
use factbuoy_operator::StateDir;
use factbuoy_operator::follow::Source;

use crate::flags::WhichRunArgs;
use crate::output::{ExitStatus, Format, emit, emit_document};
use crate::summary;

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  factbuoy status\n  factbuoy status 3f2a9c01d4e7 -o json\n  factbuoy status --run-dir ./my-run"
)]
pub struct StatusArgs {
    #[command(flatten)]
    run: WhichRunArgs,
}

pub async fn status(args: StatusArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let state = StateDir::from_env()?;
    let record = state.locate(&args.run.which())?;
    let source = Source::of(&record, &state, &args.run.cluster.cluster()).await?;
    let document = source.status().await?;
    match format {
        Format::Table => emit(&summary::text(&document, source.bundle_dir().as_deref())),
        machine => emit_document(&document, machine),
    }
    Ok(ExitStatus::Success)
}

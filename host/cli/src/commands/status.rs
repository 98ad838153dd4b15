//! `factbuoy status`: a run's status, the current run's or the one named, of any kind.

use clap::Args;
use factbuoy_operator::follow::Source;
use factbuoy_operator::list::{self, Listed};
use factbuoy_operator::{StateDir, WhichRun};
use factbuoy_present::summary;

use crate::flags::WhichRunArgs;
use crate::output::{ExitStatus, Format, emit, emit_document};

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
    let which = args.run.which();
    let record = state.locate(&which)?;
    if matches!(which, WhichRun::Current) {
        say_which(&state, record.run_id()).await;
    }
    let source = Source::of(&record, &state, &args.run.cluster.cluster()).await?;
    let document = source.status().await?;
    match format {
        Format::Table => emit(&summary::text(&document, source.bundle_dir().as_deref())),
        machine => emit_document(&document, machine),
    }
    Ok(ExitStatus::Success)
}

/// Says which run `status` shows when more than one local run is going: the current one, the
/// one started last, which need not be the one the operator has in mind.
async fn say_which(state: &StateDir, current: &str) {
    let Ok(runs) = list::list(state, &Default::default(), false).await else {
        return;
    };
    let going = |run: &&Listed| run.kind == "local" && run.may_be_going() && run.note.is_none();
    let going = runs.iter().filter(going).count();
    if going > 1 {
        eprintln!(
            "note: {going} runs are going on this host; this is the current one, {current}, the one started last; `factbuoy runs` lists them, `factbuoy status RUN-ID` shows another"
        );
    }
}

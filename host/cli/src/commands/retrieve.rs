//! `factbuoy retrieve`: downloads a run's bundle (any kind of run), resuming a partial
//! download; with `--wait`, once the run has written it.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use factbuoy_operator::StateDir;
use factbuoy_operator::follow::{Source, ended};
use factbuoy_protocol::types::{StatusDocument, wire_name};

use crate::flags::WhichRunArgs;
use crate::output::{Ended, ExitStatus, Format, emit, emit_document};
use factbuoy_present::summary;

/// How often `retrieve --wait` asks for the run's status.
const WAIT_EVERY: Duration = Duration::from_millis(500);

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  factbuoy retrieve --out bundles/\n  factbuoy retrieve --wait             # the current run's, once it is written\n  factbuoy retrieve 3f2a9c01d4e7 --context prod"
)]
pub struct RetrieveArgs {
    #[command(flatten)]
    run: WhichRunArgs,
    /// Where to write the bundle; a partial download there is resumed.
    #[arg(long, default_value = ".", value_name = "DIR")]
    out: PathBuf,
    /// Wait until the run has written its bundle, instead of exiting 3 while it runs.
    #[arg(long)]
    wait: bool,
}

pub async fn retrieve(args: RetrieveArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let state = StateDir::from_env()?;
    let record = state.locate(&args.run.which())?;
    // A Kubernetes run is asked through one port-forward, kept for the download.
    let source = Source::of(&record, &state, &args.run.cluster.cluster()).await?;
    let mut document = source.status().await?;
    if document.tar_info.is_none() && !ended(document.status) {
        if !args.wait {
            return Err(Ended::NotReady(format!(
                "the bundle is not ready: the run is {}; `factbuoy retrieve --wait` waits for it",
                wire_name(&document.status)
            ))
            .into());
        }
        let bar = crate::logging::progress_bar(&document, format == Format::Table);
        let mut on_status = |d: &StatusDocument| summary::advance(&bar, d);
        let followed = source.follow(WAIT_EVERY, None, &mut on_status).await;
        crate::logging::hide_bar();
        document = followed?;
    }
    let fetched = source.fetch_bundle(&document, &args.out).await?;
    match format {
        Format::Table => emit(&fetched.path.display().to_string()),
        machine => emit_document(&fetched, machine),
    }
    Ok(ExitStatus::Success)
}

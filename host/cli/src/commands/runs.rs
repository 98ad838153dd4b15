//! `factbuoy runs`: the runs this machine knows, of every kind, newest first, with their state;
//! the current one (what `status` and `retrieve` show without a run id) marked.

use clap::Args;
use factbuoy_operator::StateDir;
use factbuoy_operator::list::{self, Listed};
use factbuoy_protocol::types::wire_name;

use crate::flags::ClusterArgs;
use crate::output::{ExitStatus, Format, emit, emit_document};

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    factbuoy runs\n  \
    factbuoy runs --local            # without asking clusters and fleets\n  \
    factbuoy runs -o json")]
pub struct RunsArgs {
    /// List Kubernetes and fleet runs without asking their aggregators for their state.
    #[arg(long)]
    local: bool,
    /// Reach Kubernetes runs' clusters otherwise than the commands that started them did.
    #[command(flatten)]
    cluster: ClusterArgs,
}

pub async fn runs(args: RunsArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let state_dir = StateDir::from_env()?;
    let listed = list::list(&state_dir, &args.cluster.cluster(), !args.local).await?;
    match format {
        Format::Table if listed.is_empty() => {
            emit("no runs here; `factbuoy run` starts one");
        }
        Format::Table => {
            let mut rows = vec![
                ["", "RUN ID", "KIND", "CREATED", "STATE", "WHERE"]
                    .map(str::to_owned)
                    .to_vec(),
            ];
            for run in &listed {
                rows.push(vec![
                    if run.current { "*" } else { "" }.to_owned(),
                    run.run_id.clone(),
                    run.kind.to_owned(),
                    run.created.clone().unwrap_or_else(|| "-".to_owned()),
                    state(run),
                    run.place.clone(),
                ]);
            }
            emit(&factbuoy_present::table::fitted(&rows, 0).join("\n"));
        }
        machine => emit_document(&listed, machine),
    }
    Ok(ExitStatus::Success)
}

/// `running`, `complete, 1 failed`, or why the state is not known.
fn state(run: &Listed) -> String {
    let status = run.status.map(|s| wire_name(&s));
    let known = match (status, run.failed_results) {
        (Some(status), 0) => status,
        (Some(status), n) => format!("{status}, {n} failed"),
        (None, _) => "unknown".to_owned(),
    };
    match &run.note {
        Some(note) => format!("{known} ({})", factbuoy_protocol::text::printable(note)),
        None => known,
    }
}

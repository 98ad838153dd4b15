//! `factbuoy delete`: everything Kubernetes runs made in a cluster, by the run's label,
//! cluster-scoped objects too. A local or fleet run's id is refused with the command that
//! removes its state.

use clap::Args;
use factbuoy_kubernetes::{DeleteOptions, Selection};
use factbuoy_operator::StateDir;

use crate::flags::ClusterArgs;
use crate::output::{ExitStatus, Format, emit, emit_document};

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    factbuoy delete 3f2a9c01d4e7\n  \
    factbuoy delete --all --dry-run      # what would go\n  \
    factbuoy delete --all --context prod")]
pub struct DeleteArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// The run whose objects to delete.
    #[arg(
        value_name = "RUN-ID",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    run_id: Option<String>,
    /// Delete every run's objects (everything labelled factbuoy/run).
    #[arg(long)]
    all: bool,
    /// Return once the deletes are accepted, without waiting for the objects to go.
    #[arg(long)]
    no_wait: bool,
    /// How long to wait for everything to go.
    #[arg(long, default_value_t = factbuoy_kubernetes::DEFAULT_DELETE_WAIT.into(), value_name = "DURATION")]
    wait_timeout: humantime::Duration,
    /// Delete nothing: list what would be deleted (checked by the API server's dry run).
    #[arg(long)]
    dry_run: bool,
}

pub async fn delete_cmd(args: DeleteArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let selection = match &args.run_id {
        Some(id) => {
            StateDir::from_env()?.refuse_delete_of_local_or_fleet_run(id)?;
            Selection::Run(id.clone())
        }
        None => Selection::All,
    };
    let cluster = factbuoy_kubernetes::connect(&args.cluster.cluster()).await?;
    let options = DeleteOptions {
        dry_run: args.dry_run,
        wait: (!args.no_wait).then_some(*args.wait_timeout),
    };
    let found = factbuoy_kubernetes::delete(&cluster.client, &selection, options).await?;
    match format {
        machine @ (Format::Json | Format::Yaml) => emit_document(&found, machine),
        Format::Table if args.dry_run => {
            if found.is_empty() {
                emit("[]");
            } else {
                emit(serde_saphyr::to_string(&found)?.trim_end());
            }
        }
        Format::Table => {
            for f in &found {
                let place = f
                    .namespace
                    .as_ref()
                    .map(|n| format!("{n}/"))
                    .unwrap_or_default();
                emit(&format!("deleted {} {place}{}", f.kind, f.name));
            }
            if found.is_empty() {
                emit("nothing to delete");
            }
        }
    }
    Ok(ExitStatus::Success)
}

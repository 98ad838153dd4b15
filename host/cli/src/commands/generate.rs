//! `factbuoy gen`: the manifests a Kubernetes run applies, for review or GitOps, with the
//! operator credentials kept here so that `status` and `retrieve` reach the run once anyone
//! applies them.

use clap::Args;
use factbuoy_aggregator::config;
use factbuoy_operator::{KubernetesTarget, StateDir};

use crate::flags::{KubeArgs, PluginArgs};
use crate::output::{ExitStatus, Format, emit, emit_document};

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    factbuoy gen > run.yaml && kubectl apply -f run.yaml\n  \
    factbuoy gen --plugin setup -p setup:gather_subset=network -o json\n  \
    factbuoy gen --global cluster-report --plugin ./cluster-report.wasm\n  \
    factbuoy gen --no-agent-cache > run.yaml      # no hostPath cache on the nodes")]
pub struct GenArgs {
    #[command(flatten)]
    kube: KubeArgs,
    #[command(flatten)]
    plugins: PluginArgs,
    /// Deadline of the whole run; what is missing then becomes error results.
    #[arg(long, default_value_t = config::DEFAULT_RUN_TIMEOUT.into())]
    timeout: humantime::Duration,
    /// The run id [default: a new random one].
    #[arg(long, value_name = "ID")]
    run_id: Option<String>,
}

pub async fn generate(args: GenArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let state = StateDir::from_env()?;
    let target = KubernetesTarget {
        cluster: args.kube.cluster.cluster(),
        placement: args.kube.placement(),
        run_id: args.run_id.clone(),
    };
    let selection = args.plugins.selection(&args.kube.global);
    let (record, prepared) =
        factbuoy_operator::generate(&state, &target, &selection, *args.timeout).await?;
    let objects = prepared.manifests.objects();
    match format {
        Format::Json => emit_document(
            &serde_json::json!({
                "apiVersion": "v1",
                "kind": "List",
                "items": objects,
            }),
            Format::Json,
        ),
        // YAML is the manifests' own form, and what a person reads too.
        Format::Table | Format::Yaml => {
            emit(serde_saphyr::to_string_multiple(&objects)?.trim_end())
        }
    }
    if let Some(command) = prepared.secret_command() {
        // The values stay here: the manifests only name the Secret the aggregator reads.
        eprintln!(
            "run {}: its secret parameters are not in these manifests; once they are applied, create the Secret the aggregator waits for (10 minutes), each FILE holding one value:\n  {command}",
            record.run_id
        );
    }
    let auth_file = args
        .plugins
        .registry
        .authfile
        .as_ref()
        .map_or_else(|| "AUTH_FILE".to_owned(), |f| f.display().to_string());
    if let Some(command) = prepared.registry_secret_command(&auth_file) {
        // Credentials stay here too: the pods only name the Secret.
        eprintln!(
            "run {}: the registry credentials the aggregator pulls plugins with and the pods pull the image with are not in these manifests; create their Secret (AUTH_FILE: your containers-auth.json or docker config.json):\n  {command}",
            record.run_id
        );
    }
    eprintln!(
        "run {id}: operator credentials in {}; `factbuoy delete {id}` removes what these manifests create",
        state.kubernetes_run(&record.run_id).display(),
        id = record.run_id,
    );
    Ok(ExitStatus::Success)
}

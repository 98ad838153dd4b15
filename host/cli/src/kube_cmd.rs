//! `factbuoy gen` (the manifests a Kubernetes run applies, for review or GitOps) and
//! `factbuoy delete` (everything runs made in a cluster), and the Kubernetes flags `run
//! --kubernetes` shares with them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use k8s_openapi::api::core::v1::Toleration;

use factbuoy_aggregator::config::{self, PlanScope, RunConfig, ServerLimits};
use factbuoy_dispatch::delete::{self, DeleteOptions, Selection};
use factbuoy_dispatch::manifest::scheduling::{self, parse_node_selector, parse_toleration};
use factbuoy_dispatch::manifest::{AGGREGATOR_RUN_DIR, RunManifests, RunSpec};
use factbuoy_dispatch::names::{self, AGENT_PORT, OPERATOR_PORT};
use factbuoy_dispatch::resources::{self, ResourceKind};
use factbuoy_dispatch::{Target, connect};
use factbuoy_pki::RunCa;
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::types::now_rfc3339;
use factbuoy_runtime::grants::GrantSet;
use factbuoy_runtime::{Limits, Runtime, RuntimeOptions};

use crate::output::{ExitStatus, Format, emit, emit_document};
use crate::plan::{self, Planned, PluginArgs};
use crate::run_cmd::new_run_id;
use crate::runs::{KubeRun, state_dir};

/// The image `gen` and `run --kubernetes` use by default: what deploy/build-image.sh names it.
pub const DEFAULT_IMAGE: &str = concat!("factbuoy.local/factbuoy:", env!("CARGO_PKG_VERSION"));

/// Which cluster, as kubectl's flags name it.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// The kubeconfig file [default: $KUBECONFIG, else ~/.kube/config].
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context [default: its current context].
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

impl ClusterArgs {
    /// The dispatch crate's target.
    pub fn target(&self) -> Target {
        Target {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
        }
    }
}

/// The flags that shape a Kubernetes run's manifests (`run --kubernetes`, `gen`).
#[derive(Debug, Clone, Args)]
pub struct KubeArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// An existing namespace to run in [default: a new namespace factbuoy-<run id>, the run's root].
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// The factbuoy image, as deploy/build-image.sh built it.
    #[arg(long, default_value = DEFAULT_IMAGE, value_name = "NAME:TAG")]
    pub image: String,
    /// imagePullPolicy of the aggregator and the agents (Never for an image imported into each node).
    #[arg(long, default_value = "IfNotPresent", value_parser = ["Always", "IfNotPresent", "Never"])]
    pub image_pull_policy: String,
    /// Run agents only on nodes with these labels: KEY=VALUE[,KEY=VALUE...].
    #[arg(long, value_name = "KEY=VALUE,...", value_parser = parse_node_selector)]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Tolerate a taint: KEY[=VALUE][:EFFECT] (repeatable). Agents tolerate every taint unless --no-tolerate-all.
    #[arg(long, value_name = "KEY[=VALUE][:EFFECT]", value_parser = parse_toleration)]
    pub tolerate: Vec<Toleration>,
    /// Tolerate only the --tolerate taints; nodes with other NoSchedule/NoExecute taints are skipped.
    #[arg(long)]
    pub no_tolerate_all: bool,
    /// Memory limit of each agent container (the plugin sandbox's cap plus the agent's own).
    #[arg(long, default_value = "768Mi", value_name = "QUANTITY")]
    pub agent_memory_limit: String,
    /// Cluster objects to save into the bundle's resources/, as lists (the aggregator may list
    /// exactly these): any of nodes, namespaces, pods, services, persistentvolumes, daemonsets,
    /// deployments, storageclasses.
    #[arg(long, value_name = "KIND,...", value_delimiter = ',', default_value = "nodes,namespaces", value_parser = resources::kind)]
    pub resources: Vec<&'static ResourceKind>,
    /// Run PLUGIN once for the whole run, in the aggregator's pod, instead of on every node. It
    /// reads the cluster objects saved for resources/ (`read:/nodes.json`), never a node's files
    /// or host-info. Name it with --plugin too.
    #[arg(long = "global", value_name = "PLUGIN", value_parser = crate::plan::PluginName, hide_possible_values = true)]
    pub global: Vec<String>,
    /// A group ID the agents run with as well, to read the nodes' journals: the GID of
    /// systemd-journal (or adm) on the nodes, `getent group systemd-journal` there. Repeatable.
    #[arg(long, value_name = "GID")]
    pub journal_group: Vec<u32>,
    /// Keep the agents out of their nodes' network and UTS namespaces (no hostNetwork), where
    /// policy forbids it: the host name, addresses, routes and interfaces' ethtool facts are then
    /// the agent pods', not the nodes'.
    #[arg(long)]
    pub no_host_network: bool,
}

/// `factbuoy gen`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    factbuoy gen > run.yaml && kubectl apply -f run.yaml\n  \
    factbuoy gen --plugin setup -p setup:gather_subset=network -o json\n  \
    factbuoy gen --global cluster-report --plugin ./cluster-report.wasm")]
pub struct GenArgs {
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub plugins: PluginArgs,
    /// Deadline of the whole run; what is missing then becomes error results.
    #[arg(long, default_value_t = config::DEFAULT_RUN_TIMEOUT.into())]
    pub timeout: humantime::Duration,
    /// The run id [default: a new random one].
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
}

/// `factbuoy delete`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    factbuoy delete 3f2a9c01d4e7\n  \
    factbuoy delete --all --dry-run      # what would go\n  \
    factbuoy delete --all --context prod")]
pub struct DeleteArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The run whose objects to delete.
    #[arg(
        value_name = "RUN-ID",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    pub run_id: Option<String>,
    /// Delete every run's objects (everything labelled factbuoy/run).
    #[arg(long)]
    pub all: bool,
    /// Return once the deletes are accepted, without waiting for the objects to go.
    #[arg(long)]
    pub no_wait: bool,
    /// How long to wait for everything to go.
    #[arg(long, default_value = "2m", value_name = "DURATION")]
    pub wait_timeout: humantime::Duration,
    /// Delete nothing: list what would be deleted (checked by the API server's dry run).
    #[arg(long)]
    pub dry_run: bool,
}

/// A Kubernetes run, planned: its manifests and where its operator credentials are.
pub struct Prepared {
    /// The run's objects.
    pub manifests: RunManifests,
    /// The directory holding the operator CA (`ca.pem`, `ca.key`) and the operator's
    /// certificate (`operator.pem`, `operator.key`), all but the certificates 0600.
    pub operator_dir: PathBuf,
    /// Where the run is, as `status` and `retrieve` find it (saved in `operator_dir`).
    pub record: KubeRun,
}

/// Where the CLI keeps a Kubernetes run's operator credentials and its record (`runs`):
/// `kube/<run id>` in the state directory (`~/.local/state/factbuoy/kube/<run id>`).
pub fn operator_dir(run_id: &str) -> anyhow::Result<PathBuf> {
    Ok(state_dir()?.join("kube").join(run_id))
}

/// Plans a Kubernetes run: loads and checks the plugins, creates the operator CA and
/// certificate in [`operator_dir`], and builds the manifests.
pub async fn prepare(
    kube: &KubeArgs,
    plugin_args: &PluginArgs,
    run_timeout: Duration,
    run_id: &str,
) -> anyhow::Result<Prepared> {
    names::check_run_id(run_id)?;
    let runtime = Runtime::new(RuntimeOptions {
        limits: Limits {
            deadline: *plugin_args.plugin_timeout,
            ..Limits::default()
        },
        ..RuntimeOptions::default()
    })?;
    // The nodes' journals are not this machine's: a node without one reports it.
    let plugins = if plugin_args.plugins.is_empty() {
        plan::DEFAULT_PLUGINS
            .iter()
            .filter(|name| factbuoy_catalog::BUNDLED.iter().any(|b| b.name == **name))
            .map(|name| (*name).to_owned())
            .collect()
    } else {
        plugin_args.plugins.clone()
    };
    let mut planned = plan::build(&runtime, &plugin_args.choices(&plugins)).await?;
    make_global(&mut planned, &kube.global)?;

    // What the agents mount follows the per-node plugins' grants.
    let mut read_paths = Vec::new();
    let mut host_info = false;
    for (plan, (_, loaded)) in planned.plans.iter().zip(&planned.loaded) {
        if plan.scope == PlanScope::Global {
            continue;
        }
        let mut grants = GrantSet::default();
        grants.extend_written(&plan.grants, &plan.denies)?;
        let effective = grants.effective(&loaded.info.capabilities)?;
        host_info |= effective.host_info;
        read_paths.extend(effective.read_paths);
    }
    let global_plugins = planned.plans.iter().any(|p| p.scope == PlanScope::Global);

    let namespace = kube
        .namespace
        .clone()
        .unwrap_or_else(|| names::default_namespace(run_id));
    let any: SocketAddr = "0.0.0.0:0".parse().expect("a valid address");
    let config = RunConfig {
        run_id: run_id.to_owned(),
        created: now_rfc3339(),
        factbuoy_version: env!("CARGO_PKG_VERSION").to_owned(),
        plugins: planned.plans,
        // Expected nodes come from the aggregator's live watch of the cluster's nodes.
        nodes: Vec::new(),
        dynamic_nodes: true,
        heartbeat_seconds: config::DEFAULT_HEARTBEAT.as_secs(),
        lost_after_seconds: config::DEFAULT_LOST_AFTER.as_secs(),
        run_timeout_seconds: run_timeout.as_secs().max(1),
        agent_listen: SocketAddr::new(any.ip(), AGENT_PORT),
        operator_listen: SocketAddr::new(any.ip(), OPERATOR_PORT),
        server_names: vec![names::server_name(&namespace)],
        bundle_dir: PathBuf::from(AGGREGATOR_RUN_DIR).join("bundle"),
        // The aggregator reads it from the ConfigMap's own key (`--operator-ca`).
        operator_ca: None,
        limits: ServerLimits::default(),
    };
    let plan_json = serde_json::to_string_pretty(&config)?;
    anyhow::ensure!(
        plan_json == serde_json::to_string_pretty(&config.without_secrets())?,
        "a secret plugin parameter cannot go into the run's ConfigMap, which anyone who may read it in the namespace sees; Kubernetes runs take no secret parameters yet"
    );

    let dir = operator_dir(run_id)?;
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    let record = KubeRun {
        run_id: run_id.to_owned(),
        namespace: namespace.clone(),
        // Absolute: `status` may run from another directory.
        kubeconfig: kube
            .cluster
            .kubeconfig
            .as_deref()
            .map(std::path::absolute)
            .transpose()?,
        context: kube.cluster.context.clone(),
    };
    record.save()?;
    let operator_ca = RunCa::create(&format!("{run_id} operator"))?;
    operator_ca.save(&dir)?;
    operator_ca
        .issue_client(&Role::Operator {
            name: "operator".to_owned(),
        })?
        .save(&dir, "operator")?;

    let spec = RunSpec {
        run_id: run_id.to_owned(),
        namespace: kube.namespace.clone(),
        image: kube.image.clone(),
        image_pull_policy: kube.image_pull_policy.clone(),
        node_selector: kube.node_selector.clone().unwrap_or_default(),
        tolerations: scheduling::tolerations(&kube.tolerate, !kube.no_tolerate_all),
        read_paths,
        host_info,
        agent_memory_limit: kube.agent_memory_limit.clone(),
        journal_groups: kube
            .journal_group
            .iter()
            .map(|&gid| i64::from(gid))
            .collect(),
        host_network: !kube.no_host_network,
        global_plugins,
        resources: kube.resources.clone(),
        operator_ca_pem: operator_ca.cert_pem().to_owned(),
        plan_json,
        components: planned.components,
    };
    let manifests = RunManifests::build(&spec)?;
    for path in &manifests.left_out {
        tracing::warn!(
            "plugins are granted {path}, which agents do not mount: they will see it absent"
        );
    }
    if kube.no_host_network {
        tracing::warn!(
            "--no-host-network: {}",
            factbuoy_dispatch::manifest::HOST_NETWORK_FACTS
        );
    }
    Ok(Prepared {
        manifests,
        operator_dir: dir,
        record,
    })
}

/// Makes the `--global` plugins run once, in the aggregator's pod: there `host-info` would
/// describe whichever node that pod is on, so it is denied, and a plugin that requires it is
/// refused here.
fn make_global(planned: &mut Planned, global: &[String]) -> anyhow::Result<()> {
    for name in global {
        let (plan, (_, loaded)) = planned
            .plans
            .iter_mut()
            .zip(&planned.loaded)
            .find(|(plan, _)| plan.name == *name)
            .with_context(|| {
                format!("--global {name:?} names no plugin of this run; add it with --plugin")
            })?;
        plan.scope = PlanScope::Global;
        plan.denies.push("host-info".to_owned());
        let mut grants = GrantSet::default();
        grants.extend_written(&plan.grants, &plan.denies)?;
        let effective = grants.effective(&loaded.info.capabilities)?;
        anyhow::ensure!(
            effective.missing_required.is_empty(),
            "plugin {name:?} requires {}, which a global plugin does not get: it runs in the aggregator's pod and reads only the cluster objects saved for resources/; run it per node instead",
            effective.missing_required.join(", ")
        );
    }
    Ok(())
}

pub async fn gen_cmd(args: GenArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let run_id = args.run_id.clone().unwrap_or_else(new_run_id);
    let prepared = prepare(&args.kube, &args.plugins, *args.timeout, &run_id).await?;
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
    eprintln!(
        "run {run_id}: operator credentials in {}; `factbuoy delete {run_id}` removes what these manifests create",
        prepared.operator_dir.display()
    );
    Ok(ExitStatus::Success)
}

pub async fn delete_cmd(args: DeleteArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let selection = match &args.run_id {
        Some(id) => Selection::Run(id.clone()),
        None => Selection::All,
    };
    let cluster = connect(&args.cluster.target()).await?;
    let options = DeleteOptions {
        dry_run: args.dry_run,
        wait: (!args.no_wait).then_some(*args.wait_timeout),
    };
    let found = delete::delete(&cluster.client, &selection, options).await?;
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

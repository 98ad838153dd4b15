//! A run over a Kubernetes cluster's nodes, from the operator's side: planned here, its
//! manifests and operator credentials made and applied by the kubernetes crate, then followed
//! through port-forward.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use factbuoy_aggregator::config::RunConfig;
use factbuoy_kubernetes::launch::{self, Prepared};
use factbuoy_kubernetes::reach::{self, AGGREGATOR_START};
use factbuoy_kubernetes::{ClusterRef, ClusterRun, RegistryReach};
use factbuoy_registry::{PluginReference, RegistryAccess};
use factbuoy_runtime::{Limits, Runtime, RuntimeOptions};

use crate::follow::{Finished, Source, follow_and_fetch};
use crate::plan::{Nodes, Plan, PluginSelection};
use crate::records::{KubeRun, RunRecord};
use crate::state::StateDir;

/// How often a Kubernetes run's status is asked for while following it.
const STATUS_EVERY: Duration = Duration::from_secs(2);

/// A run over the nodes of a Kubernetes cluster.
#[derive(Debug, Clone, Default)]
pub struct KubernetesTarget {
    /// Which cluster, as kubectl's flags name it.
    pub cluster: ClusterRef,
    /// Where and how the run's pods are placed.
    pub placement: ClusterRun,
    /// The run's id [default: a new one].
    pub run_id: Option<String>,
}

/// Plans the run and builds its objects (what `factbuoy gen` prints), with the operator
/// credentials and the run's record saved in the state directory, so that `status`,
/// `retrieve` and `delete` find the run once the objects are applied by any means.
pub async fn generate(
    state: &StateDir,
    target: &KubernetesTarget,
    selection: &PluginSelection,
    timeout: Duration,
) -> anyhow::Result<(KubeRun, Prepared)> {
    let runtime = Runtime::new(RuntimeOptions {
        limits: Limits {
            deadline: selection.deadline,
            ..Limits::default()
        },
        ..RuntimeOptions::default()
    })?;
    let plan = Plan::build(&runtime, selection, Nodes::Elsewhere).await?;
    let mut config = RunConfig {
        // Expected nodes come from the aggregator's live watch of the cluster's nodes; the
        // aggregator's pod sets its listeners, names and bundle folder.
        dynamic_nodes: true,
        run_timeout_seconds: timeout.as_secs().max(1),
        ..RunConfig::new(plan.plugins())
    };
    if let Some(run_id) = &target.run_id {
        config.run_id = run_id.clone();
    }
    let run_id = config.run_id.clone();
    let dir = state.kubernetes_run(&run_id);
    let components = if target.placement.plugins_in_config_maps {
        plan.components()
    } else {
        plan.components_from_files()
    };
    let registry = registry_reach(&plan, &target.placement, &selection.registry)?;
    let prepared = launch::prepare(
        &target.placement,
        &config,
        &plan.agent_access()?,
        components,
        registry,
        &dir,
    )?;
    let record = KubeRun {
        run_id,
        namespace: prepared.namespace.clone(),
        // Absolute: `status` may run from another directory.
        kubeconfig: target
            .cluster
            .kubeconfig
            .as_deref()
            .map(std::path::absolute)
            .transpose()?,
        context: target.cluster.context.clone(),
        created: Some(config.created.clone()),
    };
    record.save(state)?;
    Ok((record, prepared))
}

/// What the pods need to pull the plugins from registries (unless they travel in ConfigMaps,
/// `--plugins-in-configmaps`) and the image: the operator's credentials for those registries,
/// and the certificate authorities it trusts for the plugins' registries.
fn registry_reach(
    plan: &Plan,
    placement: &ClusterRun,
    access: &RegistryAccess,
) -> anyhow::Result<RegistryReach> {
    let mut plugin_registries = BTreeSet::new();
    let pulled = plan
        .entries
        .iter()
        .filter(|_| !placement.plugins_in_config_maps)
        .filter_map(|e| e.plugin.source.as_deref());
    for source in pulled {
        plugin_registries.insert(PluginReference::parse(source)?.registry().to_owned());
    }
    let mut registries = plugin_registries.clone();
    registries.extend(image_registry(&placement.image));
    Ok(RegistryReach {
        auth: access.docker_config(registries.iter().map(String::as_str))?,
        ca_pem: access.ca_pem(plugin_registries.iter().map(String::as_str))?,
    })
}

/// The registry an image name names (`registry.example:5000/factbuoy@sha256:...`), if it names
/// one: a first component with a dot or a port, or `localhost`, as container runtimes read it.
fn image_registry(image: &str) -> Option<String> {
    let (first, _) = image.split_once('/')?;
    (first.contains('.') || first.contains(':') || first == "localhost").then(|| first.to_owned())
}

/// A Kubernetes run whose objects are applied.
pub(crate) struct Applied {
    record: KubeRun,
    cluster: factbuoy_kubernetes::Cluster,
    operator_dir: PathBuf,
    timeout: Duration,
}

/// Plans the run, builds its objects and applies them.
pub(crate) async fn start(
    state: &StateDir,
    target: &KubernetesTarget,
    selection: &PluginSelection,
    timeout: Duration,
) -> anyhow::Result<(RunRecord, Applied)> {
    let (record, mut prepared) = generate(state, target, selection, timeout).await?;
    let cluster = factbuoy_kubernetes::connect(&target.cluster).await?;
    launch::apply(&cluster, &mut prepared).await?;
    let applied = Applied {
        operator_dir: state.kubernetes_run(&record.run_id),
        record: record.clone(),
        cluster,
        timeout,
    };
    Ok((RunRecord::Kubernetes(record), applied))
}

impl Applied {
    /// Follows the run until it ends, and downloads its bundle into `out`.
    pub(crate) async fn finish(
        self,
        out: &Path,
        on_status: &mut dyn FnMut(&factbuoy_protocol::types::StatusDocument),
    ) -> crate::Result<Finished> {
        let Applied {
            record,
            cluster,
            operator_dir,
            timeout,
        } = self;
        let source = Source::Served(
            reach::operator_client(&cluster, &record.namespace, &record.run_id, &operator_dir)
                .await?,
        );
        let stuck = format!(
            "see `kubectl -n {} describe pod {}`",
            record.namespace,
            factbuoy_kubernetes::AGGREGATOR_POD
        );
        let retrieve = format!("factbuoy retrieve {}", record.run_id);
        follow_and_fetch(
            &source,
            STATUS_EVERY,
            (timeout + AGGREGATOR_START, &stuck),
            out,
            &retrieve,
            on_status,
        )
        .await
    }
}

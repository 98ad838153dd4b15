//! The operator's side of starting a Kubernetes run: the run's objects and the operator's
//! credentials from a planned run ([`prepare`], all `factbuoy gen` does), then applied
//! ([`apply`], what `factbuoy run --kubernetes` adds).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use k8s_openapi::api::core::v1::{Secret, Toleration};

use factbuoy_aggregator::config::{PlanScope, RunConfig};
use factbuoy_dispatch::Cluster;
use factbuoy_dispatch::apply::{self, Mode};
use factbuoy_dispatch::manifest::{self, scheduling};
use factbuoy_dispatch::manifest::{RunManifests, RunSpec};
use factbuoy_dispatch::names;
use factbuoy_dispatch::resources::ResourceKind;
use factbuoy_pki::RunCa;
use factbuoy_protocol::identity::Role;

use crate::secrets;

/// The image `gen` and `run --kubernetes` use by default: what deploy/build-image.sh names it.
pub const DEFAULT_IMAGE: &str = concat!("factbuoy.local/factbuoy:", env!("CARGO_PKG_VERSION"));

/// Where and how a run's pods are placed in the cluster: everything about a Kubernetes run but
/// its plan.
#[derive(Debug, Clone)]
pub struct ClusterRun {
    /// An existing namespace to run in; `None` makes a new namespace `factbuoy-<run id>`, the
    /// run's root object.
    pub namespace: Option<String>,
    /// The factbuoy image, as deploy/build-image.sh built it.
    pub image: String,
    /// `imagePullPolicy` of the aggregator and the agents.
    pub image_pull_policy: String,
    /// Agents run only on nodes with these labels.
    pub node_selector: BTreeMap<String, String>,
    /// Taints the agents tolerate.
    pub tolerate: Vec<Toleration>,
    /// Whether agents tolerate every taint (besides `tolerate`).
    pub tolerate_all: bool,
    /// Memory limit of each agent container, a Kubernetes quantity.
    pub agent_memory_limit: String,
    /// The node directory where agents keep compiled plugins between runs; `None`: each pod's
    /// scratch space, compiled again every run.
    pub agent_cache: Option<String>,
    /// The size agents keep their cache under (`1GiB`).
    pub agent_cache_size: String,
    /// Cluster objects the aggregator saves into the bundle's resources/.
    pub resources: Vec<&'static ResourceKind>,
    /// Groups the agents run with as well, to read the nodes' journals.
    pub journal_groups: Vec<u32>,
    /// Whether agents share their node's network and UTS namespaces (hostNetwork), so that
    /// the host name, addresses and interfaces they report are the node's; off where policy
    /// forbids it, and those facts are then the pods' (docs/kubernetes.md).
    pub host_network: bool,
    /// Whether plugins from registries travel in ConfigMaps too, for a cluster whose aggregator
    /// reaches no registry; otherwise the aggregator pulls them.
    pub plugins_in_config_maps: bool,
}

impl Default for ClusterRun {
    fn default() -> Self {
        ClusterRun {
            namespace: None,
            image: DEFAULT_IMAGE.to_owned(),
            image_pull_policy: "IfNotPresent".to_owned(),
            node_selector: BTreeMap::new(),
            tolerate: Vec::new(),
            tolerate_all: true,
            agent_memory_limit: "768Mi".to_owned(),
            agent_cache: Some(manifest::DEFAULT_AGENT_CACHE_DIR.to_owned()),
            agent_cache_size: manifest::DEFAULT_AGENT_CACHE_SIZE.to_owned(),
            resources: ["nodes", "namespaces"]
                .iter()
                .map(|name| factbuoy_dispatch::resources::kind(name).expect("a known kind"))
                .collect(),
            journal_groups: Vec::new(),
            host_network: true,
            plugins_in_config_maps: false,
        }
    }
}

/// What the agents need of their node: the union of what the per-node plugins are granted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentAccess {
    /// Whether a plugin is granted `host-info`.
    pub host_info: bool,
    /// Host paths plugins are granted to read.
    pub read_paths: Vec<String>,
}

/// How the run's pods reach registries: the aggregator pulls the run's registry plugins, the
/// kubelets pull the image.
#[derive(Debug, Clone, Default)]
pub struct RegistryReach {
    /// Credentials for the registries of the plugins and the image (a docker config JSON):
    /// Secret `factbuoy-registry`, mounted in the aggregator and every pod's imagePullSecrets.
    pub auth: Option<Vec<u8>>,
    /// Certificate authorities (PEM) of the plugins' registries, for the aggregator's pulls.
    pub ca_pem: Option<String>,
}

/// A Kubernetes run, ready to apply.
pub struct Prepared {
    /// The run's objects.
    pub manifests: RunManifests,
    /// The namespace the run's objects live in.
    pub namespace: String,
    /// The run's Secret with the values of its secret parameters, if it has any: never among
    /// the manifests (`factbuoy gen` prints how to create it instead).
    pub secret: Option<Secret>,
}

impl Prepared {
    /// How to create the run's Secret after applying the manifests by other means, if the run
    /// has secret parameters: a `kubectl create secret` command with a file per parameter.
    pub fn secret_command(&self) -> Option<String> {
        let secret = self.secret.as_ref()?;
        let keys: Vec<&String> = secret.data.iter().flat_map(|data| data.keys()).collect();
        Some(secrets::create_command(&self.namespace, &keys))
    }

    /// How to create the run's registry Secret after applying the manifests by other means,
    /// if the run has one: `kubectl create secret generic` from the operator's auth file.
    pub fn registry_secret_command(&self, auth_file: &str) -> Option<String> {
        self.manifests.registry_secret.as_ref()?;
        Some(format!(
            "kubectl -n {} create secret generic {} --type=kubernetes.io/dockerconfigjson --from-file=.dockerconfigjson={auth_file}",
            self.namespace,
            names::REGISTRY_SECRET
        ))
    }
}

/// Builds the objects of run `config` placed by `placement`, with the operator CA and the
/// operator's certificate made in `operator_dir` (ca.pem, ca.key, operator.pem, operator.key,
/// the keys 0600): the aggregator's operator listener trusts that CA only. `components` are the
/// plugins that travel in ConfigMaps, by digest; `registry` says how the pods reach the
/// registries of the others and of the image.
pub fn prepare(
    placement: &ClusterRun,
    config: &RunConfig,
    access: &AgentAccess,
    components: Vec<(String, Vec<u8>)>,
    registry: RegistryReach,
    operator_dir: &Path,
) -> anyhow::Result<Prepared> {
    let run_id = &config.run_id;
    names::check_run_id(run_id)?;
    // Secret parameters travel apart, in the run's Secret (`secrets`), never in the ConfigMap.
    let plan_json = serde_json::to_string_pretty(&config.without_secrets())?;
    let secret_values = secrets::values(config);
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(operator_dir)
            .with_context(|| format!("creating {}", operator_dir.display()))?;
    }
    let operator_ca = RunCa::create(&format!("{run_id} operator"))?;
    operator_ca.save(operator_dir)?;
    operator_ca
        .issue_client(&Role::Operator {
            name: "operator".to_owned(),
        })?
        .save(operator_dir, OPERATOR_FILES)?;

    let spec = RunSpec {
        run_id: run_id.clone(),
        namespace: placement.namespace.clone(),
        image: placement.image.clone(),
        image_pull_policy: placement.image_pull_policy.clone(),
        node_selector: placement.node_selector.clone(),
        tolerations: scheduling::tolerations(&placement.tolerate, placement.tolerate_all),
        read_paths: access.read_paths.clone(),
        host_info: access.host_info,
        agent_memory_limit: placement.agent_memory_limit.clone(),
        agent_cache: placement.agent_cache.clone(),
        agent_cache_size: placement.agent_cache_size.clone(),
        journal_groups: placement
            .journal_groups
            .iter()
            .map(|&gid| i64::from(gid))
            .collect(),
        host_network: placement.host_network,
        global_plugins: config.plugins.iter().any(|p| p.scope == PlanScope::Global),
        resources: placement.resources.clone(),
        operator_ca_pem: operator_ca.cert_pem().to_owned(),
        plan_json,
        components,
        registry_auth: registry.auth,
        registry_ca_pem: registry.ca_pem,
        secrets: !secret_values.is_empty(),
    };
    let manifests = RunManifests::build(&spec)?;
    for path in &manifests.left_out {
        tracing::warn!(
            "plugins are granted {path}, which agents do not mount: they will see it absent"
        );
    }
    if !placement.host_network {
        tracing::warn!(
            "--no-host-network: {}",
            factbuoy_dispatch::manifest::HOST_NETWORK_FACTS
        );
    }
    let secret = (!secret_values.is_empty())
        .then(|| secrets::object(run_id, &manifests.namespace_name, &secret_values));
    Ok(Prepared {
        namespace: manifests.namespace_name.clone(),
        manifests,
        secret,
    })
}

/// The stem of the operator's certificate files in the operator directory
/// (`operator.pem`, `operator.key`).
pub(crate) const OPERATOR_FILES: &str = "operator";

/// Applies a prepared run's objects to the cluster, then creates its Secret, if any (the
/// aggregator waits for it).
pub async fn apply(cluster: &Cluster, prepared: &mut Prepared) -> anyhow::Result<()> {
    apply::apply(&cluster.client, &mut prepared.manifests, Mode::Apply)
        .await
        .context("applying the run's manifests")?;
    if let Some(secret) = &prepared.secret {
        secrets::create(&cluster.client, secret).await?;
    }
    Ok(())
}

//! The aggregator as a pod of its own run: what `factbuoy aggregator serve-kubernetes` runs in
//! the aggregator pod of `factbuoy run --kubernetes` (and of `factbuoy gen`'s manifests). It
//! creates the run's CA inside the pod (the private key never leaves it), publishes the CA
//! certificate for the agents, saves the cluster's resources into the bundle, follows the nodes
//! and the agent pods, and ends the run's DaemonSet once every result is in.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use factbuoy_agent::AgentConfig;
use factbuoy_aggregator::config::{Origin, OriginKind, PlanScope, RunImage};
use factbuoy_aggregator::enroll::{Admission, Admitting, NotAdmitted};
use factbuoy_aggregator::{NodeSet, NodeSetError, Run, RunDir};
use factbuoy_dispatch::admission::{AdmissionError, PodTokenAdmission, SeenPods};
use factbuoy_dispatch::manifest::components;
use factbuoy_dispatch::names;
use factbuoy_dispatch::nodes::{NodeChange, NodeFilter};
use factbuoy_dispatch::pods::PodEvent;
use factbuoy_dispatch::resources::{self, ResourceKind};
use factbuoy_dispatch::status_annotation::Publisher;
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::tls::Identity;
use factbuoy_protocol::{Client as AgentClient, Scope};
use factbuoy_runtime::{Runtime, RuntimeOptions};

use crate::secrets;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use tokio::sync::mpsc;

/// How often the status annotation is brought up to date (each patch only when it changed, and
/// at most every few seconds: see `status_annotation`).
const STATUS_TICK: Duration = Duration::from_secs(1);
/// Watch events waiting to be applied to the run: the watches wait while the queue is full.
const WATCH_EVENTS: usize = 256;
/// How long the aggregator waits for the API server to answer at its start.
const API_WAIT: Duration = Duration::from_secs(60);
/// The bundle's folder of cluster objects, which global plugins read.
const RESOURCES_DIR: &str = "resources";
/// How long the aggregator waits for its run's DaemonSet to be applied after it.
const DAEMONSET_WAIT: Duration = Duration::from_secs(120);

/// What the aggregator pod is given on its command line (see `factbuoy gen`).
#[derive(Debug, Clone)]
pub struct PodServeOptions {
    /// The run plan (`run.json` of ConfigMap factbuoy-run).
    pub plan: PathBuf,
    /// Where the parts of the plugin components not bundled in the image are mounted, one
    /// folder per ConfigMap `factbuoy-plugin-part-<n>`.
    pub components: PathBuf,
    /// The operator CA certificate: the operator listener accepts operators it signed.
    pub operator_ca: PathBuf,
    /// The run directory (an emptyDir: it outlives a restart of the container, not of the pod).
    pub run_dir: PathBuf,
    /// How long an expected node may stay NotReady before its missing results are given up as
    /// lost.
    pub lost_after: Duration,
    /// The kinds of cluster objects saved into the bundle's resources/ (the run's RBAC lets it
    /// list exactly these).
    pub resources: Vec<&'static ResourceKind>,
    /// Whether the run has secret parameters, whose values are in Secret `factbuoy-secrets`.
    pub secrets: bool,
    /// How to reach the registries the run's plugins come from (the pull Secret's auth file,
    /// the certificate authorities in the run's ConfigMap).
    pub registry: factbuoy_registry::RegistryAccess,
}

/// The pod's own name and namespace, from the downward API.
struct Me {
    pod: String,
    namespace: String,
}

impl Me {
    fn from_env() -> anyhow::Result<Me> {
        let var = |name: &str| {
            std::env::var(name).with_context(|| {
                format!("${name} is not set; the aggregator pod sets it from the downward API (see `factbuoy gen`)")
            })
        };
        Ok(Me {
            pod: var("POD_NAME")?,
            namespace: var("POD_NAMESPACE")?,
        })
    }
}

/// Serves the run until it ends, then keeps serving its status and bundle until `shutdown`
/// completes (the pod is deleted with the run).
pub async fn serve(
    args: PodServeOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let me = Me::from_env()?;
    let cluster = factbuoy_dispatch::in_cluster()?;
    let client = cluster.client;
    wait_for_api(&client).await?;
    let run = open_or_create(&args, &client, &me).await?;
    let run_id = run.config().run_id.clone();
    let ca_pem = run.ca().cert_pem().to_owned();
    save_resources(
        &client,
        &args.resources,
        &run.dir().results().join(RESOURCES_DIR),
    )
    .await;

    let filter = agents_filter(&client, &me.namespace).await?;
    let global = GlobalRunner::for_run(&run)?;

    // The pod watch below keeps `seen`; admission reads agents' pods from it.
    let seen = SeenPods::default();
    let admission = PodTokens(
        PodTokenAdmission::new(client.clone(), &me.namespace, &run_id).with_seen_pods(seen.clone()),
    );
    let mut running = factbuoy_aggregator::start_with(
        run,
        factbuoy_catalog::bundled_component,
        Some(Arc::new(admission)),
    )
    .await?;
    // Published once both listeners are bound: the operator takes the annotation, and agents
    // the ConfigMap, as the sign that the aggregator answers.
    publish_ca(&client, &me, &ca_pem).await?;
    if let Some(global) = global {
        tokio::spawn(global.run(running.agent_address.port()));
    }
    let (node_tx, node_rx) = mpsc::channel(WATCH_EVENTS);
    tokio::spawn(factbuoy_dispatch::nodes::follow_nodes(
        client.clone(),
        filter,
        args.lost_after,
        node_tx,
    ));
    tokio::spawn(apply_node_changes(running.nodes(), node_rx));
    let (pod_tx, pod_rx) = mpsc::channel(WATCH_EVENTS);
    let run_pods = Api::<Pod>::namespaced(client.clone(), &me.namespace);
    {
        let (pods, run_id) = (run_pods.clone(), run_id.clone());
        tokio::spawn(async move {
            factbuoy_dispatch::pods::follow_pods(
                pods,
                &run_id,
                factbuoy_dispatch::pods::DEFAULT_RESTART_LIMIT,
                seen,
                pod_tx,
            )
            .await
        });
    }
    tokio::spawn(apply_pod_events(running.nodes(), pod_rx));
    let mut publisher = Publisher::new(run_pods, me.pod.clone());
    let status_reader = running.status_reader();
    let status = loop {
        tokio::select! {
            status = running.finished() => break status,
            _ = tokio::time::sleep(STATUS_TICK) => {
                if let Err(e) = publisher.publish(&status_reader.document(), false).await {
                    tracing::warn!("publishing the status annotation: {e}");
                }
            }
        }
    };
    tracing::info!(?status, run = %run_id, "the run ended");
    if let Err(e) = publisher.publish(&status_reader.document(), true).await {
        tracing::warn!("publishing the final status annotation: {e}");
    }
    end_daemonset(&client, &me.namespace).await;
    if args.secrets {
        secrets::delete(&client, &me.namespace).await;
    }
    // The bundle stays available on the operator listener until `factbuoy delete`.
    shutdown.await;
    Ok(())
}

/// Waits for the API server to answer: a new pod's network (its CNI routes, the `kubernetes`
/// Service's rules) can lag its start by moments, and the pod is not restarted.
async fn wait_for_api(client: &Client) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + API_WAIT;
    loop {
        match client.apiserver_version().await {
            Ok(_) => return Ok(()),
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::warn!("the API server does not answer yet ({e}); trying again");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "the API server did not answer within {} s; check the pod network of the aggregator's node",
                        API_WAIT.as_secs()
                    )
                });
            }
        }
    }
}

/// The aggregator's own agent for the run's global plugins: it runs them once, one at a time
/// (the pod's memory limit allows for one sandbox), with a `global:` certificate and through
/// the agent listener like any agent. Their host root is the cluster objects saved for
/// resources/: a global plugin reads `/nodes.json`, never the files of the node this pod is on.
struct GlobalRunner {
    identity: Identity,
    server_name: String,
    host_root: PathBuf,
    spool_dir: PathBuf,
}

impl GlobalRunner {
    /// The runner for `run`, if it has global plugins.
    fn for_run(run: &Run) -> anyhow::Result<Option<GlobalRunner>> {
        let config = run.config();
        if !config.plugins.iter().any(|p| p.scope == PlanScope::Global) {
            return Ok(None);
        }
        let role = Role::Global {
            name: "aggregator".to_owned(),
        };
        Ok(Some(GlobalRunner {
            identity: run.ca().identity(&run.issue(&role)?),
            server_name: config
                .server_names
                .first()
                .context("the run names no server name")?
                .clone(),
            host_root: run.dir().results().join(RESOURCES_DIR),
            spool_dir: run.dir().spool(),
        }))
    }

    async fn run(self, agent_port: u16) {
        let ran = async {
            let client = AgentClient::new(&format!("127.0.0.1:{agent_port}"), &self.identity)?
                .with_server_name(&self.server_name)?;
            let runtime = Arc::new(Runtime::new(RuntimeOptions::default())?);
            let config = Arc::new(AgentConfig {
                scope: Scope::Global,
                host_root: self.host_root,
                spool_dir: self.spool_dir,
                retry_for: factbuoy_agent::RETRY_FOR,
                parallel: 1,
                stop: factbuoy_runtime::StopSignal::new(),
            });
            factbuoy_agent::run(client, runtime, config, Arc::default()).await
        };
        match ran.await {
            Ok(summary) => tracing::info!(?summary.results, "the global plugins ran"),
            // The global results then stay missing until the run's deadline fills them in.
            Err(e) => tracing::error!("running the global plugins: {e:#}"),
        }
    }
}

/// The run in `--run-dir`, created from the plan on first start and read back after a restart
/// of the container.
async fn open_or_create(args: &PodServeOptions, client: &Client, me: &Me) -> anyhow::Result<Run> {
    let namespace = me.namespace.as_str();
    let dir = RunDir::new(&args.run_dir);
    if dir.config().exists() {
        return Run::open(dir);
    }
    let text = std::fs::read_to_string(&args.plan)
        .with_context(|| format!("reading the run plan {}", args.plan.display()))?;
    let mut config: factbuoy_aggregator::config::RunConfig = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a run plan", args.plan.display()))?;
    config.dynamic_nodes = true;
    config.nodes.clear();
    config.agent_listen = ([0, 0, 0, 0], names::AGENT_PORT).into();
    config.operator_listen = ([0, 0, 0, 0], names::OPERATOR_PORT).into();
    // Agents dial the Service's address but check this name: the cluster may have no DNS.
    config.server_names = vec![names::server_name(namespace)];
    config.bundle_dir = args.run_dir.join("bundle");
    let operator_ca = std::fs::read_to_string(&args.operator_ca).with_context(|| {
        format!(
            "reading the operator CA certificate {}",
            args.operator_ca.display()
        )
    })?;
    config.operator_ca = Some(operator_ca);
    if args.secrets {
        secrets::read_into(client, namespace, &mut config).await?;
    }
    config.origin = cluster_origin(client).await;
    config.image = own_image(client, me).await;
    let mut components = components::join(&args.components)?;
    pull_plugins(&config, &args.registry, &mut components).await?;
    let run = Run::create(dir, config, &components)?;
    Ok(run)
}

/// Pulls the plugins of `config` that came from registries and did not travel in ConfigMaps,
/// each by the digest the operator resolved (a tag moved since changes nothing), and checks
/// that each is the component the plan names.
async fn pull_plugins(
    config: &factbuoy_aggregator::config::RunConfig,
    registry: &factbuoy_registry::RegistryAccess,
    components: &mut Vec<(String, Vec<u8>)>,
) -> anyhow::Result<()> {
    for plugin in &config.plugins {
        let Some(source) = &plugin.source else {
            continue;
        };
        if components
            .iter()
            .any(|(sha256, _)| *sha256 == plugin.sha256)
        {
            continue;
        }
        let reference = factbuoy_registry::PluginReference::parse(source)?;
        anyhow::ensure!(
            reference.digest().is_some(),
            "plugin {:?}: its source {source} is not pinned to a digest; plan the run again",
            plugin.name
        );
        let pulled = factbuoy_registry::pull::pull(
            registry,
            &reference,
            &factbuoy_registry::PullLimits::default(),
        )
        .await
        .with_context(|| format!("pulling plugin {:?}", plugin.name))?;
        let sha256 = factbuoy_protocol::digest::sha256_hex(pulled.wasm());
        anyhow::ensure!(
            sha256 == plugin.sha256,
            "plugin {:?}: {source} holds component {sha256}, not the {} the run was planned with",
            plugin.name,
            plugin.sha256
        );
        tracing::info!(plugin = %plugin.name, %source, "pulled the plugin");
        components.push((sha256, pulled.layer.0));
    }
    Ok(())
}

/// The cluster's identity, for the bundle: the uid of its `kube-system` namespace, which lives
/// as long as the cluster does (what `kubectl` users and most tools take as a cluster's id).
/// Without it (a manifest from before the aggregator could read it) the run still runs, and
/// its bundle records no origin.
async fn cluster_origin(client: &Client) -> Option<Origin> {
    match Api::<Namespace>::all(client.clone())
        .get("kube-system")
        .await
    {
        Ok(namespace) => namespace.metadata.uid.map(|id| Origin {
            kind: OriginKind::Kubernetes,
            id,
        }),
        Err(e) => {
            tracing::warn!(
                "reading namespace kube-system's uid, the cluster's identity in the bundle: {e}; the bundle records no origin"
            );
            None
        }
    }
}

/// The image this pod runs, for the bundle: its name and the `imageID` the container runtime
/// reports for it, which holds the digest even when the name is a tag. The kubelet reports it
/// shortly after the container starts, so it is asked for a few times. Without it the run still
/// runs, and its bundle records no image.
async fn own_image(client: &Client, me: &Me) -> Option<RunImage> {
    let pods = Api::<Pod>::namespaced(client.clone(), &me.namespace);
    for _ in 0..IMAGE_ID_TRIES {
        match pods.get(&me.pod).await {
            Ok(pod) => {
                // The status's `image` is the runtime's own id of the image; the spec's is the
                // name the pods were given.
                let name = pod
                    .spec
                    .and_then(|s| s.containers.into_iter().next())
                    .and_then(|c| c.image);
                let id = pod
                    .status
                    .and_then(|s| s.container_statuses)
                    .and_then(|c| c.into_iter().next())
                    .map(|c| c.image_id)
                    .filter(|id| !id.is_empty());
                if let (Some(name), Some(id)) = (name, id) {
                    return Some(RunImage { name, id });
                }
            }
            Err(e) => {
                tracing::warn!(
                    "reading the aggregator's own pod for its image: {e}; the bundle records no image"
                );
                return None;
            }
        }
        tokio::time::sleep(IMAGE_ID_EVERY).await;
    }
    tracing::warn!(
        "the kubelet reported no imageID for the aggregator; the bundle records no image"
    );
    None
}

/// How often, and how many times, the aggregator asks for its own pod's imageID.
const IMAGE_ID_EVERY: Duration = Duration::from_millis(500);
const IMAGE_ID_TRIES: u32 = 30;

/// The aggregator's admission, answered by a TokenReview of the agent pod's projected token:
/// the certificate names the node that pod is bound to.
struct PodTokens(PodTokenAdmission);

impl Admission for PodTokens {
    fn admit<'a>(&'a self, credential: &'a str) -> Admitting<'a> {
        Box::pin(async move {
            self.0.admit(credential).await.map_err(|e| match e {
                AdmissionError::Refused(refusal) => NotAdmitted::Refused(refusal.to_string()),
                AdmissionError::Unavailable(why) => NotAdmitted::Unavailable(why),
            })
        })
    }
}

/// Which nodes the run's agent DaemonSet places agents on, as applied: its node selector and
/// tolerations decide which nodes are expected and which are skipped.
async fn agents_filter(client: &Client, namespace: &str) -> anyhow::Result<NodeFilter> {
    // `run` applies the DaemonSet just after this pod: wait for it, watching.
    let daemonsets = Api::<DaemonSet>::namespaced(client.clone(), namespace);
    let exists = |d: Option<&DaemonSet>| d.is_some();
    let daemonset = tokio::time::timeout(
        DAEMONSET_WAIT,
        kube::runtime::wait::await_condition(daemonsets, names::AGENT, exists),
    )
    .await
    .map_err(|_| {
        anyhow::anyhow!(
            "DaemonSet {} did not appear within {}s; apply the run's manifests whole (`factbuoy gen`)",
            names::AGENT,
            DAEMONSET_WAIT.as_secs()
        )
    })?
    .with_context(|| format!("watching for DaemonSet {}", names::AGENT))?
    .expect("the condition holds only for an existing DaemonSet");
    let pod = daemonset
        .spec
        .and_then(|spec| spec.template.spec)
        .unwrap_or_default();
    Ok(NodeFilter {
        node_selector: pod.node_selector.unwrap_or_default(),
        tolerations: pod.tolerations.unwrap_or_default(),
    })
}

/// Puts the CA certificate where agents find it (ConfigMap `factbuoy-ca`, mounted into their
/// pods) and where operators find it (an annotation on this pod, read through the API).
async fn publish_ca(client: &Client, me: &Me, ca_pem: &str) -> anyhow::Result<()> {
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), &me.namespace);
    let map = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(names::CA_CONFIG_MAP.into()),
            ..Default::default()
        },
        data: Some([(names::CA_KEY.to_owned(), ca_pem.to_owned())].into()),
        ..Default::default()
    };
    match config_maps.create(&PostParams::default(), &map).await {
        Ok(_) => {}
        // A restarted pod with a new CA replaces the one before.
        Err(kube::Error::Api(status)) if status.is_already_exists() => {
            let patch = serde_json::json!({ "data": { names::CA_KEY: ca_pem } });
            config_maps
                .patch(
                    names::CA_CONFIG_MAP,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .context("replacing ConfigMap factbuoy-ca")?;
        }
        Err(e) => return Err(e).context("creating ConfigMap factbuoy-ca"),
    }
    let patch =
        serde_json::json!({ "metadata": { "annotations": { names::CA_ANNOTATION: ca_pem } } });
    Api::<Pod>::namespaced(client.clone(), &me.namespace)
        .patch(&me.pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .context("annotating the aggregator pod with its CA")?;
    Ok(())
}

/// Saves the server's version and the `kinds` into `dir`. A kind that cannot be listed is noted
/// in `dir/errors.json` and the run goes on: the nodes' facts matter more.
async fn save_resources(client: &Client, kinds: &[&'static ResourceKind], dir: &Path) {
    if let Err(e) = std::fs::create_dir_all(dir) {
        tracing::error!(
            "creating {}: {e}; the bundle will have no resources/",
            dir.display()
        );
        return;
    }
    let mut errors = Vec::new();
    if let Err(e) = resources::save_version(client, dir).await {
        errors.push(e.to_string());
    }
    for kind in kinds {
        match resources::save_kind(client, kind, dir, resources::PAGE_SIZE).await {
            Ok(count) => tracing::info!("resources/{}.json: {count} objects", kind.name),
            Err(e) => errors.push(e.to_string()),
        }
    }
    if !errors.is_empty() {
        tracing::warn!("saving cluster resources: {}", errors.join("; "));
        let json = serde_json::to_vec_pretty(&errors).expect("strings serialise");
        if let Err(e) = std::fs::write(dir.join("errors.json"), json) {
            tracing::error!("writing resources/errors.json: {e}");
        }
    }
}

/// Maps what the node watch learns onto the run's node set.
async fn apply_node_changes(nodes: NodeSet, mut changes: mpsc::Receiver<NodeChange>) {
    while let Some(change) = changes.recv().await {
        let applied = match &change {
            NodeChange::Expected(node) => nodes.expect(node).await,
            NodeChange::Skipped { node, reason } => nodes.skip(node, reason).await,
            // A kubelet that stopped: its missing results are given up as lost at once, as for
            // a node that left; a node that comes back later is not waited for again.
            NodeChange::Lost { node, reason } | NodeChange::Gone { node, reason } => {
                nodes.gone(node, reason).await
            }
            NodeChange::Unusable { name, reason } => {
                tracing::warn!(node = %name, "a node factbuoy cannot report on: {reason}");
                Ok(())
            }
            NodeChange::Settled => nodes.settled().await,
        };
        match applied {
            Ok(()) => tracing::debug!(?change, "node change applied"),
            // Skipped and gone are final: a node back after either is not waited for.
            Err(NodeSetError::Final(why)) => tracing::info!(?change, "{why}"),
            Err(e) => tracing::error!(?change, "applying a node change: {e}"),
        }
    }
}

/// Turns agent pods' problems into error results for their nodes. A result the agent still
/// sends replaces such an error result.
async fn apply_pod_events(nodes: NodeSet, mut events: mpsc::Receiver<PodEvent>) {
    while let Some(event) = events.recv().await {
        if let PodEvent::Problem { pod, kind, message } = &event {
            let Some(node) = &pod.node else {
                tracing::warn!(pod = %pod.name, %kind, "an agent pod with no node: {message}");
                continue;
            };
            if let Err(e) = nodes.fail(node, message).await {
                tracing::error!(%node, "recording the agent's failure: {e}");
            }
        }
    }
}

/// Deletes the run's agent DaemonSet: every result is in, so agents neither linger nor restart.
async fn end_daemonset(client: &Client, namespace: &str) {
    let daemonsets = Api::<DaemonSet>::namespaced(client.clone(), namespace);
    match daemonsets
        .delete(names::AGENT, &DeleteParams::background())
        .await
    {
        Ok(_) => tracing::info!("deleted DaemonSet {}", names::AGENT),
        Err(kube::Error::Api(status)) if status.is_not_found() => {}
        Err(e) => tracing::error!("deleting DaemonSet {}: {e}", names::AGENT),
    }
}

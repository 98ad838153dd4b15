//! What a run is: its plugins, its nodes, its timings and the limits of its listeners. Written
//! once to `run.json` in the run directory when the run is created and read back by a restarted
//! aggregator (`persistence::saved` does both); secret parameters are kept apart.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use factbuoy_protocol::names::NodeName;
use serde::{Deserialize, Serialize};

/// Default interval between agent heartbeats.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(5);
/// Default silence after which a node is marked lost.
pub const DEFAULT_LOST_AFTER: Duration = Duration::from_secs(60);
/// Default time after which a run ends with error results for whatever is missing.
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(3600);
/// Default largest uploaded file.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 16 << 30;
/// Default largest JSON body (manifests, progress).
pub const DEFAULT_MAX_JSON_BYTES: u64 = 4 << 20;
/// Default largest request head; also each connection's read buffer.
pub const DEFAULT_MAX_HEADER_BYTES: usize = 16 << 10;
/// Default time allowed for the TLS handshake and the request head.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default longest wait for the next piece of a body.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Default slowest accepted average upload rate, once an upload is older than the grace.
pub const DEFAULT_MIN_UPLOAD_BYTES_PER_SECOND: u64 = 16 << 10;
/// Default time an upload may take before its rate is checked.
pub const DEFAULT_UPLOAD_GRACE: Duration = Duration::from_secs(10);
/// Default connections each listener serves at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Default longest a response may make no progress before its connection is closed: a client
/// that stops reading (or pipelines requests and never reads the answers) holds nothing long.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Default age after which a connection with a certificate is closed once its request in
/// flight is answered (its client connects again).
pub const DEFAULT_CONNECTION_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// Default age after which a connection without a certificate is cut, whatever it is doing: it
/// can only join or enroll, which takes a request or two.
pub const DEFAULT_ANONYMOUS_LIFETIME: Duration = Duration::from_secs(60);

/// Whether a plugin runs on every node or once for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlanScope {
    /// One result from each expected node's agent.
    PerNode,
    /// One result for the whole run, stored under `global` and sent with a `global:`
    /// certificate; agents do not run it.
    Global,
}

/// One plugin of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPlugin {
    /// The plugin's name, as results and progress name it.
    pub name: String,
    /// Lower-case hex sha-256 of its component, by which agents fetch it.
    pub sha256: String,
    /// Whether it runs on every node or once for the run.
    pub scope: PlanScope,
    /// Parameters as NAME=VALUE text, passed on in each agent's plan.
    pub params: Vec<(String, String)>,
    /// Capabilities granted, in written form (`host-info`, `read:/proc`, `all`).
    pub grants: Vec<String>,
    /// Capabilities denied, in written form.
    pub denies: Vec<String>,
    /// Wall-clock deadline of each run of the plugin, in seconds.
    pub deadline_seconds: u64,
    /// The plugin's description, written to `plugins/<name>/definition.json` in the bundle.
    pub definition: serde_json::Value,
    /// Where a plugin from a registry came from: its reference pinned to the manifest's digest
    /// (`oci://REGISTRY/REPOSITORY:TAG@sha256:...`); absent for bundled plugins and files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// When the run required signatures: the sha-256 of the public key whose signature of
    /// `source`'s manifest was checked (`sha256:...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
}

/// Limits of the aggregator's HTTP server. A `run.json` written before a limit existed gets its
/// default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerLimits {
    /// Largest uploaded file.
    pub max_file_bytes: u64,
    /// Largest JSON body (manifests, progress).
    pub max_json_bytes: u64,
    /// Largest request head (request line and headers); also each connection's read buffer.
    pub max_header_bytes: usize,
    /// Time allowed to send the request head; also how long a kept connection may wait idle
    /// for its next request.
    pub header_timeout_seconds: u64,
    /// Longest wait for the next piece of a body.
    pub idle_timeout_seconds: u64,
    /// Slowest accepted average upload rate, checked once a request is older than the grace.
    pub min_upload_bytes_per_second: u64,
    /// Age of an upload, in seconds, before its rate is checked.
    pub upload_grace_seconds: u64,
    /// Connections served at once; more are closed on accept.
    pub max_connections: usize,
    /// Longest a response may make no progress (the client reads nothing) before the
    /// connection is closed.
    pub write_timeout_seconds: u64,
    /// Age after which a connection with a certificate is closed once its request in flight
    /// is answered.
    pub lifetime_seconds: u64,
    /// Age after which a connection without a certificate is cut.
    pub anonymous_lifetime_seconds: u64,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_json_bytes: DEFAULT_MAX_JSON_BYTES,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            header_timeout_seconds: DEFAULT_HEADER_TIMEOUT.as_secs(),
            idle_timeout_seconds: DEFAULT_IDLE_TIMEOUT.as_secs(),
            min_upload_bytes_per_second: DEFAULT_MIN_UPLOAD_BYTES_PER_SECOND,
            upload_grace_seconds: DEFAULT_UPLOAD_GRACE.as_secs(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            write_timeout_seconds: DEFAULT_WRITE_TIMEOUT.as_secs(),
            lifetime_seconds: DEFAULT_CONNECTION_LIFETIME.as_secs(),
            anonymous_lifetime_seconds: DEFAULT_ANONYMOUS_LIFETIME.as_secs(),
        }
    }
}

/// A run's configuration, as `run.json` holds it. Fixed when the run is created, except the
/// listen addresses, which record the ports picked at the first start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// The run's id, in the bundle's name and the status document.
    pub run_id: String,
    /// When the run was created, RFC 3339 UTC; the run timeout counts from here.
    pub created: String,
    /// The version of factbuoy that created the run.
    pub factbuoy_version: String,
    /// The plugins the run expects results of.
    pub plugins: Vec<RunPlugin>,
    /// Nodes expected to send per-node results; `run.json` naming an invalid or reserved node
    /// does not load.
    pub nodes: Vec<NodeName>,
    /// Whether the set of nodes changes while the run serves: a dispatcher names nodes as it
    /// learns them (the `NodeSet` of a serving run), and the run cannot end before it says its
    /// first listing is complete. `nodes` are then only the first expected ones. Absent in
    /// `run.json` files written before it existed: fixed.
    #[serde(default)]
    pub dynamic_nodes: bool,
    /// Interval between an agent's heartbeats, in seconds, as plans tell agents.
    pub heartbeat_seconds: u64,
    /// Silence, in seconds, after which a node is marked lost.
    pub lost_after_seconds: u64,
    /// Seconds after `created` at which every missing result becomes an error result.
    pub run_timeout_seconds: u64,
    /// Where the agent listener binds; port 0 picks a free port, recorded after the first start.
    pub agent_listen: SocketAddr,
    /// Where the operator listener binds; port 0 as for `agent_listen`.
    pub operator_listen: SocketAddr,
    /// Names and addresses in the server certificate: what agents and operators dial.
    pub server_names: Vec<String>,
    /// Where the finished bundle is written.
    pub bundle_dir: PathBuf,
    /// Another CA (PEM) whose certificates the operator listener accepts, besides the run's:
    /// in a Kubernetes run, the CLI's operator CA, whose key never leaves the operator's
    /// machine while the run's CA is made inside the aggregator's pod. Agents' certificates
    /// come from the run's CA only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_ca: Option<String>,
    /// Limits of both listeners.
    pub limits: ServerLimits,
    /// Which machines the run's node names name: the history of a pile of bundles matches
    /// nodes by name only within one origin. Absent for a run that has none (a separately
    /// created aggregator, whose agents name themselves) and in `run.json` files written
    /// before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
    /// The container image of a Kubernetes run: the name its pods were given and the digest
    /// the aggregator's node resolved it to. Absent elsewhere (the binary's version says what
    /// ran) and in bundles written before factbuoy recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<RunImage>,
}

/// The image a Kubernetes run's pods ran ([`RunConfig::image`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunImage {
    /// The image as the pods name it (`registry.example:5000/factbuoy@sha256:...`).
    pub name: String,
    /// What the container runtime pulled: the aggregator container's `imageID`
    /// (`registry.example:5000/factbuoy@sha256:...`), the manifest digest in it.
    pub id: String,
}

/// Where a run's nodes come from, so that `web1` of one cluster is not taken for `web1` of
/// another: the kind of run and an id that stays the same across that source's runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Origin {
    /// The kind of run.
    pub kind: OriginKind,
    /// A local run: the host's node name. A Kubernetes run: the uid of the cluster's
    /// `kube-system` namespace. A fleet run: the sha-256 of the fleet's CA certificate (of its DER).
    pub id: String,
}

/// The kind of run an [`Origin`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OriginKind {
    /// `factbuoy run` on this host.
    Local,
    /// A run over a Kubernetes cluster's nodes.
    Kubernetes,
    /// A run over an enrolled fleet.
    Fleet,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            OriginKind::Local => "local",
            OriginKind::Kubernetes => "kubernetes",
            OriginKind::Fleet => "fleet",
        };
        write!(f, "{kind}:{}", self.id)
    }
}

impl RunPlugin {
    /// Whether the plugin's description declares parameter `name` secret.
    pub fn is_secret(&self, name: &str) -> bool {
        self.definition["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["name"] == name && p["secret"] == true)
    }
}

/// A new run id: 12 random hex digits.
pub fn new_run_id() -> String {
    format!("{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff)
}

impl RunConfig {
    /// A run of `plugins` with every other setting at its default: a new id ([`new_run_id`]),
    /// created now, no expected nodes yet (a fixed set), both listeners on loopback with ports
    /// picked at the first start, the default heartbeat, loss and run timeouts and server
    /// limits, and the bundle written into the current directory. Every kind of run starts
    /// from here and changes what differs.
    pub fn new(plugins: Vec<RunPlugin>) -> RunConfig {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        RunConfig {
            run_id: new_run_id(),
            created: factbuoy_protocol::types::now_rfc3339(),
            factbuoy_version: env!("CARGO_PKG_VERSION").to_owned(),
            plugins,
            nodes: Vec::new(),
            dynamic_nodes: false,
            heartbeat_seconds: DEFAULT_HEARTBEAT.as_secs(),
            lost_after_seconds: DEFAULT_LOST_AFTER.as_secs(),
            run_timeout_seconds: DEFAULT_RUN_TIMEOUT.as_secs(),
            agent_listen: loopback,
            operator_listen: loopback,
            server_names: vec!["localhost".to_owned(), "127.0.0.1".to_owned()],
            bundle_dir: PathBuf::from("."),
            operator_ca: None,
            limits: ServerLimits::default(),
            origin: None,
            image: None,
        }
    }

    /// This configuration without the values of secret parameters: what may be written into
    /// `run.json` and the bundle.
    pub fn without_secrets(&self) -> RunConfig {
        let mut public = self.clone();
        for plan in &mut public.plugins {
            let secret: Vec<bool> = plan.params.iter().map(|(n, _)| plan.is_secret(n)).collect();
            let mut secret = secret.into_iter();
            plan.params.retain(|_| !secret.next().unwrap_or(false));
        }
        public
    }

    /// The plugin of this run called `name`.
    pub fn plugin(&self, name: &str) -> Option<&RunPlugin> {
        self.plugins.iter().find(|p| p.name == name)
    }
}

/// A run of `setup` on nodes `a` and `b`, and of the global plugin `cluster`, for tests.
#[cfg(test)]
pub(crate) fn sample() -> RunConfig {
    let plugin = |name: &str, scope| RunPlugin {
        name: name.into(),
        sha256: String::new(),
        scope,
        params: vec![],
        grants: vec![],
        denies: vec![],
        deadline_seconds: 60,
        definition: serde_json::Value::Null,
        source: None,
        signed_by: None,
    };
    RunConfig {
        run_id: "r".into(),
        created: String::new(),
        factbuoy_version: String::new(),
        plugins: vec![
            plugin("setup", PlanScope::PerNode),
            plugin("cluster", PlanScope::Global),
        ],
        nodes: vec![NodeName::parse("a").unwrap(), NodeName::parse("b").unwrap()],
        dynamic_nodes: false,
        heartbeat_seconds: 5,
        lost_after_seconds: 60,
        run_timeout_seconds: 600,
        agent_listen: "127.0.0.1:0".parse().unwrap(),
        operator_listen: "127.0.0.1:0".parse().unwrap(),
        server_names: vec![],
        bundle_dir: PathBuf::new(),
        operator_ca: None,
        limits: ServerLimits::default(),
        origin: None,
        image: None,
    }
}

//! Flag groups several commands share, and how each maps onto the operator library's types:
//! the plugins of a run (`run`, `gen`), which cluster (`run --kubernetes`, `gen`, `status`,
//! `retrieve`, `delete`), a Kubernetes run's placement, which run a command is about, and how
//! to reach the registries of `oci://` plugins.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;

use factbuoy_catalog::BUNDLED;
use factbuoy_kubernetes::{ClusterRef, ClusterRun, ResourceKind, Toleration};
use factbuoy_operator::plan::{scoped_grant, scoped_param};
use factbuoy_operator::{PluginSelection, WhichRun};
use factbuoy_registry::RegistryAccess;

/// A plugin as the command line names it: a bundled plugin's name, a path or an `oci://`
/// reference. Any text is
/// accepted (a path is checked when it is loaded); shell completion offers the bundled names.
#[derive(Debug, Clone, Copy)]
pub struct PluginName;

impl clap::builder::TypedValueParser for PluginName {
    type Value = String;

    fn parse_ref(
        &self,
        command: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(command, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            BUNDLED
                .iter()
                .map(|b| clap::builder::PossibleValue::new(b.name)),
        ))
    }
}

/// The plugin flags of a run.
#[derive(Debug, Clone, Args)]
pub struct PluginArgs {
    /// Plugins to run, by bundled name, path or oci://REGISTRY/REPOSITORY:TAG (resolved once to
    /// a digest) [default: host-facts, setup, and systemd-logs where a journal exists].
    #[arg(long = "plugin", value_name = "NAME|PATH|oci://REF", value_parser = PluginName, hide_possible_values = true)]
    pub plugins: Vec<String>,
    /// A plugin parameter, e.g. setup:gather_subset=network.
    #[arg(short, long = "param", value_name = "PLUGIN:NAME=VALUE", value_parser = scoped_param)]
    pub params: Vec<(String, String)>,
    /// A capability for a plugin from a file, e.g. my-plugin:host-info or my-plugin:read:/etc
    /// (bundled plugins get what they ask).
    #[arg(long, value_name = "PLUGIN:CAPABILITY", value_parser = scoped_grant)]
    pub grant: Vec<(String, String)>,
    /// Deadline of each plugin.
    #[arg(long, default_value_t = factbuoy_runtime::limits::DEFAULT_DEADLINE.into())]
    pub plugin_timeout: humantime::Duration,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

impl PluginArgs {
    /// The selection these flags make, with `global` plugins run once for the whole run.
    pub fn selection(&self, global: &[String]) -> PluginSelection {
        PluginSelection {
            plugins: self.plugins.clone(),
            params: self.params.clone(),
            grants: self.grant.clone(),
            denies: Vec::new(),
            global: global.to_vec(),
            deadline: *self.plugin_timeout,
            registry: self.registry.access(),
        }
    }
}

/// How to reach the registries of `oci://` plugins, with podman's and skopeo's flags.
#[derive(Debug, Clone, Args)]
pub struct RegistryArgs {
    /// Registry credentials (containers-auth.json(5) or docker's config.json) [default: the
    /// first of $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json,
    /// ~/.config/containers/auth.json and ~/.docker/config.json with an entry for the registry].
    #[arg(long, value_name = "FILE", global = true)]
    pub authfile: Option<PathBuf>,
    /// A directory of the registry's CA certificates (*.crt) [default:
    /// /etc/containers/certs.d/HOST:PORT and /etc/docker/certs.d/HOST:PORT].
    #[arg(long, value_name = "DIR", global = true)]
    pub cert_dir: Option<PathBuf>,
    /// Require HTTPS and a verified certificate from registries; --tls-verify=false also
    /// allows plain HTTP.
    #[arg(long, value_name = "BOOL", global = true, default_value_t = true,
          action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub tls_verify: bool,
    /// Require every plugin from a registry to carry a signature by this public key (PEM; see
    /// `plugin sign`), checked before anything runs; repeat for several keys, any of which may
    /// have signed. Plugins from files are then refused.
    #[arg(long, value_name = "KEY.pub", global = true)]
    pub require_signature: Vec<PathBuf>,
}

impl RegistryArgs {
    /// What these flags say, as the registry library takes it.
    pub fn access(&self) -> RegistryAccess {
        RegistryAccess {
            auth_file: self.authfile.clone(),
            cert_dir: self.cert_dir.clone(),
            tls_verify: self.tls_verify,
            require_signature: self.require_signature.clone(),
        }
    }
}

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
    /// The cluster these flags name.
    pub fn cluster(&self) -> ClusterRef {
        ClusterRef {
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
    #[arg(long, default_value = factbuoy_kubernetes::DEFAULT_IMAGE, value_name = "NAME:TAG")]
    pub image: String,
    /// imagePullPolicy of the aggregator and the agents (Never for an image imported into each node).
    #[arg(long, default_value = "IfNotPresent", value_parser = ["Always", "IfNotPresent", "Never"])]
    pub image_pull_policy: String,
    /// Run agents only on nodes with these labels: KEY=VALUE[,KEY=VALUE...].
    #[arg(long, value_name = "KEY=VALUE,...", value_parser = factbuoy_kubernetes::parse_node_selector)]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Tolerate a taint: KEY[=VALUE][:EFFECT] (repeatable). Agents tolerate every taint unless --no-tolerate-all.
    #[arg(long, value_name = "KEY[=VALUE][:EFFECT]", value_parser = factbuoy_kubernetes::parse_toleration)]
    pub tolerate: Vec<Toleration>,
    /// Tolerate only the --tolerate taints; nodes with other NoSchedule/NoExecute taints are skipped.
    #[arg(long)]
    pub no_tolerate_all: bool,
    /// Memory limit of each agent container (the plugin sandbox's cap plus the agent's own).
    #[arg(long, default_value = "768Mi", value_name = "QUANTITY")]
    pub agent_memory_limit: String,
    /// The directory on each node where agents keep compiled plugins between runs (a hostPath,
    /// made the agents' own, mode 0700, by an init container with CAP_CHOWN and CAP_FOWNER only),
    /// so that a plugin compiled once on a node is loaded, not compiled, in later runs.
    #[arg(long, value_name = "DIR", default_value = factbuoy_kubernetes::DEFAULT_AGENT_CACHE_DIR, value_parser = absolute_dir)]
    pub agent_cache: String,
    /// Keep no cache on the nodes: agents cache compiled plugins in their pod only, and compile
    /// each plugin again every run.
    #[arg(long, conflicts_with = "agent_cache")]
    pub no_agent_cache: bool,
    /// The size each node's cache is kept under, least recently used plugins removed first.
    #[arg(long, value_name = "SIZE", default_value = factbuoy_kubernetes::DEFAULT_AGENT_CACHE_SIZE, value_parser = cache_size)]
    pub agent_cache_size: String,
    /// Cluster objects to save into the bundle's resources/, as lists (the aggregator may list
    /// exactly these): any of nodes, namespaces, pods, services, persistentvolumes, daemonsets,
    /// deployments, storageclasses.
    #[arg(long, value_name = "KIND,...", value_delimiter = ',', default_value = "nodes,namespaces", value_parser = factbuoy_kubernetes::resource_kind)]
    pub resources: Vec<&'static ResourceKind>,
    /// Run PLUGIN once for the whole run, in the aggregator's pod, instead of on every node. It
    /// reads the cluster objects saved for resources/ (`read:/nodes.json`), never a node's files
    /// or host-info. Name it with --plugin too.
    #[arg(long = "global", value_name = "PLUGIN", value_parser = PluginName, hide_possible_values = true)]
    pub global: Vec<String>,
    /// A group ID the agents run with as well, to read the nodes' journals: the GID of
    /// systemd-journal (or adm) on the nodes, `getent group systemd-journal` there. Repeatable.
    #[arg(long, value_name = "GID")]
    pub journal_group: Vec<u32>,
    /// Ship plugins from registries in ConfigMaps as well (as plugins from files are), for a
    /// cluster whose aggregator reaches no registry; by default the aggregator pulls them by
    /// the digest the run was planned with.
    #[arg(long)]
    pub plugins_in_configmaps: bool,
    /// Keep the agents out of their nodes' network and UTS namespaces (no hostNetwork), where
    /// policy forbids it: the host name, addresses, routes and interfaces' ethtool facts are then
    /// the agent pods', not the nodes'.
    #[arg(long)]
    pub no_host_network: bool,
}

impl KubeArgs {
    /// Where and how the run's pods are placed.
    pub fn placement(&self) -> ClusterRun {
        ClusterRun {
            namespace: self.namespace.clone(),
            image: self.image.clone(),
            image_pull_policy: self.image_pull_policy.clone(),
            node_selector: self.node_selector.clone().unwrap_or_default(),
            tolerate: self.tolerate.clone(),
            tolerate_all: !self.no_tolerate_all,
            agent_memory_limit: self.agent_memory_limit.clone(),
            agent_cache: (!self.no_agent_cache).then(|| self.agent_cache.clone()),
            agent_cache_size: self.agent_cache_size.clone(),
            resources: self.resources.clone(),
            journal_groups: self.journal_group.clone(),
            host_network: !self.no_host_network,
            plugins_in_config_maps: self.plugins_in_configmaps,
        }
    }
}

/// `--agent-cache`: a normalised absolute path other than `/`.
fn absolute_dir(value: &str) -> Result<String, String> {
    factbuoy_kubernetes::check_cache_dir(value)
        .map(|()| value.to_owned())
        .map_err(|e| e.to_string())
}

/// `--agent-cache-size`: a size as the agents read it (`500MiB`, `2GiB`).
fn cache_size(value: &str) -> Result<String, String> {
    value
        .parse::<bytesize::ByteSize>()
        .map(|_| value.to_owned())
        .map_err(|e| format!("not a size such as 500MiB or 2GiB: {e}"))
}

/// Which run `status` and `retrieve` talk about.
#[derive(Debug, Args)]
pub struct WhichRunArgs {
    /// The run: a Kubernetes run started from this machine, or a local run [default: the current run].
    #[arg(value_name = "RUN-ID", conflicts_with = "run_dir")]
    pub run_id: Option<String>,
    /// A local run's directory.
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
    /// For a Kubernetes run: reach its cluster otherwise than the command that started it did.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

impl WhichRunArgs {
    /// The run these flags name.
    pub fn which(&self) -> WhichRun {
        match (&self.run_dir, &self.run_id) {
            (Some(dir), _) => WhichRun::Dir(dir.clone()),
            (None, Some(id)) => WhichRun::Id(id.clone()),
            (None, None) => WhichRun::Current,
        }
    }
}

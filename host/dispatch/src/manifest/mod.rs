//! The objects one run applies, built from a [`RunSpec`] with no I/O: what `factbuoy run
//! --kubernetes` applies and `factbuoy gen` prints are these, in [`RunManifests::objects`]'s
//! order. Every object carries the run's labels ([`crate::names::labels`]).

pub mod components;
pub mod rbac;
pub mod scheduling;
pub mod security;
pub mod volumes;

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ContainerPort, EnvVar, EnvVarSource, LocalObjectReference, Namespace,
    ObjectFieldSelector, Pod, PodSecurityContext, PodSpec, PodTemplateSpec, ResourceRequirements,
    Secret, Service, ServiceAccount, ServicePort, ServiceSpec, Toleration, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::names::{
    self, AGENT, AGENT_PORT, AGENT_PORT_NAME, AGGREGATOR, CA_CONFIG_MAP, CA_KEY, Component,
    OPERATOR_CA_KEY, OPERATOR_PORT, OPERATOR_PORT_NAME, REGISTRY_CA_KEY, REGISTRY_SECRET,
    RUN_AS_ID, RUN_CONFIG_MAP, RUN_PLAN_KEY, TOKEN_PATH,
};
use crate::resources::ResourceKind;

/// Where the aggregator pod mounts ConfigMap `factbuoy-run`.
pub const RUN_CONFIG_DIR: &str = "/etc/factbuoy/run";
/// Where the aggregator pod mounts Secret `factbuoy-registry`.
pub const REGISTRY_AUTH_DIR: &str = "/etc/factbuoy/registry";
/// The auth file in [`REGISTRY_AUTH_DIR`] (the Secret's `.dockerconfigjson`).
pub const REGISTRY_AUTH_FILE: &str = "auth.json";
/// The aggregator's run directory (an emptyDir): CA key, results, the bundle.
pub const AGGREGATOR_RUN_DIR: &str = "/var/lib/factbuoy";
/// Where agent pods mount ConfigMap `factbuoy-ca`.
pub const CA_DIR: &str = "/etc/factbuoy/ca";
/// The agents' spool (an emptyDir): results not yet accepted by the aggregator.
pub const SPOOL_DIR: &str = "/var/spool/factbuoy";
/// Scratch space of both containers (an emptyDir), the compiled-plugin cache included.
pub const TMP_DIR: &str = "/tmp";
/// Size limit of [`TMP_DIR`].
pub const TMP_SIZE_LIMIT: &str = "256Mi";
/// The node directory where agents keep compiled plugins between runs by default (a hostPath).
pub const DEFAULT_AGENT_CACHE_DIR: &str = "/var/cache/factbuoy";
/// Where agent containers mount their node's cache directory.
pub const AGENT_CACHE_MOUNT: &str = "/var/cache/factbuoy";
/// The size agents keep their node's cache under by default: every bundled plugin (about 30 MB)
/// and some 25 Python or JavaScript plugins (30 to 40 MB each), on any node's disk.
pub const DEFAULT_AGENT_CACHE_SIZE: &str = "1GiB";
/// The binary inside the image (deploy/build-image.sh puts it there).
pub const BINARY: &str = "/bin/factbuoy";
/// Largest ConfigMap the API server accepts (its data and binaryData together).
pub const MAX_CONFIG_MAP_BYTES: usize = 1024 * 1024;
/// The aggregator's memory limit (its RSS target is 150 MB).
pub const AGGREGATOR_MEMORY_LIMIT: &str = "512Mi";
/// The aggregator's memory limit when it runs global plugins, one at a time: its own, plus one
/// plugin sandbox's memory cap (`factbuoy_runtime::limits::DEFAULT_MEMORY_BYTES`, 512 MiB).
pub const AGGREGATOR_GLOBAL_MEMORY_LIMIT: &str = "1Gi";

/// What a run's manifests are made from.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The run id (checked by [`names::check_run_id`]).
    pub run_id: String,
    /// `-n`: an existing namespace to run in; `None` creates `factbuoy-<run-id>`, the run's root.
    pub namespace: Option<String>,
    /// The image of the aggregator and the agents (deploy/build-image.sh builds it).
    pub image: String,
    /// `imagePullPolicy` of both containers (`IfNotPresent`, `Never` for an imported image).
    pub image_pull_policy: String,
    /// `--node-selector`: the nodes agents run on.
    pub node_selector: BTreeMap<String, String>,
    /// The agents' tolerations ([`scheduling::tolerations`]).
    pub tolerations: Vec<Toleration>,
    /// Host paths the run's plugins are granted (their effective read grants).
    pub read_paths: Vec<String>,
    /// Whether a plugin is granted `host-info`.
    pub host_info: bool,
    /// The agents' memory limit, a Kubernetes quantity (`768Mi`).
    pub agent_memory_limit: String,
    /// The node directory where agents keep compiled plugins between runs (a hostPath that an
    /// init container gives to the agents' user, [`volumes::agent_cache`]); `None` caches them
    /// in each pod's scratch space only, compiled again every run.
    pub agent_cache: Option<String>,
    /// The size agents keep their cache under, as `FACTBUOY_CACHE_MAX_SIZE` reads it (`1GiB`).
    pub agent_cache_size: String,
    /// Groups the agents run with as well (`supplementalGroups`), to read journal files.
    pub journal_groups: Vec<i64>,
    /// Whether the agents share their node's network and UTS namespaces (`hostNetwork`), so
    /// that the host name, addresses, routes and interfaces plugins see are the node's. On by
    /// default; off (`--no-host-network`) for clusters whose policy forbids it, where those facts
    /// are the agent pod's ([`HOST_NETWORK_FACTS`]).
    pub host_network: bool,
    /// Whether the aggregator runs global plugins (it then gets their memory too).
    pub global_plugins: bool,
    /// The kinds of cluster objects the aggregator saves into the bundle's `resources/`.
    pub resources: Vec<&'static ResourceKind>,
    /// The operator CA certificate (PEM): the aggregator's operator listener trusts it.
    pub operator_ca_pem: String,
    /// The run plan, `run.json` without secrets.
    pub plan_json: String,
    /// Plugin components that are not bundled in the image and travel in ConfigMaps, by
    /// SHA-256 (hex); plugins from registries do not: the aggregator pulls them.
    pub components: Vec<(String, Vec<u8>)>,
    /// The credentials for the registries of the run's plugins and image, as a docker config
    /// (`.dockerconfigjson`): Secret [`REGISTRY_SECRET`].
    pub registry_auth: Option<Vec<u8>>,
    /// The certificate authorities (PEM) of those registries, for the aggregator's pulls.
    pub registry_ca_pem: Option<String>,
    /// Whether the run has secret parameters: their values are in Secret
    /// [`SECRETS`](names::SECRETS), which the aggregator alone may read, by name.
    pub secrets: bool,
}

/// Why a run's manifests cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The run id cannot name objects.
    #[error(transparent)]
    RunId(#[from] names::BadRunId),
    /// A granted host path is malformed.
    #[error(transparent)]
    HostPath(#[from] volumes::NotAbsolute),
    /// The plan does not fit in one ConfigMap.
    #[error(
        "the run plan takes {0} bytes, more than a ConfigMap holds ({MAX_CONFIG_MAP_BYTES}); run fewer plugins or shorter parameters"
    )]
    PlanTooLarge(usize),
    /// The plugin components from files are more than a run may store in the cluster.
    #[error(
        "the plugins from files take {0} bytes, more than a run stores in the cluster ({max}); bundle some in the image",
        max = components::MAX_COMPONENTS_BYTES
    )]
    ComponentsTooLarge(usize),
}

/// A run's objects. Cluster-scoped objects get an owner reference to the run's Namespace once
/// its uid is known ([`RunManifests::set_namespace_uid`]); in a namespace that is not the run's,
/// namespaced objects get one to the aggregator Pod ([`RunManifests::set_aggregator_uid`]).
#[derive(Debug, Clone)]
pub struct RunManifests {
    /// The run id.
    pub run_id: String,
    /// The namespace the run's namespaced objects are in.
    pub namespace_name: String,
    /// The run's own Namespace; `None` with `-n EXISTING`.
    pub namespace: Option<Namespace>,
    /// `factbuoy-aggregator` and `factbuoy-agent`.
    pub service_accounts: Vec<ServiceAccount>,
    /// The aggregator's cluster-wide permissions.
    pub cluster_role: ClusterRole,
    /// Binds [`Self::cluster_role`] to the aggregator's ServiceAccount.
    pub cluster_role_binding: ClusterRoleBinding,
    /// The aggregator's permissions in the run namespace.
    pub role: Role,
    /// Binds [`Self::role`] to the aggregator's ServiceAccount.
    pub role_binding: RoleBinding,
    /// `factbuoy-run`: the plan and the operator CA certificate.
    pub run_config: ConfigMap,
    /// `factbuoy-plugin-part-<n>`: the plugin components not in the image, in parts
    /// ([`components`]).
    pub component_parts: Vec<ConfigMap>,
    /// `factbuoy-registry`: registry credentials. Applied before the pods, but never printed
    /// with the other objects ([`RunManifests::objects`]): `gen` says how to create it.
    pub registry_secret: Option<Secret>,
    /// `factbuoy-aggregator`: the ports agents dial and operators forward to.
    pub service: Service,
    /// The aggregator, a bare Pod.
    pub aggregator: Pod,
    /// The agents.
    pub agents: DaemonSet,
    /// Granted host paths the agents do not mount ([`volumes::HostDirs::left_out`]).
    pub left_out: Vec<String>,
}

fn meta(spec: &RunSpec, namespace: Option<&str>, name: &str, component: Component) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        labels: Some(names::labels(&spec.run_id, component)),
        ..ObjectMeta::default()
    }
}

fn tcp_port(name: &str, port: u16) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_owned()),
        container_port: i32::from(port),
        // Explicit: server-side apply on 1.20 refuses a port without it.
        protocol: Some("TCP".to_owned()),
        ..ContainerPort::default()
    }
}

fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: path.to_owned(),
            }),
            ..EnvVarSource::default()
        }),
        value: None,
    }
}

/// Where compiled plugins are cached: `dir`, else the `tmp` emptyDir (the root file system is
/// read-only).
fn cache_env(dir: Option<&str>) -> EnvVar {
    EnvVar {
        name: "FACTBUOY_CACHE_DIR".to_owned(),
        value: Some(dir.map_or_else(|| format!("{TMP_DIR}/cache"), str::to_owned)),
        value_from: None,
    }
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    }
}

fn resources(cpu: &str, memory: &str, memory_limit: &str) -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(
            [("cpu", cpu), ("memory", memory)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), Quantity(v.to_owned())))
                .collect(),
        ),
        limits: Some([("memory".to_owned(), Quantity(memory_limit.to_owned()))].into()),
        ..ResourceRequirements::default()
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// The `dnsPolicy` of agents in their node's network namespace: the node's resolvers. Agents
/// look up no name (they dial the Service's address, from its environment variables), and with
/// `hostNetwork` the kubelet gives a `ClusterFirst` pod the node's resolvers anyway.
pub const HOST_NETWORK_DNS_POLICY: &str = "Default";

/// What plugins see of the agent pod instead of the node when agents do not share the node's
/// network and UTS namespaces ([`RunSpec::host_network`] off): what `gen` and `run` warn about.
/// The plugins notice it too, and name the facts in their own words in the run's warnings.
pub const HOST_NETWORK_FACTS: &str = "the host name, IPv4 and IPv6 addresses, routes, default \
    routes and locally reachable addresses are the agent pod's, not the node's, and the node's \
    interfaces have no ethtool features or time stamping";

/// Which registry files the aggregator pod has: the auth file of Secret [`REGISTRY_SECRET`],
/// the certificate authorities in ConfigMap `factbuoy-run`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RegistryFiles {
    /// Whether the run has registry credentials.
    pub auth: bool,
    /// Whether the run has registry certificate authorities.
    pub ca: bool,
}

/// The argv of the aggregator container: `factbuoy aggregator serve-kubernetes --plan ...`,
/// `--secrets` when the run has secret parameters (in Secret [`names::SECRETS`]), and the
/// registry files it pulls plugins with.
pub fn aggregator_command(
    resources: &[&ResourceKind],
    secrets: bool,
    registry: RegistryFiles,
) -> Vec<String> {
    let kinds: Vec<&str> = resources.iter().map(|k| k.name).collect();
    let mut command = strings(&[
        BINARY,
        "aggregator",
        "serve-kubernetes",
        "--plan",
        &format!("{RUN_CONFIG_DIR}/{RUN_PLAN_KEY}"),
        "--operator-ca",
        &format!("{RUN_CONFIG_DIR}/{OPERATOR_CA_KEY}"),
        "--run-dir",
        AGGREGATOR_RUN_DIR,
        "--resources",
        &kinds.join(","),
    ]);
    if secrets {
        command.push("--secrets".to_owned());
    }
    if registry.auth {
        command.push("--registry-authfile".to_owned());
        command.push(format!("{REGISTRY_AUTH_DIR}/{REGISTRY_AUTH_FILE}"));
    }
    if registry.ca {
        // The ConfigMap's other keys are not `*.crt`, which is all a cert dir's reader takes.
        command.push("--registry-cert-dir".to_owned());
        command.push(RUN_CONFIG_DIR.to_owned());
    }
    command
}

/// The argv of the agent container. The aggregator's address comes from the Service's
/// environment variables, which the kubelet expands (the cluster may have no DNS).
pub fn agent_command(namespace: &str) -> Vec<String> {
    strings(&[
        BINARY,
        "agent",
        "--aggregator",
        "$(FACTBUOY_AGGREGATOR_SERVICE_HOST):$(FACTBUOY_AGGREGATOR_SERVICE_PORT_AGENT)",
        "--server-name",
        &names::server_name(namespace),
        "--ca",
        &format!("{CA_DIR}/{CA_KEY}"),
        "--enroll-credential-file",
        TOKEN_PATH,
        "--root",
        volumes::HOST_ROOT,
        "--spool",
        SPOOL_DIR,
        "--stay-alive",
    ])
}

impl RunManifests {
    /// Builds every object of the run `spec` describes.
    pub fn build(spec: &RunSpec) -> Result<Self, ManifestError> {
        names::check_run_id(&spec.run_id)?;
        let run = spec.run_id.as_str();
        let owned = spec.namespace.is_none();
        let ns_name = spec
            .namespace
            .clone()
            .unwrap_or_else(|| names::default_namespace(run));
        let ns = Some(ns_name.as_str());
        let host = volumes::host_dirs(&spec.read_paths, spec.host_info)?;
        if let Some(dir) = &spec.agent_cache {
            volumes::check_cache_dir(dir)?;
        }

        let namespace = owned.then(|| {
            let mut meta = meta(spec, None, &ns_name, Component::Namespace);
            let labels = meta.labels.get_or_insert_default();
            // Pod Security baseline forbids hostPath volumes, which the agents need.
            labels.insert(
                "pod-security.kubernetes.io/enforce".into(),
                "privileged".into(),
            );
            labels.insert(
                "pod-security.kubernetes.io/enforce-version".into(),
                "latest".into(),
            );
            Namespace {
                metadata: meta,
                ..Namespace::default()
            }
        });

        let service_accounts = vec![
            ServiceAccount {
                metadata: meta(spec, ns, AGGREGATOR, Component::Aggregator),
                ..ServiceAccount::default()
            },
            ServiceAccount {
                metadata: meta(spec, ns, AGENT, Component::Agent),
                // Agents talk to the aggregator only, never to the API server.
                automount_service_account_token: Some(false),
                ..ServiceAccount::default()
            },
        ];
        let subject = Subject {
            kind: "ServiceAccount".to_owned(),
            name: AGGREGATOR.to_owned(),
            namespace: Some(ns_name.clone()),
            api_group: None,
        };
        let cluster_name = names::cluster_role_name(run);
        let cluster_role = ClusterRole {
            metadata: meta(spec, None, &cluster_name, Component::Rbac),
            rules: Some(
                rbac::cluster_rules(&spec.resources)
                    .into_iter()
                    .map(|r| r.rule)
                    .collect(),
            ),
            aggregation_rule: None,
        };
        let cluster_role_binding = ClusterRoleBinding {
            metadata: meta(spec, None, &cluster_name, Component::Rbac),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".to_owned(),
                kind: "ClusterRole".to_owned(),
                name: cluster_name.clone(),
            },
            subjects: Some(vec![subject.clone()]),
        };
        let role = Role {
            metadata: meta(spec, ns, AGGREGATOR, Component::Rbac),
            rules: Some(
                rbac::namespace_rules()
                    .into_iter()
                    .chain(spec.secrets.then(rbac::secrets_rule))
                    .map(|r| r.rule)
                    .collect(),
            ),
        };
        let role_binding = RoleBinding {
            metadata: meta(spec, ns, AGGREGATOR, Component::Rbac),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".to_owned(),
                kind: "Role".to_owned(),
                name: AGGREGATOR.to_owned(),
            },
            subjects: Some(vec![subject]),
        };

        let registry_ca = spec.registry_ca_pem.as_deref().unwrap_or_default();
        let size = spec.plan_json.len() + spec.operator_ca_pem.len() + registry_ca.len();
        if size > MAX_CONFIG_MAP_BYTES {
            return Err(ManifestError::PlanTooLarge(size));
        }
        let mut run_data = BTreeMap::from([
            (RUN_PLAN_KEY.to_owned(), spec.plan_json.clone()),
            (OPERATOR_CA_KEY.to_owned(), spec.operator_ca_pem.clone()),
        ]);
        if let Some(pem) = &spec.registry_ca_pem {
            run_data.insert(REGISTRY_CA_KEY.to_owned(), pem.clone());
        }
        let run_config = ConfigMap {
            metadata: meta(spec, ns, RUN_CONFIG_MAP, Component::Config),
            data: Some(run_data),
            binary_data: None,
            immutable: None,
        };
        let registry_secret = spec.registry_auth.as_ref().map(|auth| Secret {
            metadata: meta(spec, ns, REGISTRY_SECRET, Component::Config),
            type_: Some("kubernetes.io/dockerconfigjson".to_owned()),
            data: Some([(".dockerconfigjson".to_owned(), ByteString(auth.clone()))].into()),
            ..Secret::default()
        });
        let size = spec.components.iter().map(|(_, c)| c.len()).sum::<usize>();
        if size > components::MAX_COMPONENTS_BYTES {
            return Err(ManifestError::ComponentsTooLarge(size));
        }
        let component_parts: Vec<ConfigMap> = components::split(&spec.components)
            .into_iter()
            .enumerate()
            .map(|(n, part)| ConfigMap {
                metadata: meta(
                    spec,
                    ns,
                    &format!("{}{n}", components::PART_CONFIG_MAP_PREFIX),
                    Component::Config,
                ),
                data: None,
                binary_data: Some([(part.key, ByteString(part.bytes))].into()),
                // Parts never change: the API server refuses edits, and kubelets need not
                // watch them.
                immutable: Some(true),
            })
            .collect();

        let service = Service {
            metadata: meta(spec, ns, AGGREGATOR, Component::Aggregator),
            spec: Some(ServiceSpec {
                type_: Some("ClusterIP".to_owned()),
                selector: Some(names::selector(run, Component::Aggregator)),
                ports: Some(
                    [
                        (AGENT_PORT_NAME, AGENT_PORT),
                        (OPERATOR_PORT_NAME, OPERATOR_PORT),
                    ]
                    .into_iter()
                    .map(|(name, port)| ServicePort {
                        name: Some(name.to_owned()),
                        port: i32::from(port),
                        target_port: Some(IntOrString::String(name.to_owned())),
                        protocol: Some("TCP".to_owned()),
                        ..ServicePort::default()
                    })
                    .collect(),
                ),
                ..ServiceSpec::default()
            }),
            status: None,
        };

        let aggregator = Pod {
            metadata: meta(spec, ns, AGGREGATOR, Component::Aggregator),
            spec: Some(aggregator_pod_spec(spec, &component_parts)),
            status: None,
        };

        let mut agent_meta = meta(spec, ns, AGENT, Component::Agent);
        agent_meta.namespace = None;
        agent_meta.name = None;
        let agents = DaemonSet {
            metadata: meta(spec, ns, AGENT, Component::Agent),
            spec: Some(DaemonSetSpec {
                selector: LabelSelector {
                    match_labels: Some(names::selector(run, Component::Agent)),
                    match_expressions: None,
                },
                // A re-apply mid-run never replaces running agents.
                update_strategy: Some(DaemonSetUpdateStrategy {
                    type_: Some("OnDelete".to_owned()),
                    rolling_update: None,
                }),
                revision_history_limit: Some(1),
                template: PodTemplateSpec {
                    metadata: Some(agent_meta),
                    spec: Some(agent_pod_spec(spec, &ns_name, &host.mounted)),
                },
                min_ready_seconds: None,
            }),
            status: None,
        };

        Ok(RunManifests {
            run_id: spec.run_id.clone(),
            namespace_name: ns_name,
            namespace,
            service_accounts,
            cluster_role,
            cluster_role_binding,
            role,
            role_binding,
            run_config,
            component_parts,
            registry_secret,
            service,
            aggregator,
            agents,
            left_out: host.left_out,
        })
    }

    /// Whether the run has its own Namespace (the root of everything it makes).
    pub fn owns_namespace(&self) -> bool {
        self.namespace.is_some()
    }

    /// Makes the run's ClusterRole and ClusterRoleBinding dependents of its Namespace (uid
    /// `uid`), so deleting the Namespace deletes them too. Cluster-scoped objects cannot be owned
    /// by a namespaced object: with `-n EXISTING` nothing owns them and `factbuoy delete` finds
    /// them by label.
    pub fn set_namespace_uid(&mut self, uid: &str) {
        let owner = OwnerReference {
            api_version: "v1".to_owned(),
            kind: "Namespace".to_owned(),
            name: self.namespace_name.clone(),
            uid: uid.to_owned(),
            controller: None,
            block_owner_deletion: None,
        };
        self.cluster_role.metadata.owner_references = Some(vec![owner.clone()]);
        self.cluster_role_binding.metadata.owner_references = Some(vec![owner]);
    }

    /// Makes the run's namespaced objects dependents of the aggregator Pod (uid `uid`): in a
    /// namespace that is not the run's, the Pod is the root.
    pub fn set_aggregator_uid(&mut self, uid: &str) {
        let owner = Some(vec![OwnerReference {
            api_version: "v1".to_owned(),
            kind: "Pod".to_owned(),
            name: AGGREGATOR.to_owned(),
            uid: uid.to_owned(),
            controller: None,
            block_owner_deletion: None,
        }]);
        for sa in &mut self.service_accounts {
            sa.metadata.owner_references.clone_from(&owner);
        }
        self.role.metadata.owner_references.clone_from(&owner);
        self.role_binding
            .metadata
            .owner_references
            .clone_from(&owner);
        self.run_config.metadata.owner_references.clone_from(&owner);
        for part in &mut self.component_parts {
            part.metadata.owner_references.clone_from(&owner);
        }
        if let Some(secret) = &mut self.registry_secret {
            secret.metadata.owner_references.clone_from(&owner);
        }
        self.service.metadata.owner_references.clone_from(&owner);
        self.agents.metadata.owner_references = owner;
    }

    /// Every object as JSON, in the order they are applied: Namespace, ServiceAccounts,
    /// ClusterRole and binding, Role and binding, ConfigMap, Service (before any pod: only pods
    /// created after it get its environment variables), the aggregator Pod, the DaemonSet.
    pub fn objects(&self) -> Vec<serde_json::Value> {
        let mut all = Vec::new();
        if let Some(namespace) = &self.namespace {
            all.push(json(namespace));
        }
        all.extend(self.service_accounts.iter().map(json));
        all.push(json(&self.cluster_role));
        all.push(json(&self.cluster_role_binding));
        all.push(json(&self.role));
        all.push(json(&self.role_binding));
        all.push(json(&self.run_config));
        all.extend(self.component_parts.iter().map(json));
        all.push(json(&self.service));
        all.push(json(&self.aggregator));
        all.push(json(&self.agents));
        all
    }
}

/// A Kubernetes object as JSON, as `gen` prints it.
pub(crate) fn json<T: serde::Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).expect("Kubernetes objects serialise")
}

fn aggregator_pod_spec(spec: &RunSpec, component_parts: &[ConfigMap]) -> PodSpec {
    let mut volumes_and_mounts = vec![
        volumes::config_map("run", RUN_CONFIG_MAP, RUN_CONFIG_DIR),
        volumes::empty_dir("state", AGGREGATOR_RUN_DIR, None),
        volumes::empty_dir("tmp", TMP_DIR, Some(TMP_SIZE_LIMIT)),
    ];
    // One ConfigMap volume per part (disk-backed, unlike a projected volume's tmpfs, which the
    // pod's memory limit would pay for).
    for (n, part) in component_parts.iter().enumerate() {
        let name = part.metadata.name.as_deref().expect("parts are named");
        volumes_and_mounts.push(volumes::config_map(
            &format!("part-{n}"),
            name,
            &format!("{}/{n}", components::COMPONENTS_DIR),
        ));
    }
    if spec.registry_auth.is_some() {
        volumes_and_mounts.push(volumes::secret_file(
            "registry",
            REGISTRY_SECRET,
            (".dockerconfigjson", REGISTRY_AUTH_FILE),
            REGISTRY_AUTH_DIR,
        ));
    }
    let (volumes, mounts): (Vec<Volume>, Vec<VolumeMount>) = volumes_and_mounts.into_iter().unzip();
    PodSpec {
        service_account_name: Some(AGGREGATOR.to_owned()),
        image_pull_secrets: image_pull_secrets(spec),
        // The aggregator talks to the API server with its ServiceAccount's token.
        automount_service_account_token: Some(true),
        restart_policy: Some("Never".to_owned()),
        termination_grace_period_seconds: Some(10),
        security_context: Some(security::pod_security_context()),
        host_network: Some(false),
        containers: vec![Container {
            name: "aggregator".to_owned(),
            image: Some(spec.image.clone()),
            image_pull_policy: Some(spec.image_pull_policy.clone()),
            command: Some(aggregator_command(
                &spec.resources,
                spec.secrets,
                RegistryFiles {
                    auth: spec.registry_auth.is_some(),
                    ca: spec.registry_ca_pem.is_some(),
                },
            )),
            env: Some(vec![
                field_env("POD_NAME", "metadata.name"),
                field_env("POD_NAMESPACE", "metadata.namespace"),
                cache_env(None),
            ]),
            ports: Some(vec![
                tcp_port(AGENT_PORT_NAME, AGENT_PORT),
                tcp_port(OPERATOR_PORT_NAME, OPERATOR_PORT),
            ]),
            resources: Some(resources(
                "100m",
                "128Mi",
                if spec.global_plugins {
                    AGGREGATOR_GLOBAL_MEMORY_LIMIT
                } else {
                    AGGREGATOR_MEMORY_LIMIT
                },
            )),
            security_context: Some(security::container_security_context()),
            volume_mounts: Some(mounts),
            ..Container::default()
        }],
        volumes: Some(volumes),
        ..PodSpec::default()
    }
}

/// The pods' `imagePullSecrets`: Secret [`REGISTRY_SECRET`], when the run has one.
fn image_pull_secrets(spec: &RunSpec) -> Option<Vec<LocalObjectReference>> {
    spec.registry_auth.as_ref().map(|_| {
        vec![LocalObjectReference {
            name: REGISTRY_SECRET.to_owned(),
        }]
    })
}

/// The argv of the agents' init container that gives the node's cache directory to their user.
pub fn cache_owner_command() -> Vec<String> {
    strings(&[
        BINARY,
        "agent",
        "prepare-cache",
        AGENT_CACHE_MOUNT,
        "--owner",
        &format!("{RUN_AS_ID}:{RUN_AS_ID}"),
    ])
}

fn agent_pod_spec(spec: &RunSpec, namespace: &str, host_dirs: &[String]) -> PodSpec {
    let (mut volumes, mut mounts): (Vec<Volume>, Vec<VolumeMount>) =
        volumes::host_mounts(host_dirs);
    for (volume, mount) in [
        volumes::empty_dir("spool", SPOOL_DIR, Some(volumes::SPOOL_SIZE_LIMIT)),
        volumes::empty_dir("tmp", TMP_DIR, Some(TMP_SIZE_LIMIT)),
        volumes::config_map("ca", CA_CONFIG_MAP, CA_DIR),
        volumes::projected_token(&names::token_audience(&spec.run_id), TOKEN_PATH),
    ] {
        volumes.push(volume);
        mounts.push(mount);
    }
    // The node's cache, which outlives the run: an init container with CAP_CHOWN and
    // CAP_FOWNER only makes the directory the agent's, 0700; the agent itself stays unprivileged.
    let init_containers = spec.agent_cache.as_deref().map(|dir| {
        let (volume, mount) = volumes::agent_cache(dir, AGENT_CACHE_MOUNT);
        volumes.push(volume);
        mounts.push(mount.clone());
        vec![Container {
            name: "cache-owner".to_owned(),
            image: Some(spec.image.clone()),
            image_pull_policy: Some(spec.image_pull_policy.clone()),
            command: Some(cache_owner_command()),
            resources: Some(resources("10m", "16Mi", "128Mi")),
            security_context: Some(security::cache_owner_security_context()),
            volume_mounts: Some(vec![mount]),
            ..Container::default()
        }]
    });
    let cache_dir = spec.agent_cache.as_ref().map(|_| AGENT_CACHE_MOUNT);
    PodSpec {
        service_account_name: Some(AGENT.to_owned()),
        image_pull_secrets: image_pull_secrets(spec),
        automount_service_account_token: Some(false),
        termination_grace_period_seconds: Some(5),
        security_context: Some(PodSecurityContext {
            supplemental_groups: (!spec.journal_groups.is_empty())
                .then(|| spec.journal_groups.clone()),
            ..security::pod_security_context()
        }),
        // The node's network and UTS namespaces: facts about the host name, addresses and
        // interfaces are the node's (docs/kubernetes.md, "Security context, and why").
        host_network: Some(spec.host_network),
        dns_policy: spec
            .host_network
            .then(|| HOST_NETWORK_DNS_POLICY.to_owned()),
        host_pid: Some(false),
        host_ipc: Some(false),
        node_selector: (!spec.node_selector.is_empty()).then(|| spec.node_selector.clone()),
        tolerations: Some(spec.tolerations.clone()),
        init_containers,
        containers: vec![Container {
            name: "agent".to_owned(),
            image: Some(spec.image.clone()),
            image_pull_policy: Some(spec.image_pull_policy.clone()),
            command: Some(agent_command(namespace)),
            env: Some(vec![
                field_env("NODE_NAME", "spec.nodeName"),
                cache_env(cache_dir),
                env("FACTBUOY_CACHE_MAX_SIZE", &spec.agent_cache_size),
                // The cache outlives the pod and the node's crashes: check each entry's sum.
                env("FACTBUOY_CACHE_VERIFY", "1"),
            ]),
            resources: Some(resources("50m", "64Mi", &spec.agent_memory_limit)),
            security_context: Some(security::container_security_context()),
            volume_mounts: Some(mounts),
            ..Container::default()
        }],
        volumes: Some(volumes),
        ..PodSpec::default()
    }
}

#[cfg(test)]
mod tests;

//! The fleet hub in a cluster: `factbuoy fleet serve` as a Deployment of one replica, its
//! directory on a PersistentVolumeClaim, reached by machines outside the cluster through a
//! NodePort or LoadBalancer Service. `factbuoy fleet gen` prints these objects and
//! `--apply` applies them (server-side apply, as a run's are).
//!
//! The hub never calls the API server, so its least RBAC is none: its ServiceAccount has no
//! Role and no token mounted. Its pod meets the Pod Security *restricted* profile.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, HTTPGetAction, LocalObjectReference, Namespace,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, Service, ServiceAccount, ServicePort, ServiceSpec,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};

use crate::manifest::security::{container_security_context, pod_security_context};
use crate::manifest::{json, volumes};
use crate::names::FIELD_MANAGER;

/// The name of every object of the hub: Deployment, Service, claim, ServiceAccount.
pub const HUB: &str = "factbuoy-fleet";
/// The namespace the hub gets unless told otherwise.
pub const DEFAULT_NAMESPACE: &str = "factbuoy-fleet";
/// Where the claim is mounted; `FACTBUOY_STATE_DIR` points there, so the fleet's directory is
/// its `fleet/` and `kubectl exec ... factbuoy fleet token create` finds it without `--dir`.
pub const STATE_DIR: &str = "/var/lib/factbuoy";
/// The fleet's directory in the pod.
pub const FLEET_DIR: &str = "/var/lib/factbuoy/fleet";
const FLEET_PORT_NAME: &str = "fleet";

/// How machines outside the cluster reach the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    /// A port on every node, from the node port range: the Service's node ports are the
    /// container's ports, so a run's port is the same wherever it is dialled.
    NodePort,
    /// The cloud's load balancer, on the container's ports.
    LoadBalancer,
}

impl Exposure {
    /// The Service type's name.
    pub fn service_type(self) -> &'static str {
        match self {
            Exposure::NodePort => "NodePort",
            Exposure::LoadBalancer => "LoadBalancer",
        }
    }

    /// The fleet's port and the runs' ports when none are given: node ports must lie in the
    /// cluster's node port range (30000-32767 by default).
    pub fn default_ports(self) -> (u16, u16, u16) {
        match self {
            Exposure::NodePort => (30443, 30444, 30459),
            Exposure::LoadBalancer => (7443, 7444, 7459),
        }
    }
}

/// What shapes the hub's objects.
#[derive(Debug, Clone)]
pub struct HubSpec {
    /// Its namespace.
    pub namespace: String,
    /// Whether the manifests create that namespace.
    pub create_namespace: bool,
    /// The factbuoy image.
    pub image: String,
    /// Its pull policy.
    pub image_pull_policy: String,
    /// A Secret of type kubernetes.io/dockerconfigjson to pull the image with.
    pub image_pull_secret: Option<String>,
    /// How machines reach it.
    pub exposure: Exposure,
    /// The fleet's port.
    pub port: u16,
    /// The runs' ports, two per run served at once.
    pub run_ports: (u16, u16),
    /// The names and addresses agents and operators dial; the Service's in-cluster names are
    /// added after them.
    pub names: Vec<String>,
    /// The claim's size.
    pub storage: String,
    /// The claim's storage class [default: the cluster's default class].
    pub storage_class: Option<String>,
}

/// The hub's objects, in the order they are applied.
#[derive(Debug, Clone)]
pub struct HubManifests {
    /// Its namespace, when the manifests create it.
    pub namespace: Option<Namespace>,
    /// An account with no token and no Role: the hub never calls the API server.
    pub service_account: ServiceAccount,
    /// The fleet's directory.
    pub claim: PersistentVolumeClaim,
    /// `fleet serve`.
    pub deployment: Deployment,
    /// Its ports, for machines outside the cluster.
    pub service: Service,
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), HUB.to_owned()),
        ("app.kubernetes.io/component".to_owned(), "fleet".to_owned()),
        (
            "app.kubernetes.io/part-of".to_owned(),
            "factbuoy".to_owned(),
        ),
    ])
}

fn meta(spec: &HubSpec) -> ObjectMeta {
    ObjectMeta {
        name: Some(HUB.to_owned()),
        namespace: Some(spec.namespace.clone()),
        labels: Some(labels()),
        ..ObjectMeta::default()
    }
}

impl HubSpec {
    /// The names in the fleet's certificate: those given, then the Service's names inside the
    /// cluster (for agents that run in it).
    pub fn certificate_names(&self) -> Vec<String> {
        let mut names = self.names.clone();
        let service = format!("{HUB}.{}.svc", self.namespace);
        names.push(format!("{service}.cluster.local"));
        names.push(service);
        names.dedup();
        names
    }

    /// The objects.
    pub fn manifests(&self) -> HubManifests {
        let (first, last) = self.run_ports;
        let namespace = self.create_namespace.then(|| Namespace {
            metadata: ObjectMeta {
                name: Some(self.namespace.clone()),
                labels: Some(
                    labels()
                        .into_iter()
                        .chain([(
                            "pod-security.kubernetes.io/enforce".to_owned(),
                            "restricted".to_owned(),
                        )])
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        });
        let service_account = ServiceAccount {
            metadata: meta(self),
            automount_service_account_token: Some(false),
            ..ServiceAccount::default()
        };
        let claim = PersistentVolumeClaim {
            metadata: meta(self),
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
                storage_class_name: self.storage_class.clone(),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_owned(),
                        Quantity(self.storage.clone()),
                    )])),
                    ..VolumeResourceRequirements::default()
                }),
                ..PersistentVolumeClaimSpec::default()
            }),
            ..PersistentVolumeClaim::default()
        };
        // -v: a service logs what it does (joins, runs, refusals), not only warnings.
        let mut args = vec![
            "-v".to_owned(),
            "fleet".to_owned(),
            "serve".to_owned(),
            "--dir".to_owned(),
            FLEET_DIR.to_owned(),
            "--listen".to_owned(),
            format!("0.0.0.0:{}", self.port),
            "--run-ports".to_owned(),
            format!("{first}-{last}"),
        ];
        for name in self.certificate_names() {
            args.extend(["--name".to_owned(), name]);
        }
        let container_ports = std::iter::once((FLEET_PORT_NAME.to_owned(), self.port))
            .chain((first..=last).map(|p| (format!("run-{p}"), p)));
        // The fleet listener answers /healthz to anyone, over TLS; the kubelet does not check
        // the certificate.
        let probe = |period: i32, failures: i32| Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/healthz".to_owned()),
                port: IntOrString::String(FLEET_PORT_NAME.to_owned()),
                scheme: Some("HTTPS".to_owned()),
                ..HTTPGetAction::default()
            }),
            period_seconds: Some(period),
            failure_threshold: Some(failures),
            timeout_seconds: Some(5),
            ..Probe::default()
        };
        let state = volumes::claim("state", HUB, STATE_DIR);
        let tmp = volumes::empty_dir("tmp", "/tmp", None);
        let container = Container {
            name: "fleet".to_owned(),
            image: Some(self.image.clone()),
            image_pull_policy: Some(self.image_pull_policy.clone()),
            args: Some(args),
            env: Some(vec![EnvVar {
                name: "FACTBUOY_STATE_DIR".to_owned(),
                value: Some(STATE_DIR.to_owned()),
                ..EnvVar::default()
            }]),
            ports: Some(
                container_ports
                    .clone()
                    .map(|(name, port)| ContainerPort {
                        name: Some(name),
                        container_port: i32::from(port),
                        protocol: Some("TCP".to_owned()),
                        ..ContainerPort::default()
                    })
                    .collect(),
            ),
            readiness_probe: Some(probe(5, 2)),
            liveness_probe: Some(Probe {
                initial_delay_seconds: Some(10),
                ..probe(20, 3)
            }),
            resources: Some(ResourceRequirements {
                requests: Some(BTreeMap::from([
                    ("cpu".to_owned(), Quantity("100m".to_owned())),
                    ("memory".to_owned(), Quantity("128Mi".to_owned())),
                ])),
                ..ResourceRequirements::default()
            }),
            security_context: Some(container_security_context()),
            volume_mounts: Some(vec![state.1.clone(), tmp.1.clone()]),
            ..Container::default()
        };
        let pod = PodSpec {
            service_account_name: Some(HUB.to_owned()),
            automount_service_account_token: Some(false),
            security_context: Some(pod_security_context()),
            containers: vec![container],
            image_pull_secrets: self
                .image_pull_secret
                .clone()
                .map(|name| vec![LocalObjectReference { name }]),
            // `fleet serve` stops on SIGTERM: it writes the last-seen times and closes.
            termination_grace_period_seconds: Some(30),
            volumes: Some(vec![state.0, tmp.0]),
            ..PodSpec::default()
        };
        let deployment = Deployment {
            metadata: meta(self),
            spec: Some(DeploymentSpec {
                // One fleet directory, one writer: the old pod is gone before the new one
                // starts (a ReadWriteOnce claim could not be mounted twice on two nodes anyway).
                replicas: Some(1),
                strategy: Some(DeploymentStrategy {
                    type_: Some("Recreate".to_owned()),
                    rolling_update: None,
                }),
                selector: LabelSelector {
                    match_labels: Some(labels()),
                    ..LabelSelector::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(labels()),
                        ..ObjectMeta::default()
                    }),
                    spec: Some(pod),
                },
                ..DeploymentSpec::default()
            }),
            ..Deployment::default()
        };
        let node_port = self.exposure == Exposure::NodePort;
        let service = Service {
            metadata: meta(self),
            spec: Some(ServiceSpec {
                type_: Some(self.exposure.service_type().to_owned()),
                selector: Some(labels()),
                ports: Some(
                    container_ports
                        .map(|(name, port)| ServicePort {
                            name: Some(name.clone()),
                            port: i32::from(port),
                            target_port: Some(IntOrString::Int(i32::from(port))),
                            node_port: node_port.then_some(i32::from(port)),
                            protocol: Some("TCP".to_owned()),
                            ..ServicePort::default()
                        })
                        .collect(),
                ),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        };
        HubManifests {
            namespace,
            service_account,
            claim,
            deployment,
            service,
        }
    }
}

impl HubManifests {
    /// Every object as JSON, in the order they are applied.
    pub fn objects(&self) -> Vec<serde_json::Value> {
        let mut all = Vec::new();
        if let Some(namespace) = &self.namespace {
            all.push(json(namespace));
        }
        all.push(json(&self.service_account));
        all.push(json(&self.claim));
        all.push(json(&self.deployment));
        all.push(json(&self.service));
        all
    }
}

/// An object the API server refused, or a hub that did not become ready.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The API server refused an object.
    #[error("applying {kind} {name}: {error}")]
    Apply {
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
        /// What the API server said.
        error: kube::Error,
    },
    /// The Deployment has no ready replica after the wait.
    #[error(
        "the hub's Deployment {namespace}/{HUB} has no ready pod after {waited:?}: see `kubectl -n {namespace} describe pod -l app.kubernetes.io/name={HUB}` (an unbound claim, an image that cannot be pulled?)"
    )]
    NotReady {
        /// The namespace.
        namespace: String,
        /// How long it was waited for.
        waited: Duration,
    },
    /// Reading the Deployment or the Service failed.
    #[error("reading the hub's {0}: {1}")]
    Read(&'static str, kube::Error),
}

async fn patch<K>(api: Api<K>, object: &K) -> Result<(), HubError>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&object.name_any(), &params, &Patch::Apply(object))
        .await
        .map(drop)
        .map_err(|error| HubError::Apply {
            kind: K::kind(&()).into_owned(),
            name: object.name_any(),
            error,
        })
}

/// Applies `manifests` in order (server-side apply, field manager `factbuoy`).
pub async fn apply(client: &Client, manifests: &HubManifests) -> Result<(), HubError> {
    if let Some(namespace) = &manifests.namespace {
        patch(Api::all(client.clone()), namespace).await?;
    }
    let namespace = manifests.deployment.namespace().unwrap_or_default();
    let api = || client.clone();
    patch(
        Api::namespaced(api(), &namespace),
        &manifests.service_account,
    )
    .await?;
    patch(Api::namespaced(api(), &namespace), &manifests.claim).await?;
    patch(Api::namespaced(api(), &namespace), &manifests.deployment).await?;
    patch(Api::namespaced(api(), &namespace), &manifests.service).await
}

/// Waits until the hub's Deployment in `namespace` has a ready, up-to-date pod.
pub async fn wait_ready(client: &Client, namespace: &str, wait: Duration) -> Result<(), HubError> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let deployment = api
            .get(HUB)
            .await
            .map_err(|e| HubError::Read("Deployment", e))?;
        let generation = deployment.metadata.generation;
        if let Some(status) = &deployment.status
            && status.observed_generation >= generation
            && status.ready_replicas.unwrap_or(0) >= 1
            && status.updated_replicas.unwrap_or(0) >= 1
            && status.replicas.unwrap_or(0) == 1
        {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(HubError::NotReady {
                namespace: namespace.to_owned(),
                waited: wait,
            });
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The addresses the cluster's load balancer gave the hub's Service in `namespace` (its
/// `status.loadBalancer.ingress`, IPs and host names): none while it has given none, or for a
/// NodePort Service.
pub async fn load_balancer_addresses(
    client: &Client,
    namespace: &str,
) -> Result<Vec<String>, HubError> {
    let service = Api::<Service>::namespaced(client.clone(), namespace)
        .get(HUB)
        .await
        .map_err(|e| HubError::Read("Service", e))?;
    let ingress = service
        .status
        .and_then(|status| status.load_balancer)
        .and_then(|balancer| balancer.ingress)
        .unwrap_or_default();
    Ok(ingress
        .into_iter()
        .filter_map(|point| point.ip.or(point.hostname))
        .collect())
}

/// What to tell the operator of a load-balanced hub whose `addresses` are what the load
/// balancer gave it and `names` what the fleet's certificate holds: nothing when machines can
/// dial one of the addresses by a name the certificate holds.
pub fn load_balancer_notice(
    namespace: &str,
    addresses: &[String],
    names: &[String],
) -> Option<String> {
    if addresses.is_empty() {
        return Some(format!(
            "the load balancer has given the hub no address yet (`kubectl -n {namespace} get \
             service {HUB}` shows it once it has); machines dial {}",
            names.join(" or ")
        ));
    }
    if addresses.iter().any(|address| names.contains(address)) {
        return None;
    }
    Some(format!(
        "the load balancer's address ({}) is not among --name ({}): machines that dial it would \
         not trust the fleet's certificate, unless a --name is a DNS name for it; apply again \
         with --name {} added",
        addresses.join(", "),
        names.join(", "),
        addresses[0]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::security::restricted_violations;

    fn spec(exposure: Exposure) -> HubSpec {
        let (port, first, last) = exposure.default_ports();
        HubSpec {
            namespace: DEFAULT_NAMESPACE.to_owned(),
            create_namespace: true,
            image: "factbuoy.local/factbuoy:test".to_owned(),
            image_pull_policy: "IfNotPresent".to_owned(),
            image_pull_secret: None,
            exposure,
            port,
            run_ports: (first, last),
            names: vec!["hub.example.com".to_owned()],
            storage: "1Gi".to_owned(),
            storage_class: None,
        }
    }

    #[test]
    fn the_hub_pod_meets_the_restricted_profile_and_mounts_no_token() {
        let manifests = spec(Exposure::NodePort).manifests();
        let pod = manifests.deployment.spec.unwrap().template.spec.unwrap();
        assert_eq!(restricted_violations(&pod), Vec::<String>::new());
        assert_eq!(pod.automount_service_account_token, Some(false));
        assert_eq!(
            manifests.service_account.automount_service_account_token,
            Some(false)
        );
    }

    #[test]
    fn a_node_port_service_exposes_each_port_at_the_same_number_on_the_nodes() {
        let manifests = spec(Exposure::NodePort).manifests();
        let ports = manifests.service.spec.unwrap().ports.unwrap();
        assert_eq!(ports.len(), 1 + 16);
        for port in &ports {
            assert_eq!(port.node_port, Some(port.port));
            assert_eq!(port.target_port, Some(IntOrString::Int(port.port)));
        }
        let balanced = spec(Exposure::LoadBalancer).manifests();
        let service = balanced.service.spec.unwrap();
        assert_eq!(service.type_.as_deref(), Some("LoadBalancer"));
        assert!(service.ports.unwrap().iter().all(|p| p.node_port.is_none()));
    }

    #[test]
    fn the_certificate_names_the_given_names_first_then_the_service() {
        assert_eq!(
            spec(Exposure::NodePort).certificate_names(),
            [
                "hub.example.com",
                "factbuoy-fleet.factbuoy-fleet.svc.cluster.local",
                "factbuoy-fleet.factbuoy-fleet.svc",
            ]
        );
    }

    #[test]
    fn the_notice_asks_for_the_load_balancers_address_among_the_names() {
        let names = vec!["fleet.example.com".to_owned(), "192.0.2.7".to_owned()];
        let pending = load_balancer_notice("ns", &[], &names).unwrap();
        assert!(pending.contains("no address yet"), "{pending}");
        assert!(
            pending.contains("fleet.example.com or 192.0.2.7"),
            "{pending}"
        );
        assert_eq!(
            load_balancer_notice("ns", &["192.0.2.7".to_owned()], &names),
            None
        );
        let other = load_balancer_notice("ns", &["198.51.100.9".to_owned()], &names).unwrap();
        assert!(
            other.contains("(198.51.100.9) is not among --name")
                && other.ends_with("--name 198.51.100.9 added"),
            "{other}"
        );
    }
}

//! `factbuoy fleet gen`: the objects that serve a fleet inside a Kubernetes cluster, printed for
//! review or GitOps (as `gen` prints a run's), or applied with `--apply`. The objects are
//! factbuoy-kubernetes' `hub` module's; docs/fleet.md explains each.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use factbuoy_aggregator::fleet::PortRange;
use factbuoy_kubernetes::hub::{self, Exposure, HubSpec};

use crate::flags::ClusterArgs;
use crate::output::{ExitStatus, Format, emit, emit_document};

/// How machines outside the cluster reach the hub.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ServiceKind {
    /// A port on every node (from the node port range), the same number as in the pod.
    NodePort,
    /// The cloud's load balancer.
    LoadBalancer,
}

#[derive(Debug, Args)]
pub struct GenArgs {
    /// A name or address machines dial to reach the hub (repeat it): a node's address or a DNS
    /// name over the nodes with --service node-port, the load balancer's with load-balancer.
    /// The fleet's certificate holds these names and the Service's names inside the cluster.
    #[arg(long = "name", value_name = "NAME", required = true)]
    names: Vec<String>,
    /// How machines outside the cluster reach the hub.
    #[arg(long, value_enum, default_value = "node-port")]
    service: ServiceKind,
    /// The fleet's port [default: 30443 with node-port, 7443 with load-balancer].
    #[arg(long)]
    port: Option<u16>,
    /// The runs' ports, two per run served at once [default: 30444-30459 with node-port,
    /// 7444-7459 with load-balancer].
    #[arg(long, value_name = "FIRST-LAST")]
    run_ports: Option<PortRange>,
    /// An existing namespace [default: a new namespace factbuoy-fleet, Pod Security restricted].
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    namespace: Option<String>,
    /// The factbuoy image, as deploy/build-image.sh built it.
    #[arg(long, default_value = factbuoy_kubernetes::DEFAULT_IMAGE, value_name = "NAME:TAG")]
    image: String,
    /// imagePullPolicy of the hub (Never for an image imported into each node).
    #[arg(long, default_value = "IfNotPresent", value_parser = ["Always", "IfNotPresent", "Never"])]
    image_pull_policy: String,
    /// A Secret (kubernetes.io/dockerconfigjson) in the namespace to pull the image with.
    #[arg(long, value_name = "NAME")]
    image_pull_secret: Option<String>,
    /// The size of the claim that holds the fleet's directory (its bundles too).
    #[arg(long, default_value = "1Gi", value_name = "QUANTITY")]
    storage: String,
    /// The claim's storage class [default: the cluster's default class].
    #[arg(long, value_name = "NAME")]
    storage_class: Option<String>,
    /// Apply the objects (server-side apply) and wait until the hub's pod is ready, instead of
    /// printing them.
    #[arg(long)]
    apply: bool,
    /// With --apply: how long to wait for the pod to be ready.
    #[arg(long, default_value = "5m", requires = "apply")]
    wait: humantime::Duration,
    #[command(flatten)]
    cluster: ClusterArgs,
}

impl GenArgs {
    fn spec(&self) -> anyhow::Result<HubSpec> {
        let exposure = match self.service {
            ServiceKind::NodePort => Exposure::NodePort,
            ServiceKind::LoadBalancer => Exposure::LoadBalancer,
        };
        let (port, first, last) = exposure.default_ports();
        let port = self.port.unwrap_or(port);
        let run_ports = self.run_ports.unwrap_or(PortRange { first, last });
        anyhow::ensure!(
            !run_ports.ports().contains(&port),
            "the fleet's port {port} is inside the run ports {run_ports}; give ports apart"
        );
        Ok(HubSpec {
            namespace: self
                .namespace
                .clone()
                .unwrap_or_else(|| hub::DEFAULT_NAMESPACE.to_owned()),
            create_namespace: self.namespace.is_none(),
            image: self.image.clone(),
            image_pull_policy: self.image_pull_policy.clone(),
            image_pull_secret: self.image_pull_secret.clone(),
            exposure,
            port,
            run_ports: (run_ports.first, run_ports.last),
            names: self.names.clone(),
            storage: self.storage.clone(),
            storage_class: self.storage_class.clone(),
        })
    }
}

/// What an operator runs next: the credentials, a join token, a run.
fn next_steps(spec: &HubSpec) -> Vec<String> {
    let exec = format!("kubectl -n {} exec deploy/{} --", spec.namespace, hub::HUB);
    let credentials = PathBuf::from("fleet-operator");
    let address = format!("{}:{}", spec.names[0], spec.port);
    vec![
        format!(
            "{exec} factbuoy fleet credentials export | factbuoy fleet credentials import {}",
            credentials.display()
        ),
        format!("{exec} factbuoy fleet token create --uses 10 --ttl 1h"),
        format!(
            "factbuoy run --fleet {address} --fleet-credentials {}",
            credentials.display()
        ),
    ]
}

pub async fn generate(args: GenArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let spec = args.spec()?;
    let manifests = spec.manifests();
    if !args.apply {
        let objects = manifests.objects();
        match format {
            Format::Json => emit_document(
                &serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects}),
                Format::Json,
            ),
            Format::Table | Format::Yaml => {
                emit(serde_saphyr::to_string_multiple(&objects)?.trim_end())
            }
        }
        eprintln!(
            "once applied and ready (`kubectl -n {} rollout status deploy/{}`):\n  {}",
            spec.namespace,
            hub::HUB,
            next_steps(&spec).join("\n  ")
        );
        return Ok(ExitStatus::Success);
    }
    let cluster = factbuoy_kubernetes::connect(&args.cluster.cluster()).await?;
    hub::apply(&cluster.client, &manifests).await?;
    let wait: Duration = *args.wait;
    hub::wait_ready(&cluster.client, &spec.namespace, wait).await?;
    let address = format!("{}:{}", spec.names[0], spec.port);
    let mut document = serde_json::json!({
        "namespace": spec.namespace,
        "address": address,
        "next": next_steps(&spec),
    });
    // A load balancer's address is the cloud's to give: say what it gave, and whether machines
    // can dial it by a name the fleet's certificate holds.
    if spec.exposure == Exposure::LoadBalancer {
        let addresses = hub::load_balancer_addresses(&cluster.client, &spec.namespace).await?;
        if let Some(notice) = hub::load_balancer_notice(&spec.namespace, &addresses, &spec.names) {
            eprintln!("{notice}");
        }
        document["load_balancer"] = serde_json::json!(addresses);
    }
    match format {
        Format::Table => emit(&format!(
            "the fleet hub serves in namespace {} at {address}; next:\n  {}",
            spec.namespace,
            next_steps(&spec).join("\n  ")
        )),
        machine => emit_document(&document, machine),
    }
    Ok(ExitStatus::Success)
}

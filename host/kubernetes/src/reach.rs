//! The operator's client of a Kubernetes run's aggregator. Its operator listener is reached
//! through the API server's port-forward, with mutual TLS inside the tunnel: the operator's
//! certificate comes from the operator directory [`crate::launch::prepare`] wrote, the
//! aggregator's CA certificate from its pod's annotation, which the API server vouches for.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use factbuoy_dispatch::Cluster;
use factbuoy_dispatch::forward::PodPort;
use factbuoy_dispatch::names::{self, AGGREGATOR, CA_ANNOTATION, OPERATOR_PORT};
use factbuoy_protocol::Client;
use factbuoy_protocol::client::{Dial, Dialing};
use factbuoy_protocol::tls::Identity;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use crate::launch::OPERATOR_FILES;

/// How long the operator waits for the aggregator pod to publish its CA: it must be
/// scheduled, pull its image and start.
pub const AGGREGATOR_START: Duration = Duration::from_secs(300);

/// A client for the operator listener of run `run_id` in `namespace`, with the operator
/// credentials in `operator_dir`. Waits (up to [`AGGREGATOR_START`]) for the aggregator pod to
/// start and publish its CA.
pub async fn operator_client(
    cluster: &Cluster,
    namespace: &str,
    run_id: &str,
    operator_dir: &Path,
) -> anyhow::Result<Client> {
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), namespace);
    let ca_pem = aggregator_ca(&pods).await?;
    let read = |name: String| {
        let path = operator_dir.join(name);
        std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading {}: the operator credentials of run {run_id} are kept where `run` or `gen` made them",
                path.display()
            )
        })
    };
    let identity = Identity {
        ca_pem,
        cert_pem: read(format!("{OPERATOR_FILES}.pem"))?,
        key_pem: read(format!("{OPERATOR_FILES}.key"))?,
    };
    let tunnel = PortForward(PodPort::new(pods, AGGREGATOR, OPERATOR_PORT));
    let address = format!("{AGGREGATOR}:{OPERATOR_PORT}");
    Ok(Client::new(&address, &identity)?
        .with_server_name(&names::server_name(namespace))?
        .with_dialer(Arc::new(tunnel)))
}

/// The aggregator's CA certificate, from its pod's annotation. Waits for the pod to start and
/// publish it.
async fn aggregator_ca(pods: &Api<Pod>) -> anyhow::Result<String> {
    let published = |pod: Option<&Pod>| {
        pod.and_then(|p| p.metadata.annotations.as_ref())
            .is_some_and(|a| a.contains_key(CA_ANNOTATION))
    };
    let pod = tokio::time::timeout(
        AGGREGATOR_START,
        kube::runtime::wait::await_condition(pods.clone(), AGGREGATOR, published),
    )
    .await
    .map_err(|_| {
        anyhow::anyhow!(
            "the aggregator pod did not start within {}s; see `kubectl describe pod {AGGREGATOR}` in the run's namespace",
            AGGREGATOR_START.as_secs()
        )
    })?
    .context("watching the aggregator pod")?
    .context("the aggregator pod is gone")?;
    Ok(pod
        .metadata
        .annotations
        .and_then(|mut a| a.remove(CA_ANNOTATION))
        .expect("the condition holds only with the annotation"))
}

/// Each connection to the operator listener is a new port-forward to the aggregator pod.
struct PortForward(PodPort);

impl Dial for PortForward {
    fn dial<'a>(&'a self, _address: &'a str) -> Dialing<'a> {
        Box::pin(async move {
            let stream = self.0.connect().await.map_err(std::io::Error::other)?;
            Ok(Box::new(stream) as Box<dyn factbuoy_protocol::client::Stream>)
        })
    }
}

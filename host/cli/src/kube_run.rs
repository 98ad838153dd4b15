//! `factbuoy run --kubernetes`: applies a run's manifests (exactly what `gen` prints), then,
//! unless `--detach`, follows the run on the aggregator's operator listener and downloads the
//! bundle. The operator listener is reached through the API server's port-forward, with mutual
//! TLS inside the tunnel: the operator's certificate comes from the operator CA `gen` and `run`
//! keep on this machine, and the aggregator's CA certificate from its pod's annotation.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use factbuoy_dispatch::Cluster;
use factbuoy_dispatch::apply::{self, Mode};
use factbuoy_dispatch::forward::PodPort;
use factbuoy_dispatch::names::{self, AGGREGATOR, CA_ANNOTATION, OPERATOR_PORT};
use factbuoy_protocol::Client;
use factbuoy_protocol::client::{Dial, Dialing};
use factbuoy_protocol::tls::Identity;
use factbuoy_protocol::types::{RunStatus, StatusDocument};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use crate::kube_cmd::{KubeArgs, operator_dir, prepare};
use crate::output::{ExitStatus, Format, emit, emit_document};
use crate::plan::PluginArgs;
use crate::runs::{self, RunAt};
use crate::summary;

/// How often `--wait` asks the aggregator for the run's status.
const STATUS_EVERY: Duration = Duration::from_secs(2);
/// How long `--wait` waits for the aggregator pod to publish its CA (it must be scheduled, pull
/// its image and start).
const AGGREGATOR_START: Duration = Duration::from_secs(300);

/// Runs `run --kubernetes`: returns once the bundle is in `out`, or at once with `detach`.
pub async fn run(
    kube: &KubeArgs,
    plugins: &PluginArgs,
    timeout: Duration,
    run_id: &str,
    out: &Path,
    detach: bool,
    format: Format,
) -> anyhow::Result<ExitStatus> {
    let mut prepared = prepare(kube, plugins, timeout, run_id).await?;
    let cluster = factbuoy_dispatch::connect(&kube.cluster.target()).await?;
    let namespace = prepared.manifests.namespace_name.clone();
    apply::apply(&cluster.client, &mut prepared.manifests, Mode::Apply)
        .await
        .context("applying the run's manifests")?;
    eprintln!("run {run_id}: applied in namespace {namespace}");
    runs::remember(&RunAt::Kubernetes(prepared.record.clone()))?;
    if detach {
        emit(&format!(
            "run {run_id} started in namespace {namespace}; `factbuoy status` follows it, `factbuoy retrieve` downloads its bundle, `factbuoy delete {run_id}` removes it"
        ));
        return Ok(ExitStatus::Success);
    }
    let operator = operator_client(&cluster, &namespace, run_id).await?;
    let stuck = format!("see `kubectl -n {namespace} describe pod {AGGREGATOR}`");
    let status = follow(
        &operator,
        run_id,
        timeout + AGGREGATOR_START,
        &stuck,
        format,
    )
    .await?;
    let retrieve = format!("factbuoy retrieve {run_id}");
    finish(&operator, &status, out, &retrieve, format).await
}

/// Downloads the bundle of a run that ended into `out` (`retrieve` says how to resume it),
/// prints its summary, and says whether every result passed.
pub async fn finish(
    operator: &Client,
    status: &StatusDocument,
    out: &Path,
    retrieve: &str,
    format: Format,
) -> anyhow::Result<ExitStatus> {
    if let Some(tar) = &status.tar_info {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        let path = out.join(&tar.name);
        operator.download_bundle(&path).await.with_context(|| {
            format!(
                "downloading the bundle into {}; `{retrieve}` resumes it",
                path.display()
            )
        })?;
    }
    match format {
        Format::Table => emit(&summary::text(status, Some(out))),
        machine => emit_document(status, machine),
    }
    Ok(if summary::all_passed(status) {
        ExitStatus::Success
    } else {
        ExitStatus::Failed
    })
}

/// Follows the run on its operator listener, with a progress bar for a person, until it ends
/// or `give_up_after` has passed (the run's timeout and the time its aggregator may take to
/// start and package; `stuck` says where to look then).
pub async fn follow(
    operator: &Client,
    run_id: &str,
    give_up_after: Duration,
    stuck: &str,
    format: Format,
) -> anyhow::Result<StatusDocument> {
    // The aggregator ends the run by its timeout; past that (and its packaging), something is
    // wrong with the aggregator itself.
    let give_up = tokio::time::Instant::now() + give_up_after;
    let mut bar = None;
    let ended = loop {
        if tokio::time::Instant::now() > give_up {
            crate::logging::hide_bar();
            anyhow::bail!(
                "run {run_id}: no end from the aggregator {}s after it started; {stuck}",
                give_up_after.as_secs()
            );
        }
        match operator.status().await {
            Ok(document) => {
                let bar = bar.get_or_insert_with(|| {
                    summary::progress_bar(&document, format == Format::Table)
                });
                summary::advance(bar, &document);
                if matches!(document.status, RunStatus::Complete | RunStatus::Failed) {
                    break document;
                }
            }
            // The tunnel or the pod may blink; the run's own timeout bounds the wait.
            Err(e) if e.is_retryable() => tracing::warn!("asking for the run's status: {e}"),
            Err(e) => {
                crate::logging::hide_bar();
                return Err(e).context("asking the aggregator for the run's status");
            }
        }
        tokio::time::sleep(STATUS_EVERY).await;
    };
    crate::logging::hide_bar();
    Ok(ended)
}

/// A client for the operator listener of the run in `namespace`, through port-forward.
pub async fn operator_client(
    cluster: &Cluster,
    namespace: &str,
    run_id: &str,
) -> anyhow::Result<Client> {
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), namespace);
    let ca_pem = aggregator_ca(&pods).await?;
    let dir = operator_dir(run_id)?;
    let read = |name: &str| {
        let path: PathBuf = dir.join(name);
        std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading {}: the operator credentials of run {run_id} are kept where `run` or `gen` made them",
                path.display()
            )
        })
    };
    let identity = Identity {
        ca_pem,
        cert_pem: read("operator.pem")?,
        key_pem: read("operator.key")?,
    };
    let tunnel = PortForward(PodPort::new(pods, AGGREGATOR, OPERATOR_PORT));
    let address = format!("{AGGREGATOR}:{OPERATOR_PORT}");
    Ok(Client::new(&address, &identity)?
        .with_server_name(&names::server_name(namespace))?
        .with_dialer(Arc::new(tunnel)))
}

/// The aggregator's CA certificate, from its pod's annotation: the API server vouches for it.
/// Waits for the pod to start and publish it.
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

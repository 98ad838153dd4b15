//! bench/kube-scale.sh's load generator, run inside the benchmark cluster's network namespace:
//!
//! - `nodes`: Node objects nobody runs, created through the API and made Ready through the
//!   status subresource, with room for one agent pod each (the DaemonSet places one there, the
//!   scheduler binds it, and it stays Pending: there is no kubelet).
//! - `agents`: plays the agents of the run's pods on those nodes, as the real agent does
//!   (host/agent, `factbuoy agent --enroll-credential-file`): a TokenRequest gives the token the
//!   projected volume would hold (the run's audience, bound to that pod), the agent enrolls with
//!   it and a key of its own, fetches its plan, sends heartbeats, and delivers a recorded real
//!   result for each planned plugin. Meanwhile it watches the aggregator pod and records the size
//!   of its status annotation at every update.
//!
//! - `reviews`: the API server's TokenReview rate by reviews in flight (its module).
//! - `placement`: the peer, Kubernetes alone placing a DaemonSet on those nodes (its module).
//!
//! Every request to the API server or the aggregator takes one of `--in-flight` permits.
//! Retryable failures (transport, 5xx, 429) are retried with backoff, as the agent does, and
//! counted; anything else is an error. The figures go to `--report` as JSON.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use factbuoy_bench_replay::Replay;
use factbuoy_dispatch::names;
use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::tls::Identity;
use factbuoy_protocol::{Client, ClientError, Scope};
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, NodeSpec, Pod, ServiceAccount, Taint};
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::sync::Semaphore;

mod placement;
mod reviews;
mod tokens;

/// First wait before retrying, and the longest (as the agent's `retry`).
const RETRY_INITIAL: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(10);
/// The label that marks the benchmark's Node objects.
const FAKE_LABEL: &str = "factbuoy-bench/fake";

#[derive(Parser)]
#[command(about = "bench/kube-scale.sh's load generator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create Node objects PREFIX1..PREFIXCOUNT, Ready, with room for an agent pod each, tainted
    /// so that nothing else is scheduled there.
    Nodes {
        #[arg(long)]
        count: usize,
        #[arg(long, default_value = "bench-")]
        prefix: String,
        /// API requests at once.
        #[arg(long, default_value_t = 32)]
        in_flight: usize,
    },
    /// Play the agents of the run's pods on the PREFIX* nodes, until the run ends.
    Agents {
        /// How many agent pods on PREFIX* nodes to wait for and play.
        #[arg(long)]
        nodes: usize,
        #[arg(long, default_value = "bench-")]
        prefix: String,
        /// A directory per plugin: `report.json` (`factbuoy -o json plugin run`) and the
        /// artifacts it names, delivered as each node's result.
        #[arg(long, value_name = "DIR")]
        replay: PathBuf,
        /// Requests (API server and aggregator together) at once.
        #[arg(long, default_value_t = 64)]
        in_flight: usize,
        /// How long a request is retried before it counts as an error.
        #[arg(long, default_value = "300")]
        retry_for_seconds: u64,
        /// Give up (an error) when the run has not ended after this many seconds.
        #[arg(long, default_value = "1800")]
        timeout_seconds: u64,
        /// Where the figures go, as JSON.
        #[arg(long, value_name = "FILE")]
        report: PathBuf,
    },
    /// Measure the API server's TokenReview rate at each number of reviews in flight: a JSON
    /// line per level.
    Reviews {
        /// Tokens reviewed at each level (each once).
        #[arg(long, default_value_t = 1000)]
        tokens: usize,
        /// The levels: reviews in flight.
        #[arg(long, value_delimiter = ',', default_value = "1,4,16,32,64,128")]
        in_flight: Vec<usize>,
    },
    /// Time Kubernetes alone placing a DaemonSet of a pod that never starts on the PREFIX*
    /// nodes, then delete it: a JSON line of figures.
    Placement {
        /// How many PREFIX* nodes there are.
        #[arg(long)]
        nodes: usize,
        #[arg(long, default_value = "bench-")]
        prefix: String,
        /// The pod's image (never pulled, never started).
        #[arg(long)]
        image: String,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let cluster = factbuoy_dispatch::connect(&factbuoy_dispatch::ClusterRef::default()).await?;
    match cli.command {
        Command::Nodes {
            count,
            prefix,
            in_flight,
        } => make_nodes(cluster.client, count, &prefix, in_flight).await,
        Command::Reviews { tokens, in_flight } => {
            reviews::measure(cluster.client, tokens, &in_flight).await
        }
        Command::Placement {
            nodes,
            prefix,
            image,
        } => placement::measure(cluster.client, nodes, &prefix, FAKE_LABEL, &image).await,
        Command::Agents {
            nodes,
            prefix,
            replay,
            in_flight,
            retry_for_seconds,
            timeout_seconds,
            report,
        } => {
            let replays = factbuoy_bench_replay::load_replays(&replay)?;
            let run = Duration::from_secs(timeout_seconds);
            let figures = tokio::time::timeout(
                run,
                play_agents(
                    cluster.client,
                    nodes,
                    &prefix,
                    replays,
                    in_flight,
                    Duration::from_secs(retry_for_seconds),
                ),
            )
            .await
            .with_context(|| format!("the run did not end within {timeout_seconds}s"))??;
            std::fs::write(&report, serde_json::to_vec_pretty(&figures)?)
                .with_context(|| format!("writing {}", report.display()))?;
            let errors = figures["errors"].as_array().map_or(0, Vec::len);
            if errors > 0 {
                bail!("{errors} agent(s) failed; see {}", report.display());
            }
            Ok(())
        }
    }
}

// ------------------------------------------------------------------ nodes

async fn make_nodes(
    client: kube::Client,
    count: usize,
    prefix: &str,
    in_flight: usize,
) -> anyhow::Result<()> {
    let api = Api::<Node>::all(client);
    let started = Instant::now();
    let made = futures_util::stream::iter(1..=count)
        .map(|i| {
            let (api, name) = (api.clone(), format!("{prefix}{i}"));
            async move { make_node(&api, &name).await.with_context(|| name.clone()) }
        })
        .buffer_unordered(in_flight)
        .try_collect::<Vec<()>>()
        .await?;
    eprintln!(
        "kube-load: {} Node objects Ready in {:.1}s",
        made.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// One Node, as a kubelet registers it: created, then its status (capacity and Ready) written
/// through the status subresource, which a create ignores.
async fn make_node(api: &Api<Node>, name: &str) -> anyhow::Result<()> {
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(
                [
                    (FAKE_LABEL.to_owned(), "true".to_owned()),
                    ("kubernetes.io/hostname".to_owned(), name.to_owned()),
                    ("kubernetes.io/os".to_owned(), "linux".to_owned()),
                ]
                .into(),
            ),
            ..Default::default()
        },
        // Nothing but the run's agents (which tolerate every taint by default) may land here:
        // a pod placed on a node with no kubelet never starts, the aggregator's included.
        spec: Some(NodeSpec {
            taints: Some(vec![Taint {
                key: FAKE_LABEL.to_owned(),
                value: Some("true".to_owned()),
                effect: "NoSchedule".to_owned(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_already_exists() => {}
        Err(e) => return Err(e).context("creating the Node"),
    }
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let room = json!({"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    let status = json!({"status": {
        "capacity": room,
        "allocatable": room,
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "factbuoy bench: a Node object with no kubelet",
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        }],
        "addresses": [{"type": "Hostname", "address": name}],
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .context("making the Node Ready")?;
    Ok(())
}

// ------------------------------------------------------------------ agents

/// What every agent task shares.
struct Load {
    permits: Semaphore,
    retry_for: Duration,
    accounts: Api<ServiceAccount>,
    audience: String,
    address: String,
    server_name: String,
    ca_pem: String,
    replays: BTreeMap<String, Replay>,
    /// Retried failures, by what was being done and the error.
    retries: Mutex<BTreeMap<String, usize>>,
}

/// One agent's timings, in seconds from the agent's start.
struct Played {
    node: String,
    /// From the TokenRequest to the certificate.
    enrolled: f64,
    /// From the start to the last commit.
    delivered: f64,
    /// The enroll request alone (the aggregator's admission: a TokenReview).
    admission: f64,
    /// Whether any commit was answered 409: the result was already there (the run gave up on
    /// the node before its agent delivered).
    conflicts: usize,
}

async fn play_agents(
    client: kube::Client,
    nodes: usize,
    prefix: &str,
    replays: BTreeMap<String, Replay>,
    in_flight: usize,
    retry_for: Duration,
) -> anyhow::Result<serde_json::Value> {
    let waiting = Instant::now();
    let aggregator = find_aggregator(&client).await?;
    let namespace = aggregator
        .namespace()
        .context("the aggregator pod has no namespace")?;
    let run_id = aggregator
        .labels()
        .get(names::RUN_LABEL)
        .cloned()
        .context("the aggregator pod has no run label")?;
    let pod_ip = aggregator
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .context("the aggregator pod has no IP")?;
    let ca_pem = aggregator
        .annotations()
        .get(names::CA_ANNOTATION)
        .cloned()
        .context("the aggregator pod has no CA annotation")?;
    eprintln!(
        "kube-load: run {run_id} in {namespace}, aggregator at {pod_ip} (waited {:.1}s)",
        waiting.elapsed().as_secs_f64()
    );
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
    let annotation = tokio::spawn(sample_annotation(pods.clone()));
    let load = Arc::new(Load {
        permits: Semaphore::new(in_flight),
        retry_for,
        accounts: Api::namespaced(client.clone(), &namespace),
        audience: names::token_audience(&run_id),
        address: format!("{pod_ip}:{}", names::AGENT_PORT),
        server_name: names::server_name(&namespace),
        ca_pem,
        replays,
        retries: Mutex::default(),
    });

    // Each agent pod on a fake node, once it is bound to its node, gets its agent.
    let started = Instant::now();
    let mut agents = tokio::task::JoinSet::new();
    let mut seen = HashSet::new();
    // Every agent pod the DaemonSet controller made, bound or not (the real node's too): when
    // the last was created tells the controller's share of the time from the scheduler's.
    let mut created = HashSet::new();
    let mut all_created = None;
    let config = watcher::Config::default().labels(&names::agent_selector(&run_id));
    let mut events = std::pin::pin!(watcher(pods, config).default_backoff().applied_objects());
    while seen.len() < nodes {
        let pod = events
            .try_next()
            .await
            .context("watching the agent pods")?
            .context("the agent pod watch ended")?;
        if created.insert(pod.name_any()) && created.len() == nodes + 1 {
            all_created = Some(started.elapsed().as_secs_f64());
        }
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            continue;
        };
        if !node.starts_with(prefix) || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if seen.insert(node.clone()) {
            let load = load.clone();
            agents.spawn(async move {
                let name = pod.name_any();
                play(&load, pod)
                    .await
                    .map_err(|e| format!("node {node} (pod {name}): {e:#}"))
            });
        }
    }
    let all_pods = started.elapsed().as_secs_f64();
    let all_created = all_created.unwrap_or(all_pods);
    eprintln!(
        "kube-load: {nodes} agent pods created after {all_created:.1}s, bound after {all_pods:.1}s; playing them"
    );

    let mut played = Vec::new();
    let mut errors = Vec::new();
    while let Some(joined) = agents.join_next().await {
        match joined.context("an agent task panicked")? {
            Ok(p) => played.push(p),
            Err(e) => errors.push(e),
        }
    }
    let all_delivered = started.elapsed().as_secs_f64();
    eprintln!(
        "kube-load: {} agents delivered, {} failed, after {all_delivered:.1}s; waiting for the run to end",
        played.len(),
        errors.len()
    );
    let annotation = annotation
        .await
        .context("the annotation sampler panicked")??;
    let percentile = |values: &mut Vec<f64>, p: f64| {
        values.sort_by(f64::total_cmp);
        values
            .get(((values.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    let mut admission: Vec<f64> = played.iter().map(|p| p.admission).collect();
    let mut enrolled: Vec<f64> = played.iter().map(|p| p.enrolled).collect();
    let mut delivered: Vec<f64> = played.iter().map(|p| p.delivered).collect();
    let conflicts: Vec<&str> = played
        .iter()
        .filter(|p| p.conflicts > 0)
        .map(|p| p.node.as_str())
        .collect();
    if !conflicts.is_empty() {
        errors.push(format!(
            "{} node(s) had a result already when their agent delivered (given up before?): {}",
            conflicts.len(),
            conflicts
                .iter()
                .take(10)
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let retries = load.retries.lock().unwrap().clone();
    Ok(json!({
        "run_id": run_id,
        "namespace": namespace,
        "agents": played.len(),
        "errors": errors,
        "retries": retries,
        "seconds_to_all_pods_created": all_created,
        "seconds_to_all_pods_bound": all_pods,
        "seconds_to_all_delivered": all_delivered,
        "admission_seconds": {
            "p50": percentile(&mut admission, 0.5),
            "p99": percentile(&mut admission, 0.99),
            "max": percentile(&mut admission, 1.0),
        },
        "enroll_seconds_p99": percentile(&mut enrolled, 0.99),
        "agent_seconds_p99": percentile(&mut delivered, 0.99),
        "annotation": annotation,
    }))
}

/// The aggregator pod of the run, once it has published its CA and has an IP.
async fn find_aggregator(client: &kube::Client) -> anyhow::Result<Pod> {
    let selector = format!("{}=aggregator", names::COMPONENT_LABEL);
    let config = watcher::Config::default().labels(&selector);
    let mut events = std::pin::pin!(
        watcher(Api::<Pod>::all(client.clone()), config)
            .default_backoff()
            .applied_objects()
    );
    while let Some(pod) = events.try_next().await? {
        let ready = pod.annotations().contains_key(names::CA_ANNOTATION)
            && pod
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.as_ref())
                .is_some();
        if ready && pod.name_any() == names::AGGREGATOR {
            return Ok(pod);
        }
    }
    bail!("the pod watch ended before an aggregator appeared")
}

/// Follows the aggregator pod's status annotation until the run ends: its largest size, and
/// how many different values it had.
async fn sample_annotation(pods: Api<Pod>) -> anyhow::Result<serde_json::Value> {
    let config = watcher::Config::default().fields(&format!("metadata.name={}", names::AGGREGATOR));
    let mut events = std::pin::pin!(watcher(pods, config).default_backoff().applied_objects());
    let (mut largest, mut updates, mut last) = (0usize, 0usize, String::new());
    while let Some(pod) = events.try_next().await? {
        let Some(value) = pod.annotations().get(names::STATUS_ANNOTATION) else {
            continue;
        };
        if *value == last {
            continue;
        }
        updates += 1;
        largest = largest.max(value.len());
        last = value.clone();
        let summary: serde_json::Value = serde_json::from_str(&last).unwrap_or_default();
        if matches!(summary["status"].as_str(), Some("complete" | "failed")) {
            return Ok(json!({
                "largest_bytes": largest,
                "updates": updates,
                "last": summary,
            }));
        }
    }
    bail!("the aggregator pod watch ended before the run did")
}

/// One agent, start to end.
async fn play(load: &Arc<Load>, pod: Pod) -> anyhow::Result<Played> {
    let started = Instant::now();
    let node_name = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    let token = token_for(load, &pod).await?;
    // As host/agent's `enroll`: a key made here, its request, and the pod's token.
    let key = factbuoy_pki::KeyRequest::new("factbuoy agent")?;
    let anonymous =
        Client::anonymous(&load.address, &load.ca_pem)?.with_server_name(&load.server_name)?;
    // Timed from the first request sent, not from the wait for this generator's own permits:
    // a real agent waits for no other. Retries after a 503 count.
    let mut asked = None;
    let answer = retried(load, "enroll", || {
        asked.get_or_insert_with(Instant::now);
        anonymous.enroll(&key.csr_pem, &token)
    })
    .await?;
    let admission = asked.map_or(0.0, |at| at.elapsed().as_secs_f64());
    if answer.node.as_str() != node_name {
        bail!(
            "enrolled for node {}, but the pod runs on {node_name}",
            answer.node
        );
    }
    let enrolled = started.elapsed().as_secs_f64();
    let identity = Identity {
        ca_pem: load.ca_pem.clone(),
        cert_pem: answer.certificate,
        key_pem: key.key_pem,
    };
    let node = answer.node;
    let client = Client::new(&load.address, &identity)?.with_server_name(&load.server_name)?;
    let scope = Scope::Node(node.clone());
    let plan = retried(load, "plan", || client.plan(&scope)).await?;
    let heartbeats = {
        let (client, node) = (client.clone(), node.clone());
        let every = Duration::from_secs(plan.heartbeat_seconds.max(1));
        let load = load.clone();
        tokio::spawn(async move {
            loop {
                // A failed heartbeat is the next one's to make up for, as in the agent.
                let sent = {
                    let _permit = load.permits.acquire().await.expect("never closed");
                    client.heartbeat(&node).await
                };
                if let Err(e) = sent {
                    count_retry(&load, "heartbeat", &e.to_string());
                }
                tokio::time::sleep(every).await;
            }
        })
    };
    let delivered = deliver(load, &client, &node, &plan.plugins).await;
    heartbeats.abort();
    let conflicts = delivered?;
    Ok(Played {
        node: node.to_string(),
        enrolled,
        delivered: started.elapsed().as_secs_f64(),
        admission,
        conflicts,
    })
}

/// The token the kubelet would project into the pod: the run's audience, 600 s, bound to the
/// pod.
async fn token_for(load: &Load, pod: &Pod) -> anyhow::Result<String> {
    let request = tokens::pod_token_request(&load.audience, names::TOKEN_EXPIRATION_SECONDS, pod);
    let started = Instant::now();
    let mut wait = RETRY_INITIAL;
    loop {
        let answer = {
            let _permit = load.permits.acquire().await?;
            load.accounts
                .create_token_request(names::AGENT, &PostParams::default(), &request)
                .await
        };
        match answer {
            Ok(answer) => {
                return answer
                    .status
                    .map(|s| s.token)
                    .context("the TokenRequest was answered without a token");
            }
            Err(kube::Error::Api(status))
                if (status.code == 429 || status.code >= 500)
                    && started.elapsed() < load.retry_for =>
            {
                count_retry(
                    load,
                    "token request",
                    &format!("{} {}", status.code, status.message),
                );
            }
            Err(e) => return Err(e).context("requesting the pod's token"),
        }
        tokio::time::sleep(wait.mul_f64(rand::random::<f64>())).await;
        wait = (wait * 2).min(RETRY_MAX);
    }
}

/// Uploads each plugin's recorded artifacts, then commits its manifest. Returns how many
/// answers were 409 (the aggregator already held a result).
async fn deliver(
    load: &Load,
    client: &Client,
    node: &NodeName,
    plugins: &[factbuoy_protocol::types::PlannedPlugin],
) -> anyhow::Result<usize> {
    let scope = Scope::Node(node.clone());
    let mut conflicts = 0;
    for planned in plugins {
        let replay = load.replays.get(&planned.name).with_context(|| {
            format!(
                "the plan names plugin {:?}, which has no recorded result in --replay",
                planned.name
            )
        })?;
        let mut conflict = false;
        for (name, path, sha256) in &replay.files {
            let sent = retried(load, "upload", || {
                client.put_file(&scope, &planned.name, name, path, sha256)
            })
            .await;
            match sent {
                Err(e) if is_conflict(&e) => {
                    conflict = true;
                    break;
                }
                other => other.with_context(|| format!("uploading {name} of {}", planned.name))?,
            }
        }
        if !conflict {
            match retried(load, "commit", || {
                client.commit(&scope, &planned.name, &replay.manifest)
            })
            .await
            {
                Err(e) if is_conflict(&e) => conflict = true,
                other => other.with_context(|| format!("committing {}", planned.name))?,
            }
        }
        conflicts += usize::from(conflict);
    }
    Ok(conflicts)
}

/// Whether the aggregator answered 409: it already holds a complete result.
fn is_conflict(e: &ClientError) -> bool {
    e.status().map(|s| s.as_u16()) == Some(409)
}

/// Calls `attempt` with a permit, retrying what the agent retries (transport errors, 5xx, 429)
/// with backoff and jitter for `retry_for`.
async fn retried<T, F, Fut>(load: &Load, what: &str, mut attempt: F) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let started = Instant::now();
    let mut wait = RETRY_INITIAL;
    loop {
        let answer = {
            let _permit = load.permits.acquire().await.expect("never closed");
            attempt().await
        };
        match answer {
            Err(e) if e.is_retryable() && started.elapsed() < load.retry_for => {
                count_retry(load, what, &e.to_string());
                tokio::time::sleep(wait.mul_f64(rand::random::<f64>())).await;
                wait = (wait * 2).min(RETRY_MAX);
            }
            other => return other,
        }
    }
}

fn count_retry(load: &Load, what: &str, error: &str) {
    // Addresses and ports vary per connection; the message's first 120 bytes name the cause.
    let cause: String = error.chars().take(120).collect();
    *load
        .retries
        .lock()
        .unwrap()
        .entry(format!("{what}: {cause}"))
        .or_insert(0) += 1;
}

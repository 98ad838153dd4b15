//! `placement`: the benchmark's peer, Kubernetes alone. A DaemonSet whose pod asks what an
//! agent pod asks of a node (50m CPU, 64 MiB) and tolerates the benchmark's taint, placed on the
//! PREFIX* Node objects only, so none of its pods ever starts; timed from its creation until the
//! DaemonSet controller has created a pod for every node and the scheduler has bound each. Then
//! the DaemonSet and its pods are deleted (the pods at once: no kubelet would confirm a graceful
//! deletion), so that nothing of the peer is left for the run measured after it.

use std::collections::HashSet;
use std::time::Instant;

use anyhow::Context;
use futures_util::TryStreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DeleteParams, ListParams, PostParams, PropagationPolicy};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde_json::json;

const NAMESPACE: &str = "factbuoy-bench-placement";
const NAME: &str = "placement";

/// Places the peer DaemonSet on the `nodes` PREFIX* nodes, which carry the label and the taint
/// `fake_label`, and prints its figures as JSON.
pub async fn measure(
    client: kube::Client,
    nodes: usize,
    prefix: &str,
    fake_label: &str,
    image: &str,
) -> anyhow::Result<()> {
    let namespaces = Api::<Namespace>::all(client.clone());
    let namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_already_exists() => {}
        Err(e) => return Err(e).context("creating the peer's namespace"),
    }
    let daemonsets = Api::<DaemonSet>::namespaced(client.clone(), NAMESPACE);
    let pods = Api::<Pod>::namespaced(client, NAMESPACE);
    let labels = json!({"app": NAME});
    let daemonset = serde_json::from_value(json!({
        "metadata": {"name": NAME},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {fake_label: "true"},
                    "tolerations": [{"key": fake_label, "operator": "Exists"}],
                    "automountServiceAccountToken": false,
                    "containers": [{
                        "name": "idle",
                        "image": image,
                        "imagePullPolicy": "Never",
                        "resources": {
                            "requests": {"cpu": "50m", "memory": "64Mi"},
                            "limits": {"memory": "64Mi"},
                        },
                    }],
                },
            },
        },
    }))?;

    let watching = {
        let pods = pods.clone();
        let prefix = prefix.to_owned();
        tokio::spawn(async move { watch_placement(pods, nodes, &prefix).await })
    };
    let started = Instant::now();
    daemonsets
        .create(&PostParams::default(), &daemonset)
        .await
        .context("creating the peer DaemonSet")?;
    let (created, bound) = watching.await.context("the pod watch panicked")??;
    let (created, bound) = (
        created.duration_since(started).as_secs_f64(),
        bound.duration_since(started).as_secs_f64(),
    );
    eprintln!(
        "kube-load: the peer DaemonSet's {nodes} pods created after {created:.1}s, bound after {bound:.1}s; deleting it"
    );

    let orphan = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..DeleteParams::default()
    };
    daemonsets
        .delete(NAME, &orphan)
        .await
        .context("deleting the peer DaemonSet")?;
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    pods.delete_collection(&now, &ListParams::default())
        .await
        .context("deleting the peer's pods")?;
    namespaces
        .delete(NAMESPACE, &DeleteParams::default())
        .await
        .context("deleting the peer's namespace")?;
    println!(
        "{}",
        json!({"nodes": nodes, "seconds_to_all_pods_created": created, "seconds_to_all_pods_bound": bound})
    );
    Ok(())
}

/// When the last of the `nodes` pods was created, and when the last was bound to its node.
async fn watch_placement(
    pods: Api<Pod>,
    nodes: usize,
    prefix: &str,
) -> anyhow::Result<(Instant, Instant)> {
    let mut created = HashSet::new();
    let mut bound = HashSet::new();
    let mut all_created = None;
    let mut events = std::pin::pin!(
        watcher(pods, watcher::Config::default())
            .default_backoff()
            .applied_objects()
    );
    while bound.len() < nodes {
        let pod = events
            .try_next()
            .await
            .context("watching the peer's pods")?
            .context("the peer's pod watch ended")?;
        if created.insert(pod.name_any()) && created.len() == nodes {
            all_created = Some(Instant::now());
        }
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
            && node.starts_with(prefix)
        {
            bound.insert(node.to_owned());
        }
    }
    let all_bound = Instant::now();
    Ok((all_created.unwrap_or(all_bound), all_bound))
}

//! Deleting what runs made: every object with the run label, of every kind a run creates,
//! cluster-scoped ones included (nothing else can own those), found by label so that nothing a
//! run made is left even when its root is gone or was never applied.

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::names::{RUN_LABEL, run_selector};

/// Which runs' objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// One run, by id.
    Run(String),
    /// Every run's: anything with the run label.
    All,
}

impl Selection {
    /// The label selector.
    pub fn label_selector(&self) -> String {
        match self {
            Selection::Run(id) => run_selector(id),
            Selection::All => RUN_LABEL.to_owned(),
        }
    }
}

/// One object a run made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    /// Its kind.
    pub kind: String,
    /// Its namespace; `None` when cluster-scoped.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// The run it belongs to (its run label).
    pub run: String,
    /// What holds it, for an object already being deleted: for how long, its finalizers, and
    /// for a Pod its node, phase and what its containers wait for. What to look at when a
    /// delete does not finish.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
}

/// How long `factbuoy delete` waits by default. Longer than a pod's grace period because a
/// kubelet older than 1.22 does not stop a pod deleted while its volumes were still being
/// mounted until that mount gives up, 2 min 3 s later.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(300);

/// How to delete.
#[derive(Debug, Clone, Copy)]
pub struct DeleteOptions {
    /// Ask the API server (`dryRun=All`) and delete nothing.
    pub dry_run: bool,
    /// Wait at most this long until a relist finds nothing; `None` returns once each delete is
    /// accepted.
    pub wait: Option<Duration>,
}

/// Why a delete failed.
#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    /// The API server refused a list or a delete.
    #[error("{action} {kind}: {error}")]
    Api {
        /// "listing" or "deleting NAME".
        action: String,
        /// The kind.
        kind: String,
        /// What it said.
        error: kube::Error,
    },
    /// `--wait` ran out with objects left.
    #[error(
        "after {waited:?}, {} object(s) are still there ({}); run `factbuoy delete` again, or look for finalizers that hold them",
        left.len(),
        left.iter().map(Found::with_state).collect::<Vec<_>>().join("; ")
    )]
    StillThere {
        /// How long it waited.
        waited: Duration,
        /// What is left.
        left: Vec<Found>,
    },
}

impl Found {
    fn with_state(&self) -> String {
        match &self.held {
            Some(held) => format!("{} {} ({held})", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// An object of any kind, described by its metadata.
trait Described: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug {
    /// What else keeps it while it is being deleted: nothing, but for Pods.
    fn waiting_on(&self) -> Option<String> {
        None
    }
}

impl Described for DaemonSet {}
impl Described for Service {}
impl Described for ConfigMap {}
impl Described for Secret {}
impl Described for RoleBinding {}
impl Described for Role {}
impl Described for ServiceAccount {}
impl Described for ClusterRoleBinding {}
impl Described for ClusterRole {}
impl Described for Namespace {}

impl Described for Pod {
    fn waiting_on(&self) -> Option<String> {
        let spec = self.spec.as_ref();
        let status = self.status.as_ref();
        let mut parts = vec![format!(
            "on {}, {}",
            spec.and_then(|s| s.node_name.as_deref())
                .unwrap_or("no node yet"),
            status
                .and_then(|s| s.phase.as_deref())
                .unwrap_or("no phase yet")
        )];
        for container in status
            .and_then(|s| s.container_statuses.as_ref())
            .into_iter()
            .flatten()
        {
            let state = container.state.as_ref();
            let what = if let Some(waiting) = state.and_then(|s| s.waiting.as_ref()) {
                format!(
                    "waiting ({})",
                    waiting.reason.as_deref().unwrap_or("no reason")
                )
            } else if state.is_some_and(|s| s.running.is_some()) {
                "running".to_owned()
            } else if state.is_some_and(|s| s.terminated.is_some()) {
                "terminated".to_owned()
            } else {
                "no state yet".to_owned()
            };
            parts.push(format!("container {} {what}", container.name));
        }
        Some(parts.join(", "))
    }
}

fn found<K: Described>(object: &K) -> Found {
    let meta = object.meta();
    let held = meta.deletion_timestamp.as_ref().map(|since| {
        let seconds = Timestamp::now().duration_since(since.0).as_secs().max(0);
        let mut held = format!("being deleted for {seconds} s");
        if let Some(finalizers) = meta.finalizers.as_ref().filter(|f| !f.is_empty()) {
            held.push_str(&format!(", finalizers {}", finalizers.join(" ")));
        }
        if let Some(waiting) = object.waiting_on() {
            held.push_str(&format!(", {waiting}"));
        }
        held
    });
    Found {
        kind: K::kind(&()).into_owned(),
        namespace: meta.namespace.clone(),
        name: object.name_any(),
        run: object.labels().get(RUN_LABEL).cloned().unwrap_or_default(),
        held,
    }
}

async fn list<K: Described>(client: &Client, selector: &str) -> Result<Vec<Found>, DeleteError> {
    let api: Api<K> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|source| DeleteError::Api {
            action: "listing".into(),
            kind: K::kind(&()).into_owned(),
            error: source,
        })?;
    Ok(list.items.iter().map(found).collect())
}

async fn remove<K>(api: Api<K>, object: &Found, params: &DeleteParams) -> Result<(), DeleteError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    match api.delete(&object.name, params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(source) => Err(DeleteError::Api {
            action: format!("deleting {}", object.name),
            kind: object.kind.clone(),
            error: source,
        }),
    }
}

/// Every object `selection` names, in the order [`delete`] deletes them: the DaemonSet and Pods
/// first (agents stop), namespaced objects, then cluster-scoped ones, the Namespaces last.
pub async fn find(client: &Client, selection: &Selection) -> Result<Vec<Found>, DeleteError> {
    let s = selection.label_selector();
    let mut all = Vec::new();
    all.extend(list::<DaemonSet>(client, &s).await?);
    all.extend(list::<Pod>(client, &s).await?);
    all.extend(list::<Service>(client, &s).await?);
    all.extend(list::<ConfigMap>(client, &s).await?);
    all.extend(list::<Secret>(client, &s).await?);
    all.extend(list::<RoleBinding>(client, &s).await?);
    all.extend(list::<Role>(client, &s).await?);
    all.extend(list::<ServiceAccount>(client, &s).await?);
    all.extend(list::<ClusterRoleBinding>(client, &s).await?);
    all.extend(list::<ClusterRole>(client, &s).await?);
    all.extend(list::<Namespace>(client, &s).await?);
    Ok(all)
}

/// Deletes every object `selection` names (foreground: an owner goes after its dependents) and
/// returns what was found. With [`DeleteOptions::wait`], returns only once a relist finds
/// nothing, or fails with what is left when the time is up. A dry run deletes nothing and
/// returns what would go.
pub async fn delete(
    client: &Client,
    selection: &Selection,
    options: DeleteOptions,
) -> Result<Vec<Found>, DeleteError> {
    let objects = find(client, selection).await?;
    let params = DeleteParams {
        dry_run: options.dry_run,
        ..DeleteParams::foreground()
    };
    for object in &objects {
        let c = client.clone();
        let ns = object.namespace.as_deref().unwrap_or_default();
        match object.kind.as_str() {
            "DaemonSet" => remove(Api::<DaemonSet>::namespaced(c, ns), object, &params).await?,
            "Pod" => remove(Api::<Pod>::namespaced(c, ns), object, &params).await?,
            "Service" => remove(Api::<Service>::namespaced(c, ns), object, &params).await?,
            "ConfigMap" => remove(Api::<ConfigMap>::namespaced(c, ns), object, &params).await?,
            "Secret" => remove(Api::<Secret>::namespaced(c, ns), object, &params).await?,
            "RoleBinding" => remove(Api::<RoleBinding>::namespaced(c, ns), object, &params).await?,
            "Role" => remove(Api::<Role>::namespaced(c, ns), object, &params).await?,
            "ServiceAccount" => {
                remove(Api::<ServiceAccount>::namespaced(c, ns), object, &params).await?
            }
            "ClusterRoleBinding" => {
                remove(Api::<ClusterRoleBinding>::all(c), object, &params).await?
            }
            "ClusterRole" => remove(Api::<ClusterRole>::all(c), object, &params).await?,
            "Namespace" => remove(Api::<Namespace>::all(c), object, &params).await?,
            other => unreachable!("find lists no {other}"),
        }
    }
    if let (Some(limit), false) = (options.wait, options.dry_run) {
        let gone = async {
            loop {
                let left = find(client, selection).await?;
                if left.is_empty() {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        };
        match tokio::time::timeout(limit, gone).await {
            Ok(result) => result?,
            Err(_) => {
                return Err(DeleteError::StillThere {
                    waited: limit,
                    left: find(client, selection).await?,
                });
            }
        }
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateWaiting, ContainerStatus, PodSpec, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    fn pod(deleting_since: Option<Timestamp>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("factbuoy-aggregator".into()),
                namespace: Some("factbuoy-r1".into()),
                deletion_timestamp: deleting_since.map(Time),
                finalizers: Some(vec!["foregroundDeletion".into()]),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: Some("node-2".into()),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: Some("Pending".into()),
                container_statuses: Some(vec![ContainerStatus {
                    name: "aggregator".into(),
                    state: Some(ContainerState {
                        waiting: Some(ContainerStateWaiting {
                            reason: Some("ContainerCreating".into()),
                            ..ContainerStateWaiting::default()
                        }),
                        ..ContainerState::default()
                    }),
                    ..ContainerStatus::default()
                }]),
                ..PodStatus::default()
            }),
        }
    }

    #[test]
    fn a_pod_being_deleted_says_for_how_long_where_and_what_it_waits_for() {
        let since = Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(95);
        let left = found(&pod(Some(since)));
        let held = left.held.as_deref().unwrap();
        assert!(held.starts_with("being deleted for 9"), "{held}");
        assert!(
            held.ends_with(
                " s, finalizers foregroundDeletion, on node-2, Pending, \
                 container aggregator waiting (ContainerCreating)"
            ),
            "{held}"
        );
        let error = DeleteError::StillThere {
            waited: DEFAULT_WAIT,
            left: vec![left],
        };
        assert!(
            error
                .to_string()
                .contains("(Pod factbuoy-aggregator (being deleted for 9"),
            "{error}"
        );
    }

    #[test]
    fn an_object_not_being_deleted_has_nothing_holding_it() {
        assert_eq!(found(&pod(None)).held, None);
    }
}

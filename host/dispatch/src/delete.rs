//! Deleting what runs made: every object with the run label, of every kind a run creates,
//! cluster-scoped ones included (nothing else can own those), found by label so that nothing a
//! run made is left even when its root is gone or was never applied.

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
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
}

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
        left.iter().map(|f| format!("{} {}", f.kind, f.name)).collect::<Vec<_>>().join(", ")
    )]
    StillThere {
        /// How long it waited.
        waited: Duration,
        /// What is left.
        left: Vec<Found>,
    },
}

fn found<K: Resource<DynamicType = ()>>(object: &K) -> Found {
    Found {
        kind: K::kind(&()).into_owned(),
        namespace: object.meta().namespace.clone(),
        name: object.name_any(),
        run: object.labels().get(RUN_LABEL).cloned().unwrap_or_default(),
    }
}

async fn list<K>(client: &Client, selector: &str) -> Result<Vec<Found>, DeleteError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
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

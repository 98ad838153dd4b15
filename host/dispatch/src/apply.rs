//! Applying a run's manifests: server-side apply with field manager `factbuoy` (forced: the
//! run's objects are factbuoy's), one object after the other in [`RunManifests::objects`]'s
//! order, or a server-side dry run of the same.

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::manifest::RunManifests;
use crate::names::{AGGREGATOR, FIELD_MANAGER};

/// Apply for real, or only ask the API server whether it would accept the objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Create or update every object.
    Apply,
    /// `dryRun=All`: the API server validates and admits each object, and stores nothing.
    ServerDryRun,
}

/// One object, as the API server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Its kind.
    pub kind: String,
    /// Its namespace; `None` when cluster-scoped.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

/// What an apply did.
#[derive(Debug, Clone, Default)]
pub struct ApplyReport {
    /// Objects applied (or accepted by the dry run), in order.
    pub applied: Vec<Applied>,
    /// Objects a dry run could not check, because admission looks up what they refer to and it
    /// does not exist yet: everything in a Namespace that is not there (the API server refuses
    /// any object in a missing namespace, dry run or not), and the aggregator Pod while its
    /// ServiceAccount is not there.
    pub not_checked: Vec<Applied>,
}

/// An object the API server refused.
#[derive(Debug, thiserror::Error)]
#[error("applying {kind} {name}{}: {error}", namespace.as_ref().map(|n| format!(" in namespace {n}")).unwrap_or_default())]
pub struct ApplyError {
    /// Its kind.
    pub kind: String,
    /// Its namespace.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// What the API server said.
    pub error: kube::Error,
}

fn describe<K: Resource<DynamicType = ()>>(object: &K) -> Applied {
    Applied {
        kind: K::kind(&()).into_owned(),
        namespace: object.meta().namespace.clone(),
        name: object.meta().name.clone().unwrap_or_default(),
    }
}

async fn patch<K>(api: Api<K>, object: &K, params: &PatchParams) -> Result<K, ApplyError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
{
    let name = object.name_any();
    let mut waited = Duration::ZERO;
    loop {
        match api.patch(&name, params, &Patch::Apply(object)).await {
            // The API server asks to try again: on 1.20, a Pod right after its ServiceAccount
            // waits for the account's token, which a controller makes moments later.
            Err(kube::Error::Api(status))
                if status.code == 500 && status.reason == "ServerTimeout" && waited < RETRY_FOR =>
            {
                tokio::time::sleep(RETRY_EVERY).await;
                waited += RETRY_EVERY;
            }
            result => {
                return result.map_err(|source| {
                    let what = describe(object);
                    ApplyError {
                        kind: what.kind,
                        namespace: what.namespace,
                        name: what.name,
                        error: source,
                    }
                });
            }
        }
    }
}

/// How long an object the API server answers "retry" for is tried again, and how often.
const RETRY_FOR: Duration = Duration::from_secs(30);
const RETRY_EVERY: Duration = Duration::from_secs(1);

struct Applier<'a> {
    client: &'a Client,
    params: PatchParams,
    report: ApplyReport,
    /// Whether namespaced objects can be sent (a dry run into a missing namespace cannot).
    namespaced: bool,
}

impl Applier<'_> {
    async fn cluster<K>(&mut self, object: &K) -> Result<K, ApplyError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
    {
        let applied = patch(Api::all(self.client.clone()), object, &self.params).await?;
        self.report.applied.push(describe(object));
        Ok(applied)
    }

    async fn namespaced<K>(&mut self, object: &K) -> Result<Option<K>, ApplyError>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Serialize
            + Debug,
    {
        if !self.namespaced {
            self.report.not_checked.push(describe(object));
            return Ok(None);
        }
        let namespace = object.meta().namespace.clone().unwrap_or_default();
        let api = Api::namespaced(self.client.clone(), &namespace);
        let applied = patch(api, object, &self.params).await?;
        self.report.applied.push(describe(object));
        Ok(Some(applied))
    }
}

/// Applies `manifests` in order. For real, it fills in the owner references once the root
/// exists: the Namespace's uid on the cluster-scoped objects, or, in a namespace that is not
/// the run's, the aggregator Pod's uid on the namespaced objects (applied again once the Pod
/// exists: the Pod needs its ServiceAccount and Service first).
///
/// A dry run checks every object when the namespace exists; when the run's Namespace does not
/// exist yet it checks the Namespace and the cluster-scoped objects and lists the rest in
/// [`ApplyReport::not_checked`].
pub async fn apply(
    client: &Client,
    manifests: &mut RunManifests,
    mode: Mode,
) -> Result<ApplyReport, ApplyError> {
    let mut params = PatchParams::apply(FIELD_MANAGER).force();
    if mode == Mode::ServerDryRun {
        params = params.dry_run();
    }
    let mut applier = Applier {
        client,
        params,
        report: ApplyReport::default(),
        namespaced: true,
    };
    if let Some(namespace) = manifests.namespace.clone() {
        let exists = match mode {
            Mode::Apply => true,
            Mode::ServerDryRun => {
                let api: Api<Namespace> = Api::all(client.clone());
                api.get_opt(&manifests.namespace_name)
                    .await
                    .map_err(|source| ApplyError {
                        kind: "Namespace".into(),
                        namespace: None,
                        name: manifests.namespace_name.clone(),
                        error: source,
                    })?
                    .is_some()
            }
        };
        let applied = applier.cluster(&namespace).await?;
        applier.namespaced = exists;
        if mode == Mode::Apply
            && let Some(uid) = applied.uid()
        {
            manifests.set_namespace_uid(&uid);
        }
    }
    for sa in &manifests.service_accounts {
        applier.namespaced(sa).await?;
    }
    applier.cluster(&manifests.cluster_role).await?;
    applier.cluster(&manifests.cluster_role_binding).await?;
    applier.namespaced(&manifests.role).await?;
    applier.namespaced(&manifests.role_binding).await?;
    applier.namespaced(&manifests.run_config).await?;
    for part in &manifests.component_parts {
        applier.namespaced(part).await?;
    }
    // Before the pods, whose image pulls need it.
    if let Some(secret) = &manifests.registry_secret {
        applier.namespaced(secret).await?;
    }
    applier.namespaced(&manifests.service).await?;
    let pod = if mode == Mode::ServerDryRun && applier.namespaced {
        let api: Api<ServiceAccount> = Api::namespaced(client.clone(), &manifests.namespace_name);
        let account = api.get_opt(AGGREGATOR).await.map_err(|source| ApplyError {
            kind: "ServiceAccount".into(),
            namespace: Some(manifests.namespace_name.clone()),
            name: AGGREGATOR.into(),
            error: source,
        })?;
        if account.is_none() {
            applier
                .report
                .not_checked
                .push(describe(&manifests.aggregator));
            None
        } else {
            applier.namespaced(&manifests.aggregator).await?
        }
    } else {
        applier.namespaced(&manifests.aggregator).await?
    };
    if mode == Mode::Apply
        && !manifests.owns_namespace()
        && let Some(uid) = pod.and_then(|p| p.uid())
    {
        manifests.set_aggregator_uid(&uid);
        let report = std::mem::take(&mut applier.report);
        for sa in &manifests.service_accounts {
            applier.namespaced(sa).await?;
        }
        applier.namespaced(&manifests.role).await?;
        applier.namespaced(&manifests.role_binding).await?;
        applier.namespaced(&manifests.run_config).await?;
        for part in &manifests.component_parts {
            applier.namespaced(part).await?;
        }
        if let Some(secret) = &manifests.registry_secret {
            applier.namespaced(secret).await?;
        }
        applier.namespaced(&manifests.service).await?;
        applier.report = report;
    }
    applier.namespaced(&manifests.agents).await?;
    Ok(applier.report)
}

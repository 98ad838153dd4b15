//! One plugin run on this host, whoever asks for it: a node's agent for a plugin of its plan,
//! and `factbuoy plugin run` or `ansible fact-cache` for the operator at this machine (through
//! `factbuoy_operator::here`). Grants and parameters arrive in written form, as a plan carries
//! them, and are checked against the plugin's description here, once, the same way for all.

use std::path::PathBuf;
use std::sync::Arc;

use factbuoy_runtime::grants::{GrantError, GrantSet};
use factbuoy_runtime::params;
use factbuoy_runtime::sink::ArtifactSink;
use factbuoy_runtime::{
    Invocation, InvocationReport, Limits, LoadedPlugin, ProgressObserver, Runtime, StopSignal,
};

/// What one run of a plugin is given.
pub struct Call<'a> {
    /// Parameters as `(NAME, VALUE)` text, secrets already read.
    pub params: &'a [(String, String)],
    /// Capabilities granted, in written form (`host-info`, `read:/proc`, `all`).
    pub grants: &'a [String],
    /// Capabilities denied, in written form; a denial wins over a grant.
    pub denies: &'a [String],
    /// The host directory that granted guest paths are mapped onto (`/`, or `/host` in a pod).
    pub host_root: PathBuf,
    /// Where the plugin's artifacts go.
    pub sink: Arc<dyn ArtifactSink>,
    /// Told of progress and logs as they happen; `None` when no one is watching.
    pub observer: Option<Arc<dyn ProgressObserver>>,
    /// Overrides the runtime's limits for this run.
    pub limits: Option<Limits>,
    /// Stops the run before it ends when given.
    pub stop: Option<StopSignal>,
}

/// A call refused before the plugin ran.
#[derive(Debug, thiserror::Error)]
pub enum CallRefused {
    /// A parameter the plugin's description does not allow.
    #[error("plugin {plugin:?}: {message}")]
    Params {
        /// The plugin's name.
        plugin: String,
        /// What is wrong with which parameter.
        message: String,
    },
    /// A grant or denial that is no capability.
    #[error(transparent)]
    Grants(#[from] GrantError),
}

/// Runs `plugin` with what `call` gives it, to its end, its deadline or its stop.
pub async fn invoke(
    runtime: &Runtime,
    plugin: &LoadedPlugin,
    call: Call<'_>,
) -> Result<InvocationReport, CallRefused> {
    let params =
        params::resolve(&plugin.info.parameters, call.params).map_err(|e| CallRefused::Params {
            plugin: plugin.info.name.clone(),
            message: e.to_string(),
        })?;
    let mut grants = GrantSet::default();
    grants.extend_written(call.grants, call.denies)?;
    Ok(runtime
        .invoke(
            plugin,
            Invocation {
                params,
                grants,
                host_root: call.host_root,
                sink: call.sink,
                observer: call.observer,
                limits: call.limits,
                stop: call.stop,
            },
        )
        .await)
}

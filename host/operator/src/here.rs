//! One plugin run on this host now, for the operator at this machine: `factbuoy plugin run` and
//! `factbuoy ansible fact-cache`. It is checked as a run plans its plugins ([`PluginChoices`]) and
//! runs as an agent runs a plugin of its plan ([`factbuoy_agent::invoke`]), so that a plugin
//! given the same parameters and grants gathers the same facts here as in a run.

use std::path::PathBuf;
use std::sync::Arc;

use factbuoy_agent::invoke::{Call, invoke};
use factbuoy_catalog::PluginRef;
use factbuoy_registry::RegistryAccess;
use factbuoy_runtime::sink::ArtifactSink;
use factbuoy_runtime::{InvocationReport, Limits, Runtime};

use crate::plan::{PluginChoices, PluginSelection};

/// The plugin to run and what the operator wrote for it.
pub struct HereRequest {
    /// A bundled plugin's name, a path to a component or an `oci://` reference.
    pub plugin: String,
    /// How to reach the registry of an `oci://` plugin.
    pub registry: RegistryAccess,
    /// Parameters, `(plugin, NAME=VALUE)`; the plugin as its name or as [`Self::plugin`].
    pub params: Vec<(String, String)>,
    /// Capabilities granted, `(plugin, capability)`, beyond what a bundled plugin gets.
    pub grants: Vec<(String, String)>,
    /// Capabilities taken away, `(plugin, capability)`; a denial wins.
    pub denies: Vec<(String, String)>,
    /// The host directory that the plugin's granted paths are mapped onto.
    pub host_root: PathBuf,
    /// Where its artifacts go.
    pub sink: Arc<dyn ArtifactSink>,
    /// Its deadline and budgets; `None`: the runtime's.
    pub limits: Option<Limits>,
    /// For a development build (the component file of [`Self::plugin`]), the project folder
    /// it reads its code from at run time ([`Runtime::load_development`]).
    pub sources: Option<PathBuf>,
}

/// A `-p`, `--grant` or `--deny` for the one plugin of a [`HereRequest`]: scoped to the plugin
/// as `run` takes it (`hello:greeting=hi`), or not, since there is only one plugin.
#[derive(Debug, Clone)]
pub struct Scoped {
    /// The plugin it names, if it names one.
    pub plugin: Option<String>,
    /// `NAME=VALUE`, or a capability in written form.
    pub value: String,
}

impl Scoped {
    /// A parameter, `PLUGIN:NAME=VALUE` or `NAME=VALUE` (a clap value parser).
    pub fn param(text: &str) -> Result<Scoped, String> {
        match crate::plan::scoped_param(text) {
            Ok((plugin, value)) => Ok(Scoped {
                plugin: Some(plugin),
                value,
            }),
            Err(_) if text.contains('=') => Ok(Scoped {
                plugin: None,
                value: text.to_owned(),
            }),
            Err(e) => Err(e),
        }
    }

    /// A capability, `PLUGIN:CAPABILITY` or `CAPABILITY` (a clap value parser).
    pub fn capability(text: &str) -> Result<Scoped, String> {
        if crate::plan::is_capability(text) {
            return Ok(Scoped {
                plugin: None,
                value: text.to_owned(),
            });
        }
        let (plugin, value) = crate::plan::scoped_grant(text)?;
        Ok(Scoped {
            plugin: Some(plugin),
            value,
        })
    }

    /// The paths `--grant` named (`read:/PATH`), as opposed to those granted by default or by
    /// `all`.
    pub fn read_paths(grants: &[Scoped]) -> Vec<String> {
        grants
            .iter()
            .filter_map(|g| g.value.strip_prefix("read:").map(str::to_owned))
            .collect()
    }

    /// `(plugin, value)` pairs as a [`HereRequest`] takes them, the unscoped ones for `plugin`
    /// (as the operator named it).
    pub fn pairs(all: &[Scoped], plugin: &str) -> Vec<(String, String)> {
        all.iter()
            .map(|s| {
                let named = s.plugin.clone().unwrap_or_else(|| plugin.to_owned());
                (named, s.value.clone())
            })
            .collect()
    }
}

/// Loads the plugin (from the compilation cache when it can), checks what the operator wrote
/// for it and runs it to its end. An error is a refusal before it ran; a plugin that ran and
/// failed is a report that says so.
pub async fn run_plugin(
    runtime: &Runtime,
    request: HereRequest,
) -> anyhow::Result<InvocationReport> {
    let plugin = PluginRef::parse(&request.plugin)?;
    let loaded = match (&plugin, &request.sources) {
        // A development build is a file: with signatures required, `load` refuses it.
        (PluginRef::File(path), Some(sources)) if request.registry.require_signature.is_empty() => {
            runtime.load_development(path, sources).await?
        }
        _ => plugin.load(runtime, &request.registry).await?,
    };
    let name = &loaded.info.name;
    let other = request
        .params
        .iter()
        .chain(&request.grants)
        .chain(&request.denies)
        .find(|(p, _)| p != name && *p != request.plugin);
    if let Some((named, value)) = other {
        anyhow::bail!("{named}:{value} is for plugin {named:?}, but this command runs {name:?}");
    }
    let selection = PluginSelection {
        params: request.params,
        grants: request.grants,
        denies: request.denies,
        ..PluginSelection::default()
    };
    let written = PluginChoices::of(&loaded.info, &plugin, &request.plugin, &selection)?;
    let call = Call {
        params: &written.params,
        grants: &written.grants,
        denies: &written.denies,
        host_root: request.host_root,
        sink: request.sink,
        observer: None,
        limits: request.limits,
        stop: None,
    };
    Ok(invoke(runtime, &loaded, call).await?)
}

//! Turning the plugins and parameters named on the command line into a run's plan: each plugin
//! loaded and described, its parameters checked before anything starts.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use factbuoy_aggregator::config::{PlanScope, PluginPlan};
use factbuoy_catalog::{BUNDLED, PluginRef};
use factbuoy_runtime::definition::Definition;
use factbuoy_runtime::grants::GrantSet;
use factbuoy_runtime::{LoadedPlugin, Runtime, params};

/// Plugins a run gathers when none are named: the fact plugins, and the journal where there is one.
pub const DEFAULT_PLUGINS: &[&str] = &["host-facts", "setup", "systemd-logs"];

/// The default plugins available in this binary; `systemd-logs` only where `root` has a journal.
pub fn default_plugins(root: &Path) -> Vec<String> {
    let journal = ["var/log/journal", "run/log/journal"]
        .iter()
        .any(|dir| root.join(dir).is_dir());
    let chosen: Vec<String> = DEFAULT_PLUGINS
        .iter()
        .filter(|name| BUNDLED.iter().any(|b| b.name == **name))
        .filter(|name| **name != "systemd-logs" || journal)
        .map(|name| (*name).to_owned())
        .collect();
    if chosen.is_empty() {
        // A binary built without the fact plugins still has its example.
        BUNDLED.iter().map(|b| b.name.to_owned()).collect()
    } else {
        chosen
    }
}

/// Splits `PLUGIN:NAME=VALUE` (a parameter) or `PLUGIN:CAPABILITY` (a grant).
pub fn split_scoped(text: &str) -> Result<(String, String), String> {
    match text.split_once(':') {
        Some((plugin, rest)) if !plugin.is_empty() && !rest.is_empty() => {
            Ok((plugin.to_owned(), rest.to_owned()))
        }
        _ => Err(format!("expected PLUGIN:{{...}}, got {text:?}")),
    }
}

/// The plugin flags `run` and `gen` share.
#[derive(Debug, Clone, clap::Args)]
pub struct PluginArgs {
    /// Plugins to run, by bundled name or path [default: host-facts, setup, and systemd-logs where a journal exists].
    #[arg(long = "plugin", value_name = "NAME|PATH")]
    pub plugins: Vec<String>,
    /// A plugin parameter: PLUGIN:NAME=VALUE.
    #[arg(short, long = "param", value_name = "PLUGIN:NAME=VALUE", value_parser = split_scoped)]
    pub params: Vec<(String, String)>,
    /// A capability for a plugin from a file: PLUGIN:CAPABILITY (bundled plugins get what they ask).
    #[arg(long, value_name = "PLUGIN:CAPABILITY", value_parser = split_scoped)]
    pub grant: Vec<(String, String)>,
    /// Deadline of each plugin.
    #[arg(long, default_value_t = factbuoy_runtime::limits::DEFAULT_DEADLINE.into())]
    pub plugin_timeout: humantime::Duration,
}

impl PluginArgs {
    /// The choices for planning `plugins` (these flags' plugins, or a default list).
    pub fn choices<'a>(&'a self, plugins: &'a [String]) -> PluginChoices<'a> {
        PluginChoices {
            plugins,
            params: &self.params,
            grants: &self.grant,
            deadline: *self.plugin_timeout,
        }
    }
}

/// What the command line says about the run's plugins.
pub struct PluginChoices<'a> {
    pub plugins: &'a [String],
    /// `(plugin, NAME=VALUE)`.
    pub params: &'a [(String, String)],
    /// `(plugin, capability)`; bundled plugins get what they ask for without any.
    pub grants: &'a [(String, String)],
    pub deadline: Duration,
}

/// A run's plugins, planned.
pub struct Planned {
    /// What the aggregator's configuration says of each plugin.
    pub plans: Vec<PluginPlan>,
    /// Components that must be stored with the run (those not bundled in this binary), by digest.
    pub components: Vec<(String, Vec<u8>)>,
    /// Each plugin as it was loaded and described for planning, by digest, for a local agent.
    pub loaded: Vec<(String, LoadedPlugin)>,
}

/// Loads every plugin, checks its parameters, and returns the plans.
pub async fn build(runtime: &Runtime, choices: &PluginChoices<'_>) -> anyhow::Result<Planned> {
    let mut plans = Vec::new();
    let mut components = Vec::new();
    let mut loaded_plugins = Vec::new();
    let mut seen = BTreeMap::new();
    for text in choices.plugins {
        let plugin = PluginRef::parse(text)?;
        let loaded = plugin.load(runtime).await?;
        let name = loaded.info.name.clone();
        if seen.insert(name.clone(), ()).is_some() {
            anyhow::bail!("plugin {name:?} is named twice");
        }
        let (sha256, wasm) = match &plugin {
            PluginRef::Bundled(bundled) => {
                let b = BUNDLED
                    .iter()
                    .find(|b| b.name == *bundled)
                    .expect("resolved from the bundled list");
                (b.sha256.to_owned(), None)
            }
            PluginRef::File(path) => {
                let wasm =
                    std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
                (factbuoy_protocol::digest::sha256_hex(&wasm), Some(wasm))
            }
        };
        let own_params: Vec<(String, String)> = choices
            .params
            .iter()
            .filter(|(p, _)| *p == name || p == text)
            .map(|(_, assignment)| params::parse_assignment(assignment).map_err(anyhow::Error::msg))
            .collect::<anyhow::Result<_>>()?;
        params::resolve(&loaded.info.parameters, &own_params)
            .map_err(|e| anyhow::anyhow!("plugin {name:?}: {e}"))?;
        let mut grants: Vec<String> = choices
            .grants
            .iter()
            .filter(|(p, _)| *p == name || p == text)
            .map(|(_, grant)| grant.clone())
            .collect();
        GrantSet::default()
            .extend_written(&grants, [] as [&str; 0])
            .with_context(|| format!("a --grant for plugin {name:?}"))?;
        if matches!(plugin, PluginRef::Bundled(_)) {
            grants.push("all".to_owned());
        }
        plans.push(PluginPlan {
            name,
            sha256: sha256.clone(),
            scope: PlanScope::PerNode,
            params: own_params,
            grants,
            denies: Vec::new(),
            deadline_seconds: choices.deadline.as_secs().max(1),
            definition: serde_json::to_value(Definition::from(&loaded.info))?,
        });
        if let Some(wasm) = wasm {
            components.push((sha256.clone(), wasm));
        }
        loaded_plugins.push((sha256, loaded));
    }
    let unknown: Vec<&String> = choices
        .params
        .iter()
        .chain(choices.grants)
        .map(|(p, _)| p)
        .filter(|p| !plans.iter().any(|plan| &plan.name == *p) && !choices.plugins.contains(p))
        .collect();
    if let Some(plugin) = unknown.first() {
        anyhow::bail!(
            "a parameter or grant names plugin {plugin:?}, which this run does not include"
        );
    }
    Ok(Planned {
        plans,
        components,
        loaded: loaded_plugins,
    })
}

/// A node name from a host name: lower-case, with anything outside `a-z0-9.-` made `-`.
pub fn node_name(hostname: &str) -> String {
    let lowered: String = hostname
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = lowered.trim_matches(|c| c == '-' || c == '.');
    if trimmed.is_empty() {
        "localhost".to_owned()
    } else {
        trimmed.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_are_valid_identifiers() {
        for (host, node) in [
            ("Web_01", "web-01"),
            ("host.example.com", "host.example.com"),
            ("--", "localhost"),
        ] {
            assert_eq!(node_name(host), node);
            factbuoy_protocol::names::NodeName::parse(&node_name(host)).unwrap();
        }
    }

    #[test]
    fn scoped_arguments_name_their_plugin() {
        assert_eq!(
            split_scoped("setup:filter=ansible_*").unwrap(),
            ("setup".into(), "filter=ansible_*".into())
        );
        assert!(split_scoped("filter=x").is_err());
        assert!(split_scoped(":x").is_err());
    }
}

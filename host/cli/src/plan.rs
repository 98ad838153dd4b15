//! Turning the plugins and parameters named on the command line into a run's plan: each plugin
//! loaded and described, its parameters checked before anything starts.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use factbuoy_aggregator::config::{PlanScope, PluginPlan};
use factbuoy_catalog::{BUNDLED, PluginRef};
use factbuoy_runtime::bindings::PluginInfo;
use factbuoy_runtime::definition::Definition;
use factbuoy_runtime::failure::grant_flags;
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

/// Splits `PLUGIN:NAME=VALUE`, a parameter as every command's `-p` takes it.
pub fn scoped_param(text: &str) -> Result<(String, String), String> {
    match text.split_once(':') {
        Some((plugin, assignment))
            if !plugin.is_empty() && !plugin.contains('=') && assignment.contains('=') =>
        {
            Ok((plugin.to_owned(), assignment.to_owned()))
        }
        _ => Err(format!(
            "expected PLUGIN:NAME=VALUE, e.g. setup:gather_subset=network; got {text:?}"
        )),
    }
}

/// Splits `PLUGIN:CAPABILITY`, a grant as every command's `--grant` takes it.
pub fn scoped_grant(text: &str) -> Result<(String, String), String> {
    match text.split_once(':') {
        Some((plugin, capability))
            if !plugin.is_empty() && !capability.is_empty() && !is_capability(text) =>
        {
            Ok((plugin.to_owned(), capability.to_owned()))
        }
        _ => Err(format!(
            "expected PLUGIN:CAPABILITY, e.g. my-plugin:host-info or my-plugin:read:/etc; got {text:?}"
        )),
    }
}

/// Whether `text` is a capability in written form by itself (`host-info`, `read:/etc`, `all`),
/// rather than one scoped to a plugin.
pub fn is_capability(text: &str) -> bool {
    text == "all" || text.parse::<factbuoy_runtime::grants::Grant>().is_ok()
}

/// Refuses, before anything runs, a plugin that `grants` leave without a capability it
/// requires, naming the flag that fixes it.
pub fn check_required(info: &PluginInfo, grants: &GrantSet) -> anyhow::Result<()> {
    let missing = grants.effective(&info.capabilities)?.missing_required;
    anyhow::ensure!(
        missing.is_empty(),
        "plugin {:?} requires {}, which it is not granted: add {}",
        info.name,
        missing.join(" and "),
        grant_flags(&info.name, &missing)
    );
    Ok(())
}

/// A plugin as the command line names it: a bundled plugin's name or a path. Any text is
/// accepted (a path is checked when it is loaded); shell completion offers the bundled names.
#[derive(Debug, Clone, Copy)]
pub struct PluginName;

impl clap::builder::TypedValueParser for PluginName {
    type Value = String;

    fn parse_ref(
        &self,
        command: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(command, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            BUNDLED
                .iter()
                .map(|b| clap::builder::PossibleValue::new(b.name)),
        ))
    }
}

/// The plugin flags `run` and `gen` share.
#[derive(Debug, Clone, clap::Args)]
pub struct PluginArgs {
    /// Plugins to run, by bundled name or path [default: host-facts, setup, and systemd-logs where a journal exists].
    #[arg(long = "plugin", value_name = "NAME|PATH", value_parser = PluginName, hide_possible_values = true)]
    pub plugins: Vec<String>,
    /// A plugin parameter, e.g. setup:gather_subset=network.
    #[arg(short, long = "param", value_name = "PLUGIN:NAME=VALUE", value_parser = scoped_param)]
    pub params: Vec<(String, String)>,
    /// A capability for a plugin from a file, e.g. my-plugin:host-info or my-plugin:read:/etc
    /// (bundled plugins get what they ask).
    #[arg(long, value_name = "PLUGIN:CAPABILITY", value_parser = scoped_grant)]
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
        // A file is read and hashed once: a Python component is 19 MB.
        let (loaded, sha256, wasm) = match &plugin {
            PluginRef::Bundled(bundled) => {
                let b = BUNDLED
                    .iter()
                    .find(|b| b.name == *bundled)
                    .expect("resolved from the bundled list");
                (plugin.load(runtime).await?, b.sha256.to_owned(), None)
            }
            PluginRef::File(path) => {
                let wasm =
                    std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
                let sha256 = factbuoy_protocol::digest::sha256_hex(&wasm);
                let label = path.display().to_string();
                let loaded = runtime.load(&label, &wasm, Some(&sha256)).await?;
                (loaded, sha256, Some(wasm))
            }
        };
        let name = loaded.info.name.clone();
        if seen.insert(name.clone(), ()).is_some() {
            anyhow::bail!("plugin {name:?} is named twice");
        }
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
        let mut granted = plugin.default_grants();
        granted
            .extend_written(&grants, [] as [&str; 0])
            .with_context(|| format!("a --grant for plugin {name:?}"))?;
        check_required(&loaded.info, &granted)?;
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
            scoped_param("setup:filter=ansible_*").unwrap(),
            ("setup".into(), "filter=ansible_*".into())
        );
        assert_eq!(
            scoped_param("hello:greeting=a:b").unwrap(),
            ("hello".into(), "greeting=a:b".into())
        );
        for unscoped in ["filter=x", "filter=a:b", ":x=1", "setup:filter"] {
            let error = scoped_param(unscoped).unwrap_err();
            assert!(
                error.contains("e.g. setup:gather_subset=network"),
                "{error}"
            );
        }
        assert_eq!(
            scoped_grant("my-plugin:read:/etc").unwrap(),
            ("my-plugin".into(), "read:/etc".into())
        );
        for unscoped in ["read:/etc", "host-info", "all", ":host-info"] {
            let error = scoped_grant(unscoped).unwrap_err();
            assert!(error.contains("e.g. my-plugin:host-info"), "{error}");
        }
    }
}

//! Planning a collection run: the plugins the operator names (or the defaults for where the run
//! goes), each loaded and described once, its parameters and grants checked, global plugins
//! marked, all before anything starts. One rule for each of these, whatever the target.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use factbuoy_aggregator::config::{PlanScope, RunPlugin};
use factbuoy_catalog::{BUNDLED, PluginRef};
use factbuoy_kubernetes::AgentAccess;
use factbuoy_registry::RegistryAccess;
use factbuoy_runtime::bindings::PluginInfo;
use factbuoy_runtime::definition::Definition;
use factbuoy_runtime::failure::grant_flags;
use factbuoy_runtime::grants::GrantSet;
use factbuoy_runtime::{LoadedPlugin, Runtime, params};

/// Plugins a run gathers when none are named: the fact plugins, and the journal where there is one.
pub const DEFAULT_PLUGINS: &[&str] = &["host-facts", "setup", "systemd-logs"];

/// Where a run's per-node plugins run, which decides the default plugins.
#[derive(Debug, Clone, Copy)]
pub enum Nodes<'a> {
    /// This host, with its files below `root`: the journal plugin only where `root` has a
    /// journal.
    ThisHost {
        /// The host directory plugins' paths are mapped onto.
        root: &'a Path,
    },
    /// Other machines (a cluster's nodes, a fleet, agents started by hand): every default
    /// plugin; a node without a journal says so in its result.
    Elsewhere,
}

/// The default plugins this binary has, for a run on `nodes`.
pub fn default_plugins(nodes: Nodes<'_>) -> Vec<String> {
    let journal = match nodes {
        Nodes::ThisHost { root } => ["var/log/journal", "run/log/journal"]
            .iter()
            .any(|dir| root.join(dir).is_dir()),
        Nodes::Elsewhere => true,
    };
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

/// What the operator chose about a run's plugins.
#[derive(Debug, Clone)]
pub struct PluginSelection {
    /// Plugins by bundled name or path; none for the defaults ([`default_plugins`]).
    pub plugins: Vec<String>,
    /// Parameters, `(plugin, NAME=VALUE)`.
    pub params: Vec<(String, String)>,
    /// Capabilities for plugins from files, `(plugin, capability)`; bundled plugins get what
    /// they ask for.
    pub grants: Vec<(String, String)>,
    /// Capabilities taken away, `(plugin, capability)`; a denial wins over a grant and over
    /// what a bundled plugin gets by default.
    pub denies: Vec<(String, String)>,
    /// Plugins run once for the whole run instead of on every node ([`Plan::make_global`]).
    pub global: Vec<String>,
    /// Deadline of each plugin invocation.
    pub deadline: Duration,
    /// How to reach the registries of `oci://` plugins.
    pub registry: RegistryAccess,
}

impl Default for PluginSelection {
    fn default() -> Self {
        PluginSelection {
            plugins: Vec::new(),
            params: Vec::new(),
            grants: Vec::new(),
            denies: Vec::new(),
            global: Vec::new(),
            deadline: factbuoy_runtime::limits::DEFAULT_DEADLINE,
            registry: RegistryAccess::default(),
        }
    }
}

/// A run's plugins, planned: one entry per plugin.
pub struct Plan {
    /// The plugins, in the order they were named.
    pub entries: Vec<PlanEntry>,
}

/// One plugin of a planned run.
pub struct PlanEntry {
    /// What the run's configuration says of it.
    pub plugin: RunPlugin,
    /// Its component, when it is not bundled in this binary and must travel with the run.
    pub component: Option<Vec<u8>>,
    /// The plugin as it was loaded and described for planning; a local agent runs it as is.
    pub loaded: LoadedPlugin,
}

impl Plan {
    /// Loads every plugin `selection` names (or the defaults for `nodes`), checks its
    /// parameters and grants, and marks the global ones.
    pub async fn build(
        runtime: &Runtime,
        selection: &PluginSelection,
        nodes: Nodes<'_>,
    ) -> anyhow::Result<Plan> {
        let defaults;
        let names = if selection.plugins.is_empty() {
            defaults = default_plugins(nodes);
            &defaults
        } else {
            &selection.plugins
        };
        let mut entries: Vec<PlanEntry> = Vec::new();
        for text in names {
            let entry = plan_one(runtime, selection, text).await?;
            anyhow::ensure!(
                !entries.iter().any(|e| e.plugin.name == entry.plugin.name),
                "plugin {:?} is named twice",
                entry.plugin.name
            );
            entries.push(entry);
        }
        let unknown = selection
            .params
            .iter()
            .chain(&selection.grants)
            .chain(&selection.denies)
            .map(|(p, _)| p)
            .find(|p| !entries.iter().any(|e| &e.plugin.name == *p) && !names.contains(p));
        if let Some(plugin) = unknown {
            anyhow::bail!(
                "a parameter or grant names plugin {plugin:?}, which this run does not include"
            );
        }
        let mut plan = Plan { entries };
        plan.make_global(&selection.global)?;
        Ok(plan)
    }

    /// Makes the plugins `names` run once for the whole run instead of on every node. A global
    /// plugin runs beside the aggregator, where `host-info` would describe whichever machine
    /// that is: it is denied, and a plugin that requires it is refused.
    pub fn make_global(&mut self, names: &[String]) -> anyhow::Result<()> {
        for name in names {
            let entry = self
                .entries
                .iter_mut()
                .find(|e| e.plugin.name == *name)
                .with_context(|| {
                    format!("--global {name:?} names no plugin of this run; add it with --plugin")
                })?;
            let plugin = &mut entry.plugin;
            plugin.scope = PlanScope::Global;
            plugin.denies.push("host-info".to_owned());
            let mut grants = GrantSet::default();
            grants.extend_written(&plugin.grants, &plugin.denies)?;
            let effective = grants.effective(&entry.loaded.info.capabilities)?;
            anyhow::ensure!(
                effective.missing_required.is_empty(),
                "plugin {name:?} requires {}, which a global plugin does not get: it runs once for the run beside the aggregator, and in a cluster reads only the objects saved for resources/; run it per node instead",
                effective.missing_required.join(", ")
            );
        }
        Ok(())
    }

    /// What the run's configuration says of each plugin.
    pub fn plugins(&self) -> Vec<RunPlugin> {
        self.entries.iter().map(|e| e.plugin.clone()).collect()
    }

    /// The components that must travel with the run (plugins not bundled), by digest.
    pub fn components(&self) -> Vec<(String, Vec<u8>)> {
        self.entries
            .iter()
            .filter_map(|e| Some((e.plugin.sha256.clone(), e.component.clone()?)))
            .collect()
    }

    /// The components of plugins from files: what must travel with a run whose aggregator
    /// pulls the plugins from registries itself.
    pub fn components_from_files(&self) -> Vec<(String, Vec<u8>)> {
        self.entries
            .iter()
            .filter(|e| e.plugin.source.is_none())
            .filter_map(|e| Some((e.plugin.sha256.clone(), e.component.clone()?)))
            .collect()
    }

    /// What agents need of their node for the per-node plugins: the union of their effective
    /// grants.
    pub fn agent_access(&self) -> anyhow::Result<AgentAccess> {
        let mut host_info = false;
        let mut read_paths = BTreeSet::new();
        for entry in self
            .entries
            .iter()
            .filter(|e| e.plugin.scope == PlanScope::PerNode)
        {
            let mut grants = GrantSet::default();
            grants.extend_written(&entry.plugin.grants, &entry.plugin.denies)?;
            let effective = grants.effective(&entry.loaded.info.capabilities)?;
            host_info |= effective.host_info;
            read_paths.extend(effective.read_paths);
        }
        Ok(AgentAccess {
            host_info,
            read_paths: read_paths.into_iter().collect(),
        })
    }
}

/// Loads and checks the plugin `text` names (a bundled name, a path or a registry reference).
async fn plan_one(
    runtime: &Runtime,
    selection: &PluginSelection,
    text: &str,
) -> anyhow::Result<PlanEntry> {
    let plugin = PluginRef::parse(text)?;
    // A component is read (or pulled) and hashed once: a Python component is 19 MB.
    let (loaded, sha256, component, (source, signed_by)) =
        match plugin.fetch(&selection.registry).await? {
            None => {
                let PluginRef::Bundled(bundled) = &plugin else {
                    unreachable!("only a bundled plugin has nothing to fetch")
                };
                let b = BUNDLED
                    .iter()
                    .find(|b| b.name == *bundled)
                    .expect("resolved from the bundled list");
                let loaded = plugin.load(runtime, &selection.registry).await?;
                (loaded, b.sha256.to_owned(), None, (None, None))
            }
            Some(fetched) => {
                let loaded = runtime
                    .load(&fetched.label, &fetched.wasm, Some(&fetched.sha256))
                    .await?;
                let source = fetched.source.map(|r| r.to_string());
                let provenance = (source, fetched.signed_by);
                (loaded, fetched.sha256, Some(fetched.wasm), provenance)
            }
        };
    let written = PluginChoices::of(&loaded.info, &plugin, text, selection)?;
    Ok(PlanEntry {
        plugin: RunPlugin {
            name: loaded.info.name.clone(),
            sha256,
            scope: PlanScope::PerNode,
            params: written.params,
            grants: written.grants,
            denies: written.denies,
            deadline_seconds: selection.deadline.as_secs().max(1),
            definition: serde_json::to_value(Definition::from(&loaded.info))?,
            source,
            signed_by,
        },
        component,
        loaded,
    })
}

/// What the operator wrote for one plugin, checked against its description: what a run's
/// configuration carries to the agent that runs it ([`factbuoy_agent::invoke`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PluginChoices {
    /// Its parameters as `(NAME, VALUE)`, secrets read from where the operator put them.
    pub params: Vec<(String, String)>,
    /// Capabilities granted, in written form; `all` for a bundled plugin, which gets what it
    /// asks for.
    pub grants: Vec<String>,
    /// Capabilities denied, in written form.
    pub denies: Vec<String>,
}

impl PluginChoices {
    /// What `selection` says of `plugin` (named `text` by the operator, described by `info`):
    /// the parameters and grants scoped to its name or to `text`. Refuses parameters its
    /// description does not allow and grants that leave it without a capability it requires.
    pub fn of(
        info: &PluginInfo,
        plugin: &PluginRef,
        text: &str,
        selection: &PluginSelection,
    ) -> anyhow::Result<PluginChoices> {
        let name = &info.name;
        let mine = |scoped: &[(String, String)]| -> Vec<String> {
            scoped
                .iter()
                .filter(|(p, _)| p == name || p == text)
                .map(|(_, value)| value.clone())
                .collect()
        };
        let params = mine(&selection.params)
            .iter()
            .map(|assignment| params::parse_assignment(assignment).map_err(anyhow::Error::msg))
            .collect::<anyhow::Result<_>>()?;
        let params = read_secret_values(info, params)?;
        params::resolve(&info.parameters, &params)
            .map_err(|e| anyhow::anyhow!("plugin {name:?}: {e}"))?;
        let mut grants = mine(&selection.grants);
        let denies = mine(&selection.denies);
        let mut granted = plugin.default_grants();
        granted
            .extend_written(&grants, &denies)
            .with_context(|| format!("a --grant for plugin {name:?}"))?;
        check_required(info, &granted)?;
        if matches!(plugin, PluginRef::Bundled(_)) {
            grants.push("all".to_owned());
        }
        Ok(PluginChoices {
            params,
            grants,
            denies,
        })
    }
}

/// The values of a plugin's secret parameters, read from where the operator put them so that
/// they never sit in shell history or `/proc/*/cmdline`: `@PATH` reads the file (one trailing
/// newline dropped, as editors and `echo` add it), `env:NAME` the environment variable. Any
/// other value of a secret parameter is taken as written, with a warning; values of parameters
/// that are not secret are always taken as written. Errors never show a secret's value.
pub fn read_secret_values(
    info: &PluginInfo,
    params: Vec<(String, String)>,
) -> anyhow::Result<Vec<(String, String)>> {
    let secret = |name: &str| info.parameters.iter().any(|p| p.name == name && p.secret);
    params
        .into_iter()
        .map(|(name, value)| {
            if !secret(&name) {
                return Ok((name, value));
            }
            let plugin = &info.name;
            let read = if let Some(path) = value.strip_prefix('@') {
                let mut text = std::fs::read_to_string(path).with_context(|| {
                    format!("reading the secret parameter {plugin}:{name} from {path}")
                })?;
                if text.ends_with('\n') {
                    text.pop();
                    if text.ends_with('\r') {
                        text.pop();
                    }
                }
                text
            } else if let Some(variable) = value.strip_prefix("env:") {
                std::env::var(variable).with_context(|| {
                    format!(
                        "reading the secret parameter {plugin}:{name} from the environment variable {variable}, which is not set (or not UTF-8)"
                    )
                })?
            } else {
                tracing::warn!(
                    "the secret parameter {plugin}:{name} is written on the command line, where shell history and /proc/*/cmdline keep it; give it as {name}=@FILE or {name}=env:VARIABLE"
                );
                value
            };
            Ok((name, read))
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn the_journal_plugin_is_a_default_where_the_nodes_may_have_a_journal() {
        let without = tempfile::tempdir().unwrap();
        let with = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(with.path().join("var/log/journal")).unwrap();
        let journal = |plugins: Vec<String>| plugins.iter().any(|p| p == "systemd-logs");
        assert!(!journal(default_plugins(Nodes::ThisHost {
            root: without.path()
        })));
        assert!(journal(default_plugins(Nodes::ThisHost {
            root: with.path()
        })));
        assert!(journal(default_plugins(Nodes::Elsewhere)));
    }
}

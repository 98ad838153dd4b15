//! `factbuoy ansible fact-cache`: hands setup facts to Ansible through its `jsonfile` fact
//! cache ([`factbuoy_inspect::ansible_cache`]). The facts come from the bundled `setup` plugin
//! run on this host now, or from a run's bundle (`.tar.gz`) or its extracted directory, one
//! cache file per node.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use factbuoy_inspect::ansible_cache::{self, FACTS_ARTIFACT, SETUP_PLUGIN, node_name};
use factbuoy_operator::here::HereRequest;
use factbuoy_runtime::params;
use factbuoy_runtime::sink::MemorySink;
use factbuoy_runtime::{Limits, Runtime, RuntimeOptions};

use crate::fact_cache::write_cache;
use crate::output::{ExitStatus, Format};
use factbuoy_inspect::ansible_cache::facts_from_bundle;

#[derive(Debug, Subcommand)]
pub enum AnsibleCommand {
    /// Write setup facts into an Ansible `jsonfile` fact cache directory, one file per host.
    ///
    /// Point Ansible at it with `fact_caching = jsonfile` and `fact_caching_connection = DIR`
    /// (or ANSIBLE_CACHE_PLUGIN=jsonfile ANSIBLE_CACHE_PLUGIN_CONNECTION=DIR), and use
    /// `gathering = smart` or `gather_facts: false`.
    #[command(after_help = "Examples:\n  \
        factbuoy ansible fact-cache ./facts                     # this host, now\n  \
        factbuoy ansible fact-cache ./facts --from run.tar.gz   # every node of a run\n  \
        ANSIBLE_CACHE_PLUGIN=jsonfile ANSIBLE_CACHE_PLUGIN_CONNECTION=./facts ansible-playbook site.yml")]
    FactCache(FactCacheArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LayoutArg {
    /// Both layouts below.
    Both,
    /// ansible-core 2.19 and later: `s1_<host>` with the facts under `__payload__`.
    Schema1,
    /// ansible-core 2.18 and earlier: `<host>` with the facts.
    Plain,
}

#[derive(Debug, Args)]
pub struct FactCacheArgs {
    /// The cache directory (Ansible's `fact_caching_connection`); created if missing.
    dir: PathBuf,
    /// Take the facts from a run's bundle (`.tar.gz`) or its extracted directory, one cache
    /// file per node. Without it, the setup plugin runs on this host now.
    #[arg(long, value_name = "BUNDLE")]
    from: Option<PathBuf>,
    /// The inventory name of this host, for facts gathered now [default: the host's name,
    /// `ansible_nodename`]. Use `localhost` for `ansible-playbook -i localhost,`.
    #[arg(long)]
    host: Option<String>,
    /// Ansible's `fact_caching_prefix`.
    #[arg(long, default_value = "")]
    prefix: String,
    /// Which file layout to write.
    #[arg(long, value_enum, default_value_t = LayoutArg::Both)]
    layout: LayoutArg,
    /// A parameter for the setup plugin, as NAME=VALUE (for example gather_subset=!hardware).
    #[arg(short, long = "param", value_name = "NAME=VALUE", value_parser = params::parse_assignment)]
    params: Vec<(String, String)>,
    /// Host directory the plugin's granted paths are mapped onto (`/host` in a pod).
    #[arg(long, default_value = "/", value_name = "DIR")]
    root: PathBuf,
    /// Where compiled components are cached [default: $FACTBUOY_CACHE_DIR or ~/.cache/factbuoy].
    #[arg(long)]
    cache_dir: Option<PathBuf>,
}

pub async fn execute(command: AnsibleCommand, format: Format) -> anyhow::Result<ExitStatus> {
    match command {
        AnsibleCommand::FactCache(args) => fact_cache(args, format).await,
    }
}

impl From<LayoutArg> for ansible_cache::Layout {
    fn from(layout: LayoutArg) -> Self {
        match layout {
            LayoutArg::Both => ansible_cache::Layout::Both,
            LayoutArg::Schema1 => ansible_cache::Layout::Schema1,
            LayoutArg::Plain => ansible_cache::Layout::Plain,
        }
    }
}

async fn fact_cache(args: FactCacheArgs, format: Format) -> anyhow::Result<ExitStatus> {
    if args.from.is_some() && (args.host.is_some() || !args.params.is_empty()) {
        bail!(
            "--host and --param apply to facts gathered now; with --from, hosts are the bundle's nodes"
        );
    }
    // Each host's facts document as bytes; the cache files are transcoded from them.
    let facts_by_host = match &args.from {
        Some(bundle) => facts_from_bundle(bundle)?,
        None => {
            let facts = gather_here(&args).await?;
            let host = match &args.host {
                Some(host) => host.clone(),
                None => node_name(&facts)
                    .map_err(anyhow::Error::msg)?
                    .context("the facts have no ansible_nodename; name the host with --host")?,
            };
            BTreeMap::from([(host, Ok(facts))])
        }
    };
    write_cache(
        &args.dir,
        &args.prefix,
        args.layout.into(),
        facts_by_host,
        format,
    )
}

/// Runs the bundled setup plugin on this host and returns its facts document.
async fn gather_here(args: &FactCacheArgs) -> anyhow::Result<Vec<u8>> {
    let defaults = RuntimeOptions::default();
    let runtime = Runtime::new(RuntimeOptions {
        limits: Limits::default(),
        cache_dir: args.cache_dir.clone().or(defaults.cache_dir),
    })?;
    let memory = MemorySink::default();
    let request = HereRequest {
        plugin: SETUP_PLUGIN.to_owned(),
        registry: Default::default(),
        params: args
            .params
            .iter()
            .map(|(name, value)| (SETUP_PLUGIN.to_owned(), format!("{name}={value}")))
            .collect(),
        grants: Vec::new(),
        denies: Vec::new(),
        host_root: args.root.clone(),
        sink: Arc::new(memory.clone()),
        limits: None,
        sources: None,
    };
    let report = factbuoy_operator::here::run_plugin(&runtime, request).await?;
    for warning in &report.warnings {
        tracing::warn!("setup: {}", factbuoy_protocol::text::printable(warning));
    }
    if let Some(line) = report.failure_line() {
        bail!("{line}");
    }
    memory
        .contents()
        .into_iter()
        .find(|(name, _)| name.as_str() == FACTS_ARTIFACT)
        .map(|(_, bytes)| bytes)
        .context("the setup plugin wrote no ansible_facts.json")
}

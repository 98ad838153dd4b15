//! `factbuoy ansible fact-cache`: hands setup facts to Ansible through its `jsonfile` fact
//! cache ([`factbuoy_inspect::ansible_cache`]). The facts come from the bundled `setup` plugin
//! run on this host now, or from a run's bundle (`.tar.gz`) or its extracted directory, one
//! cache file per node.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use factbuoy_bundle::layout::{self, ResultKind};
use factbuoy_catalog::PluginRef;
use factbuoy_inspect::MAX_FACTS_BYTES;
use factbuoy_inspect::ansible_cache::{self, FACTS_ARTIFACT, SETUP_PLUGIN, node_name, write_host};
use factbuoy_runtime::params;
use factbuoy_runtime::sink::MemorySink;
use factbuoy_runtime::{Limits, RunRequest, Runtime, RuntimeOptions};
use serde_json::json;

use crate::output::{ExitStatus, Format, emit, emit_document};

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

/// Each node's setup facts document in the bundle at `bundle` (a `.tar.gz` or its extracted
/// folder), or why that node's could not be read.
pub fn facts_from_bundle(
    bundle: &Path,
) -> anyhow::Result<BTreeMap<String, Result<Vec<u8>, String>>> {
    let facts_by_host: BTreeMap<String, Result<Vec<u8>, String>> =
        factbuoy_bundle::reader::node_files(bundle, SETUP_PLUGIN, FACTS_ARTIFACT, MAX_FACTS_BYTES)?
            .into_iter()
            .collect();
    if facts_by_host.is_empty() {
        bail!(
            "{} has no setup results ({}/{FACTS_ARTIFACT}); was the setup plugin part of the run?",
            bundle.display(),
            layout::result_dir(SETUP_PLUGIN, "<node>", ResultKind::Results)
        );
    }
    Ok(facts_by_host)
}

/// Writes a cache file (or two, for [`ansible_cache::Layout::Both`]) per host in `dir`, and
/// prints what was written and each host whose facts could not be; exit 1 if any could not.
pub fn write_cache(
    dir: &Path,
    prefix: &str,
    layout: ansible_cache::Layout,
    facts_by_host: BTreeMap<String, Result<Vec<u8>, String>>,
    format: Format,
) -> anyhow::Result<ExitStatus> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating the cache directory {}", dir.display()))?;
    let mut written = Vec::new();
    let mut errors = Vec::new();
    for (host, facts) in facts_by_host {
        let result = facts.and_then(|facts| {
            write_host(dir, prefix, &host, &facts, layout).map_err(|e| format!("{e:#}"))
        });
        match result {
            Ok(done) => written.push(done),
            Err(e) => errors.push(format!("{host}: {e}")),
        }
    }

    match format {
        Format::Table => {
            for w in &written {
                let files: Vec<String> = w.files.iter().map(|f| f.display().to_string()).collect();
                emit(&format!(
                    "{}: {} facts -> {}",
                    w.host,
                    w.facts,
                    files.join(", ")
                ));
            }
            for e in &errors {
                eprintln!("error: {}", factbuoy_protocol::text::printable(e));
            }
        }
        machine => emit_document(
            &json!({
                "directory": dir,
                "written": written.iter().map(|w| json!({"host": w.host, "files": w.files, "facts": w.facts})).collect::<Vec<_>>(),
                "errors": errors,
            }),
            machine,
        ),
    }
    Ok(if errors.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::Failed
    })
}

/// Runs the bundled setup plugin on this host and returns its facts document.
async fn gather_here(args: &FactCacheArgs) -> anyhow::Result<Vec<u8>> {
    let defaults = RuntimeOptions::default();
    let runtime = Runtime::new(RuntimeOptions {
        limits: Limits::default(),
        cache_dir: args.cache_dir.clone().or(defaults.cache_dir),
    })?;
    let plugin = PluginRef::parse(SETUP_PLUGIN)?;
    let loaded = plugin.load(&runtime).await?;
    let params = params::resolve(&loaded.info.parameters, &args.params)
        .map_err(|e| anyhow::anyhow!("plugin \"setup\": {e}"))?;
    let memory = MemorySink::default();
    let report = runtime
        .run(
            &loaded,
            RunRequest {
                params,
                grants: plugin.default_grants(),
                host_root: args.root.clone(),
                sink: Arc::new(memory.clone()),
                observer: None,
                limits: None,
            },
        )
        .await;
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

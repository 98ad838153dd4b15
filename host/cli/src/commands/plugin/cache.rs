//! `factbuoy plugin cache list|prune`: what the compilation cache holds, and removing it.
//!
//! The cache bounds itself (the least recently used entries go once all exceed
//! `$FACTBUOY_CACHE_MAX_SIZE`, 1 GiB by default; docs/sandbox.md); `prune` also removes what
//! this factbuoy can never load (an older version's entries, memos of files that are gone) and
//! takes it below a size of the operator's choosing.

use std::path::PathBuf;

use anyhow::Context;
use bytesize::ByteSize;
use clap::{Args, Subcommand};
use serde_json::json;

use crate::output::{ExitStatus, Format, emit, emit_document};
use factbuoy_present::cache as present;
use factbuoy_runtime::cache::{self, CacheEntry};
use factbuoy_runtime::{Limits, Runtime, RuntimeOptions};

#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// List the compiled plugins in the cache, least recently used first, with their size.
    #[command(after_help = "Examples:\n  \
        factbuoy plugin cache list\n  \
        factbuoy plugin cache list -o json")]
    List(CacheArgs),
    /// Remove what this factbuoy cannot use, and the least recently used plugins above a size.
    #[command(after_help = "Examples:\n  \
        factbuoy plugin cache prune                   # other versions' entries; then down to the cap\n  \
        factbuoy plugin cache prune --max-size 200MiB # the least recently used above 200 MiB\n  \
        factbuoy plugin cache prune --all --dry-run   # what removing everything would remove\n\n\
        A removed plugin is compiled again at its next load (seconds for Python and JavaScript).")]
    Prune {
        /// Keep the cache under this size, removing the least recently used first [default: the
        /// cap, $FACTBUOY_CACHE_MAX_SIZE or 1GiB].
        #[arg(long, value_name = "SIZE", conflicts_with = "all")]
        max_size: Option<ByteSize>,
        /// Remove every entry.
        #[arg(long)]
        all: bool,
        /// List what would be removed, and remove nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        cache: CacheArgs,
    },
}

#[derive(Debug, Args)]
pub struct CacheArgs {
    /// The cache [default: $FACTBUOY_CACHE_DIR or ~/.cache/factbuoy/components].
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
}

/// The cache as this binary's engine sees it: its directory, this engine's directory in it
/// (entries elsewhere are other versions'), and its cap.
struct Cache {
    root: PathBuf,
    engine_dir: PathBuf,
    max_bytes: u64,
}

impl Cache {
    fn open(args: &CacheArgs) -> anyhow::Result<Cache> {
        let root = args
            .cache_dir
            .clone()
            .or_else(cache::default_dir)
            .context("no cache directory: set $FACTBUOY_CACHE_DIR or pass --cache-dir")?;
        // The engine decides which entries this binary can load.
        let runtime = Runtime::new(RuntimeOptions {
            limits: Limits::default(),
            cache_dir: Some(root.clone()),
        })?;
        let (_, engine_dir) = runtime.cache().dirs().expect("the cache is on");
        Ok(Cache {
            engine_dir: engine_dir.to_owned(),
            max_bytes: runtime.cache().max_bytes(),
            root,
        })
    }

    fn entries(&self) -> anyhow::Result<Vec<CacheEntry>> {
        cache::entries(&self.root, Some(&self.engine_dir))
            .with_context(|| format!("listing {}", self.root.display()))
    }
}

pub fn execute(command: CacheCommand, format: Format) -> anyhow::Result<ExitStatus> {
    match command {
        CacheCommand::List(args) => list(&Cache::open(&args)?, format),
        CacheCommand::Prune {
            max_size,
            all,
            dry_run,
            cache,
        } => {
            let cache = Cache::open(&cache)?;
            let max_bytes = match (all, max_size) {
                (true, _) => 0,
                (false, Some(size)) => size.as_u64(),
                (false, None) => cache.max_bytes,
            };
            prune(&cache, max_bytes, dry_run, format)
        }
    }
}

fn list(cache: &Cache, format: Format) -> anyhow::Result<ExitStatus> {
    let entries = cache.entries()?;
    let total: u64 = entries.iter().map(|e| e.size_bytes).sum();
    match format {
        Format::Table => {
            emit(&present::list_lines(&entries, cache.max_bytes, &cache.root).join("\n"))
        }
        machine => emit_document(
            &json!({
                "dir": cache.root,
                "max_bytes": cache.max_bytes,
                "total_bytes": total,
                "entries": entries.iter().map(entry_json).collect::<Vec<_>>(),
            }),
            machine,
        ),
    }
    Ok(ExitStatus::Success)
}

fn entry_json(entry: &CacheEntry) -> serde_json::Value {
    json!({
        "sha256": entry.sha256,
        "plugin": entry.plugin,
        "size_bytes": entry.size_bytes,
        "last_used": humantime::format_rfc3339_seconds(entry.last_used).to_string(),
        "current": entry.current,
    })
}

/// Removes the entries of other factbuoy versions, then the least recently used until the
/// rest take at most `max_bytes`, then the memos of files that are gone.
fn prune(
    cache: &Cache,
    max_bytes: u64,
    dry_run: bool,
    format: Format,
) -> anyhow::Result<ExitStatus> {
    let (stale, current): (Vec<CacheEntry>, Vec<CacheEntry>) =
        cache.entries()?.into_iter().partition(|e| !e.current);
    let mut removing = stale;
    removing.extend(cache::over(&current, max_bytes));
    let kept: u64 = current.iter().map(|e| e.size_bytes).sum::<u64>()
        - removing
            .iter()
            .filter(|e| e.current)
            .map(|e| e.size_bytes)
            .sum::<u64>();
    let freed: u64 = removing.iter().map(|e| e.size_bytes).sum();
    let memos = if dry_run {
        0
    } else {
        for entry in &removing {
            cache::remove(entry).with_context(|| format!("removing {}", entry.path.display()))?;
        }
        cache::prune_memos(&cache.root)
            .with_context(|| format!("pruning the digest memos in {}", cache.root.display()))?
    };
    match format {
        Format::Table => emit(&present::prune_lines(&removing, freed, kept, dry_run).join("\n")),
        machine => emit_document(
            &json!({
                "dry_run": dry_run,
                "removed": removing.iter().map(entry_json).collect::<Vec<_>>(),
                "freed_bytes": freed,
                "kept_bytes": kept,
                "memos_removed": memos,
            }),
            machine,
        ),
    }
    Ok(ExitStatus::Success)
}

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

/// The cache as this binary's engine sees it (entries of other versions are not current).
struct Cache {
    root: PathBuf,
    runtime: Runtime,
}

impl Cache {
    fn open(args: &CacheArgs) -> anyhow::Result<Cache> {
        let root = args
            .cache_dir
            .clone()
            .or_else(cache::default_dir)
            .context("no cache directory: set $FACTBUOY_CACHE_DIR or pass --cache-dir")?;
        let runtime = Runtime::new(RuntimeOptions {
            limits: Limits::default(),
            cache_dir: Some(root.clone()),
        })?;
        Ok(Cache { root, runtime })
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
                (false, None) => cache.runtime.cache().max_bytes(),
            };
            prune(&cache, max_bytes, dry_run, format)
        }
    }
}

fn list(cache: &Cache, format: Format) -> anyhow::Result<ExitStatus> {
    let max_bytes = cache.runtime.cache().max_bytes();
    let entries = (cache.runtime.cache().entries())
        .with_context(|| format!("listing {}", cache.root.display()))?;
    let total: u64 = entries.iter().map(|e| e.size_bytes).sum();
    match format {
        Format::Table => emit(&present::list_lines(&entries, max_bytes, &cache.root).join("\n")),
        machine => emit_document(
            &json!({
                "dir": cache.root,
                "max_bytes": max_bytes,
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
    let pruned = cache.runtime.cache().prune(max_bytes, dry_run)?;
    let (removing, freed, kept, memos) = (
        &pruned.removed,
        pruned.freed_bytes,
        pruned.kept_bytes,
        pruned.memos_removed,
    );
    match format {
        Format::Table => emit(&present::prune_lines(removing, freed, kept, dry_run).join("\n")),
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

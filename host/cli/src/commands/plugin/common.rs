//! What every `plugin` command shares: where compiled components are cached, the runtime those
//! flags make, and how to reach registries.

use std::path::PathBuf;

use clap::Args;
use factbuoy_runtime::{Limits, Runtime, RuntimeOptions};

#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Where compiled components are cached [default: $FACTBUOY_CACHE_DIR or ~/.cache/factbuoy].
    #[arg(long, global = true)]
    cache_dir: Option<PathBuf>,
    /// Compile every time instead of using the cache.
    #[arg(long, global = true)]
    pub(super) no_cache: bool,
    #[command(flatten)]
    pub(super) registry: crate::flags::RegistryArgs,
}

/// The runtime for `common`'s cache flags and `limits`.
pub(super) fn runtime(common: &CommonArgs, limits: Limits) -> anyhow::Result<Runtime> {
    let defaults = RuntimeOptions::default();
    Runtime::new(RuntimeOptions {
        limits,
        cache_dir: if common.no_cache {
            None
        } else {
            common.cache_dir.clone().or(defaults.cache_dir)
        },
    })
}

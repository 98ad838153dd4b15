//! Compiled components cached on disk, so that only the first run of a plugin pays for
//! compilation.
//!
//! Entries live in `<cache dir>/<engine compatibility hash>/<sha-256 of the wasm>.cwasm`: a new
//! factbuoy (or an engine configured differently) uses a new directory instead of loading code
//! it cannot run. The directory is created 0700 because loading an entry runs its native code.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

/// Environment variable that overrides the cache directory.
pub const CACHE_DIR_ENV: &str = "FACTBUOY_CACHE_DIR";

/// The default location: `$FACTBUOY_CACHE_DIR`, else the user's cache directory.
pub fn default_dir() -> Option<PathBuf> {
    std::env::var_os(CACHE_DIR_ENV)
        .map(PathBuf::from)
        .or_else(|| dirs::cache_dir().map(|d| d.join("factbuoy").join("components")))
}

/// The on-disk cache of compiled components for one engine configuration.
#[derive(Clone)]
pub struct ComponentCache {
    /// `None` disables the cache: every load compiles.
    dir: Option<PathBuf>,
}

impl ComponentCache {
    /// The cache below `root`, in the directory for `engine`'s compatibility hash; `None`
    /// disables it. Nothing is created until the first entry is stored.
    pub fn new(engine: &Engine, root: Option<PathBuf>) -> Self {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let dir = root.map(|root| root.join(format!("{:016x}", hasher.finish())));
        ComponentCache { dir }
    }

    /// The cached component whose wasm has digest `sha256`, if there is a usable entry. A cache
    /// that cannot be read only costs time: it is logged and bypassed.
    pub fn cached(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let entry = self.dir.as_ref()?.join(format!("{sha256}.cwasm"));
        if !entry.is_file() {
            return None;
        }
        // SAFETY: entries are written only by `store` below, into a directory private to this
        // user, and wasmtime checks the header against this engine before using one.
        match unsafe { Component::deserialize_file(engine, &entry) } {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::warn!("ignoring unusable cache entry {}: {e:#}", entry.display());
                None
            }
        }
    }

    /// Compiles `wasm` (digest `sha256`) and caches the result. A cache that cannot be written
    /// only costs time: it is logged and bypassed.
    pub fn compile(
        &self,
        engine: &Engine,
        wasm: &[u8],
        sha256: &str,
    ) -> wasmtime::Result<Component> {
        let component = Component::new(engine, wasm)?;
        if let Some(dir) = &self.dir {
            let entry = dir.join(format!("{sha256}.cwasm"));
            if let Err(e) = store(dir, &entry, &component) {
                tracing::warn!(
                    "could not cache the compiled component in {}: {e:#}",
                    dir.display()
                );
            }
        }
        Ok(component)
    }
}

/// Writes an entry atomically: a reader never sees a partial file.
fn store(dir: &Path, entry: &Path, component: &Component) -> anyhow::Result<()> {
    create_private_dir(dir)?;
    let bytes = component
        .serialize()
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let temporary = entry.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, entry)?;
    Ok(())
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

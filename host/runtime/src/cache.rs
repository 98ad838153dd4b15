//! Compiled components cached on disk, so that only the first run of a plugin pays for
//! compilation.
//!
//! Entries live in `<cache dir>/<engine compatibility hash>/<sha-256 of the wasm>.cwasm`: a new
//! factbuoy (or an engine configured differently) uses a new directory instead of loading code
//! it cannot run. The directory is created 0700 because loading an entry runs its native code.
//!
//! Beside them, `digests/` remembers the digest of each plugin file loaded, by what `stat` says
//! of the file, so that loading a cached plugin from a file reads and hashes nothing: a Python
//! component is 19 MB, and reading and hashing it was half of a cached run's time. A remembered
//! digest is used only while the file's device, inode, size, modification time and change time
//! are all unchanged; any write changes the change time, which no user can set back (git's index
//! trusts the same fields).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::os::unix::fs::MetadataExt;
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

    /// The remembered digest of the file at `path`, whose metadata is `metadata`, if the file
    /// has not changed since it was remembered.
    pub fn known_digest(&self, path: &Path, metadata: &std::fs::Metadata) -> Option<String> {
        let memo = std::fs::read_to_string(self.digest_memo(path)?).ok()?;
        let (identity, sha256) = memo.trim_end().rsplit_once(' ')?;
        let hex = sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit());
        (hex && identity == file_identity(metadata)).then(|| sha256.to_owned())
    }

    /// Remembers that the file at `path`, whose metadata is `metadata`, has digest `sha256`.
    /// Failing to remember only costs the next load a read and a hash: it is logged.
    pub fn remember_digest(&self, path: &Path, metadata: &std::fs::Metadata, sha256: &str) {
        let Some(memo) = self.digest_memo(path) else {
            return;
        };
        let written = memo
            .parent()
            .map_or(Ok(()), create_private_dir)
            .and_then(|()| {
                let temporary = memo.with_extension(format!("tmp{}", std::process::id()));
                std::fs::write(
                    &temporary,
                    format!("{} {sha256}\n", file_identity(metadata)),
                )?;
                std::fs::rename(&temporary, &memo)
            });
        if let Err(e) = written {
            tracing::debug!("could not remember the digest of {}: {e}", path.display());
        }
    }

    /// The memo of `path`'s digest: named by a hash of its absolute path.
    fn digest_memo(&self, path: &Path) -> Option<PathBuf> {
        let absolute = std::path::absolute(path).ok()?;
        let key = factbuoy_protocol::digest::sha256_hex(absolute.as_os_str().as_encoded_bytes());
        Some(self.dir.as_ref()?.join("digests").join(key))
    }
}

/// What must not change for a remembered digest to hold.
pub(crate) fn file_identity(m: &std::fs::Metadata) -> String {
    format!(
        "{} {} {} {}.{} {}.{}",
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    )
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

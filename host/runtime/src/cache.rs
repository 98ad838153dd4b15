//! Compiled components cached on disk, so that only the first run of a plugin pays for
//! compilation.
//!
//! Entries live in `<cache dir>/<engine compatibility hash>/<sha-256 of the wasm>.cwasm`: a new
//! factbuoy (or an engine configured differently) uses a new directory instead of loading code
//! it cannot run. The directory is created 0700 because loading an entry runs its native code.
//!
//! Since a cache directory outlives the process (on a Kubernetes node, every run's agents share
//! one), each entry is checked before it is loaded: the cache directory, the engine's directory
//! and the entry must belong to this user and be writable by no one else ([`Untrusted`]; a
//! directory refused leaves the cache off), and, where [`CACHE_VERIFY_ENV`] asks (agents' node
//! caches), the entry's sha-256 must be the one recorded in `<sha-256>.sum` when it was written.
//! An entry that fails a check is logged, removed and compiled again.
//!
//! Beside them, `digests/` remembers the digest of each plugin file loaded, by what `stat` says
//! of the file, so that loading a cached plugin from a file reads and hashes nothing: a Python
//! component is 19 MB, and reading and hashing it was half of a cached run's time. A remembered
//! digest is used only while the file's device, inode, size, modification time and change time
//! are all unchanged; any write changes the change time, which no user can set back (git's index
//! trusts the same fields).
//!
//! The cache is bounded: all entries below the cache directory together (those of other engine
//! hashes too, which an older factbuoy left) are kept under [`max_bytes`], the least recently
//! used removed first after each new entry. A hit marks its entry used (its modification time);
//! each entry's `<sha-256>.name` says which plugin it is, for `factbuoy plugin cache list`.
//!
//! ```text
//! <cache dir>/                        $FACTBUOY_CACHE_DIR, ~/.cache/factbuoy/components
//!   <engine hash>/                    0700, one per factbuoy version and engine configuration
//!     <sha-256>.cwasm                 a compiled component; modified = last used
//!     <sha-256>.sum                   the sha-256 of that .cwasm, written with it
//!     <sha-256>.name                  "<plugin name> <version>", written after its describe
//!     digests/<hash of a path>        a file's identity, its digest and its path
//! ```

use std::hash::{DefaultHasher, Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use wasmtime::Engine;
use wasmtime::component::Component;

/// Environment variable that overrides the cache directory.
pub const CACHE_DIR_ENV: &str = "FACTBUOY_CACHE_DIR";
/// Environment variable that overrides the size the cache is kept under, e.g. `500MiB`.
pub const CACHE_MAX_SIZE_ENV: &str = "FACTBUOY_CACHE_MAX_SIZE";
/// Environment variable that, set to `1`, makes every load from the cache check the entry's
/// sha-256 against its `.sum` first. Agents on Kubernetes nodes set it: their cache outlives
/// pods, runs and the node's crashes. Elsewhere the owner and mode checks stand alone, and a
/// cached load reads nothing but what the engine maps: hashing a Python plugin's 37 MB would
/// make its cached load three times as long.
pub const CACHE_VERIFY_ENV: &str = "FACTBUOY_CACHE_VERIFY";
/// The size the cache is kept under by default: the bundled plugins take about 30 MB, a Python
/// or JavaScript plugin 30 to 40 MB each, so about 25 plugins of other languages fit.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;
/// The extension of a compiled entry.
const ENTRY_EXTENSION: &str = "cwasm";
/// The extension of an entry's name record.
const NAME_EXTENSION: &str = "name";
/// The extension of an entry's integrity record: the sha-256 of the `.cwasm`.
const SUM_EXTENSION: &str = "sum";

/// The size the cache is kept under: `$FACTBUOY_CACHE_MAX_SIZE` (`500MiB`, `2GB`), else
/// [`DEFAULT_MAX_BYTES`]. A value that is not a size is logged and the default used.
pub fn max_bytes() -> u64 {
    let Some(value) = std::env::var_os(CACHE_MAX_SIZE_ENV) else {
        return DEFAULT_MAX_BYTES;
    };
    match value.to_string_lossy().parse::<bytesize::ByteSize>() {
        Ok(size) => size.as_u64(),
        Err(e) => {
            tracing::warn!(
                "ignoring {CACHE_MAX_SIZE_ENV}={}: {e}; keeping the cache under {}",
                value.to_string_lossy(),
                bytesize::ByteSize::b(DEFAULT_MAX_BYTES)
            );
            DEFAULT_MAX_BYTES
        }
    }
}

/// The default location: `$FACTBUOY_CACHE_DIR`, else the user's cache directory.
pub fn default_dir() -> Option<PathBuf> {
    std::env::var_os(CACHE_DIR_ENV)
        .map(PathBuf::from)
        .or_else(|| dirs::cache_dir().map(|d| d.join("factbuoy").join("components")))
}

/// The on-disk cache of compiled components for one engine configuration.
#[derive(Clone)]
pub struct ComponentCache {
    /// The cache directory and this engine's directory in it; `None` disables the cache: every
    /// load compiles.
    dirs: Option<(PathBuf, PathBuf)>,
    /// The size all entries below the cache directory are kept under.
    max_bytes: u64,
    /// Whether each load checks the entry's sha-256 ([`CACHE_VERIFY_ENV`]).
    verify_sums: bool,
}

impl ComponentCache {
    /// The cache below `root`, in the directory for `engine`'s compatibility hash, kept under
    /// [`max_bytes`]; `None` disables it. Nothing is created until the first entry is stored.
    pub fn new(engine: &Engine, root: Option<PathBuf>) -> Self {
        ComponentCache {
            dirs: root.map(|root| {
                let dir = engine_dir(&root, engine);
                (root, dir)
            }),
            max_bytes: max_bytes(),
            verify_sums: std::env::var_os(CACHE_VERIFY_ENV).is_some_and(|v| v == "1"),
        }
    }

    /// The cache directory and this engine's directory in it; `None` when the cache is off.
    pub fn dirs(&self) -> Option<(&Path, &Path)> {
        self.dirs
            .as_ref()
            .map(|(root, dir)| (root.as_path(), dir.as_path()))
    }

    /// The size all entries are kept under.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Every entry of the cache directory, least recently used first, each marked current when
    /// this engine can load it. A cache that is off has none.
    pub fn entries(&self) -> std::io::Result<Vec<CacheEntry>> {
        match self.dirs() {
            Some((root, dir)) => entries(root, Some(dir)),
            None => Ok(Vec::new()),
        }
    }

    /// Removes the entries this engine can never load, then the least recently used until the
    /// rest take at most `max_bytes`, then the memos of files that are gone; with `dry_run`,
    /// only says what it would remove.
    pub fn prune(&self, max_bytes: u64, dry_run: bool) -> std::io::Result<CachePruned> {
        let (stale, current): (Vec<CacheEntry>, Vec<CacheEntry>) =
            self.entries()?.into_iter().partition(|e| !e.current);
        let mut removed = stale;
        removed.extend(over(&current, max_bytes));
        let total = |entries: &mut dyn Iterator<Item = &CacheEntry>| -> u64 {
            entries.map(|e| e.size_bytes).sum()
        };
        let kept_bytes =
            total(&mut current.iter()) - total(&mut removed.iter().filter(|e| e.current));
        let freed_bytes = total(&mut removed.iter());
        let mut memos_removed = 0;
        if let (false, Some((root, _))) = (dry_run, self.dirs()) {
            for entry in &removed {
                remove(entry).map_err(|e| said(e, format!("removing {}", entry.path.display())))?;
            }
            memos_removed = prune_memos(root)
                .map_err(|e| said(e, format!("pruning the digest memos in {}", root.display())))?;
        }
        Ok(CachePruned {
            removed,
            freed_bytes,
            kept_bytes,
            memos_removed,
        })
    }

    /// This engine's directory, where its entries are.
    fn dir(&self) -> Option<&PathBuf> {
        self.dirs.as_ref().map(|(_, dir)| dir)
    }

    /// The cached component whose wasm has digest `sha256`, if there is a usable entry, marked
    /// used. A cache that cannot be read only costs time: it is logged and bypassed. An entry
    /// that another user could have written, or (with [`CACHE_VERIFY_ENV`]) whose sha-256 is not
    /// the one recorded when it was written, is removed: loading it would run whatever native
    /// code it holds.
    pub fn cached(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let (root, dir) = self.dirs.as_ref()?;
        let entry = dir.join(format!("{sha256}.{ENTRY_EXTENSION}"));
        let metadata = std::fs::symlink_metadata(&entry).ok()?;
        if let Err(refused) = check_private(root).and_then(|()| check_private(dir)) {
            tracing::warn!("not using the compiled-plugin cache: {refused}");
            return None;
        }
        if let Err(refused) = check_private_entry(&entry, &metadata) {
            tracing::warn!("removing the cache entry: {refused}");
            remove_entry(&entry);
            return None;
        }
        match if self.verify_sums {
            verify(&entry)
        } else {
            Ok(())
        } {
            Ok(()) => {}
            // Removed by another process's eviction since it was seen: a miss like any other.
            Err(_) if !entry.exists() => return None,
            Err(e) => {
                tracing::warn!(
                    "removing the cache entry {}, compiling the plugin again: {e}",
                    entry.display()
                );
                remove_entry(&entry);
                return None;
            }
        }
        // SAFETY: the entry and the directories holding it belong to this user and no one else
        // can write them (so it cannot be replaced after the check), `store` wrote it whole
        // (a rename), its sha-256 was checked where it can outlive a crash, and wasmtime checks
        // the header against this engine.
        match unsafe { Component::deserialize_file(engine, &entry) } {
            Ok(component) => {
                mark_used(&entry);
                Some(component)
            }
            Err(_) if !entry.exists() => None,
            Err(e) => {
                tracing::warn!("ignoring unusable cache entry {}: {e:#}", entry.display());
                None
            }
        }
    }

    /// Records that the entry of `sha256` is the plugin `name` (name and version), once, for
    /// `factbuoy plugin cache list`. Failing to record it only costs the listing its name.
    pub fn name_entry(&self, sha256: &str, name: &str) {
        let Some(dir) = self.dir() else {
            return;
        };
        let record = dir.join(format!("{sha256}.{NAME_EXTENSION}"));
        if record.exists() || !dir.join(format!("{sha256}.{ENTRY_EXTENSION}")).exists() {
            return;
        }
        if let Err(e) = std::fs::write(&record, name) {
            tracing::debug!("could not name the cache entry {}: {e}", record.display());
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
        if let Some((root, dir)) = &self.dirs {
            let entry = dir.join(format!("{sha256}.{ENTRY_EXTENSION}"));
            match store(root, dir, &entry, &component) {
                Ok(()) => {
                    if let Err(e) = evict(root, self.max_bytes, &entry) {
                        tracing::warn!("could not bound the cache in {}: {e}", root.display());
                    }
                }
                Err(e) => tracing::warn!(
                    "could not cache the compiled component in {}: {e:#}",
                    dir.display()
                ),
            }
        }
        Ok(component)
    }

    /// The remembered digest of the file at `path`, whose metadata is `metadata`, if the file
    /// has not changed since it was remembered.
    pub fn known_digest(&self, path: &Path, metadata: &std::fs::Metadata) -> Option<String> {
        let memo = Memo::read(&self.digest_memo(path)?)?;
        (memo.identity == file_identity(metadata)).then_some(memo.sha256)
    }

    /// Remembers that the file at `path`, whose metadata is `metadata`, has digest `sha256`.
    /// Failing to remember only costs the next load a read and a hash: it is logged.
    pub fn remember_digest(&self, path: &Path, metadata: &std::fs::Metadata, sha256: &str) {
        let Some(file) = self.digest_memo(path) else {
            return;
        };
        let written = file
            .parent()
            .map_or(Ok(()), create_private_dir)
            .and_then(|()| {
                let temporary = file.with_extension(format!("tmp{}", std::process::id()));
                let memo = Memo {
                    identity: file_identity(metadata),
                    sha256: sha256.to_owned(),
                    path: std::path::absolute(path)?,
                };
                std::fs::write(&temporary, memo.text())?;
                std::fs::rename(&temporary, &file)
            });
        if let Err(e) = written {
            tracing::debug!("could not remember the digest of {}: {e}", path.display());
        }
    }

    /// The memo of `path`'s digest: named by a hash of its absolute path.
    fn digest_memo(&self, path: &Path) -> Option<PathBuf> {
        let absolute = std::path::absolute(path).ok()?;
        let key = factbuoy_protocol::digest::sha256_hex(absolute.as_os_str().as_encoded_bytes());
        Some(self.dir()?.join("digests").join(key))
    }
}

/// The directory of `engine`'s entries below the cache directory `root`.
pub fn engine_dir(root: &Path, engine: &Engine) -> PathBuf {
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    root.join(format!("{:016x}", hasher.finish()))
}

/// A remembered digest: a file's identity ([`file_identity`]), its digest, and its path (so
/// that pruning can tell a memo of a file that is gone).
struct Memo {
    identity: String,
    sha256: String,
    path: PathBuf,
}

impl Memo {
    fn text(&self) -> String {
        format!(
            "{}\n{}\n{}\n",
            self.identity,
            self.sha256,
            self.path.display()
        )
    }

    /// The memo in `file`; `None` when there is none or it is not one (an older layout).
    fn read(file: &Path) -> Option<Memo> {
        let text = std::fs::read_to_string(file).ok()?;
        let mut lines = text.lines();
        let (identity, sha256, path) = (lines.next()?, lines.next()?, lines.next()?);
        let hex = sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit());
        hex.then(|| Memo {
            identity: identity.to_owned(),
            sha256: sha256.to_owned(),
            path: PathBuf::from(path),
        })
    }
}

/// Marks an entry used now, for least-recently-used eviction. An entry that cannot be marked is
/// only evicted sooner.
fn mark_used(entry: &Path) {
    let marked = std::fs::File::open(entry).and_then(|f| f.set_modified(SystemTime::now()));
    if let Err(e) = marked {
        tracing::debug!("could not mark {} used: {e}", entry.display());
    }
}

/// `error`, its message led by what was being done.
fn said(error: std::io::Error, doing: String) -> std::io::Error {
    std::io::Error::new(error.kind(), format!("{doing}: {error}"))
}

/// What [`ComponentCache::prune`] removed, or would remove.
#[derive(Debug, Clone)]
pub struct CachePruned {
    /// The entries, other engines' first.
    pub removed: Vec<CacheEntry>,
    /// Their size.
    pub freed_bytes: u64,
    /// The size of this engine's entries left.
    pub kept_bytes: u64,
    /// Memos of files that are gone, removed (none on a dry run).
    pub memos_removed: usize,
}

/// One compiled component in the cache.
#[derive(Debug, Clone)]
pub struct CacheEntry {
    /// The sha-256 of the plugin's wasm.
    pub sha256: String,
    /// The plugin's name and version, when known.
    pub plugin: Option<String>,
    /// The entry's size on disk.
    pub size_bytes: u64,
    /// When it was last loaded (or compiled).
    pub last_used: SystemTime,
    /// Whether it is for an engine like the asking one; others are an older factbuoy's (or a
    /// differently configured engine's) and are never loaded by it.
    pub current: bool,
    /// Its file.
    pub path: PathBuf,
}

/// Every entry below the cache directory `root`, least recently used first. `current_dir` is
/// the asking engine's directory ([`engine_dir`]). A missing cache has no entries.
pub fn entries(root: &Path, current_dir: Option<&Path>) -> std::io::Result<Vec<CacheEntry>> {
    let mut entries = Vec::new();
    let engine_dirs = match std::fs::read_dir(root) {
        Ok(dirs) => dirs,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(entries),
        Err(e) => return Err(e),
    };
    for engine_dir in engine_dirs {
        let engine_dir = engine_dir?.path();
        let Ok(files) = std::fs::read_dir(&engine_dir) else {
            continue;
        };
        for file in files {
            let path = file?.path();
            if path.extension().is_none_or(|e| e != ENTRY_EXTENSION) {
                continue;
            }
            // Gone since it was listed: another process evicted it.
            let Ok(metadata) = std::fs::metadata(&path) else {
                continue;
            };
            let sha256 = path
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let plugin = std::fs::read_to_string(path.with_extension(NAME_EXTENSION))
                .ok()
                .map(|name| name.trim().to_owned());
            entries.push(CacheEntry {
                sha256,
                plugin,
                size_bytes: metadata.len(),
                last_used: metadata.modified()?,
                current: current_dir == Some(engine_dir.as_path()),
                path,
            });
        }
    }
    entries.sort_by_key(|e| e.last_used);
    Ok(entries)
}

/// Removes an entry and its name record. One already removed (by another process) is not an
/// error.
pub fn remove(entry: &CacheEntry) -> std::io::Result<()> {
    for file in [
        entry.path.clone(),
        entry.path.with_extension(NAME_EXTENSION),
        entry.path.with_extension(SUM_EXTENSION),
    ] {
        match std::fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// The entries to remove, least recently used first, so that the rest take at most `max_bytes`.
pub fn over(entries: &[CacheEntry], max_bytes: u64) -> Vec<CacheEntry> {
    let mut total: u64 = entries.iter().map(|e| e.size_bytes).sum();
    let mut removed = Vec::new();
    for entry in entries {
        if total <= max_bytes {
            break;
        }
        total -= entry.size_bytes;
        removed.push(entry.clone());
    }
    removed
}

/// Removes the least recently used entries below `root` until all take at most `max_bytes`,
/// sparing `keep` (the entry just stored, which the caller is about to use).
fn evict(root: &Path, max_bytes: u64, keep: &Path) -> std::io::Result<()> {
    let all = entries(root, None)?;
    for entry in over(&all, max_bytes) {
        if entry.path != keep {
            tracing::debug!(
                "evicting {} ({} bytes) from the compilation cache",
                entry.path.display(),
                entry.size_bytes
            );
            remove(&entry)?;
        }
    }
    Ok(())
}

/// Removes the digest memos below `root` whose file is gone or has changed since: they can
/// never be used again. Returns how many were removed.
pub fn prune_memos(root: &Path) -> std::io::Result<usize> {
    let mut removed = 0;
    let Ok(engine_dirs) = std::fs::read_dir(root) else {
        return Ok(0);
    };
    for engine_dir in engine_dirs {
        let Ok(memos) = std::fs::read_dir(engine_dir?.path().join("digests")) else {
            continue;
        };
        for memo_file in memos {
            let memo_file = memo_file?.path();
            let stale = match Memo::read(&memo_file) {
                Some(memo) => std::fs::metadata(&memo.path)
                    .map_or(true, |m| file_identity(&m) != memo.identity),
                None => true,
            };
            if stale && std::fs::remove_file(&memo_file).is_ok() {
                removed += 1;
            }
        }
    }
    Ok(removed)
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

/// Writes an entry atomically, its sum first, both 0600: a reader never sees a partial file,
/// and an entry without its sum is refused. Nothing is written into a directory that another
/// user could write.
fn store(root: &Path, dir: &Path, entry: &Path, component: &Component) -> anyhow::Result<()> {
    create_private_dir(dir)?;
    check_private(root)?;
    check_private(dir)?;
    let bytes = component
        .serialize()
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let sum = factbuoy_protocol::digest::sha256_hex(&bytes);
    write_private(&entry.with_extension(SUM_EXTENSION), sum.as_bytes())?;
    write_private(entry, &bytes)?;
    Ok(())
}

/// Writes `file` through a temporary file (mode 0600, a name no other writer picks: agents of
/// several runs share a node's cache, each as process 1 of its pod) and a rename.
fn write_private(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = file.parent().unwrap_or(Path::new("."));
    let mut temporary = tempfile::Builder::new().prefix(".tmp").tempfile_in(dir)?;
    temporary.write_all(bytes)?;
    temporary.persist(file).map_err(|e| e.error)?;
    Ok(())
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Why a cache directory or entry is not used: loading an entry runs its native code, so only
/// what this user alone could have written is loaded.
#[derive(Debug, thiserror::Error)]
pub enum Untrusted {
    /// Another user owns it.
    #[error("{} belongs to uid {owner}, not to this user (uid {user})", .path.display())]
    Owner {
        /// The directory or entry.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// This process's effective uid.
        user: u32,
    },
    /// Its group or other users may write it.
    #[error("{} is writable by other users (mode {mode:04o})", .path.display())]
    Writable {
        /// The directory or entry.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// It is not a regular file (an entry) or not a directory (a symbolic link, say).
    #[error("{} is not a {expected}", .path.display())]
    Kind {
        /// What it is.
        path: PathBuf,
        /// What it should be.
        expected: &'static str,
    },
    /// It cannot be inspected.
    #[error("{}: {error}", .path.display())]
    Unreadable {
        /// The directory or entry.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

/// Refuses a cache directory that is not this user's own, writable by no one else.
pub fn check_private(dir: &Path) -> Result<(), Untrusted> {
    let metadata = std::fs::symlink_metadata(dir).map_err(|error| Untrusted::Unreadable {
        path: dir.to_owned(),
        error,
    })?;
    if !metadata.is_dir() {
        return Err(Untrusted::Kind {
            path: dir.to_owned(),
            expected: "directory",
        });
    }
    check_owner_and_mode(dir, &metadata)
}

fn check_private_entry(entry: &Path, metadata: &std::fs::Metadata) -> Result<(), Untrusted> {
    if !metadata.is_file() {
        return Err(Untrusted::Kind {
            path: entry.to_owned(),
            expected: "regular file",
        });
    }
    check_owner_and_mode(entry, metadata)
}

fn check_owner_and_mode(path: &Path, metadata: &std::fs::Metadata) -> Result<(), Untrusted> {
    let user = rustix::process::geteuid().as_raw();
    if metadata.uid() != user {
        return Err(Untrusted::Owner {
            path: path.to_owned(),
            owner: metadata.uid(),
            user,
        });
    }
    let mode = metadata.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(Untrusted::Writable {
            path: path.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// Why an entry's contents are not what was written.
#[derive(Debug, thiserror::Error)]
enum Corrupt {
    #[error("its sha-256 is {actual}, not {recorded} as recorded when it was written")]
    Mismatch { recorded: String, actual: String },
    #[error("it has no integrity record ({0})")]
    NoRecord(std::io::Error),
    #[error("reading it: {0}")]
    Read(std::io::Error),
}

/// Checks the entry's sha-256 against the sum recorded when it was written.
fn verify(entry: &Path) -> Result<(), Corrupt> {
    let recorded =
        std::fs::read_to_string(entry.with_extension(SUM_EXTENSION)).map_err(Corrupt::NoRecord)?;
    let actual = sha256_of_file(entry).map_err(Corrupt::Read)?;
    let recorded = recorded.trim();
    if recorded != actual {
        return Err(Corrupt::Mismatch {
            recorded: recorded.to_owned(),
            actual,
        });
    }
    Ok(())
}

fn sha256_of_file(path: &Path) -> std::io::Result<String> {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

/// Removes a refused entry with its records. One that cannot be removed is refused again next
/// time.
fn remove_entry(entry: &Path) {
    for file in [
        entry.to_owned(),
        entry.with_extension(NAME_EXTENSION),
        entry.with_extension(SUM_EXTENSION),
    ] {
        if let Err(e) = std::fs::remove_file(&file)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("could not remove {}: {e}", file.display());
        }
    }
}

/// Makes `dir` (made if missing) belong to `uid`:`gid` with mode 0700, without following a
/// symbolic link: what a Kubernetes node's cache directory needs before an agent, which is not
/// root, can use it. Only `dir` itself changes; entries inside that are not `uid`'s are refused
/// when loaded. Run as root with CAP_CHOWN and CAP_FOWNER only (the agents' init container),
/// which cannot open a directory another user made 0700: so it is changed through an `O_PATH`
/// descriptor, which needs no permission on the directory, by its `/proc/self/fd` name, which
/// names that very directory. Nothing is changed when all is right already.
pub fn prepare_dir(dir: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    use std::os::fd::AsRawFd;
    create_private_dir(dir)?;
    let fd = rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let stat = rustix::fs::fstat(&fd)?;
    if (stat.st_uid, stat.st_gid, stat.st_mode & 0o7777) == (uid, gid, 0o700) {
        return Ok(());
    }
    let by_fd = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    std::os::unix::fs::chown(&by_fd, Some(uid), Some(gid))?;
    std::fs::set_permissions(&by_fd, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(sha256: &str, size_bytes: u64, age_seconds: u64) -> CacheEntry {
        CacheEntry {
            sha256: sha256.into(),
            plugin: None,
            size_bytes,
            last_used: SystemTime::now() - std::time::Duration::from_secs(age_seconds),
            current: true,
            path: PathBuf::from(format!("{sha256}.cwasm")),
        }
    }

    #[test]
    fn the_least_recently_used_go_until_the_rest_fit() {
        // Least recently used first, as `entries` lists them.
        let all = [entry("a", 40, 30), entry("b", 30, 20), entry("c", 20, 10)];
        let gone = |max| -> Vec<String> { over(&all, max).into_iter().map(|e| e.sha256).collect() };
        assert_eq!(gone(90), Vec::<String>::new());
        assert_eq!(gone(89), ["a"]);
        assert_eq!(gone(50), ["a"]);
        assert_eq!(gone(49), ["a", "b"]);
        assert_eq!(gone(0), ["a", "b", "c"]);
    }

    #[test]
    fn prepare_dir_makes_the_directory_private_to_its_owner_and_refuses_a_link() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(
            check_private(&dir),
            Err(Untrusted::Writable { mode: 0o777, .. })
        ));
        let (uid, gid) = (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
        );
        prepare_dir(&dir, uid, gid).unwrap();
        let metadata = std::fs::metadata(&dir).unwrap();
        assert_eq!(metadata.permissions().mode() & 0o7777, 0o700);
        assert_eq!((metadata.uid(), metadata.gid()), (uid, gid));
        check_private(&dir).unwrap();

        // What a later run's init container meets: the directory is another user's, 0700, and
        // root without CAP_DAC_OVERRIDE could not even open it for reading.
        if rustix::process::geteuid().is_root() {
            prepare_dir(&dir, 65532, 65532).unwrap();
            prepare_dir(&dir, uid, gid).unwrap();
            let metadata = std::fs::metadata(&dir).unwrap();
            assert_eq!((metadata.uid(), metadata.gid()), (uid, gid));
        }

        // A link in its place is neither followed nor trusted.
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(prepare_dir(&link, uid, gid).is_err());
        assert!(matches!(check_private(&link), Err(Untrusted::Kind { .. })));
    }

    #[test]
    fn a_memo_reads_back_and_an_older_layout_is_no_memo() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("memo");
        let memo = Memo {
            identity: "1 2 3 4.5 6.7".into(),
            sha256: "ab".repeat(32),
            path: PathBuf::from("/p/plugin.wasm"),
        };
        std::fs::write(&file, memo.text()).unwrap();
        let read = Memo::read(&file).unwrap();
        assert_eq!(
            (read.identity, read.sha256, read.path),
            (memo.identity, memo.sha256, memo.path)
        );
        // What factbuoy wrote before memos named their file: one line.
        std::fs::write(&file, format!("1 2 3 4.5 6.7 {}\n", "ab".repeat(32))).unwrap();
        assert!(Memo::read(&file).is_none());
    }
}

//! A directory of bundles read as one history: what a fleet looked like on any day, and when
//! each of its facts changed.
//!
//! The bundles are put in the order their runs were created; nodes are matched by name
//! across runs of one origin (`origin` in `meta/run.json`: a host, a cluster, a fleet), and a
//! directory holding several origins is read as a history per origin ([`History::open_each`]),
//! never one across them. The first answer builds an
//! index in the cache directory ([`default_index`]); later ones read only the bundles added
//! since ([`index`] module). docs/inspect.md describes it for users.

use std::path::{Path, PathBuf};

mod build;
mod changes;
mod error;
mod index;
mod open;
mod pile;
mod state;
mod timeline;
mod times;

pub use changes::{FactChange, FactHistory, NodeEvent, NodeEventKind, NodeHistory, SeenIn};
pub use error::{HistoryError, OriginCount, SameRun};
pub use index::{Duplicate, Unreadable, Update};
pub use open::{History, HistoryBundle};
pub use timeline::{Day, Timeline, TopFact};

/// Where the index of `dir` lives unless told: `$XDG_CACHE_HOME/factbuoy/history/` (or
/// `~/.cache/...`), named by a digest of the directory's canonical path. Not in the directory
/// itself: a pile of bundles may be read-only, shared, or pruned by the fleet that writes it.
pub fn default_index(dir: &Path) -> Result<PathBuf, HistoryError> {
    use sha2::Digest;
    let canonical = pile::canonical(dir)?;
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .ok_or(HistoryError::NoCacheDir)?;
    let digest = sha2::Sha256::digest(canonical.as_os_str().as_encoded_bytes());
    Ok(cache
        .join("factbuoy/history")
        .join(format!("{}.sqlite", &hex::encode(digest)[..16])))
}

/// Brings the index of `dir` at `index` up to date and returns what it did.
pub fn update(dir: &Path, index: &Path) -> Result<Update, HistoryError> {
    index::update(dir, index).map(|(_, update)| update)
}

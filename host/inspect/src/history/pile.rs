//! The bundles of a directory as they lie on disk: which files are bundles, what a file's
//! metadata says about whether it changed, and what a bundle says about its run before it is
//! read whole.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use factbuoy_bundle::layout;
use factbuoy_bundle::reader::{Bundle, ReadError};
use serde_json::Value;

use super::error::HistoryError;
use crate::meta::run_first;

/// A bundle file of the directory, with what its metadata says of it: a file whose size,
/// modification time, change time or inode differ from what the index recorded is read again
/// and its digest compared, as git compares its index with the work tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OnDisk {
    /// The file's name in the directory.
    pub name: String,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub inode: u64,
}

impl OnDisk {
    fn of(name: String, metadata: &std::fs::Metadata) -> OnDisk {
        OnDisk {
            name,
            size: metadata.len(),
            mtime_ns: metadata.mtime() * 1_000_000_000 + metadata.mtime_nsec(),
            ctime_ns: metadata.ctime() * 1_000_000_000 + metadata.ctime_nsec(),
            inode: metadata.ino(),
        }
    }
}

/// The bundles in `dir`: its regular files named `*.tar.gz`, by name (a bundle being written
/// has another name until it is whole: factbuoy renames it into place).
pub(crate) fn list(dir: &Path) -> Result<Vec<OnDisk>, HistoryError> {
    let io = |cause| HistoryError::Directory {
        dir: dir.to_owned(),
        cause,
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !name.ends_with(".tar.gz") {
            continue;
        }
        // Not followed: a link is a file of another directory, which may change unseen.
        let metadata = entry.metadata().map_err(io)?;
        if metadata.is_file() {
            found.push(OnDisk::of(name, &metadata));
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// What a bundle's `meta/run.json` says of its run, read without reading the rest (factbuoy
/// writes it first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunHead {
    pub run_id: String,
    /// RFC 3339, UTC, as the run recorded it.
    pub created: String,
    /// `kind:id`, or `None` for a bundle that records none.
    pub origin: Option<String>,
}

impl RunHead {
    /// The run of `run.json`'s document.
    pub(crate) fn of(run: &Value) -> Option<RunHead> {
        let origin = match (run["origin"]["kind"].as_str(), run["origin"]["id"].as_str()) {
            (Some(kind), Some(id)) => Some(format!("{kind}:{id}")),
            _ => None,
        };
        Some(RunHead {
            run_id: run["run_id"].as_str()?.to_owned(),
            created: run["created"].as_str()?.to_owned(),
            origin,
        })
    }
}

/// Reads `path`'s `meta/run.json` and stops.
pub(crate) fn run_head(path: &Path) -> Result<RunHead, ReadError> {
    let run = run_first(&Bundle::open(path)?)?;
    RunHead::of(&run).ok_or_else(|| ReadError::Read {
        entry: layout::RUN.to_owned(),
        cause: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{}: its first entry is not a meta/run.json with a run_id and a created time; is it a factbuoy bundle?",
                path.display()
            ),
        ),
    })
}

/// The canonical path of the directory, which names its index.
pub(crate) fn canonical(dir: &Path) -> Result<PathBuf, HistoryError> {
    let canonical = dir
        .canonicalize()
        .map_err(|cause| HistoryError::Directory {
            dir: dir.to_owned(),
            cause,
        })?;
    if !canonical.is_dir() {
        return Err(HistoryError::Directory {
            dir: dir.to_owned(),
            cause: std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
        });
    }
    Ok(canonical)
}

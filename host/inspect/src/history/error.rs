//! Why a history could not be read.

use std::path::PathBuf;

use serde::Serialize;

/// Why a history could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The directory (or the index's) could not be read or written.
    #[error("{dir}: {cause}")]
    Directory {
        /// The directory.
        dir: PathBuf,
        /// What the system said.
        cause: std::io::Error,
    },
    /// The index could not be read or written.
    #[error("the history index {index}: {cause}; it is a cache: delete it and it is built again")]
    Index {
        /// The index file.
        index: PathBuf,
        /// What SQLite said.
        cause: rusqlite::Error,
    },
    /// No cache directory is known.
    #[error(
        "no cache directory for the history index: set XDG_CACHE_HOME or HOME, or pass --index FILE"
    )]
    NoCacheDir,
    /// The directory holds no bundle that could be read (of the origin asked for).
    #[error("{dir} holds no readable bundle{of}", of = origin.as_ref().map(|o| format!(" of origin {o}")).unwrap_or_default())]
    Empty {
        /// The directory.
        dir: PathBuf,
        /// The origin asked for.
        origin: Option<String>,
    },
    /// The directory holds bundles of several origins and none was chosen, where the answer is
    /// one history (`sql`, `diff --since`).
    #[error(
        "{dir} holds bundles of {} origins, whose nodes are different machines: {}; choose one with --origin (`inspect history` and `inspect report` show each apart)",
        origins.len(),
        origins.iter().map(|o| format!("{} ({} bundles)", o.origin, o.bundles)).collect::<Vec<_>>().join(", ")
    )]
    MixedOrigins {
        /// The directory.
        dir: PathBuf,
        /// Each origin and its number of bundles.
        origins: Vec<OriginCount>,
    },
    /// Two whole bundles of the directory are of one run but hold different files.
    #[error(
        "{dir}: {} and {} are both run {}, but hold different files (sha-256 {} and {}): a run has one bundle, so one of them is not this run's own; move the one that is not out of the directory",
        both.first, both.second, both.run_id, &both.first_sha256[..12], &both.second_sha256[..12]
    )]
    SameRunDiffers {
        /// The directory.
        dir: PathBuf,
        /// The two files.
        both: Box<SameRun>,
    },
    /// A time could not be read.
    #[error(
        "{0:?} is not a time: give a day (2026-05-01, today, yesterday: for --as-of the end of that day UTC, for --since its start), an RFC 3339 time (2026-05-01T12:00:00Z) or a time as `inspect logs --since` takes it (7d ago, 2026-05-01 12:00)"
    )]
    Time(String),
    /// No bundle of the history is at or before the time asked for.
    #[error("no bundle of {dir} is from {time} or before; the first is from {first}")]
    NothingBefore {
        /// The directory.
        dir: PathBuf,
        /// The time asked for.
        time: String,
        /// The first bundle's time.
        first: String,
    },
}

/// An origin of a directory's bundles, and how many it has.
#[derive(Debug, Clone, Serialize)]
pub struct OriginCount {
    /// `kind:id`, or `unrecorded` for bundles that record none.
    pub origin: String,
    /// Its bundles.
    pub bundles: usize,
}

/// Two files of one run whose bytes differ.
#[derive(Debug, Clone, Serialize)]
pub struct SameRun {
    /// Their run.
    pub run_id: String,
    /// The file whose name sorts first.
    pub first: String,
    /// Its sha-256.
    pub first_sha256: String,
    /// The other.
    pub second: String,
    /// Its sha-256.
    pub second_sha256: String,
}

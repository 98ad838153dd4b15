//! How an operator's request fails: the cases a caller acts on (a run that does not exist, one
//! that is not ready), and everything else with its chain of causes.

/// An operator's request that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No run is known by the id or directory given.
    #[error("{0}")]
    NoSuchRun(String),
    /// The run is still going and what was asked for does not exist yet.
    #[error("{0}")]
    NotReady(String),
    /// The operator stopped a run before its bundle was written: it may be finished later.
    #[error("{0}")]
    Stopped(String),
    /// Anything else: what went wrong, with its causes.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// The result of an operator's request.
pub type Result<T, E = Error> = std::result::Result<T, E>;

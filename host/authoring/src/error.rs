//! How creating or building a project fails, sorted by what the author does next: fix the
//! request or the project, install a tool, or fix the code the toolchain refused.

/// Why a project could not be created or built. Each variant's text is a whole sentence for the
/// author, saying what to do where there is something to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request or the project is not usable as it is: not a project, a name that is not a
    /// plugin's, a directory that exists, a project without its contract or SDK.
    #[error("{0}")]
    Invalid(String),
    /// A tool the build needs is missing or unusable; the text says how to install it.
    #[error("{0}")]
    MissingToolchain(String),
    /// The toolchain ran and refused the project, or the syntax check found an error; what
    /// they said is on standard error already.
    #[error("{0}")]
    BuildFailed(String),
    /// Reading or writing a file, or starting a tool, failed.
    #[error("{context}")]
    Io {
        /// What was being done, e.g. `reading app.py`.
        context: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Whether a build ran and failed ([`Error::BuildFailed`]), as opposed to one refused or
    /// unable to start: the `factbuoy` binary exits 1 for the first and 2 (invalid input) for
    /// the rest.
    pub fn is_failed_build(&self) -> bool {
        matches!(self, Error::BuildFailed(_))
    }
}

/// `with_context` on I/O results, as anyhow's reads: the error says what was being done.
pub(crate) trait IoContext<T> {
    /// The error of `self`, if any, as an [`Error::Io`] saying `context()`.
    fn with_context(self, context: impl FnOnce() -> String) -> Result<T, Error>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn with_context(self, context: impl FnOnce() -> String) -> Result<T, Error> {
        self.map_err(|source| Error::Io {
            context: context(),
            source,
        })
    }
}

//! The operator's state directory: where runs are remembered, so that `status` and `retrieve`
//! find them from another terminal, and where local runs, Kubernetes runs' operator credentials,
//! a fleet and a fleet member keep their files by default.
//!
//! ```text
//! $FACTBUOY_STATE_DIR, else $XDG_STATE_HOME/factbuoy (~/.local/state/factbuoy), 0700
//! ├── current-run.json     the current run's record (records::RunRecord), 0600
//! ├── runs/<run id>/       local runs' directories (the aggregator's RunDir)
//! ├── kube/<run id>/       a Kubernetes run's operator CA and certificate, and its record
//! ├── fleet/               `factbuoy fleet serve`'s directory by default
//! └── agent/               a fleet member's enrollment by default
//! ```

use std::path::{Path, PathBuf};

use anyhow::Context;

/// Environment variable that overrides where the operator keeps its state.
pub const STATE_DIR_ENV: &str = "FACTBUOY_STATE_DIR";

/// The operator's state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir(PathBuf);

impl StateDir {
    /// `$FACTBUOY_STATE_DIR`, else `$XDG_STATE_HOME/factbuoy` (`~/.local/state/factbuoy`).
    pub fn from_env() -> anyhow::Result<StateDir> {
        std::env::var_os(STATE_DIR_ENV)
            .map(PathBuf::from)
            .or_else(|| dirs::state_dir().map(|d| d.join("factbuoy")))
            .map(StateDir)
            .context("no state directory: set FACTBUOY_STATE_DIR")
    }

    /// The state directory at `path`.
    pub fn at(path: impl Into<PathBuf>) -> StateDir {
        StateDir(path.into())
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.0
    }

    /// Where local runs keep their directories by default: `runs/<run id>`.
    pub fn local_runs(&self) -> PathBuf {
        self.0.join("runs")
    }

    /// Where a Kubernetes run's operator credentials (its operator CA and certificate) and its
    /// record are: `kube/<run id>`.
    pub fn kubernetes_run(&self, run_id: &str) -> PathBuf {
        self.0.join("kube").join(run_id)
    }

    /// The default directory of a fleet served from this machine.
    pub fn fleet(&self) -> PathBuf {
        self.0.join("fleet")
    }

    /// The default directory of this machine's membership of a fleet.
    pub fn agent(&self) -> PathBuf {
        self.0.join("agent")
    }

    /// The current run's record.
    pub(crate) fn current_run(&self) -> PathBuf {
        self.0.join("current-run.json")
    }

    /// Creates the directory (0700) if it is missing.
    pub(crate) fn create(&self) -> anyhow::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.0)
            .with_context(|| format!("creating {}", self.0.display()))
    }
}

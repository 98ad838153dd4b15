//! The run directory: every path of a run's working state, in one place. Created 0700: it holds
//! the run's CA key. What is read and written where: `run.json`, `secrets.json` and
//! `state.json` in `saved`, the commit and node records in `records`, `staging/` and `results/`
//! in the crate's `upload` and `commit`.
//!
//! ```text
//! <run dir>/run.json                         the run's configuration (RunConfig), secrets left out
//! <run dir>/secrets.json                     secret parameters, 0600, while the run is running
//! <run dir>/state.json                       run-level status (RunState)
//! <run dir>/commits/<plugin>/<node>.json     one record per committed result
//! <run dir>/nodes/<node>.json                one record per node the dispatcher named (NodeSet)
//! <run dir>/pki/                             CA, server and operator certificates and keys
//! <run dir>/components/<sha256>.wasm         plugin components not bundled in the binary
//! <run dir>/staging/                         uploads in progress and accepted (upload, commit)
//! <run dir>/results/                         committed results in the bundle's layout (commit)
//! <run dir>/spool/                           the local agent's artifacts awaiting upload
//! <run dir>/final-status.json                the status document of a retired run
//! ```
//!
//! A finished run on this host is retired ([`RunDir::retire`]): its bundle holds everything,
//! so only run.json, state.json and the final status stay, for `factbuoy status`.

use std::path::{Path, PathBuf};

use factbuoy_bundle::layout;
use factbuoy_protocol::types::StatusDocument;

use super::files::write_atomically;

/// A run's directory and the path of everything in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir {
    root: PathBuf,
}

impl RunDir {
    /// The run directory at `root` (which need not exist yet).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        RunDir { root: root.into() }
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The run's configuration.
    pub fn config(&self) -> PathBuf {
        self.root.join("run.json")
    }

    /// The run's secret parameters, kept apart from its configuration (0600) only while the run
    /// may still hand out plans, so that a restarted aggregator can.
    pub fn secrets(&self) -> PathBuf {
        self.root.join("secrets.json")
    }

    /// The run-level status.
    pub fn state(&self) -> PathBuf {
        self.root.join("state.json")
    }

    /// The record of one committed result (`label` is a node, or `global`). Named as the
    /// bundle's reports are, so the same longest node name fits.
    pub fn commit_record(&self, plugin: &str, label: &str) -> PathBuf {
        self.root
            .join("commits")
            .join(plugin)
            .join(format!("{label}{}", layout::NODE_FILE_SUFFIX))
    }

    /// The record of what the dispatcher said about a node: expected, skipped, failed, gone
    /// (the serving run's `NodeSet`). Named as commit records are, so every node name fits.
    pub fn node_record(&self, node: &str) -> PathBuf {
        self.nodes()
            .join(format!("{node}{}", layout::NODE_FILE_SUFFIX))
    }

    /// The node records.
    pub fn nodes(&self) -> PathBuf {
        self.root.join("nodes")
    }

    /// The run's certificates and keys.
    pub fn pki(&self) -> PathBuf {
        self.root.join("pki")
    }

    /// The operator's credentials: (CA, certificate, key).
    pub fn operator_files(&self) -> (PathBuf, PathBuf, PathBuf) {
        let pki = self.pki();
        (
            pki.join("ca.pem"),
            pki.join("operator.pem"),
            pki.join("operator.key"),
        )
    }

    /// The final status document of a retired run.
    pub fn final_status(&self) -> PathBuf {
        self.root.join("final-status.json")
    }

    /// Keeps `document` as the run's final status and removes its working copies: results,
    /// uploads, the spool, components, commit and node records, and the CA's keys and
    /// certificates (nothing can be issued or served for the run again). For a run that ended,
    /// its bundle written.
    pub fn retire(&self, document: &StatusDocument) -> std::io::Result<()> {
        let text = serde_json::to_vec_pretty(document).map_err(std::io::Error::other)?;
        write_atomically(&self.final_status(), &text)?;
        for dir in [
            self.results(),
            self.staging(),
            self.spool(),
            self.root.join("components"),
            self.root.join("commits"),
            self.nodes(),
            self.pki(),
        ] {
            match std::fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        match std::fs::remove_file(self.secrets()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// The final status of a retired run; `None` for a run not retired.
    pub fn load_final_status(&self) -> std::io::Result<Option<StatusDocument>> {
        match std::fs::read(self.final_status()) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(std::io::Error::other),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A plugin component stored with the run.
    pub fn component(&self, sha256: &str) -> PathBuf {
        self.root.join("components").join(format!("{sha256}.wasm"))
    }

    /// Uploads in progress and accepted files awaiting their commit.
    pub fn staging(&self) -> PathBuf {
        self.root.join("staging")
    }

    /// Committed results, in the bundle's layout: the tree that becomes the bundle.
    pub fn results(&self) -> PathBuf {
        self.root.join("results")
    }

    /// Where a local agent spools artifacts before uploading them.
    pub fn spool(&self) -> PathBuf {
        self.root.join("spool")
    }
}

//! A run's bundle from the page, once the run has ended: `retrieve` (downloaded with the
//! operator's credentials into the server's `--out` folder, exactly as `factbuoy retrieve`
//! does) and its HTML report (`inspect report`), made on request from the bundle on this
//! machine.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use factbuoy_bundle::reader::Bundle;
use factbuoy_inspect::drift::IgnoreList;
use factbuoy_operator::follow::{Fetched, Source};

use crate::polling::Pollers;

/// Why a bundle could not be retrieved or reported.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BundleError {
    /// The run is not one of this machine's.
    #[error("no run {0} is known here (`factbuoy runs` lists them)")]
    NoSuchRun(String),
    /// There is no bundle on this machine to report on yet.
    #[error("the bundle of run {0} is not on this machine: retrieve it first")]
    NotHere(String),
    /// The operator library's error: the run, its aggregator or the download.
    #[error("{0}")]
    Operator(String),
    /// The report could not be made.
    #[error("making the report of {path}: {cause}")]
    Report {
        /// The bundle.
        path: PathBuf,
        /// Why.
        cause: String,
    },
}

/// Where bundles go, and the ones this server has retrieved.
pub(crate) struct Bundles {
    out: PathBuf,
    retrieved: Mutex<HashMap<String, PathBuf>>,
}

impl Bundles {
    pub(crate) fn new(out: PathBuf) -> Bundles {
        Bundles {
            out,
            retrieved: Mutex::default(),
        }
    }

    /// Downloads `run_id`'s bundle into the `--out` folder (resuming a partial one there) and
    /// checks its size and digest against the run's.
    pub(crate) async fn retrieve(
        &self,
        pollers: &Pollers,
        run_id: &str,
    ) -> Result<Fetched, BundleError> {
        let record = pollers
            .record(run_id)
            .ok_or_else(|| BundleError::NoSuchRun(run_id.to_owned()))?;
        let operator = |e: factbuoy_operator::Error| BundleError::Operator(format!("{e:#}"));
        let source = Source::of(&record, pollers.state(), pollers.cluster())
            .await
            .map_err(operator)?;
        let document = source.status().await.map_err(operator)?;
        let fetched = source
            .fetch_bundle(&document, &self.out)
            .await
            .map_err(operator)?;
        tracing::info!(run_id, path = %fetched.path.display(), "retrieved from the status page");
        self.retrieved
            .lock()
            .expect("the bundles' lock")
            .insert(run_id.to_owned(), fetched.path.clone());
        Ok(fetched)
    }

    /// The HTML report of `run_id`'s bundle: the one retrieved here, or a local run's own
    /// (`local_bundle`, as its last view says).
    pub(crate) async fn report(
        &self,
        run_id: &str,
        local_bundle: Option<PathBuf>,
    ) -> Result<Vec<u8>, BundleError> {
        let retrieved = self
            .retrieved
            .lock()
            .expect("the bundles' lock")
            .get(run_id)
            .cloned();
        let path = retrieved
            .or(local_bundle)
            .filter(|path| path.is_file())
            .ok_or_else(|| BundleError::NotHere(run_id.to_owned()))?;
        // Reading a bundle of many nodes takes a while: not on the server's threads.
        tokio::task::spawn_blocking(move || report(&path))
            .await
            .expect("the report's thread does not panic")
    }
}

/// `inspect report` of the bundle at `path`, with the default ignores, into memory.
fn report(path: &Path) -> Result<Vec<u8>, BundleError> {
    let failed = |cause: String| BundleError::Report {
        path: path.to_owned(),
        cause,
    };
    let bundle = Bundle::open(path).map_err(|e| failed(e.to_string()))?;
    // write_file writes whole files only; a private folder holds it until it is read.
    let dir = tempfile::tempdir().map_err(|e| failed(e.to_string()))?;
    let file = dir.path().join("report.html");
    factbuoy_inspect::report::write_file(&bundle, &IgnoreList::new(true, &[]), &file)
        .map_err(|e| failed(e.to_string()))?;
    std::fs::read(&file).map_err(|e| failed(e.to_string()))
}

//! The runs this machine knows, of every kind: local runs in the state directory, Kubernetes and
//! fleet runs started from here (their records). Local runs say their state from their run
//! directory; Kubernetes and fleet runs are asked, when asked to be (`live`), through their
//! operator listeners.

use std::time::Duration;

use serde::Serialize;

use factbuoy_aggregator::RunDir;
use factbuoy_kubernetes::ClusterRef;
use factbuoy_protocol::types::{ResultStatus, RunStatus, StatusDocument};

use crate::follow::{Source, ended, local_status};
use crate::records::{LocalRun, RunRecord};
use crate::state::StateDir;

/// How long a Kubernetes or fleet run's aggregator may take to answer a listing.
const LIVE_TIMEOUT: Duration = Duration::from_secs(15);

/// One run, as listed.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    /// Its id.
    pub run_id: String,
    /// `local`, `kubernetes` or `fleet`.
    pub kind: &'static str,
    /// When it was created, RFC 3339, where known.
    pub created: Option<String>,
    /// Its status, where known: a remote run's only when asked live.
    pub status: Option<RunStatus>,
    /// How many of its results failed.
    pub failed_results: usize,
    /// Why its status is not known, or what is odd about it (`abandoned`: failed, its process
    /// gone before the run ended).
    pub note: Option<String>,
    /// Where it is: a run directory, a namespace, a fleet's address.
    pub place: String,
    /// Whether it is the current run (`status` and `retrieve` without a run id).
    pub current: bool,
}

impl Listed {
    /// Whether the run may still be going: its status says so, or it is not known.
    pub fn may_be_going(&self) -> bool {
        !self.status.is_some_and(ended)
    }
}

/// Every run this machine knows, newest first. With `live`, Kubernetes and fleet runs are asked
/// for their status (`cluster` overrides how a cluster is reached).
pub async fn list(
    state: &StateDir,
    cluster: &ClusterRef,
    live: bool,
) -> anyhow::Result<Vec<Listed>> {
    let current = state
        .locate(&crate::WhichRun::Current)
        .ok()
        .map(|r| r.run_id().to_owned());
    let mut listed = Vec::new();
    for record in state.records()? {
        let mut entry = match &record {
            RunRecord::Local(local) => local_entry(local),
            RunRecord::Kubernetes(kube) => Listed {
                run_id: kube.run_id.clone(),
                kind: "kubernetes",
                created: kube.created.clone(),
                status: None,
                failed_results: 0,
                note: None,
                place: format!("namespace {}", kube.namespace),
                current: false,
            },
            RunRecord::Fleet(fleet) => Listed {
                run_id: fleet.run_id.clone(),
                kind: "fleet",
                created: fleet.created.clone(),
                status: None,
                failed_results: 0,
                note: None,
                place: fleet.fleet_operator_address.clone(),
                current: false,
            },
        };
        if live && !matches!(record, RunRecord::Local(_)) {
            let asked = tokio::time::timeout(LIVE_TIMEOUT, async {
                Source::of(&record, state, cluster).await?.status().await
            })
            .await;
            match asked {
                Ok(Ok(document)) => describe(&mut entry, &document),
                Ok(Err(e)) => entry.note = Some(format!("{e:#}")),
                Err(_) => {
                    entry.note = Some(format!("no answer within {}s", LIVE_TIMEOUT.as_secs()))
                }
            }
        }
        entry.current = current.as_deref() == Some(entry.run_id.as_str());
        listed.push(entry);
    }
    listed.sort_by(|a, b| b.created.cmp(&a.created));
    Ok(listed)
}

/// A local run's entry, from its run directory: its state as `status` tells it
/// ([`local_status`]), failed and noted abandoned when its process ended before the run did.
fn local_entry(run: &LocalRun) -> Listed {
    let config = RunDir::new(&run.run_dir).load_config().ok();
    let mut entry = Listed {
        run_id: run.run_id.clone(),
        kind: "local",
        created: config.as_ref().map(|c| c.created.clone()),
        status: None,
        failed_results: 0,
        note: None,
        place: run.run_dir.display().to_string(),
        current: false,
    };
    match local_status(&run.run_dir) {
        Ok(local) => {
            describe(&mut entry, &local.document);
            if local.abandoned {
                entry.note = Some("abandoned: its process ended before the run did".to_owned());
            }
        }
        Err(e) => entry.note = Some(format!("{e:#}")),
    }
    entry
}

fn describe(entry: &mut Listed, document: &StatusDocument) {
    entry.status = Some(document.status);
    entry.failed_results = document
        .plugins
        .iter()
        .filter(|p| p.result_status == Some(ResultStatus::Failed))
        .count();
}

//! One poller per watched run, shared by every browser tab and API client watching it: it asks
//! the run's aggregator for its status every [`POLL_EVERY`] (through
//! [`Source`](factbuoy_operator::follow::Source), with the operator's own credentials, exactly
//! as `factbuoy status` does), publishes each document that differs from the last, and stops
//! when the run has ended or when nobody has watched for [`IDLE_POLLS`] polls.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use factbuoy_kubernetes::ClusterRef;
use factbuoy_operator::follow::{Source, ended};
use factbuoy_operator::{RunRecord, StateDir};

use crate::api::{API_VERSION, RunView};

/// How often a watched run's aggregator is asked.
pub(crate) const POLL_EVERY: Duration = Duration::from_secs(1);

/// Polls without a watcher after which a poller stops (a page reloaded within them keeps it).
const IDLE_POLLS: u32 = 10;

/// What a watcher sees: nothing until the first poll, then the run as last polled.
pub(crate) type Latest = watch::Receiver<Option<Arc<RunView>>>;

/// Where a poller publishes.
type Publisher = Arc<watch::Sender<Option<Arc<RunView>>>>;

/// The pollers, by run id.
#[derive(Clone)]
pub(crate) struct Pollers {
    state: StateDir,
    cluster: ClusterRef,
    running: Arc<Mutex<HashMap<String, Publisher>>>,
}

impl Pollers {
    pub(crate) fn new(state: StateDir, cluster: ClusterRef) -> Pollers {
        Pollers {
            state,
            cluster,
            running: Arc::default(),
        }
    }

    /// The machine's run records, for the list and to find a run by id.
    pub(crate) fn state(&self) -> &StateDir {
        &self.state
    }

    /// How Kubernetes runs' clusters are reached.
    pub(crate) fn cluster(&self) -> &ClusterRef {
        &self.cluster
    }

    /// The record of the run `run_id`, if this machine knows it. Only a run the records name:
    /// an id from a URL never becomes a path by itself.
    pub(crate) fn record(&self, run_id: &str) -> Option<RunRecord> {
        self.state
            .records()
            .ok()?
            .into_iter()
            .find(|r| r.run_id() == run_id)
    }

    /// Watches the run `run_id`, starting its poller unless one runs (or the run has ended and
    /// its last document is kept); `None` for a run this machine does not know.
    pub(crate) fn watch(&self, run_id: &str) -> Option<Latest> {
        let mut running = self.running.lock().expect("the pollers' lock");
        if let Some(sender) = running.get(run_id) {
            return Some(sender.subscribe());
        }
        let record = self.record(run_id)?;
        let (sender, latest) = watch::channel(None);
        let sender = Arc::new(sender);
        running.insert(run_id.to_owned(), sender.clone());
        tokio::spawn(poll(self.clone(), record, sender));
        Some(latest)
    }

    /// Forgets `run_id`'s poller if nobody watches it; whether it did.
    fn forget_if_unwatched(&self, run_id: &str) -> bool {
        let mut running = self.running.lock().expect("the pollers' lock");
        let unwatched = running
            .get(run_id)
            .is_some_and(|sender| sender.receiver_count() == 0);
        if unwatched {
            running.remove(run_id);
        }
        unwatched
    }
}

/// Polls `record` into `sender` until the run ends or nobody watches.
async fn poll(pollers: Pollers, record: RunRecord, sender: Publisher) {
    let run_id = record.run_id().to_owned();
    let kind = kind(&record);
    let mut source = None;
    let mut idle = 0;
    let mut ticks = tokio::time::interval(POLL_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if sender.receiver_count() == 0 {
            idle += 1;
            if idle >= IDLE_POLLS && pollers.forget_if_unwatched(&run_id) {
                tracing::debug!(run_id, "nobody watches the run: its poller stops");
                return;
            }
        } else {
            idle = 0;
        }
        // A Kubernetes run's source waits for its port-forward: made once, then kept.
        if source.is_none() {
            match Source::of(&record, pollers.state(), &pollers.cluster).await {
                Ok(made) => source = Some(made),
                Err(e) => {
                    publish(&sender, |last| {
                        view(&run_id, kind, last, Err(e.to_string()), None)
                    });
                    continue;
                }
            }
        }
        let source = source.as_ref().expect("made above");
        let answer = source.status().await.map_err(|e| format!("{e:#}"));
        let bundle_dir = source.bundle_dir();
        let view = |last: Option<&RunView>| view(&run_id, kind, last, answer.clone(), bundle_dir);
        let done = publish(&sender, view);
        if done {
            tracing::debug!(run_id, "the run has ended: its poller stops");
            return;
        }
    }
}

/// Publishes the view `make` builds from the last one when the run it shows changed; whether
/// the run has ended.
fn publish(
    sender: &watch::Sender<Option<Arc<RunView>>>,
    make: impl FnOnce(Option<&RunView>) -> RunView,
) -> bool {
    let mut ended = false;
    sender.send_if_modified(|latest| {
        let next = make(latest.as_deref());
        ended = next.ended;
        // The poll time alone does not make an event.
        let changed = latest.as_deref().is_none_or(|last| {
            (&last.status, &last.poll_error, last.ended)
                != (&next.status, &next.poll_error, next.ended)
        });
        if changed {
            *latest = Some(Arc::new(next));
        }
        changed
    });
    ended
}

/// The run as polled now: `answer` the aggregator's document or why it did not come, in which
/// case the last document stays.
fn view(
    run_id: &str,
    kind: &'static str,
    last: Option<&RunView>,
    answer: Result<factbuoy_protocol::types::StatusDocument, String>,
    bundle_dir: Option<std::path::PathBuf>,
) -> RunView {
    let (status, poll_error) = match answer {
        Ok(document) => (Some(document), None),
        Err(e) => (last.and_then(|l| l.status.clone()), Some(e)),
    };
    let ended = poll_error.is_none() && status.as_ref().is_some_and(|s| ended(s.status));
    let bundle_path = match (&status, bundle_dir) {
        (Some(document), Some(dir)) => document
            .tar_info
            .as_ref()
            .map(|tar| dir.join(&tar.name).display().to_string()),
        _ => None,
    };
    RunView {
        api_version: API_VERSION,
        run_id: run_id.to_owned(),
        kind,
        polled_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        ended,
        poll_error,
        status,
        bundle_path,
        retrieve: format!("factbuoy retrieve {run_id}"),
    }
}

/// How `factbuoy runs` names a record's kind.
fn kind(record: &RunRecord) -> &'static str {
    match record {
        RunRecord::Local(_) => "local",
        RunRecord::Kubernetes(_) => "kubernetes",
        RunRecord::Fleet(_) => "fleet",
    }
}

#[cfg(test)]
mod tests {
    use factbuoy_protocol::types::{RunStatus, StatusDocument, TarInfo};

    use super::*;

    fn document(status: RunStatus) -> StatusDocument {
        StatusDocument {
            run_id: "0a1b2c3d4e5f".to_owned(),
            status,
            plugins: Vec::new(),
            tar_info: None,
            error: None,
        }
    }

    fn publish_answer(
        sender: &watch::Sender<Option<Arc<RunView>>>,
        answer: Result<StatusDocument, String>,
    ) -> bool {
        let dir = Some(std::path::PathBuf::from("/bundles"));
        publish(sender, |last| {
            view("0a1b2c3d4e5f", "local", last, answer, dir)
        })
    }

    #[test]
    fn only_a_changed_run_is_published_and_a_failed_poll_keeps_the_last_document() {
        let (sender, mut latest) = watch::channel(None);
        assert!(!publish_answer(&sender, Ok(document(RunStatus::Running))));
        assert!(latest.has_changed().unwrap());
        latest.borrow_and_update();
        // The same document a poll later: the time alone is no event.
        publish_answer(&sender, Ok(document(RunStatus::Running)));
        assert!(!latest.has_changed().unwrap());
        // A poll that fails is said, with the last document, and does not end the run.
        assert!(!publish_answer(
            &sender,
            Err("connection refused".to_owned())
        ));
        let failed = latest.borrow_and_update().clone().unwrap();
        assert_eq!(failed.poll_error.as_deref(), Some("connection refused"));
        assert_eq!(failed.status, Some(document(RunStatus::Running)));
        assert!(!failed.ended);
        // The end, with its bundle where a local run wrote it.
        let mut complete = document(RunStatus::Complete);
        complete.tar_info = Some(TarInfo {
            name: "20261128_factbuoy_0a1b2c3d4e5f.tar.gz".to_owned(),
            created: "2026-11-28T18:00:00Z".to_owned(),
            sha256: "0".repeat(64),
            size: 10,
        });
        assert!(publish_answer(&sender, Ok(complete)));
        let ended = latest.borrow_and_update().clone().unwrap();
        assert!(ended.ended && ended.poll_error.is_none());
        assert_eq!(
            ended.bundle_path.as_deref(),
            Some("/bundles/20261128_factbuoy_0a1b2c3d4e5f.tar.gz")
        );
        assert_eq!(ended.retrieve, "factbuoy retrieve 0a1b2c3d4e5f");
    }
}

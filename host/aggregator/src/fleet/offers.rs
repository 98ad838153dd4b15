//! The runs a fleet serves, by the number the fleet gave each in the order it started them, and
//! the offers made of them: agents long-poll for the runs after the last number they took part
//! in (the fleet's routes), each offer carrying the node's credential for the run.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Mutex;

use factbuoy_protocol::fleet::RunOffer;
use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::types::RunStatus;
use ring::hmac;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::admission::credential;
use crate::live::node_set::NodeSet;
use crate::start::RunningAggregator;

/// A run of the fleet.
pub(crate) struct FleetRun {
    /// The run's id.
    pub(crate) run_id: String,
    /// The nodes it expects.
    pub(crate) nodes: Vec<NodeName>,
    /// Its CA's certificate, PEM.
    pub(crate) ca: String,
    /// The run, served.
    pub(crate) running: RunningAggregator,
    /// Retires the run once its bundle is written (`runs`); stopped with the run.
    pub(crate) retiring: JoinHandle<()>,
}

impl Drop for FleetRun {
    fn drop(&mut self) {
        self.retiring.abort();
    }
}

/// The runs the fleet serves, by number; and the newest number, which long polls watch.
#[derive(Default)]
pub(crate) struct FleetRuns {
    runs: Mutex<BTreeMap<u64, FleetRun>>,
    /// The newest run number taken; new runs are numbered after it.
    pub(crate) newest: Mutex<u64>,
    started: watch::Sender<u64>,
}

impl FleetRuns {
    /// The first running run after number `after` that expects `node`, as an offer with the
    /// node's credential for it under `ticket_key`.
    pub(crate) fn offer(
        &self,
        ticket_key: &hmac::Key,
        node: &NodeName,
        after: u64,
    ) -> Option<RunOffer> {
        let runs = self.runs.lock().unwrap();
        // Excluded: `after` may be u64::MAX (a client may ask anything).
        runs.range((Bound::Excluded(after), Bound::Unbounded))
            .find(|(_, run)| run.nodes.contains(node) && run.running.status() == RunStatus::Running)
            .map(|(number, run)| RunOffer {
                number: *number,
                run_id: run.run_id.clone(),
                agent_port: run.running.agent_address.port(),
                ca: run.ca.clone(),
                credential: credential(ticket_key, &run.run_id, node),
            })
    }

    /// The runs still running that expect `node`, by number, with their node sets.
    pub(crate) fn running_with(&self, node: &NodeName) -> Vec<(u64, NodeSet)> {
        self.runs
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, run)| {
                run.nodes.contains(node) && run.running.status() == RunStatus::Running
            })
            .map(|(number, run)| (*number, run.running.nodes()))
            .collect()
    }

    /// How many runs are running, and the nodes they expect: those busy taking part (an agent
    /// in a run does not poll the fleet until it is done).
    pub(crate) fn taking_part(&self) -> (usize, BTreeSet<NodeName>) {
        let runs = self.runs.lock().unwrap();
        let running = runs
            .values()
            .filter(|run| run.running.status() == RunStatus::Running);
        let (mut count, mut nodes) = (0, BTreeSet::new());
        for run in running {
            count += 1;
            nodes.extend(run.nodes.iter().cloned());
        }
        (count, nodes)
    }

    /// Notified when a run starts.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.started.subscribe()
    }

    /// Adds run `number`, and tells the long polls.
    pub(crate) fn add(&self, number: u64, run: FleetRun) {
        self.runs.lock().unwrap().insert(number, run);
        self.started.send_replace(number);
    }

    /// Stops serving run `number`: its listeners close, its memory is freed.
    pub(crate) fn remove(&self, number: u64) {
        let removed = self.runs.lock().unwrap().remove(&number);
        drop(removed);
    }
}

//! Starting a collection run on any kind of target and following it to its bundle: one entry
//! point ([`start`]) and one handle ([`Started`]), whatever the run's kind.

use std::path::PathBuf;
use std::time::Duration;

use factbuoy_protocol::types::StatusDocument;

use crate::fleet::{self, FleetStart, FleetTarget};
use crate::follow::Finished;
use crate::kubernetes::{self, KubernetesTarget};
use crate::local::{self, Interrupts, LocalTarget};
use crate::plan::PluginSelection;
use crate::records::RunRecord;
use crate::state::StateDir;

/// Where a run's agents run.
#[derive(Debug, Clone)]
pub enum Target {
    /// This host: an aggregator on loopback and an agent in this process.
    Local(LocalTarget),
    /// Every node of a Kubernetes cluster: the aggregator in a pod, agents in a DaemonSet.
    /// Boxed: its placement is several times the size of the other targets.
    Kubernetes(Box<KubernetesTarget>),
    /// Every node enrolled in a fleet.
    Fleet(FleetTarget),
}

/// A collection run to start.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// Where its agents run.
    pub target: Target,
    /// Its plugins.
    pub plugins: PluginSelection,
    /// Deadline of the whole run: what is missing then becomes error results.
    pub timeout: Duration,
    /// Where the bundle goes: written there by a local run, downloaded there otherwise.
    pub out: PathBuf,
}

/// A run that has started.
pub struct Started {
    record: RunRecord,
    fleet: Option<FleetStart>,
    out: PathBuf,
    running: Running,
}

enum Running {
    Local(local::LocalRunning),
    Kubernetes(kubernetes::Applied),
    Fleet(fleet::Requested),
}

/// Plans and starts `request`'s run and makes it the current run in `state`. A local run is
/// served by this process from here on ([`Started::finish`] drives it); a Kubernetes or fleet
/// run goes on without this process.
pub async fn start(state: &StateDir, request: RunRequest) -> crate::Result<Started> {
    let RunRequest {
        target,
        plugins,
        timeout,
        out,
    } = request;
    let (record, running, fleet) = match &target {
        Target::Local(local) => {
            let (record, running) = local::start(state, local, &plugins, timeout, &out).await?;
            (record, Running::Local(running), None)
        }
        Target::Kubernetes(kube) => {
            let (record, applied) = kubernetes::start(state, kube, &plugins, timeout).await?;
            (record, Running::Kubernetes(applied), None)
        }
        Target::Fleet(fleet) => {
            let (record, requested, started) =
                fleet::start(state, fleet, &plugins, timeout).await?;
            (record, Running::Fleet(requested), Some(started))
        }
    };
    state.remember(&record)?;
    Ok(Started {
        record,
        fleet,
        out,
        running,
    })
}

impl Started {
    /// Where the run is, as `status` and `retrieve` find it.
    pub fn record(&self) -> &RunRecord {
        &self.record
    }

    /// For a fleet run: the fleet's answer and the plugins stored in it.
    pub fn fleet(&self) -> Option<&FleetStart> {
        self.fleet.as_ref()
    }

    /// Follows the run to its end, showing each status to `on_status`, and puts its bundle in
    /// the request's `out`. `interrupts` end a local run early; other runs go on in their
    /// cluster or fleet whatever this process does.
    pub async fn finish(
        self,
        interrupts: &mut Interrupts,
        on_status: &mut dyn FnMut(&StatusDocument),
    ) -> crate::Result<Finished> {
        match self.running {
            Running::Local(running) => running.finish(interrupts, on_status).await,
            Running::Kubernetes(applied) => applied.finish(&self.out, on_status).await,
            Running::Fleet(requested) => requested.finish(&self.out, on_status).await,
        }
    }
}

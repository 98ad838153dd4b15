//! A run over every node enrolled in a fleet, from the operator's side: planned here, the
//! plugins from files stored in the fleet (each only if it lacks it), the run requested, then
//! followed on the run's operator listener with the fleet's operator credentials.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use factbuoy_aggregator::fleet::FleetDir;
use factbuoy_protocol::Client;
use factbuoy_protocol::fleet::{FleetRunRequest, FleetRunStarted};
use factbuoy_protocol::types::StatusDocument;
use factbuoy_runtime::{Limits, Runtime, RuntimeOptions};

use crate::follow::{Finished, Source, follow_and_fetch};
use crate::plan::{Nodes, Plan, PluginSelection};
use crate::records::{FleetRun, RunRecord, fleet_operator_identity};
use crate::state::StateDir;

/// How often a fleet run's status is asked for while following it.
const STATUS_EVERY: Duration = Duration::from_secs(2);
/// How long a fleet run may go past its timeout before the operator stops following it.
const PACKAGING_GRACE: Duration = Duration::from_secs(300);

/// A run over every node enrolled in a fleet.
#[derive(Debug, Clone)]
pub struct FleetTarget {
    /// The fleet's address, HOST:PORT.
    pub address: String,
    /// The fleet's operator credentials [default: `operator/` of the fleet
    /// [`StateDir::find_fleet`] finds for `address`].
    pub credentials: Option<PathBuf>,
    /// How long a node may stay silent before its results are given up as lost.
    pub lost_after: Duration,
}

/// A fleet run that the fleet has started.
pub(crate) struct Requested {
    record: FleetRun,
    timeout: Duration,
    address: String,
}

/// What starting a fleet run did, for the operator to see.
#[derive(Debug, Clone)]
pub struct FleetStart {
    /// The fleet's answer: the run's number, id and expected nodes.
    pub started: FleetRunStarted,
    /// The plugins from files this run stored in the fleet (digest, size); those the fleet
    /// already had are not sent again.
    pub stored: Vec<(String, usize)>,
}

/// Plans the run, stores its plugins from files in the fleet, and asks the fleet to start it.
pub(crate) async fn start(
    state: &StateDir,
    target: &FleetTarget,
    selection: &PluginSelection,
    timeout: Duration,
) -> anyhow::Result<(RunRecord, Requested, FleetStart)> {
    // Unless named: those of the fleet this machine serves at that address, else found as the
    // `fleet` commands find it.
    let credentials = match &target.credentials {
        Some(dir) => dir.clone(),
        None => FleetDir::new(state.find_fleet(Some(&target.address))?).operator(),
    };
    let identity = fleet_operator_identity(&credentials)?;
    let runtime = Runtime::new(RuntimeOptions {
        limits: Limits {
            deadline: selection.deadline,
            ..Limits::default()
        },
        ..RuntimeOptions::default()
    })?;
    let plan = Plan::build(&runtime, selection, Nodes::Elsewhere).await?;
    drop(runtime);
    let request = FleetRunRequest {
        plugins: plan
            .plugins()
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?,
        timeout_seconds: timeout.as_secs().max(1),
        lost_after_seconds: target.lost_after.as_secs().max(1),
    };
    let fleet = Client::new(&target.address, &identity)?;
    let mut stored = Vec::new();
    for (sha256, wasm) in plan.components() {
        if fleet
            .store_fleet_plugin(&sha256, &wasm)
            .await
            .with_context(|| format!("storing plugin {sha256} in the fleet"))?
        {
            stored.push((sha256, wasm.len()));
        }
    }
    let started = fleet
        .start_fleet_run(&request)
        .await
        .context("asking the fleet to start the run")?;
    let host = target
        .address
        .rsplit_once(':')
        .map(|(host, _)| host)
        .context("the fleet address is not HOST:PORT")?;
    let record = FleetRun {
        run_id: started.run_id.clone(),
        fleet_operator_address: format!("{host}:{}", started.operator_port),
        credentials,
        run_ca: started.ca.clone(),
        created: Some(factbuoy_protocol::types::now_rfc3339()),
    };
    record.save(state)?;
    Ok((
        RunRecord::Fleet(record.clone()),
        Requested {
            record,
            timeout,
            address: target.address.clone(),
        },
        FleetStart { started, stored },
    ))
}

impl Requested {
    /// Follows the run until it ends, and downloads its bundle into `out`.
    pub(crate) async fn finish(
        self,
        out: &Path,
        on_status: &mut dyn FnMut(&StatusDocument),
    ) -> crate::Result<Finished> {
        let source = Source::Fleet(self.record.operator()?);
        let stuck = format!("see the fleet aggregator's log at {}", self.address);
        follow_and_fetch(
            &source,
            STATUS_EVERY,
            (self.timeout + PACKAGING_GRACE, &stuck),
            out,
            "factbuoy retrieve",
            on_status,
        )
        .await
    }
}

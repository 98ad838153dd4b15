//! Prometheus metrics of a fleet, served to its operators at `GET /metrics` (docs/fleet.md,
//! "Metrics"): what a fleet operator watches and alerts on. Counters count from the fleet's
//! start; the gauges of agents and runs are read from the registry and the runs when scraped.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::time::SystemTime;

use factbuoy_protocol::names::NodeName;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::registry::Registry as Enrolled;
use crate::metrics::{ReasonLabel, StateLabel};

/// The label of the gauges of each agent.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabel {
    node: String,
}

/// Every metric of a fleet, registered under the `factbuoy_fleet` prefix.
pub(crate) struct FleetMetrics {
    registry: Registry,
    /// `agents{state}`: enrolled agents, `enrolled` or `revoked`.
    agents: Family<StateLabel, Gauge>,
    /// `agents_waiting`: agents whose long poll for work is open now: those connected.
    waiting: Gauge<i64, AtomicI64>,
    /// `agent_last_seen_timestamp_seconds{node}`: when each unrevoked agent last asked for
    /// work, Unix time.
    last_seen: Family<NodeLabel, Gauge<f64, AtomicU64>>,
    /// `agent_in_run{node}`: 1 for each unrevoked agent a running run expects, which does not
    /// ask the fleet for work until it is done: not seen, and not missing.
    in_run: Family<NodeLabel, Gauge>,
    /// `runs_running`: runs running now.
    running: Gauge,
    /// `joins_total`: machines that joined (or rejoined) with a token.
    pub(crate) joins: Counter,
    /// `rejections_total{reason}`: requests and connections refused.
    rejections: Family<ReasonLabel, Counter>,
    /// `revocations_total`: revoked agents the fleet found and applied to its runs.
    pub(crate) revocations: Counter,
    /// `runs_total`: runs started.
    pub(crate) runs: Counter,
    /// `polls_total`: long polls for work received from agents.
    pub(crate) polls: Counter,
}

/// Counts an open long poll in `agents_waiting` until dropped.
pub(crate) struct Waiting(Gauge<i64, AtomicI64>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Default for FleetMetrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("factbuoy_fleet");
        let metrics = FleetMetrics {
            agents: Family::default(),
            waiting: Gauge::default(),
            last_seen: Family::default(),
            in_run: Family::default(),
            running: Gauge::default(),
            joins: Counter::default(),
            rejections: Family::default(),
            revocations: Counter::default(),
            runs: Counter::default(),
            polls: Counter::default(),
            registry: Registry::default(),
        };
        registry.register(
            "agents",
            "Enrolled agents, by state (enrolled, revoked)",
            metrics.agents.clone(),
        );
        registry.register(
            "agents_waiting",
            "Agents whose long poll for work is open now",
            metrics.waiting.clone(),
        );
        registry.register(
            "agent_last_seen_timestamp_seconds",
            "When each unrevoked agent last asked for work, Unix time",
            metrics.last_seen.clone(),
        );
        registry.register(
            "agent_in_run",
            "1 for each unrevoked agent a running run expects (it asks for no work until done)",
            metrics.in_run.clone(),
        );
        registry.register("runs_running", "Runs running now", metrics.running.clone());
        registry.register(
            "joins",
            "Machines that joined with a token",
            metrics.joins.clone(),
        );
        registry.register(
            "rejections",
            "Requests and connections refused, by reason",
            metrics.rejections.clone(),
        );
        registry.register(
            "revocations",
            "Revoked agents found and applied to the runs",
            metrics.revocations.clone(),
        );
        registry.register("runs", "Runs started", metrics.runs.clone());
        registry.register(
            "polls",
            "Long polls for work received",
            metrics.polls.clone(),
        );
        FleetMetrics {
            registry,
            ..metrics
        }
    }
}

impl FleetMetrics {
    /// Counts one refusal for `reason`.
    pub(crate) fn reject(&self, reason: &str) {
        self.rejections
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Counts a long poll as open until the guard is dropped.
    pub(crate) fn waiting(&self) -> Waiting {
        self.waiting.inc();
        Waiting(self.waiting.clone())
    }

    /// Every metric in the Prometheus text format, the gauges set from the `enrolled` agents,
    /// those `revoked`, and the `running` runs with the nodes they expect.
    pub(crate) fn encode(
        &self,
        enrolled: &Enrolled,
        revoked: &BTreeSet<NodeName>,
        (running, taking_part): &(usize, BTreeSet<NodeName>),
    ) -> String {
        let (mut unrevoked, mut revoked_count) = (0, 0);
        self.last_seen.clear();
        self.in_run.clear();
        for (name, record) in enrolled {
            if revoked.contains(name) {
                revoked_count += 1;
                continue;
            }
            unrevoked += 1;
            let label = NodeLabel {
                node: name.to_string(),
            };
            if let Some(seen) = record.last_seen.as_deref().and_then(unix_seconds) {
                self.last_seen.get_or_create(&label).set(seen);
            }
            if taking_part.contains(name) {
                self.in_run.get_or_create(&label).set(1);
            }
        }
        self.running.set(*running as i64);
        for (state, count) in [("enrolled", unrevoked), ("revoked", revoked_count)] {
            self.agents
                .get_or_create(&StateLabel {
                    state: state.to_owned(),
                })
                .set(count);
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String");
        text
    }
}

/// An RFC 3339 time as Unix seconds.
fn unix_seconds(rfc3339: &str) -> Option<f64> {
    let at = time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339)
        .ok()?;
    let at: SystemTime = at.into();
    Some(
        at.duration_since(SystemTime::UNIX_EPOCH)
            .ok()?
            .as_secs_f64(),
    )
}

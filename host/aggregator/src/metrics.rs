//! Prometheus metrics of the aggregator, served on the operator listener at `/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The label of `results_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabel {
    /// `succeeded` or `failed`, as the manifest says.
    pub(crate) outcome: String,
}

/// The label of `rejections_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabel {
    /// Why the request or connection was refused, in kebab-case (`too-large`, `tls-handshake`).
    pub(crate) reason: String,
}

/// The label of the `nodes` gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct StateLabel {
    /// `pending`, `running`, `done` or `lost`.
    pub(crate) state: String,
}

/// Every metric of the aggregator, registered under the `factbuoy_aggregator` prefix.
pub(crate) struct Metrics {
    registry: Registry,
    /// `results_total{outcome}`: results committed by agents (made-up error results not counted).
    pub(crate) results: Family<OutcomeLabel, Counter>,
    /// `received_bytes_total`: bytes of result files accepted.
    pub(crate) bytes_received: Counter,
    /// `rejections_total{reason}`: requests and connections refused.
    pub(crate) rejections: Family<ReasonLabel, Counter>,
    /// `upload_duration_seconds`: time to receive one accepted result file, in seconds.
    pub(crate) upload_seconds: Histogram,
    /// `nodes{state}`: expected nodes by state, set when `/metrics` is read.
    pub(crate) nodes: Family<StateLabel, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("factbuoy_aggregator");
        let results = Family::<OutcomeLabel, Counter>::default();
        let bytes_received = Counter::default();
        let rejections = Family::<ReasonLabel, Counter>::default();
        let upload_seconds = Histogram::new(exponential_buckets(0.001, 4.0, 10));
        let nodes = Family::<StateLabel, Gauge>::default();
        registry.register("results", "Results committed, by outcome", results.clone());
        registry.register(
            "received_bytes",
            "Bytes of result files accepted",
            bytes_received.clone(),
        );
        registry.register(
            "rejections",
            "Requests refused, by reason",
            rejections.clone(),
        );
        registry.register(
            "upload_duration_seconds",
            "Time to receive one result file",
            upload_seconds.clone(),
        );
        registry.register("nodes", "Nodes by state", nodes.clone());
        Metrics {
            registry,
            results,
            bytes_received,
            rejections,
            upload_seconds,
            nodes,
        }
    }
}

impl Metrics {
    /// Counts one refusal for `reason`.
    pub(crate) fn reject(&self, reason: &str) {
        self.rejections
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Every metric in the Prometheus text format.
    pub(crate) fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String");
        text
    }
}

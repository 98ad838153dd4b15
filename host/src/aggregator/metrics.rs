//! Prometheus metrics of the aggregator, served on the operator listener at `/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    pub state: String,
}

pub struct Metrics {
    registry: Registry,
    pub results: Family<OutcomeLabel, Counter>,
    pub bytes_received: Counter,
    pub rejections: Family<ReasonLabel, Counter>,
    pub upload_seconds: Histogram,
    pub nodes: Family<StateLabel, Gauge>,
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
        registry.register("received_bytes", "Bytes of result files accepted", bytes_received.clone());
        registry.register("rejections", "Requests refused, by reason", rejections.clone());
        registry.register("upload_duration_seconds", "Time to receive one result file", upload_seconds.clone());
        registry.register("nodes", "Nodes by state", nodes.clone());
        Metrics { registry, results, bytes_received, rejections, upload_seconds, nodes }
    }
}

impl Metrics {
    pub fn reject(&self, reason: &str) {
        self.rejections.get_or_create(&ReasonLabel { reason: reason.to_owned() }).inc();
    }

    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String");
        text
    }
}

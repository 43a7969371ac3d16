//! Prometheus metrics, served at `/metrics` in the OpenMetrics text format.
//!
//! The request metrics are labelled only with the hook name and an outcome class:
//! never anything from a request body (names, passwords). The per-cluster metrics
//! ([`crate::cluster_metrics`]) carry the cluster's namespace and name, and values
//! from fixed sets. `docs/metrics.md` lists every metric.

use std::{
    sync::{Arc, atomic::AtomicI64},
    time::Duration,
};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram, info::Info},
    registry::Registry,
};

use crate::cluster_metrics::{Clock, ClusterMetrics};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub hook: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HookLabels {
    pub hook: &'static str,
}

/// Upper bounds of the request-duration buckets, in seconds: from 100 µs (a
/// customize call) past the default 8 s request timeout, so a slow sync and a
/// timed-out one land in buckets of their own.
pub const DURATION_BUCKETS: [f64; 17] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 8.0, 10.0];

/// The hook's metrics and the registries that render them.
pub struct Metrics {
    /// `mysql_hook_*`.
    pub registry: Registry,
    /// `process_*`: the names every client library uses, without our prefix.
    pub process: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub duration: Family<HookLabels, Histogram>,
    pub in_flight: Gauge<i64, AtomicI64>,
    /// What each sync and finalize said about each cluster.
    pub clusters: Arc<ClusterMetrics>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new(Arc::new(hooks::Timestamp::now), crate::cluster_metrics::DEFAULT_TTL)
    }
}

impl Metrics {
    /// `clock` dates the per-cluster reports and computes their ages; a cluster
    /// not heard of for `ttl` is forgotten.
    #[must_use]
    pub fn new(clock: Clock, ttl: Duration) -> Self {
        let mut registry = Registry::with_prefix("mysql_hook");
        registry.register(
            "build",
            "The running hook's version",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register("requests", "Hook requests by hook and outcome", requests.clone());
        let duration = Family::<HookLabels, Histogram>::new_with_constructor(|| Histogram::new(DURATION_BUCKETS));
        registry.register("request_duration_seconds", "Time to answer a hook request", duration.clone());
        let in_flight = Gauge::<i64, AtomicI64>::default();
        registry.register("in_flight_requests", "Hook requests being answered", in_flight.clone());
        let clusters = Arc::new(ClusterMetrics::new(clock, ttl));
        registry.register_collector(Box::new(clusters.clone()));
        let mut process = Registry::default();
        process.register_collector(Box::new(crate::process_metrics::ProcessMetrics));
        Self { registry, process, requests, duration, in_flight, clusters }
    }

    /// The text exposition.
    #[must_use]
    pub fn render(&self) -> String {
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode_registry(&mut out, &self.registry);
        let _ = encode_registry(&mut out, &self.process);
        let _ = encode_eof(&mut out);
        out
    }
}

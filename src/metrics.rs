//! Prometheus metrics, served at `/metrics` in the text format.
//!
//! Labels carry only the hook name and an outcome class: never anything from a
//! request body (names, passwords) and never unbounded values.

use std::sync::atomic::AtomicI64;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub hook: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HookLabels {
    pub hook: &'static str,
}

/// The hook's metrics and the registry that renders them.
pub struct Metrics {
    pub registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub duration: Family<HookLabels, Histogram>,
    pub in_flight: Gauge<i64, AtomicI64>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("mysql_hook");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register("requests", "Hook requests by hook and outcome", requests.clone());
        let duration = Family::<HookLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0])
        });
        registry.register("request_duration_seconds", "Time to answer a hook request", duration.clone());
        let in_flight = Gauge::<i64, AtomicI64>::default();
        registry.register("in_flight_requests", "Hook requests being answered", in_flight.clone());
        Self { registry, requests, duration, in_flight }
    }
}

impl Metrics {
    /// The text exposition.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

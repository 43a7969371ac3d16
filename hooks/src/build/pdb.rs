//! The PodDisruptionBudget `<name>`: voluntary evictions (node drains) take one
//! server at a time, so a drain never removes the primary and its only
//! acknowledging replica together. One is also allowed for a single-server cluster:
//! a budget of zero would block every node drain forever.

use k8s_openapi::{
    api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec},
    apimachinery::pkg::{apis::meta::v1::LabelSelector, util::intstr::IntOrString},
};

use super::meta;
use crate::{labels, model::Cluster};

#[must_use]
pub fn build(c: &Cluster) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: meta(&c.names.disruption_budget, labels::common(&c.names, labels::DATABASE)),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(labels::database_selector(&c.names)),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

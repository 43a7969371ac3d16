//! The NetworkPolicy `<name>`: who may connect to the cluster's servers.
//!
//! Port 3306 of the server pods, from: the cluster's own pods (replicas connect to
//! the primary, its Jobs to every server); the `MySQLBackup` Job pods of the
//! namespace (their labels name no cluster); and every pod of the namespaces in
//! `spec.network.clientNamespaces`, by default the cluster's own. Nothing else, on
//! any port. Effective where the network plugin enforces NetworkPolicy.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::networking::v1::{
        NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
    },
    apimachinery::pkg::{
        apis::meta::v1::{LabelSelector, LabelSelectorRequirement},
        util::intstr::IntOrString,
    },
};

use super::meta;
use crate::{api::NetworkSpec, labels, model::Cluster};

/// The label the API server puts on every namespace with its name.
const NAMESPACE_NAME: &str = "kubernetes.io/metadata.name";

#[must_use]
pub fn build(c: &Cluster, network: Option<&NetworkSpec>) -> NetworkPolicy {
    let pods = |match_labels: BTreeMap<String, String>| NetworkPolicyPeer {
        pod_selector: Some(LabelSelector { match_labels: Some(match_labels), ..Default::default() }),
        ..Default::default()
    };
    let mut from = vec![
        pods(labels::cluster_pods(&c.names)),
        pods(BTreeMap::from([
            (labels::COMPONENT.to_owned(), crate::mysqlbackup::COMPONENT.to_owned()),
            (labels::MANAGED_BY.to_owned(), labels::MANAGER.to_owned()),
        ])),
    ];
    let mut namespaces: Vec<String> =
        network.and_then(|n| n.client_namespaces.clone()).unwrap_or_else(|| vec![c.namespace.clone()]);
    namespaces.sort();
    namespaces.dedup();
    if !namespaces.is_empty() {
        from.push(NetworkPolicyPeer {
            namespace_selector: Some(LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: NAMESPACE_NAME.to_owned(),
                    operator: "In".to_owned(),
                    values: Some(namespaces),
                }]),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    NetworkPolicy {
        metadata: meta(&c.names.cluster, labels::common(&c.names, labels::DATABASE)),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(labels::database_selector(&c.names)),
                ..Default::default()
            }),
            policy_types: Some(vec!["Ingress".to_owned()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(from),
                ports: Some(vec![NetworkPolicyPort {
                    port: Some(IntOrString::Int(3306)),
                    protocol: Some("TCP".to_owned()),
                    ..Default::default()
                }]),
            }]),
            ..Default::default()
        }),
    }
}

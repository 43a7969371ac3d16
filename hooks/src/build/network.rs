//! The NetworkPolicy `<name>`: who may connect to the cluster's servers.
//!
//! Port 3306 of the server pods, from: the cluster's own pods (replicas connect to
//! the primary, its Jobs to every server); the `MySQLBackup` Job pods of the
//! namespace (their labels name no cluster); and every pod of the namespaces in
//! `spec.network.clientNamespaces`, by default the cluster's own. Nothing else, on any
//! other port, except the exporter sidecar's 9104 from `spec.network.metricsNamespaces`
//! (default `monitoring`) while it runs. Effective where the network plugin enforces
//! NetworkPolicy.

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
    let namespaces = network.and_then(|n| n.client_namespaces.clone()).unwrap_or_else(|| vec![c.namespace.clone()]);
    from.extend(in_namespaces(namespaces));
    let port = |n: i32| NetworkPolicyPort {
        port: Some(IntOrString::Int(n)),
        protocol: Some("TCP".to_owned()),
        ..Default::default()
    };
    let mut ingress = vec![NetworkPolicyIngressRule { from: Some(from), ports: Some(vec![port(3306)]) }];
    // The exporter's metrics, to the scrapers' namespaces only (issue 30.8: the
    // policy once closed the port the shipped PodMonitor scrapes).
    if c.exporter.is_some() {
        let scrapers = network
            .and_then(|n| n.metrics_namespaces.clone())
            .unwrap_or_else(|| vec![crate::api::DEFAULT_METRICS_NAMESPACE.to_owned()]);
        if let Some(peer) = in_namespaces(scrapers) {
            ingress.push(NetworkPolicyIngressRule {
                from: Some(vec![peer]),
                ports: Some(vec![port(crate::build::statefulset::EXPORTER_PORT)]),
            });
        }
    }
    NetworkPolicy {
        metadata: meta(&c.names.cluster, labels::common(&c.names, labels::DATABASE)),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(labels::database_selector(&c.names)),
                ..Default::default()
            }),
            policy_types: Some(vec!["Ingress".to_owned()]),
            ingress: Some(ingress),
            ..Default::default()
        }),
    }
}

/// Every pod of the named namespaces; `None` for no namespace.
fn in_namespaces(mut namespaces: Vec<String>) -> Option<NetworkPolicyPeer> {
    namespaces.sort();
    namespaces.dedup();
    (!namespaces.is_empty()).then(|| NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: NAMESPACE_NAME.to_owned(),
                operator: "In".to_owned(),
                values: Some(namespaces),
            }]),
            ..Default::default()
        }),
        ..Default::default()
    })
}

//! The per-cluster NetworkPolicy (issue 18.5).
//!
//! Every `MySQL` gets a NetworkPolicy `<name>` over its server pods: port 3306
//! only, from the cluster's own pods (servers replicating, its Jobs), the
//! `MySQLBackup` Job pods of the namespace, and the application namespaces the user
//! names in `spec.network.clientNamespaces` (default: the cluster's own namespace).
//! Nothing else reaches the servers, on any port, where the network plugin enforces
//! NetworkPolicy. The real API server accepts it (tests/k8s_conformance.rs, every
//! golden answer).

mod common;

use serde_json::{Value, json};

fn fixture(hook: &str, scenario: &str) -> Value {
    let path = format!("{}/test-fixtures/{hook}/{scenario}/request.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn answer(hook: &str, request: &Value) -> Value {
    let body = serde_json::to_vec(request).unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_slice(&common::call_core(hook, &body)).unwrap_or_else(|e| panic!("{e}"))
}

fn policy(answer: &Value) -> Value {
    answer["children"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["kind"] == "NetworkPolicy"))
        .cloned()
        .unwrap_or_else(|| panic!("no NetworkPolicy among the children"))
}

fn namespaces(policy: &Value) -> Vec<String> {
    policy["spec"]["ingress"][0]["from"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["namespaceSelector"]["matchExpressions"][0]["values"].as_array())
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

#[test]
fn every_cluster_admits_only_its_pods_and_the_named_namespaces() {
    let request = fixture("sync", "running");
    let p = policy(&answer("sync", &request));
    assert_eq!(p["apiVersion"], "networking.k8s.io/v1");
    assert_eq!(p["metadata"]["name"], "db");
    assert_eq!(
        p["spec"]["podSelector"]["matchLabels"],
        json!({"app.kubernetes.io/component": "database", "app.kubernetes.io/instance": "db",
               "app.kubernetes.io/managed-by": "mysql-hook"})
    );
    assert_eq!(p["spec"]["policyTypes"], json!(["Ingress"]));
    let ingress = p["spec"]["ingress"].as_array().cloned().unwrap_or_default();
    assert_eq!(ingress.len(), 1, "{}", p["spec"]);
    assert_eq!(ingress[0]["ports"], json!([{"port": 3306, "protocol": "TCP"}]));
    let from = ingress[0]["from"].as_array().cloned().unwrap_or_default();
    assert!(
        from.contains(&json!({"podSelector": {"matchLabels": {
        "app.kubernetes.io/instance": "db", "app.kubernetes.io/managed-by": "mysql-hook"}}})),
        "{from:?}"
    );
    assert!(
        from.contains(&json!({"podSelector": {"matchLabels": {
        "app.kubernetes.io/component": "backup", "app.kubernetes.io/managed-by": "mysql-hook"}}})),
        "{from:?}"
    );
    assert_eq!(namespaces(&p), ["shop"], "default: the cluster's own namespace");

    let mut named = request.clone();
    named["parent"]["spec"]["network"] = json!({"clientNamespaces": ["web", "api"]});
    assert_eq!(namespaces(&policy(&answer("sync", &named))), ["api", "web"]);
    let mut none = request;
    none["parent"]["spec"]["network"] = json!({"clientNamespaces": []});
    let p = policy(&answer("sync", &none));
    assert!(namespaces(&p).is_empty(), "{}", p["spec"]);
    assert_eq!(p["spec"]["ingress"][0]["from"].as_array().map(Vec::len), Some(2));
}

/// Issue 30.8: with the exporter sidecar, its port 9104 is open to the scrapers'
/// namespaces only (`monitoring` by default, where the shipped PodMonitor's
/// Prometheus runs), and 3306 stays as it was.
#[test]
fn the_exporter_port_is_open_to_the_scrapers_namespaces_only() {
    let request = fixture("sync", "monitoring-enabled");
    let p = policy(&answer("sync", &request));
    let ingress = p["spec"]["ingress"].as_array().cloned().unwrap_or_default();
    assert_eq!(ingress.len(), 2, "{}", p["spec"]);
    assert_eq!(ingress[0]["ports"], json!([{"port": 3306, "protocol": "TCP"}]));
    assert_eq!(ingress[1]["ports"], json!([{"port": 9104, "protocol": "TCP"}]));
    let scrapers = json!([{"namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["monitoring"]}]}}]);
    assert_eq!(ingress[1]["from"], scrapers);

    let mut named = request.clone();
    named["parent"]["spec"]["network"] = json!({"metricsNamespaces": ["prometheus", "ops"]});
    let p = policy(&answer("sync", &named));
    assert_eq!(
        p["spec"]["ingress"][1]["from"][0]["namespaceSelector"]["matchExpressions"][0]["values"],
        json!(["ops", "prometheus"])
    );
    let mut none = request;
    none["parent"]["spec"]["network"] = json!({"metricsNamespaces": []});
    let p = policy(&answer("sync", &none));
    assert_eq!(p["spec"]["ingress"].as_array().map(Vec::len), Some(1), "{}", p["spec"]);
    // Without the exporter nothing but 3306.
    let p = policy(&answer("sync", &fixture("sync", "running")));
    assert_eq!(p["spec"]["ingress"].as_array().map(Vec::len), Some(1));
}

#[test]
fn metacontroller_owns_and_updates_the_policy() {
    let root = env!("CARGO_MANIFEST_DIR");
    let cc = std::fs::read_to_string(format!("{root}/metacontroller/compositecontroller.yaml")).unwrap_or_default();
    assert!(
        cc.contains("- apiVersion: networking.k8s.io/v1\n      resource: networkpolicies\n      updateStrategy:\n        method: InPlace"),
        "the CompositeController must list networkpolicies, updated in place"
    );
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap_or_default();
    assert!(
        readme.contains("`networkpolicies.networking.k8s.io`"),
        "the README's RBAC table must list networkpolicies"
    );
}

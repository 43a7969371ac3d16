//! Replicas (issue 15), hook side: `spec.replication` reaches the servers without a
//! restart where it can, binary logs always expire, and `status.servers` reports
//! what the `inspect` Job found. Semantic checks over the golden scenarios
//! `replication-settings`, `binlog-expiry-twice` and `servers-*`.

mod common;

use serde_json::Value;

fn fixture(scenario: &str) -> Value {
    let path = format!("{}/test-fixtures/sync/{scenario}/request.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn sync(request: &Value) -> Value {
    let body = serde_json::to_vec(request).unwrap_or_default();
    serde_json::from_slice(&common::call_core("sync", &body)).unwrap_or_else(|e| panic!("{e}"))
}

fn child<'a>(response: &'a Value, kind: &str, name: &str) -> &'a Value {
    response["children"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["kind"] == kind && c["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn inspect_jobs(response: &Value) -> Vec<String> {
    response["children"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["kind"] == "Job" && c["metadata"]["labels"]["mysqlhook.dev/purpose"] == "inspect")
        .map(|c| c["metadata"]["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn lag_and_errant_rebuild_reach_the_servers_without_a_restart() {
    let mut request = fixture("replication-settings");
    // Without the expiry (an option-file setting), only the ConfigMap changes.
    request["parent"]["spec"]["replication"].as_object_mut().map(|r| r.remove("binlogExpireSeconds"));
    let changed = sync(&request);
    request["parent"]["spec"].as_object_mut().map(|s| s.remove("replication"));
    let before = sync(&request);
    let config = child(&changed, "ConfigMap", "db-config");
    assert_eq!(config["data"]["maxLagSeconds"], "30");
    assert_eq!(config["data"]["rebuildErrant"], "true");
    assert_eq!(child(&before, "ConfigMap", "db-config")["data"]["maxLagSeconds"], "60", "default 60 s");
    assert_eq!(
        child(&changed, "StatefulSet", "db")["spec"]["template"],
        child(&before, "StatefulSet", "db")["spec"]["template"],
        "maxLagSeconds and rebuildErrant change no pod template"
    );
    let env = child(&before, "StatefulSet", "db")["spec"]["template"]["spec"]["containers"][0]["env"].clone();
    for (name, value) in [
        ("MAX_LAG_FILE", "/etc/mysql-hook/maxLagSeconds"),
        ("REBUILD_ERRANT_FILE", "/etc/mysql-hook/rebuildErrant"),
        ("SEED_MARKER", "/tmp/mysql-hook-seeding"),
    ] {
        assert!(
            env.as_array().into_iter().flatten().any(|e| e["name"] == name && e["value"] == value),
            "{name}={value} in {env}"
        );
    }
}

#[test]
fn binary_logs_expire_by_default_and_as_asked() {
    let response = sync(&fixture("replication-settings"));
    let template = &child(&response, "StatefulSet", "db")["spec"]["template"]["spec"];
    let file = template["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|v| v["configMap"]["name"].as_str().filter(|n| n.starts_with("db-config-")))
        .unwrap_or_default();
    let cnf = child(&response, "ConfigMap", file)["data"]["my.cnf"].as_str().unwrap_or_default();
    assert!(cnf.contains("\nbinlog_expire_logs_seconds = 86400\n"), "{cnf}");
    let mut request = fixture("replication-settings");
    request["parent"]["spec"].as_object_mut().map(|s| s.remove("replication"));
    let default = sync(&request);
    let all: String =
        default["children"].as_array().into_iter().flatten().filter_map(|c| c["data"]["my.cnf"].as_str()).collect();
    assert!(all.contains("\nbinlog_expire_logs_seconds = 604800\n"), "7 days by default");
}

#[test]
fn expiry_set_twice_is_refused_and_the_running_file_kept() {
    let request = fixture("binlog-expiry-twice");
    let response = sync(&request);
    let accepted = response["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "SpecAccepted")
        .cloned()
        .unwrap_or_default();
    assert_eq!(accepted["status"], "False");
    assert_eq!(accepted["reason"], "ConfigRefused");
    assert!(accepted["message"].as_str().unwrap_or_default().contains("binlogExpireSeconds"), "{accepted}");
    assert_eq!(
        child(&response, "StatefulSet", "db")["spec"]["template"],
        request["children"]["StatefulSet.apps/v1"]["shop/db"]["spec"]["template"],
        "the running template (and option file) is kept"
    );
}

#[test]
fn servers_report_role_readiness_and_the_newest_inspection() {
    let response = sync(&fixture("servers-inspected"));
    let servers = response["status"]["servers"].as_array().cloned().unwrap_or_default();
    assert_eq!(servers.len(), 3);
    assert_eq!(servers[0]["role"], "primary");
    assert_eq!(servers[2]["lagSeconds"], 12);
    assert_eq!(servers[2]["ready"], true);
    assert_eq!(inspect_jobs(&response).len(), 1, "nothing changed: no new inspection");

    // db-2 turns not Ready: a new inspection, the finished one kept and still shown.
    let stopped = sync(&fixture("servers-replica-stopped"));
    assert_eq!(inspect_jobs(&stopped).len(), 2);
    assert_eq!(stopped["status"]["servers"][2]["ready"], false);
    assert_eq!(stopped["status"]["servers"][2]["lagSeconds"], 12, "what was known stays until the next inspection");

    // The new one has finished: it alone is kept, and it says why.
    let inspected = sync(&fixture("servers-replica-stopped-inspected"));
    assert_eq!(inspect_jobs(&inspected).len(), 1);
    let db2 = &inspected["status"]["servers"][2];
    assert_eq!(db2["replication"], "receiver Yes, applier No");
    assert!(db2["lastError"].as_str().unwrap_or_default().contains("Duplicate entry"), "{db2}");
    assert!(db2.get("lagSeconds").is_none());
    assert_eq!(db2["inspectedAt"], "2026-11-29T11:59:40Z");
}

#[test]
fn no_inspection_before_bootstrap() {
    let response = sync(&fixture("servers-inspected"));
    assert!(!inspect_jobs(&response).is_empty());
    let path = format!("{}/test-fixtures/sync/new-cluster/response.json", env!("CARGO_MANIFEST_DIR"));
    let new: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_default()).unwrap_or_default();
    assert!(inspect_jobs(&new).is_empty());
    assert_eq!(new["status"]["servers"][0]["name"], "db-0");
}

#[test]
fn values_the_crd_would_refuse_are_reported_not_applied() {
    let mut request = fixture("replication-settings");
    request["parent"]["spec"]["replication"] = serde_json::json!({"maxLagSeconds": -5, "binlogExpireSeconds": 10});
    let response = sync(&request);
    let message = response["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "SpecAccepted")
        .map(|c| c["message"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    assert!(message.contains("binlogExpireSeconds must be") && message.contains("maxLagSeconds must be"), "{message}");
    assert_eq!(child(&response, "ConfigMap", "db-config")["data"]["maxLagSeconds"], "60");
    assert_eq!(
        child(&response, "StatefulSet", "db")["spec"]["template"],
        request["children"]["StatefulSet.apps/v1"]["shop/db"]["spec"]["template"],
        "the running option file is kept"
    );
    // A wrong type is no spec at all: refused before anything is answered.
    request["parent"]["spec"]["replication"] = serde_json::json!({"maxLagSeconds": "ten"});
    let body = serde_json::to_vec(&request).unwrap_or_default();
    assert!(serde_json::from_slice::<hooks::metacontroller::SyncRequest>(&body).is_err());
}

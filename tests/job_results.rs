//! Job results come only from the Job's own pods (issue 18.7).
//!
//! The hook moves the primary, records backups and finishes restores on the
//! one-line result a Job's pod leaves in its termination message. Anyone who may
//! create a pod in the namespace can write the `job-name` label and a terminated
//! container's message; what they cannot make is the Job controller's controller
//! owner reference with the Job's uid. These tests forge results every way short of
//! that and check the hook ignores them.

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

/// Sets the owner references of the pods of Job `job` in `request`.
fn with_owners(request: &Value, job: &str, owners: Value) -> Value {
    let mut r = request.clone();
    let mut found = 0;
    for pod in r["related"]["Pod.v1"].as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
        if pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] == job {
            pod["metadata"]["ownerReferences"] = owners.clone();
            found += 1;
        }
    }
    assert!(found > 0, "no pod of Job {job} in the fixture");
    r
}

fn owner(job: &str, uid: &str, controller: bool) -> Value {
    json!([{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": uid,
            "controller": controller, "blockOwnerDeletion": true}])
}

/// Forged variants of a genuine owner reference: each must be ignored.
fn forgeries(job: &str, uid: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("no owner reference (the job-name label only)", Value::Null),
        ("owned by another Job", owner("db-failover-7", uid, true)),
        (
            "another uid (a Job of the same name, deleted and recreated)",
            owner(job, "99999999-0000-4000-8000-000000000000", true),
        ),
        ("not the controller", owner(job, uid, false)),
        (
            "owned by something else of that name",
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": job, "uid": uid, "controller": true}]),
        ),
    ]
}

#[test]
fn a_failover_result_counts_only_from_the_jobs_own_pod() {
    let request = fixture("sync", "failover-succeeded");
    let job = "db-failover-1";
    let uid = request["children"]["Job.batch/v1"][format!("shop/{job}")]["metadata"]["uid"]
        .as_str()
        .unwrap_or_else(|| panic!("no observed Job {job}"))
        .to_owned();
    assert_eq!(request["parent"]["status"]["primary"], "db-0");
    let genuine = answer("sync", &with_owners(&request, job, owner(job, &uid, true)));
    assert_eq!(genuine["status"]["primary"], "db-1", "the genuine result moves the primary");
    for (what, owners) in forgeries(job, &uid) {
        let got = answer("sync", &with_owners(&request, job, owners));
        assert_eq!(got["status"]["primary"], "db-0", "{what}: a forged result moved the primary");
    }
}

#[test]
fn a_backup_result_counts_only_from_the_jobs_own_pod() {
    // Jobs of the backup CronJob are not children: only their name is known.
    let request = fixture("sync", "backup-last-succeeded");
    let job = "db-backup-29932020";
    let genuine = answer("sync", &with_owners(&request, job, owner(job, "31000000-0000-4000-8000-000000000001", true)));
    assert_eq!(genuine["status"]["backup"]["last"]["name"], job, "{}", genuine["status"]);
    for (what, owners) in forgeries(job, "31000000-0000-4000-8000-000000000001") {
        if what.starts_with("another uid") {
            continue; // the CronJob's Job is not observed: its uid is unknown
        }
        let got = answer("sync", &with_owners(&request, job, owners));
        assert!(
            got["status"]["backup"]["last"]["name"] != job,
            "{what}: a forged backup result was recorded: {}",
            got["status"]["backup"]
        );
    }
}

#[test]
fn a_mysqlbackup_result_counts_only_from_the_jobs_own_pod() {
    // The MySQLBackup's status records size, source and GTID position from the result.
    let request = fixture("backup-sync", "succeeded");
    let (job, uid) = request["children"]["Job.batch/v1"]
        .as_object()
        .and_then(|m| m.values().next())
        .map(|j| {
            (
                j["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
                j["metadata"]["uid"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .unwrap_or_else(|| panic!("no observed Job"));
    let genuine = answer("backup-sync", &with_owners(&request, &job, owner(&job, &uid, true)));
    assert!(genuine["status"]["bytes"].is_i64(), "{}", genuine["status"]);
    for (what, owners) in forgeries(&job, &uid) {
        let got = answer("backup-sync", &with_owners(&request, &job, owners));
        assert!(
            got["status"]["bytes"].is_null() && got["status"]["gtid"].is_null(),
            "{what}: a forged result was recorded: {}",
            got["status"]
        );
    }
}

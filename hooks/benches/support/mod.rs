//! Bench inputs, built from the golden fixtures by adding objects programmatically,
//! so every bench request is a realistic Metacontroller v2 body:
//!
//! - `replicas` server pods, copied from a Ready replica of the 3-replica
//!   `test-fixtures/sync/running` scenario with names, ordinals and IPs changed;
//! - `job_pods` finished Job pods (three attempts per Job, each with a termination
//!   message) and their Job children, as backups and failovers leave behind.

#![allow(dead_code)]

pub mod cpu;

/// The allocator the server ships with (`src/main.rs`), so path, floor and core
/// are measured as they run in production.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::path::PathBuf;

use hooks::{Context, Timestamp};
use serde_json::{Value, json};

/// The instant the golden tests answer at.
pub const NOW: &str = "2026-11-29T12:00:00Z";

/// How many pods of each Job are kept (`backoffLimit` retries leave several).
pub const PODS_PER_JOB: usize = 3;

pub fn ctx() -> Context {
    Context {
        now: NOW.parse::<Timestamp>().unwrap_or_else(|e| panic!("{e}")),
        entropy: hooks::credentials::fold_seed(b"mysql-hook test fixtures"),
        scripts_image: "ghcr.io/mysql-hook/mysql-hook:0.1.0".to_owned(),
        allowed_images: Vec::new(),
        placement_policy: Default::default(),
    }
}

fn fixture(path: &str) -> Value {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../test-fixtures").join(path);
    let text = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

fn object_mut<'a>(v: &'a mut Value, what: &str) -> &'a mut serde_json::Map<String, Value> {
    v.as_object_mut().unwrap_or_else(|| panic!("{what} is not an object"))
}

/// A sync request of the running 3-replica fixture, resized to `replicas` Ready
/// servers plus `job_pods` Job pods. `finalizing` turns it into a finalize call of
/// the same cluster (deletion requested, volumes retained).
#[must_use]
pub fn sync_request(replicas: usize, job_pods: usize, finalizing: bool) -> Vec<u8> {
    let mut request = fixture("sync/running/request.json");
    let n = i64::try_from(replicas).unwrap_or(i64::MAX);
    request["parent"]["spec"]["replicas"] = json!(n);
    request["parent"]["status"]["replicas"] = json!(n);
    request["parent"]["status"]["readyReplicas"] = json!(n);
    if finalizing {
        request["finalizing"] = json!(true);
        request["parent"]["metadata"]["deletionTimestamp"] = json!("2026-11-29T11:59:50Z");
    }

    // The observed StatefulSet has as many replicas.
    for sts in object_mut(&mut request["children"]["StatefulSet.apps/v1"], "StatefulSets").values_mut() {
        sts["spec"]["replicas"] = json!(n);
        for field in ["replicas", "readyReplicas", "availableReplicas", "currentReplicas", "updatedReplicas"] {
            if sts["status"].get(field).is_some() {
                sts["status"][field] = json!(n);
            }
        }
    }

    // Server pods db-0 .. db-(replicas-1), from the Ready replica db-1.
    let pods = object_mut(&mut request["related"]["Pod.v1"], "related pods");
    let template = pods.get("shop/db-1").cloned().unwrap_or_else(|| panic!("the fixture has no shop/db-1"));
    pods.retain(|_, p| p["metadata"]["labels"]["app.kubernetes.io/component"] != "database");
    for i in 0..replicas {
        let mut pod = template.clone();
        let name = format!("db-{i}");
        pod["metadata"]["name"] = json!(name);
        pod["metadata"]["uid"] = json!(format!("10000000-0000-4000-8000-{i:012}"));
        pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] = json!(name);
        pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] = json!(i.to_string());
        pod["spec"]["nodeName"] = json!(format!("node-{i}"));
        pod["status"]["podIP"] = json!(format!("10.244.{i}.7"));
        pods.insert(format!("shop/{name}"), pod);
    }

    // Finished Jobs and their pods.
    let jobs = object_mut(&mut request["children"]["Job.batch/v1"], "Jobs");
    let job_template = jobs.values().next().cloned().unwrap_or_else(|| panic!("the fixture has no Job"));
    for j in 0..job_pods.div_ceil(PODS_PER_JOB) {
        let job_name = format!("db-backup-{j:05}");
        let mut job = job_template.clone();
        job["metadata"]["name"] = json!(job_name);
        job["metadata"]["uid"] = json!(format!("30000000-0000-4000-8000-{j:012}"));
        job["metadata"]["labels"]["mysqlhook.dev/purpose"] = json!("backup");
        jobs.insert(format!("shop/{job_name}"), job);
    }
    let pods = object_mut(&mut request["related"]["Pod.v1"], "related pods");
    for p in 0..job_pods {
        let job_name = format!("db-backup-{:05}", p / PODS_PER_JOB);
        let name = format!("{job_name}-{:05}", p % PODS_PER_JOB);
        let (exit_code, message) = if p % PODS_PER_JOB == PODS_PER_JOB - 1 {
            (0, json!({"result": "backed-up", "location": format!("s3://backups/{job_name}"), "bytes": 1_048_576, "source": "db-1", "gtid": "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"}).to_string())
        } else {
            (1, json!({"result": "error", "reason": "Unreachable", "message": "db-1 did not answer"}).to_string())
        };
        pods.insert(
            format!("shop/{name}"),
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": "shop",
                    "uid": format!("20000000-0000-4000-8000-{p:012}"),
                    "resourceVersion": "50000",
                    "creationTimestamp": "2026-11-29T11:30:00Z",
                    "labels": {
                        "app.kubernetes.io/name": "mysql",
                        "app.kubernetes.io/instance": "db",
                        "app.kubernetes.io/managed-by": "mysql-hook",
                        "app.kubernetes.io/component": "job",
                        "mysqlhook.dev/purpose": "backup",
                        "batch.kubernetes.io/job-name": job_name,
                        "job-name": job_name,
                    },
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": "30000000-0000-4000-8000-000000000000", "controller": true, "blockOwnerDeletion": true}],
                },
                "spec": {"containers": [{"name": "backup", "image": "mysql:8.4.3"}], "restartPolicy": "Never", "nodeName": "node-0"},
                "status": {
                    "phase": if exit_code == 0 { "Succeeded" } else { "Failed" },
                    "podIP": format!("10.244.9.{}", p % 250),
                    "containerStatuses": [{
                        "name": "backup",
                        "image": "mysql:8.4.3",
                        "imageID": "",
                        "ready": false,
                        "restartCount": 0,
                        "state": {"terminated": {"exitCode": exit_code, "reason": "Completed", "message": message, "startedAt": "2026-11-29T11:30:01Z", "finishedAt": format!("2026-11-29T11:{:02}:00Z", 31 + p % PODS_PER_JOB)}},
                    }],
                },
            }),
        );
    }
    serde_json::to_vec(&request).unwrap_or_else(|e| panic!("{e}"))
}

/// The customize call of the same cluster.
#[must_use]
pub fn customize_request(replicas: usize) -> Vec<u8> {
    let mut request = fixture("customize/cluster/request.json");
    request["parent"]["spec"]["replicas"] = json!(i64::try_from(replicas).unwrap_or(i64::MAX));
    serde_json::to_vec(&request).unwrap_or_else(|e| panic!("{e}"))
}

/// The request path of the HTTP shell minus HTTP: decode, run the core, encode.
pub fn sync_path(body: &[u8], ctx: &Context) -> Vec<u8> {
    let request = serde_json::from_slice(body).unwrap_or_else(|e| panic!("{e}"));
    let response = hooks::sync(&request, ctx).unwrap_or_else(|e| panic!("{e}"));
    serde_json::to_vec(&response).unwrap_or_else(|e| panic!("{e}"))
}

pub fn finalize_path(body: &[u8], ctx: &Context) -> Vec<u8> {
    let request = serde_json::from_slice(body).unwrap_or_else(|e| panic!("{e}"));
    let response = hooks::finalize(&request, ctx).unwrap_or_else(|e| panic!("{e}"));
    serde_json::to_vec(&response).unwrap_or_else(|e| panic!("{e}"))
}

/// The floor: decode the request, encode the (precomputed) response, nothing else.
pub fn floor<Req: serde::de::DeserializeOwned, Resp: serde::Serialize>(body: &[u8], response: &Resp) -> Vec<u8> {
    let request: Req = serde_json::from_slice(body).unwrap_or_else(|e| panic!("{e}"));
    std::hint::black_box(&request);
    serde_json::to_vec(response).unwrap_or_else(|e| panic!("{e}"))
}

pub fn customize_path(body: &[u8]) -> Vec<u8> {
    let request = serde_json::from_slice(body).unwrap_or_else(|e| panic!("{e}"));
    let response = hooks::customize(&request).unwrap_or_else(|e| panic!("{e}"));
    serde_json::to_vec(&response).unwrap_or_else(|e| panic!("{e}"))
}

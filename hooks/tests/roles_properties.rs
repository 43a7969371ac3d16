//! Property tests of role changes over generated observed states: random pod
//! readiness and transition times, Job states and results, previous status and
//! switchover requests. Whatever comes in:
//! - the `-primary` Service selects exactly one pod, the recorded primary, a member;
//! - the replicas' EndpointSlices list only Ready pods, never the primary;
//! - at most one role-change Job is emitted, and a running one is never replaced or
//!   dropped (one the status does not record is adopted, not doubled);
//! - no Job is created with failover disabled and nothing requested;
//! - `status.primary` changes only after a succeeded Job that named a member, with
//!   or without a status that records it (the Job is the ground truth);
//! - a rollout never releases (lowers the partition past) the primary's pod while it
//!   is still on the old revision, unless it is the only server;
//! - the same input gives the same bytes, and feeding the status back settles
//!   (no status that changes on every call).

use hooks::{Context, Timestamp, metacontroller::SyncRequest};
use proptest::prelude::*;
use serde_json::{Value, json};

const NOW: i64 = 1_795_953_600; // 2026-11-29T12:00:00Z

fn at(offset: i64) -> String {
    Timestamp::from_second(NOW + offset).unwrap_or_else(|e| panic!("{e}")).strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[derive(Debug, Clone)]
struct PodState {
    ready: bool,
    /// The mysqld container runs (a failover can reach the server).
    running: bool,
    /// Seconds before now of the Ready condition's last transition; `None`: no condition.
    since: Option<i64>,
    terminating: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum JobSeen {
    Absent,
    Running,
    Succeeded,
    Failed,
}

#[derive(Debug, Clone)]
enum JobResult {
    None,
    Promoted(i32),
    Garbage,
    Error,
}

#[derive(Debug, Clone)]
struct Scenario {
    replicas: i32,
    primary: i32,
    pods: Vec<Option<PodState>>,
    enabled: bool,
    grace: i32,
    initialized: bool,
    /// (is switchover, target ordinal)
    operation: Option<(bool, i32)>,
    job: JobSeen,
    result: JobResult,
    /// (recorded not-ready offset, failed attempts, next attempt offset)
    outage: Option<(Option<i64>, i32, Option<i64>)>,
    annotation: Option<i32>,
    /// A handled request for this ordinal.
    handled: Option<i32>,
    operations_started: i32,
    /// An observed StatefulSet: (partition, update revision is new), per pod
    /// whether it runs the new revision, and whether its template is the one the
    /// hook wants (else the spec changed: a new template).
    sts: Option<(i32, bool, Vec<bool>, bool)>,
}

fn pod_state() -> impl Strategy<Value = Option<PodState>> {
    prop::option::weighted(
        0.85,
        (any::<bool>(), prop::option::weighted(0.9, 0_i64..120), prop::bool::weighted(0.1), prop::bool::weighted(0.7))
            .prop_map(|(ready, since, terminating, running)| PodState {
                ready,
                running: running || ready,
                since,
                terminating,
            }),
    )
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let job =
        prop_oneof![Just(JobSeen::Absent), Just(JobSeen::Running), Just(JobSeen::Succeeded), Just(JobSeen::Failed)];
    let result = prop_oneof![
        Just(JobResult::None),
        (0_i32..6).prop_map(JobResult::Promoted),
        Just(JobResult::Garbage),
        Just(JobResult::Error)
    ];
    let outage = prop::option::of((prop::option::of(0_i64..60), 0_i32..4, prop::option::of(-30_i64..30)));
    let history = (job, result, outage, prop::option::of(0_i32..6), prop::option::of(0_i32..6), 0_i32..5);
    let sts = (0_i32..6, any::<bool>(), prop::collection::vec(any::<bool>(), 5), prop::bool::weighted(0.8));
    (1_i32..=4)
        .prop_flat_map(move |replicas| {
            (
                (
                    Just(replicas),
                    0..replicas,
                    prop::collection::vec(pod_state(), replicas as usize),
                    prop::bool::weighted(0.8),
                    1_i32..30,
                    prop::bool::weighted(0.9),
                    prop::option::of((any::<bool>(), 0_i32..6)),
                ),
                history.clone(),
                prop::option::of(sts.clone()),
            )
        })
        .prop_map(
            |(
                (replicas, primary, pods, enabled, grace, initialized, operation),
                (job, result, outage, annotation, handled, operations_started),
                sts,
            )| Scenario {
                replicas,
                primary,
                pods,
                enabled,
                grace,
                initialized,
                operation,
                job,
                result,
                outage,
                annotation,
                handled,
                operations_started,
                sts,
            },
        )
}

fn labels(extra: &[(&str, &str)]) -> Value {
    let mut l = json!({
        "app.kubernetes.io/name": "mysql", "app.kubernetes.io/instance": "db",
        "app.kubernetes.io/managed-by": "mysql-hook",
    });
    for (k, v) in extra {
        l[*k] = json!(v);
    }
    l
}

fn request(s: &Scenario) -> Value {
    let job_name = format!("db-{}-{}", if s.operation.is_some_and(|o| o.0) { "switchover" } else { "failover" }, 7);
    let mut status = json!({
        "phase": "Running",
        "primary": format!("db-{}", s.primary),
        "replicas": s.replicas,
        "readyReplicas": 0,
        "operationsStarted": s.operations_started,
        "conditions": [{
            "type": "Initialized", "status": if s.initialized { "True" } else { "False" },
            "reason": "x", "message": "x", "lastTransitionTime": at(-3600),
        }],
    });
    if let Some((switchover, target)) = s.operation {
        let mut op = json!({
            "kind": if switchover { "Switchover" } else { "Failover" },
            "job": job_name, "from": format!("db-{}", s.primary), "startedAt": at(-30),
            "reason": if switchover { "Requested" } else { "PrimaryNotReady" },
        });
        if switchover {
            op["target"] = json!(format!("db-{target}"));
        }
        status["operation"] = op;
    }
    if let Some((since, attempts, next)) = s.outage {
        let mut f = json!({"failedAttempts": attempts});
        if let Some(since) = since {
            f["primaryNotReadySince"] = json!(at(-since));
        }
        if let Some(next) = next {
            f["nextAttemptTime"] = json!(at(next));
        }
        status["failover"] = f;
    }
    if let Some(t) = s.handled {
        status["switchover"] =
            json!({"target": format!("db-{t}"), "result": "Succeeded", "reason": "Switched", "message": "x"});
    }
    let mut metadata = json!({
        "name": "db", "namespace": "shop", "uid": "6f1c2a8e-3d4b-4e5f-9a01-2b3c4d5e6f70", "generation": 1,
    });
    if let Some(t) = s.annotation {
        metadata["annotations"] = json!({"mysqlhook.dev/switchover-to": format!("db-{t}")});
    }
    let parent = json!({
        "apiVersion": "mysqlhook.dev/v1alpha1", "kind": "MySQL", "metadata": metadata,
        "spec": {
            "replicas": s.replicas, "version": "8.4.3", "storage": {"size": "10Gi"},
            "failover": {"enabled": s.enabled, "gracePeriodSeconds": s.grace},
        },
        "status": status,
    });
    let mut pods = serde_json::Map::new();
    for (i, p) in s.pods.iter().enumerate() {
        let Some(p) = p else { continue };
        let name = format!("db-{i}");
        let mut conditions = vec![];
        if let Some(since) = p.since {
            conditions.push(json!({"type": "Ready", "status": if p.ready { "True" } else { "False" }, "lastTransitionTime": at(-since)}));
        }
        let revision = if s.sts.as_ref().is_some_and(|(_, _, on_new, _)| on_new[i]) { "db-new" } else { "db-old" };
        let mut meta = json!({
            "name": name, "namespace": "shop",
            "labels": labels(&[("app.kubernetes.io/component", "database"), ("statefulset.kubernetes.io/pod-name", &name),
                               ("controller-revision-hash", revision)]),
        });
        if p.terminating {
            meta["deletionTimestamp"] = json!(at(-1));
        }
        pods.insert(
            format!("shop/{name}"),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                   "spec": {"containers": [{"name": "mysqld"}]},
                   "status": {"podIP": format!("10.0.0.{i}"), "conditions": conditions,
                              "containerStatuses": [{"name": "mysqld", "ready": p.ready, "restartCount": 0, "image": "", "imageID": "",
                                                     "state": if p.running { json!({"running": {}}) } else { json!({"waiting": {"reason": "CrashLoopBackOff"}}) }}]}}),
        );
    }
    let mut jobs = serde_json::Map::new();
    if s.job != JobSeen::Absent {
        let purpose = if s.operation.is_some_and(|o| o.0) { "switchover" } else { "failover" };
        let job_status = match s.job {
            JobSeen::Running => json!({"active": 1}),
            JobSeen::Succeeded => json!({"succeeded": 1, "completionTime": at(-5),
                "conditions": [{"type": "Complete", "status": "True"}]}),
            _ => json!({"failed": 4, "conditions": [{"type": "Failed", "status": "True"}]}),
        };
        jobs.insert(
            format!("shop/{job_name}"),
            json!({"apiVersion": "batch/v1", "kind": "Job",
                   "metadata": {"name": job_name, "namespace": "shop",
                                "labels": labels(&[("app.kubernetes.io/component", "job"), ("mysqlhook.dev/purpose", purpose)])},
                   "spec": {"template": {"spec": {"containers": []}}},
                   "status": job_status}),
        );
        let (message, code) = match &s.result {
            JobResult::None => (None, 0),
            JobResult::Promoted(o) => (Some(format!(r#"{{"result":"promoted","primary":"db-{o}"}}"#)), 0),
            JobResult::Garbage => (Some("not json".to_owned()), 0),
            JobResult::Error => (Some(r#"{"result":"error","reason":"x","message":"y"}"#.to_owned()), 1),
        };
        if let Some(message) = message {
            let code = if s.job == JobSeen::Failed { code.max(1) } else { code };
            pods.insert(
                format!("shop/{job_name}-abcde"),
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": format!("{job_name}-abcde"), "namespace": "shop",
                                    "labels": labels(&[("app.kubernetes.io/component", "job"), ("mysqlhook.dev/purpose", purpose),
                                                       ("batch.kubernetes.io/job-name", &job_name)]),
                                    // as the Job controller sets it: results count only from the Job's own pods
                                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job_name,
                                                         "uid": "prop", "controller": true}]},
                       "spec": {"containers": [{"name": purpose}]},
                       "status": {"phase": if code == 0 { "Succeeded" } else { "Failed" },
                                  "containerStatuses": [{"name": purpose, "ready": false, "restartCount": 0, "image": "", "imageID": "",
                                                         "state": {"terminated": {"exitCode": code, "message": message, "finishedAt": at(-5)}}}]}}),
            );
        }
    }
    let mut stateful_sets = serde_json::Map::new();
    if let Some((partition, new_revision, _, same_template)) = &s.sts {
        // The hook's own template (as it would build it for this spec), or another.
        let template = if *same_template {
            desired_template(s)
        } else {
            json!({"spec": {"containers": [{"name": "mysqld", "image": "mysql:8.4.3"}]}})
        };
        stateful_sets.insert(
            "shop/db".to_owned(),
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "shop"},
                   "spec": {"selector": {}, "serviceName": "db-headless",
                            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}},
                            "template": template},
                   "status": {"replicas": s.replicas, "currentRevision": "db-old",
                              "updateRevision": if *new_revision { "db-new" } else { "db-old" }}}),
        );
    }
    json!({
        "parent": parent,
        "children": {"Job.batch/v1": jobs, "StatefulSet.apps/v1": stateful_sets},
        "related": {"Pod.v1": pods},
    })
}

/// The pod template the hook builds for this scenario's spec.
fn desired_template(s: &Scenario) -> Value {
    let mut bare = s.clone();
    bare.sts = None;
    let out = run(&request(&bare));
    out["children"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["kind"] == "StatefulSet")
        .map(|sts| sts["spec"]["template"].clone())
        .unwrap_or_default()
}

fn ctx() -> Context {
    Context {
        now: Timestamp::from_second(NOW).unwrap_or_else(|e| panic!("{e}")),
        entropy: hooks::credentials::fold_seed(b"properties"),
        scripts_image: "mysql-hook:test".to_owned(),
        allowed_images: Vec::new(),
        placement_policy: Default::default(),
    }
}

fn run(body: &Value) -> Value {
    let req: SyncRequest = serde_json::from_value(body.clone()).unwrap_or_else(|e| panic!("{e}"));
    let out = hooks::sync(&req, &ctx()).unwrap_or_else(|e| panic!("{e}"));
    serde_json::to_value(out).unwrap_or_else(|e| panic!("{e}"))
}

/// The role-change Jobs this answer owns: every one but the observed Jobs it only
/// keeps as they are, so that they are not deleted (`Roles::kept`).
fn role_jobs<'a>(out: &'a Value, body: &Value) -> Vec<&'a Value> {
    let observed = observed_job_names(body);
    let current = out["status"]["operation"]["job"].as_str();
    out["children"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["kind"] == "Job")
        .filter(|c| {
            matches!(c["metadata"]["labels"]["mysqlhook.dev/purpose"].as_str(), Some("failover" | "switchover"))
        })
        .filter(|c| {
            let name = c["metadata"]["name"].as_str();
            name == current || !name.is_some_and(|n| observed.contains(&n))
        })
        .collect()
}

fn observed_job_names(body: &Value) -> Vec<&str> {
    body["children"]["Job.batch/v1"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, j)| j["metadata"]["name"].as_str())
        .collect()
}

fn check(s: &Scenario) -> Result<(), TestCaseError> {
    let body = request(s);
    let out = run(&body);
    let bytes = serde_json::to_vec(&out).unwrap_or_default();
    prop_assert_eq!(&bytes, &serde_json::to_vec(&run(&body)).unwrap_or_default(), "not deterministic");

    // The primary Service selects exactly the recorded primary, a member.
    let primary = out["status"]["primary"].as_str().unwrap_or_default().to_owned();
    let ordinal: i32 = primary.strip_prefix("db-").and_then(|o| o.parse().ok()).unwrap_or(-1);
    prop_assert!((0..s.replicas).contains(&ordinal), "primary {} is not a member", primary);
    let children = out["children"].as_array().cloned().unwrap_or_default();
    let services: Vec<_> =
        children.iter().filter(|c| c["kind"] == "Service" && c["metadata"]["name"] == "db-primary").collect();
    prop_assert_eq!(services.len(), 1);
    prop_assert_eq!(
        services[0]["spec"]["selector"]["statefulset.kubernetes.io/pod-name"].as_str(),
        Some(primary.as_str())
    );
    let config = children.iter().find(|c| c["kind"] == "ConfigMap").map(|c| c["data"]["primary"].clone());
    prop_assert_eq!(config, Some(json!(primary)));

    // Replicas' endpoints: Ready non-primary members only.
    for slice in children.iter().filter(|c| c["kind"] == "EndpointSlice") {
        for e in slice["endpoints"].as_array().into_iter().flatten() {
            let name = e["targetRef"]["name"].as_str().unwrap_or_default();
            prop_assert_ne!(name, primary.as_str(), "the replicas' endpoints route to the primary");
            let o: usize = name.strip_prefix("db-").and_then(|o| o.parse().ok()).unwrap_or(usize::MAX);
            prop_assert!(
                s.pods.get(o).cloned().flatten().is_some_and(|p| p.ready && !p.terminating),
                "{} is not Ready",
                name
            );
        }
    }

    // One role-change Job at most; a running one is kept, not replaced.
    // An observed role-change Job that still runs is never dropped (which would
    // delete it in the middle of a promotion).
    // A Job still marked active whose pod has already ended with exit status 0 has
    // ended (one completion): the hook may act on its result before the Job
    // controller marks it Complete (issue 35.1).
    let pod_succeeded = matches!(s.result, JobResult::Promoted(_) | JobResult::Garbage);
    let still_running = s.job == JobSeen::Running && !pod_succeeded;
    for (_, job) in body["children"]["Job.batch/v1"].as_object().into_iter().flatten() {
        if job["status"]["active"] == 1 && !pod_succeeded {
            let name = &job["metadata"]["name"];
            prop_assert!(
                out["children"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["kind"] == "Job" && &c["metadata"]["name"] == name),
                "the running Job {} was dropped",
                name
            );
        }
    }
    let jobs = role_jobs(&out, &body);
    prop_assert!(jobs.len() <= 1, "{} role-change Jobs", jobs.len());
    let previous_op = &body["parent"]["status"]["operation"];
    if previous_op.is_object() && (s.job == JobSeen::Absent || still_running) {
        prop_assert_eq!(jobs.len(), 1);
        prop_assert_eq!(&jobs[0]["metadata"]["name"], &previous_op["job"]);
        prop_assert_eq!(&out["status"]["operation"], previous_op);
    }
    let created: Vec<_> = jobs
        .iter()
        .filter(|j| !j["metadata"]["name"].as_str().is_some_and(|n| observed_job_names(&body).contains(&n)))
        .collect();
    if !s.enabled && s.annotation.is_none() && !previous_op.is_object() {
        // Only a rollout or a primary being deleted may still hand the primary role over.
        let reason = &out["status"]["operation"]["reason"];
        prop_assert!(
            created.is_empty() || reason == "Rollout" || reason == "PrimaryTerminating",
            "a role change ({}) started with failover disabled and no request",
            reason
        );
    }
    if still_running {
        prop_assert!(created.is_empty(), "a Job was created next to the running {}", jobs.len());
    }
    if let Some(op) = out["status"]["operation"].as_object() {
        prop_assert_eq!(jobs.len(), 1);
        prop_assert_eq!(&jobs[0]["metadata"]["name"], &op["job"]);
    }

    // The primary moves only after a succeeded Job that named a member.
    let before = format!("db-{}", s.primary);
    if primary != before {
        prop_assert!(
            s.job == JobSeen::Succeeded || (s.job == JobSeen::Running && pod_succeeded),
            "the primary moved with the Job {:?}",
            s.job
        );
        match s.result {
            JobResult::Promoted(o) => {
                prop_assert_eq!(primary.clone(), format!("db-{o}"));
                prop_assert!(o < s.replicas);
            }
            _ => prop_assert!(false, "primary moved to {} without a result naming it", primary),
        }
    }

    // A rollout never newly releases the primary's pod while it is on the old revision,
    // and a new template is never emitted with a partition below `replicas`.
    if let Some((observed_partition, new_revision, on_new, same_template)) = &s.sts
        && s.initialized
    {
        let sts = children.iter().find(|c| c["kind"] == "StatefulSet").cloned().unwrap_or_default();
        let partition = sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"].as_i64().unwrap_or(-1);
        if !same_template {
            prop_assert_eq!(partition, i64::from(s.replicas), "a new template with a partition below replicas");
        }
        let observed_partition = i64::from((*observed_partition).clamp(0, s.replicas));
        for o in partition..observed_partition {
            let idx = usize::try_from(o).unwrap_or(0);
            let already = on_new[idx] == *new_revision; // the pod is on the update revision
            prop_assert!(
                // (the recorded primary may be released once a Job has moved the role away)
                s.replicas == 1
                    || already
                    || (format!("db-{o}") != primary && (o != i64::from(s.primary) || primary != before)),
                "partition {} releases the primary db-{} (observed partition {})",
                partition,
                o,
                observed_partition
            );
        }
    }

    // Fed back, the status settles: no field changes on every call.
    let mut body = body;
    let mut last = out;
    let mut settled = false;
    for _ in 0..5 {
        body["parent"]["status"] = last["status"].clone();
        let next = run(&body);
        prop_assert!(role_jobs(&next, &body).len() <= 1);
        if next["status"] == last["status"] {
            settled = true;
            break;
        }
        last = next;
    }
    prop_assert!(settled, "status never settles: {}", last["status"]);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn role_changes_are_safe(s in scenario()) {
        check(&s)?;
    }
}

//! Volume growth (issue 17.5): a bigger `spec.storage.size` grows the claims of
//! the servers that exist.
//!
//! The StatefulSet's volume claim template is immutable, so it keeps the size it
//! was created with, and the claims are never children (an omitted child is
//! deleted: a claim holds data). They are related objects ([`crate::customize`]).
//! What grows them is a Job in the hook's own image, `mysql-hook grow-claims`,
//! which raises `spec.resources.requests.storage` of each claim still smaller
//! than the target; the StorageClass's expansion (its `allowVolumeExpansion`, the
//! CSI driver, the kubelet for the file system) does the rest. That Job's pod is
//! the only pod of ours that talks to the Kubernetes API: it runs as the
//! ServiceAccount `<name>-grow`, bound by the RoleBinding `<name>-grow` to the
//! Role `<name>-grow`, which allows `get` and `patch` on exactly the claims
//! `data-<statefulset>-<ordinal>` of the servers that exist, and nothing else.
//!
//! The steps, one sync each, so that every object exists before it is needed:
//! 1. a claim's request is below the target: emit the ServiceAccount, Role and
//!    RoleBinding;
//! 2. once all three are observed: emit the Job as well;
//! 3. the Job has ended: the ServiceAccount, Role and RoleBinding go (omitted
//!    children are deleted); the Job stays as the record of what happened (its
//!    refusal, for a StorageClass that does not allow expansion);
//! 4. every claim's `status.capacity` reaches the target: the Job goes too.
//!
//! So no permission stands once the requests are raised or refused. The Job's name
//! is derived from the target and the claims, so a new size or a scale-up (whose
//! new claim is created from the template at the old size) runs it again. Growth
//! only raises requests: it never deletes or recreates a claim and restarts no pod.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        batch::v1::{Job, JobSpec},
        core::v1::{Container, PersistentVolumeClaim, PodSpec, PodTemplateSpec, ServiceAccount},
        rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
    },
    apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::ObjectMeta},
};

use crate::{
    build::{meta, pod},
    jobs, labels,
    metacontroller::{ByKey, Child, Children},
    model::{Cluster, DATA_VOLUME},
    names::short_hash,
    observed::{JobState, Observed},
    quantity,
    roles::Verdict,
};

/// The condition that follows a growth of `spec.storage.size`.
pub const VOLUMES_GROWN: &str = "VolumesGrown";
/// The Job purpose (`<name>-grow-<hash>`) and the suffix of the ServiceAccount,
/// Role and RoleBinding (`<name>-grow`).
pub const PURPOSE: &str = "grow";
/// The subcommand of the hook's binary that raises the claims' requests.
pub const SUBCOMMAND: &str = "grow-claims";
/// The claim condition a volume has while the kubelet still has to grow its file
/// system.
pub const FILE_SYSTEM_RESIZE_PENDING: &str = "FileSystemResizePending";

/// The volume growth part of one sync's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grow {
    /// ServiceAccount, Role, RoleBinding and Job, as far as the step needs them.
    pub children: Vec<Child>,
    /// `VolumesGrown`, when `spec.storage.size` is above the template's size.
    pub verdict: Option<Verdict>,
    /// Look again soon: the RBAC objects or the Job are on their way.
    pub busy: bool,
}

/// Where one claim stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Progress {
    /// Not created yet (its server does not exist yet).
    Missing,
    /// Its request is below the target: the Job must patch it.
    Smaller { capacity: String },
    /// Its request is the target; the volume or its file system is growing.
    Resizing { capacity: String, file_system: bool },
    /// `status.capacity` has reached the target.
    Grown { capacity: String },
}

/// The claim of the server `ordinal`: `data-<statefulset>-<ordinal>`, as the
/// StatefulSet controller names it.
#[must_use]
pub fn claim_name(c: &Cluster, ordinal: i32) -> String {
    format!("{DATA_VOLUME}-{}", c.names.pod(ordinal))
}

/// The name of the ServiceAccount, Role and RoleBinding.
#[must_use]
pub fn account_name(c: &Cluster) -> String {
    c.names.cron_job(PURPOSE)
}

fn storage(map: Option<&BTreeMap<String, Quantity>>) -> Option<&Quantity> {
    map.and_then(|m| m.get("storage"))
}

fn at_least(q: Option<&Quantity>, target: i128) -> bool {
    q.and_then(|q| quantity::nanos(q).ok()).is_some_and(|n| n >= target)
}

fn progress(claim: Option<&PersistentVolumeClaim>, target: i128) -> Progress {
    let Some(claim) = claim else { return Progress::Missing };
    let requested = storage(claim.spec.as_ref().and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref()));
    let status = claim.status.as_ref();
    let capacity_q = storage(status.and_then(|s| s.capacity.as_ref()));
    let capacity = capacity_q.map_or_else(|| "no capacity yet".to_owned(), |q| q.0.clone());
    if at_least(capacity_q, target) {
        Progress::Grown { capacity }
    } else if !at_least(requested, target) {
        Progress::Smaller { capacity }
    } else {
        let file_system = status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == FILE_SYSTEM_RESIZE_PENDING && c.status == "True"));
        Progress::Resizing { capacity, file_system }
    }
}

/// Decides the growth children and the `VolumesGrown` condition. `c.grow_to` is
/// the target ([`Cluster::resolve`] sets it when `spec.storage.size` is above the
/// template's); `claims` are the related claims, `children` the observed ones.
#[must_use]
pub fn plan(c: &Cluster, observed: &Observed<'_>, claims: &ByKey<PersistentVolumeClaim>, children: &Children) -> Grow {
    let Some(target) = c.grow_to.as_ref() else { return Grow::default() };
    let Ok(target_n) = quantity::nanos(target) else { return Grow::default() };
    let verdict = |status, reason, message: String| Some(Verdict { type_: VOLUMES_GROWN, status, reason, message });
    let claims: Vec<(String, Progress)> = (0..c.replicas)
        .map(|i| {
            let name = claim_name(c, i);
            let p = progress(claims.get(&format!("{}/{name}", c.namespace)), target_n);
            (name, p)
        })
        .collect();
    let existing: Vec<&str> = claims.iter().filter(|(_, p)| *p != Progress::Missing).map(|(n, _)| n.as_str()).collect();
    let report = claims
        .iter()
        .map(|(name, p)| match p {
            Progress::Missing => format!("{name}: not created yet"),
            Progress::Smaller { capacity } => format!("{name}: {capacity}, request to be raised to {}", target.0),
            Progress::Resizing { capacity, file_system: true } => {
                format!("{name}: {capacity} of {}, waiting for the kubelet to grow the file system", target.0)
            }
            Progress::Resizing { capacity, file_system: false } => {
                format!("{name}: {capacity} of {}, the volume is being expanded", target.0)
            }
            Progress::Grown { capacity } => format!("{name}: {capacity}"),
        })
        .collect::<Vec<_>>()
        .join("; ");
    let mut out = Grow::default();
    if claims.iter().all(|(_, p)| matches!(p, Progress::Grown { .. } | Progress::Missing)) {
        out.verdict = verdict(true, "Grown", format!("every volume has {} or more: {report}", target.0));
        return out;
    }
    let name = c.names.job(PURPOSE, &short_hash(format!("{}:{}", target.0, existing.join(",")).as_bytes()));
    let observed_job = observed.job(&name);
    let smaller = claims.iter().any(|(_, p)| matches!(p, Progress::Smaller { .. }));
    if !smaller {
        // Requests raised; the volumes grow by themselves. The Job stays as the record.
        out.children.extend(observed_job.map(|j| Child::Job(Box::new(jobs::keep(j)))));
        out.verdict = verdict(false, "Growing", format!("the volumes grow to {}: {report}", target.0));
        return out;
    }
    match observed_job.map(Observed::job_state) {
        Some(JobState::Failed) => {
            let why = observed
                .job_message(&name)
                .map_or_else(|| "no result was written".to_owned(), |m| jobs::ScriptResult::parse(m).explain());
            out.children.extend(observed_job.map(|j| Child::Job(Box::new(jobs::keep(j)))));
            out.verdict = verdict(
                false,
                "GrowRefused",
                format!(
                    "Job {name} could not raise the claims' requests to {}: {why}; the volumes keep their size ({report}). Allow expansion in the StorageClass and delete the Job to retry, or set spec.storage.size back",
                    target.0
                ),
            );
        }
        Some(JobState::Succeeded) => {
            out.children.extend(observed_job.map(|j| Child::Job(Box::new(jobs::keep(j)))));
            out.verdict = verdict(false, "Growing", format!("the volumes grow to {}: {report}", target.0));
            out.busy = true;
        }
        state => {
            let access = access_objects(c, &existing);
            let all_observed =
                has(&children.service_accounts, c) && has(&children.roles, c) && has(&children.role_bindings, c);
            out.children.extend(access);
            match observed_job {
                Some(j) => out.children.push(Child::Job(Box::new(jobs::keep(j)))),
                None if all_observed => out.children.push(Child::Job(Box::new(job(c, &name, target, &existing)))),
                None => {}
            }
            let step = if state.is_some() || all_observed {
                format!("Job {name} raises the claims' requests")
            } else {
                format!("creating the ServiceAccount, Role and RoleBinding {} for Job {name}", account_name(c))
            };
            out.verdict = verdict(false, "Growing", format!("the volumes grow to {}: {step}; {report}", target.0));
            out.busy = true;
        }
    }
    out
}

fn has<T: k8s_openapi::Metadata<Ty = ObjectMeta>>(objects: &ByKey<T>, c: &Cluster) -> bool {
    let name = account_name(c);
    objects.values().any(|o| o.metadata().name.as_deref() == Some(name.as_str()))
}

/// The ServiceAccount, the Role over exactly `claims` and the RoleBinding.
fn access_objects(c: &Cluster, claims: &[&str]) -> Vec<Child> {
    let name = account_name(c);
    let labels = labels::common(&c.names, labels::JOB);
    let account = ServiceAccount {
        metadata: meta(&name, labels.clone()),
        // Only the grow Job's pod mounts its token (it asks for it itself).
        automount_service_account_token: Some(false),
        ..Default::default()
    };
    let role = Role {
        metadata: meta(&name, labels.clone()),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["persistentvolumeclaims".to_owned()]),
            resource_names: Some(claims.iter().map(|s| (*s).to_owned()).collect()),
            verbs: vec!["get".to_owned(), "patch".to_owned()],
            ..Default::default()
        }]),
    };
    let binding = RoleBinding {
        metadata: meta(&name, labels),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name,
            namespace: Some(c.namespace.clone()),
            ..Default::default()
        }]),
    };
    vec![Child::ServiceAccount(Box::new(account)), Child::Role(Box::new(role)), Child::RoleBinding(Box::new(binding))]
}

/// The Job: `mysql-hook grow-claims` in the hook's own image, as the
/// ServiceAccount `<name>-grow`, the one pod of ours with an API token.
fn job(c: &Cluster, name: &str, target: &Quantity, claims: &[&str]) -> Job {
    let mut pod_labels = labels::common(&c.names, labels::JOB);
    pod_labels.insert(labels::JOB_PURPOSE.to_owned(), PURPOSE.to_owned());
    let mut command = vec![
        crate::scripts::INSTALL_COMMAND[0].to_owned(),
        SUBCOMMAND.to_owned(),
        "--namespace".to_owned(),
        c.namespace.clone(),
        "--size".to_owned(),
        target.0.clone(),
    ];
    command.extend(claims.iter().map(|s| (*s).to_owned()));
    let mut spec = PodSpec {
        restart_policy: Some("Never".to_owned()),
        service_account_name: Some(account_name(c)),
        // The exception: this pod calls the API (get and patch of the claims).
        automount_service_account_token: Some(true),
        containers: vec![Container {
            name: PURPOSE.to_owned(),
            image: Some(c.scripts_image.clone()),
            command: Some(command),
            resources: Some(pod::small_resources("10m", "16Mi", "64Mi")),
            security_context: Some(pod::container_security()),
            termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
            ..Default::default()
        }],
        security_context: Some(pod::pod_security()),
        enable_service_links: Some(false),
        ..Default::default()
    };
    pod::place_job(c, &mut spec);
    Job {
        metadata: meta(name, pod_labels.clone()),
        spec: Some(JobSpec {
            backoff_limit: Some(3),
            active_deadline_seconds: Some(300),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(pod_labels), ..Default::default() }),
                spec: Some(spec),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::{Context, metacontroller::SyncRequest};

    /// The golden scenario `sync/storage-grow` (a running cluster of 3, claims of
    /// 10Gi, `spec.storage.size: 20Gi`), to edit.
    fn base() -> Value {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../test-fixtures/sync/storage-grow/request.json");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn claim(ordinal: i32, request: &str, capacity: &str, resize_pending: bool) -> Value {
        let mut status = json!({"phase": "Bound", "capacity": {"storage": capacity}});
        if resize_pending {
            status["conditions"] = json!([{"type": "FileSystemResizePending", "status": "True"}]);
        }
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": format!("data-db-{ordinal}"), "namespace": "shop"},
               "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": request}}},
               "status": status})
    }

    fn with_claims(mut v: Value, claims: &[Value]) -> Value {
        v["related"]["PersistentVolumeClaim.v1"] = claims
            .iter()
            .map(|c| (format!("shop/{}", c["metadata"]["name"].as_str().unwrap_or_default()), c.clone()))
            .collect::<serde_json::Map<_, _>>()
            .into();
        v
    }

    /// Observed as children: what an earlier answer emitted, as Metacontroller keys it.
    fn observe(v: &mut Value, key: &str, object: Value) {
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let mut object = object;
        object["metadata"]["namespace"] = json!("shop");
        v["children"][key][format!("shop/{name}")] = object;
    }

    struct Answer {
        /// `Kind/name` of the growth children.
        grow: Vec<String>,
        children: Vec<Value>,
        condition: Option<Value>,
        spec_accepted: Value,
    }

    fn sync(v: &Value) -> Answer {
        let request: SyncRequest = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}"));
        let ctx = Context {
            now: "2026-11-29T12:00:00Z".parse().unwrap_or_else(|e| panic!("{e}")),
            entropy: [7; 32],
            scripts_image: "ghcr.io/mysql-hook/mysql-hook:test".to_owned(),
            allowed_images: Vec::new(),
            placement_policy: Default::default(),
        };
        let response = crate::sync(&request, &ctx).unwrap_or_else(|e| panic!("{e}"));
        let out = serde_json::to_value(&response).unwrap_or_else(|e| panic!("{e}"));
        let children: Vec<Value> = out["children"].as_array().cloned().unwrap_or_default();
        let grow = children
            .iter()
            .filter(|c| {
                matches!(c["kind"].as_str(), Some("ServiceAccount" | "Role" | "RoleBinding"))
                    || c["metadata"]["labels"]["mysqlhook.dev/purpose"] == "grow"
            })
            .map(|c| {
                format!(
                    "{}/{}",
                    c["kind"].as_str().unwrap_or_default(),
                    c["metadata"]["name"].as_str().unwrap_or_default()
                )
            })
            .collect();
        let condition =
            |t: &str| out["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == t).cloned();
        Answer {
            grow,
            children,
            condition: condition(super::VOLUMES_GROWN),
            spec_accepted: condition("SpecAccepted").unwrap_or_default(),
        }
    }

    fn small() -> Vec<Value> {
        (0..3).map(|i| claim(i, "10Gi", "10Gi", false)).collect()
    }

    fn grow_job(a: &Answer) -> Option<&Value> {
        a.children.iter().find(|c| c["metadata"]["labels"]["mysqlhook.dev/purpose"] == "grow")
    }

    #[test]
    fn smaller_claims_get_the_access_objects_first_then_the_job() {
        let first = sync(&with_claims(base(), &small()));
        assert_eq!(first.grow, ["Role/db-grow", "RoleBinding/db-grow", "ServiceAccount/db-grow"]);
        let c = first.condition.unwrap_or_else(|| panic!("no VolumesGrown"));
        assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some("False"), Some("Growing")));
        let role = first.children.iter().find(|c| c["kind"] == "Role").cloned().unwrap_or_default();
        assert_eq!(role["rules"][0]["resourceNames"], json!(["data-db-0", "data-db-1", "data-db-2"]));
        assert_eq!(role["rules"][0]["verbs"], json!(["get", "patch"]));
        // The spec is accepted: growing is not a refusal.
        assert_eq!(first.spec_accepted["status"], "True");

        let mut second = with_claims(base(), &small());
        for c in first
            .children
            .iter()
            .filter(|c| matches!(c["kind"].as_str(), Some("ServiceAccount" | "Role" | "RoleBinding")))
        {
            let key = match c["kind"].as_str() {
                Some("ServiceAccount") => "ServiceAccount.v1",
                Some("Role") => "Role.rbac.authorization.k8s.io/v1",
                _ => "RoleBinding.rbac.authorization.k8s.io/v1",
            };
            observe(&mut second, key, c.clone());
        }
        let second = sync(&second);
        let job = grow_job(&second).unwrap_or_else(|| panic!("no grow Job once the access objects exist"));
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], "db-grow");
        assert_eq!(pod["automountServiceAccountToken"], true);
        assert_eq!(
            pod["containers"][0]["command"],
            json!([
                "/usr/local/bin/mysql-hook",
                "grow-claims",
                "--namespace",
                "shop",
                "--size",
                "20Gi",
                "data-db-0",
                "data-db-1",
                "data-db-2"
            ])
        );
        assert_eq!(pod["containers"][0]["image"], "ghcr.io/mysql-hook/mysql-hook:test");
        // The StatefulSet's volume template keeps its size (it is immutable).
        let sts = second.children.iter().find(|c| c["kind"] == "StatefulSet").cloned().unwrap_or_default();
        assert_eq!(sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"], "10Gi");
    }

    #[test]
    fn grown_claims_leave_nothing_behind() {
        let big: Vec<Value> = (0..3).map(|i| claim(i, "20Gi", "20Gi", false)).collect();
        let a = sync(&with_claims(base(), &big));
        assert!(a.grow.is_empty(), "{:?}", a.grow);
        let c = a.condition.unwrap_or_else(|| panic!("no VolumesGrown"));
        assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some("True"), Some("Grown")));
    }

    #[test]
    fn a_waiting_file_system_is_reported_and_needs_no_access() {
        let claims = [claim(0, "20Gi", "10Gi", true), claim(1, "20Gi", "10Gi", false), claim(2, "20Gi", "20Gi", false)];
        let a = sync(&with_claims(base(), &claims));
        assert!(a.grow.is_empty(), "{:?}", a.grow);
        let c = a.condition.unwrap_or_else(|| panic!("no VolumesGrown"));
        let message = c["message"].as_str().unwrap_or_default();
        assert_eq!(c["reason"], "Growing");
        assert!(
            message.contains("data-db-0: 10Gi of 20Gi, waiting for the kubelet to grow the file system"),
            "{message}"
        );
        assert!(message.contains("data-db-1: 10Gi of 20Gi, the volume is being expanded"), "{message}");
    }

    #[test]
    fn a_smaller_size_is_refused_and_changes_nothing() {
        let mut v = with_claims(base(), &small());
        v["parent"]["spec"]["storage"]["size"] = json!("5Gi");
        let a = sync(&v);
        assert!(a.grow.is_empty() && a.condition.is_none());
        assert_eq!(a.spec_accepted["reason"], "StorageShrinkRefused");
        let sts = a.children.iter().find(|c| c["kind"] == "StatefulSet").cloned().unwrap_or_default();
        assert_eq!(sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"], "10Gi");
    }

    #[test]
    fn another_storage_class_is_refused_and_grows_nothing() {
        let mut v = with_claims(base(), &small());
        v["parent"]["spec"]["storage"] = json!({"size": "20Gi", "storageClassName": "fast"});
        let a = sync(&v);
        assert!(a.grow.is_empty() && a.condition.is_none(), "{:?}", a.grow);
        assert_eq!(a.spec_accepted["reason"], "StorageChangeUnsupported");
    }

    #[test]
    fn a_claim_made_by_a_scale_up_is_grown_too() {
        let mut v = with_claims(
            base(),
            &[
                claim(0, "20Gi", "20Gi", false),
                claim(1, "20Gi", "20Gi", false),
                claim(2, "20Gi", "20Gi", false),
                claim(3, "10Gi", "10Gi", false),
            ],
        );
        v["parent"]["spec"]["replicas"] = json!(4);
        let a = sync(&v);
        let role = a.children.iter().find(|c| c["kind"] == "Role").cloned().unwrap_or_default();
        assert!(role["rules"][0]["resourceNames"].as_array().is_some_and(|n| n.contains(&json!("data-db-3"))));
        let c = a.condition.unwrap_or_else(|| panic!("no VolumesGrown"));
        assert!(c["message"].as_str().is_some_and(|m| m.contains("data-db-3: 10Gi, request to be raised to 20Gi")));
    }

    #[test]
    fn a_refused_job_is_reported_and_its_access_goes() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../test-fixtures/sync/storage-grow-refused/request.json");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        let a = sync(&v);
        assert!(a.grow.iter().all(|g| g.starts_with("Job/")), "{:?}", a.grow);
        assert_eq!(a.grow.len(), 1, "the failed Job is kept as the record");
        let c = a.condition.unwrap_or_else(|| panic!("no VolumesGrown"));
        assert_eq!(c["reason"], "GrowRefused");
        assert!(c["message"].as_str().is_some_and(|m| m.contains("must support resize")), "{c}");
    }
}

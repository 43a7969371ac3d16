//! One debug line per sync about roles: what the hook was shown and what it answered.
//!
//! A role change that reaches the status late (a switchover Job that finished in a
//! second, a primary the status names a minute later) is explained only by the
//! sequence of syncs around it: which parent and Jobs Metacontroller sent, and which
//! primary, operation and Jobs the hook answered. The core is pure and logs nothing;
//! this shell-side line carries those facts, names only (no spec, no secret).
//!
//! Off by default; `RUST_LOG=info,mysql_hook::role_trace=debug` turns it on (the
//! real-server loop does, and keeps the log with `MYSQL_HOOK_K8S_LOGS`).

use hooks::{
    labels::JOB_PURPOSE,
    memory::{BOOTSTRAP, ROLE_PURPOSES},
    metacontroller::{Child, SyncRequest, SyncResponse},
    roles::AUTOMATIC_FAILOVER,
};
use k8s_openapi::{
    api::{batch::v1::Job, core::v1::Pod},
    apimachinery::pkg::apis::meta::v1::Condition,
};

/// Logs the line, if debug is on for this module.
pub fn sync(request: &SyncRequest, response: &SyncResponse) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    let parent = &request.parent;
    let seen = parent.status.as_ref();
    let seen_jobs: Vec<String> = request
        .children
        .jobs
        .values()
        .filter(|j| decides_roles(j))
        .map(|j| format!("{}={}", name(j), state(j)))
        .collect();
    // Emitted Jobs carry no status: their names are the answer.
    let answered_jobs: Vec<&str> = response
        .children
        .iter()
        .filter_map(|c| match c {
            Child::Job(j) if decides_roles(j) => Some(name(j)),
            _ => None,
        })
        .collect();
    tracing::debug!(
        namespace = parent.metadata.namespace.as_deref().unwrap_or_default(),
        name = parent.metadata.name.as_deref().unwrap_or_default(),
        resource_version = parent.metadata.resource_version.as_deref().unwrap_or_default(),
        seen_primary = seen.and_then(|s| s.primary.as_deref()).unwrap_or("-"),
        seen_operation = seen.and_then(|s| s.operation.as_ref()).map_or("-", |o| o.job.as_str()),
        seen_jobs = seen_jobs.join(" "),
        primary = response.status.primary.as_deref().unwrap_or("-"),
        operation = response.status.operation.as_ref().map_or("-", |o| o.job.as_str()),
        jobs = answered_jobs.join(" "),
        primary_pod =
            primary_pod(request, response.status.primary.as_deref().or(seen.and_then(|s| s.primary.as_deref()))),
        failover = failover(&response.status.conditions),
        resync_after = response.resync_after_seconds.unwrap_or(0),
        "sync roles"
    );
}

/// The primary's pod as the request shows it: its `Ready` condition and since when,
/// and whether it is being deleted. A failover waits out the grace period from
/// that `since`; this is how a trace tells a slow detection (the kubelet marked the
/// pod late) from a slow decision (the hook waited).
fn primary_pod(request: &SyncRequest, primary: Option<&str>) -> String {
    let Some(primary) = primary else { return "-".to_owned() };
    let namespace = request.parent.metadata.namespace.as_deref().unwrap_or_default();
    let Some(pod) = request.related.pods.get(&format!("{namespace}/{primary}")) else {
        return format!("{primary} absent");
    };
    format!("{primary} {}", pod_state(pod))
}

fn pod_state(pod: &Pod) -> String {
    let ready =
        pod.status.as_ref().and_then(|s| s.conditions.as_ref()).and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    let mut out = match ready {
        Some(c) => match c.last_transition_time.as_ref() {
            Some(t) => format!("ready={} since={}", c.status, t.0),
            None => format!("ready={}", c.status),
        },
        None => "ready=unknown".to_owned(),
    };
    if pod.metadata.deletion_timestamp.is_some() {
        out.push_str(" deleting");
    }
    out
}

/// The `AutomaticFailover` condition the hook answered, as `status/reason`: why a
/// failover is or is not starting (in grace, no candidate, backing off, running).
fn failover(conditions: &[Condition]) -> String {
    conditions
        .iter()
        .find(|c| c.type_ == AUTOMATIC_FAILOVER)
        .map_or_else(|| "-".to_owned(), |c| format!("{}/{}", c.status, c.reason))
}

/// A bootstrap, failover or switchover Job: the Jobs that decide who the primary
/// is, by the purpose label the hook puts on every Job it makes.
fn decides_roles(j: &Job) -> bool {
    let purpose = j.metadata.labels.as_ref().and_then(|l| l.get(JOB_PURPOSE)).map(String::as_str);
    purpose.is_some_and(|p| p == BOOTSTRAP || ROLE_PURPOSES.contains(&p))
}

fn name(j: &Job) -> &str {
    j.metadata.name.as_deref().unwrap_or("?")
}

/// The Job's state as its status counts say.
fn state(j: &Job) -> &'static str {
    let s = j.status.as_ref();
    match (s.and_then(|s| s.succeeded), s.and_then(|s| s.failed), s.and_then(|s| s.active)) {
        (Some(n), _, _) if n > 0 => "succeeded",
        (_, _, Some(n)) if n > 0 => "active",
        (_, Some(n), _) if n > 0 => "failed",
        _ if s.is_none() => "new",
        _ => "pending",
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::JobStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn job_named(name: &str, purpose: &str, status: Option<JobStatus>) -> Job {
        let labels = [(JOB_PURPOSE.to_owned(), purpose.to_owned())].into();
        Job {
            metadata: ObjectMeta { name: Some(name.to_owned()), labels: Some(labels), ..ObjectMeta::default() },
            status,
            ..Job::default()
        }
    }

    fn counts(succeeded: i32, failed: i32, active: i32) -> Option<JobStatus> {
        let n = |v: i32| (v > 0).then_some(v);
        Some(JobStatus { succeeded: n(succeeded), failed: n(failed), active: n(active), ..JobStatus::default() })
    }

    #[test]
    fn role_jobs_are_named_with_their_state_and_others_are_skipped() {
        let line = |name: &str, purpose: &str, status| {
            let j = job_named(name, purpose, status);
            decides_roles(&j).then(|| format!("{}={}", super::name(&j), state(&j)))
        };
        assert_eq!(
            line("db-switchover-12", "switchover", counts(1, 0, 0)).as_deref(),
            Some("db-switchover-12=succeeded")
        );
        assert_eq!(line("db-failover-3", "failover", counts(0, 0, 1)).as_deref(), Some("db-failover-3=active"));
        assert_eq!(line("db-failover-4", "failover", counts(0, 2, 0)).as_deref(), Some("db-failover-4=failed"));
        assert_eq!(
            line("db-bootstrap-ab12c", "bootstrap", counts(0, 0, 0)).as_deref(),
            Some("db-bootstrap-ab12c=pending")
        );
        assert_eq!(line("db-failover-5", "failover", None).as_deref(), Some("db-failover-5=new"));
        assert_eq!(line("db-inspect-0f96fe2d", "inspect", counts(1, 0, 0)), None);
        assert_eq!(line("db-users-be31dff5", "users", None), None);
        // A name alone proves nothing: the purpose label decides.
        assert_eq!(line("db-failover-6", "backup", None), None);
    }

    #[test]
    fn the_primary_pod_is_named_with_its_ready_condition() {
        let body = include_str!("../test-fixtures/sync/failover-past-grace/request.json");
        let request: SyncRequest = serde_json::from_str(body).unwrap_or_else(|e| panic!("request: {e}"));
        assert_eq!(primary_pod(&request, Some("db-0")), "db-0 ready=False since=2026-11-29T11:59:00Z");
        assert_eq!(primary_pod(&request, Some("db-1")), "db-1 ready=True since=2026-11-29T11:59:00Z");
        assert_eq!(primary_pod(&request, Some("db-7")), "db-7 absent");
        assert_eq!(primary_pod(&request, None), "-");
        let answered: serde_json::Value =
            serde_json::from_str(include_str!("../test-fixtures/sync/failover-past-grace/response.json"))
                .unwrap_or_else(|e| panic!("response: {e}"));
        let conditions: Vec<Condition> = serde_json::from_value(answered["status"]["conditions"].clone())
            .unwrap_or_else(|e| panic!("conditions: {e}"));
        assert_eq!(failover(&conditions), "True/FailingOver");
        assert_eq!(failover(&[]), "-");
    }
}

//! What the pods of backup and restore Jobs report: the one-line JSON result of
//! the script (in the termination message of the pod's last container), or the
//! error of whichever container failed.
//!
//! The Jobs of the backup CronJob are not children (the CronJob owns them), so
//! their outcome is read from their pods alone; one-shot Jobs are children and
//! their own status says whether they finished.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{batch::v1::Job, core::v1::Pod},
    jiff::Timestamp,
};

use crate::observed::{JobState, Observed};

/// A time as Kubernetes writes it: RFC 3339, whole seconds, UTC.
#[must_use]
pub fn seconds(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// What a script or an agent command reports: the type the agent writes its
/// line with ([`protocol::Report`]), so writer and reader cannot drift; a line of
/// the scripts of an earlier release reads the same.
pub type ScriptResult = protocol::Report;

/// How one pod of a Job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodOutcome {
    Running,
    /// The last container ended with exit code 0; its result and when.
    Succeeded(ScriptResult, Option<String>),
    /// A container ended with another exit code; its result and when.
    Failed(ScriptResult, Option<String>),
}

/// The outcome of one pod (`restartPolicy: Never`).
#[must_use]
pub fn pod_outcome(pod: &Pod) -> PodOutcome {
    let Some(status) = pod.status.as_ref() else { return PodOutcome::Running };
    let statuses = status.init_container_statuses.iter().flatten().chain(status.container_statuses.iter().flatten());
    // The kubelet ended the pod (evicted, e.g. a work volume over its sizeLimit, or
    // past its deadline): its containers only show the kill (137, or a log tail),
    // so the pod's own reason is the one to report.
    if status.phase.as_deref() == Some("Failed") {
        if let Some(reason) = status.reason.as_deref().filter(|r| !r.is_empty()) {
            let at = statuses
                .clone()
                .filter_map(|s| s.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
                .max_by_key(|t| t.0)
                .map(|t| seconds(t.0));
            let what = if reason == "Evicted" { "the pod was evicted" } else { "the pod was stopped" };
            let message = match status.message.as_deref().filter(|m| !m.is_empty()) {
                Some(m) => format!("{what}: {m}"),
                None => what.to_owned(),
            };
            let result = ScriptResult {
                result: "error".to_owned(),
                reason: Some(reason.to_owned()),
                message: Some(message),
                ..ScriptResult::default()
            };
            return PodOutcome::Failed(result, at);
        }
    }
    let mut last_ok = None;
    for s in statuses {
        let Some(t) = s.state.as_ref().and_then(|st| st.terminated.as_ref()) else { continue };
        let at = t.finished_at.as_ref().map(|t| seconds(t.0));
        let result = ScriptResult::parse(t.message.as_deref().unwrap_or_default());
        if t.exit_code != 0 {
            let result = if t.message.as_deref().is_none_or(str::is_empty) {
                ScriptResult {
                    result: "error".to_owned(),
                    reason: t.reason.clone(),
                    message: Some(format!("container {} exited with {}", s.name, t.exit_code)),
                    ..ScriptResult::default()
                }
            } else {
                result
            };
            return PodOutcome::Failed(result, at);
        }
        last_ok = Some((s.name.clone(), result, at));
    }
    let main = pod.spec.as_ref().and_then(|s| s.containers.last()).map(|c| c.name.as_str());
    match last_ok {
        Some((name, result, at)) if Some(name.as_str()) == main && status.phase.as_deref() == Some("Succeeded") => {
            PodOutcome::Succeeded(result, at)
        }
        _ if status.phase.as_deref() == Some("Failed") => PodOutcome::Failed(
            ScriptResult {
                result: "error".to_owned(),
                reason: status.reason.clone(),
                message: Some(status.message.clone().unwrap_or_else(|| "the pod failed".to_owned())),
                ..ScriptResult::default()
            },
            None,
        ),
        _ => PodOutcome::Running,
    }
}

/// How a Job ended, with the result that says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Running,
    Succeeded(ScriptResult, Option<String>),
    Failed(ScriptResult, Option<String>),
}

/// A Job known only by its pods (a CronJob's): succeeded when a pod did, failed
/// when more pods failed than the backoff limit allows, running otherwise.
#[must_use]
pub fn outcome_from_pods(pods: &[&Pod], backoff_limit: i32) -> Outcome {
    let outcomes: Vec<_> = pods.iter().map(|p| pod_outcome(p)).collect();
    if let Some(PodOutcome::Succeeded(r, at)) = outcomes.iter().find(|o| matches!(o, PodOutcome::Succeeded(..))) {
        return Outcome::Succeeded(r.clone(), at.clone());
    }
    let failed: Vec<_> =
        outcomes.iter().filter_map(|o| if let PodOutcome::Failed(r, at) = o { Some((r, at)) } else { None }).collect();
    if failed.len() > usize::try_from(backoff_limit).unwrap_or(0) {
        if let Some((r, at)) = failed.iter().max_by(|a, b| a.1.cmp(b.1)) {
            return Outcome::Failed((*r).clone(), (*at).clone());
        }
    }
    Outcome::Running
}

/// A Job that is a child: its status says whether it ended, its pods why. Only
/// pods this very Job controls count ([`owned_by`]).
#[must_use]
pub fn outcome_of_job(job: &Job, pods: &[&Pod]) -> Outcome {
    let owned: Vec<&Pod> = pods.iter().copied().filter(|p| owned_by(p, job)).collect();
    let pods = owned.as_slice();
    match Observed::job_state(job) {
        JobState::Running => Outcome::Running,
        JobState::Succeeded => match outcome_from_pods(pods, 0) {
            Outcome::Succeeded(r, at) => Outcome::Succeeded(r, at),
            _ => Outcome::Succeeded(
                ScriptResult::default(),
                job.status.as_ref().and_then(|s| s.completion_time.as_ref()).map(|t| seconds(t.0)),
            ),
        },
        JobState::Failed => {
            let at = job
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Failed"))
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| seconds(t.0));
            let newest_failure = pods
                .iter()
                .filter_map(|p| match pod_outcome(p) {
                    PodOutcome::Failed(r, at) => Some((at, r)),
                    _ => None,
                })
                .max_by(|a, b| a.0.cmp(&b.0));
            let failed = job
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Failed"));
            let reason = failed.and_then(|c| c.reason.clone());
            // Without a failed pod to say why, the Job controller's own words (for
            // example `DeadlineExceeded`: "Job was active longer than specified
            // deadline", whose pods it deleted).
            let message = failed.and_then(|c| c.message.clone()).filter(|m| !m.is_empty());
            let result = newest_failure.map_or_else(
                || ScriptResult {
                    result: "error".to_owned(),
                    reason,
                    message: Some(message.unwrap_or_else(|| "the Job failed".to_owned())),
                    ..ScriptResult::default()
                },
                |(_, r)| r,
            );
            Outcome::Failed(result, at)
        }
    }
}

/// The Job that controls `pod`, by name and uid: the controller owner reference of
/// kind `batch/v1` Job, which the Job controller sets on every pod it creates.
/// Labels prove nothing: whoever may create a pod can write `job-name`, and a
/// terminated container's message is the pod's own status.
#[must_use]
pub fn owner_job(pod: &Pod) -> Option<(&str, &str)> {
    pod.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "Job" && o.api_version == "batch/v1")
        .map(|o| (o.name.as_str(), o.uid.as_str()))
}

/// Whether the observed Job `job` controls `pod`: same name and, when the Job's
/// uid is known, the same uid (a Job deleted and created again under the same name
/// is another Job).
#[must_use]
pub fn owned_by(pod: &Pod, job: &Job) -> bool {
    owner_job(pod).is_some_and(|(name, uid)| {
        job.metadata.name.as_deref() == Some(name) && job.metadata.uid.as_deref().is_none_or(|u| u == uid)
    })
}

/// Pods by the Job that controls them ([`owner_job`]), among `pods`, keeping those
/// `keep` accepts.
#[must_use]
pub fn pods_by_job<'a>(
    pods: impl Iterator<Item = &'a Pod>,
    keep: impl Fn(&Pod) -> bool,
) -> BTreeMap<&'a str, Vec<&'a Pod>> {
    let mut out: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    for pod in pods.filter(|p| keep(p)) {
        if let Some((job, _)) = owner_job(pod) {
            out.entry(job).or_default().push(pod);
        }
    }
    for pods in out.values_mut() {
        pods.sort_by_key(|p| p.metadata.name.as_deref());
    }
    out
}

/// Whether `pod` has label `key` with `value`.
#[must_use]
pub fn has_label(pod: &Pod, key: &str, value: &str) -> bool {
    pod.metadata.labels.as_ref().and_then(|l| l.get(key)).is_some_and(|v| v == value)
}

/// An observed Job, emitted again as it is (name, labels, spec) so that it is
/// not deleted with its logs: Jobs are never updated (`OnDelete`), so only its
/// identity matters, and the cluster it was built from may be gone.
#[must_use]
pub fn keep(job: &Job) -> Job {
    Job {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            annotations: job.metadata.annotations.clone().filter(|a| !a.is_empty()),
            ..crate::build::meta(
                job.metadata.name.as_deref().unwrap_or_default(),
                job.metadata
                    .labels
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|(k, _)| k != "controller-uid")
                    .collect(),
            )
        },
        spec: job.spec.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateTerminated, ContainerStatus, PodSpec, PodStatus,
    };

    use super::*;

    fn pod(phase: &str, init: Option<(i32, &str)>, main: Option<(i32, &str)>) -> Pod {
        let status = |name: &str, (code, msg): (i32, &str)| ContainerStatus {
            name: name.to_owned(),
            state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: code,
                    message: Some(msg.to_owned()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        Pod {
            spec: Some(PodSpec {
                containers: vec![Container { name: "upload".to_owned(), ..Default::default() }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.to_owned()),
                init_container_statuses: init.map(|i| vec![status("backup", i)]),
                container_statuses: main.map(|m| vec![status("upload", m)]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_last_container_carries_the_result() {
        let line = r#"{"result":"backed-up","location":"/backup/x","bytes":42,"source":"db-1","gtid":"g"}"#;
        let p = pod("Succeeded", Some((0, line)), Some((0, line)));
        let PodOutcome::Succeeded(r, _) = pod_outcome(&p) else { panic!("not succeeded") };
        assert_eq!((r.bytes, r.source.as_deref()), (Some(42), Some("db-1")));
    }

    #[test]
    fn a_failed_init_container_is_the_reason() {
        let err = r#"{"result":"error","reason":"no-source","message":"nobody answers"}"#;
        let p = pod("Failed", Some((1, err)), None);
        let PodOutcome::Failed(r, _) = pod_outcome(&p) else { panic!("not failed") };
        assert_eq!(r.explain(), "no-source: nobody answers");
        // Only more failures than the backoff limit fail a CronJob's Job.
        assert_eq!(outcome_from_pods(&[&p], 2), Outcome::Running);
        assert!(matches!(outcome_from_pods(&[&p, &p, &p], 2), Outcome::Failed(..)));
    }

    #[test]
    fn a_job_ended_by_its_deadline_says_so() {
        use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
        let job = Job {
            status: Some(JobStatus {
                failed: Some(1),
                conditions: Some(vec![JobCondition {
                    type_: "Failed".to_owned(),
                    status: "True".to_owned(),
                    reason: Some("DeadlineExceeded".to_owned()),
                    message: Some("Job was active longer than specified deadline".to_owned()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let Outcome::Failed(r, _) = outcome_of_job(&job, &[]) else { panic!("not failed") };
        assert_eq!(r.explain(), "DeadlineExceeded: Job was active longer than specified deadline");
    }

    /// Issue 34.8: an eviction shows as the kill of a container (137, no message);
    /// the pod's reason says what happened.
    #[test]
    fn an_evicted_pod_says_it_was_evicted() {
        let mut p = pod("Failed", Some((0, "")), Some((137, "")));
        if let Some(st) = p.status.as_mut() {
            st.reason = Some("Evicted".to_owned());
            st.message = Some(r#"Usage of EmptyDir volume "staging" exceeds the limit "10Gi". "#.trim_end().to_owned());
        }
        let PodOutcome::Failed(r, _) = pod_outcome(&p) else { panic!("not failed") };
        assert_eq!(
            r.explain(),
            r#"Evicted: the pod was evicted: Usage of EmptyDir volume "staging" exceeds the limit "10Gi"."#
        );
    }

    #[test]
    fn times_are_whole_seconds_in_utc() {
        let t: Timestamp = "2026-11-29T12:00:00.568587904Z".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(seconds(t), "2026-11-29T12:00:00Z");
    }

    #[test]
    fn a_log_tail_is_kept_as_the_message() {
        let r = ScriptResult::parse("bash: line 3: aws: command not found");
        assert_eq!(r.result, "error");
        assert_eq!(r.explain(), "bash: line 3: aws: command not found");
    }
}

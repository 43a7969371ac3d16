//! Role changes: which pod is the writable primary, and how that moves.
//!
//! `status.primary` is the only source of the primary: the `-primary` Service
//! selector, the ConfigMap's `primary` key (which the agents follow) and the
//! replicas' EndpointSlice all derive from it. It moves only here, and only when a
//! role-change Job (failover or switchover) has succeeded and named a member of
//! the cluster in its termination message.
//!
//! At most one role change runs at a time, and that is decided from one field:
//! `status.operation`. The Job of an operation is emitted while the observed
//! status names it; in the sync that sees it finish, the outcome is recorded in
//! status (and the Job emitted one last time), and from the next sync on, the
//! recorded status no longer names it and the Job is dropped. As with
//! [`bootstrap`](crate::bootstrap), the status remembers what happened, not the
//! Job. No sync emits more than one role-change Job, and none starts a role change
//! in the sync that finishes one.
//!
//! [`failover`] decides when the primary has failed; [`switchover`] handles the
//! `mysqlhook.dev/switchover-to` annotation; [`crate::rollout`] may ask for a
//! switchover before it updates the primary (operation reason `Rollout`), served
//! after the other two and only when nothing else runs.

pub mod failover;
pub mod switchover;

use k8s_openapi::{
    api::batch::v1::Job,
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::{SignedDuration, Timestamp},
};

use crate::{
    api::{
        FailoverSpec, FailoverStatus, MySQLStatus, Operation, OperationKind, RoleChange, SwitchoverResult,
        SwitchoverStatus,
    },
    build::{
        job::{self, JobRequest},
        pod::env,
    },
    jobs::{self, ScriptResult},
    labels,
    model::Cluster,
    observed::{JobState, Observed},
};

/// The annotation on a `MySQL` that requests a switchover to the named pod.
pub const SWITCHOVER_TO: &str = "mysqlhook.dev/switchover-to";
/// Condition: whether automatic failover can act, and what it is doing.
pub const AUTOMATIC_FAILOVER: &str = "AutomaticFailover";
/// Condition: the state of the requested switchover (present while requested).
pub const SWITCHOVER: &str = "Switchover";

/// Operation reasons.
const REQUESTED: &str = "Requested";
const ROLLOUT: &str = "Rollout";
const PRIMARY_NOT_READY: &str = "PrimaryNotReady";

/// Role changes kept in `status.roleChanges`.
const HISTORY: usize = 10;
/// How often to look again while a role-change Job runs.
const BUSY_SECONDS: u32 = 10;
/// How long a succeeded Job's pod (with the result) may take to be observed.
const RESULT_WAIT_SECONDS: i64 = 120;
/// How long a created Job may stay unobserved (rejected by the API server?).
const JOB_APPEAR_SECONDS: i64 = 300;
/// Job purposes that change roles.
const PURPOSES: [&str; 2] = ["failover", "switchover"];

/// One condition this module decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

/// Why no new role change may start in this sync.
#[derive(Debug, Clone, PartialEq)]
pub enum Blocker {
    /// This operation runs.
    Running(Operation),
    /// An operation finished in this sync; its outcome must be recorded first.
    JustFinished,
    /// A role-change Job or pod the status does not know about is still active.
    Stray,
    /// The parent is being deleted.
    Finalizing,
}

impl Blocker {
    fn describe(&self) -> String {
        match self {
            Self::Running(op) => format!("{} Job {} is running", purpose(op.kind), op.job),
            Self::JustFinished => "the previous role change is being recorded".to_owned(),
            Self::Stray => {
                "a role-change Job the status does not record is running or newer than the status".to_owned()
            }
            Self::Finalizing => "the cluster is being deleted".to_owned(),
        }
    }
}

/// What decides a role change.
pub struct Input<'a> {
    pub cluster: &'a Cluster,
    pub observed: &'a Observed<'a>,
    pub previous: &'a MySQLStatus,
    pub failover: &'a FailoverSpec,
    /// The value of the [`SWITCHOVER_TO`] annotation.
    pub switchover_to: Option<&'a str>,
    /// A switchover the rollout needs before it updates the primary.
    pub rollout_switchover_to: Option<&'a str>,
    /// Bootstrap completed in an earlier sync.
    pub initialized: bool,
    /// False in finalize: running operations go on, none starts.
    pub may_start: bool,
    pub now: Timestamp,
}

/// The role-change part of one sync's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Roles {
    /// The primary after this sync.
    pub primary: String,
    /// The one role-change Job to emit, if any.
    pub job: Option<Job>,
    /// Running role-change Jobs the status does not record: leaving them out would
    /// delete them in the middle of a promotion, so they are emitted as they are
    /// ([`jobs::keep`]). A finished one is not kept: if it is newer than the status,
    /// keeping it would block every new attempt for good, since this stale sync's
    /// status loses its record; deleted, the next attempt (the scripts are
    /// idempotent) redoes what it did.
    pub kept: Vec<Job>,
    pub operation: Option<Operation>,
    pub operations_started: i32,
    pub failover: Option<FailoverStatus>,
    pub switchover: Option<SwitchoverStatus>,
    pub role_changes: Vec<RoleChange>,
    pub conditions: Vec<Verdict>,
    pub resync_after: Option<u32>,
}

impl Roles {
    fn resync(&mut self, seconds: u32) {
        self.resync_after = Some(self.resync_after.map_or(seconds, |s| s.min(seconds)).max(1));
    }
}

/// Decides this sync's role change.
#[must_use]
pub fn plan(input: &Input<'_>) -> Roles {
    let c = input.cluster;
    let prev = input.previous;
    // Status keeps whole seconds: times read back must equal times written.
    let now = Timestamp::from_second(input.now.as_second()).unwrap_or(input.now);
    let mut r = Roles {
        primary: c.primary.clone(),
        job: None,
        kept: Vec::new(),
        operation: None,
        operations_started: prev.operations_started,
        failover: prev.failover.clone(),
        switchover: prev.switchover.clone(),
        role_changes: prev.role_changes.clone(),
        conditions: Vec::new(),
        resync_after: None,
    };

    let mut blocker = (!input.may_start).then_some(Blocker::Finalizing);
    if let Some(op) = &prev.operation {
        blocker = Some(match progress(input, op, now) {
            Progress::Running(job) => {
                r.job = Some(job);
                r.operation = Some(op.clone());
                r.resync(BUSY_SECONDS);
                Blocker::Running(op.clone())
            }
            Progress::Succeeded(job, to) => {
                r.job = Some(job);
                succeeded(&mut r, op, to, now);
                Blocker::JustFinished
            }
            Progress::Failed(job, why) => {
                r.job = Some(job);
                failed(&mut r, op, &why, now);
                Blocker::JustFinished
            }
        });
    }
    let current = r.operation.as_ref().map(|o| o.job.as_str());
    let running_stray = |j: &Job| {
        let purpose = j.metadata.labels.as_ref().and_then(|l| l.get(labels::JOB_PURPOSE));
        purpose.is_some_and(|p| PURPOSES.contains(&p.as_str())) && Observed::job_state(j) == JobState::Running
    };
    r.kept = input
        .observed
        .jobs()
        .filter(|j| j.metadata.name.as_deref() != current && running_stray(j))
        .map(jobs::keep)
        .collect();
    let stray = !r.kept.is_empty()
        || input.observed.job_pods_active(&PURPOSES, current)
        || ahead_of_status(input, r.operations_started);
    if blocker.is_none() && stray {
        blocker = Some(Blocker::Stray);
        r.resync(BUSY_SECONDS);
    }

    let outage = failover::assess(&failover::Facts {
        primary: &r.primary,
        observed: input.observed,
        replicas: c.replicas,
        spec: input.failover,
        initialized: input.initialized,
        previous: r.failover.as_ref(),
        blocker: blocker.as_ref(),
        now,
    });
    r.failover = outage.status;
    r.conditions.push(outage.verdict);
    if let Some(s) = outage.resync_after {
        r.resync(s);
    }
    if outage.start {
        let from = r.primary.clone();
        let op = start(&mut r, input, OperationKind::Failover, PRIMARY_NOT_READY, from.clone(), None, now);
        r.conditions.retain(|v| v.type_ != AUTOMATIC_FAILOVER);
        r.conditions.push(Verdict {
            type_: AUTOMATIC_FAILOVER,
            status: true,
            reason: "FailingOver",
            message: if c.replicas == 1 {
                format!("Job {} is making {from}, the only server, writable again", op.job)
            } else {
                format!("Job {} is promoting the most advanced Ready replica in place of {from}", op.job)
            },
        });
        blocker = Some(Blocker::Running(op));
    }

    let request = switchover::assess(&switchover::Facts {
        target: input.switchover_to,
        previous: r.switchover.as_ref(),
        primary: &r.primary,
        observed: input.observed,
        cluster: c,
        initialized: input.initialized,
        blocker: blocker.as_ref(),
    });
    r.switchover = request.status;
    if let Some(v) = request.verdict {
        r.conditions.push(v);
    }
    if let Some(s) = request.resync_after {
        r.resync(s);
    }
    if let Some(target) = request.start {
        let from = r.primary.clone();
        let op = start(&mut r, input, OperationKind::Switchover, REQUESTED, from.clone(), Some(target.clone()), now);
        let record = SwitchoverStatus {
            target: target.clone(),
            result: SwitchoverResult::Running,
            job: Some(op.job.clone()),
            reason: "SwitchingOver".to_owned(),
            message: format!("Job {} is handing the primary role from {from} to {target}", op.job),
        };
        r.conditions.retain(|v| v.type_ != SWITCHOVER);
        r.conditions.push(switchover::verdict_of(&record));
        r.switchover = Some(record);
        blocker = r.operation.clone().map(Blocker::Running);
    }

    // The rollout's switchover: no record of its own (the rollout status shows it).
    if let Some(target) = input.rollout_switchover_to.filter(|t| *t != r.primary)
        && blocker.is_none()
        && input.initialized
        && input.observed.member(&r.primary).is_some_and(|m| m.ready)
        && input.observed.member(target).is_some_and(|m| m.ready && !m.terminating)
        && c.names.ordinal(target).is_some_and(|o| o < c.replicas)
    {
        let from = r.primary.clone();
        start(&mut r, input, OperationKind::Switchover, ROLLOUT, from, Some(target.to_owned()), now);
    }
    r
}

/// How the running operation's Job stands.
enum Progress {
    Running(Job),
    Succeeded(Job, String),
    Failed(Job, String),
}

fn progress(input: &Input<'_>, op: &Operation, now: Timestamp) -> Progress {
    let job = job_for(input.cluster, op);
    let Some(observed) = input.observed.job(&op.job) else {
        // Just created, or not yet in Metacontroller's cache: keep it; but a Job the
        // API server never accepted must not block every role change forever.
        if now.as_second() - op.started_at.0.as_second() > JOB_APPEAR_SECONDS {
            return Progress::Failed(
                job,
                format!("Job {} was not observed within {JOB_APPEAR_SECONDS}s of its creation", op.job),
            );
        }
        return Progress::Running(job);
    };
    match Observed::job_state(observed) {
        JobState::Running => Progress::Running(job),
        JobState::Failed => {
            let why = input.observed.job_message(&op.job).map_or_else(|| "no result was written".to_owned(), error_of);
            Progress::Failed(job, format!("Job {} failed: {why}", op.job))
        }
        JobState::Succeeded => match input.observed.job_result(&op.job) {
            Some(text) => match promoted(text, input.cluster) {
                Ok(to) => Progress::Succeeded(job, to),
                Err(why) => Progress::Failed(job, format!("Job {} succeeded but {why}", op.job)),
            },
            None => {
                let done = observed.status.as_ref().and_then(|s| s.completion_time.as_ref()).unwrap_or(&op.started_at);
                if now.as_second() - done.0.as_second() > RESULT_WAIT_SECONDS {
                    Progress::Failed(
                        job,
                        format!(
                            "Job {} succeeded but its result was not observed within {RESULT_WAIT_SECONDS}s",
                            op.job
                        ),
                    )
                } else {
                    Progress::Running(job)
                }
            }
        },
    }
}

/// `reason: message` of a script's error result, or the text itself (clipped)
/// when it is not one.
fn error_of(text: &str) -> String {
    clip(&ScriptResult::parse(text).explain()).to_owned()
}

/// The new primary a role-change Job reported, if it is a member of the cluster.
fn promoted(text: &str, c: &Cluster) -> Result<String, String> {
    let result = ScriptResult::parse(text);
    if result.result != "promoted" && result.result != "switched" {
        return Err(format!(
            "its result is {:?}, not promoted or switched: {}",
            result.result,
            clip(&result.explain())
        ));
    }
    let primary = result.primary.unwrap_or_default();
    match c.names.ordinal(&primary) {
        Some(o) if o < c.replicas => Ok(primary),
        _ => Err(format!("it named {primary:?}, which is not a member of the cluster")),
    }
}

fn succeeded(r: &mut Roles, op: &Operation, to: String, now: Timestamp) {
    r.role_changes.push(RoleChange {
        kind: op.kind,
        from: op.from.clone(),
        to: to.clone(),
        reason: op.reason.clone(),
        time: Time(now),
        job: op.job.clone(),
    });
    let excess = r.role_changes.len().saturating_sub(HISTORY);
    r.role_changes.drain(..excess);
    // The outage, if any, was the old primary's.
    r.failover = None;
    if op.kind == OperationKind::Switchover && op.reason == REQUESTED {
        r.switchover = Some(SwitchoverStatus {
            target: op.target.clone().unwrap_or_else(|| to.clone()),
            result: SwitchoverResult::Succeeded,
            job: Some(op.job.clone()),
            reason: "Switched".to_owned(),
            message: format!("{to} took over from {} (Job {})", op.from, op.job),
        });
    }
    r.primary = to;
}

fn failed(r: &mut Roles, op: &Operation, why: &str, now: Timestamp) {
    match op.kind {
        OperationKind::Failover => {
            let mut f = r.failover.clone().unwrap_or_default();
            f.failed_attempts = f.failed_attempts.saturating_add(1);
            f.last_attempt_time = Some(op.started_at.clone());
            f.next_attempt_time = Some(Time(after(now, backoff_seconds(f.failed_attempts))));
            f.last_error = Some(why.to_owned());
            r.failover = Some(f);
        }
        OperationKind::Switchover if op.reason != REQUESTED => {}
        OperationKind::Switchover => {
            r.switchover = Some(SwitchoverStatus {
                target: op.target.clone().unwrap_or_default(),
                result: SwitchoverResult::Failed,
                job: Some(op.job.clone()),
                reason: "SwitchoverFailed".to_owned(),
                message: format!("{why}; {} stays the primary", op.from),
            });
        }
    }
}

/// Seconds to wait after the `n`th failed failover: 10 s, doubling, at most 5 min.
#[must_use]
pub fn backoff_seconds(n: i32) -> i64 {
    let doublings = u32::try_from(n.saturating_sub(1).clamp(0, 5)).unwrap_or(0);
    (10_i64 << doublings).min(300)
}

/// Whether a role-change Job (or a Job seen only through its pods) numbered past
/// `operations_started` exists, in any state. If so, the observed status is
/// older than the Job (Metacontroller can send a parent from before its last
/// status write while the Job it created has already finished). Starting another
/// attempt then would run two role changes for one outage; the full loop saw one
/// failover create and delete Jobs five times that way. Waiting for a sync with
/// the newer status is always safe.
fn ahead_of_status(input: &Input<'_>, operations_started: i32) -> bool {
    // A role-change Job is named `names.job(purpose, n)`, which always ends in `-<n>`:
    // only an observed name with such a suffix in range is worth building names
    // for (usually none is, and this runs on every sync).
    let range = operations_started.saturating_add(1)..=operations_started.saturating_add(16);
    input.observed.job_names().any(|name| {
        let Some(n) = name.rsplit_once('-').and_then(|(_, n)| n.parse::<i32>().ok()).filter(|n| range.contains(n))
        else {
            return false;
        };
        PURPOSES.iter().any(|p| input.cluster.names.job(p, &n.to_string()) == name)
    })
}

/// Records a new operation and emits its Job.
fn start(
    r: &mut Roles,
    input: &Input<'_>,
    kind: OperationKind,
    reason: &str,
    from: String,
    target: Option<String>,
    now: Timestamp,
) -> Operation {
    let c = input.cluster;
    let purpose = purpose(kind);
    // A name no observed Job or Job pod has: a leftover must never pass for this attempt.
    let mut n = r.operations_started.saturating_add(1);
    let mut name = c.names.job(purpose, &n.to_string());
    while input.observed.job(&name).is_some() || input.observed.job_message(&name).is_some() {
        n = n.saturating_add(1);
        name = c.names.job(purpose, &n.to_string());
    }
    let op = Operation { kind, job: name, from, target, reason: reason.to_owned(), started_at: Time(now) };
    r.operations_started = n;
    r.job = Some(job_for(c, &op));
    r.operation = Some(op.clone());
    r.resync(BUSY_SECONDS);
    op
}

fn purpose(kind: OperationKind) -> &'static str {
    match kind {
        OperationKind::Failover => "failover",
        OperationKind::Switchover => "switchover",
    }
}

/// The Job of an operation. The name recorded in status is authoritative.
fn job_for(c: &Cluster, op: &Operation) -> Job {
    let mut vars = vec![env("PRIMARY", op.from.as_str())];
    if let Some(target) = &op.target {
        vars.push(env("TARGET", target.as_str()));
    }
    let script = match op.kind {
        OperationKind::Failover => "failover.sh",
        OperationKind::Switchover => "switchover.sh",
    };
    let mut job = job::build(c, &JobRequest { purpose: purpose(op.kind), suffix: String::new(), script, env: vars });
    job.metadata.name = Some(op.job.clone());
    job
}

fn after(t: Timestamp, seconds: i64) -> Timestamp {
    t.checked_add(SignedDuration::from_secs(seconds)).unwrap_or(t)
}

/// Whole seconds from `now` until `then`, rounded up; zero if passed.
fn seconds_until(now: Timestamp, then: Timestamp) -> i64 {
    let nanos = then.as_nanosecond() - now.as_nanosecond();
    if nanos <= 0 { 0 } else { i64::try_from((nanos + 999_999_999) / 1_000_000_000).unwrap_or(i64::MAX) }
}

/// A result or error message short enough for a condition.
fn clip(s: &str) -> &str {
    match s.char_indices().nth(400) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!([1, 2, 3, 4, 5, 6, 50].map(backoff_seconds), [10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(backoff_seconds(0), 10);
    }

    #[test]
    fn seconds_until_rounds_up() {
        let t = |s: &str| s.parse::<Timestamp>().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(seconds_until(t("2026-01-01T00:00:00.5Z"), t("2026-01-01T00:00:03Z")), 3);
        assert_eq!(seconds_until(t("2026-01-01T00:00:03Z"), t("2026-01-01T00:00:03Z")), 0);
        assert_eq!(seconds_until(t("2026-01-01T00:00:04Z"), t("2026-01-01T00:00:03Z")), 0);
    }
}

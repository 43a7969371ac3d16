//! Role changes: which pod is the writable primary, and how that moves.
//!
//! `status.primary` is the only source of the primary: the `-primary` Service
//! selector, the ConfigMap's `primary` key (which the agents follow) and the
//! replicas' EndpointSlice all derive from it. It moves only here, and only when a
//! role-change Job (failover or switchover) has succeeded and named a member of
//! the cluster in its termination message.
//!
//! At most one role change runs at a time. The operation in flight is
//! `status.operation`, or, when the status does not record it (lost, or older than
//! the Job), the newest running role-change Job, rebuilt from the Job itself (its
//! name gives kind and number, its environment the pods, its annotation the
//! reason). In the sync that sees the Job finish, the outcome is recorded in status.
//! A failed Job is emitted one last time and then dropped; the Job that promoted
//! the current primary is kept until a newer role change has promoted one: with
//! the config ConfigMap's annotations it is what the primary is rebuilt from when
//! the status is lost or stale (see [`crate::memory`]). No sync starts a role
//! change in the sync that finishes one.
//!
//! A role change only starts when it can keep the promise that nothing
//! acknowledged is lost: with R replicas, commits wait for A = 1 acknowledgement
//! (lossless semi-sync; MariaDB has exactly one, and one keeps MySQL the same), so
//! a failover examines E = R - A + 1 = R replicas: every replica must answer
//! (A + E > R). The hook starts it only when that many replica servers run (or the
//! old primary's server runs: then it is fenced and, being the most advanced, may
//! be promoted again); the Job checks it again against the servers that answer
//! (`QUORUM`), and grants the old primary's exception only when at least one
//! replica answers to compare it with (an old primary alone may be back from an
//! empty or older volume; issue 31.3). The annotation `mysqlhook.dev/force-failover: <primary pod>` lets a
//! human force a failover of that primary with fewer, accepting the loss.
//!
//! [`failover`] decides when the primary has failed; [`switchover`] handles the
//! `mysqlhook.dev/switchover-to` annotation; [`crate::rollout`] may ask for a
//! switchover before it updates the primary (operation reason `Rollout`), served
//! after the other two and only when nothing else runs.

pub mod failover;
pub mod position;
pub mod switchover;

use k8s_openapi::{
    api::batch::v1::Job,
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::{SignedDuration, Timestamp},
};

use crate::{
    api::Flavor,
    api::{
        DrainSwitchoverStatus, FailoverSpec, FailoverStatus, MySQLStatus, Operation, OperationKind, RoleChange,
        SwitchoverResult, SwitchoverStatus,
    },
    build::{
        job::{self, JobRequest},
        pod::env,
    },
    jobs::{self, ScriptResult},
    memory::{self, Memory, RoleJob},
    model::Cluster,
    observed::{JobState, Observed},
};

/// The annotation on a `MySQL` that requests a switchover to the named pod.
pub const SWITCHOVER_TO: &str = "mysqlhook.dev/switchover-to";
/// The annotation on a `MySQL` that forces a failover of the named (failed) primary
/// with fewer replicas answering than the quorum: a human's decision to accept
/// losing acknowledged commits that only the silent replicas hold.
pub const FORCE_FAILOVER: &str = "mysqlhook.dev/force-failover";
/// The annotation on a role-change Job that records why it was started.
pub const REASON: &str = "mysqlhook.dev/reason";
/// Condition: whether automatic failover can act, and what it is doing.
pub const AUTOMATIC_FAILOVER: &str = "AutomaticFailover";
/// Condition: the state of the requested switchover (present while requested).
pub const SWITCHOVER: &str = "Switchover";

/// Operation reasons.
const REQUESTED: &str = "Requested";
const ROLLOUT: &str = "Rollout";
const PRIMARY_NOT_READY: &str = "PrimaryNotReady";
const PRIMARY_TERMINATING: &str = "PrimaryTerminating";
/// The reason of an operation rebuilt from a Job that carries none.
const UNKNOWN: &str = "Unknown";

/// Role changes kept in `status.roleChanges`.
const HISTORY: usize = 10;
/// How often to look again while a role-change Job runs.
const BUSY_SECONDS: u32 = 10;
/// How long a succeeded Job's pod (with the result) may take to be observed.
const RESULT_WAIT_SECONDS: i64 = 120;
/// How long a created Job may stay unobserved (rejected by the API server?).
const JOB_APPEAR_SECONDS: i64 = 300;
/// Job purposes that change roles.
const PURPOSES: [&str; 2] = memory::ROLE_PURPOSES;

/// Replica acknowledgements a commit waits for (A). MariaDB's semi-sync has exactly
/// one; MySQL could wait for more (MOCO: half the servers) and examine fewer
/// replicas in a failover, at the price of blocking writes sooner: one keeps both
/// flavors on the same arithmetic, which the MariaDB suite proves.
#[must_use]
pub fn acknowledgements(_flavor: Flavor, servers: i32) -> i32 {
    i32::from(servers > 1)
}

/// Replicas a failover must examine (E) so that A + E > R: every acknowledged
/// commit is then on an examined replica, and the most advanced one holds it.
#[must_use]
pub fn quorum(flavor: Flavor, servers: i32) -> i32 {
    let replicas = (servers - 1).max(0);
    (replicas - acknowledgements(flavor, servers) + 1).clamp(0, replicas)
}

/// The members that never held data (issue 31.8): the volume claim of the
/// server is observed and still `Pending` (bound to no volume yet), and its pod,
/// if there is one, was never scheduled (`PodScheduled` is not True). A scale-up
/// onto nodes with no room leaves such members; they cannot have acknowledged a
/// commit, so a failover does not wait to examine them (they never answer: with
/// every replica counted, one of them blocked every failover). A claim that is
/// missing from the request is no proof of anything and counts as usual. Should
/// one start meanwhile, the failover Job does not count a member that holds
/// nothing towards its quorum either (`agent/src/decide.rs`).
#[must_use]
pub fn never_provisioned(c: &Cluster, observed: &Observed<'_>) -> Vec<String> {
    (0..c.replicas)
        .map(|i| (c.names.pod(i), crate::grow::claim_name(c, i)))
        .filter(|(pod, claim)| {
            let pending = observed
                .claim(claim)
                .and_then(|pvc| pvc.status.as_ref()?.phase.as_deref())
                .is_some_and(|phase| phase == "Pending");
            let scheduled = observed.member(pod).is_some_and(|m| {
                m.pod
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "PodScheduled" && c.status == "True"))
                    || m.pod.spec.as_ref().is_some_and(|s| s.node_name.is_some())
            });
            pending && !scheduled && *pod != c.primary
        })
        .map(|(pod, _)| pod)
        .collect()
}

/// The servers whose replicas a failover examines: `spec.replicas`, or more
/// while a scale-down is unproven ([`Input::quorum_servers`]), less the members
/// that never held data ([`never_provisioned`]).
fn examined_servers(input: &Input<'_>) -> i32 {
    let never = i32::try_from(never_provisioned(input.cluster, input.observed).len()).unwrap_or(0);
    input.quorum_servers.max(input.cluster.replicas) - never
}

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
    /// When the bootstrap Job completed, if it is still observed: the bootstrapped
    /// primary has held its role since then (see [`failover::Facts::primary_since`]).
    pub bootstrapped_at: Option<Timestamp>,
    /// False in finalize: running operations go on, none starts.
    pub may_start: bool,
    /// What the hook remembers (the primary's epoch, the Job counter).
    pub memory: &'a Memory,
    /// The pod the [`FORCE_FAILOVER`] annotation names.
    pub force_failover: Option<&'a str>,
    /// The number of servers whose replicas a failover examines: more than
    /// `spec.replicas` while a scale-down is not proven safe ([`crate::scale_down`]).
    pub quorum_servers: i32,
    /// What the current primary is known to have executed ([`position`]).
    pub primary_position: Option<&'a position::Known>,
    pub now: Timestamp,
}

/// The role-change part of one sync's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Roles {
    /// The primary after this sync.
    pub primary: String,
    /// The number of the role change that made it the primary (0: the bootstrap).
    pub epoch: i32,
    /// The one role-change Job to emit, if any.
    pub job: Option<Job>,
    /// Observed role-change Jobs emitted as they are ([`jobs::keep`]): the one that
    /// promoted the current primary (the record of it), and any other that still
    /// runs (leaving it out would delete it in the middle of a promotion).
    pub kept: Vec<Job>,
    pub operation: Option<Operation>,
    pub operations_started: i32,
    pub failover: Option<FailoverStatus>,
    pub switchover: Option<SwitchoverStatus>,
    pub drain_switchover: Option<DrainSwitchoverStatus>,
    pub role_changes: Vec<RoleChange>,
    pub conditions: Vec<Verdict>,
    pub resync_after: Option<u32>,
    /// A rollout's switchover failed in this sync: why (the rollout backs off).
    pub rollout_switchover_failed: Option<String>,
    /// The [`FORCE_FAILOVER`] value a forced failover has used, to remember while
    /// the annotation stays (see [`memory::FORCE_FAILOVER_USED`]).
    pub force_failover_used: Option<String>,
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
        epoch: input.memory.primary.as_ref().filter(|p| p.pod == c.primary).map_or(0, |p| p.epoch),
        job: None,
        kept: Vec::new(),
        operation: None,
        operations_started: input.memory.operations_started.max(prev.operations_started),
        failover: prev.failover.clone(),
        switchover: prev.switchover.clone(),
        drain_switchover: prev.drain_switchover.clone(),
        role_changes: prev.role_changes.clone(),
        conditions: Vec::new(),
        resync_after: None,
        rollout_switchover_failed: None,
        // Kept while the annotation still names what it forced.
        force_failover_used: input
            .memory
            .force_failover_used
            .clone()
            .filter(|used| input.force_failover == Some(used.as_str())),
    };
    let role_jobs = memory::role_jobs(input.observed, &c.names);

    let mut blocker = (!input.may_start).then_some(Blocker::Finalizing);
    if let Some(op) = in_flight(input, &role_jobs, now) {
        blocker = Some(match progress(input, &op, now) {
            Progress::Running(job) => {
                r.job = Some(job);
                r.operation = Some(op.clone());
                r.resync(BUSY_SECONDS);
                Blocker::Running(op)
            }
            Progress::Succeeded(job, to, note, fenced) => {
                r.job = Some(job);
                succeeded(&mut r, &op, to, fenced, note.as_deref(), now);
                Blocker::JustFinished
            }
            Progress::Failed(job, why) => {
                r.job = Some(job);
                failed(&mut r, &op, &why, now);
                Blocker::JustFinished
            }
        });
    }
    let current = r.job.as_ref().and_then(|j| j.metadata.name.clone());
    // The record of the current primary, and anything that still runs.
    for rj in &role_jobs {
        let Some(job) = rj.job.filter(|_| Some(rj.name) != current.as_deref()) else { continue };
        let evidence =
            rj.number == r.epoch && memory::promoted_by(input.observed, job, &c.names).is_some_and(|p| p == r.primary);
        if evidence && !r.role_changes.iter().any(|rc| rc.job == rj.name) {
            // The status lost (or never got) the record of the change it came from.
            let fenced = input.observed.job_message(rj.name).and_then(|t| ScriptResult::parse(t).fenced);
            r.role_changes.push(recovered_change(job, rj, &r.primary, fenced, now));
            let excess = r.role_changes.len().saturating_sub(HISTORY);
            r.role_changes.drain(..excess);
        }
        // Kept while the Job controller has not marked it ended, even when its pod
        // has (deleting it then is harmless, but nothing is gained by it).
        if evidence || Observed::job_state(job) == JobState::Running {
            r.kept.push(jobs::keep(job));
        }
    }
    let stray = role_jobs.iter().any(|rj| {
        rj.job.is_some_and(|j| input.observed.role_job_state(j) == JobState::Running)
            && Some(rj.name) != current.as_deref()
    }) || input.observed.job_pods_active(&PURPOSES, current.as_deref());
    if blocker.is_none() && stray {
        blocker = Some(Blocker::Stray);
        r.resync(BUSY_SECONDS);
    }

    // A primary being deleted (a drain, an eviction) hands over inside its grace
    // period, while its server still answers: seconds of refused writes, not a failover.
    // A failed attempt backs off (each attempt freezes writes while it fences).
    let draining = input.observed.member(&r.primary).is_some_and(|m| m.terminating && m.mysqld_running);
    if !draining || r.drain_switchover.as_ref().is_some_and(|d| d.pod != r.primary) {
        r.drain_switchover = None;
    }
    let drain_wait = r
        .drain_switchover
        .as_ref()
        .and_then(|d| d.next_attempt_time.as_ref())
        .map(|t| t.0.as_second() - now.as_second())
        .filter(|&seconds| seconds > 0);
    if let Some(seconds) = drain_wait {
        r.resync(u32::try_from(seconds).unwrap_or(BUSY_SECONDS));
    }
    if blocker.is_none()
        && drain_wait.is_none()
        && input.initialized
        && c.replicas > 1
        && draining
        && let Some(target) = input
            .observed
            .ready_members()
            .filter(|m| m.name != r.primary && !m.terminating && m.ordinal < c.replicas)
            .map(|m| m.name.to_owned())
            .next()
    {
        let from = r.primary.clone();
        let op = start(&mut r, input, OperationKind::Switchover, PRIMARY_TERMINATING, from, Some(target), now);
        blocker = Some(Blocker::Running(op));
    }

    let outage = failover::assess(&failover::Facts {
        primary: &r.primary,
        observed: input.observed,
        replicas: c.replicas,
        quorum: quorum(c.flavor, examined_servers(input)),
        forced: force_applies(input).is_some_and(|p| p == r.primary),
        force_used: input.force_failover.is_some_and(|p| p == r.primary) && force_applies(input).is_none(),
        spec: input.failover,
        initialized: input.initialized,
        primary_since: primary_since(input, &r),
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
            message: format!(
                "Job {} is making the most advanced server writable in place of {from} (which may be {from} again, once fenced)",
                op.job
            ),
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

/// The operation in flight: the status's, unless a newer role-change Job runs that
/// it does not record (the status is stale or was lost): then that Job's, rebuilt
/// from the Job.
fn in_flight(input: &Input<'_>, role_jobs: &[RoleJob<'_>], now: Timestamp) -> Option<Operation> {
    let recorded = input.previous.operation.clone();
    let running = role_jobs
        .iter()
        .filter(|rj| rj.job.is_some_and(|j| input.observed.role_job_state(j) == JobState::Running))
        .max_by_key(|rj| rj.number);
    match (recorded, running) {
        (Some(op), Some(rj)) => {
            let n = memory::role_job_number(&input.cluster.names, &op.job).map_or(0, |(_, n)| n);
            if n >= rj.number { Some(op) } else { rj.job.map(|job| rebuild(job, rj, now)) }
        }
        (Some(op), None) => Some(op),
        (None, Some(rj)) => rj.job.map(|job| rebuild(job, rj, now)),
        (None, None) => None,
    }
}

/// An operation as its Job describes it.
fn rebuild(job: &Job, rj: &RoleJob<'_>, now: Timestamp) -> Operation {
    let kind = if rj.purpose == "failover" { OperationKind::Failover } else { OperationKind::Switchover };
    let reason = job.metadata.annotations.as_ref().and_then(|a| a.get(REASON)).map_or(UNKNOWN, String::as_str);
    Operation {
        kind,
        job: rj.name.to_owned(),
        from: memory::job_env(job, "PRIMARY").unwrap_or_default().to_owned(),
        target: memory::job_env(job, "TARGET").map(str::to_owned),
        from_gtid: memory::job_env(job, "PRIMARY_GTID").map(str::to_owned),
        reason: reason.to_owned(),
        started_at: job.metadata.creation_timestamp.clone().unwrap_or(Time(now)),
    }
}

/// The record of a role change rebuilt from its Job.
fn recovered_change(job: &Job, rj: &RoleJob<'_>, to: &str, fenced: Option<bool>, now: Timestamp) -> RoleChange {
    let op = rebuild(job, rj, now);
    let time = job.status.as_ref().and_then(|s| s.completion_time.clone()).unwrap_or(op.started_at);
    RoleChange {
        kind: op.kind,
        from: op.from,
        to: to.to_owned(),
        reason: op.reason,
        time,
        job: op.job,
        old_primary_fenced: fenced,
    }
}

/// How the running operation's Job stands.
enum Progress {
    Running(Job),
    /// The pod it made writable, what went wrong after that, if anything, and the
    /// report's `fenced` (a failover's old primary).
    Succeeded(Job, String, Option<String>, Option<bool>),
    Failed(Job, String),
}

fn progress(input: &Input<'_>, op: &Operation, now: Timestamp) -> Progress {
    let Some(observed) = input.observed.job(&op.job) else {
        // The same Job as when it started: forced then if the annotation named its primary.
        let job = job_for(input, op, input.force_failover == Some(op.from.as_str()));
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
    // Emitted as observed: the Job was built from the state of its own time.
    let job = jobs::keep(observed);
    match input.observed.role_job_state(observed) {
        JobState::Running => Progress::Running(job),
        JobState::Failed => {
            let text = input.observed.job_message(&op.job);
            let why = text.map_or_else(|| "no result was written".to_owned(), error_of);
            // A promotion happened before the failure: the promoted server is
            // writable, so it is the primary now, whatever failed after.
            let result = text.map(ScriptResult::parse);
            let fenced = result.as_ref().and_then(|r| r.fenced);
            match result.and_then(|r| r.promoted).filter(|p| is_member(p, input.cluster)) {
                Some(to) => {
                    Progress::Succeeded(job, to, Some(format!("Job {} failed after promoting: {why}", op.job)), fenced)
                }
                None => Progress::Failed(job, format!("Job {} failed: {why}", op.job)),
            }
        }
        JobState::Succeeded => match input.observed.job_result(&op.job) {
            Some(text) => match promoted(text, input.cluster) {
                Ok(to) => Progress::Succeeded(job, to, None, ScriptResult::parse(text).fenced),
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

fn is_member(pod: &str, c: &Cluster) -> bool {
    c.names.ordinal(pod).is_some_and(|o| o < c.replicas)
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
    if is_member(&primary, c) {
        Ok(primary)
    } else {
        Err(format!("it named {primary:?}, which is not a member of the cluster"))
    }
}

/// `to`: the pod promoted; `fenced`: whether the report says the old primary was fenced.
fn succeeded(r: &mut Roles, op: &Operation, to: String, fenced: Option<bool>, note: Option<&str>, now: Timestamp) {
    // Role-change Jobs are named `<cluster>-<purpose>-<n>`: the primary's new epoch.
    if let Some(n) = op.job.rsplit_once('-').and_then(|(_, n)| n.parse().ok()) {
        r.epoch = n;
    }
    r.role_changes.push(RoleChange {
        kind: op.kind,
        from: op.from.clone(),
        to: to.clone(),
        reason: op.reason.clone(),
        time: Time(now),
        job: op.job.clone(),
        old_primary_fenced: fenced,
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
            message: match note {
                Some(note) => format!("{to} took over from {} ({note})", op.from),
                None => format!("{to} took over from {} (Job {})", op.from, op.job),
            },
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
        OperationKind::Switchover if op.reason == ROLLOUT => r.rollout_switchover_failed = Some(why.to_owned()),
        OperationKind::Switchover if op.reason == PRIMARY_TERMINATING => {
            let mut d = r
                .drain_switchover
                .clone()
                .filter(|d| d.pod == op.from)
                .unwrap_or_else(|| DrainSwitchoverStatus { pod: op.from.clone(), ..DrainSwitchoverStatus::default() });
            d.failed_attempts = d.failed_attempts.saturating_add(1);
            d.next_attempt_time = Some(Time(after(now, backoff_seconds(d.failed_attempts))));
            d.last_error = Some(why.to_owned());
            r.drain_switchover = Some(d);
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
    // Fixed when the operation starts: the Job is rebuilt from the record until
    // it is observed, and a later inspection must not change its environment.
    let from_gtid = match kind {
        OperationKind::Failover => input.primary_position.filter(|k| k.pod == from).map(|k| k.gtid.clone()),
        OperationKind::Switchover => None,
    };
    let op = Operation { kind, job: name, from, target, from_gtid, reason: reason.to_owned(), started_at: Time(now) };
    r.operations_started = n;
    let forced = kind == OperationKind::Failover && force_applies(input).is_some_and(|p| p == op.from);
    r.job = Some(job_for(input, &op, forced));
    if forced {
        r.force_failover_used = Some(op.from.clone());
    }
    r.operation = Some(op.clone());
    r.resync(BUSY_SECONDS);
    op
}

/// The pod the [`FORCE_FAILOVER`] annotation forces a failover of, unless a
/// forced failover has used that value already (issue 31.2: a leftover annotation
/// must not force every later failover of the same pod).
fn force_applies<'a>(input: &Input<'a>) -> Option<&'a str> {
    input.force_failover.filter(|p| input.memory.force_failover_used.as_deref() != Some(*p))
}

fn purpose(kind: OperationKind) -> &'static str {
    match kind {
        OperationKind::Failover => "failover",
        OperationKind::Switchover => "switchover",
    }
}

/// The Job of an operation. The name recorded in status is authoritative; the
/// reason rides along as an annotation, so the operation can be rebuilt from the
/// Job alone.
fn job_for(input: &Input<'_>, op: &Operation, forced: bool) -> Job {
    let c = input.cluster;
    let mut vars = vec![
        env("PRIMARY", op.from.as_str()),
        env("SEMISYNC_ACKS", acknowledgements(c.flavor, c.replicas).max(1).to_string()),
    ];
    if let Some(target) = &op.target {
        vars.push(env("TARGET", target.as_str()));
    }
    // The epoch the promoted server records (issue 31.1): the Job's number.
    if let Some(n) = op.job.rsplit_once('-').and_then(|(_, n)| n.parse::<i32>().ok()) {
        vars.push(env("EPOCH", n.to_string()));
    }
    let script = match op.kind {
        OperationKind::Failover => {
            // More than the members answering while a scale-down is unproven
            // (issue 31.4): met only by the old primary holding everything, or FORCE.
            vars.push(env("QUORUM", quorum(c.flavor, examined_servers(input)).to_string()));
            if forced {
                vars.push(env("FORCE", "1"));
            }
            // What the old primary must still hold to be promoted under the
            // quorum exception (issue 31.3).
            if let Some(gtid) = &op.from_gtid {
                vars.push(env("PRIMARY_GTID", gtid.as_str()));
            }
            "failover.sh"
        }
        OperationKind::Switchover => "switchover.sh",
    };
    let mut job = job::build(
        c,
        &JobRequest {
            purpose: purpose(op.kind),
            suffix: String::new(),
            program: job::Program::Script(script),
            env: vars,
        },
    );
    job.metadata.name = Some(op.job.clone());
    job.metadata.annotations = Some(std::collections::BTreeMap::from([(REASON.to_owned(), op.reason.clone())]));
    // A switchover has one attempt. Its refusals are answers, not accidents: a
    // primary that does not answer (its pod force-deleted, its node gone) stays
    // unreachable, and the Job's three retries with the Job controller's back-off
    // held the one role-change slot for over two minutes while the failover that
    // could act waited (real-server scenario 13). The hook retries where a retry
    // can help: a drain's and a rollout's switchover back off and start again.
    if op.kind == OperationKind::Switchover
        && let Some(spec) = job.spec.as_mut()
    {
        spec.backoff_limit = Some(0);
    }
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

/// When the current primary took its role, as far as the cluster shows it: the
/// last recorded role change that made it the primary, or for the bootstrapped
/// primary (epoch 0) the bootstrap Job's completion.
fn primary_since(input: &Input<'_>, r: &Roles) -> Option<Timestamp> {
    if r.epoch == 0 {
        return input.bootstrapped_at;
    }
    r.role_changes.iter().rev().find(|rc| rc.to == r.primary).map(|rc| rc.time.0)
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

//! Ordered rollouts of a new pod template (a new version, image, configuration,
//! resources, or a new hook version, whose image installs the scripts): replicas
//! first, one at a time, then a switchover, then the old primary.
//!
//! The hook drives the StatefulSet's `rollingUpdate.partition`: pods with an
//! ordinal at or above it get the new revision. Whether the template is new is
//! decided by one annotation, its hash ([`statefulset::TEMPLATE_HASH`]), compared
//! with the observed StatefulSet's. A new template is always emitted with the
//! partition at `replicas` (every pod held), whatever the observed partition or
//! revisions say: so a spec edit in the middle of a walk, or a StatefulSet whose
//! status is stale, never lets the controller replace pods (the primary among
//! them) outside the hook's order; the walk starts again from the top. Once the
//! StatefulSet controller reports the new `status.updateRevision`, the hook lowers
//! the partition one ordinal per step, each step only when every released pod is
//! Ready on the new revision (pod label `controller-revision-hash`), every server
//! is Ready and no role change runs. The rollout is over when the controller
//! reports the new revision as `currentRevision`, not when the last pod carries
//! its label: only then is every pod held again (partition = replicas) and
//! `status.version` the new version. Membership (scaling) is not part of the
//! template, so it never starts a rollout.
//!
//! A partition releases ordinals from the top down, so the order follows from the
//! primary's ordinal `k`: first the replicas above `k`, then a switchover to an
//! updated Ready replica (the highest), then `k` and the rest below it. A primary
//! at ordinal 0 (the usual case) thus costs exactly one role change. A primary at
//! the highest ordinal has no updated replica to hand over to: it first hands over
//! to the lowest Ready replica, which later hands over again (two role changes;
//! a partition cannot hold back a higher ordinal than a lower one).
//!
//! Before bootstrap the StatefulSet rolls freely, except while a restore Job runs:
//! then every pod is held, since a restart kills the restore's load.
//!
//! A single server has no one to hand over to: it is updated in place (a short
//! outage, as any restart of it).
//!
//! A step (one pod's update, or the switchover) that has not finished after
//! [`STEP_TIMEOUT_SECONDS`] stops the rollout: the `Progressing` condition turns
//! False with reason `RolloutStuck` and no further pod is touched; it goes on by
//! itself if the pod becomes Ready, and reverting the spec rolls back the same way.

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};

use crate::{
    api::{MySQLStatus, RolloutStatus},
    build::statefulset,
    model::Cluster,
    observed::{Member, Observed},
    roles::Verdict,
};

/// Condition: whether a rollout runs.
pub const PROGRESSING: &str = "Progressing";
/// How long one step may take.
pub const STEP_TIMEOUT_SECONDS: i64 = 600;
const BUSY_SECONDS: u32 = 10;
const REVISION: &str = "controller-revision-hash";

/// What decides the rollout.
pub struct Facts<'a> {
    pub cluster: &'a Cluster,
    pub observed: &'a Observed<'a>,
    pub previous: &'a MySQLStatus,
    pub initialized: bool,
    /// Before bootstrap, a restore Job runs on some server.
    pub restoring: bool,
    /// The servers' pod template this sync emits ([`statefulset::template`]).
    pub template: &'a k8s_openapi::api::core::v1::PodTemplateSpec,
    pub now: Timestamp,
}

/// This sync's rollout step.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The StatefulSet partition to emit.
    pub partition: i32,
    /// A switchover to ask [`crate::roles`] for, before the primary is updated.
    pub switchover_to: Option<String>,
    pub status: Option<RolloutStatus>,
    /// `status.version`.
    pub version: Option<String>,
    pub verdict: Verdict,
    pub resync_after: Option<u32>,
}

fn verdict(status: bool, reason: &'static str, message: String) -> Verdict {
    Verdict { type_: PROGRESSING, status, reason, message }
}

fn revision<'a>(m: &Member<'a>) -> Option<&'a str> {
    m.pod.metadata.labels.as_ref()?.get(REVISION).map(String::as_str)
}

/// Decides the partition and the next step: hold a new template, wait for the
/// StatefulSet controller to report it, then walk the partition down.
#[must_use]
pub fn plan(f: &Facts<'_>) -> Plan {
    let c = f.cluster;
    let prev = f.previous;
    if !f.initialized && f.restoring {
        // A restore loads for hours: a restart kills the load and, after the Job's
        // retries, fails the restore. A new template waits until it has finished
        // (then pods roll freely, as below).
        let v = verdict(
            false,
            "WaitingForRestore",
            "pods are held while restore Jobs run: a new pod template reaches the servers once the restore has finished"
                .to_owned(),
        );
        return Plan { version: Some(c.version.clone()), ..idle(c, None, v) };
    }
    if !f.initialized {
        // Before bootstrap nothing is writable, and a fixed spec must reach pods
        // that cannot start: the StatefulSet rolls freely.
        let v = verdict(false, "Initializing", "pods roll freely until the first primary is bootstrapped".to_owned());
        return Plan { partition: 0, version: Some(c.version.clone()), ..idle(c, None, v) };
    }
    let Some(sts) = f.observed.stateful_set else {
        return idle(c, prev.version.clone(), verdict(false, "UpToDate", "creating the servers".to_owned()));
    };
    if statefulset::template_hash(&sts.spec.template) != statefulset::template_hash(f.template) {
        return hold_new_template(f);
    }
    // The observed template is the desired one: the partition it shows is one this
    // hook emitted for it.
    let observed_partition = sts
        .spec
        .update_strategy
        .as_ref()
        .and_then(|u| u.rolling_update.as_ref())
        .and_then(|r| r.partition)
        .unwrap_or(0)
        .clamp(0, c.replicas);
    let status = sts.status.as_ref();
    let fresh = match (status.and_then(|s| s.observed_generation), sts.metadata.generation) {
        (Some(seen), Some(generation)) => seen >= generation,
        _ => true,
    };
    let (Some(update_revision), true) = (status.and_then(|s| s.update_revision.as_deref()), fresh) else {
        return wait_for_revisions(f, observed_partition);
    };
    let members: Vec<&Member<'_>> = f.observed.members.values().filter(|m| m.ordinal < c.replicas).collect();
    // Done only once the StatefulSet controller says so: it moves `currentRevision`
    // when every pod is updated and Ready. Until then a pod deleted below the
    // partition comes back on the *old* template (after a major upgrade: a crash
    // loop over a newer data directory), so the partition stays where the walk
    // left it and `status.version` keeps the old version.
    let complete = status.and_then(|s| s.current_revision.as_deref()) == Some(update_revision);
    if complete && members.iter().all(|m| revision(m) == Some(update_revision)) {
        return idle(
            c,
            Some(c.version.clone()),
            verdict(false, "UpToDate", format!("every server runs revision {update_revision}")),
        );
    }
    walk(f, &members, update_revision, observed_partition)
}

/// Nothing rolls: every pod is held (partition = replicas).
fn idle(c: &Cluster, version: Option<String>, v: Verdict) -> Plan {
    Plan { partition: c.replicas, switchover_to: None, status: None, version, verdict: v, resync_after: None }
}

/// A new pod template (a spec change, a new hook version, or a change in the middle
/// of a walk): every pod is held, whatever the observed partition or revisions
/// say, and the walk starts again from the top once the StatefulSet controller
/// has reported the new revision. A template change never reaches a pod the walk
/// has not released.
fn hold_new_template(f: &Facts<'_>) -> Plan {
    let c = f.cluster;
    let prev = f.previous;
    let step = "hold every pod for the new template".to_owned();
    let step_started_at =
        prev.rollout.as_ref().filter(|r| r.step == step).map_or(Time(f.now), |r| r.step_started_at.clone());
    let record = RolloutStatus {
        from_version: prev.version.clone(),
        to_version: c.version.clone(),
        update_revision: String::new(),
        partition: c.replicas,
        updated: Vec::new(),
        step,
        step_started_at,
        switchover_failures: 0,
        next_switchover_time: None,
        last_switchover_error: None,
    };
    Plan {
        partition: c.replicas,
        switchover_to: None,
        status: Some(record),
        version: prev.version.clone(),
        verdict: verdict(
            true,
            "Updating",
            format!(
                "new pod template (version {}, config {}): every pod is held until the StatefulSet reports its revision",
                c.version, c.config_hash
            ),
        ),
        resync_after: Some(BUSY_SECONDS),
    }
}

/// The template is current but the StatefulSet controller has not reported its
/// revisions yet: keep the partition this template was emitted with.
fn wait_for_revisions(f: &Facts<'_>, observed_partition: i32) -> Plan {
    let prev = f.previous;
    Plan {
        partition: observed_partition,
        switchover_to: None,
        status: prev.rollout.clone(),
        version: prev.version.clone(),
        verdict: verdict(
            prev.rollout.is_some(),
            "Waiting",
            "waiting for the StatefulSet controller to report its revisions".to_owned(),
        ),
        resync_after: Some(BUSY_SECONDS),
    }
}

/// One step of the walk: release the next pod, ask for a switchover, or wait.
fn walk(f: &Facts<'_>, members: &[&Member<'_>], update_revision: &str, observed_partition: i32) -> Plan {
    let c = f.cluster;
    let n = c.replicas;
    let prev = f.previous;
    let on_new = |m: &Member<'_>| revision(m) == Some(update_revision);
    let updated: Vec<String> = members.iter().filter(|m| on_new(m)).map(|m| m.name.to_owned()).collect();
    let released_not_ready: Vec<&str> =
        members.iter().filter(|m| m.ordinal >= observed_partition && !(m.ready && on_new(m))).map(|m| m.name).collect();
    let missing: Vec<String> = (0..n).filter(|o| !f.observed.members.contains_key(o)).map(|o| c.names.pod(o)).collect();
    let unready: Vec<&str> = members.iter().filter(|m| !m.ready).map(|m| m.name).collect();
    let primary_ordinal = c.names.ordinal(&c.primary).unwrap_or(0);
    let prev_rollout = prev.rollout.as_ref().filter(|r| r.update_revision == update_revision);

    // The next step, or why there is none yet.
    let mut partition = observed_partition;
    let mut switchover_to = None;
    let (step, waiting) = if !released_not_ready.is_empty() {
        (
            prev_rollout.map_or_else(|| format!("update {}", released_not_ready.join(", ")), |r| r.step.clone()),
            Some(format!("waiting for {} to be Ready on revision {update_revision}", released_not_ready.join(", "))),
        )
    } else if !missing.is_empty() || !unready.is_empty() || prev.operation.is_some() {
        let why = if let Some(op) = &prev.operation {
            format!("waiting for the {} Job {} to finish", format!("{:?}", op.kind).to_lowercase(), op.job)
        } else {
            format!(
                "waiting for every server to be Ready ({} not)",
                [missing.join(", "), unready.join(", ")].join(" ").trim()
            )
        };
        (prev_rollout.map_or_else(|| "wait for a healthy cluster".to_owned(), |r| r.step.clone()), Some(why))
    } else {
        // Everything released is Ready on the new revision: release the next pod.
        let mut next = observed_partition - 1;
        while next >= 0 && f.observed.members.get(&next).is_some_and(&on_new) {
            next -= 1;
        }
        if next < 0 {
            // Every pod is Ready on the new revision; the controller has not yet
            // made it current (see `plan`).
            (
                prev_rollout.map_or_else(|| "complete the update".to_owned(), |r| r.step.clone()),
                Some(format!("waiting for the StatefulSet controller to make revision {update_revision} current")),
            )
        } else if next == primary_ordinal && n > 1 {
            let updated_replica = members
                .iter()
                .filter(|m| m.ordinal > next && m.ready && on_new(m) && m.name != c.primary)
                .max_by_key(|m| m.ordinal);
            let fallback = members.iter().filter(|m| m.ready && m.name != c.primary).min_by_key(|m| m.ordinal);
            let backoff = prev_rollout.and_then(|r| r.next_switchover_time.as_ref()).filter(|t| f.now < t.0);
            match updated_replica.or(fallback) {
                Some(target) if backoff.is_some() => (
                    format!("switchover {} to {}", c.primary, target.name),
                    Some(format!(
                        "the last switchover failed ({}); the next one starts at {}",
                        prev_rollout.and_then(|r| r.last_switchover_error.as_deref()).unwrap_or("no reason"),
                        backoff.map(|t| crate::jobs::seconds(t.0)).unwrap_or_default()
                    )),
                ),
                Some(target) => {
                    switchover_to = Some(target.name.to_owned());
                    (format!("switchover {} to {}", c.primary, target.name), None)
                }
                None => ("switchover".to_owned(), Some("no Ready replica to hand the primary role to".to_owned())),
            }
        } else {
            partition = next.max(0);
            (format!("update {}", c.names.pod(partition)), None)
        }
    };
    let step_started_at = prev_rollout.filter(|r| r.step == step).map_or(Time(f.now), |r| r.step_started_at.clone());
    let overdue = f.now.as_second() - step_started_at.0.as_second() > STEP_TIMEOUT_SECONDS;
    let from_version = prev.version.clone();
    let record = |partition| RolloutStatus {
        from_version: from_version.clone(),
        to_version: c.version.clone(),
        update_revision: update_revision.to_owned(),
        partition,
        updated: updated.clone(),
        step: step.clone(),
        step_started_at: step_started_at.clone(),
        switchover_failures: prev_rollout.map_or(0, |r| r.switchover_failures),
        next_switchover_time: prev_rollout.and_then(|r| r.next_switchover_time.clone()),
        last_switchover_error: prev_rollout.and_then(|r| r.last_switchover_error.clone()),
    };
    let progress = format!("{}/{n} servers on revision {update_revision}", updated.len());
    if overdue && (waiting.is_some() || switchover_to.is_some()) {
        return Plan {
            partition: observed_partition,
            switchover_to: None,
            status: Some(record(observed_partition)),
            version: prev.version.clone(),
            verdict: verdict(
                false,
                "RolloutStuck",
                format!(
                    "step {step:?} has not finished in {STEP_TIMEOUT_SECONDS}s ({}); the rollout stopped and no other server is touched; it resumes when this clears, or revert the spec to roll back. {progress}",
                    waiting.as_deref().unwrap_or("the switchover did not complete")
                ),
            ),
            resync_after: Some(BUSY_SECONDS),
        };
    }
    let message = match &waiting {
        Some(w) => format!("{step}: {w}; {progress}"),
        None => format!("{step}; {progress}"),
    };
    Plan {
        partition,
        switchover_to,
        status: Some(record(partition)),
        version: prev.version.clone(),
        verdict: verdict(true, "Updating", message),
        resync_after: Some(BUSY_SECONDS),
    }
}

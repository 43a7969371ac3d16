//! Automatic failover: when has the primary failed, and may a replica replace it?
//!
//! The primary has failed when its pod has not been Ready for longer than
//! `spec.failover.gracePeriodSeconds`. The clock starts at the pod's Ready
//! condition `lastTransitionTime`; when that says nothing about the outage (the pod
//! is missing, being deleted, or has no Ready condition yet) it starts at the first
//! sync that saw it so, recorded in `status.failover.primaryNotReadySince`; when
//! both exist the earlier wins, so a pod recreated after its deletion does not
//! restart the grace period. The clock never starts before the primary took its
//! role (the bootstrap Job's completion, or the last role change to it): right
//! after a bootstrap the first primary is not Ready yet, and that is no outage.
//!
//! The grace period is for outages that may end by themselves (a slow probe, a
//! network blip). A primary whose server died during this outage, or caused it
//! (the mysqld container's last run ended after the primary took its role and no
//! more than [`DIED_MARGIN_SECONDS`] before the pod turned NotReady), cannot: every
//! server starts read-only and only a Job opens it again. Then the failover starts
//! at once (issue 35.1: a killed primary was writable again only after the whole
//! grace period).
//! Then, if no other role change is in flight and no
//! backoff after a failed attempt runs, a failover starts when it can promote
//! someone safely: the old primary's server still runs (a primary that restarted
//! read-only: the Job fences it and, as the most advanced server, makes it writable
//! again; this is also how a single server recovers), or a replica is a candidate
//! (Ready, or its agent's `/candidate` probe passes: with the primary gone every
//! replica is NotReady) and at least the quorum of replica servers runs (see
//! [`super::quorum`]). The failover Job examines every candidate again.

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};

use super::{AUTOMATIC_FAILOVER, BUSY_SECONDS, Blocker, Verdict, after, seconds_until};
use crate::{
    api::{FailoverSpec, FailoverStatus},
    observed::Observed,
};

/// How long before the pod turned NotReady its server may have died and still
/// count as this outage's cause: the readiness probe notices within its period
/// times its failure threshold (2 s x 2) plus its timeout, with room for clocks.
pub const DIED_MARGIN_SECONDS: i64 = 15;

/// What [`assess`] looks at.
pub struct Facts<'a> {
    pub primary: &'a str,
    pub observed: &'a Observed<'a>,
    pub replicas: i32,
    /// Replica servers a failover must examine (E).
    pub quorum: i32,
    /// A human forced a failover of this primary with fewer ([`super::FORCE_FAILOVER`]).
    pub forced: bool,
    /// The annotation names this primary but has forced a failover already.
    pub force_used: bool,
    pub spec: &'a FailoverSpec,
    pub initialized: bool,
    /// When the primary took its role (bootstrap or the last role change). The
    /// grace period starts no earlier: a server that was not Ready before it became
    /// the primary (a fresh pod waiting for its bootstrap, a restarted server the
    /// failover Job made writable again) gets a whole grace period to turn Ready.
    pub primary_since: Option<Timestamp>,
    /// The outage recorded so far.
    pub previous: Option<&'a FailoverStatus>,
    /// Why no role change may start now, if one may not.
    pub blocker: Option<&'a Blocker>,
    pub now: Timestamp,
}

/// The verdict on the primary.
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    /// The outage record: `None` while the primary is Ready.
    pub status: Option<FailoverStatus>,
    pub verdict: Verdict,
    /// Start a failover now.
    pub start: bool,
    pub resync_after: Option<u32>,
}

fn verdict(status: bool, reason: &'static str, message: String) -> Verdict {
    Verdict { type_: AUTOMATIC_FAILOVER, status, reason, message }
}

/// Decides whether the primary has failed and a failover should start.
#[must_use]
pub fn assess(f: &Facts<'_>) -> Assessment {
    let idle = |status, verdict| Assessment { status, verdict, start: false, resync_after: None };
    if !f.initialized {
        return idle(
            None,
            verdict(false, "NotInitialized", "no failover before the first primary is bootstrapped".to_owned()),
        );
    }
    let member = f.observed.member(f.primary);
    // Ready replicas, and those whose server answers its agent as a candidate
    // (issue 31.2: with the primary gone every replica is NotReady).
    let candidates: Vec<&str> = f
        .observed
        .members
        .values()
        .filter(|m| m.ready || m.candidate)
        .filter(|m| m.name != f.primary && !m.terminating && m.ordinal < f.replicas)
        .map(|m| m.name)
        .collect();
    let grace = i64::from(f.spec.grace_period_seconds);

    if member.is_some_and(|m| m.ready) {
        let v = if !f.spec.enabled {
            verdict(false, "Disabled", "spec.failover.enabled is false: a failed primary is not replaced".to_owned())
        } else if f.replicas < 2 {
            verdict(
                true,
                "SingleServer",
                format!(
                    "one server: if {} stays not Ready for {grace}s while its server runs (a restart comes back read-only), a Job makes it writable again; there is no replica to fail over to",
                    f.primary
                ),
            )
        } else if candidates.is_empty() {
            verdict(
                false,
                "NoReadyReplica",
                format!("{} serves, but no replica is Ready to take over if it fails", f.primary),
            )
        } else {
            verdict(
                true,
                "Armed",
                format!(
                    "a failover starts if {} stays not Ready for {grace}s; candidates: {}; it needs {} replica server(s) answering",
                    f.primary,
                    candidates.join(", "),
                    f.quorum
                ),
            )
        };
        return idle(None, v);
    }

    // The primary is not Ready: when did that start?
    let from_pod = member.filter(|m| !m.terminating).and_then(|m| m.ready_since);
    let recorded = f.previous.and_then(|p| p.primary_not_ready_since.as_ref()).map(|t| t.0);
    let since = match (recorded, from_pod) {
        (Some(r), Some(p)) => r.min(p),
        (Some(t), None) | (None, Some(t)) => t,
        (None, None) => f.now,
    };
    let took_role = f.primary_since.filter(|p| *p > since).map(|p| p.min(f.now));
    let since = took_role.unwrap_or(since);
    // Its server died during this outage (or caused it), after it took the role:
    // it is read-only now, if it runs at all, and no grace period can change that.
    let died = member
        .and_then(|m| m.mysqld_ended)
        .filter(|t| *t >= after(since, -DIED_MARGIN_SECONDS) && f.primary_since.is_none_or(|p| *t > p));
    let grace = if died.is_some() { 0 } else { grace };
    let mut status = f.previous.cloned().unwrap_or_default();
    if from_pod.is_none() || recorded.is_some() {
        status.primary_not_ready_since = Some(Time(recorded.unwrap_or(f.now)));
    }
    let at = |t: Timestamp| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let state = if member.is_some() { "not Ready" } else { "missing" };
    let mut down = match took_role {
        Some(t) => format!("{} {state} since it became the primary at {}", f.primary, at(t)),
        None => format!("{} {state} since {}", f.primary, at(since)),
    };
    if let Some(t) = died {
        down.push_str(&format!(
            ", its server died at {} and comes back read-only, so the grace period is not waited out",
            at(t)
        ));
    }
    let status = (status != FailoverStatus::default()).then_some(status);
    if !f.spec.enabled {
        return idle(
            status,
            verdict(false, "Disabled", format!("{down}; spec.failover.enabled is false: it is not replaced")),
        );
    }
    let deadline = after(since, grace);
    let wait = |status, v, seconds: i64| Assessment {
        status,
        verdict: v,
        start: false,
        resync_after: Some(u32::try_from(seconds.max(1)).unwrap_or(u32::MAX)),
    };
    if f.now < deadline {
        return wait(
            status,
            verdict(true, "PrimaryNotReady", format!("{down}; failover at {} unless it recovers", at(deadline))),
            seconds_until(f.now, deadline),
        );
    }
    let retry_at = f.previous.and_then(|p| p.next_attempt_time.as_ref()).map(|t| t.0);
    if let (Some(retry_at), Some(p)) = (retry_at.filter(|t| f.now < *t), f.previous) {
        return wait(
            status,
            verdict(
                false,
                "RetryBackoff",
                format!(
                    "{down}; failover attempt {} failed ({}); next attempt at {}",
                    p.failed_attempts,
                    p.last_error.as_deref().unwrap_or("no reason"),
                    at(retry_at)
                ),
            ),
            seconds_until(f.now, retry_at),
        );
    }
    match f.blocker {
        Some(Blocker::Running(op)) if op.kind == crate::api::OperationKind::Failover => {
            return wait(
                status,
                verdict(true, "FailingOver", format!("{down}; Job {} is promoting a replica in its place", op.job)),
                i64::from(BUSY_SECONDS),
            );
        }
        Some(b) => {
            return wait(
                status,
                verdict(true, "Waiting", format!("{down}; failover waits: {}", b.describe())),
                i64::from(BUSY_SECONDS),
            );
        }
        None => {}
    }
    let primary_runs = member.is_some_and(|m| m.mysqld_running);
    let running_replicas = f
        .observed
        .members
        .values()
        .filter(|m| m.name != f.primary && !m.terminating && m.mysqld_running && m.ordinal < f.replicas)
        .count();
    let running_replicas = i32::try_from(running_replicas).unwrap_or(i32::MAX);
    if !primary_runs && candidates.is_empty() {
        return wait(
            status,
            verdict(
                false,
                "NoReadyReplica",
                format!("{down}; no replica is Ready or answers its agent as a candidate, so none can be promoted"),
            ),
            i64::from(BUSY_SECONDS),
        );
    }
    if !primary_runs && running_replicas < f.quorum && !f.forced {
        return wait(
            status,
            verdict(
                false,
                "NoQuorum",
                format!(
                    "{down}; {running_replicas} of {} replica servers run, and a failover must examine {}{} so that no acknowledged commit is lost (it could sit on a replica that does not answer); it waits. To fail over anyway, accepting that loss: kubectl annotate mysql <name> {}={}{}",
                    f.replicas - 1,
                    f.quorum,
                    if f.quorum > f.replicas - 1 {
                        " (a scale-down is not yet proven safe, see ScaleDown: a removed server may hold them)"
                    } else {
                        ""
                    },
                    super::FORCE_FAILOVER,
                    f.primary,
                    if f.force_used {
                        " (the annotation there has forced one failover of it already: remove it, then set it again)"
                    } else {
                        ""
                    }
                ),
            ),
            i64::from(BUSY_SECONDS),
        );
    }
    Assessment {
        status,
        verdict: verdict(true, "FailingOver", format!("{down}; starting a failover")),
        start: true,
        resync_after: None,
    }
}

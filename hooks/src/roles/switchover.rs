//! Switchover on request: `mysqlhook.dev/switchover-to: <pod>` on the `MySQL`.
//!
//! An annotation rather than a spec field: a declarative `spec.primary` would
//! fight automatic failover (after a failover the spec would name the dead pod).
//! The request is handled once per value: its outcome is recorded in
//! `status.switchover` and the same value is not acted on again; removing the
//! annotation forgets the record, so setting it again (after a sync without it)
//! asks again.
//!
//! A request that can never succeed (the pod is not a member) is refused. One that
//! cannot run yet (the target or the primary is not Ready, another role change is
//! in flight, bootstrap has not finished) waits, with the reason in the
//! `Switchover` condition, and runs once nothing stands in the way.

use super::{BUSY_SECONDS, Blocker, SWITCHOVER, Verdict};
use crate::{
    api::{SwitchoverResult, SwitchoverStatus},
    model::Cluster,
    observed::Observed,
};

/// What [`assess`] looks at.
pub struct Facts<'a> {
    /// The annotation's value.
    pub target: Option<&'a str>,
    /// The recorded request.
    pub previous: Option<&'a SwitchoverStatus>,
    pub primary: &'a str,
    pub observed: &'a Observed<'a>,
    pub cluster: &'a Cluster,
    pub initialized: bool,
    pub blocker: Option<&'a Blocker>,
}

/// The request's fate in this sync.
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    /// The record for `status.switchover`.
    pub status: Option<SwitchoverStatus>,
    /// The `Switchover` condition (none without a request).
    pub verdict: Option<Verdict>,
    /// Start a switchover to this pod now.
    pub start: Option<String>,
    pub resync_after: Option<u32>,
}

/// The condition that shows a recorded request.
#[must_use]
pub fn verdict_of(record: &SwitchoverStatus) -> Verdict {
    const REASONS: [&str; 6] =
        ["Switched", "AlreadyPrimary", "NotAMember", "SwitchingOver", "SwitchoverFailed", "Refused"];
    let reason = REASONS.into_iter().find(|r| *r == record.reason).unwrap_or(match record.result {
        SwitchoverResult::Running => "SwitchingOver",
        SwitchoverResult::Succeeded => "Switched",
        SwitchoverResult::Failed => "SwitchoverFailed",
        SwitchoverResult::Refused => "Refused",
    });
    Verdict {
        type_: SWITCHOVER,
        status: record.result == SwitchoverResult::Succeeded,
        reason,
        message: record.message.clone(),
    }
}

/// Decides what to do with the requested switchover.
#[must_use]
pub fn assess(f: &Facts<'_>) -> Assessment {
    let Some(target) = f.target else {
        return Assessment { status: None, verdict: None, start: None, resync_after: None };
    };
    if let Some(record) = f.previous.filter(|p| p.target == target) {
        return Assessment {
            status: Some(record.clone()),
            verdict: Some(verdict_of(record)),
            start: None,
            resync_after: None,
        };
    }
    let handled = |result, reason: &str, message: String| {
        let record =
            SwitchoverStatus { target: target.to_owned(), result, job: None, reason: reason.to_owned(), message };
        Assessment { verdict: Some(verdict_of(&record)), status: Some(record), start: None, resync_after: None }
    };
    let c = f.cluster;
    if c.names.ordinal(target).is_none_or(|o| o >= c.replicas) {
        return handled(
            SwitchoverResult::Refused,
            "NotAMember",
            format!(
                "{target} is not a server of this cluster ({}..{}); set the annotation to a member's pod name",
                c.names.pod(0),
                c.names.pod(c.replicas - 1)
            ),
        );
    }
    if target == f.primary {
        return handled(SwitchoverResult::Succeeded, "AlreadyPrimary", format!("{target} is already the primary"));
    }
    let pending = |reason: &'static str, message: String| Assessment {
        status: None,
        verdict: Some(Verdict { type_: SWITCHOVER, status: false, reason, message }),
        start: None,
        resync_after: Some(BUSY_SECONDS),
    };
    if !f.initialized {
        return pending("NotInitialized", format!("switchover to {target} waits for the first primary's bootstrap"));
    }
    if let Some(b) = f.blocker {
        return pending("OperationInFlight", format!("switchover to {target} waits: {}", b.describe()));
    }
    if !f.observed.member(f.primary).is_some_and(|m| m.ready) {
        return pending(
            "PrimaryNotReady",
            format!(
                "switchover to {target} waits for the primary {} to be Ready (a switchover needs it; automatic failover handles a failed primary)",
                f.primary
            ),
        );
    }
    if !f.observed.member(target).is_some_and(|m| m.ready && !m.terminating) {
        return pending("TargetNotReady", format!("switchover to {target} waits for {target} to be Ready"));
    }
    Assessment { status: None, verdict: None, start: Some(target.to_owned()), resync_after: None }
}

//! `status.servers`: what each server is and says, for `kubectl get mysql -o yaml`.
//!
//! The hook never talks to a server, and nothing in a pod may write to the
//! Kubernetes API, so a server's replication state reaches the hook the way every
//! in-cluster result does: through a Job's termination message. The `inspect` Job
//! (`mysql-hook-agent inspect`) asks every member, read-only, for its GTID
//! position, source, thread states, lag, last error, seeding mark and errant
//! transactions, and writes one JSON line ([`protocol::ServerReport`] per member;
//! the line `inspect.sh` of earlier releases wrote parses the same).
//!
//! When: the Job is named after a *signature* of what Metacontroller shows the hook,
//! the primary and every member's readiness (`<name>-inspect-<hash>`). Any change
//! of either (a replica leaves the `-replicas` Service because it lags or its
//! applier stopped, a failover, a scale-up) is a new name, so a new Job, so the
//! status explains the change within seconds; while nothing changes no Job runs.
//! The newest finished inspection is kept (the Job stays a child) until the next
//! one has finished, so the status never loses what it knew; older ones are
//! deleted.
//!
//! Limits, said in the API docs too: the inspected fields are as of
//! `inspectedAt`, not now (a Ready replica's lag may have grown since, up to
//! `maxLagSeconds`: beyond, it turns not Ready and is inspected again); an
//! inspection that fails is not retried until the signature changes.
//! `role` and `ready` are observed on every sync.

use k8s_openapi::{api::batch::v1::Job, apimachinery::pkg::apis::meta::v1::Time};

use crate::{
    api::ServerStatus,
    build::{job, pod},
    jobs, labels,
    model::Cluster,
    names::short_hash,
    observed::{JobState, Observed},
};

/// The purpose (name part and label) of the inspection Jobs.
pub const INSPECT: &str = "inspect";

/// The inspection Jobs to emit and `status.servers`.
#[derive(Debug, Default)]
pub struct Plan {
    /// Members other than the primary that the newest inspection, run for the
    /// current primary, found writable (issue 31.1): a second writer.
    pub second_writers: Vec<String>,
    pub jobs: Vec<Job>,
    pub servers: Vec<ServerStatus>,
}

/// The name of the inspection Job for what is observed now.
#[must_use]
pub fn current_job(c: &Cluster, observed: &Observed<'_>) -> String {
    let mut signature = format!("primary={}", c.primary);
    for i in 0..c.replicas {
        let name = c.names.pod(i);
        let ready = observed.member(&name).is_some_and(|m| m.ready);
        signature.push_str(&format!(" {name}={ready}"));
    }
    c.names.job(INSPECT, &short_hash(signature.as_bytes()))
}

/// The newest inspection that succeeded: when its pod finished, its Job's name,
/// the Job and its report.
type Inspection<'a> = (Option<k8s_openapi::jiff::Timestamp>, &'a str, &'a Job, protocol::Report);

fn newest<'a>(observed: &Observed<'a>) -> Option<Inspection<'a>> {
    let is_inspect =
        |j: &&Job| j.metadata.labels.as_ref().and_then(|l| l.get(labels::JOB_PURPOSE)).is_some_and(|p| p == INSPECT);
    observed
        .jobs()
        .filter(is_inspect)
        .filter(|j| Observed::job_state(j) == JobState::Succeeded)
        .filter_map(|j| {
            let name = j.metadata.name.as_deref()?;
            let (at, line) = observed.job_result_at(name)?;
            let inspected: protocol::Report = serde_json::from_str(line).ok()?;
            (inspected.result == "inspected").then_some((at, name, j, inspected))
        })
        .max_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)))
}

/// What the newest inspection read executed on `primary` while it ran as the
/// primary: the inspection was run for it, and found it up and writable. The text
/// may be clipped (see [`crate::roles::position`]).
#[must_use]
pub fn primary_gtid(observed: &Observed<'_>, primary: &str) -> Option<String> {
    let (_, _, _, inspected) = newest(observed)?;
    if inspected.primary.as_deref() != Some(primary) {
        return None;
    }
    let r = inspected.servers.iter().flatten().find(|r| r.name == primary)?;
    if r.up != Some(true) || r.writable != Some(true) {
        return None;
    }
    r.gtid.clone()
}

/// Plans the inspection Jobs (only once the cluster is bootstrapped: before, there
/// is no primary to compare with) and reports every member.
#[must_use]
pub fn plan(c: &Cluster, observed: &Observed<'_>, initialized: bool) -> Plan {
    let current = current_job(c, observed);
    let newest = newest(observed);

    let mut jobs = Vec::new();
    if initialized {
        jobs.push(observed.job(&current).map_or_else(|| build(c, &current), jobs::keep));
        if let Some((_, name, j, _)) = &newest
            && *name != current
        {
            jobs.push(jobs::keep(j));
        }
    }

    let servers = (0..c.replicas)
        .map(|i| {
            let name = c.names.pod(i);
            let ready = observed.member(&name).is_some_and(|m| m.ready);
            let role = if name == c.primary { "primary" } else { "replica" };
            let mut s = ServerStatus { name, role: role.to_owned(), ready, ..ServerStatus::default() };
            if let Some((at, _, _, inspected)) = &newest
                && let Some(r) = inspected.servers.iter().flatten().find(|r| r.name == s.name)
            {
                s.inspected_at =
                    at.map(|t| Time(k8s_openapi::jiff::Timestamp::from_second(t.as_second()).unwrap_or(t)));
                s.unreachable = r.up == Some(false);
                s.writable = r.writable;
                s.gtid.clone_from(&r.gtid);
                s.source.clone_from(&r.source);
                s.replication = match (&r.io, &r.sql) {
                    (None, None) => None,
                    (io, sql) => Some(format!(
                        "receiver {}, applier {}",
                        io.as_deref().unwrap_or("?"),
                        sql.as_deref().unwrap_or("?")
                    )),
                };
                s.lag_seconds = r.lag;
                s.last_error.clone_from(&r.error);
                s.seeding = r.seeding;
                s.errant.clone_from(&r.errant);
            }
            s
        })
        .collect::<Vec<ServerStatus>>();
    // Only an inspection of the current primary says who else is writable: one run
    // before a role change names the old primary writable, as it then was.
    let second_writers = match &newest {
        Some((_, _, _, inspected)) if inspected.primary.as_deref() == Some(c.primary.as_str()) => {
            servers.iter().filter(|s| s.name != c.primary && s.writable == Some(true)).map(|s| s.name.clone()).collect()
        }
        _ => Vec::new(),
    };
    Plan { second_writers, jobs, servers }
}

/// The inspection Job: read-only, short, not retried (the next change of the
/// signature inspects again).
fn build(c: &Cluster, name: &str) -> Job {
    let suffix = name.rsplit_once('-').map_or(name, |(_, s)| s).to_owned();
    let mut j = job::build(
        c,
        &job::JobRequest {
            purpose: INSPECT,
            suffix,
            program: job::Program::Agent("inspect"),
            env: vec![pod::env("PRIMARY", c.primary.clone())],
        },
    );
    if let Some(spec) = j.spec.as_mut() {
        spec.backoff_limit = Some(0);
        spec.active_deadline_seconds = Some(120);
    }
    j
}

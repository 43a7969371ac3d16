//! Scale-down in steps (issue 31.4): the failover arithmetic shrinks only once the
//! servers that stay are proven to hold what the removed ones acknowledged.
//!
//! A commit returns OK once one replica has received it, so a failover examines
//! every replica ([`crate::roles::quorum`]). The removed replica of a scale-down may
//! have been the only one to acknowledge the last commits; a failover that then
//! examined only the replicas that stay could promote one that lacks them. So:
//!
//! 1. `spec.replicas` shrinks: the StatefulSet shrinks at once (the model keeps the
//!    primary's ordinal), but failovers keep examining as many replicas as the old
//!    number of servers has ([`ScaleDown::servers`]): fewer answer, so a failover
//!    waits (`NoQuorum`) unless the old primary itself answers holding everything,
//!    or a human forces it;
//! 2. once no removed pod exists (from then on none can acknowledge anything) and
//!    the primary is Ready, the
//!    Job `<name>-scale-down-<hash>` runs `mysql-hook-agent scale-down`: it reads the
//!    primary's executed transactions and waits until a remaining replica has
//!    executed them;
//! 3. it succeeds: the arithmetic is that of the new number of servers.
//!
//! The old number is remembered on the config ConfigMap
//! ([`crate::memory::QUORUM_SERVERS`]) while the proof is pending, besides what the
//! observed StatefulSet and pods show; the condition [`SCALE_DOWN`] is present
//! while it is. A failed Job is kept for [`RETRY_SECONDS`] (its reason in the
//! condition), then dropped and run again; a role change names a new Job (the
//! epoch is part of its name). A one-server cluster has nothing to prove: its
//! failover only ever makes its one server writable again.

use k8s_openapi::{api::batch::v1::Job, jiff::Timestamp};

use crate::{
    build::{
        job::{self, JobRequest},
        pod,
    },
    jobs::{self, ScriptResult},
    model::Cluster,
    names::short_hash,
    observed::{JobState, Observed},
    roles::Verdict,
};

/// The Job purpose (`<name>-scale-down-<hash>`).
pub const PURPOSE: &str = "scale-down";
/// The agent command the Job runs.
pub const COMMAND: &str = "scale-down";
/// The condition present while a scale-down is not yet proven safe.
pub const SCALE_DOWN: &str = "ScaleDown";
/// How long a failed proof is kept (its reason shown) before it runs again.
pub const RETRY_SECONDS: i64 = 60;
/// Seconds the agent waits for a remaining replica (`SCALE_DOWN_WAIT`), below the
/// Job's deadline.
const WAIT_SECONDS: i64 = 300;

/// The scale-down part of one sync's answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScaleDown {
    /// The number of servers whose replicas a failover examines: the old number
    /// until the scale-down is proven, then `spec.replicas`.
    pub servers: i32,
    /// The number to remember on the ConfigMap (`None`: nothing pending).
    pub remember: Option<i32>,
    pub job: Option<Job>,
    pub verdict: Option<Verdict>,
    /// Look again soon.
    pub resync_after: Option<u32>,
}

/// The number of servers a failover must still reckon with: the largest of
/// `spec.replicas`, the remembered number, the observed StatefulSet's and one past
/// the highest ordinal of a server pod that still exists. Before the bootstrap
/// nothing was acknowledged: `spec.replicas`.
#[must_use]
pub fn held(c: &Cluster, observed: &Observed<'_>, remembered: Option<i32>, initialized: bool) -> i32 {
    if !initialized {
        return c.replicas;
    }
    let stateful_set = observed.stateful_set.and_then(|s| s.spec.replicas);
    let pods = observed.members.values().map(|m| m.ordinal.saturating_add(1)).max();
    [Some(c.replicas), remembered, stateful_set, pods].into_iter().flatten().max().unwrap_or(c.replicas)
}

/// What this sync does about a scale-down from `held` servers (see the module docs).
#[must_use]
pub fn plan(c: &Cluster, observed: &Observed<'_>, held: i32, epoch: i32, now: Timestamp) -> ScaleDown {
    let settled = ScaleDown { servers: c.replicas, ..ScaleDown::default() };
    if held <= c.replicas || c.replicas <= 1 {
        return settled;
    }
    let pending = |reason, message: String, job, resync: u32| ScaleDown {
        servers: held,
        remember: Some(held),
        job,
        verdict: Some(Verdict { type_: SCALE_DOWN, status: false, reason, message }),
        resync_after: Some(resync),
    };
    let why = format!(
        "from {held} to {} servers: until a remaining replica is proven to hold every commit the removed servers \
         acknowledged, a failover examines {} replicas",
        c.replicas,
        crate::roles::quorum(c.flavor, held)
    );
    let mut leaving: Vec<&str> =
        observed.members.values().filter(|m| m.ordinal >= c.replicas).map(|m| m.name).collect();
    leaving.sort_unstable();
    if !leaving.is_empty() {
        return pending(
            "WaitingForRemovedServers",
            format!(
                "{why}; the proof starts once no removed server's pod exists (still there: {})",
                leaving.join(", ")
            ),
            None,
            10,
        );
    }
    let name = c.names.job(PURPOSE, &short_hash(format!("{held}:{}:{}:{epoch}", c.replicas, c.primary).as_bytes()));
    let observed_job = observed.job(&name);
    // A primary that is not Ready (a failover may be starting) proves nothing: its
    // Job would only fail. One already created runs on.
    if observed_job.is_none() && !observed.member(&c.primary).is_some_and(|m| m.ready) {
        return pending(
            "WaitingForPrimary",
            format!("{why}; the proof starts once the primary {} is Ready", c.primary),
            None,
            10,
        );
    }
    match observed_job.map(Observed::job_state) {
        Some(JobState::Succeeded) => settled,
        Some(JobState::Failed) => {
            let why_failed = observed
                .job_message(&name)
                .map_or_else(|| "no result was written".to_owned(), |m| ScriptResult::parse(m).explain());
            let wait = failed_at(observed_job).map_or(0, |t| t.as_second() + RETRY_SECONDS - now.as_second());
            if wait > 0 {
                return pending(
                    "ProofFailed",
                    format!("{why}; Job {name} failed: {why_failed}; it runs again in {wait} s"),
                    observed_job.map(jobs::keep),
                    u32::try_from(wait).unwrap_or(10),
                );
            }
            // Dropped (deleted) now; the next sync creates it again.
            pending("ProofFailed", format!("{why}; Job {name} failed: {why_failed}; running it again"), None, 1)
        }
        Some(JobState::Running) | None => pending(
            "Proving",
            format!("{why}; Job {name} waits until a remaining replica has executed everything {} had", c.primary),
            Some(observed_job.map_or_else(|| build(c, &name), jobs::keep)),
            10,
        ),
    }
}

/// When a failed Job failed (its `Failed` condition).
fn failed_at(job: Option<&Job>) -> Option<Timestamp> {
    job?.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Failed" && c.status == "True")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

fn build(c: &Cluster, name: &str) -> Job {
    let mut job = job::build(
        c,
        &JobRequest {
            purpose: PURPOSE,
            suffix: String::new(),
            program: job::Program::Agent(COMMAND),
            env: vec![pod::env("PRIMARY", c.primary.as_str()), pod::env("SCALE_DOWN_WAIT", WAIT_SECONDS.to_string())],
        },
    );
    job.metadata.name = Some(name.to_owned());
    job
}

/// The remembered number of servers, as the ConfigMap's annotation says.
#[must_use]
pub fn remembered(annotation: Option<&str>) -> Option<i32> {
    annotation?.parse().ok().filter(|n: &i32| *n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_number_is_a_positive_count() {
        assert_eq!(remembered(Some("3")), Some(3));
        assert_eq!(remembered(Some("0")), None);
        assert_eq!(remembered(Some("three")), None);
        assert_eq!(remembered(None), None);
    }
}

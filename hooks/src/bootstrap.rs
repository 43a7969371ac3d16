//! Bootstrapping: the one time a cluster's first primary is made writable.
//!
//! Every server starts read-only. Once the hinted primary pod (ordinal 0) exists,
//! the hook emits the bootstrap Job (`bootstrap.sh`). The Job chooses the first
//! primary itself: the hint when every server is empty (a new cluster), otherwise
//! the most advanced server by GTID set (a cluster recreated over retained volumes
//! starts from the server with the newest data, never from ordinal 0 by default).
//! It enables semi-synchronous replication there, makes it writable, and points
//! every reachable replica at it; its result names the primary it chose.
//!
//! A claim older than the `MySQL` itself was retained from an earlier cluster of
//! the same name and holds data. The Job's survey declares a new, empty cluster
//! when the members that answer within 30 s are empty; a retained member still
//! starting (crash recovery over a large data directory) would then sit next to
//! an empty history that took over. So the Job starts only once the server of
//! every member with a retained claim has started (its startup probe, which asks
//! the server itself, passed): then the survey sees the data and waits for every
//! member (issue 31.7).
//!
//! "Bootstrap done" is remembered by the `Initialized` condition, an annotation on
//! the config ConfigMap and the succeeded Job itself (see [`crate::memory`]), so a
//! lost status never bootstraps a cluster again. The succeeded Job is kept while
//! the primary it chose is still the current one (epoch 0).

use k8s_openapi::{
    api::{batch::v1::Job, core::v1::PersistentVolumeClaim},
    apimachinery::pkg::apis::meta::v1::Time,
};

use crate::{
    build::{
        job::{self, JobRequest},
        pod::env,
    },
    jobs, labels, memory,
    model::{self, Cluster},
    names::short_hash,
    observed::{JobState, Observed},
};

/// The `Initialized` condition type.
pub const INITIALIZED: &str = "Initialized";

/// Where bootstrapping stands after this sync.
#[derive(Debug, Clone, PartialEq)]
pub enum Bootstrap {
    /// Done in an earlier sync; the succeeded Job, if still observed (kept as the
    /// record of the first primary until a role change moves it).
    Done(Option<Box<Job>>),
    /// Waiting for the primary pod to exist.
    WaitingForPrimary,
    /// Waiting for `spec.restore` to finish on every server (see [`crate::restore`]).
    WaitingForRestore,
    /// Waiting for the servers of these members, whose claims were retained from an
    /// earlier cluster of this name, to start.
    WaitingForRetained(Vec<String>),
    /// The Job exists (or is being created) and has not finished.
    Running(Box<Job>),
    /// The Job succeeded in this sync: its result, and the primary it chose.
    Succeeded(Box<Job>, String, String),
    /// The Job failed; it is kept so its logs can be read. Deleting it retries.
    Failed(Box<Job>, String),
}

impl Bootstrap {
    /// The Job to emit, if any.
    #[must_use]
    pub fn job(&self) -> Option<&Job> {
        match self {
            Self::Running(j) | Self::Succeeded(j, ..) | Self::Failed(j, _) => Some(j),
            Self::Done(j) => j.as_deref(),
            Self::WaitingForPrimary | Self::WaitingForRestore | Self::WaitingForRetained(_) => None,
        }
    }

    /// Whether the cluster has a writable primary.
    #[must_use]
    pub fn initialized(&self) -> bool {
        matches!(self, Self::Done(_) | Self::Succeeded(..))
    }

    /// The primary the bootstrap Job chose, in the sync that saw it succeed.
    #[must_use]
    pub fn chosen(&self) -> Option<&str> {
        match self {
            Self::Succeeded(_, _, primary) => Some(primary),
            _ => None,
        }
    }
}

/// Decides the bootstrap step. `initialized` is what [`crate::memory`] recalls;
/// `recorded` whether the status already says so (the sync that first sees the
/// Job succeed records it, with the result, in the `Initialized` condition).
#[must_use]
pub fn plan(
    c: &Cluster,
    observed: &Observed<'_>,
    initialized: bool,
    recorded: bool,
    retained_not_started: &[String],
) -> Bootstrap {
    let observed_job = observed.jobs().find(|j| {
        j.metadata.labels.as_ref().and_then(|l| l.get(labels::JOB_PURPOSE)).is_some_and(|p| p == memory::BOOTSTRAP)
    });
    let succeeded = observed_job.filter(|j| Observed::job_state(j) == JobState::Succeeded);
    if let Some(job) = succeeded
        && !recorded
        && let Some(chosen) = memory::bootstrapped(observed, job, &c.names)
    {
        let name = job.metadata.name.as_deref().unwrap_or_default();
        let result = observed.job_result(name).unwrap_or_default().to_owned();
        return Bootstrap::Succeeded(Box::new(jobs::keep(job)), result, chosen);
    }
    if initialized {
        return Bootstrap::Done(succeeded.map(|j| Box::new(jobs::keep(j))));
    }
    let request = JobRequest {
        purpose: memory::BOOTSTRAP,
        suffix: short_hash(c.uid.as_bytes())[..5].to_owned(),
        program: job::Program::Script("bootstrap.sh"),
        env: vec![
            env("PRIMARY", c.primary.as_str()),
            env("SEMISYNC_ACKS", crate::roles::acknowledgements(c.flavor, c.replicas).max(1).to_string()),
            // The first primary's epoch, which it records (issue 31.1).
            env("EPOCH", "0"),
        ],
    };
    let job = Box::new(job::build(c, &request));
    let name = job.metadata.name.as_deref().unwrap_or_default();
    match observed.job(name) {
        Some(existing) => {
            let result = observed.job_result(name).unwrap_or_default().to_owned();
            match Observed::job_state(existing) {
                JobState::Succeeded => {
                    let chosen =
                        memory::bootstrapped(observed, existing, &c.names).unwrap_or_else(|| c.primary.clone());
                    Bootstrap::Succeeded(job, result, chosen)
                }
                JobState::Failed => Bootstrap::Failed(job, result),
                JobState::Running => Bootstrap::Running(job),
            }
        }
        // The pod need not be Ready: the readiness probe of the recorded primary
        // waits for it to be writable, which is this Job's work. The script itself
        // waits for the server to accept connections.
        None if !retained_not_started.is_empty() => Bootstrap::WaitingForRetained(retained_not_started.to_vec()),
        None if observed.member(&c.primary).is_some_and(|m| !m.terminating) => Bootstrap::Running(job),
        None => Bootstrap::WaitingForPrimary,
    }
}

/// The members (below `replicas`) whose data claim was created before the `MySQL`
/// (`created`), so retained from an earlier cluster of this name, and whose server
/// has not started yet (no pod, or its `mysqld` container's startup probe has not
/// passed).
#[must_use]
pub fn retained_not_started<'a>(
    c: &Cluster,
    observed: &Observed<'_>,
    claims: impl IntoIterator<Item = &'a PersistentVolumeClaim>,
    created: Option<&Time>,
) -> Vec<String> {
    let Some(created) = created else { return Vec::new() };
    let retained: Vec<&str> = claims
        .into_iter()
        .filter(|pvc| pvc.metadata.creation_timestamp.as_ref().is_some_and(|t| t.0 < created.0))
        .filter_map(|pvc| pvc.metadata.name.as_deref())
        .collect();
    (0..c.replicas)
        .map(|o| c.names.pod(o))
        .filter(|pod| retained.contains(&format!("{}-{pod}", model::DATA_VOLUME).as_str()))
        .filter(|pod| !observed.member(pod).is_some_and(started))
        .collect()
}

/// Whether the server container has started: its startup probe passed.
fn started(m: &crate::observed::Member<'_>) -> bool {
    m.pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == model::MYSQLD))
        .is_some_and(|c| c.started == Some(true) && c.state.as_ref().is_some_and(|s| s.running.is_some()))
}

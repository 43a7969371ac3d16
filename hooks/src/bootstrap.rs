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
//! "Bootstrap done" is remembered by the `Initialized` condition, an annotation on
//! the config ConfigMap and the succeeded Job itself (see [`crate::memory`]), so a
//! lost status never bootstraps a cluster again. The succeeded Job is kept while
//! the primary it chose is still the current one (epoch 0).

use k8s_openapi::api::batch::v1::Job;

use crate::{
    build::{
        job::{self, JobRequest},
        pod::env,
    },
    jobs, labels, memory,
    model::Cluster,
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
            Self::WaitingForPrimary | Self::WaitingForRestore => None,
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
pub fn plan(c: &Cluster, observed: &Observed<'_>, initialized: bool, recorded: bool) -> Bootstrap {
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
        None if observed.member(&c.primary).is_some_and(|m| !m.terminating) => Bootstrap::Running(job),
        None => Bootstrap::WaitingForPrimary,
    }
}

//! Bootstrapping: the one time a cluster's first primary is made writable.
//!
//! Every server starts read-only. Once the chosen primary pod exists, the hook
//! emits the bootstrap Job (`bootstrap.sh`): it enables semi-synchronous replication
//! on the primary, makes it writable and points every reachable replica at it. When
//! the Job has succeeded the hook sets the `Initialized` condition, and from the next
//! sync on stops emitting the Job: the condition, not the Job, remembers it.

use k8s_openapi::api::batch::v1::Job;

use crate::{
    build::{
        job::{self, JobRequest},
        pod::env,
    },
    conditions,
    model::Cluster,
    names::short_hash,
    observed::{JobState, Observed},
};

/// The `Initialized` condition type.
pub const INITIALIZED: &str = "Initialized";

/// Where bootstrapping stands after this sync.
#[derive(Debug, Clone, PartialEq)]
pub enum Bootstrap {
    /// Done in an earlier sync.
    Done,
    /// Waiting for the primary pod to exist.
    WaitingForPrimary,
    /// Waiting for `spec.restore` to finish on every server (see [`crate::restore`]).
    WaitingForRestore,
    /// The Job exists (or is being created) and has not finished.
    Running(Box<Job>),
    /// The Job succeeded in this sync.
    Succeeded(Box<Job>, String),
    /// The Job failed; it is kept so its logs can be read. Deleting it retries.
    Failed(Box<Job>, String),
}

impl Bootstrap {
    /// The Job to emit, if any.
    #[must_use]
    pub fn job(&self) -> Option<&Job> {
        match self {
            Self::Running(j) | Self::Succeeded(j, _) | Self::Failed(j, _) => Some(j),
            Self::Done | Self::WaitingForPrimary | Self::WaitingForRestore => None,
        }
    }

    /// Whether the cluster has a writable primary.
    #[must_use]
    pub fn initialized(&self) -> bool {
        matches!(self, Self::Done | Self::Succeeded(..))
    }
}

/// Decides the bootstrap step.
#[must_use]
pub fn plan(
    c: &Cluster,
    observed: &Observed<'_>,
    previous: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) -> Bootstrap {
    if conditions::is_true(previous, INITIALIZED) {
        return Bootstrap::Done;
    }
    let request = JobRequest {
        purpose: "bootstrap",
        suffix: short_hash(c.uid.as_bytes())[..5].to_owned(),
        script: "bootstrap.sh",
        env: vec![env("PRIMARY", c.primary.as_str())],
    };
    let job = Box::new(job::build(c, &request));
    let name = job.metadata.name.as_deref().unwrap_or_default();
    match observed.job(name) {
        Some(existing) => {
            let result = observed.job_result(name).unwrap_or_default().to_owned();
            match Observed::job_state(existing) {
                JobState::Succeeded => Bootstrap::Succeeded(job, result),
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

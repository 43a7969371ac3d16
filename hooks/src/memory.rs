//! What the hook must remember, rebuilt from what it observes.
//!
//! The Kubernetes API conventions expect that "the status could be reconstructed
//! by observation if it were lost". The parent's status can be lost (an object
//! restored without it, an edit of the status subresource) or stale (Metacontroller
//! may send a parent from before the hook's last status write). An empty or old
//! status must therefore never bootstrap a cluster again, move the primary back, or
//! start a second role change next to one that runs.
//!
//! Every fact the hook relies on is written in three places, and read back from the
//! newest of them:
//! - `status`, the report people read;
//! - annotations on the ConfigMap `<name>-config` (and its `primary` key): a child,
//!   which Metacontroller applies before it writes the status and sends back on
//!   every sync;
//! - the Jobs that made the decisions: the bootstrap Job and the newest role-change
//!   Job that promoted a server are kept (never deleted) until a newer role change
//!   has promoted one, so their results, the ground truth of who was made writable,
//!   stay observable.
//!
//! The primary is numbered by its *epoch*: the number of the role-change Job that
//! made it the primary (`<name>-failover-<n>`, `<name>-switchover-<n>`), 0 for the
//! bootstrap. Jobs are numbered from one counter, so of two records of the primary
//! the one with the higher epoch is the newer, whichever source it comes from.

use k8s_openapi::api::batch::v1::Job;

use crate::{
    api::MySQL,
    conditions,
    jobs::ScriptResult,
    labels,
    model::MYSQLD,
    names::Names,
    observed::{JobState, Observed},
    version::Version,
};

/// Annotation on the config ConfigMap: bootstrap has succeeded.
pub const INITIALIZED: &str = "mysqlhook.dev/initialized";
/// Annotation on the config ConfigMap: the epoch of its `primary`.
pub const PRIMARY_EPOCH: &str = "mysqlhook.dev/primary-epoch";
/// Annotation on the config ConfigMap: the highest role-change number used.
pub const OPERATIONS_STARTED: &str = "mysqlhook.dev/operations-started";
/// Annotation on the config ConfigMap: the newest server version any pod has run.
pub const NEWEST_VERSION: &str = "mysqlhook.dev/newest-version";
/// The `force-failover` value a forced failover has used (issue 31.2): the
/// annotation forces one failover, not every later one of the same pod. Kept while
/// the parent's annotation still says the same, forgotten once it is removed or
/// changed, so setting it again forces again.
pub const FORCE_FAILOVER_USED: &str = "mysqlhook.dev/force-failover-used";
/// Annotation on the config ConfigMap: the number of servers of a scale-down not
/// yet proven safe, whose replicas a failover still examines (issue 31.4, see
/// [`crate::scale_down`]). Absent once it is proven.
pub const QUORUM_SERVERS: &str = "mysqlhook.dev/quorum-servers";
/// The key of the config ConfigMap that names the primary (the agents follow it).
pub const PRIMARY_KEY: &str = "primary";
/// The key of the config ConfigMap with the epoch of `primary` (issue 31.1): a
/// writable server whose own recorded epoch is older fences itself.
pub const EPOCH_KEY: &str = "epoch";
/// The key of the config ConfigMap that lists the members (`name=host:port ...`).
pub const PODS_KEY: &str = "pods";
/// The key of the config ConfigMap with `spec.replication.maxLagSeconds` (the readiness probe).
pub const MAX_LAG_KEY: &str = "maxLagSeconds";
/// The key of the config ConfigMap with `spec.replication.rebuildErrant` (join.sh).
pub const REBUILD_ERRANT_KEY: &str = "rebuildErrant";
/// The key of the config ConfigMap that says whether root's network accounts may
/// be dropped (`drop`) or not yet (`keep`): the agent's `operator-user`, with the operator
/// account only.
pub const ROOT_REMOTE_KEY: &str = "rootRemote";

/// The value of `key` in the cluster's config ConfigMap among `config_maps`: how
/// the hooks of other objects (`MySQLBackup`) read what the cluster's own hook
/// decided (TLS verification, the operator account).
#[must_use]
pub fn config_value<'a>(
    names: &crate::names::Names,
    config_maps: &'a crate::metacontroller::ByKey<k8s_openapi::api::core::v1::ConfigMap>,
    key: &str,
) -> Option<&'a str> {
    config_maps
        .values()
        .find(|cm| cm.metadata.name.as_deref() == Some(names.config.as_str()))?
        .data
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// Purposes of the Jobs that change roles, in the order of [`crate::roles`].
pub const ROLE_PURPOSES: [&str; 2] = ["failover", "switchover"];
/// The purpose of the bootstrap Job.
pub const BOOTSTRAP: &str = "bootstrap";

/// A record of who the primary is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Primary {
    pub pod: String,
    /// 0: chosen by the bootstrap; `n`: promoted by role-change Job `n`; -1: from a
    /// ConfigMap written before epochs were recorded.
    pub epoch: i32,
}

/// The durable facts, each from the newest source that has it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Memory {
    /// Bootstrap has succeeded at some point: never bootstrap again.
    pub initialized: bool,
    /// The newest record of the primary, if any source has one.
    pub primary: Option<Primary>,
    /// The highest role-change Job number in use: new ones are numbered past it.
    pub operations_started: i32,
    /// The newest server version any pod is known to have run.
    pub newest_version: Option<Version>,
    /// The `force-failover` value a forced failover used ([`FORCE_FAILOVER_USED`]).
    pub force_failover_used: Option<String>,
    /// The servers of a scale-down not yet proven safe ([`QUORUM_SERVERS`]).
    pub quorum_servers: Option<i32>,
    /// What the primary is known to have executed ([`crate::roles::position`]).
    pub primary_position: Option<crate::roles::position::Known>,
}

/// A role-change Job observed: its kind, number and (if it finished) outcome.
#[derive(Debug, Clone)]
pub struct RoleJob<'a> {
    pub job: Option<&'a Job>,
    pub name: &'a str,
    pub purpose: &'static str,
    pub number: i32,
}

/// The number `n` of a role-change Job name `<cluster>-<purpose>-<n>`, if `name` is one.
#[must_use]
pub fn role_job_number(names: &Names, name: &str) -> Option<(&'static str, i32)> {
    let n = name.rsplit_once('-').and_then(|(_, n)| n.parse::<i32>().ok()).filter(|n| *n > 0)?;
    ROLE_PURPOSES.into_iter().find(|p| names.job(p, &n.to_string()) == name).map(|p| (p, n))
}

/// Every role-change Job observed, as a child or only through its pods, by number.
#[must_use]
pub fn role_jobs<'a>(observed: &Observed<'a>, names: &Names) -> Vec<RoleJob<'a>> {
    let mut out: Vec<RoleJob<'a>> = observed
        .job_names()
        .filter_map(|name| {
            let (purpose, number) = role_job_number(names, name)?;
            Some(RoleJob { job: observed.job(name), name, purpose, number })
        })
        .collect();
    out.sort_by(|a, b| (a.number, a.name).cmp(&(b.number, b.name)));
    out.dedup_by(|a, b| a.name == b.name);
    out
}

/// The pod a finished role-change Job made writable, if its result says so: a
/// succeeded Job's `promoted`/`switched` result, or a failed Job whose error result
/// says a promotion happened before the failure (`"promoted": <pod>`).
#[must_use]
pub fn promoted_by(observed: &Observed<'_>, job: &Job, names: &Names) -> Option<String> {
    let name = job.metadata.name.as_deref()?;
    let member = |p: Option<String>| p.filter(|p| names.ordinal(p).is_some());
    match observed.role_job_state(job) {
        JobState::Running => None,
        JobState::Succeeded => {
            let r = ScriptResult::parse(observed.job_result(name)?);
            if r.result == "promoted" || r.result == "switched" { member(r.primary) } else { member(r.promoted) }
        }
        JobState::Failed => member(ScriptResult::parse(observed.job_message(name)?).promoted),
    }
}

/// The primary the bootstrap Job chose, once it has succeeded: the `primary` of its
/// result, or the `PRIMARY` it was given (scripts from before the choice moved into
/// the Job).
#[must_use]
pub fn bootstrapped(observed: &Observed<'_>, job: &Job, names: &Names) -> Option<String> {
    if Observed::job_state(job) != JobState::Succeeded {
        return None;
    }
    let name = job.metadata.name.as_deref()?;
    let result = ScriptResult::parse(observed.job_result(name)?);
    if result.result != "bootstrapped" {
        return None;
    }
    result.primary.or_else(|| job_env(job, "PRIMARY").map(str::to_owned)).filter(|p| names.ordinal(p).is_some())
}

/// A plain `value` environment variable of a Job's first container.
#[must_use]
pub fn job_env<'a>(job: &'a Job, name: &str) -> Option<&'a str> {
    job.spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .env
        .as_ref()?
        .iter()
        .find_map(|e| if e.name == name { e.value.as_deref() } else { None })
}

/// Rebuilds the memory from the parent's status, the config ConfigMap and the Jobs.
#[must_use]
pub fn recall(parent: &MySQL, observed: &Observed<'_>, names: &Names) -> Memory {
    let status = parent.status.as_ref();
    // Members: what the StatefulSet has, or is to have. A record naming any other
    // pod (a Job from before a scale-down) is not believed.
    let members = observed.stateful_set.and_then(|s| s.spec.replicas).unwrap_or(0).max(parent.spec.replicas);
    let member = |p: &String| names.ordinal(p).is_some_and(|o| o < members);
    let annotation = |key: &str| observed.config_map_annotation(&names.config, key);

    let mut candidates: Vec<Primary> = Vec::new();
    // The Jobs: ground truth.
    let bootstrap_job = observed.jobs().find(|j| has_purpose(j, BOOTSTRAP));
    let from_bootstrap = bootstrap_job.and_then(|j| bootstrapped(observed, j, names));
    if let Some(pod) = from_bootstrap.as_ref().filter(|p| member(p)) {
        candidates.push(Primary { pod: pod.clone(), epoch: 0 });
    }
    let role_jobs = role_jobs(observed, names);
    for rj in &role_jobs {
        if let Some(pod) = rj.job.and_then(|j| promoted_by(observed, j, names)).filter(member) {
            candidates.push(Primary { pod, epoch: rj.number });
        }
    }
    // The status.
    if let Some(pod) = status.and_then(|s| s.primary.clone()).filter(|p| names.ordinal(p).is_some()) {
        let epoch = status
            .and_then(|s| s.role_changes.last())
            .and_then(|c| role_job_number(names, &c.job))
            .map_or(0, |(_, n)| n);
        candidates.push(Primary { pod, epoch });
    }
    // The ConfigMap.
    if let Some(pod) =
        observed.config_map_value(&names.config, PRIMARY_KEY).map(str::trim).filter(|p| member(&(*p).to_owned()))
    {
        let epoch = annotation(PRIMARY_EPOCH).and_then(|e| e.parse().ok()).unwrap_or(-1);
        candidates.push(Primary { pod: pod.to_owned(), epoch });
    }
    // Highest epoch wins; on a tie the first pushed (Jobs, then status, then ConfigMap).
    let primary = candidates.iter().fold(None::<&Primary>, |best, c| match best {
        Some(b) if b.epoch >= c.epoch => Some(b),
        _ => Some(c),
    });

    let initialized = status.is_some_and(|s| conditions::is_true(&s.conditions, crate::bootstrap::INITIALIZED))
        || annotation(INITIALIZED) == Some("true")
        || from_bootstrap.is_some()
        || candidates.iter().any(|c| c.epoch > 0);

    let operations_started = [
        status.map_or(0, |s| s.operations_started),
        annotation(OPERATIONS_STARTED).and_then(|n| n.parse().ok()).unwrap_or(0),
        role_jobs.iter().map(|j| j.number).max().unwrap_or(0),
    ]
    .into_iter()
    .max()
    .unwrap_or(0);

    let newest_version = status
        .and_then(|s| s.version.as_deref())
        .and_then(Version::parse)
        .into_iter()
        .chain(annotation(NEWEST_VERSION).and_then(Version::parse))
        .chain(observed.members.values().filter_map(|m| {
            // What the pod's template declared (a custom image need not carry the
            // version in its tag), else the image tag.
            let declared = m.pod.metadata.annotations.as_ref().and_then(|a| a.get(crate::build::statefulset::VERSION));
            declared.and_then(|v| Version::parse(v)).or_else(|| {
                let image = m.pod.spec.as_ref()?.containers.iter().find(|c| c.name == MYSQLD)?.image.as_deref()?;
                Version::of_image(image)
            })
        }))
        .max();

    Memory {
        initialized,
        // Before bootstrap a record is only the hint the bootstrap Job starts from.
        primary: primary.cloned(),
        operations_started,
        newest_version,
        force_failover_used: annotation(FORCE_FAILOVER_USED).map(str::to_owned),
        quorum_servers: crate::scale_down::remembered(annotation(QUORUM_SERVERS)),
        primary_position: crate::roles::position::Known::recall(
            parent.spec.flavor,
            annotation(crate::roles::position::PRIMARY_POSITION),
        ),
    }
}

fn has_purpose(job: &Job, purpose: &str) -> bool {
    job.metadata.labels.as_ref().and_then(|l| l.get(labels::JOB_PURPOSE)).is_some_and(|p| p == purpose)
}

//! Starting a new cluster from a backup (`spec.restore`).
//!
//! `restore.sh` loads the dump without writing it to the binary log and records
//! the dump's GTID position as already executed, so a replica could not fetch the
//! restored data from the primary's binary log. Every server is therefore
//! restored from the same backup to the same point, one restore Job per server
//! (`<name>-restore-<ordinal>-<suffix>`), all before bootstrap makes the primary
//! writable: then every server holds the same GTID history and the replicas
//! simply continue from the primary. Bootstrap waits until every restore Job has
//! succeeded; a failed one stops the cluster there (delete the Job to retry).
//! Once the cluster is initialized `spec.restore` is never read again.
//!
//! The store and backup name are resolved once and recorded in `status.restore`:
//! a `MySQLBackup` deleted in the middle of a restore does not stop it. Restore
//! Jobs already observed are never dropped while the restore waits for anything,
//! so a running restore is never deleted under a server.

mod progress;

use k8s_openapi::api::{batch::v1::Job, core::v1::Pod};

use crate::{
    access,
    api::{BackupPhase, BackupStorage, Flavor, MySQL, MySQLBackup, RestoreStatus, RestoreStep},
    build::{
        backup::{self, RestorePod},
        meta,
    },
    jobs::{self, Outcome},
    labels,
    model::Cluster,
    names::short_hash,
    observed::Observed,
};

/// The `Restored` condition type.
pub const RESTORED: &str = "Restored";
/// Purpose label of restore pods.
pub const PURPOSE: &str = "restore";

/// Where the restore stands after this sync.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Restore {
    /// Restore Jobs to emit.
    pub jobs: Vec<Job>,
    /// `status.restore`.
    pub status: Option<RestoreStatus>,
    /// The `Restored` condition: status, reason, message.
    pub condition: Option<(bool, String, String)>,
    /// Bootstrap must wait.
    pub blocks_bootstrap: bool,
    /// A `spec.restore` the hook does not act on, for `SpecAccepted`.
    pub ignored: Option<crate::model::Problem>,
}

impl Restore {
    /// Whether one of this restore's Jobs runs now (before bootstrap a new pod
    /// template waits for it, see [`crate::rollout`]).
    #[must_use]
    pub fn running(&self, observed: &Observed<'_>) -> bool {
        self.blocks_bootstrap
            && self.jobs.iter().any(|j| {
                j.metadata
                    .name
                    .as_deref()
                    .and_then(|name| observed.job(name))
                    .is_some_and(|o| Observed::job_state(o) == crate::observed::JobState::Running)
            })
    }

    fn waiting(
        phase: BackupPhase,
        location: Option<String>,
        until: Option<&str>,
        reason: &str,
        message: String,
    ) -> Self {
        Self {
            jobs: Vec::new(),
            status: Some(RestoreStatus {
                phase: Some(phase),
                location,
                point_in_time: until.map(str::to_owned),
                restored: 0,
                message: Some(message.clone()),
                ..RestoreStatus::default()
            }),
            condition: Some((false, reason.to_owned(), message)),
            blocks_bootstrap: true,
            ignored: None,
        }
    }
}

/// The backup to restore: its store, name and the flavor it came from when known.
struct Source {
    storage: BackupStorage,
    name: String,
}

/// What decides the restore step.
pub struct Facts<'a> {
    pub parent: &'a MySQL,
    pub cluster: &'a Cluster,
    pub observed: &'a Observed<'a>,
    /// The related `MySQLBackup`s.
    pub backups: &'a [&'a MySQLBackup],
    /// The related pods (Job pods among them).
    pub pods: &'a [&'a Pod],
    pub previous: &'a crate::api::MySQLStatus,
    /// Bootstrap has happened ([`crate::memory`]): restoring is over for good.
    pub initialized: bool,
    /// The stores and images this cluster may use.
    pub gate: &'a access::Gate<'a>,
}

/// Decides the restore step.
#[must_use]
pub fn plan(f: &Facts<'_>) -> Restore {
    let Facts { parent, cluster: c, observed, backups, pods, previous, initialized, gate } = *f;
    let bootstrap_job = c.names.job("bootstrap", &short_hash(c.uid.as_bytes())[..5]);
    let bootstrapped = initialized || observed.job(&bootstrap_job).is_some();
    let Some(spec) = parent.spec.restore.as_ref() else {
        return if bootstrapped { Restore::default() } else { removed_mid_restore(observed, previous) };
    };
    if bootstrapped {
        // Done before (or the cluster was bootstrapped without it): remembered only.
        let condition = previous
            .conditions
            .iter()
            .find(|c| c.type_ == RESTORED)
            .map(|c| (c.status == "True", c.reason.clone(), c.message.clone()));
        // Added to a cluster that was never restored: a restore only ever seeds a
        // new cluster (it would load a backup over live data), so it is refused by
        // name rather than silently doing nothing.
        let ignored = (previous.restore.is_none() && condition.is_none()).then(|| crate::model::Problem {
            reason: "RestoreIgnored",
            message: "spec.restore was added after the cluster was initialized: a restore only seeds a new cluster, so nothing is loaded. Remove spec.restore, or create a new MySQL with it (a new name, or this one after deleting it)".to_owned(),
        });
        let remembered =
            Restore { jobs: Vec::new(), status: previous.restore.clone(), condition, blocks_bootstrap: false, ignored };
        return completed(remembered, c.replicas);
    }
    let until = spec.point_in_time.as_deref();
    // MariaDB replays binary logs from a GTID position only from 10.8 on
    // (`mariadb-binlog --start-position=<GTID>`): an older server would fail the
    // replay after the whole dump has loaded, three times. Refused up front.
    if until.is_some()
        && c.flavor == Flavor::Mariadb
        && crate::version::Version::parse(&c.version).is_some_and(|v| (v.0, v.1) < (10, 8))
        && started_jobs(observed).is_empty()
    {
        return Restore::waiting(
            BackupPhase::Failed,
            None,
            until,
            "PointInTimeUnsupported",
            format!(
                "a point-in-time restore needs MariaDB 10.8 or later (binary log replay from a GTID position); this cluster runs {}. Restore without pointInTime, or create the cluster with a newer version",
                c.version
            ),
        );
    }
    // Restore Jobs already created: whatever the restore waits for, never deleted.
    let keep_running = |mut r: Restore| {
        r.jobs = started_jobs(observed);
        r
    };
    let remembered = previous.restore.as_ref().and_then(|r| r.storage.clone().zip(r.name.clone()));

    let source = if let Some(name) = &spec.backup {
        let found = backups.iter().find(|b| b.metadata.name.as_deref() == Some(name.as_str()));
        if found.is_none() && remembered.is_none() {
            let message = if !started_jobs(observed).is_empty() {
                format!(
                    "MySQLBackup {name} was deleted during the restore and its location was not recorded; the restore Jobs are kept. Recreate a MySQLBackup {name} that names the same backup, or delete this MySQL and create it again with spec.restore.storage and spec.restore.name"
                )
            } else {
                format!("waiting for MySQLBackup {name} in this namespace")
            };
            return keep_running(Restore::waiting(BackupPhase::Pending, None, until, "BackupNotFound", message));
        }
        let Some(b) = found else {
            let (storage, name) = remembered.unwrap_or_default();
            return plan_from(parent, c, observed, pods, Source { storage, name }, until, gate);
        };
        let st = b.status.clone().unwrap_or_default();
        if st.phase != Some(BackupPhase::Succeeded) {
            return keep_running(Restore::waiting(
                BackupPhase::Pending,
                st.location,
                until,
                "BackupNotReady",
                format!("MySQLBackup {name} has not succeeded (phase {:?})", st.phase.unwrap_or(BackupPhase::Pending)),
            ));
        }
        if st.flavor.is_some_and(|f| f != c.flavor) {
            return keep_running(Restore::waiting(
                BackupPhase::Failed,
                st.location,
                until,
                "FlavorMismatch",
                format!(
                    "MySQLBackup {name} is a backup of a {} server; this cluster runs {}",
                    st.flavor.map_or("", |f| f.as_str()),
                    c.flavor.as_str()
                ),
            ));
        }
        match (st.storage, st.name) {
            (Some(storage), Some(name)) => Source { storage, name },
            _ => {
                return keep_running(Restore::waiting(
                    BackupPhase::Failed,
                    st.location,
                    until,
                    "BackupIncomplete",
                    format!("MySQLBackup {name} records no storage and name"),
                ));
            }
        }
    } else {
        let (Some(storage), Some(name)) = (spec.storage.as_ref(), spec.name.as_ref()) else {
            return keep_running(Restore::waiting(
                BackupPhase::Failed,
                None,
                until,
                "InvalidRestore",
                "spec.restore needs backup, or storage and name".to_owned(),
            ));
        };
        Source {
            storage: backup::resolve(storage, &backup::default_prefix(&c.namespace, &c.names.cluster)),
            name: name.clone(),
        }
    };
    plan_from(parent, c, observed, pods, source, until, gate)
}

/// The remembered restore once bootstrap has begun. Bootstrap starts only after
/// every restore Job has succeeded, so a remembered restore that is not
/// `Succeeded` is a stale status: Metacontroller may send the parent as it was
/// before the hook's last status write (seen on real servers: the sync after the
/// one that saw the last restore Job succeed carried the status from before it,
/// which would have been kept for good). Rebuilt as what it must be: every server
/// restored (a time of the stale record that is not a `Restored` one is dropped).
/// The restore Jobs that exist, kept as they are.
fn started_jobs(observed: &Observed<'_>) -> Vec<Job> {
    observed
        .jobs()
        .filter(|j| j.metadata.labels.as_ref().and_then(|l| l.get(labels::JOB_PURPOSE)).is_some_and(|p| p == PURPOSE))
        .map(jobs::keep)
        .collect()
}

/// `spec.restore` was removed before bootstrap (a manifest re-applied without it,
/// or an attempt to cancel). A restore that started and has not succeeded left
/// servers partly loaded (on MySQL already carrying the dump's GTID set, so one
/// could win the primary election): bootstrapping them would bring the cluster
/// up on partial data with no error. The removal is refused instead: the restore
/// Jobs stay, bootstrap waits, and `Restored` says what to do. Nothing started,
/// or every server restored: nothing to protect.
fn removed_mid_restore(observed: &Observed<'_>, previous: &crate::api::MySQLStatus) -> Restore {
    let jobs = started_jobs(observed);
    let unfinished = match &previous.restore {
        Some(r) => r.phase != Some(BackupPhase::Succeeded),
        None => !jobs.is_empty(),
    };
    if !unfinished {
        return Restore::default();
    }
    let message = "spec.restore was removed before the restore finished: the servers may hold a partly loaded backup, so none is bootstrapped and the restore Jobs are kept. Put spec.restore back as it was to let the restore go on, or delete this MySQL and its volume claims and create it again".to_owned();
    Restore {
        jobs,
        status: previous.restore.clone(),
        condition: Some((false, "RestoreSpecRemoved".to_owned(), message)),
        blocks_bootstrap: true,
        ignored: None,
    }
}

fn completed(mut r: Restore, replicas: i32) -> Restore {
    let Some(st) = r.status.as_mut() else { return r };
    if st.phase == Some(BackupPhase::Succeeded) {
        return r;
    }
    let pit = st.point_in_time.as_deref().map_or_else(String::new, |t| format!(" up to {t}"));
    let message = format!("{replicas} servers restored from {}{pit}", st.location.as_deref().unwrap_or("the backup"));
    st.phase = Some(BackupPhase::Succeeded);
    st.restored = replicas;
    st.message = Some(message.clone());
    for server in &mut st.servers {
        if server.step != RestoreStep::Restored {
            server.step = RestoreStep::Restored;
            server.since = None;
            server.detail = None;
        }
    }
    r.condition = Some((true, "Restored".to_owned(), message));
    r
}

/// The restore Jobs from a resolved source, and where they stand.
fn plan_from(
    parent: &MySQL,
    c: &Cluster,
    observed: &Observed<'_>,
    pods: &[&Pod],
    source: Source,
    until: Option<&str>,
    gate: &access::Gate<'_>,
) -> Restore {
    let Some(spec) = parent.spec.restore.as_ref() else { return Restore::default() };
    let location = backup::location(&source.storage, &source.name);
    let restore_until = until.map(|t| t.trim_end_matches('Z').replacen('T', " ", 1));
    // Restore Jobs read the store with its credentials: only a store this cluster may
    // use. Jobs that run already keep going.
    if let Err(refusal) = gate.storage(&source.storage, spec.signing_key.as_ref()) {
        let started = (0..c.replicas).any(|o| {
            observed.job(&c.names.job(PURPOSE, &format!("{o}-{}", &short_hash(c.uid.as_bytes())[..5]))).is_some()
        });
        if !started {
            return Restore::waiting(BackupPhase::Pending, Some(location), until, refusal.reason, refusal.message);
        }
    }

    let mut jobs_out = Vec::new();
    let mut servers = Vec::new();
    let (mut done, mut running, mut failed) = (0, 0, Vec::new());
    let by_job = jobs::pods_by_job(pods.iter().copied(), |p| {
        jobs::has_label(p, labels::JOB_PURPOSE, PURPOSE) && jobs::has_label(p, labels::INSTANCE, &c.names.label)
    });
    for ordinal in 0..c.replicas {
        let target = c.names.pod(ordinal);
        let name = c.names.job(PURPOSE, &format!("{ordinal}-{}", &short_hash(c.uid.as_bytes())[..5]));
        let mut pod_labels = labels::common(&c.names, labels::JOB);
        pod_labels.insert(labels::JOB_PURPOSE.to_owned(), PURPOSE.to_owned());
        let job = Job {
            metadata: meta(&name, pod_labels.clone()),
            spec: Some(backup::restore_job_spec(&RestorePod {
                cluster: c,
                storage: &source.storage,
                name: &source.name,
                binlogs_from: spec.binlogs_from.as_deref(),
                until: restore_until.clone(),
                target: target.clone(),
                labels: pod_labels,
                verify_key: spec.signing_key.as_ref(),
                bounds: backup::Bounds::from_spec(
                    spec.timeout_seconds,
                    spec.resources.as_ref(),
                    parent.spec.backup.as_ref().and_then(|b| b.work_volume_size.as_ref()),
                ),
                parallel: spec.parallel,
            })),
            ..Default::default()
        };
        match observed.job(&name) {
            Some(existing) => {
                let job_pods = by_job.get(name.as_str()).map_or(&[][..], Vec::as_slice);
                let outcome = jobs::outcome_of_job(existing, job_pods);
                servers.push(progress::of_server(&target, &name, &outcome, job_pods, until.is_some()));
                match outcome {
                    Outcome::Succeeded(..) => done += 1,
                    Outcome::Running => running += 1,
                    Outcome::Failed(r, _) => failed.push(format!("{target} ({name}): {}", r.explain())),
                }
                jobs_out.push(job);
            }
            None if observed.member(&target).is_some_and(|m| m.ready) => {
                running += 1;
                servers.push(progress::of_server(&target, &name, &Outcome::Running, &[], until.is_some()));
                jobs_out.push(job);
            }
            None => {}
        }
    }
    let pit = until.map_or_else(String::new, |t| format!(" up to {t}"));
    let (phase, reason, message) = if !failed.is_empty() {
        (
            BackupPhase::Failed,
            "RestoreFailed",
            format!("restoring {location}{pit} failed on {}; delete the Job to retry", failed.join("; ")),
        )
    } else if done == c.replicas {
        (BackupPhase::Succeeded, "Restored", format!("{done} servers restored from {location}{pit}"))
    } else if running > 0 {
        (BackupPhase::Running, "Restoring", format!("{done}/{} servers restored from {location}{pit}", c.replicas))
    } else {
        (
            BackupPhase::Pending,
            "WaitingForServers",
            format!("waiting for the servers to be Ready to restore {location}{pit}"),
        )
    };
    Restore {
        jobs: jobs_out,
        status: Some(RestoreStatus {
            phase: Some(phase),
            location: Some(location),
            point_in_time: until.map(str::to_owned),
            restored: done,
            message: Some(message.clone()),
            storage: Some(source.storage),
            name: Some(source.name),
            servers,
        }),
        condition: Some((phase == BackupPhase::Succeeded, reason.to_owned(), message)),
        blocks_bootstrap: phase != BackupPhase::Succeeded,
        ignored: None,
    }
}

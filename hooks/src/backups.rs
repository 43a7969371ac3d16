//! Backups of a `MySQL`: the scheduled-backup CronJob, `status.backup` read back
//! from its Jobs' pods, and the final backup taken on delete with
//! `deletionPolicy: Backup`.
//!
//! Each backup is a folder `<prefix>/<name>/` in the store, named after its Job,
//! holding the dump and every binary log the source still had (see
//! `hooks/scripts/backup.sh`), so a restore can stop at any second between the
//! dump and the moment a later backup was taken.

use k8s_openapi::api::{batch::v1::CronJob, core::v1::Pod};

use crate::{
    api::{BackupPhase, BackupRecord, BackupSpec, BackupStatus, BackupStorage, BinlogArchiveStatus, MySQL},
    build::backup::{self, ArchivePod, BackupName, BackupPod, Retention},
    jobs::{self, Outcome, ScriptResult},
    labels,
    metacontroller::ByKey,
    model::Cluster,
    names::short_hash,
};

/// Purpose label of scheduled backup pods.
pub const SCHEDULED: &str = "backup";
/// Purpose label of the binary log archive's pods, and its CronJob's suffix.
pub const BINLOG: &str = "binlog";
/// Purpose label of the final backup's pod.
pub const FINAL: &str = "final-backup";
/// The condition reporting the newest scheduled backup.
pub const BACKUP_SUCCEEDED: &str = "BackupSucceeded";
/// The condition reporting the newest binary log archive run: False means the
/// recovery point is growing.
pub const BINLOGS_ARCHIVED: &str = "BinlogsArchived";

/// The cluster's backup settings with the store resolved (prefix defaulted to
/// `<namespace>/<name>`: clusters of the same name in two namespaces never share
/// a folder).
#[must_use]
pub fn settings(parent: &MySQL) -> Option<(&BackupSpec, BackupStorage)> {
    let spec = parent.spec.backup.as_ref()?;
    let name = parent.metadata.name.as_deref().unwrap_or_default();
    let namespace = parent.metadata.namespace.as_deref().unwrap_or_default();
    let storage = backup::resolve(&spec.storage, &backup::default_prefix(namespace, name));
    (storage.persistent_volume_claim.is_some() || storage.s3.is_some()).then_some((spec, storage))
}

/// What bounds each backup and archive pod of the cluster: `timeoutSeconds`,
/// `resources` and `workVolumeSize` of `spec.backup`.
#[must_use]
pub fn bounds(spec: &BackupSpec) -> backup::Bounds {
    backup::Bounds::from_spec(spec.timeout_seconds, spec.resources.as_ref(), spec.work_volume_size.as_ref())
}

/// The scheduled-backup CronJob, when a schedule is set and the cluster has a
/// writable primary (a backup before that would copy nothing, or a restore in
/// progress).
///
/// A schedule the CronJob controller would reject is not emitted (the API server
/// would refuse the CronJob on every sync): the observed CronJob is kept as it is,
/// and `SpecAccepted` names the field (see [`crate::model`]).
#[must_use]
pub fn cron_job(parent: &MySQL, c: &Cluster, initialized: bool, observed: Option<&CronJob>) -> Option<CronJob> {
    let (spec, storage, schedule) = match scheduled(parent, initialized, observed, |b| b.schedule.as_deref())? {
        Ok(emit) => emit,
        Err(kept) => return kept,
    };
    let pod = BackupPod {
        cluster: c,
        storage: &storage,
        name: BackupName::FromJob,
        primary: c.primary.clone(),
        pods: c.pods_env(),
        retention: Some(Retention { owner: scheduled_owner(c), keep: spec.keep }),
        labels: pod_labels(c, SCHEDULED),
        signing_key: spec.signing_key.as_ref(),
        owner: scheduled_owner(c),
        verify: spec.verify,
        binlogs_archived: spec.binlog_schedule.is_some(),
        bounds: bounds(spec),
    };
    Some(backup::cron_job(&c.names.cron_job(SCHEDULED), schedule, c, &pod.labels, backup::backup_job_spec(&pod)))
}

/// The CronJob `<name>-binlog` of the binary log archive
/// (`spec.backup.binlogSchedule`), under the same conditions as [`cron_job`].
#[must_use]
pub fn binlog_cron_job(parent: &MySQL, c: &Cluster, initialized: bool, observed: Option<&CronJob>) -> Option<CronJob> {
    let (spec, storage, schedule) = match scheduled(parent, initialized, observed, |b| b.binlog_schedule.as_deref())? {
        Ok(emit) => emit,
        Err(kept) => return kept,
    };
    let pod = ArchivePod {
        cluster: c,
        storage: &storage,
        labels: pod_labels(c, BINLOG),
        retention_owner: scheduled_owner(c),
        signing_key: spec.signing_key.as_ref(),
        // One run copies the files closed since the last: its own, short deadline.
        bounds: backup::Bounds { deadline_seconds: backup::ARCHIVE_DEADLINE_SECONDS, ..bounds(spec) },
    };
    Some(backup::cron_job(&c.names.cron_job(BINLOG), schedule, c, &pod.labels, backup::archive_job_spec(&pod)))
}

/// The settings a CronJob is built from, with its store resolved and its schedule.
type Scheduled<'a> = (&'a BackupSpec, BackupStorage, &'a str);

/// What one of the cluster's CronJobs is built from: `None` without a store, a
/// schedule or an initialized cluster; `Ok` with the settings and the schedule;
/// `Err` with the observed CronJob kept as it is when the schedule is one the
/// CronJob controller would reject.
fn scheduled<'a>(
    parent: &'a MySQL,
    initialized: bool,
    observed: Option<&CronJob>,
    schedule: impl Fn(&'a BackupSpec) -> Option<&'a str>,
) -> Option<Result<Scheduled<'a>, Option<CronJob>>> {
    let (spec, storage) = settings(parent)?;
    let schedule = schedule(spec)?;
    if !initialized {
        return None;
    }
    if crate::cron::check(schedule).is_err() {
        return Some(Err(observed.map(kept_as_is)));
    }
    Some(Ok((spec, storage, schedule)))
}

/// The observed CronJob of the cluster named `<cluster>-<purpose>`.
#[must_use]
pub fn observed_cron_job<'a>(cron_jobs: &'a ByKey<CronJob>, c: &Cluster, purpose: &str) -> Option<&'a CronJob> {
    let name = c.names.cron_job(purpose);
    cron_jobs.values().find(|j| j.metadata.name.as_deref() == Some(name.as_str()))
}

/// An observed CronJob as it is (its schedule is one the hook would not emit).
fn kept_as_is(o: &CronJob) -> CronJob {
    CronJob {
        metadata: crate::build::meta(
            o.metadata.name.as_deref().unwrap_or_default(),
            o.metadata.labels.clone().unwrap_or_default().into_iter().filter(|(k, _)| k != "controller-uid").collect(),
        ),
        spec: o.spec.clone(),
        ..Default::default()
    }
}

/// `OWNER` of this cluster's scheduled backups: what its retention prunes.
#[must_use]
pub fn scheduled_owner(c: &Cluster) -> String {
    backup::owner(SCHEDULED_KIND, &c.namespace, &c.names.cluster, &c.uid)
}

/// The kind of scheduled backups in their `OWNER`.
pub const SCHEDULED_KIND: &str = "scheduled";

fn pod_labels(c: &Cluster, purpose: &str) -> std::collections::BTreeMap<String, String> {
    let mut l = labels::common(&c.names, labels::JOB);
    l.insert(labels::JOB_PURPOSE.to_owned(), purpose.to_owned());
    l
}

/// A finished backup as a status record; `store` is where its pod wrote
/// ([`backup::written_to`]).
#[must_use]
pub fn record(name: &str, store: Option<&str>, outcome: &Outcome) -> Option<BackupRecord> {
    let (phase, result, at) = match outcome {
        Outcome::Running => return None,
        Outcome::Succeeded(r, at) => (BackupPhase::Succeeded, r, at),
        Outcome::Failed(r, at) => (BackupPhase::Failed, r, at),
    };
    let ok = phase == BackupPhase::Succeeded;
    Some(BackupRecord {
        name: name.to_owned(),
        outcome: Some(phase),
        time: if ok { result.finished_at.clone().or_else(|| at.clone()) } else { at.clone() },
        location: ok.then(|| backup::location_in(store, name)),
        bytes: if ok { result.bytes } else { None },
        source: result.source.clone(),
        gtid: if ok { result.gtid.clone() } else { None },
        message: (!ok).then(|| ScriptResult::explain(result)),
    })
}

/// `status.backup`: the newest finished scheduled backup observed, or the one
/// remembered (the CronJob deletes old Jobs and their pods).
#[must_use]
pub fn scheduled_status(
    parent: &MySQL,
    c: &Cluster,
    cron_job: Option<&CronJob>,
    binlog_cron_job: Option<&CronJob>,
    pods: &[&Pod],
    previous: Option<&BackupStatus>,
) -> Option<BackupStatus> {
    let remembered = previous.cloned().unwrap_or_default();
    let Some((_, storage)) = settings(parent) else {
        return previous.is_some().then_some(remembered);
    };
    let mut records: Vec<BackupRecord> = finished_runs(c, pods, SCHEDULED, cron_job)
        .iter()
        .filter_map(|run| record(&run.job, run.store(&storage).as_deref(), &run.outcome))
        .collect();
    records.sort_by(|a, b| (&a.time, &a.name).cmp(&(&b.time, &b.name)));
    let last = newer(records.last(), remembered.last);
    let last_succeeded =
        newer(records.iter().rfind(|r| r.outcome == Some(BackupPhase::Succeeded)), remembered.last_succeeded);
    let binlog_archive = archive_status(c, pods, binlog_cron_job, &storage, remembered.binlog_archive);
    let status = BackupStatus { last, last_succeeded, final_backup: remembered.final_backup, binlog_archive };
    (status != BackupStatus::default()).then_some(status)
}

/// The newer of a record found now and one remembered (by time, then name).
fn newer(candidate: Option<&BackupRecord>, kept: Option<BackupRecord>) -> Option<BackupRecord> {
    match (candidate, kept) {
        (Some(n), Some(k)) if (&k.time, &k.name) > (&n.time, &n.name) => Some(k),
        (Some(n), _) => Some(n.clone()),
        (None, k) => k,
    }
}

/// One run of a CronJob: its Job, outcome and pods.
struct Run<'a> {
    job: String,
    outcome: Outcome,
    pods: Vec<&'a Pod>,
}

impl Run<'_> {
    /// Where the run's pods wrote, else the store of the current spec.
    fn store(&self, current: &BackupStorage) -> Option<String> {
        backup::written_to(&self.pods, current)
    }
}

/// The runs of one of the cluster's CronJobs (pods labelled `purpose`), by Job,
/// with their outcomes; a run the CronJob says failed counts as failed even when
/// its pods are gone or say nothing.
fn finished_runs<'a>(c: &Cluster, pods: &[&'a Pod], purpose: &str, cron_job: Option<&CronJob>) -> Vec<Run<'a>> {
    let by_job = jobs::pods_by_job(pods.iter().copied(), |p| {
        jobs::has_label(p, labels::JOB_PURPOSE, purpose) && jobs::has_label(p, labels::INSTANCE, &c.names.label)
    });
    let failed_run = cron_job.and_then(|cj| failed_run(cj, &c.names.cron_job(purpose)));
    let mut runs: Vec<Run<'a>> = by_job
        .iter()
        .map(|(job, pods)| {
            let mut outcome = jobs::outcome_from_pods(pods, backup::BACKOFF_LIMIT);
            if let (Outcome::Running, Some((failed, at))) = (&outcome, &failed_run) {
                if failed == job {
                    outcome = Outcome::Failed(ended_without_result(), Some(at.clone()));
                }
            }
            Run { job: (*job).to_owned(), outcome, pods: pods.clone() }
        })
        .collect();
    if let Some((job, at)) = failed_run {
        if !by_job.contains_key(job.as_str()) {
            runs.push(Run { job, outcome: Outcome::Failed(ended_without_result(), Some(at)), pods: Vec::new() });
        }
    }
    runs
}

/// `YYYY-MM-DD HH:MM:SS` (UTC, as the scripts write it) as `YYYY-MM-DDTHH:MM:SSZ`,
/// the form `spec.restore.pointInTime` takes; anything else as it is.
fn rfc3339(t: &str) -> String {
    match t.split_once(' ') {
        Some((d, h)) if d.len() == 10 && h.len() == 8 => format!("{d}T{h}Z"),
        _ => t.to_owned(),
    }
}

/// `status.backup.binlogArchive`: the newest finished archive run, and how far
/// the archive reaches (the newest successful run's `until`).
fn archive_status(
    c: &Cluster,
    pods: &[&Pod],
    cron_job: Option<&CronJob>,
    storage: &BackupStorage,
    remembered: Option<BinlogArchiveStatus>,
) -> Option<BinlogArchiveStatus> {
    let remembered = remembered.unwrap_or_default();
    let mut runs: Vec<(BackupRecord, Option<String>)> = finished_runs(c, pods, BINLOG, cron_job)
        .iter()
        .filter_map(|run| {
            let until = match &run.outcome {
                Outcome::Succeeded(r, _) => r.until.as_deref().map(rfc3339),
                _ => None,
            };
            let store = run.store(storage);
            let mut rec = record(&run.job, store.as_deref(), &run.outcome)?;
            rec.location = Some(backup::location_in(store.as_deref(), backup::ARCHIVE));
            rec.source = match &run.outcome {
                Outcome::Succeeded(r, _) | Outcome::Failed(r, _) => r.primary.clone(),
                Outcome::Running => None,
            };
            Some((rec, until))
        })
        .collect();
    runs.sort_by(|(a, _), (b, _)| (&a.time, &a.name).cmp(&(&b.time, &b.name)));
    let last = newer(runs.last().map(|(r, _)| r), remembered.last);
    let archived_until = runs.iter().filter_map(|(_, u)| u.clone()).chain(remembered.archived_until).max();
    let status = BinlogArchiveStatus { last, archived_until };
    (status != BinlogArchiveStatus::default()).then_some(status)
}

/// The CronJob's last scheduled run, when the CronJob says it ended without
/// success (no active Job, and `lastScheduleTime` after `lastSuccessfulTime`): its
/// Job name (`<cronjob>-<minutes since the epoch>`) and scheduled time. This
/// catches runs whose pods say nothing, such as a Job stopped at its deadline.
fn failed_run(cron_job: &CronJob, name: &str) -> Option<(String, String)> {
    let st = cron_job.status.as_ref()?;
    if st.active.as_ref().is_some_and(|a| !a.is_empty()) {
        return None;
    }
    let scheduled = st.last_schedule_time.as_ref()?.0;
    if st.last_successful_time.as_ref().is_some_and(|t| t.0 >= scheduled) {
        return None;
    }
    Some((format!("{name}-{}", scheduled.as_second().div_euclid(60)), jobs::seconds(scheduled)))
}

fn ended_without_result() -> ScriptResult {
    ScriptResult {
        result: "error".to_owned(),
        reason: Some("JobFailed".to_owned()),
        message: Some("the Job ended without success (deadline exceeded, or its pods are gone)".to_owned()),
        ..ScriptResult::default()
    }
}

/// The final backup's Job name, `<name>-final-backup-<suffix>`.
#[must_use]
pub fn final_job_name(c: &Cluster) -> String {
    c.names.job(FINAL, &short_hash(c.uid.as_bytes())[..5])
}

/// The final backup Job.
#[must_use]
pub fn final_job(
    c: &Cluster,
    storage: &BackupStorage,
    spec: &crate::api::BackupSpec,
) -> k8s_openapi::api::batch::v1::Job {
    let name = final_job_name(c);
    let labels = pod_labels(c, FINAL);
    let pod = BackupPod {
        cluster: c,
        storage,
        name: BackupName::Fixed(name.clone()),
        primary: c.primary.clone(),
        pods: c.pods_env(),
        retention: None,
        labels: labels.clone(),
        signing_key: spec.signing_key.as_ref(),
        owner: backup::owner("final", &c.namespace, &c.names.cluster, &c.uid),
        verify: spec.verify,
        binlogs_archived: false,
        bounds: bounds(spec),
    };
    k8s_openapi::api::batch::v1::Job {
        metadata: crate::build::meta(&name, labels),
        spec: Some(backup::backup_job_spec(&pod)),
        ..Default::default()
    }
}

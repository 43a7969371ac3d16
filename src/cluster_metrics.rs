//! Per-cluster metrics, derived from what each sync and finalize call carried in and
//! what the core answered.
//!
//! The core stays pure: after it has answered, the shell reads the request (the
//! observed pods, the previous status, the spec) and the response (the new status)
//! into a [`Report`], and [`ClusterMetrics::record`] keeps the newest one per
//! cluster. Scrapes render the reports; ages ("seconds since ...") are computed at
//! scrape time, so they grow between syncs.
//!
//! Cardinality is bounded: every series is labelled with the cluster's `namespace`
//! and `name`, some also with a value from a fixed set (phase, condition type,
//! status and reason, role-change kind and reason, backup kind) or a server pod
//! (at most 9 per cluster). A cluster's series go when the finalize answer says
//! `finalized: true`, or when this process has not heard of it for the TTL (a
//! cluster deleted while another replica of the hook answered its last finalize).
//!
//! Counters count what a sync *decided*: an entry of the response that the
//! request's status did not have yet (a role change recorded, a failover Job
//! started, a failed attempt, a failed backup). Metacontroller may send the same
//! stale parent twice; each process remembers the last events it counted per
//! cluster and counts each once. Another replica of the hook handed the same stale
//! parent could count it again: rare, and `increase()` over a few minutes tells a
//! role change from none either way.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use hooks::{
    Timestamp,
    api::{BackupPhase, BackupRecord, BackupStatus, MySQLStatus, OperationKind, Phase},
    metacontroller::SyncRequest,
};
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, MetricEncoder, NoLabelSet},
    metrics::MetricType,
};

/// How long a cluster no sync or finalize has mentioned keeps its series.
pub const DEFAULT_TTL: Duration = Duration::from_secs(3 * 3600);

/// Events remembered per cluster and kind, to count each once.
const REMEMBERED_EVENTS: usize = 32;

/// Every phase, so each cluster has one series per phase (1 for the current one).
const PHASES: [Phase; 6] =
    [Phase::Pending, Phase::Initializing, Phase::Running, Phase::Degraded, Phase::Failed, Phase::Deleting];

/// Every (kind, reason) of role change the hook starts: counted from 0 as soon as a
/// cluster is known, so that `increase()` sees the first one too (a counter
/// series that appears at 1 looks like no increase).
const ROLE_CHANGES: [(&str, &str); 4] = [
    ("Failover", "PrimaryNotReady"),
    ("Switchover", "PrimaryTerminating"),
    ("Switchover", "Requested"),
    ("Switchover", "Rollout"),
];

/// The clock ages are computed with (the hook's clock, fixed in tests).
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// What one sync or finalize call says about one cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub namespace: String,
    pub name: String,
    /// The finalize answer let the object go: forget the cluster.
    pub finalized: bool,
    pub snapshot: Snapshot,
    pub events: Events,
}

/// The cluster as this call left it: gauges.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    pub phase: Option<Phase>,
    pub desired_servers: i64,
    pub servers: i64,
    pub ready_servers: i64,
    pub primary_known: bool,
    pub primary_ready: bool,
    /// `(pod, Ready, is the primary)` for every server pod.
    pub members: Vec<(String, bool, bool)>,
    /// `(type, status, reason)` of every condition.
    pub conditions: Vec<(String, String, String)>,
    /// `(kind, reason, startedAt)` of the role change in flight.
    pub operation: Option<(&'static str, String, Timestamp)>,
    pub failover_failed_attempts: i64,
    /// When the current rollout step began, while a rollout runs.
    pub rollout_step_started: Option<Timestamp>,
    pub backup_scheduled: bool,
    pub backup_running: bool,
    pub last_backup_failed: bool,
    pub last_successful_backup: Option<Timestamp>,
    /// The scheduled run that should have succeeded next.
    pub backup_due: Option<Timestamp>,
    /// The binary log archive run that should have archived past
    /// `archivedUntil` next (`spec.backup.binlogSchedule`).
    pub binlog_archive_due: Option<Timestamp>,
    pub last_role_change: Option<Timestamp>,
}

/// What this call decided that the request's status did not hold yet: counters.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Events {
    /// `(job, kind, reason)` of each role change recorded.
    pub role_changes: Vec<(String, &'static str, String)>,
    /// The failover Job started.
    pub failover_started: Option<String>,
    /// `(key, failed attempts added)`: the failed Job and the attempt count.
    pub failover_failures: Option<(String, u64)>,
    /// `(kind, backup name)` of each backup that failed.
    pub backup_failures: Vec<(&'static str, String)>,
}

impl Report {
    /// Reads a sync or finalize call: the request and the status answered.
    /// `finalized` is the finalize answer's flag (false for sync).
    #[must_use]
    pub fn of(request: &SyncRequest, status: &MySQLStatus, finalized: bool) -> Option<Self> {
        let meta = &request.parent.metadata;
        let (namespace, name) = (meta.namespace.clone()?, meta.name.clone()?);
        let previous = request.parent.status.clone().unwrap_or_default();
        Some(Self {
            namespace,
            name,
            finalized,
            snapshot: snapshot(request, status),
            events: events(&previous, status),
        })
    }
}

fn kind_label(kind: OperationKind) -> &'static str {
    match kind {
        OperationKind::Failover => "Failover",
        OperationKind::Switchover => "Switchover",
    }
}

fn phase_label(phase: Phase) -> &'static str {
    match phase {
        Phase::Pending => "Pending",
        Phase::Initializing => "Initializing",
        Phase::Running => "Running",
        Phase::Degraded => "Degraded",
        Phase::Failed => "Failed",
        Phase::Deleting => "Deleting",
    }
}

fn parse_time(text: Option<&str>) -> Option<Timestamp> {
    text.and_then(|t| t.parse().ok())
}

fn snapshot(request: &SyncRequest, status: &MySQLStatus) -> Snapshot {
    let parent = &request.parent;
    let names = hooks::names::Names::new(parent.metadata.name.as_deref().unwrap_or_default());
    let observed = hooks::observed::Observed::new(request, &names);
    let primary = status.primary.as_deref().filter(|p| !p.is_empty());
    let members =
        observed.members.values().map(|m| (m.name.to_owned(), m.ready, Some(m.name) == primary)).collect::<Vec<_>>();
    let condition = |type_: &str| status.conditions.iter().find(|c| c.type_ == type_);
    let backup = status.backup.as_ref();
    let last_successful_backup =
        parse_time(backup.and_then(|b| b.last_succeeded.as_ref()).and_then(|r| r.time.as_deref()));
    let schedule = parent.spec.backup.as_ref().and_then(|b| b.schedule.as_deref());
    // The run after the last success (or, before any, after the cluster was
    // initialized) is the one that should have succeeded by now.
    let initialized_at =
        condition(hooks::bootstrap::INITIALIZED).filter(|c| c.status == "True").map(|c| c.last_transition_time.0);
    let backup_due = schedule
        .zip(last_successful_backup.or(initialized_at))
        .and_then(|(schedule, since)| hooks::cron::next_after(schedule, since));
    // The archive run after the one that archived up to `archivedUntil`: while it
    // is missing the recovery point grows (a hung or suspended CronJob, one the
    // API server refuses) although `BinlogsArchived` still says True.
    let binlog_schedule = parent.spec.backup.as_ref().and_then(|b| b.binlog_schedule.as_deref());
    let archived_until =
        parse_time(backup.and_then(|b| b.binlog_archive.as_ref()).and_then(|a| a.archived_until.as_deref()));
    let binlog_archive_due = binlog_schedule
        .zip(archived_until.or(initialized_at))
        .and_then(|(schedule, since)| hooks::cron::next_after(schedule, since));
    let backup_running = request.children.cron_jobs.values().any(|j| {
        j.metadata.name.as_deref() == Some(names.cron_job("backup").as_str())
            && j.status.as_ref().and_then(|s| s.active.as_ref()).is_some_and(|a| !a.is_empty())
    });
    Snapshot {
        phase: status.phase,
        desired_servers: i64::from(parent.spec.replicas),
        servers: i64::from(status.replicas),
        ready_servers: i64::from(status.ready_replicas),
        primary_known: primary.is_some(),
        primary_ready: primary.and_then(|p| observed.member(p)).is_some_and(|m| m.ready),
        members,
        conditions: status.conditions.iter().map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone())).collect(),
        operation: status.operation.as_ref().map(|o| (kind_label(o.kind), o.reason.clone(), o.started_at.0)),
        failover_failed_attempts: status.failover.as_ref().map_or(0, |f| i64::from(f.failed_attempts)),
        rollout_step_started: status.rollout.as_ref().map(|r| r.step_started_at.0),
        backup_scheduled: schedule.is_some(),
        backup_running,
        last_backup_failed: backup
            .and_then(|b| b.last.as_ref())
            .is_some_and(|l| l.outcome == Some(BackupPhase::Failed)),
        last_successful_backup,
        backup_due,
        binlog_archive_due,
        last_role_change: status.role_changes.iter().map(|r| r.time.0).max(),
    }
}

fn events(previous: &MySQLStatus, status: &MySQLStatus) -> Events {
    let role_changes = status
        .role_changes
        .iter()
        .filter(|r| !previous.role_changes.iter().any(|p| p.job == r.job))
        .map(|r| (r.job.clone(), kind_label(r.kind), r.reason.clone()))
        .collect();
    let failover_started = status
        .operation
        .as_ref()
        .filter(|o| o.kind == OperationKind::Failover)
        .filter(|o| previous.operation.as_ref().is_none_or(|p| p.job != o.job))
        .map(|o| o.job.clone());
    let attempts = |s: &MySQLStatus| s.failover.as_ref().map_or(0, |f| f.failed_attempts);
    let failover_failures = status.failover.as_ref().and_then(|f| {
        let added = u64::try_from(attempts(status) - attempts(previous)).ok().filter(|n| *n > 0)?;
        // The failed Job (lastError names it; Job names are never reused) and the
        // attempt count: the same decision sent twice has the same key.
        Some((format!("{}#{}", f.last_error.as_deref().unwrap_or_default(), f.failed_attempts), added))
    });
    let failed =
        |r: Option<&BackupRecord>| r.filter(|r| r.outcome == Some(BackupPhase::Failed)).map(|r| r.name.clone());
    let mut backup_failures = Vec::new();
    let (before, after) = (previous.backup.as_ref(), status.backup.as_ref());
    fn last(b: &BackupStatus) -> Option<&BackupRecord> {
        b.last.as_ref()
    }
    fn final_backup(b: &BackupStatus) -> Option<&BackupRecord> {
        b.final_backup.as_ref()
    }
    for (kind, pick) in [("scheduled", last as fn(&BackupStatus) -> Option<&BackupRecord>), ("final", final_backup)] {
        if let Some(name) = failed(after.and_then(pick)) {
            if failed(before.and_then(pick)).as_deref() != Some(name.as_str()) {
                backup_failures.push((kind, name));
            }
        }
    }
    Events { role_changes, failover_started, failover_failures, backup_failures }
}

/// What this process keeps of one cluster.
#[derive(Debug, Default)]
struct Tracked {
    snapshot: Snapshot,
    last_seen: Option<Timestamp>,
    role_changes: BTreeMap<(&'static str, String), u64>,
    failover_attempts: u64,
    failover_failures: u64,
    backup_failures: BTreeMap<&'static str, u64>,
    /// Events already counted (bounded).
    counted: VecDeque<String>,
}

impl Tracked {
    /// Whether `key` is new; remembers it.
    fn first_time(&mut self, key: String) -> bool {
        if self.counted.contains(&key) {
            return false;
        }
        if self.counted.len() >= REMEMBERED_EVENTS {
            self.counted.pop_front();
        }
        self.counted.push_back(key);
        true
    }
}

/// The per-cluster metrics: a [`Collector`] rendered at every scrape.
pub struct ClusterMetrics {
    clusters: Mutex<BTreeMap<(String, String), Tracked>>,
    clock: Clock,
    ttl: Duration,
}

impl std::fmt::Debug for ClusterMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterMetrics").field("ttl", &self.ttl).finish_non_exhaustive()
    }
}

impl ClusterMetrics {
    #[must_use]
    pub fn new(clock: Clock, ttl: Duration) -> Self {
        Self { clusters: Mutex::new(BTreeMap::new()), clock, ttl }
    }

    /// Keeps what a call said about a cluster; forgets the cluster once finalized.
    pub fn record(&self, report: Report) {
        let now = (self.clock)();
        let mut clusters = self.clusters.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (report.namespace, report.name);
        if report.finalized {
            clusters.remove(&key);
            return;
        }
        // The map grows only here: drop the expired first, so that memory stays
        // bounded by the clusters heard of within the TTL even when nobody scrapes.
        if !clusters.contains_key(&key) {
            retain_fresh(&mut clusters, now, self.ttl);
        }
        let t = clusters.entry(key).or_insert_with(|| Tracked {
            role_changes: ROLE_CHANGES.iter().map(|(kind, reason)| ((*kind, (*reason).to_owned()), 0)).collect(),
            ..Tracked::default()
        });
        let events = report.events;
        for (job, kind, reason) in events.role_changes {
            if t.first_time(format!("role:{job}")) {
                *t.role_changes.entry((kind, reason)).or_default() += 1;
            }
        }
        if let Some(job) = events.failover_started {
            if t.first_time(format!("failover:{job}")) {
                t.failover_attempts += 1;
            }
        }
        if let Some((key, added)) = events.failover_failures {
            if t.first_time(format!("failed:{key}")) {
                t.failover_failures += added;
            }
        }
        for (kind, name) in events.backup_failures {
            if t.first_time(format!("backup:{kind}:{name}")) {
                *t.backup_failures.entry(kind).or_default() += 1;
            }
        }
        t.snapshot = report.snapshot;
        t.last_seen = Some(now);
    }

    /// Clusters known, after dropping those not heard of for the TTL.
    #[must_use]
    pub fn len(&self) -> usize {
        self.expire();
        self.clusters.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether no cluster is known.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn expire(&self) {
        let now = (self.clock)();
        retain_fresh(&mut self.clusters.lock().unwrap_or_else(PoisonError::into_inner), now, self.ttl);
    }
}

/// Drops the clusters not heard of for `ttl`.
fn retain_fresh(clusters: &mut BTreeMap<(String, String), Tracked>, now: Timestamp, ttl: Duration) {
    let ttl = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
    clusters.retain(|_, t| t.last_seen.is_some_and(|seen| now.as_second().saturating_sub(seen.as_second()) < ttl));
}

/// Seconds from `then` to `now`, never negative.
fn age(now: Timestamp, then: Timestamp) -> f64 {
    let seconds = (now.as_millisecond() - then.as_millisecond()) as f64 / 1000.0;
    seconds.max(0.0)
}

fn epoch_seconds(t: Timestamp) -> f64 {
    t.as_millisecond() as f64 / 1000.0
}

/// One metric family being written.
struct Family<'m> {
    metric: MetricEncoder<'m>,
}

impl Family<'_> {
    fn gauge(&mut self, labels: &impl EncodeLabelSet, value: f64) -> Result<(), std::fmt::Error> {
        self.metric.encode_family(labels)?.encode_gauge(&value)
    }

    fn counter(&mut self, labels: &impl EncodeLabelSet, value: u64) -> Result<(), std::fmt::Error> {
        self.metric.encode_family(labels)?.encode_counter::<NoLabelSet, _, u64>(&value, None)
    }
}

fn flag(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

fn count(n: i64) -> f64 {
    n as f64
}

/// Writes one family: `name` (without the registry's prefix), its help and type,
/// then every series `series` writes.
fn family<'e>(
    encoder: &'e mut DescriptorEncoder<'_>,
    name: &'e str,
    help: &str,
    metric_type: MetricType,
    series: impl FnOnce(&mut Family<'_>) -> Result<(), std::fmt::Error>,
) -> Result<(), std::fmt::Error> {
    let metric = encoder.encode_descriptor(name, help, None, metric_type)?;
    series(&mut Family { metric })
}

type Clusters = BTreeMap<(String, String), Tracked>;

/// Each cluster's `(namespace, name)` labels with its tracked state.
fn each(clusters: &Clusters) -> impl Iterator<Item = ([(&'static str, &str); 2], &Tracked)> {
    clusters.iter().map(|((ns, name), t)| ([("namespace", ns.as_str()), ("name", name.as_str())], t))
}

/// A gauge family with one series per cluster, skipped where `value` is `None`.
fn per_cluster(
    encoder: &mut DescriptorEncoder<'_>,
    clusters: &Clusters,
    name: &str,
    help: &str,
    value: impl Fn(&Tracked) -> Option<f64>,
) -> Result<(), std::fmt::Error> {
    family(encoder, name, help, MetricType::Gauge, |f| {
        for (labels, t) in each(clusters) {
            if let Some(v) = value(t) {
                f.gauge(&labels, v)?;
            }
        }
        Ok(())
    })
}

impl Collector for ClusterMetrics {
    #[allow(clippy::too_many_lines)] // one family after another
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.expire();
        let now = (self.clock)();
        let clusters = self.clusters.lock().unwrap_or_else(PoisonError::into_inner);
        let e = &mut encoder;
        e.encode_descriptor(
            "clusters",
            "MySQL clusters this process has heard of within the TTL",
            None,
            MetricType::Gauge,
        )?
        .encode_gauge(&(clusters.len() as f64))?;
        per_cluster(
            e,
            &clusters,
            "cluster_last_sync_timestamp_seconds",
            "When this process last answered a sync or finalize of the cluster (each hook replica exports its own; the freshest wins)",
            |t| t.last_seen.map(epoch_seconds),
        )?;
        family(
            e,
            "cluster_phase",
            "1 for the cluster's status.phase, 0 for the other phases",
            MetricType::Gauge,
            |f| {
                for (labels, t) in each(&clusters) {
                    for phase in PHASES {
                        let [ns, name] = labels;
                        f.gauge(&[ns, name, ("phase", phase_label(phase))], flag(t.snapshot.phase == Some(phase)))?;
                    }
                }
                Ok(())
            },
        )?;
        per_cluster(e, &clusters, "cluster_desired_servers", "spec.replicas: the servers asked for", |t| {
            Some(count(t.snapshot.desired_servers))
        })?;
        per_cluster(e, &clusters, "cluster_servers", "status.replicas: server pods that exist", |t| {
            Some(count(t.snapshot.servers))
        })?;
        per_cluster(e, &clusters, "cluster_ready_servers", "status.readyReplicas: server pods that are Ready", |t| {
            Some(count(t.snapshot.ready_servers))
        })?;
        per_cluster(e, &clusters, "cluster_primary_known", "1 when status.primary names a pod", |t| {
            Some(flag(t.snapshot.primary_known))
        })?;
        per_cluster(
            e,
            &clusters,
            "cluster_primary_ready",
            "1 when the pod status.primary names is Ready (a Ready primary is writable: the readiness probe)",
            |t| Some(flag(t.snapshot.primary_ready)),
        )?;
        family(
            e,
            "cluster_server_ready",
            "1 when the server pod is Ready; role is primary or replica",
            MetricType::Gauge,
            |f| {
                for (labels, t) in each(&clusters) {
                    let [ns, name] = labels;
                    for (pod, ready, primary) in &t.snapshot.members {
                        let role = if *primary { "primary" } else { "replica" };
                        f.gauge(&[ns, name, ("pod", pod.as_str()), ("role", role)], flag(*ready))?;
                    }
                }
                Ok(())
            },
        )?;
        family(
            e,
            "cluster_condition",
            "1 for each condition of the cluster's status, with its type, status and reason",
            MetricType::Gauge,
            |f| {
                for (labels, t) in each(&clusters) {
                    let [ns, name] = labels;
                    for (type_, status, reason) in &t.snapshot.conditions {
                        f.gauge(
                            &[
                                ns,
                                name,
                                ("type", type_.as_str()),
                                ("status", status.as_str()),
                                ("reason", reason.as_str()),
                            ],
                            1.0,
                        )?;
                    }
                }
                Ok(())
            },
        )?;
        let condition_is = |t: &Tracked, type_: &str| {
            t.snapshot.conditions.iter().find(|(ty, _, _)| ty == type_).map(|(_, s, _)| flag(s == "True"))
        };
        per_cluster(
            e,
            &clusters,
            "cluster_spec_accepted",
            "0 while part of the spec is refused (condition SpecAccepted False)",
            |t| condition_is(t, "SpecAccepted"),
        )?;
        per_cluster(
            e,
            &clusters,
            "cluster_semi_sync_protected",
            "1 when commits wait for a replica's acknowledgement (condition SemiSyncProtected)",
            |t| condition_is(t, "SemiSyncProtected"),
        )?;
        per_cluster(
            e,
            &clusters,
            "cluster_operation_in_flight",
            "1 while a role change (failover or switchover Job) runs",
            |t| Some(flag(t.snapshot.operation.is_some())),
        )?;
        family(
            e,
            "cluster_operation_age_seconds",
            "Seconds since the role change in flight started (status.operation.startedAt)",
            MetricType::Gauge,
            |f| {
                for (labels, t) in each(&clusters) {
                    let [ns, name] = labels;
                    if let Some((kind, reason, started)) = &t.snapshot.operation {
                        f.gauge(&[ns, name, ("kind", *kind), ("reason", reason.as_str())], age(now, *started))?;
                    }
                }
                Ok(())
            },
        )?;
        per_cluster(
            e,
            &clusters,
            "cluster_failover_failed_attempts",
            "Failover Jobs that failed during the current primary outage (status.failover.failedAttempts)",
            |t| Some(count(t.snapshot.failover_failed_attempts)),
        )?;
        per_cluster(
            e,
            &clusters,
            "cluster_rollout_in_progress",
            "1 while an ordered rollout of a new pod template runs (status.rollout)",
            |t| Some(flag(t.snapshot.rollout_step_started.is_some())),
        )?;
        per_cluster(
            e,
            &clusters,
            "cluster_rollout_step_age_seconds",
            "Seconds since the current rollout step began",
            |t| t.snapshot.rollout_step_started.map(|s| age(now, s)),
        )?;
        per_cluster(e, &clusters, "cluster_backup_scheduled", "1 when spec.backup.schedule is set", |t| {
            Some(flag(t.snapshot.backup_scheduled))
        })?;
        per_cluster(e, &clusters, "cluster_backup_running", "1 while the backup CronJob has an active Job", |t| {
            Some(flag(t.snapshot.backup_running))
        })?;
        per_cluster(
            e,
            &clusters,
            "cluster_last_backup_failed",
            "1 when the newest finished scheduled backup failed (status.backup.last)",
            |t| Some(flag(t.snapshot.last_backup_failed)),
        )?;
        per_cluster(
            e,
            &clusters,
            "cluster_seconds_since_last_successful_backup",
            "Seconds since the newest successful scheduled backup finished (status.backup.lastSucceeded)",
            |t| t.snapshot.last_successful_backup.map(|s| age(now, s)),
        )?;
        per_cluster(
            e,
            &clusters,
            "cluster_backup_overdue_seconds",
            "Seconds since the scheduled run after the last successful backup (or after initialization) was due; 0 before",
            |t| t.snapshot.backup_due.map(|d| age(now, d)),
        )?;
        per_cluster(
            e,
            &clusters,
            "cluster_binlog_archive_overdue_seconds",
            "Seconds since the binary log archive run after status.backup.binlogArchive.archivedUntil (or after initialization) was due; 0 before",
            |t| t.snapshot.binlog_archive_due.map(|d| age(now, d)),
        )?;
        per_cluster(
            e,
            &clusters,
            "cluster_last_role_change_timestamp_seconds",
            "When the newest recorded role change moved the primary (status.roleChanges)",
            |t| t.snapshot.last_role_change.map(epoch_seconds),
        )?;
        family(
            e,
            "cluster_role_changes",
            "Role changes recorded by syncs this process answered, by kind and reason",
            MetricType::Counter,
            |f| {
                for (labels, t) in each(&clusters) {
                    let [ns, name] = labels;
                    for ((kind, reason), n) in &t.role_changes {
                        f.counter(&[ns, name, ("kind", *kind), ("reason", reason.as_str())], *n)?;
                    }
                }
                Ok(())
            },
        )?;
        family(
            e,
            "cluster_failover_attempts",
            "Failover Jobs started by syncs this process answered",
            MetricType::Counter,
            |f| {
                for (labels, t) in each(&clusters) {
                    f.counter(&labels, t.failover_attempts)?;
                }
                Ok(())
            },
        )?;
        family(
            e,
            "cluster_failover_failures",
            "Failover Jobs whose failure syncs this process answered recorded",
            MetricType::Counter,
            |f| {
                for (labels, t) in each(&clusters) {
                    f.counter(&labels, t.failover_failures)?;
                }
                Ok(())
            },
        )?;
        family(
            e,
            "cluster_backup_failures",
            "Failed backups recorded by syncs this process answered; kind scheduled or final",
            MetricType::Counter,
            |f| {
                for (labels, t) in each(&clusters) {
                    let [ns, name] = labels;
                    for kind in ["scheduled", "final"] {
                        f.counter(&[ns, name, ("kind", kind)], t.backup_failures.get(kind).copied().unwrap_or(0))?;
                    }
                }
                Ok(())
            },
        )?;
        Ok(())
    }
}

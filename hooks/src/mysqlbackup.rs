//! The `MySQLBackup` controller: a one-shot backup of a named cluster, served at
//! `/backup/sync` and `/backup/customize` by its own CompositeController.
//!
//! Its only child is the backup Job `<backup>-backup-<suffix>`, writing to the
//! cluster's `spec.backup.storage` under the Job's name. The hook learns the
//! cluster (its flavor, image, credentials, primary) and the cluster's server pods
//! as related objects, and passes `PODS` with the Ready replicas first and
//! `PRIMARY`, so `backup.sh` reads from a healthy replica whenever there is one
//! and from the primary only otherwise. The status records phase, start and
//! completion, location and size from the Job pod's termination message, and the
//! store, so a restore needs nothing but this object.
//!
//! A finished `MySQLBackup` is never run again; deleting it does not delete the
//! backup in the store.

use std::collections::BTreeMap;

use k8s_openapi::api::{batch::v1::Job, core::v1::Pod};

use crate::{
    Context, access,
    api::{BackupPhase, MySQLBackup, MySQLBackupStatus},
    backups,
    build::{
        backup::{self, BackupName, BackupPod},
        meta,
    },
    conditions,
    error::{Error, Result},
    jobs::{self, Outcome},
    labels,
    metacontroller::{
        BackupCustomizeRequest, BackupSyncRequest, BackupSyncResponse, Child, CustomizeResponse, LabelSelector,
        Related, RelatedResourceRule, SyncRequest,
    },
    model::Cluster,
    names::{Names, short_hash},
    observed::Observed,
};

/// Label carrying the `MySQLBackup`'s name on its Job pods.
pub const BACKUP_LABEL: &str = "mysqlhook.dev/mysqlbackup";
/// Component label of `MySQLBackup` Job pods.
pub const COMPONENT: &str = "backup";
const RESYNC_SECONDS: u32 = 10;

/// Answers a `MySQLBackup` sync call.
///
/// # Errors
/// [`Error::InvalidRequest`] when the parent lacks name, namespace or uid.
pub fn sync(request: &BackupSyncRequest, ctx: &Context) -> Result<BackupSyncResponse> {
    let parent = &request.parent;
    let (name, namespace, uid) = identity(parent)?;
    let previous = parent.status.clone().unwrap_or_default();
    let names = Names::new(name);
    let job_name = names.job("backup", &short_hash(uid.as_bytes())[..5]);
    let observed_job = request.children.jobs.values().find(|j| j.metadata.name.as_deref() == Some(job_name.as_str()));
    let cluster_name = parent.spec.cluster.as_str();
    let mysql = request.related.mysqls.values().find(|m| {
        m.metadata.name.as_deref() == Some(cluster_name) && m.metadata.namespace.as_deref() == Some(namespace)
    });
    let terminal = matches!(previous.phase, Some(BackupPhase::Succeeded | BackupPhase::Failed));

    let kept = observed_job.map(jobs::keep);
    let Some(mysql) = mysql else {
        let status = if terminal {
            previous
        } else if observed_job.is_some() {
            finished(previous, BackupPhase::Failed, ctx, format!("MySQL {cluster_name} was deleted during the backup"))
        } else {
            pending(previous, format!("waiting for MySQL {cluster_name} in namespace {namespace}"))
        };
        return Ok(answer(ctx, status, kept));
    };
    let Some((backup_spec, storage)) = backups::settings(mysql) else {
        let status = if terminal {
            previous
        } else if observed_job.is_some() {
            finished(
                previous,
                BackupPhase::Failed,
                ctx,
                format!("MySQL {cluster_name} lost its spec.backup.storage during the backup"),
            )
        } else {
            pending(previous, format!("MySQL {cluster_name} has no spec.backup.storage to write to"))
        };
        return Ok(answer(ctx, status, kept));
    };
    // The store this backup was started with, once recorded: its Job (OnDelete) keeps
    // writing there whatever spec.backup.storage says now, and a restore must read
    // it from there.
    let storage = previous.storage.clone().unwrap_or(storage);
    let initialized = mysql
        .status
        .as_ref()
        .is_some_and(|s| conditions::is_true(&s.conditions, crate::bootstrap::INITIALIZED) && s.primary.is_some());
    if !initialized && observed_job.is_none() {
        let status = if terminal {
            previous
        } else {
            pending(previous, format!("waiting for MySQL {cluster_name} to be initialized"))
        };
        return Ok(answer(ctx, status, None));
    }

    // The cluster as its own hook sees it, from the MySQL and its server pods.
    let cluster_pods: BTreeMap<String, Pod> = request
        .related
        .pods
        .iter()
        .filter(|(_, p)| !jobs::has_label(p, labels::COMPONENT, COMPONENT))
        .map(|(k, p)| (k.clone(), p.clone()))
        .collect();
    let view = SyncRequest {
        controller: serde::de::IgnoredAny,
        parent: mysql.clone(),
        children: crate::metacontroller::Children::default(),
        related: Related { pods: cluster_pods, ..Related::default() },
        finalizing: false,
    };
    let cluster_names = Names::new(cluster_name);
    let observed = Observed::new(&view, &cluster_names);
    let (mut cluster, _) =
        access::resolve(mysql, &observed, ctx, mysql.status.as_ref().and_then(|s| s.primary.as_deref()), None);
    // spec.tls: this hook sees neither the certificate nor the servers' option files;
    // the cluster's own hook decided, in its config ConfigMap, whether clients verify.
    cluster.tls = crate::tls::decided(mysql, &cluster.names, &request.related.config_maps);
    // Nor the credentials Secret: its key `rootRemote` in the config ConfigMap says
    // the cluster's hook found the operator account's password there.
    (cluster.operator_account, cluster.root_remote_drop) =
        operator_account_decided(&cluster.names, &request.related.config_maps);
    let gate = access::Gate {
        namespace,
        cluster: cluster_name,
        secrets: &request.related.secrets,
        service_accounts: &request.related.service_accounts,
        claims: &request.related.claims,
        allowed_images: &ctx.allowed_images,
    };
    if observed_job.is_none() && !terminal {
        // A Job that runs already keeps going; a new one needs a store it may use.
        if let Err(refusal) = gate.storage(&storage, backup_spec.signing_key.as_ref()) {
            return Ok(answer(ctx, pending(previous, refusal.message), None));
        }
    }
    let (pods_env, source) = pods_replicas_first(&cluster, &observed);

    let mut pod_labels = BTreeMap::from([
        (labels::NAME.to_owned(), "mysql".to_owned()),
        (labels::MANAGED_BY.to_owned(), labels::MANAGER.to_owned()),
        (labels::COMPONENT.to_owned(), COMPONENT.to_owned()),
        (BACKUP_LABEL.to_owned(), names.label.clone()),
    ]);
    pod_labels.insert(labels::JOB_PURPOSE.to_owned(), "backup".to_owned());
    let pod = BackupPod {
        cluster: &cluster,
        storage: &storage,
        name: BackupName::Fixed(job_name.clone()),
        primary: cluster.primary.clone(),
        pods: pods_env,
        retention: None,
        labels: pod_labels.clone(),
        signing_key: backup_spec.signing_key.as_ref(),
        owner: backup::owner("mysqlbackup", namespace, name, uid),
        verify: backup_spec.verify || parent.spec.verify,
        binlogs_archived: false,
        bounds: crate::backups::bounds(backup_spec),
    };
    let job =
        Job { metadata: meta(&job_name, pod_labels), spec: Some(backup::backup_job_spec(&pod)), ..Default::default() };

    if terminal {
        // Kept while it exists (its logs), never created again.
        return Ok(answer(ctx, previous, kept));
    }
    let own_pods: Vec<&Pod> = request
        .related
        .pods
        .values()
        .filter(|p| jobs::has_label(p, BACKUP_LABEL, &names.label) && jobs::has_label(p, labels::COMPONENT, COMPONENT))
        .collect();
    let by_job = jobs::pods_by_job(own_pods.into_iter(), |_| true);
    let mut status = MySQLBackupStatus {
        start_time: previous.start_time.clone().or_else(|| Some(jobs::seconds(ctx.now))),
        name: Some(job_name.clone()),
        location: Some(backup::location(&storage, &job_name)),
        storage: Some(storage.clone()),
        flavor: Some(cluster.flavor),
        ..previous.clone()
    };
    let outcome = observed_job.map_or(Outcome::Running, |j| {
        jobs::outcome_of_job(j, by_job.get(job_name.as_str()).map_or(&[][..], Vec::as_slice))
    });
    match outcome {
        Outcome::Running => {
            status.phase = Some(BackupPhase::Running);
            status.message = Some(source);
        }
        Outcome::Succeeded(result, at) => {
            status.phase = Some(BackupPhase::Succeeded);
            status.completion_time = result.finished_at.clone().or(at).or_else(|| Some(jobs::seconds(ctx.now)));
            status.bytes = result.bytes;
            status.source = result.source;
            status.gtid = result.gtid;
            status.sha256 = result.sha256;
            status.verified = result.verified;
            status.verified_tables = result.verified_tables;
            status.message = None;
        }
        Outcome::Failed(result, at) => {
            status.phase = Some(BackupPhase::Failed);
            status.completion_time = at.or_else(|| Some(jobs::seconds(ctx.now)));
            status.source = result.source.clone();
            status.message = Some(format!("Job {job_name} failed: {}", result.explain()));
        }
    }
    Ok(answer(ctx, status, Some(job)))
}

fn identity(parent: &MySQLBackup) -> Result<(&str, &str, &str)> {
    let m = &parent.metadata;
    match (m.name.as_deref(), m.namespace.as_deref(), m.uid.as_deref()) {
        (Some(n), Some(ns), Some(u)) if !n.is_empty() && !ns.is_empty() && !u.is_empty() => Ok((n, ns, u)),
        _ => Err(Error::InvalidRequest("parent.metadata.name, namespace and uid are required".to_owned())),
    }
}

fn pending(previous: MySQLBackupStatus, message: String) -> MySQLBackupStatus {
    MySQLBackupStatus { phase: Some(BackupPhase::Pending), message: Some(message), ..previous }
}

fn finished(previous: MySQLBackupStatus, phase: BackupPhase, ctx: &Context, message: String) -> MySQLBackupStatus {
    MySQLBackupStatus {
        phase: Some(phase),
        completion_time: previous.completion_time.clone().or_else(|| Some(jobs::seconds(ctx.now))),
        message: Some(message),
        ..previous
    }
}

fn answer(ctx: &Context, mut status: MySQLBackupStatus, job: Option<Job>) -> BackupSyncResponse {
    status.conditions = backup_conditions(&status, ctx.now);
    let busy = !matches!(status.phase, Some(BackupPhase::Succeeded | BackupPhase::Failed));
    BackupSyncResponse {
        status,
        children: job.into_iter().map(|j| Child::Job(Box::new(j))).collect(),
        resync_after_seconds: busy.then_some(RESYNC_SECONDS),
    }
}

/// `Complete` and `Failed`, as a Job has them, from the phase.
fn backup_conditions(
    status: &MySQLBackupStatus,
    now: k8s_openapi::jiff::Timestamp,
) -> Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    let mut c = conditions::Conditions::new(&status.conditions, now);
    let message = match (&status.message, &status.location) {
        (Some(m), _) => m.clone(),
        (None, Some(l)) if status.phase == Some(BackupPhase::Succeeded) => format!("backed up to {l}"),
        (None, _) => String::new(),
    };
    let (reason, complete, failed) = match status.phase {
        Some(BackupPhase::Succeeded) => ("Succeeded", true, false),
        Some(BackupPhase::Failed) => ("Failed", false, true),
        Some(BackupPhase::Running) => ("Running", false, false),
        Some(BackupPhase::Pending) | None => ("Pending", false, false),
    };
    c.set(COMPLETE, complete, reason, message.clone());
    c.set(FAILED, failed, reason, message);
    c.finish()
}

/// The `MySQLBackup` condition True once the backup succeeded.
pub const COMPLETE: &str = "Complete";
/// The `MySQLBackup` condition True once the backup failed.
pub const FAILED: &str = "Failed";

/// `PODS` with the Ready replicas first (ordinal order), then the others and the
/// primary, and a sentence on where the backup will be read from.
fn pods_replicas_first(c: &Cluster, observed: &Observed<'_>) -> (String, String) {
    let entry = |i: i32| format!("{}={}:3306", c.names.pod(i), c.names.pod_host(i, &c.namespace));
    let ready_replicas: Vec<i32> = (0..c.replicas)
        .filter(|i| c.names.pod(*i) != c.primary && observed.members.get(i).is_some_and(|m| m.ready))
        .collect();
    let rest = (0..c.replicas).filter(|i| !ready_replicas.contains(i));
    let pods = ready_replicas.iter().copied().chain(rest).map(entry).collect::<Vec<_>>().join(" ");
    let source = match ready_replicas.first() {
        Some(i) => format!("backing up from a healthy replica (first candidate {})", c.names.pod(*i)),
        None => format!("no Ready replica: backing up from the primary {}", c.primary),
    };
    (pods, source)
}

/// Whether the cluster's own hook runs it with the operator account (its config
/// ConfigMap has the key `rootRemote`, which it writes only then), and whether
/// root is local only already (`drop`). Without the ConfigMap (not observed yet):
/// no and no, so a Job never mounts a key that may not exist.
fn operator_account_decided(
    names: &Names,
    config_maps: &crate::metacontroller::ByKey<k8s_openapi::api::core::v1::ConfigMap>,
) -> (bool, bool) {
    let value = crate::memory::config_value(names, config_maps, crate::memory::ROOT_REMOTE_KEY);
    (value.is_some(), value.is_some_and(|v| v.trim() == "drop"))
}

/// Answers a `MySQLBackup` customize call: the cluster, its server pods, this
/// backup's Job pods and the Secrets opted in as S3 credentials, all in the
/// backup's namespace.
///
/// # Errors
/// [`Error::InvalidRequest`] when the parent has no name or namespace.
pub fn customize(request: &BackupCustomizeRequest) -> Result<CustomizeResponse> {
    let m = &request.parent.metadata;
    let (Some(name), Some(namespace)) =
        (m.name.as_deref().filter(|n| !n.is_empty()), m.namespace.as_deref().filter(|n| !n.is_empty()))
    else {
        return Err(Error::InvalidRequest("parent.metadata.name and namespace are required".to_owned()));
    };
    let cluster = request.parent.spec.cluster.as_str();
    let pods = |match_labels| RelatedResourceRule {
        api_version: "v1".to_owned(),
        resource: "pods".to_owned(),
        namespace: Some(namespace.to_owned()),
        label_selector: Some(LabelSelector { match_labels }),
        names: Vec::new(),
    };
    Ok(CustomizeResponse {
        related_resources: vec![
            RelatedResourceRule {
                api_version: "mysqlhook.dev/v1alpha1".to_owned(),
                resource: "mysqls".to_owned(),
                namespace: Some(namespace.to_owned()),
                label_selector: None,
                names: vec![cluster.to_owned()],
            },
            pods(labels::database_selector(&Names::new(cluster))),
            pods(BTreeMap::from([
                (labels::MANAGED_BY.to_owned(), labels::MANAGER.to_owned()),
                (BACKUP_LABEL.to_owned(), Names::new(name).label),
            ])),
            // The cluster's store may be S3: the opted-in credentials Secrets; or a
            // volume claim: those opted in as stores.
            access::opted_in_secrets(namespace),
            access::opted_in_claims(namespace),
            access::opted_in_service_accounts(namespace),
            // Whether the cluster's clients verify TLS (spec.tls), and whether it
            // uses the operator account (its key rootRemote).
            RelatedResourceRule {
                api_version: "v1".to_owned(),
                resource: "configmaps".to_owned(),
                namespace: Some(namespace.to_owned()),
                label_selector: None,
                names: vec![Names::new(cluster).config],
            },
        ],
    })
}

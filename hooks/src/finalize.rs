//! The finalize hook: deleting a cluster safely, by `spec.deletionPolicy`.
//!
//! - `Retain` and `Delete`: make sure the StatefulSet's volume claim retention
//!   policy says what the user asked for (it may have been changed just before the
//!   delete) and that its controller has observed it; with `Retain`, also that the
//!   StatefulSet owns none of the volume claims (claims owned under an earlier
//!   `Delete`, or of servers scaled away then, would be garbage-collected with it:
//!   the cluster is kept and the `Deleting` condition says how to release them).
//!   Then remove every child, and answer `finalized: true` only when the
//!   StatefulSet and its pods are really gone.
//! - `Backup`: a final backup must succeed first. The hook emits the Job
//!   `<name>-final-backup-<suffix>` next to every child and answers
//!   `finalized: false` until it has succeeded; then it proceeds like `Retain`
//!   (the Job stays until the end). A failed final backup keeps the cluster, and
//!   so does a cluster without `spec.backup.storage`: data is never lost to a
//!   backup that did not happen. `status.backup.finalBackup` records it. A
//!   cluster that never finished bootstrapping (or restoring) gets no final
//!   backup: it holds nothing committed, and its servers may never start.

use k8s_openapi::api::batch::v1::Job;

use crate::{
    Context, access,
    api::{BackupPhase, BackupRecord, BackupStatus, DeletionPolicy, MySQLStatus, Phase},
    backups,
    build::statefulset,
    conditions::Conditions,
    error::Result,
    jobs,
    metacontroller::{Child, FinalizeResponse, SyncRequest},
    model::Cluster,
    names::Names,
    observed::Observed,
    sync,
};

const RESYNC_SECONDS: u32 = 5;

/// Answers a finalize call.
///
/// # Errors
/// As [`sync::sync`].
pub fn finalize(request: &SyncRequest, ctx: &Context) -> Result<FinalizeResponse> {
    sync::validate(request)?;
    let names = Names::new(request.parent.metadata.name.as_deref().unwrap_or_default());
    let observed = Observed::new(request, &names);
    let memory = crate::memory::recall(&request.parent, &observed, &names);
    let (cluster, _) = access::resolve(
        &request.parent,
        &observed,
        ctx,
        memory.primary.as_ref().map(|p| p.pod.as_str()),
        memory.newest_version,
    );
    let previous = request.parent.status.clone().unwrap_or_default();

    let want_retention = Some(statefulset::claims_when_deleted(&cluster).to_owned());
    let have_retention = observed
        .stateful_set
        .and_then(|s| s.spec.persistent_volume_claim_retention_policy.as_ref())
        .and_then(|p| p.when_deleted.clone())
        .or_else(|| Some("Retain".to_owned()));

    // A cluster that never finished bootstrapping (or restoring) holds nothing a
    // client was told is committed: no final backup of it, which could only wait
    // for servers that never start, or "succeed" on half-loaded data.
    let never_initialized = cluster.deletion_policy == DeletionPolicy::Backup && !memory.initialized;
    let final_backup = (cluster.deletion_policy == DeletionPolicy::Backup && memory.initialized)
        .then(|| final_backup(request, &cluster, &observed, previous.backup.as_ref(), ctx));
    // While the final backup runs or has failed, the roles keep working (a failover,
    // a drain's switchover): it needs a writable primary, and a primary that
    // restarted comes back read-only. Nothing else starts while deleting.
    let recovering = matches!(final_backup, Some(FinalBackup::Running(_) | FinalBackup::Failed(..)));
    // Every child as a sync answers, while deletion waits; the answer is kept for
    // the status below.
    let mut synced = None;
    let mut keep_everything = || -> Result<Vec<Child>> {
        let answer = sync::sync_with_roles(request, ctx, recovering)?;
        let children = answer.children.clone();
        synced = Some(answer);
        Ok(children)
    };
    let mut reason = if never_initialized { "NeverInitialized" } else { deletion_reason(cluster.deletion_policy) };
    let (mut children, finalized, message) = match &final_backup {
        Some(FinalBackup::NoTarget) => {
            reason = "NoBackupTarget";
            (
                keep_everything()?,
                false,
                "deletionPolicy Backup needs spec.backup.storage for the final backup; the cluster is kept. Add spec.backup, or set deletionPolicy to Retain or Delete to proceed without one".to_owned(),
            )
        }
        Some(FinalBackup::Refused(refusal)) => {
            reason = "FinalBackupRefused";
            (
                keep_everything()?,
                false,
                format!(
                    "the final backup cannot start: {}; the cluster is kept. Fix the store, or set deletionPolicy to Retain or Delete to proceed without it",
                    refusal.message
                ),
            )
        }
        Some(FinalBackup::Running(job)) => {
            reason = "FinalBackupRunning";
            let mut children = keep_everything()?;
            children.push(Child::Job(job.clone()));
            let name = job.metadata.name.as_deref().unwrap_or_default();
            (
                children,
                false,
                format!("taking the final backup (Job {name}); the cluster is deleted once it has succeeded"),
            )
        }
        Some(FinalBackup::Failed(job, record)) => {
            reason = "FinalBackupFailed";
            let mut children = keep_everything()?;
            children.push(Child::Job(job.clone()));
            (
                children,
                false,
                format!(
                    "the final backup {} failed: {}; the cluster is kept (failover keeps working while it is). Delete the Job to retry, or set deletionPolicy to Retain or Delete to proceed without it",
                    record.name,
                    record.message.as_deref().unwrap_or_default()
                ),
            )
        }
        _ if observed.stateful_set.is_some() && have_retention != want_retention => (
            keep_everything()?,
            false,
            format!(
                "setting the volume retention policy to {} before deleting the StatefulSet",
                want_retention.as_deref().unwrap_or("Retain")
            ),
        ),
        _ if observed.stateful_set.is_some_and(|s| !policy_observed(s)) => (
            keep_everything()?,
            false,
            "waiting for the StatefulSet controller to observe the volume retention policy before deleting the StatefulSet".to_owned(),
        ),
        _ if cluster.deletion_policy != DeletionPolicy::Delete && !owned_claims(request, &cluster).is_empty() => {
            reason = "VolumesStillOwned";
            let owned = owned_claims(request, &cluster);
            (
                keep_everything()?,
                false,
                format!(
                    "the StatefulSet still owns the volume claims {} (an earlier deletionPolicy: Delete; claims of servers scaled away are never released by its controller), so deleting it now would delete them; the cluster is kept. To keep them: kubectl -n {} patch pvc <claim> --type=json -p '[{{\"op\":\"remove\",\"path\":\"/metadata/ownerReferences\"}}]'; or set deletionPolicy to Delete",
                    owned.join(", "),
                    cluster.namespace
                ),
            )
        }
        _ => {
            let policy = cluster.deletion_policy;
            let remaining = observed.members.len() + usize::from(observed.stateful_set.is_some());
            let volumes = if policy == DeletionPolicy::Delete { "deleted with the pods" } else { "kept" };
            let backed_up = match &final_backup {
                Some(FinalBackup::Succeeded(_, record)) => {
                    format!("the final backup is at {}; ", record.location.as_deref().unwrap_or(&record.name))
                }
                _ if never_initialized => {
                    "no final backup: the cluster never finished bootstrapping or restoring, so it holds no committed data; ".to_owned()
                }
                _ => String::new(),
            };
            let message = if remaining == 0 {
                format!("{backed_up}all servers are gone; volumes {volumes}")
            } else {
                format!(
                    "{backed_up}waiting for {} pods and the StatefulSet to be deleted; volumes {volumes}",
                    observed.members.len()
                )
            };
            (Vec::new(), remaining == 0, message)
        }
    };
    // The final backup Job stays until the end: its success is what allowed the deletion.
    if let Some(FinalBackup::Succeeded(Some(job), _)) = &final_backup {
        if !children.iter().any(|c| c.sort_key() == ("Job", job.metadata.name.as_deref().unwrap_or_default())) {
            children.push(Child::Job(job.clone()));
        }
    }
    children.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    // While every child is kept, the status is the sync's (roles, servers, rollout
    // as they stand); once children go, the last one as it was.
    let base = synced.map_or_else(|| previous.clone(), |s| s.status);
    let mut conditions = Conditions::new(&previous.conditions, ctx.now);
    for c in &base.conditions {
        if c.type_ != "Ready" && c.type_ != "Deleting" {
            conditions.set(&c.type_, c.status == "True", &c.reason, c.message.clone());
        }
    }
    conditions.set("Deleting", true, reason, message);
    conditions.set("Ready", false, "Deleting", "the cluster is being deleted");
    let mut backup = previous.backup.clone();
    if let Some(FinalBackup::Failed(_, record) | FinalBackup::Succeeded(_, record)) = &final_backup {
        backup.get_or_insert_with(BackupStatus::default).final_backup = Some(record.clone());
    }
    let status = MySQLStatus {
        phase: Some(Phase::Deleting),
        conditions: conditions.finish(),
        replicas: i32::try_from(observed.members.len()).unwrap_or(i32::MAX),
        ready_replicas: i32::try_from(observed.ready_members().count()).unwrap_or(i32::MAX),
        backup,
        ..base
    };
    Ok(FinalizeResponse { status, children, resync_after_seconds: (!finalized).then_some(RESYNC_SECONDS), finalized })
}

/// Whether the StatefulSet controller has seen the StatefulSet's current spec (its
/// retention policy included): it acts on claims only from its observed spec.
fn policy_observed(sts: &k8s_openapi::api::apps::v1::StatefulSet) -> bool {
    match (sts.status.as_ref().and_then(|s| s.observed_generation), sts.metadata.generation) {
        (Some(seen), Some(generation)) => seen >= generation,
        (None, Some(_)) => false,
        _ => true,
    }
}

/// The cluster's volume claims that the StatefulSet owns: the garbage collector
/// would delete them with it.
fn owned_claims(request: &SyncRequest, c: &Cluster) -> Vec<String> {
    request
        .related
        .claims
        .values()
        .filter(|pvc| {
            pvc.metadata
                .owner_references
                .as_ref()
                .is_some_and(|refs| refs.iter().any(|r| r.kind == "StatefulSet" && r.name == c.names.stateful_set))
        })
        .filter_map(|pvc| pvc.metadata.name.clone())
        .collect()
}

fn deletion_reason(policy: DeletionPolicy) -> &'static str {
    match policy {
        DeletionPolicy::Retain => "RetainVolumes",
        DeletionPolicy::Delete => "DeleteVolumes",
        DeletionPolicy::Backup => "FinalBackup",
    }
}

/// Where the final backup stands.
#[derive(Debug, Clone)]
enum FinalBackup {
    /// No `spec.backup.storage`: nowhere to write it.
    NoTarget,
    /// A store this cluster may not use ([`access`]), and no Job started yet.
    Refused(access::Refusal),
    Running(Box<Job>),
    Failed(Box<Job>, BackupRecord),
    /// Succeeded; the Job if it still exists.
    Succeeded(Option<Box<Job>>, BackupRecord),
}

fn final_backup(
    request: &SyncRequest,
    c: &Cluster,
    observed: &Observed<'_>,
    previous: Option<&BackupStatus>,
    ctx: &Context,
) -> FinalBackup {
    let Some((spec, storage)) = backups::settings(&request.parent) else { return FinalBackup::NoTarget };
    let name = backups::final_job_name(c);
    let job = Box::new(backups::final_job(c, &storage, spec));
    let Some(existing) = observed.job(&name) else {
        return match previous.and_then(|b| b.final_backup.as_ref()) {
            Some(r) if r.name == name && r.outcome == Some(BackupPhase::Succeeded) => {
                FinalBackup::Succeeded(None, r.clone())
            }
            _ => {
                let gate = access::Gate {
                    namespace: &c.namespace,
                    cluster: &c.names.cluster,
                    secrets: &request.related.secrets,
                    service_accounts: &request.related.service_accounts,
                    claims: &request.related.claims,
                    allowed_images: &ctx.allowed_images,
                };
                match gate.storage(&storage, spec.signing_key.as_ref()) {
                    Ok(()) => FinalBackup::Running(job),
                    Err(refusal) => FinalBackup::Refused(refusal),
                }
            }
        };
    };
    let pods = jobs::pods_by_job(request.related.pods.values(), |p| {
        jobs::has_label(p, crate::labels::JOB_PURPOSE, backups::FINAL)
    });
    let pods = pods.get(name.as_str()).map_or(&[][..], Vec::as_slice);
    let outcome = jobs::outcome_of_job(existing, pods);
    match backups::record(&name, crate::build::backup::written_to(pods, &storage).as_deref(), &outcome) {
        Some(r) if r.outcome == Some(BackupPhase::Succeeded) => FinalBackup::Succeeded(Some(job), r),
        Some(r) => FinalBackup::Failed(job, r),
        None => FinalBackup::Running(job),
    }
}

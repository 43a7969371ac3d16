//! The finalize hook: deleting a cluster safely, by `spec.deletionPolicy`.
//!
//! - `Retain` and `Delete`: make sure the StatefulSet's volume claim retention
//!   policy says what the user asked for (it may have been changed just before the
//!   delete), then remove every child, and answer `finalized: true` only when the
//!   StatefulSet and its pods are really gone.
//! - `Backup`: a final backup must succeed first.

use crate::{
    Context,
    api::{DeletionPolicy, MySQLStatus, Phase},
    build::statefulset,
    conditions::Conditions,
    error::Result,
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
    let (cluster, _) = Cluster::resolve(&request.parent, &observed);
    let previous = request.parent.status.clone().unwrap_or_default();
    let mut conditions = Conditions::new(&previous.conditions, ctx.now);
    for c in &previous.conditions {
        if c.type_ != "Ready" && c.type_ != "Deleting" {
            conditions.set(&c.type_, c.status == "True", &c.reason, c.message.clone());
        }
    }

    let want_retention =
        statefulset::build(&cluster, 0).spec.persistent_volume_claim_retention_policy.and_then(|p| p.when_deleted);
    let have_retention = observed
        .stateful_set
        .and_then(|s| s.spec.persistent_volume_claim_retention_policy.as_ref())
        .and_then(|p| p.when_deleted.clone())
        .or_else(|| Some("Retain".to_owned()));

    let (children, finalized, message) = match cluster.deletion_policy {
        DeletionPolicy::Backup => (
            keep_everything(request, &cluster, &observed, ctx),
            false,
            "deletionPolicy Backup: this version of mysql-hook cannot take a final backup yet, so the cluster is kept; set deletionPolicy to Retain or Delete to proceed".to_owned(),
        ),
        _ if observed.stateful_set.is_some() && have_retention != want_retention => (
            keep_everything(request, &cluster, &observed, ctx),
            false,
            format!(
                "setting the volume retention policy to {} before deleting the StatefulSet",
                want_retention.as_deref().unwrap_or("Retain")
            ),
        ),
        policy => {
            let remaining = observed.members.len() + usize::from(observed.stateful_set.is_some());
            let volumes = if policy == DeletionPolicy::Delete { "deleted with the pods" } else { "kept" };
            let message = if remaining == 0 {
                format!("all servers are gone; volumes {volumes}")
            } else {
                format!("waiting for {} pods and the StatefulSet to be deleted; volumes {volumes}", observed.members.len())
            };
            (Vec::new(), remaining == 0, message)
        }
    };
    conditions.set("Deleting", true, deletion_reason(cluster.deletion_policy), message);
    conditions.set("Ready", false, "Deleting", "the cluster is being deleted");
    let status = MySQLStatus {
        phase: Some(Phase::Deleting),
        conditions: conditions.finish(),
        replicas: i32::try_from(observed.members.len()).unwrap_or(i32::MAX),
        ready_replicas: i32::try_from(observed.ready_members().count()).unwrap_or(i32::MAX),
        ..previous
    };
    Ok(FinalizeResponse { status, children, resync_after_seconds: (!finalized).then_some(RESYNC_SECONDS), finalized })
}

fn deletion_reason(policy: DeletionPolicy) -> &'static str {
    match policy {
        DeletionPolicy::Retain => "RetainVolumes",
        DeletionPolicy::Delete => "DeleteVolumes",
        DeletionPolicy::Backup => "FinalBackup",
    }
}

/// Every child as a sync would emit it: deletion waits.
fn keep_everything(request: &SyncRequest, _c: &Cluster, _o: &Observed<'_>, ctx: &Context) -> Vec<Child> {
    sync::sync(request, ctx).map(|r| r.children).unwrap_or_default()
}

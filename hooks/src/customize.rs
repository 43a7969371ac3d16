//! The customize hook: which related objects Metacontroller should send with every
//! sync. The cluster's pods (servers and Job pods) are not children (their owners
//! are the StatefulSet and the Jobs), yet readiness and Job results live on them.
//!
//! It also asks for the servers' volume claims (see [`crate::finalize`]), with
//! `spec.restore.backup` for that `MySQLBackup`, whose status says where the backup
//! is, and with an S3 store (or a restore from a `MySQLBackup`) for the namespace's
//! Secrets opted in as S3 credentials ([`crate::access`]).
//!
//! The answer depends on the parent's name, namespace and immutable fields only, as Metacontroller
//! caches it per parent generation. The namespace is always given: in v2 a rule
//! without one searches every namespace.

use crate::{
    access,
    error::{Error, Result},
    labels,
    metacontroller::{CustomizeRequest, CustomizeResponse, LabelSelector, RelatedResourceRule},
    names::Names,
};

/// Answers a customize call.
///
/// # Errors
/// [`Error::InvalidRequest`] when the parent has no name or namespace.
pub fn customize(request: &CustomizeRequest) -> Result<CustomizeResponse> {
    let m = &request.parent.metadata;
    let (Some(name), Some(namespace)) =
        (m.name.as_deref().filter(|n| !n.is_empty()), m.namespace.as_deref().filter(|n| !n.is_empty()))
    else {
        return Err(Error::InvalidRequest("parent.metadata.name and namespace are required".to_owned()));
    };
    let names = Names::new(name);
    let mut related_resources = vec![
        RelatedResourceRule {
            api_version: "v1".to_owned(),
            resource: "pods".to_owned(),
            namespace: Some(namespace.to_owned()),
            label_selector: Some(LabelSelector { match_labels: labels::cluster_pods(&names) }),
            names: Vec::new(),
        },
        // The servers' volume claims: finalize lets the StatefulSet go only once it
        // owns none of them (else the garbage collector would delete retained data).
        RelatedResourceRule {
            api_version: "v1".to_owned(),
            resource: "persistentvolumeclaims".to_owned(),
            namespace: Some(namespace.to_owned()),
            label_selector: Some(LabelSelector { match_labels: labels::database_selector(&names) }),
            names: Vec::new(),
        },
    ];
    // The MySQLBackup a new cluster is restored from (spec.restore is immutable).
    if let Some(backup) = request.parent.spec.restore.as_ref().and_then(|r| r.backup.as_ref()) {
        related_resources.push(RelatedResourceRule {
            api_version: "mysqlhook.dev/v1alpha1".to_owned(),
            resource: "mysqlbackups".to_owned(),
            namespace: Some(namespace.to_owned()),
            label_selector: None,
            names: vec![backup.clone()],
        });
    }
    // The user's own credentials Secret: whether it has the operator account's key
    // decides which accounts the pods use (see `Cluster::operator_account`).
    if let Some(secret) = request.parent.spec.credentials_secret_name.as_ref() {
        related_resources.push(RelatedResourceRule {
            api_version: "v1".to_owned(),
            resource: "secrets".to_owned(),
            namespace: Some(namespace.to_owned()),
            label_selector: None,
            names: vec![secret.clone()],
        });
    }
    // The opted-in Secrets (S3 credentials, signing keys), when a store may be S3
    // (a restore from a MySQLBackup reads the store that backup recorded) or backups
    // are signed.
    let spec = &request.parent.spec;
    let s3_backup = spec.backup.as_ref().is_some_and(|b| b.storage.s3.is_some() || b.signing_key.is_some());
    let s3_restore =
        spec.restore.as_ref().is_some_and(|r| r.backup.is_some() || r.storage.as_ref().is_some_and(|s| s.s3.is_some()));
    if s3_backup || s3_restore {
        related_resources.push(access::opted_in_secrets(namespace));
        related_resources.push(access::opted_in_service_accounts(namespace));
    }
    // The claims opted in as backup stores, when a store may be a claim.
    let claim_store = spec.backup.as_ref().is_some_and(|b| b.storage.persistent_volume_claim.is_some())
        || spec.restore.as_ref().is_some_and(|r| {
            r.backup.is_some() || r.storage.as_ref().is_some_and(|s| s.persistent_volume_claim.is_some())
        });
    if claim_store {
        related_resources.push(access::opted_in_claims(namespace));
    }
    // Passwords of application users from Secrets of the user's own (opted in).
    if spec.users.as_ref().is_some_and(|u| u.iter().any(|u| u.password_secret.is_some())) {
        related_resources.push(crate::users::opted_in_secrets(namespace));
    }
    // The certificate of spec.tls, from Secrets opted in for it.
    if spec.tls.is_some() {
        related_resources.push(crate::tls::opted_in_secrets(namespace));
    }
    Ok(CustomizeResponse { related_resources })
}

//! What a `MySQL` may use besides its own children: S3 credentials and images.
//!
//! Whoever may create a `MySQL` (or a `MySQLBackup`) in a namespace chooses the
//! Secret an S3 store reads its credentials from and the images that run with the
//! database's credentials. Without limits that is a way to read any Secret of the
//! namespace (a Job with the Secret in its environment, in an image of one's own) or
//! the database's passwords. So:
//!
//! - an S3 store's `credentialsSecret` (or `serviceAccountName`, whose workload
//!   identity the pods then get) must be a Secret (ServiceAccount) its owner opted in, with the
//!   label [`BACKUP_CREDENTIALS_LABEL`]` = "true"`, and, when it carries the
//!   annotation [`ALLOWED_CLUSTERS_ANNOTATION`] (comma-separated `MySQL` names), a
//!   cluster it names. The customize hooks ask Metacontroller for exactly the opted-in
//!   Secrets of the namespace ([`opted_in_secrets`]): the hook sees no other Secret,
//!   and checks the label again on what it is sent. The Job pod gets only the keys
//!   the uploader needs ([`S3_KEYS`]), one by one (`secretKeyRef`), never the whole
//!   Secret;
//! - `spec.image` and an S3 store's `image` must be the default image's repository or
//!   one the installer lists in `--allowed-images`
//!   ([`Context::allowed_images`](crate::Context::allowed_images)).
//!
//! A refusal never deletes what already runs with the same store (a started restore,
//! backup or final backup Job keeps going); it stops new Jobs and says why in a
//! condition.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{PersistentVolumeClaim, Secret, ServiceAccount},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use crate::{
    Context,
    api::{BackupStorage, MySQL, SecretKeyRef},
    build::backup::DEFAULT_UPLOADER_IMAGE,
    metacontroller::{ByKey, LabelSelector, RelatedResourceRule},
    model::{Cluster, DEFAULT_EXPORTER_IMAGE, EXPORTER, MYSQLD, Problem},
    observed::Observed,
    version::Version,
};

/// The label a Secret's owner sets (to `"true"`) to let `MySQL` and `MySQLBackup`
/// objects of its namespace use it as S3 backup credentials.
pub const BACKUP_CREDENTIALS_LABEL: &str = "mysqlhook.dev/backup-credentials";
/// The label a Secret's owner sets (to `"true"`) to let `MySQL` objects of its
/// namespace run with it as their credentials (`spec.credentialsSecretName`,
/// issue 30.3): the pods mount its passwords, so without an opt-in any `MySQL`
/// author could run a cluster, and the SQL a restore loads, with another cluster's
/// root and operator passwords. [`ALLOWED_CLUSTERS_ANNOTATION`] narrows it as for
/// backup credentials.
pub const CREDENTIALS_LABEL: &str = "mysqlhook.dev/credentials";
/// Optional annotation on such a Secret: the `MySQL` names (comma-separated) that may
/// use it; unset, every `MySQL` of the namespace may.
pub const ALLOWED_CLUSTERS_ANNOTATION: &str = "mysqlhook.dev/allowed-clusters";
/// The annotation of an opted-in S3 credentials Secret (or ServiceAccount) that
/// lists the endpoints its credentials may be used against, comma separated
/// (issue 30.3). A store with an `endpoint` is refused unless it is listed: the
/// endpoint is the `MySQL` author's choice, and a restore loads whatever the
/// server there serves (as the operator account), so the credentials' owner
/// decides where they go. Without `endpoint` (AWS's own) no pin is needed.
pub const ALLOWED_ENDPOINTS_ANNOTATION: &str = "mysqlhook.dev/allowed-endpoints";
/// The annotation that pins the buckets (`bucket`, or `bucket/prefix` for that
/// prefix and below) a Secret's credentials may be used for, comma separated.
/// Optional; without it any bucket the credentials reach.
pub const ALLOWED_BUCKETS_ANNOTATION: &str = "mysqlhook.dev/allowed-buckets";
/// The access key id, required.
pub const ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
/// The secret access key, required.
pub const SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";
/// A session token, used when present.
pub const SESSION_TOKEN: &str = "AWS_SESSION_TOKEN";
/// The keys the uploader gets, and whether each is required.
pub const S3_KEYS: &[(&str, bool)] = &[(ACCESS_KEY_ID, true), (SECRET_ACCESS_KEY, true), (SESSION_TOKEN, false)];

/// Why something the spec names may not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// CamelCase reason for a condition.
    pub reason: &'static str,
    pub message: String,
}

impl From<Refusal> for Problem {
    fn from(r: Refusal) -> Self {
        Self { reason: r.reason, message: r.message }
    }
}

/// The customize rule that brings the namespace's opted-in Secrets (and only those)
/// into every sync.
#[must_use]
pub fn opted_in_secrets(namespace: &str) -> RelatedResourceRule {
    secrets_labelled(namespace, BACKUP_CREDENTIALS_LABEL)
}

/// The label a volume claim's owner sets (to `"true"`) to let `MySQL` and
/// `MySQLBackup` objects of its namespace use it as a backup store (issue 30.5):
/// backup Jobs mount a store read-write and restores load what it holds, so a
/// claim of the namespace (another cluster's data volume, its backups) is no
/// store until its owner says so. `allowed-clusters` narrows it as for Secrets.
pub const BACKUP_STORE_LABEL: &str = "mysqlhook.dev/backup-store";

/// The customize rule that brings the namespace's claims opted in as backup
/// stores into every sync.
#[must_use]
pub fn opted_in_claims(namespace: &str) -> RelatedResourceRule {
    RelatedResourceRule {
        resource: "persistentvolumeclaims".to_owned(),
        ..secrets_labelled(namespace, BACKUP_STORE_LABEL)
    }
}

/// The customize rule that brings the namespace's opted-in ServiceAccounts (and
/// only those) into every sync: `s3.serviceAccountName` must name one.
#[must_use]
pub fn opted_in_service_accounts(namespace: &str) -> RelatedResourceRule {
    RelatedResourceRule { resource: "serviceaccounts".to_owned(), ..opted_in_secrets(namespace) }
}

/// The customize rule for the namespace's Secrets that carry `label: "true"`: the
/// one shape of every opt-in (backup stores here, user passwords in `users.rs`).
#[must_use]
pub fn secrets_labelled(namespace: &str, label: &str) -> RelatedResourceRule {
    RelatedResourceRule {
        api_version: "v1".to_owned(),
        resource: "secrets".to_owned(),
        namespace: Some(namespace.to_owned()),
        label_selector: Some(LabelSelector { match_labels: BTreeMap::from([(label.to_owned(), "true".to_owned())]) }),
        names: Vec::new(),
    }
}

/// An image reference without its `@digest` and `:tag`:
/// `registry:5000/team/mysql:8.4.3@sha256:...` is `registry:5000/team/mysql`.
#[must_use]
pub fn repository(image: &str) -> &str {
    let image = image.split_once('@').map_or(image, |(r, _)| r);
    let last = image.rfind('/').map_or(0, |i| i + 1);
    image[last..].find(':').map_or(image, |i| &image[..last + i])
}

/// `image` may replace `default`: it is of the same repository, or of one the
/// installer allows.
#[must_use]
pub fn image_allowed(image: &str, default: &str, allowed: &[String]) -> bool {
    let repo = repository(image);
    !repo.is_empty() && (repo == repository(default) || allowed.iter().any(|a| a == repo))
}

fn allowed_list(allowed: &[String]) -> String {
    if allowed.is_empty() { "none".to_owned() } else { allowed.join(", ") }
}

/// Resolves the cluster as [`Cluster::resolve`] does, then holds `spec.image` to the
/// installer's allow-list: a refused image is replaced by the running one when that
/// is allowed and runs the same version (no rollout), else by the default image, and
/// reported. The pod and Service settings are held to the installer's
/// [`Policy`](crate::placement::Policy) the same way (what it does not name is left
/// out and reported).
#[must_use]
pub fn resolve(
    parent: &MySQL,
    observed: &Observed<'_>,
    ctx: &Context,
    primary: Option<&str>,
    newest_version: Option<Version>,
) -> (Cluster, Vec<Problem>) {
    let (mut cluster, mut problems) =
        Cluster::resolve(parent, observed, &ctx.scripts_image, primary, newest_version, ctx.now);
    let default = format!("{}:{}", cluster.flavor.as_str(), cluster.version);
    if !image_allowed(&cluster.image, &default, &ctx.allowed_images) {
        let running = observed
            .stateful_set
            .and_then(|s| s.spec.template.spec.as_ref())
            .and_then(|p| p.containers.iter().find(|c| c.name == MYSQLD))
            .and_then(|c| c.image.clone())
            .filter(|i| {
                image_allowed(i, &default, &ctx.allowed_images)
                    && Version::of_image(i).map(|v| v.to_string()) == Some(cluster.version.clone())
            });
        let fallback = running.unwrap_or_else(|| default.clone());
        problems.push(Problem {
            reason: "ImageNotAllowed",
            message: format!(
                "spec.image {} is not allowed: the hook's --allowed-images lists {} (besides {}); running {fallback}",
                cluster.image,
                allowed_list(&ctx.allowed_images),
                repository(&default)
            ),
        });
        cluster.image = fallback;
    }
    // The exporter sidecar joins every server pod, next to mysqld's socket and with
    // the exporter account: its image is held to the same list (issue 30.4).
    if let Some(exporter) = cluster.exporter.as_mut()
        && !image_allowed(&exporter.image, DEFAULT_EXPORTER_IMAGE, &ctx.allowed_images)
    {
        let running = observed
            .stateful_set
            .and_then(|s| s.spec.template.spec.as_ref())
            .and_then(|p| p.containers.iter().find(|c| c.name == EXPORTER))
            .and_then(|c| c.image.clone())
            .filter(|i| image_allowed(i, DEFAULT_EXPORTER_IMAGE, &ctx.allowed_images));
        let fallback = running.unwrap_or_else(|| DEFAULT_EXPORTER_IMAGE.to_owned());
        problems.push(Problem {
            reason: "ImageNotAllowed",
            message: format!(
                "spec.monitoring.exporter.image {} is not allowed: the hook's --allowed-images lists {} (besides {}); running {fallback}",
                exporter.image,
                allowed_list(&ctx.allowed_images),
                repository(DEFAULT_EXPORTER_IMAGE)
            ),
        });
        exporter.image = fallback;
    }
    let refused = ctx.placement_policy.hold(&mut cluster.placement, &mut cluster.services);
    if !refused.is_empty() {
        problems.push(Problem {
            reason: "PodSettingsNotAllowed",
            message: format!(
                "spec.pod and spec.services settings the installer does not allow are left out (docs/security.md): {}",
                refused.join("; ")
            ),
        });
    }
    (cluster, problems)
}

/// The store's endpoint and bucket are among those the credentials' owner listed
/// ([`ALLOWED_ENDPOINTS_ANNOTATION`], [`ALLOWED_BUCKETS_ANNOTATION`]).
fn pinned(s3: &crate::api::S3Target, (meta, kind, name): (&ObjectMeta, &str, &str)) -> Result<(), Refusal> {
    let listed = |key: &str| -> Option<Vec<String>> {
        meta.annotations.as_ref()?.get(key).map(|l| {
            l.split(',').map(|e| e.trim().trim_end_matches('/').to_owned()).filter(|e| !e.is_empty()).collect()
        })
    };
    if let Some(endpoint) = s3.endpoint.as_deref() {
        let allowed = listed(ALLOWED_ENDPOINTS_ANNOTATION).unwrap_or_default();
        if !allowed.iter().any(|a| a == endpoint.trim_end_matches('/')) {
            return Err(Refusal {
                reason: "BackupEndpointNotAllowed",
                message: format!(
                    "the S3 endpoint {endpoint} is not one the {kind} {name} may be used against: its owner lists {} in {ALLOWED_ENDPOINTS_ANNOTATION}",
                    if allowed.is_empty() { "none".to_owned() } else { allowed.join(", ") }
                ),
            });
        }
    }
    if let Some(buckets) = listed(ALLOWED_BUCKETS_ANNOTATION) {
        let prefix = s3.prefix.as_deref().unwrap_or_default().trim_matches('/');
        let ok = buckets.iter().any(|b| match b.split_once('/') {
            None => *b == s3.bucket,
            Some((bucket, p)) => bucket == s3.bucket && (prefix == p || prefix.starts_with(&format!("{p}/"))),
        });
        if !ok {
            return Err(Refusal {
                reason: "BackupEndpointNotAllowed",
                message: format!(
                    "the S3 bucket {}{} is not one the {kind} {name} may be used for: its owner lists {} in {ALLOWED_BUCKETS_ANNOTATION}",
                    s3.bucket,
                    if prefix.is_empty() { String::new() } else { format!("/{prefix}") },
                    buckets.join(", ")
                ),
            });
        }
    }
    Ok(())
}

/// What a sync knows to judge a backup store by.
#[derive(Debug, Clone, Copy)]
pub struct Gate<'a> {
    pub namespace: &'a str,
    /// The `MySQL` whose data is backed up or restored.
    pub cluster: &'a str,
    /// The opted-in Secrets Metacontroller sent (related objects).
    pub secrets: &'a ByKey<Secret>,
    /// The opted-in ServiceAccounts Metacontroller sent (related objects).
    pub service_accounts: &'a ByKey<ServiceAccount>,
    /// The volume claims Metacontroller sent: those opted in as stores among them.
    pub claims: &'a ByKey<PersistentVolumeClaim>,
    pub allowed_images: &'a [String],
}

impl Gate<'_> {
    /// The opted-in Secret `name` that this cluster may use (`what` says what for).
    fn opted_in(&self, name: &str, what: &str) -> Result<&Secret, Refusal> {
        let secret = self.secrets.get(&format!("{}/{name}", self.namespace));
        let meta = secret.map(|s| &s.metadata);
        check_opt_in(self.namespace, self.cluster, meta, "Secret", name, what, BACKUP_CREDENTIALS_LABEL)?;
        secret.ok_or_else(|| not_opted_in(self.namespace, "Secret", name, what, BACKUP_CREDENTIALS_LABEL))
    }

    /// May a Job use this (resolved) store, and this signing or verification key?
    ///
    /// # Errors
    /// A [`Refusal`] naming the Secret or image, never any credential.
    pub fn storage(&self, storage: &BackupStorage, signing_key: Option<&SecretKeyRef>) -> Result<(), Refusal> {
        if let Some(k) = signing_key {
            let secret = self.opted_in(&k.name, "backup signing key")?;
            // The key is mounted into the server-image container (the backup and
            // restore scripts), where no S3 credential belongs (issue 30.8): a Secret
            // with S3 keys is an uploader's, never a signing key's.
            let s3_keys: Vec<&str> = secret
                .data
                .iter()
                .flat_map(|d| d.keys())
                .map(String::as_str)
                .filter(|key| key.starts_with("AWS_"))
                .collect();
            if !s3_keys.is_empty() || k.key.starts_with("AWS_") {
                return Err(Refusal {
                    reason: "BackupCredentialsNotAllowed",
                    message: format!(
                        "the backup signing key Secret {} also holds S3 credentials ({}): keep the signing key in a Secret of its own, which the backup and restore scripts mount without any S3 key",
                        k.name,
                        if s3_keys.is_empty() { k.key.clone() } else { s3_keys.join(", ") }
                    ),
                });
            }
            if !secret.data.as_ref().is_some_and(|d| d.contains_key(&k.key)) {
                return Err(Refusal {
                    reason: "BackupCredentialsIncomplete",
                    message: format!("the backup signing key Secret {} lacks the key {}", k.name, k.key),
                });
            }
        }
        if let Some(pvc) = &storage.persistent_volume_claim {
            let claim = self.claims.get(&format!("{}/{}", self.namespace, pvc.claim_name));
            check_opt_in(
                self.namespace,
                self.cluster,
                claim.map(|c| &c.metadata),
                "PersistentVolumeClaim",
                &pvc.claim_name,
                "backup store",
                BACKUP_STORE_LABEL,
            )?;
        }
        let Some(s3) = &storage.s3 else { return Ok(()) };
        let owner = match (s3.credentials_secret.as_deref(), s3.service_account_name.as_deref()) {
            (Some(name), _) => {
                let secret = self.opted_in(name, "S3 credentials")?;
                let data = secret.data.as_ref();
                let missing: Vec<&str> = S3_KEYS
                    .iter()
                    .filter(|(key, required)| *required && !data.is_some_and(|d| d.contains_key(*key)))
                    .map(|(key, _)| *key)
                    .collect();
                if !missing.is_empty() {
                    return Err(Refusal {
                        reason: "BackupCredentialsIncomplete",
                        message: format!("the S3 credentials Secret {name} lacks the keys {}", missing.join(", ")),
                    });
                }
                (&secret.metadata, "Secret", name)
            }
            (None, Some(name)) => {
                let account = self.service_accounts.get(&format!("{}/{name}", self.namespace));
                check_opt_in(
                    self.namespace,
                    self.cluster,
                    account.map(|a| &a.metadata),
                    "ServiceAccount",
                    name,
                    "S3 credentials",
                    BACKUP_CREDENTIALS_LABEL,
                )?;
                let meta = account.map(|a| &a.metadata).ok_or_else(|| {
                    not_opted_in(self.namespace, "ServiceAccount", name, "S3 credentials", BACKUP_CREDENTIALS_LABEL)
                })?;
                (meta, "ServiceAccount", name)
            }
            (None, None) => {
                return Err(Refusal {
                    reason: "BackupCredentialsIncomplete",
                    message: "the S3 store names neither credentialsSecret nor serviceAccountName".to_owned(),
                });
            }
        };
        pinned(s3, owner)?;
        if let Some(image) = s3.image.as_deref() {
            if !image_allowed(image, DEFAULT_UPLOADER_IMAGE, self.allowed_images) {
                return Err(Refusal {
                    reason: "ImageNotAllowed",
                    message: format!(
                        "the S3 store's image {image} is not allowed: the hook's --allowed-images lists {} (besides {})",
                        allowed_list(self.allowed_images),
                        repository(DEFAULT_UPLOADER_IMAGE)
                    ),
                });
            }
        }
        Ok(())
    }
}

/// The reason a refusal of an object with the opt-in `label` gives.
fn refusal_reason(label: &str) -> &'static str {
    match label {
        BACKUP_STORE_LABEL => "BackupStoreNotAllowed",
        CREDENTIALS_LABEL => "CredentialsNotAllowed",
        _ => "BackupCredentialsNotAllowed",
    }
}

fn not_opted_in(namespace: &str, kind: &str, name: &str, what: &str, label: &str) -> Refusal {
    Refusal {
        reason: refusal_reason(label),
        message: format!(
            "the {what} {kind} {name} is not opted in: {who} a {kind} of namespace {namespace} labelled {label}=true (set by whoever owns the {kind}); no such {kind} {name} is observed",
            who = if label == CREDENTIALS_LABEL { "a cluster may only run with" } else { "a store may only use" },
        ),
    }
}

/// An object of the namespace (a Secret, a ServiceAccount, a claim) may be used by
/// the cluster `cluster`: it is observed, labelled `label` by its owner, and, with
/// the allowed-clusters annotation, names this cluster.
fn check_opt_in(
    namespace: &str,
    cluster: &str,
    meta: Option<&ObjectMeta>,
    kind: &str,
    name: &str,
    what: &str,
    label: &str,
) -> Result<(), Refusal> {
    let meta = meta.filter(|m| {
        m.name.as_deref() == Some(name)
            && m.namespace.as_deref() == Some(namespace)
            && m.labels.as_ref().and_then(|l| l.get(label)).map(String::as_str) == Some("true")
    });
    let Some(meta) = meta else { return Err(not_opted_in(namespace, kind, name, what, label)) };
    if let Some(list) = meta.annotations.as_ref().and_then(|a| a.get(ALLOWED_CLUSTERS_ANNOTATION)) {
        if !list.split(',').any(|c| c.trim() == cluster) {
            return Err(Refusal {
                reason: refusal_reason(label),
                message: format!(
                    "the {what} {kind} {name} may be used by the MySQL clusters {list} only ({ALLOWED_CLUSTERS_ANNOTATION}), not by {cluster}"
                ),
            });
        }
    }
    Ok(())
}

/// May the cluster `cluster` run with the Secret `name` (`spec.credentialsSecretName`)
/// as its credentials? Only when the Secret's owner opted it in
/// ([`CREDENTIALS_LABEL`], and [`ALLOWED_CLUSTERS_ANNOTATION`] when set).
///
/// # Errors
/// A [`Refusal`] (`CredentialsNotAllowed`) naming the Secret, never a password.
pub fn credentials(namespace: &str, cluster: &str, secrets: &ByKey<Secret>, name: &str) -> Result<(), Refusal> {
    let secret = secrets.get(&format!("{namespace}/{name}"));
    check_opt_in(namespace, cluster, secret.map(|s| &s.metadata), "Secret", name, "credentials", CREDENTIALS_LABEL)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{ByteString, apimachinery::pkg::apis::meta::v1::ObjectMeta};

    use super::*;
    use crate::api::S3Target;

    #[test]
    fn repositories_drop_tag_and_digest_only() {
        for (image, repo) in [
            ("mysql:8.4.3", "mysql"),
            ("mysql", "mysql"),
            ("amazon/aws-cli:2.22.35", "amazon/aws-cli"),
            ("registry:5000/team/mysql:8.4.3", "registry:5000/team/mysql"),
            ("registry:5000/team/mysql", "registry:5000/team/mysql"),
            ("registry.example.com/db/mysql@sha256:0123", "registry.example.com/db/mysql"),
            ("registry.example.com/db/mysql:8.4.3@sha256:0123", "registry.example.com/db/mysql"),
        ] {
            assert_eq!(repository(image), repo, "{image}");
        }
    }

    #[test]
    fn only_the_default_repository_or_listed_ones_replace_a_default() {
        let allowed = vec!["registry.example.com/db/mysql".to_owned()];
        assert!(image_allowed("mysql:8.4.4", "mysql:8.4.3", &[]));
        assert!(image_allowed("mysql@sha256:abcd", "mysql:8.4.3", &[]));
        assert!(image_allowed("registry.example.com/db/mysql:8.4.3", "mysql:8.4.3", &allowed));
        assert!(!image_allowed("registry.example.com/db/mysql:8.4.3", "mysql:8.4.3", &[]));
        assert!(!image_allowed("evil.example.com/mysql:8.4.3", "mysql:8.4.3", &allowed));
        // a repository is matched whole, never as a prefix
        assert!(!image_allowed("registry.example.com/db/mysql-evil:1", "mysql:8.4.3", &allowed));
        assert!(!image_allowed("registry.example.com/db/mysql/evil:1", "mysql:8.4.3", &allowed));
        assert!(!image_allowed("docker.io/library/mysql:8.4.3", "mysql:8.4.3", &[]));
    }

    fn secret(name: &str, label: Option<&str>, clusters: Option<&str>, keys: &[&str]) -> (String, Secret) {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("shop".to_owned()),
                labels: label.map(|v| BTreeMap::from([(BACKUP_CREDENTIALS_LABEL.to_owned(), v.to_owned())])),
                annotations: clusters.map(|v| BTreeMap::from([(ALLOWED_CLUSTERS_ANNOTATION.to_owned(), v.to_owned())])),
                ..Default::default()
            },
            data: Some(keys.iter().map(|k| ((*k).to_owned(), ByteString(b"x".to_vec()))).collect()),
            ..Default::default()
        };
        (format!("shop/{name}"), secret)
    }

    fn s3(secret: &str, image: Option<&str>) -> BackupStorage {
        BackupStorage {
            persistent_volume_claim: None,
            s3: Some(S3Target {
                endpoint: None,
                bucket: "b".to_owned(),
                prefix: None,
                region: None,
                credentials_secret: Some(secret.to_owned()),
                service_account_name: None,
                image: image.map(str::to_owned),
            }),
        }
    }

    /// Issue 30.3: the endpoint (and, when pinned, the bucket and prefix) is the
    /// credentials' owner's choice, not the `MySQL` author's.
    #[test]
    fn s3_endpoints_and_buckets_are_pinned_by_the_credentials_owner() {
        let keys = [ACCESS_KEY_ID, SECRET_ACCESS_KEY];
        let (k1, mut pinned) = secret("pinned", Some("true"), None, &keys);
        pinned.metadata.annotations = Some(BTreeMap::from([
            (ALLOWED_ENDPOINTS_ANNOTATION.to_owned(), "https://minio.storage.svc:9000, https://s3.example/".to_owned()),
            (ALLOWED_BUCKETS_ANNOTATION.to_owned(), "b/shop, other".to_owned()),
        ]));
        let (k2, open) = secret("open", Some("true"), None, &keys);
        let secrets: ByKey<Secret> = [(k1, pinned), (k2, open)].into_iter().collect();
        let (none, claims) = (ByKey::new(), ByKey::new());
        let gate = Gate {
            namespace: "shop",
            cluster: "db",
            secrets: &secrets,
            service_accounts: &none,
            claims: &claims,
            allowed_images: &[],
        };
        let at = |name: &str, endpoint: Option<&str>, bucket: &str, prefix: Option<&str>| {
            let mut st = s3(name, None);
            if let Some(t) = st.s3.as_mut() {
                t.endpoint = endpoint.map(str::to_owned);
                t.bucket = bucket.to_owned();
                t.prefix = prefix.map(str::to_owned);
            }
            gate.storage(&st, None).map_err(|r| r.reason)
        };
        let evil = Some("https://evil.example");
        assert_eq!(at("pinned", Some("https://minio.storage.svc:9000"), "b", Some("shop/db")), Ok(()));
        assert_eq!(at("pinned", Some("https://s3.example"), "other", None), Ok(()));
        assert_eq!(at("pinned", evil, "b", Some("shop")), Err("BackupEndpointNotAllowed"));
        assert_eq!(at("pinned", None, "b", Some("shopping")), Err("BackupEndpointNotAllowed"), "not below b/shop");
        assert_eq!(at("pinned", None, "attacker", None), Err("BackupEndpointNotAllowed"));
        assert_eq!(at("open", evil, "b", None), Err("BackupEndpointNotAllowed"), "an endpoint must be listed");
        assert_eq!(at("open", None, "any", None), Ok(()), "AWS itself, buckets not pinned");
    }

    #[test]
    fn s3_stores_need_an_opted_in_secret_with_the_keys() {
        let keys = [ACCESS_KEY_ID, SECRET_ACCESS_KEY];
        let secrets: ByKey<Secret> = [
            secret("ok", Some("true"), None, &keys),
            secret("unlabelled", None, None, &keys),
            secret("false", Some("false"), None, &keys),
            secret("other-cluster", Some("true"), Some("shop-db, billing"), &keys),
            secret("mine", Some("true"), Some("billing,db"), &keys),
            secret("no-secret-key", Some("true"), None, &[ACCESS_KEY_ID]),
        ]
        .into_iter()
        .collect();
        let allowed = vec!["registry.example.com/tools/aws-cli".to_owned()];
        let none = ByKey::new();
        let claims = ByKey::new();
        let gate = Gate {
            namespace: "shop",
            cluster: "db",
            secrets: &secrets,
            service_accounts: &none,
            claims: &claims,
            allowed_images: &allowed,
        };
        let reason = |s: &BackupStorage| gate.storage(s, None).map_err(|r| r.reason);
        assert_eq!(reason(&s3("ok", None)), Ok(()));
        assert_eq!(reason(&s3("mine", None)), Ok(()));
        assert_eq!(reason(&s3("unlabelled", None)), Err("BackupCredentialsNotAllowed"));
        assert_eq!(reason(&s3("false", None)), Err("BackupCredentialsNotAllowed"));
        assert_eq!(reason(&s3("absent", None)), Err("BackupCredentialsNotAllowed"));
        assert_eq!(reason(&s3("other-cluster", None)), Err("BackupCredentialsNotAllowed"));
        assert_eq!(reason(&s3("no-secret-key", None)), Err("BackupCredentialsIncomplete"));
        assert_eq!(reason(&s3("ok", Some("amazon/aws-cli:2.30.0"))), Ok(()));
        assert_eq!(reason(&s3("ok", Some("registry.example.com/tools/aws-cli:2"))), Ok(()));
        assert_eq!(reason(&s3("ok", Some("evil.example.com/aws-cli:2"))), Err("ImageNotAllowed"));
        let pvc = BackupStorage {
            persistent_volume_claim: Some(crate::api::PvcTarget { claim_name: "c".to_owned(), prefix: None }),
            s3: None,
        };
        assert_eq!(reason(&pvc), Err("BackupStoreNotAllowed"), "a claim nobody opted in");
        // a Secret under another namespace's key is not this namespace's
        let (_, mut elsewhere) = secret("ok", Some("true"), None, &keys);
        elsewhere.metadata.namespace = Some("other".to_owned());
        let moved: ByKey<Secret> = [("shop/ok".to_owned(), elsewhere)].into_iter().collect();
        let gate = Gate { secrets: &moved, ..gate };
        assert_eq!(gate.storage(&s3("ok", None), None).map_err(|r| r.reason), Err("BackupCredentialsNotAllowed"));
    }

    fn claim(name: &str, label: Option<&str>, clusters: Option<&str>) -> (String, PersistentVolumeClaim) {
        let (key, s) = secret(name, label, clusters, &[]);
        let mut meta = s.metadata;
        if let Some(l) = meta.labels.take() {
            meta.labels = Some(
                l.into_iter().map(|(k, v)| (k.replace(BACKUP_CREDENTIALS_LABEL, BACKUP_STORE_LABEL), v)).collect(),
            );
        }
        (key, PersistentVolumeClaim { metadata: meta, ..Default::default() })
    }

    /// Issue 30.5: a volume claim is a store only once its owner opted it in, as
    /// a Secret is; `allowed-clusters` narrows it.
    #[test]
    fn claims_are_stores_only_when_opted_in() {
        let claims: ByKey<PersistentVolumeClaim> = [
            claim("backups", Some("true"), None),
            claim("data-orders-0", None, None),
            claim("billing-backups", Some("true"), Some("billing")),
            claim("ours", Some("true"), Some("billing, db")),
        ]
        .into_iter()
        .collect();
        let none = ByKey::new();
        let secrets = ByKey::new();
        let gate = Gate {
            namespace: "shop",
            cluster: "db",
            secrets: &secrets,
            service_accounts: &none,
            claims: &claims,
            allowed_images: &[],
        };
        let reason = |name: &str| {
            let pvc = BackupStorage {
                persistent_volume_claim: Some(crate::api::PvcTarget { claim_name: name.to_owned(), prefix: None }),
                s3: None,
            };
            gate.storage(&pvc, None).map_err(|r| r.reason)
        };
        assert_eq!(reason("backups"), Ok(()));
        assert_eq!(reason("ours"), Ok(()));
        assert_eq!(reason("data-orders-0"), Err("BackupStoreNotAllowed"), "another cluster's data volume");
        assert_eq!(reason("billing-backups"), Err("BackupStoreNotAllowed"));
        assert_eq!(reason("absent"), Err("BackupStoreNotAllowed"));
    }

    #[test]
    fn s3_stores_may_use_an_opted_in_service_account_instead() {
        let account = |name: &str, label: Option<&str>, clusters: Option<&str>| {
            let (key, s) = secret(name, label, clusters, &[]);
            (key, ServiceAccount { metadata: s.metadata, ..Default::default() })
        };
        let accounts: ByKey<ServiceAccount> = [
            account("irsa", Some("true"), None),
            account("plain", None, None),
            account("billing-only", Some("true"), Some("billing")),
        ]
        .into_iter()
        .collect();
        let secrets = ByKey::new();
        let claims = ByKey::new();
        let gate = Gate {
            namespace: "shop",
            cluster: "db",
            secrets: &secrets,
            service_accounts: &accounts,
            claims: &claims,
            allowed_images: &[],
        };
        let by_account = |name: &str| {
            let mut st = s3("x", None);
            if let Some(t) = st.s3.as_mut() {
                t.credentials_secret = None;
                t.service_account_name = Some(name.to_owned());
            }
            gate.storage(&st, None).map_err(|r| r.reason)
        };
        assert_eq!(by_account("irsa"), Ok(()));
        assert_eq!(by_account("plain"), Err("BackupCredentialsNotAllowed"));
        assert_eq!(by_account("absent"), Err("BackupCredentialsNotAllowed"));
        assert_eq!(by_account("billing-only"), Err("BackupCredentialsNotAllowed"));
        // a Secret of that name does not stand in for the ServiceAccount
        assert_eq!(gate.storage(&s3("irsa", None), None).map_err(|r| r.reason), Err("BackupCredentialsNotAllowed"));
    }

    #[test]
    fn signing_keys_come_from_opted_in_secrets_too() {
        let secrets: ByKey<Secret> = [
            secret("keys", Some("true"), None, &["signing-key"]),
            secret("plain", None, None, &["signing-key"]),
            secret("s3", Some("true"), None, &["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "signing-key"]),
        ]
        .into_iter()
        .collect();
        let none = ByKey::new();
        let claims: ByKey<PersistentVolumeClaim> = [claim("c", Some("true"), None)].into_iter().collect();
        let gate = Gate {
            namespace: "shop",
            cluster: "db",
            secrets: &secrets,
            service_accounts: &none,
            claims: &claims,
            allowed_images: &[],
        };
        let pvc = BackupStorage {
            persistent_volume_claim: Some(crate::api::PvcTarget { claim_name: "c".to_owned(), prefix: None }),
            s3: None,
        };
        let key = |name: &str, key: &str| SecretKeyRef { name: name.to_owned(), key: key.to_owned() };
        let reason = |k: &SecretKeyRef| gate.storage(&pvc, Some(k)).map_err(|r| r.reason);
        assert_eq!(reason(&key("keys", "signing-key")), Ok(()));
        assert_eq!(reason(&key("keys", "other")), Err("BackupCredentialsIncomplete"));
        assert_eq!(reason(&key("plain", "signing-key")), Err("BackupCredentialsNotAllowed"));
        assert_eq!(reason(&key("absent", "signing-key")), Err("BackupCredentialsNotAllowed"));
        // Issue 30.8: the signing key is mounted into the server-image container, so
        // it never comes from a Secret of S3 credentials, whichever key it names.
        assert_eq!(reason(&key("s3", "AWS_SECRET_ACCESS_KEY")), Err("BackupCredentialsNotAllowed"));
        assert_eq!(reason(&key("s3", "signing-key")), Err("BackupCredentialsNotAllowed"));
    }

    #[test]
    fn own_credentials_need_their_owners_opt_in() {
        let labelled = |name: &str, label: &str, clusters: Option<&str>| {
            let (key, mut s) = secret(name, None, clusters, &["root-password", "replication-password"]);
            s.metadata.labels = Some(BTreeMap::from([(label.to_owned(), "true".to_owned())]));
            (key, s)
        };
        let secrets: ByKey<Secret> = [
            labelled("mine", CREDENTIALS_LABEL, None),
            labelled("for-billing", CREDENTIALS_LABEL, Some("billing")),
            labelled("for-db", CREDENTIALS_LABEL, Some("billing, db")),
            // an opt-in for backups is not one for credentials
            labelled("backups", BACKUP_CREDENTIALS_LABEL, None),
            secret("other-credentials", None, None, &["root-password", "replication-password"]),
        ]
        .into_iter()
        .collect();
        let reason = |name: &str| credentials("shop", "db", &secrets, name).map_err(|r| r.reason);
        assert_eq!(reason("mine"), Ok(()));
        assert_eq!(reason("for-db"), Ok(()));
        assert_eq!(reason("for-billing"), Err("CredentialsNotAllowed"));
        assert_eq!(reason("backups"), Err("CredentialsNotAllowed"));
        assert_eq!(reason("other-credentials"), Err("CredentialsNotAllowed"));
        assert_eq!(reason("absent"), Err("CredentialsNotAllowed"));
        // another namespace's Secret of the same name is not this one
        assert_eq!(credentials("billing", "db", &secrets, "mine").map_err(|r| r.reason), Err("CredentialsNotAllowed"));
    }
}

//! Metacontroller's v2 hook protocol: the request bodies it POSTs and the answers it
//! decodes.
//!
//! Requests are decoded leniently (Metacontroller may add keys in later versions),
//! but every object inside them is decoded into its k8s-openapi type, so a malformed
//! child is a 422 and never a silently missing child; only each object's
//! `metadata.managedFields`, which the hook never reads, is skipped unbuilt
//! ([`crate::decode`]). Responses are encoded with
//! exactly the keys v2 accepts: Metacontroller decodes them strictly.

use std::collections::BTreeMap;

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    batch::v1::{CronJob, Job},
    core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount},
    discovery::v1::EndpointSlice,
    networking::v1::NetworkPolicy,
    policy::v1::PodDisruptionBudget,
    rbac::v1::{Role, RoleBinding},
};
use serde::{Deserialize, Serialize, de::IgnoredAny};

use crate::api::{MySQL, MySQLBackup, MySQLBackupStatus, MySQLStatus};

/// Objects of one kind keyed as Metacontroller keys them (`namespace/name` in v2).
pub type ByKey<T> = BTreeMap<String, T>;

/// The body of a sync or finalize call.
#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct SyncRequest {
    /// The CompositeController. The hook never reads it, so it is skipped without
    /// being built (decoding it into a `serde_json::Value` was ~2% of a sync call).
    #[serde(default)]
    pub controller: IgnoredAny,
    /// The `MySQL` object as Metacontroller observed it.
    #[serde(deserialize_with = "crate::decode::object")]
    pub parent: MySQL,
    /// The children that exist, by type.
    #[serde(default)]
    pub children: Children,
    /// Related objects selected by the customize hook: the cluster's pods.
    #[serde(default)]
    pub related: Related,
    /// True when the parent is being deleted and this is a finalize call.
    #[serde(default)]
    pub finalizing: bool,
}

/// Observed children, one field per `childResources` entry of the CompositeController.
/// Keys are `Kind.group/version` exactly as Metacontroller sends them.
#[derive(Deserialize, Debug, Clone, Default)]
pub struct Children {
    #[serde(rename = "StatefulSet.apps/v1", default, deserialize_with = "crate::decode::by_key")]
    pub stateful_sets: ByKey<StatefulSet>,
    #[serde(rename = "Service.v1", default, deserialize_with = "crate::decode::by_key")]
    pub services: ByKey<Service>,
    #[serde(rename = "ConfigMap.v1", default, deserialize_with = "crate::decode::by_key")]
    pub config_maps: ByKey<ConfigMap>,
    #[serde(rename = "Secret.v1", default, deserialize_with = "crate::decode::by_key")]
    pub secrets: ByKey<Secret>,
    #[serde(rename = "PodDisruptionBudget.policy/v1", default, deserialize_with = "crate::decode::by_key")]
    pub pod_disruption_budgets: ByKey<PodDisruptionBudget>,
    #[serde(rename = "EndpointSlice.discovery.k8s.io/v1", default, deserialize_with = "crate::decode::by_key")]
    pub endpoint_slices: ByKey<EndpointSlice>,
    #[serde(rename = "Job.batch/v1", default, deserialize_with = "crate::decode::by_key")]
    pub jobs: ByKey<Job>,
    #[serde(rename = "CronJob.batch/v1", default, deserialize_with = "crate::decode::by_key")]
    pub cron_jobs: ByKey<CronJob>,
    #[serde(rename = "NetworkPolicy.networking.k8s.io/v1", default, deserialize_with = "crate::decode::by_key")]
    pub network_policies: ByKey<NetworkPolicy>,
    /// The grow Job's ServiceAccount, Role and RoleBinding ([`crate::grow`]).
    #[serde(rename = "ServiceAccount.v1", default, deserialize_with = "crate::decode::by_key")]
    pub service_accounts: ByKey<ServiceAccount>,
    #[serde(rename = "Role.rbac.authorization.k8s.io/v1", default, deserialize_with = "crate::decode::by_key")]
    pub roles: ByKey<Role>,
    #[serde(rename = "RoleBinding.rbac.authorization.k8s.io/v1", default, deserialize_with = "crate::decode::by_key")]
    pub role_bindings: ByKey<RoleBinding>,
}

/// Related objects requested by [`crate::customize`].
#[derive(Deserialize, Debug, Clone, Default)]
pub struct Related {
    #[serde(rename = "Pod.v1", default, deserialize_with = "crate::decode::by_key")]
    pub pods: ByKey<Pod>,
    /// The `MySQLBackup` named by `spec.restore.backup`, if any.
    #[serde(rename = "MySQLBackup.mysqlhook.dev/v1alpha1", default, deserialize_with = "crate::decode::by_key")]
    pub mysql_backups: ByKey<MySQLBackup>,
    /// The servers' volume claims (the StatefulSet's controller labels them with
    /// its selector): finalize checks which of them the StatefulSet still owns;
    /// and the namespace's claims opted in as backup stores ([`crate::access`]).
    #[serde(rename = "PersistentVolumeClaim.v1", default, deserialize_with = "crate::decode::by_key")]
    pub claims: ByKey<PersistentVolumeClaim>,
    /// The namespace's Secrets opted in as S3 backup credentials
    /// ([`crate::access`]), when the cluster uses an S3 store.
    #[serde(rename = "Secret.v1", default, deserialize_with = "crate::decode::by_key")]
    pub secrets: ByKey<Secret>,
    /// The namespace's ServiceAccounts opted in as S3 backup credentials
    /// (`s3.serviceAccountName`), when the cluster uses an S3 store.
    #[serde(rename = "ServiceAccount.v1", default, deserialize_with = "crate::decode::by_key")]
    pub service_accounts: ByKey<ServiceAccount>,
}

/// The body of a sync call of the `MySQLBackup` controller (`/backup/sync`).
#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct BackupSyncRequest {
    /// Skipped unread, as in [`SyncRequest`].
    #[serde(default)]
    pub controller: IgnoredAny,
    #[serde(deserialize_with = "crate::decode::object")]
    pub parent: MySQLBackup,
    #[serde(default)]
    pub children: BackupChildren,
    #[serde(default)]
    pub related: BackupRelated,
    #[serde(default)]
    pub finalizing: bool,
}

/// The `MySQLBackup`'s only child type.
#[derive(Deserialize, Debug, Clone, Default)]
pub struct BackupChildren {
    #[serde(rename = "Job.batch/v1", default, deserialize_with = "crate::decode::by_key")]
    pub jobs: ByKey<Job>,
}

/// What the `MySQLBackup` customize hook asks for: the cluster, its server pods
/// and the backup Job's pods.
#[derive(Deserialize, Debug, Clone, Default)]
pub struct BackupRelated {
    #[serde(rename = "MySQL.mysqlhook.dev/v1alpha1", default, deserialize_with = "crate::decode::by_key")]
    pub mysqls: ByKey<MySQL>,
    #[serde(rename = "Pod.v1", default, deserialize_with = "crate::decode::by_key")]
    pub pods: ByKey<Pod>,
    /// The namespace's Secrets opted in as S3 backup credentials ([`crate::access`]).
    #[serde(rename = "Secret.v1", default, deserialize_with = "crate::decode::by_key")]
    pub secrets: ByKey<Secret>,
    /// The namespace's ServiceAccounts opted in as S3 backup credentials.
    #[serde(rename = "ServiceAccount.v1", default, deserialize_with = "crate::decode::by_key")]
    pub service_accounts: ByKey<ServiceAccount>,
    /// The cluster's config ConfigMap: whether its clients verify TLS ([`crate::tls`]).
    #[serde(rename = "ConfigMap.v1", default, deserialize_with = "crate::decode::by_key")]
    pub config_maps: ByKey<k8s_openapi::api::core::v1::ConfigMap>,
    /// The namespace's volume claims opted in as backup stores ([`crate::access`]).
    #[serde(rename = "PersistentVolumeClaim.v1", default, deserialize_with = "crate::decode::by_key")]
    pub claims: ByKey<PersistentVolumeClaim>,
}

/// The body of a customize call of the `MySQLBackup` controller.
#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct BackupCustomizeRequest {
    /// Skipped unread, as in [`SyncRequest`].
    #[serde(default)]
    pub controller: IgnoredAny,
    #[serde(deserialize_with = "crate::decode::object")]
    pub parent: MySQLBackup,
}

/// The answer to a `MySQLBackup` sync call.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BackupSyncResponse {
    pub status: MySQLBackupStatus,
    pub children: Vec<Child>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resync_after_seconds: Option<u32>,
}

/// The body of a customize call.
#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct CustomizeRequest {
    /// Skipped unread, as in [`SyncRequest`].
    #[serde(default)]
    pub controller: IgnoredAny,
    #[serde(deserialize_with = "crate::decode::object")]
    pub parent: MySQL,
}

/// One desired child. Serialized as the plain Kubernetes object.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(untagged)]
pub enum Child {
    StatefulSet(Box<StatefulSet>),
    Service(Box<Service>),
    ConfigMap(Box<ConfigMap>),
    Secret(Box<Secret>),
    PodDisruptionBudget(Box<PodDisruptionBudget>),
    EndpointSlice(Box<EndpointSlice>),
    Job(Box<Job>),
    CronJob(Box<CronJob>),
    NetworkPolicy(Box<NetworkPolicy>),
    ServiceAccount(Box<ServiceAccount>),
    Role(Box<Role>),
    RoleBinding(Box<RoleBinding>),
}

impl Child {
    /// `(kind, name)`, the order children are emitted in.
    #[must_use]
    pub fn sort_key(&self) -> (&'static str, &str) {
        fn name(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
            m.name.as_deref().unwrap_or_default()
        }
        match self {
            Self::ConfigMap(o) => ("ConfigMap", name(&o.metadata)),
            Self::CronJob(o) => ("CronJob", name(&o.metadata)),
            Self::EndpointSlice(o) => ("EndpointSlice", name(&o.metadata)),
            Self::Job(o) => ("Job", name(&o.metadata)),
            Self::NetworkPolicy(o) => ("NetworkPolicy", name(&o.metadata)),
            Self::PodDisruptionBudget(o) => ("PodDisruptionBudget", name(&o.metadata)),
            Self::Role(o) => ("Role", name(&o.metadata)),
            Self::RoleBinding(o) => ("RoleBinding", name(&o.metadata)),
            Self::Secret(o) => ("Secret", name(&o.metadata)),
            Self::Service(o) => ("Service", name(&o.metadata)),
            Self::ServiceAccount(o) => ("ServiceAccount", name(&o.metadata)),
            Self::StatefulSet(o) => ("StatefulSet", name(&o.metadata)),
        }
    }
}

/// The answer to a sync call.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SyncResponse {
    pub status: MySQLStatus,
    pub children: Vec<Child>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resync_after_seconds: Option<u32>,
}

/// The answer to a finalize call.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FinalizeResponse {
    pub status: MySQLStatus,
    pub children: Vec<Child>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resync_after_seconds: Option<u32>,
    pub finalized: bool,
}

/// The answer to a customize call.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CustomizeResponse {
    pub related_resources: Vec<RelatedResourceRule>,
}

/// One selector of related objects.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RelatedResourceRule {
    pub api_version: String,
    pub resource: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Absent when `names` is given: Metacontroller refuses both together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
}

/// A `matchLabels`-only label selector.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    pub match_labels: BTreeMap<String, String>,
}

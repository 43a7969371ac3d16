//! The `MySQL` custom resource (group `mysqlhook.dev`, version `v1alpha1`).
//!
//! These types are the single source of the CRD: `mysql-hook crd` prints
//! [`crds`] and `metacontroller/crd.yaml` is its committed output. Validation that
//! the API server can do (ranges, enums, patterns, defaults, CEL rules) lives here as
//! attributes, so a bad spec is refused at `kubectl apply` time instead of reaching
//! the hook.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::ResourceRequirements,
    apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::Condition},
};
use kube::{CustomResource, CustomResourceExt, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Desired state of one MySQL cluster.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "mysqlhook.dev",
    version = "v1alpha1",
    kind = "MySQL",
    plural = "mysqls",
    singular = "mysql",
    shortname = "my",
    namespaced,
    status = "MySQLStatus",
    validation = Rule::new("self.metadata.name.matches('^[a-z]')").message("metadata.name must start with a letter: it prefixes Service names, which are DNS-1035 labels"),
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Primary","type":"string","jsonPath":".status.primary"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas"}"#,
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".spec.replicas"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.version"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MySQLSpec {
    /// Number of servers: one primary, the rest replicas.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 1, max = 9))]
    pub replicas: i32,

    /// Server version, `major.minor.patch` (for example `8.4.3`). Selects the image
    /// tag unless `image` is set.
    #[schemars(regex(pattern = r"^[0-9]+\.[0-9]+\.[0-9]+$"))]
    pub version: String,

    /// Server flavor: `mysql` (default) or `mariadb`. Picks the default image and the
    /// SQL the in-cluster scripts run. Immutable.
    #[serde(default)]
    #[x_kube(validation = Rule::new("self == oldSelf").message("flavor is immutable"))]
    pub flavor: Flavor,

    /// Full image reference overriding the default `mysql:<version>` /
    /// `mariadb:<version>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub image: Option<String>,

    /// The data volume of each server.
    pub storage: StorageSpec,

    /// Compute resources of the mysqld container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Extra `[mysqld]` options, `name: value`. Options the hook manages for
    /// replication safety (GTIDs, binary log, read-only, server id) are refused.
    /// At most 64 options; the bounds keep the CEL rule within the API server's cost
    /// budget.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64, "additionalProperties" = {"type": "string", "maxLength": 1024}))]
    #[x_kube(validation = Rule::new("self.all(k, size(k) <= 64 && k.matches('^[a-z][a-z0-9_-]*$') && !self[k].contains('\\n'))").message("config keys are mysqld option names (lowercase letters, digits, '_' and '-', at most 64), values are single lines"))]
    pub config: BTreeMap<String, String>,

    /// What deleting the `MySQL` does to the data: `Retain` (default) keeps the
    /// volumes, `Backup` takes a final backup first and keeps the volumes, `Delete`
    /// removes the volumes.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,

    /// Automatic failover of the primary.
    #[serde(default)]
    pub failover: FailoverSpec,

    /// Name of an existing Secret with keys `root-password` and
    /// `replication-password`. When unset the hook creates `<name>-credentials`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub credentials_secret_name: Option<String>,
}

fn default_replicas() -> i32 {
    3
}

/// The database server family.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    #[default]
    Mysql,
    Mariadb,
}

impl Flavor {
    /// The lowercase name used in scripts and images.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mysql => "mysql",
            Self::Mariadb => "mariadb",
        }
    }
}

/// Per-server persistent storage.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StorageSpec {
    /// Size of each server's data volume, for example `10Gi`. Volumes cannot shrink
    /// and StatefulSet volume templates are immutable: a change after creation is
    /// reported, not applied.
    #[x_kube(validation = Rule::new("type(self) == int ? self > 0 : (isQuantity(self) && quantity(self).isGreaterThan(quantity('0')))").message("storage.size must be a positive quantity, for example 10Gi"))]
    pub size: Quantity,

    /// StorageClass of the data volumes; the cluster default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

/// What happens to the data when the `MySQL` object is deleted.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeletionPolicy {
    /// Keep the volumes (PersistentVolumeClaims) after the cluster is gone.
    #[default]
    Retain,
    /// Take a final backup, and only when it succeeded delete the cluster; volumes are
    /// kept.
    Backup,
    /// Delete the volumes with the cluster.
    Delete,
}

/// Automatic failover settings.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FailoverSpec {
    /// Whether the hook replaces a primary that stays not Ready.
    #[serde(default = "default_true")]
    pub enabled: bool,

    /// How long the primary pod may be not Ready before a failover starts.
    #[serde(default = "default_grace_period")]
    #[schemars(range(min = 1, max = 3600))]
    pub grace_period_seconds: i32,
}

impl Default for FailoverSpec {
    fn default() -> Self {
        Self { enabled: true, grace_period_seconds: default_grace_period() }
    }
}

fn default_true() -> bool {
    true
}

fn default_grace_period() -> i32 {
    10
}

/// Observed state of a cluster, computed by the hook from what Metacontroller sends.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MySQLStatus {
    /// One of Pending, Initializing, Running, Degraded, Deleting, Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,

    /// The pod that is (or, before bootstrap, will become) the writable primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<String>,

    /// Number of server pods that exist.
    #[serde(default)]
    pub replicas: i32,

    /// Number of server pods that are Ready.
    #[serde(default)]
    pub ready_replicas: i32,

    /// The `metadata.generation` this status was computed for (set by Metacontroller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Standard conditions: `Ready`, `Initialized`, `SpecAccepted`,
    /// `SemiSyncProtected`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Coarse lifecycle of a cluster, for humans and `kubectl get`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Nothing observed yet: the StatefulSet is being created.
    Pending,
    /// Servers are starting and the first primary is being bootstrapped.
    Initializing,
    /// Every server is Ready and the primary is writable.
    Running,
    /// The primary serves, but not every server is Ready.
    Degraded,
    /// Deletion is in progress.
    Deleting,
    /// The primary is not serving.
    Failed,
}

/// Every CRD this hook serves, in the order they are written to `crd.yaml`.
#[must_use]
pub fn crds() -> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> {
    vec![MySQL::crd()]
}

/// The CRDs as one multi-document YAML stream, exactly as committed in
/// `metacontroller/crd.yaml`.
///
/// # Errors
/// Only if serialization fails, which would be a bug in the types.
pub fn crds_json() -> Result<Vec<serde_json::Value>, serde_json::Error> {
    crds().iter().map(serde_json::to_value).collect()
}

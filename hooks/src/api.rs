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
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{Condition, Time},
    },
};
use kube::{CustomResource, CustomResourceExt, KubeSchema};
mod placement;

pub use placement::{AntiAffinity, PodPlacement, ServiceExposure, ServiceType, ServicesSpec};
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
    validation = Rule::new("self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')").message("metadata.name must start with a letter and hold only lowercase letters, digits and '-' (no dots): it prefixes Service names, which are DNS-1035 labels"),
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
    /// `mariadb:<version>`: a tag or digest of the default repository, or an image of a
    /// repository the hook's `--allowed-images` lists (else refused, and the running
    /// or default image kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub image: Option<String>,

    /// The data volume of each server.
    pub storage: StorageSpec,

    /// Compute resources of the mysqld container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Extra `[mysqld]` options, `name: value`: tuning options on the hook's
    /// allow-list only (docs/security.md), in any spelling the server accepts (`-`
    /// or `_`, `loose-`, `skip-`, ... prefixes). Anything else, such as the options
    /// the hook manages for replication safety or that switch off authentication or
    /// load code, is refused and the running configuration kept. At most 64 options;
    /// the bounds keep the CEL rule within the API server's cost budget.
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

    /// How replicas are judged and kept: the lag a Ready replica may have, whether
    /// an errant replica is rebuilt by itself, how long binary logs are kept.
    #[serde(default)]
    pub replication: ReplicationSpec,

    /// Name of an existing Secret with keys `root-password` and
    /// `replication-password`, opted in by its owner with the label
    /// `mysqlhook.dev/credentials: "true"`. When unset the hook creates
    /// `<name>-credentials`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub credentials_secret_name: Option<String>,

    /// Where backups go, and an optional schedule. Needed by `MySQLBackup`s of this
    /// cluster and by `deletionPolicy: Backup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupSpec>,

    /// Application accounts, each with a database and a password Secret an
    /// application can mount (see docs/reference.md). Unset: `app` (read-write) and `app_ro`
    /// (read-only) on the database `app`; `[]`: none.
    /// Names are unique (a list-map keyed by `name`), at most 16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxItems" = 16, "x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub users: Option<Vec<UserSpec>>,

    /// Where the server pods are scheduled (node selector, tolerations, affinity,
    /// spread, priority, pull secrets) and extra pod labels and annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodPlacement>,

    /// Type and annotations of the `-primary` and `-replicas` Services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<ServicesSpec>,

    /// Who may connect to the servers: the NetworkPolicy `<name>` (issue 18.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSpec>,

    /// Start the new cluster from a backup. Only read while the cluster has not yet
    /// been initialized; immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("restore is immutable"))]
    pub restore: Option<RestoreSpec>,

    /// Server metrics: an optional `mysqld_exporter` sidecar in every server pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring: Option<MonitoringSpec>,

    /// TLS for client and replication connections, verified against the Secret's CA
    /// (docs/security.md). Unset: no TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
}

/// The servers' certificate.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TlsSpec {
    /// A Secret of this namespace with `tls.crt`, `tls.key` and `ca.crt` (as
    /// cert-manager writes them) and the label `mysqlhook.dev/tls: "true"`. The
    /// certificate must name every server, e.g. `*.<name>-headless.<namespace>.svc`.
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
}

/// Monitoring of the servers themselves (the hook's own metrics need nothing here).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MonitoringSpec {
    /// A `mysqld_exporter` sidecar (port 9104, named `metrics`) in every server pod,
    /// logged in over the server's socket as its own least-privilege account
    /// `exporter`. Turning it on or off changes the pod template: the servers roll
    /// once, in order.
    #[serde(default)]
    pub exporter: ExporterSpec,
}

/// The `mysqld_exporter` sidecar.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExporterSpec {
    /// Run the sidecar (default false).
    #[serde(default)]
    pub enabled: bool,

    /// The exporter image; default `quay.io/prometheus/mysqld-exporter:v0.20.0`. Any
    /// `mysqld_exporter` that reads `--config.my-cnf` works (0.12 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub image: Option<String>,

    /// Resources of the sidecar; default requests 10m CPU and 32Mi, limit 128Mi.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

fn default_replicas() -> i32 {
    3
}

/// Network access to the servers. The cluster's own pods (replication, its Jobs)
/// and the namespace's `MySQLBackup` Jobs always reach port 3306; nothing reaches
/// any other port.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSpec {
    /// Namespaces whose pods may connect to port 3306 (the applications). Unset:
    /// the cluster's own namespace. Empty: none besides the cluster's own pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxItems" = 64, "items" = {"type": "string", "maxLength": 63, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}))]
    pub client_namespaces: Option<Vec<String>>,

    /// Namespaces whose pods may scrape the exporter sidecar's port 9104, when
    /// `spec.monitoring.exporter` runs. Unset: `monitoring`, where the shipped
    /// monitoring component (`metacontroller/components/monitoring`) runs Prometheus.
    /// Empty: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxItems" = 64, "items" = {"type": "string", "maxLength": 63, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}))]
    pub metrics_namespaces: Option<Vec<String>>,
}

/// The namespace that may scrape the exporters when `spec.network.metricsNamespaces`
/// is unset: the shipped monitoring component's.
pub const DEFAULT_METRICS_NAMESPACE: &str = "monitoring";

/// An application account.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.passwordSecret) || !(self.name.startsWith('user_') || self.name.contains('_user_') || self.name == 'credentials' || self.name.endsWith('_credentials') || self.name.endsWith('_exporter'))").message("a user whose Secret the hook generates may not start with user_, contain _user_, or end with credentials or exporter after a _: its Secret <cluster>-user-<user> could be another cluster's"))]
pub struct UserSpec {
    /// The account name (`<name>@'%'`). Not one of the hook's own accounts; without
    /// a `passwordSecret`, not a name whose generated Secret could be another
    /// cluster's (starting `user_`, containing `_user_`, ending `_credentials` or
    /// `_exporter`, or `credentials`).
    #[schemars(regex(pattern = r"^[a-z][a-z0-9_]{0,31}$"))]
    #[x_kube(validation = Rule::new("!(self in ['root', 'repl', 'exporter', 'mysqlhook', 'mysql', 'mariadb.sys', 'mysql.sys', 'mysql.session', 'mysql.infoschema'])").message("a user may not be one of the server's or the hook's own accounts"))]
    pub name: String,
    /// The database it uses (created if missing), and the only one it is granted:
    /// a `_` is granted as itself, not as a wildcard. Not a system schema in any
    /// spelling (`MySQL` is `mysql` where names are case-insensitive).
    #[schemars(regex(pattern = r"^[A-Za-z0-9_]{1,64}$"))]
    #[x_kube(validation = Rule::new("!(self.lowerAscii() in ['mysql', 'sys', 'information_schema', 'performance_schema', '_mysqlhook'])").message("a user's database may not be a system schema"))]
    pub database: String,
    /// `ReadWrite` (default: every privilege on the database) or `ReadOnly`
    /// (SELECT and SHOW VIEW); a read-only user's Secret names the `-replicas`
    /// Service.
    #[serde(default)]
    pub access: UserAccess,
    /// A Secret of your own holding the password (it must carry the label
    /// `mysqlhook.dev/user-credentials: "true"`). Unset: the hook generates
    /// `<name>-user-<user>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_secret: Option<PasswordSecretRef>,
}

/// A key of a Secret of the user's own.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PasswordSecretRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key; default `password`.
    #[serde(default = "default_password_key")]
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

fn default_password_key() -> String {
    "password".to_owned()
}

/// What an application account may do on its database.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UserAccess {
    #[default]
    ReadWrite,
    ReadOnly,
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

/// Replication settings (see docs/replication.md).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicationSpec {
    /// A replica further behind its source than this is not Ready (out of the
    /// `-replicas` Service). Reaches running servers through the config ConfigMap:
    /// changing it restarts nothing.
    #[serde(default = "default_max_lag")]
    #[schemars(range(min = 1, max = 86400))]
    pub max_lag_seconds: i32,

    /// Whether a replica with transactions the primary lacks (errant) is rebuilt
    /// by itself: emptied and copied again from a healthy replica (seeding), its
    /// binary logs first kept aside in `.mysql-hook-quarantine/` of its data
    /// directory. Never a replica that could be the most advanced server. Off: it
    /// stays not Ready, with the errant transactions in its readiness message, for
    /// a human.
    #[serde(default)]
    pub rebuild_errant: bool,

    /// How long binary logs are kept before the server deletes them
    /// (`binlog_expire_logs_seconds`). Default 7 days. A replica that is down for
    /// longer is seeded again; keep it above the backup interval so the logs since
    /// the last backup stay on the servers. Changing it rolls the servers (it is
    /// in the option file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 3600, max = 8_553_600))]
    pub binlog_expire_seconds: Option<i32>,
}

impl Default for ReplicationSpec {
    fn default() -> Self {
        Self { max_lag_seconds: default_max_lag(), rebuild_errant: false, binlog_expire_seconds: None }
    }
}

/// One server of `status.servers`. `name`, `role` and `ready` are observed on
/// every sync; the rest is what the server answered the newest `inspect` Job
/// (`inspectedAt`), which runs whenever the primary or any server's readiness
/// changes, so it can be older than the readiness it explains.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    /// The pod.
    pub name: String,
    /// `primary` or `replica`.
    pub role: String,
    /// The pod is Ready (for a replica: replicating, without error, within
    /// `spec.replication.maxLagSeconds`).
    pub ready: bool,
    /// When the fields below were read; absent when never inspected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inspected_at: Option<Time>,
    /// It did not answer the inspection.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unreachable: bool,
    /// `read_only` was off: true for the primary. A replica reported writable is a
    /// second writer (an old primary cut off while another was promoted): the phase
    /// is Degraded with reason `SecondWritableServer` until an inspection finds it
    /// read-only again; its own agent fences it and keeps it out of `-replicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writable: Option<bool>,
    /// Its GTID position (MySQL `gtid_executed`, MariaDB `gtid_binlog_pos`), clipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gtid: Option<String>,
    /// The server it replicates from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Receiver and applier thread states, e.g. `receiver Yes, applier No`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<String>,
    /// Seconds behind its source, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_seconds: Option<i64>,
    /// The last replication error (receiver, then applier), clipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// It holds a partial copy: seeding from a donor is under way or was interrupted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub seeding: bool,
    /// Transactions it has that the primary lacks, clipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errant: Option<String>,
}

/// The default of `spec.replication.binlogExpireSeconds`: 7 days.
pub const DEFAULT_BINLOG_EXPIRE_SECONDS: i32 = 604_800;

fn default_max_lag() -> i32 {
    60
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

    /// Every server: its role and readiness as observed now, and what it said about
    /// its replication when last inspected (see docs/replication.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<ServerStatus>,

    /// The `metadata.generation` this status was computed for (set by Metacontroller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Standard conditions: `Ready`, `Initialized`, `SpecAccepted`,
    /// `SemiSyncProtected`, `BackupSucceeded`, `Restored`, `Deleting`,
    /// `AutomaticFailover`, `Progressing` (rollouts) and, while a switchover is
    /// requested, `Switchover`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// The role change (failover, switchover) in flight: at most one at a time,
    /// decided from this one field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<Operation>,

    /// How many role-change Jobs this cluster has started; numbers their names
    /// (`<name>-failover-<n>`), so no two attempts share a Job or its pods.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub operations_started: i32,

    /// An outage of the primary that automatic failover is handling, while it lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<FailoverStatus>,

    /// The switchover requested by the `mysqlhook.dev/switchover-to` annotation,
    /// while the annotation is set: it runs once per value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switchover: Option<SwitchoverStatus>,

    /// A drain's switchover (the primary's pod is being deleted) that failed: the
    /// next attempt waits, so a failing switchover does not freeze writes on every
    /// sync. Gone once the primary's pod is not being deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_switchover: Option<DrainSwitchoverStatus>,

    /// The last role changes (at most 10), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub role_changes: Vec<RoleChange>,

    /// The server version every server runs: set when a rollout has completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,

    /// The ordered rollout of a new pod template (version, image, config), while
    /// one runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,

    /// The newest scheduled and final backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupStatus>,

    /// Progress of `spec.restore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<RestoreStatus>,
}

/// An ordered rollout: replicas one at a time, then a switchover, then the old
/// primary.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// The version the servers ran before (`status.version`), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_version: Option<String>,
    /// The version being rolled out.
    pub to_version: String,
    /// The StatefulSet's `status.updateRevision`: the revision being rolled out.
    pub update_revision: String,
    /// The StatefulSet partition: pods with this ordinal or higher are released.
    pub partition: i32,
    /// Pods already on the update revision.
    #[serde(default)]
    pub updated: Vec<String>,
    /// The current step, e.g. `update db-1` or `switchover db-0 to db-2`.
    pub step: String,
    /// When the current step began; a step that takes longer than 10 minutes stops
    /// the rollout.
    pub step_started_at: Time,
    /// Failed switchovers of this rollout so far: each waits longer before the next
    /// (10 s, doubling, at most 5 min), since each one froze writes for a while.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub switchover_failures: i32,
    /// No switchover of this rollout starts before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_switchover_time: Option<Time>,
    /// Why the last switchover of this rollout failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_switchover_error: Option<String>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// What a role-change Job does.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperationKind {
    /// Promote a replica because the primary stayed not Ready past the grace period.
    Failover,
    /// Hand the primary role to a chosen Ready replica, gracefully.
    Switchover,
}

/// A role-change Job in flight.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    pub kind: OperationKind,
    /// The Job running it, `<name>-<failover|switchover>-<n>`.
    pub job: String,
    /// The primary when it started.
    pub from: String,
    /// The requested new primary (switchover); a failover picks its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Failover: what the hook's inspections saw executed on `from` while it was
    /// the writable primary (remembered on the config ConfigMap, never smaller),
    /// fixed when the failover started. The Job promotes `from` again under the
    /// quorum exception only if it still holds this, so an old primary back from an
    /// older volume is not (issue 31.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_gtid: Option<String>,
    /// Why: `PrimaryNotReady` (failover), `Requested` (annotation) or `Rollout`
    /// (before the primary's update).
    #[serde(default)]
    pub reason: String,
    /// When the hook emitted the Job.
    pub started_at: Time,
}

/// Failed switchovers of one drain of the primary's pod.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DrainSwitchoverStatus {
    /// The primary's pod being deleted.
    pub pod: String,

    /// Switchover Jobs that failed during this drain.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_attempts: i32,

    /// No new attempt before this time (10 s, doubling, at most 5 min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_time: Option<Time>,

    /// Why the last attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// Bookkeeping of one primary outage; gone once the primary is Ready again.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FailoverStatus {
    /// When the hook first saw the primary pod missing, being deleted, or without a
    /// Ready condition: the grace period counts from the earlier of this and the
    /// pod's Ready condition `lastTransitionTime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_not_ready_since: Option<Time>,

    /// Failover Jobs that failed during this outage.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_attempts: i32,

    /// When the last failed attempt started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempt_time: Option<Time>,

    /// No new attempt before this time (exponential backoff).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_time: Option<Time>,

    /// Why the last attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// How a switchover request ended, or that it runs.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwitchoverResult {
    Running,
    Succeeded,
    Failed,
    /// Not possible as asked (the target is not a member, or already the primary).
    Refused,
}

/// A handled switchover request.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SwitchoverStatus {
    /// The requested pod: the annotation's value.
    pub target: String,
    pub result: SwitchoverResult,
    /// The Job that ran it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// CamelCase reason, as in the `Switchover` condition.
    pub reason: String,
    /// What happened, for humans.
    pub message: String,
}

/// One completed change of the primary.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RoleChange {
    pub kind: OperationKind,
    /// The primary before.
    pub from: String,
    /// The primary after: the pod the Job reported.
    pub to: String,
    /// Why: `PrimaryNotReady` (failover), `Requested` (annotation) or `Rollout`.
    pub reason: String,
    /// When the hook saw the Job succeed and moved the primary.
    pub time: Time,
    /// The Job that did it.
    pub job: String,
    /// A failover's report of the old primary: `true`, it answered and was fenced
    /// before the promotion; `false`, it did not answer, so the promotion rested on
    /// semi-sync and its own agent fences it once it learns the newer epoch (until
    /// then it may still accept writes from clients that reach it: see
    /// `status.servers[].writable` and the `SecondWritableServer` reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_primary_fenced: Option<bool>,
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

// ---------------------------------------------------------------- backups

/// Backups of one cluster: where they are stored, when they run, how many are kept.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BackupSpec {
    /// When scheduled backups run, in cron syntax, in UTC (for example `0 3 * * *`).
    /// Without a schedule only `MySQLBackup`s and the final backup use the storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|\S+\s+\S+\s+\S+\s+\S+\s+\S+)$"
    ))]
    pub schedule: Option<String>,

    /// Archive the binary logs on this schedule, in cron syntax, in UTC (for example
    /// `*/5 * * * *`): each run closes the primary's current binary log and copies
    /// every closed file not archived yet, once, gzip, into `<prefix>/_binlog/` of the
    /// store. Point-in-time restores then read the archive, and scheduled backups copy
    /// no binary logs. The recovery point objective is this interval plus one run.
    /// Archived files the oldest kept scheduled backup does not need are removed.
    /// Keep `spec.replication.binlogExpireSeconds` well above the interval: a file the
    /// server removed before a run archived it is a gap a restore will name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|\S+\s+\S+\s+\S+\s+\S+\s+\S+)$"
    ))]
    pub binlog_schedule: Option<String>,

    /// Where the backups are written.
    pub storage: BackupStorage,

    /// How many scheduled backups to keep; older ones are removed after each
    /// successful scheduled backup. Only complete backups this cluster's schedule
    /// wrote are counted and removed (by the `OWNER` each records, never by name):
    /// `MySQLBackup`s, final backups and other clusters' backups never are.
    #[serde(default = "default_keep")]
    #[schemars(range(min = 1, max = 1000))]
    pub keep: i32,

    /// Size limit of the scratch volume an S3 backup or restore is staged in (the
    /// dump and the binary logs; an emptyDir with this `sizeLimit`), and of `/tmp`
    /// in every backup, archive and restore pod (a verification's throwaway server,
    /// the binary logs a point-in-time restore replays). Default: the data
    /// volume's size, `spec.storage.size`. A pod that outgrows it is evicted, and
    /// the status says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_volume_size: Option<Quantity>,

    /// Sign every backup with this key (HMAC-SHA256 over the backup's checksums,
    /// `SIGNATURE` next to them), kept outside the store: a restore given the same
    /// key loads only backups it signed. The Secret must be opted in like S3
    /// credentials (label `mysqlhook.dev/backup-credentials: "true"`), and hold no
    /// S3 credentials (`AWS_*` keys): it is a Secret of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_key: Option<SecretKeyRef>,

    /// Prove every backup restores before it counts: the backup's pod restores it
    /// into a throwaway server of the cluster's image (`verify.sh`: its own data
    /// directory in the pod's `/tmp`, which needs about the data's size of
    /// ephemeral storage, up to `workVolumeSize`) and compares the restored
    /// server's GTID position and schemas with the manifest. A backup that does not restore fails: it is not kept, not
    /// uploaded, and retention removes nothing for it. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verify: bool,

    /// How long one backup may take, in seconds: the dump, the verification and
    /// the upload together (its Job's `activeDeadlineSeconds`); default 21600 (6 h).
    /// A backup past it fails with `DeadlineExceeded`. Set it from the size of the
    /// data (a dump took about 42 s per GB here, and a verification loads it again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 600, max = 2_592_000))]
    pub timeout_seconds: Option<i64>,

    /// Resources of each container of the backup and binary log archive pods (the
    /// dump, the verification's throwaway server, the uploader). Default: requests
    /// of 100m CPU and 256Mi of memory and no limits, so the pods are Burstable
    /// (never the first evicted, and admitted where a ResourceQuota requires
    /// requests). A namespace whose quota requires limits needs them set here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

fn default_keep() -> i32 {
    7
}

/// One key of a Secret in the cluster's namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key; default `signing-key`.
    #[serde(default = "default_signing_key")]
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

fn default_signing_key() -> String {
    "signing-key".to_owned()
}

/// A backup store: exactly one of a PersistentVolumeClaim or an S3-compatible bucket.
/// A backup named `<name>` lives in the folder `<prefix>/<name>/`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.persistentVolumeClaim) != has(self.s3)").message("set exactly one of persistentVolumeClaim and s3"))]
pub struct BackupStorage {
    /// An existing ReadWriteMany (or, for a single node, ReadWriteOnce) claim in the
    /// cluster's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<PvcTarget>,

    /// An S3-compatible bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Target>,
}

/// Backups on a PersistentVolumeClaim.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PvcTarget {
    #[schemars(length(min = 1, max = 253))]
    pub claim_name: String,

    /// Folder inside the volume; default: `<namespace>/<cluster name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$"))]
    pub prefix: Option<String>,
}

/// Backups in an S3-compatible bucket. The server image has no S3 client: the
/// backup is written to a scratch volume by the server image and uploaded by a
/// second container running `image`, which must provide `sh` and the AWS CLI v2.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.credentialsSecret) != has(self.serviceAccountName)").message("set exactly one of credentialsSecret and serviceAccountName"))]
pub struct S3Target {
    /// Endpoint URL of a non-AWS store (for example `https://minio.storage:9000`);
    /// unset for AWS S3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^https?://[^\s'\x22]+$"))]
    pub endpoint: Option<String>,

    #[schemars(regex(pattern = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"))]
    pub bucket: String,

    /// Key prefix (a folder); default: `<namespace>/<cluster name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$"))]
    pub prefix: Option<String>,

    /// Region; default `us-east-1` (what most S3-compatible stores expect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z0-9-]+$"))]
    pub region: Option<String>,

    /// A Secret in the cluster's namespace with keys `AWS_ACCESS_KEY_ID` and
    /// `AWS_SECRET_ACCESS_KEY` (optionally `AWS_SESSION_TOKEN`), which its owner opted
    /// in with the label `mysqlhook.dev/backup-credentials: "true"` (and optionally
    /// the annotation `mysqlhook.dev/allowed-clusters`, comma-separated `MySQL`
    /// names). The uploader gets only those keys. Exactly one of this and
    /// `serviceAccountName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub credentials_secret: Option<String>,

    /// Credentials from the pod's environment instead of a Secret: the backup,
    /// archive and restore pods run as this ServiceAccount of the cluster's
    /// namespace, so the cloud's workload identity for it (EKS IAM roles for service
    /// accounts or Pod Identity: a web identity token or container credentials) is
    /// what the AWS CLI's default chain finds. Its owner opts it in like a Secret:
    /// label `mysqlhook.dev/backup-credentials: "true"` (optionally the annotation
    /// `mysqlhook.dev/allowed-clusters`). The pods still get no Kubernetes API token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub service_account_name: Option<String>,

    /// The uploader image: `sh` plus the AWS CLI v2. Another `amazon/aws-cli` tag, or
    /// an image of a repository the hook's `--allowed-images` lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub image: Option<String>,
}

/// Where a new cluster's data comes from.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.backup) ? !has(self.storage) && !has(self.name) : has(self.storage) && has(self.name)").message("set either backup (a MySQLBackup) or storage and name"))]
pub struct RestoreSpec {
    /// A succeeded `MySQLBackup` in this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub backup: Option<String>,

    /// The store holding the backup named `name` (the folder `<prefix>/<name>`; the
    /// prefix defaults to this cluster's `<namespace>/<name>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<BackupStorage>,

    /// The backup's name: its folder in the store, as reported in `location`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"))]
    pub name: Option<String>,

    /// Replay the binary logs up to (not including) this second, UTC, for example
    /// `2026-11-29T11:30:00Z`. Without it the backup is restored as taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"))]
    pub point_in_time: Option<String>,

    /// A later backup in the same store whose binary logs cover `pointInTime`
    /// (every backup carries the binary logs up to its own moment). Default: the
    /// restored backup itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"))]
    pub binlogs_from: Option<String>,

    /// Load only a backup signed with this key (`spec.backup.signingKey` of the
    /// cluster that wrote it): a missing or wrong signature fails the restore before
    /// anything is loaded. Opted in like S3 credentials, in a Secret without S3
    /// credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_key: Option<SecretKeyRef>,

    /// How long each server's restore may take, in seconds: download, checks, the
    /// dump's load and the binary log replay together (its Job's
    /// `activeDeadlineSeconds`); default 21600 (6 h). The load and the replay may
    /// each use all of it: no step is cut short by a fixed limit of its own. Set it
    /// from the size of the data (at 1 GB a load took 98 s here, docs/performance.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 600, max = 2_592_000))]
    pub timeout_seconds: Option<i64>,
    /// Clients that load the dump at once, each a table (of one database at a
    /// time); default 1. Above 1 the dump is first cut into pieces on a work volume
    /// as large as the data volume (the dump's uncompressed size must fit); at 1 GB
    /// on 2 cores 2 clients restored in about 0.7 of the time (docs/performance.md).
    /// A table loads in one client, so one large table gains nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 16))]
    pub parallel: Option<i32>,

    /// Resources of each container of the restore pods (the download, the load, the
    /// replay). Default: as `spec.backup.resources`, requests of 100m CPU and 256Mi
    /// of memory and no limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// Progress of a backup or a restore.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackupPhase {
    /// Waiting for something (the cluster, the source backup, a pod).
    Pending,
    /// The Job runs.
    Running,
    Succeeded,
    /// The Job failed; it is kept for its logs. Deleting it retries.
    Failed,
}

/// One finished backup, as its Job reported it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct BackupRecord {
    /// The backup's name: its folder in the store and its Job's name.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<BackupPhase>,
    /// When the backup finished (or failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// `pvc://<claim>/<prefix>/<name>` or `s3://<bucket>/<prefix>/<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Size of the dump and binary logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,
    /// The server the backup was read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The GTID position of the dump.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gtid: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Backups of a cluster, as observed from their Jobs' pods.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct BackupStatus {
    /// The newest scheduled backup that finished, successfully or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<BackupRecord>,
    /// The newest scheduled backup that succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_succeeded: Option<BackupRecord>,
    /// The final backup taken while deleting with `deletionPolicy: Backup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_backup: Option<BackupRecord>,
    /// The binary log archive (`spec.backup.binlogSchedule`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binlog_archive: Option<BinlogArchiveStatus>,
}

/// The binary log archive, as observed from its Jobs' pods.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct BinlogArchiveStatus {
    /// The newest archive run that finished, successfully or not (`location` is the
    /// archive, `source` the primary it read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<BackupRecord>,
    /// Every transaction the primary committed before this time is archived: a
    /// point-in-time restore can reach up to here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived_until: Option<String>,
}

/// Progress of `spec.restore`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RestoreStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<BackupPhase>,
    /// The backup being restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The point in time, when one was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point_in_time: Option<String>,
    /// Servers restored so far.
    #[serde(default)]
    pub restored: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The store and backup name resolved from `spec.restore` when the restore
    /// started: the restore goes on from them if the `MySQLBackup` is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<BackupStorage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Each server's restore: the step its restore pod runs and since when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<RestoreServerStatus>,
}

/// Where one server's restore stands, read from its restore pod: each step of
/// `restore.sh` is a container of its own, so the pod's status says which runs.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RestoreServerStatus {
    /// The server restored.
    pub pod: String,
    /// Its restore Job (`kubectl logs job/<job> -c <container>` shows a step's log).
    pub job: String,
    pub step: RestoreStep,
    /// When the step started (RFC 3339), once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// What the steps before it reported: the dump's size, how long the load
    /// took, how many binary log files the replay applies; or why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A step of one server's restore, in order.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreStep {
    /// The pod has not started a step yet (scheduling, pulling images).
    Pending,
    /// Copying the backup from S3 to the pod's work volume (container `download`).
    Downloading,
    /// Checksums, signature, binary log continuity, an empty target (container `restore-check`).
    Checking,
    /// Loading the dump and the accounts (container `restore-load`): the long step.
    Loading,
    /// Replaying binary logs to `pointInTime` (container `restore`).
    Replaying,
    /// Marking the server restored and read-only (container `restore`).
    Finishing,
    /// The whole restore in one container (a Job of an earlier mysql-hook).
    Restoring,
    Restored,
    /// The Job failed; `detail` says why. Deleting the Job retries.
    Failed,
}

/// A one-shot backup of a `MySQL` cluster in the same namespace, written to the
/// cluster's `spec.backup.storage`.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "mysqlhook.dev",
    version = "v1alpha1",
    kind = "MySQLBackup",
    plural = "mysqlbackups",
    singular = "mysqlbackup",
    shortname = "mybk",
    namespaced,
    status = "MySQLBackupStatus",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.cluster"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Bytes","type":"integer","jsonPath":".status.bytes"}"#,
    printcolumn = r#"{"name":"Location","type":"string","jsonPath":".status.location","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MySQLBackupSpec {
    /// The `MySQL` to back up. Immutable.
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("cluster is immutable"))]
    pub cluster: String,

    /// Restore the backup into a throwaway server in the backup's own pod before it
    /// counts (as `spec.backup.verify` does for every backup of the cluster): a
    /// backup that does not restore fails. Read when the Job is created.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verify: bool,
}

/// What became of a `MySQLBackup`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MySQLBackupStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<BackupPhase>,
    /// When the Job was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// When it succeeded or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
    /// The backup's name (its folder in the store): what `spec.restore.name` and
    /// `binlogsFrom` refer to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The store, with its prefix resolved, so a restore needs nothing else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<BackupStorage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,
    /// The server the backup was read from (a replica whenever one was healthy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gtid: Option<String>,
    /// The backup's checksum: SHA-256 of its `SHA256SUMS` (which lists the SHA-256 of
    /// every file it wrote), so `sha256sum SHA256SUMS` in its folder gives it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// True when the backup was restored into a throwaway server before it counted
    /// (`spec.verify`, `spec.backup.verify`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// Tables the verification found after restoring the backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_tables: Option<i64>,
    /// Flavor of the cluster the backup came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor: Option<Flavor>,
    /// What the hook is waiting for, or why the backup failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The `metadata.generation` this status was computed for (set by Metacontroller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Complete` (True once the backup succeeded) and `Failed` (True once it
    /// failed), as a Job has them: `kubectl wait --for=condition=Complete
    /// mysqlbackup/<name>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Every CRD this hook serves, in the order they are written to `crd.yaml`.
#[must_use]
pub fn crds() -> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> {
    vec![MySQL::crd(), MySQLBackup::crd()]
}

/// The CRDs as one multi-document YAML stream, exactly as committed in
/// `metacontroller/crd.yaml`.
///
/// # Errors
/// Only if serialization fails, which would be a bug in the types.
pub fn crds_json() -> Result<Vec<serde_json::Value>, serde_json::Error> {
    crds().iter().map(serde_json::to_value).collect()
}

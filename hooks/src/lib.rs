//! The pure core of mysql-hook.
//!
//! Metacontroller POSTs a `MySQL` parent with everything it owns; [`sync`],
//! [`finalize`] and [`customize`] answer with the complete desired children and the
//! parent's status. They are pure functions of the request and a [`Context`]: no
//! clock, no randomness, no I/O, so the same input always gives byte-identical
//! output. This crate depends on nothing that could do I/O; the HTTP shell lives in
//! the `mysql-hook` binary crate.
//!
//! A newcomer's map:
//! - [`api`]: the `MySQL` CRD types (the CRD is generated from them);
//! - [`access`]: which S3 credentials Secrets and images a `MySQL` may use;
//! - [`metacontroller`]: the hook protocol's request and response shapes;
//! - [`observed`]: what came in, as pods by ordinal and Jobs;
//! - [`model`]: the validated, effective cluster (where bad specs are caught);
//! - [`build`]: one builder per child kind;
//! - [`memory`]: what the hook must remember, rebuilt from status, the config
//!   ConfigMap and the Jobs, so a lost or stale status is harmless;
//! - [`bootstrap`]: making the first primary writable;
//! - [`roles`]: failover and switchover, the only place the primary moves;
//! - [`servers`]: `status.servers`, from the `inspect` Job's report;
//! - [`rollout`], [`version`]: ordered upgrades through the StatefulSet partition;
//! - [`sync`], [`finalize`], [`customize`]: the three hooks of `MySQL`;
//! - [`backups`], [`restore`], [`jobs`]: scheduled and final backups, restores,
//!   and reading what backup and restore Jobs report;
//! - [`mysqlbackup`]: the `MySQLBackup` controller's hooks;
//! - [`users`]: application accounts and their password Secrets;
//! - [`grow`]: growing the servers' volume claims to a bigger `spec.storage.size`.

pub mod access;
pub mod api;
pub mod backups;
pub mod bootstrap;
pub mod build;
pub mod conditions;
pub mod credentials;
pub mod cron;
pub mod customize;
pub mod decode;
pub mod error;
pub mod finalize;
pub mod grow;
pub mod jobs;
pub mod labels;
pub mod memory;
pub mod metacontroller;
pub mod model;
pub mod mycnf;
pub mod mysqlbackup;
pub mod names;
pub mod observed;
pub mod placement;
pub mod quantity;
pub mod restore;
pub mod roles;
pub mod rollout;
pub mod scale_down;
pub mod scripts;
pub mod servers;
pub mod sync;
pub mod tls;
pub mod users;
pub mod version;

pub use customize::customize;
pub use error::{Error, Result};
pub use finalize::finalize;
pub use k8s_openapi::jiff::Timestamp;
pub use sync::sync;

/// Everything outside the request that the core depends on, injected by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// The current time: grace periods and condition transition times.
    pub now: Timestamp,
    /// Fresh randomness for this request, drawn by the caller: the key any password
    /// the hook must generate is derived from (see [`credentials`]). Passwords
    /// therefore cannot be reproduced from anything public (the parent's uid is in
    /// every child's owner reference); the credentials Secret is created once and
    /// read back from then on, so later draws never change a password.
    pub entropy: [u8; 32],
    /// The hook's own image, which every server and Job pod installs the scripts
    /// from (see [`scripts`]). The scripts thus always match the hook that reads
    /// their results, and do not travel through every sync in a ConfigMap.
    pub scripts_image: String,
    /// Image repositories the installer allows in `spec.image` and in an S3 store's
    /// `image` (`--allowed-images`): an override whose repository (the reference
    /// without `:tag` and `@digest`) is not listed, and is not the repository of the
    /// default it replaces, is refused (see [`access`]). Empty: no overrides.
    pub allowed_images: Vec<String>,
    /// What the installer lets `spec.pod` and `spec.services` set (the hook's
    /// `--allowed-pod-label-keys` and the rest; see [`placement::Policy`]).
    pub placement_policy: placement::Policy,
}

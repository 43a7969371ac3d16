//! The ConfigMaps `<name>-config` and `<name>-config-<hash>`, and the Secret
//! `<name>-credentials`.
//!
//! `<name>-config` carries what running servers follow without a restart: `primary`
//! (the pod the agents replicate from) and its `epoch`, `pods` (the membership), `maxLagSeconds`
//! (the readiness probe) and `rebuildErrant` (join.sh), plus, in its
//! annotations, what the hook must remember ([`crate::memory`]). Moving the primary
//! or scaling therefore changes no pod template.
//!
//! The option file is content-addressed: `<name>-config-<hash>`, immutable, one per
//! version of it, named by the pod template. A pod of an older revision that
//! restarts in the middle of a rollout (an eviction, a crash) starts with its own
//! revision's file, never with a new, possibly broken one the walk has not
//! released to it. Older files are kept while any pod or revision may still use
//! them. The scripts are not here: every pod installs them from the hook's image
//! (see [`crate::scripts`]).

use std::collections::BTreeMap;

use k8s_openapi::{
    ByteString,
    api::core::v1::{ConfigMap, Secret},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use super::meta;
use crate::{
    credentials, labels, memory,
    model::{Cluster, MY_CNF},
};

/// What a sync leaves on the ConfigMap for the next one to recall when the status
/// is lost or stale (see [`crate::memory`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remembered {
    pub initialized: bool,
    /// The epoch of `c.primary`.
    pub epoch: i32,
    pub operations_started: i32,
    pub newest_version: Option<String>,
    /// The `force-failover` value a forced failover used, while the annotation stays.
    pub force_failover_used: Option<String>,
    /// The servers of a scale-down not yet proven safe ([`crate::scale_down`]).
    pub quorum_servers: Option<i32>,
    /// What the primary is known to have executed ([`crate::roles::position`]).
    pub primary_position: Option<crate::roles::position::Known>,
}

#[must_use]
pub fn config_map(c: &Cluster, remembered: &Remembered) -> ConfigMap {
    let mut data = BTreeMap::from([
        (memory::PRIMARY_KEY.to_owned(), c.primary.clone()),
        (memory::PODS_KEY.to_owned(), c.pods_env()),
        (memory::MAX_LAG_KEY.to_owned(), c.max_lag_seconds.to_string()),
        (memory::REBUILD_ERRANT_KEY.to_owned(), c.rebuild_errant.to_string()),
    ]);
    if c.operator_account {
        let value = if c.root_remote_drop { "drop" } else { "keep" };
        data.insert(memory::ROOT_REMOTE_KEY.to_owned(), value.to_owned());
    }
    if let Some(tls) = &c.tls {
        let mode = if tls.verify { crate::tls::VERIFY } else { "" };
        data.insert(crate::tls::MODE_KEY.to_owned(), mode.to_owned());
    }
    let mut annotations = BTreeMap::new();
    if remembered.initialized {
        data.insert(memory::EPOCH_KEY.to_owned(), remembered.epoch.to_string());
        annotations.insert(memory::INITIALIZED.to_owned(), "true".to_owned());
        annotations.insert(memory::PRIMARY_EPOCH.to_owned(), remembered.epoch.to_string());
    }
    if remembered.operations_started > 0 {
        annotations.insert(memory::OPERATIONS_STARTED.to_owned(), remembered.operations_started.to_string());
    }
    if let Some(v) = &remembered.newest_version {
        annotations.insert(memory::NEWEST_VERSION.to_owned(), v.clone());
    }
    if let Some(v) = &remembered.force_failover_used {
        annotations.insert(memory::FORCE_FAILOVER_USED.to_owned(), v.clone());
    }
    if let Some(n) = remembered.quorum_servers {
        annotations.insert(memory::QUORUM_SERVERS.to_owned(), n.to_string());
    }
    if let Some(known) = &remembered.primary_position {
        annotations.insert(crate::roles::position::PRIMARY_POSITION.to_owned(), known.annotation());
    }
    ConfigMap {
        metadata: ObjectMeta {
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..meta(&c.names.config, labels::common(&c.names, labels::DATABASE))
        },
        data: Some(data),
        ..Default::default()
    }
}

/// This revision's option file, `<name>-config-<hash>`.
#[must_use]
pub fn option_file(c: &Cluster) -> ConfigMap {
    ConfigMap {
        metadata: meta(&c.names.option_file(&c.config_hash), labels::common(&c.names, labels::DATABASE)),
        data: Some(BTreeMap::from([(MY_CNF.to_owned(), c.my_cnf.clone())])),
        immutable: Some(true),
        ..Default::default()
    }
}

/// Whether `name` is one of this cluster's option file ConfigMaps.
#[must_use]
pub fn is_option_file(c: &crate::names::Names, name: &str) -> bool {
    name.rsplit_once("-config-").is_some_and(|(_, hash)| c.option_file(hash) == name)
}

/// The exporter account's Secret `<name>-exporter`, with the `mysqld_exporter`
/// sidecar. Observed values are kept (the Secret is created once, never updated).
#[must_use]
pub fn exporter_secret(c: &Cluster, observed: Option<&BTreeMap<String, ByteString>>, entropy: &[u8; 32]) -> Secret {
    Secret {
        metadata: meta(&c.names.exporter, labels::common(&c.names, labels::DATABASE)),
        type_: Some("Opaque".to_owned()),
        data: Some(exporter_data(observed, entropy, &c.uid)),
        ..Default::default()
    }
}

/// The exporter's password and, beside it, the option file the sidecar logs in
/// with (see [`crate::model::Exporter::option_file`]), derived from the password.
fn exporter_data(
    observed: Option<&BTreeMap<String, ByteString>>,
    entropy: &[u8; 32],
    uid: &str,
) -> BTreeMap<String, ByteString> {
    let mut data = credentials::exporter_data(observed, entropy, uid);
    let password = data.get(credentials::EXPORTER_PASSWORD).map(|p| String::from_utf8_lossy(&p.0).into_owned());
    let cnf = format!(
        "[client]\nuser = {}\npassword = {}\nsocket = {}\n",
        crate::build::statefulset::EXPORTER_USER,
        password.unwrap_or_default(),
        crate::build::statefulset::SOCKET
    );
    data.insert(credentials::EXPORTER_CNF.to_owned(), ByteString(cnf.into_bytes()));
    data
}

/// The credentials Secret, when the hook owns it. Observed values are kept.
#[must_use]
pub fn secret(c: &Cluster, observed: Option<&BTreeMap<String, ByteString>>, entropy: &[u8; 32]) -> Secret {
    Secret {
        metadata: meta(&c.names.credentials, labels::common(&c.names, labels::DATABASE)),
        type_: Some("Opaque".to_owned()),
        data: Some(credentials::data(observed, entropy, &c.uid)),
        ..Default::default()
    }
}

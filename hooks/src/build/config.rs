//! The ConfigMap `<name>-config` and the Secret `<name>-credentials`.
//!
//! The ConfigMap carries the option file and `primary`: the pod the agents
//! replicate from. Only the option file's hash is in the pod template, so moving
//! the primary never restarts a server. The scripts are not here: every pod
//! installs them from the hook's image (see [`crate::scripts`]).

use std::collections::BTreeMap;

use k8s_openapi::{
    ByteString,
    api::core::v1::{ConfigMap, Secret},
};

use super::meta;
use crate::{
    credentials, labels,
    model::{Cluster, MY_CNF},
};

#[must_use]
pub fn config_map(c: &Cluster) -> ConfigMap {
    let data = BTreeMap::from([(MY_CNF.to_owned(), c.my_cnf.clone()), ("primary".to_owned(), c.primary.clone())]);
    ConfigMap {
        metadata: meta(&c.names.config, labels::common(&c.names, labels::DATABASE)),
        data: Some(data),
        ..Default::default()
    }
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

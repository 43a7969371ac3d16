//! One builder per child kind. Each is a plain function from the effective
//! [`Cluster`](crate::model::Cluster) to a k8s-openapi object with only the fields
//! the hook owns: no status, no server-set metadata, canonical values.

pub mod backup;
pub mod config;
pub mod job;
pub mod network;
pub mod pdb;
pub mod pod;
pub mod service;
pub mod statefulset;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Metadata of a child: its name and labels, nothing else. Metacontroller adds the
/// namespace and owner reference.
#[must_use]
pub fn meta(name: &str, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta { name: Some(name.to_owned()), labels: Some(labels), ..Default::default() }
}

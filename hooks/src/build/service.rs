//! The three Services and the replicas' EndpointSlices.
//!
//! - `<name>-headless` governs pod DNS (`<pod>.<name>-headless`), including pods that
//!   are not Ready, so replication can reach a server that is still catching up.
//! - `<name>-primary` selects exactly the recorded primary by the
//!   `statefulset.kubernetes.io/pod-name` label every StatefulSet pod carries.
//! - `<name>-replicas` has no selector: a label selector cannot say "every pod but
//!   the primary", so the hook writes its EndpointSlice itself, listing only Ready
//!   pods that are not the primary.

use std::collections::BTreeMap;

use k8s_openapi::api::{
    core::v1::{ObjectReference, Service, ServicePort, ServiceSpec},
    discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice},
};

use super::meta;
use crate::{api::ServiceExposure, labels, model::Cluster, observed::Observed};

const PORT: i32 = 3306;
const PORT_NAME: &str = "mysql";
/// EndpointSlices written by someone other than the EndpointSlice controller must
/// say who manages them, or that controller would take them over.
const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
const SERVICE_NAME: &str = "kubernetes.io/service-name";

fn port() -> ServicePort {
    ServicePort {
        name: Some(PORT_NAME.to_owned()),
        port: PORT,
        target_port: Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(PORT_NAME.to_owned())),
        protocol: Some("TCP".to_owned()),
        ..Default::default()
    }
}

#[must_use]
pub fn headless(c: &Cluster) -> Service {
    Service {
        metadata: meta(&c.names.headless, labels::common(&c.names, labels::DATABASE)),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            publish_not_ready_addresses: Some(true),
            selector: Some(labels::database_selector(&c.names)),
            ports: Some(vec![port()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[must_use]
pub fn primary(c: &Cluster) -> Service {
    let mut selector = labels::database_selector(&c.names);
    selector.insert(labels::POD_NAME.to_owned(), c.primary.clone());
    Service {
        metadata: exposed(meta(&c.names.primary, labels::common(&c.names, labels::DATABASE)), &c.services.primary),
        spec: Some(ServiceSpec {
            type_: Some(c.services.primary.type_.as_str().to_owned()),
            selector: Some(selector),
            ports: Some(vec![port()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[must_use]
pub fn replicas(c: &Cluster) -> Service {
    Service {
        metadata: exposed(meta(&c.names.replicas, labels::common(&c.names, labels::DATABASE)), &c.services.replicas),
        spec: Some(ServiceSpec {
            type_: Some(c.services.replicas.type_.as_str().to_owned()),
            ports: Some(vec![ServicePort { target_port: None, ..port() }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A Service's metadata with the annotations `spec.services` gives it.
fn exposed(
    mut meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    e: &ServiceExposure,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    if !e.annotations.is_empty() {
        meta.annotations = Some(e.annotations.clone());
    }
    meta
}

/// The EndpointSlices of `<name>-replicas`: one for IPv4, always (so the Service has
/// a slice even with no replica Ready), and one for IPv6 when a replica has an IPv6
/// address.
#[must_use]
pub fn replica_endpoints(c: &Cluster, observed: &Observed<'_>) -> Vec<EndpointSlice> {
    let mut by_family: BTreeMap<&str, Vec<Endpoint>> = BTreeMap::from([("IPv4", Vec::new())]);
    for m in observed.ready_members() {
        if m.name == c.primary || m.terminating || m.ordinal >= c.replicas {
            continue;
        }
        let Some(ip) = m.ip else { continue };
        let family = if ip.contains(':') { "IPv6" } else { "IPv4" };
        by_family.entry(family).or_default().push(Endpoint {
            addresses: vec![ip.to_owned()],
            conditions: Some(EndpointConditions { ready: Some(true), ..Default::default() }),
            hostname: Some(m.name.to_owned()),
            target_ref: Some(ObjectReference {
                kind: Some("Pod".to_owned()),
                name: Some(m.name.to_owned()),
                namespace: Some(c.namespace.clone()),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    by_family
        .into_iter()
        .map(|(family, endpoints)| {
            let name = if family == "IPv4" { c.names.replicas.clone() } else { format!("{}-ipv6", c.names.replicas) };
            let mut slice_labels = labels::common(&c.names, labels::DATABASE);
            slice_labels.insert(SERVICE_NAME.to_owned(), c.names.replicas.clone());
            slice_labels.insert(MANAGED_BY.to_owned(), "mysqlhook.dev".to_owned());
            EndpointSlice {
                metadata: meta(&name, slice_labels),
                address_type: family.to_owned(),
                // An empty list is stored as null; send what the server keeps.
                endpoints: (!endpoints.is_empty()).then_some(endpoints),
                ports: Some(vec![EndpointPort {
                    name: Some(PORT_NAME.to_owned()),
                    port: Some(PORT),
                    protocol: Some("TCP".to_owned()),
                    ..Default::default()
                }]),
            }
        })
        .collect()
}

//! Where the servers run and how clients reach them: the knobs a platform team
//! needs to run a database on its clusters (node pools, taints, zones, priority,
//! private registries, cost labels, load balancers).
//!
//! They are a narrow overlay on the pod template the hook builds, not a free-form
//! patch: nothing here can weaken the safety of the pod (security context, probes,
//! volumes, the scripts) or the identity the hook relies on (its labels).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, LocalObjectReference, Toleration, TopologySpreadConstraint};
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where the server (and Job) pods are scheduled, and what they carry.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodPlacement {
    /// Node labels a server and Job pod needs (`nodeSelector`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,

    /// Taints the server and Job pods tolerate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,

    /// Affinity of the server pods. When set it replaces the hook's default (spread
    /// the servers over nodes, see `antiAffinity`) entirely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// How strictly servers are kept on different nodes (when `affinity` is not
    /// set): `Preferred` (default: spread when possible) or `Required` (a server that
    /// would share a node stays Pending; use it with at least as many nodes as
    /// servers).
    #[serde(default)]
    pub anti_affinity: AntiAffinity,

    /// Spread constraints of the server pods (zones, for example); the hook adds its
    /// own label selector when one is left empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,

    /// PriorityClass of the server pods (and Job pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub priority_class_name: Option<String>,

    /// Secrets to pull the server and scripts images from a private registry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,

    /// Extra labels on the server pods. The hook's own labels (`app.kubernetes.io/*`)
    /// win: a key that would change them is ignored and reported.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,

    /// Extra annotations on the server pods (`mysqlhook.dev/*` ones are the hook's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// How strictly the servers are spread over nodes.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AntiAffinity {
    #[default]
    Preferred,
    Required,
}

/// How clients reach the `-primary` and `-replicas` Services.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServicesSpec {
    /// The read-write Service `<name>-primary`.
    #[serde(default)]
    pub primary: ServiceExposure,
    /// The read-only Service `<name>-replicas`.
    #[serde(default)]
    pub replicas: ServiceExposure,
}

/// One Service's type and annotations (for a cloud load balancer, for example).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceExposure {
    /// `ClusterIP` (default), `NodePort` or `LoadBalancer`.
    #[serde(default, rename = "type")]
    pub type_: ServiceType,
    /// Annotations of the Service.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A Service type the hook supports.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ServiceType {
    #[default]
    ClusterIP,
    NodePort,
    LoadBalancer,
}

impl ServiceType {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClusterIP => "ClusterIP",
            Self::NodePort => "NodePort",
            Self::LoadBalancer => "LoadBalancer",
        }
    }
}

//! What `spec.pod` may not set (issue 30.6): the pod placement overlay is for
//! node pools, taints, zones, priority and cost labels, not for weakening the pod
//! or for reaching nodes and priorities that belong to the cluster itself.
//!
//! Metacontroller and the StatefulSet controller create the pods, so the RBAC of
//! whoever writes a `MySQL` never applies to what the pods carry; admission
//! policies still do, but a namespace need not enforce any. Left out, and reported
//! (`SpecAccepted` False `PodSettingsRefused`):
//!
//! - annotations that set a container's AppArmor or seccomp profile (the
//!   pre-1.30 annotation forms), which could undo the pod's `restricted`
//!   security context (`unconfined`);
//! - priority classes named `system-*` (`system-cluster-critical`,
//!   `system-node-critical`): they preempt the cluster's own components;
//! - tolerations of the control-plane taints (`node-role.kubernetes.io/control-plane`,
//!   `…/master`), and a toleration without a key, which tolerates every taint.
//!
//! Beyond these fixed refusals the installer decides ([`Policy`], the hook's
//! `--allowed-*` settings): which pod label and annotation keys, priority classes,
//! toleration keys, Service types and Service annotation keys a `MySQL` may set.
//! What a set list does not name is left out and reported (`SpecAccepted` False
//! `PodSettingsNotAllowed`); an unset list lets anything pass, as before.

use crate::api::{PodPlacement, ServiceType, ServicesSpec};

/// Annotation key prefixes that set a security profile.
const SECURITY_ANNOTATIONS: [&str; 3] = [
    "container.apparmor.security.beta.kubernetes.io/",
    "seccomp.security.alpha.kubernetes.io/",
    "container.seccomp.security.alpha.kubernetes.io/",
];
/// Taints only the control plane's nodes carry.
const CONTROL_PLANE_TAINTS: [&str; 2] = ["node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"];

/// Removes from `p` what it may not set; returns what was removed, for humans.
pub fn refuse_weakening(p: &mut PodPlacement) -> Vec<String> {
    let mut refused = Vec::new();
    let security: Vec<String> = p
        .annotations
        .keys()
        .filter(|k| SECURITY_ANNOTATIONS.iter().any(|prefix| k.starts_with(prefix)))
        .cloned()
        .collect();
    for key in &security {
        p.annotations.remove(key);
        refused.push(format!("annotation {key} (a security profile)"));
    }
    if let Some(class) = p.priority_class_name.take_if(|c| c.starts_with("system-")) {
        refused.push(format!("priorityClassName {class} (reserved for the cluster's own components)"));
    }
    p.tolerations.retain(|t| {
        let key = t.key.as_deref().unwrap_or_default();
        if key.is_empty() {
            refused.push("a toleration without a key (it tolerates every taint)".to_owned());
            false
        } else if CONTROL_PLANE_TAINTS.contains(&key) {
            refused.push(format!("the toleration of {key} (control-plane nodes)"));
            false
        } else {
            true
        }
    });
    refused
}

/// Keys a list lets through: each entry is a key, or a prefix ending in `*`
/// (`example.com/*`, `cost-*`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPatterns(Vec<String>);

impl KeyPatterns {
    /// Parses a comma-separated list; an empty list lets nothing through.
    ///
    /// # Errors
    /// An entry with `*` anywhere but at its end, or with whitespace inside.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let stem = entry.strip_suffix('*').unwrap_or(entry);
            if stem.contains('*') || entry.chars().any(char::is_whitespace) {
                return Err(format!("{entry:?}: a key, or a prefix ending in * (example.com/*)"));
            }
            out.push(entry.to_owned());
        }
        Ok(Self(out))
    }

    #[must_use]
    pub fn allows(&self, key: &str) -> bool {
        self.0.iter().any(|p| p.strip_suffix('*').map_or(p == key, |prefix| key.starts_with(prefix)))
    }

    fn describe(&self) -> String {
        if self.0.is_empty() { "none".to_owned() } else { self.0.join(", ") }
    }
}

/// What the installer lets `spec.pod` and `spec.services` set beyond the fixed
/// refusals of [`refuse_weakening`] (`--allowed-pod-label-keys` and the rest).
/// A pod label can make the servers endpoints of another Service whose selector it
/// matches, an annotation can configure a mesh sidecar or an external DNS name, a
/// priority class can preempt other workloads, a toleration can reach reserved
/// nodes, a `LoadBalancer` can expose the database outside the cluster: the
/// installer, not every `MySQL` author, decides which of them a namespace gets.
/// Each list, when set (`Some`), is the whole of what passes; `None` lets anything
/// pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    pub pod_label_keys: Option<KeyPatterns>,
    pub pod_annotation_keys: Option<KeyPatterns>,
    pub priority_classes: Option<KeyPatterns>,
    pub toleration_keys: Option<KeyPatterns>,
    pub service_types: Option<Vec<ServiceType>>,
    pub service_annotation_keys: Option<KeyPatterns>,
}

impl Policy {
    /// Parses a comma-separated list of Service types.
    ///
    /// # Errors
    /// A type the hook does not support.
    pub fn parse_service_types(list: &str) -> Result<Vec<ServiceType>, String> {
        list.split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| {
                [ServiceType::ClusterIP, ServiceType::NodePort, ServiceType::LoadBalancer]
                    .into_iter()
                    .find(|known| known.as_str() == t)
                    .ok_or_else(|| format!("{t:?}: not a Service type (ClusterIP, NodePort, LoadBalancer)"))
            })
            .collect()
    }

    /// Removes from `p` and `services` what the lists do not name; returns what was
    /// removed, for humans. A refused Service type becomes `ClusterIP`, which every
    /// list allows: the Service stays reachable inside the cluster.
    pub fn hold(&self, p: &mut PodPlacement, services: &mut ServicesSpec) -> Vec<String> {
        let mut refused = Vec::new();
        if let Some(allowed) = &self.pod_label_keys {
            p.labels.retain(|k, _| keep(allowed, k, "pod label", "--allowed-pod-label-keys", &mut refused));
        }
        if let Some(allowed) = &self.pod_annotation_keys {
            p.annotations
                .retain(|k, _| keep(allowed, k, "pod annotation", "--allowed-pod-annotation-keys", &mut refused));
        }
        if let Some(allowed) = &self.priority_classes
            && let Some(class) = p.priority_class_name.take_if(|c| !allowed.allows(c))
        {
            refused.push(format!(
                "priorityClassName {class} ({} lists {})",
                "--allowed-priority-classes",
                allowed.describe()
            ));
        }
        if let Some(allowed) = &self.toleration_keys {
            p.tolerations.retain(|t| {
                keep(
                    allowed,
                    t.key.as_deref().unwrap_or_default(),
                    "toleration of",
                    "--allowed-toleration-keys",
                    &mut refused,
                )
            });
        }
        for (name, exposure) in [("primary", &mut services.primary), ("replicas", &mut services.replicas)] {
            if let Some(allowed) = &self.service_types
                && exposure.type_ != ServiceType::ClusterIP
                && !allowed.contains(&exposure.type_)
            {
                let listed: Vec<&str> = allowed.iter().map(|t| t.as_str()).collect();
                refused.push(format!(
                    "spec.services.{name}.type {} ({} lists {}; ClusterIP instead)",
                    exposure.type_.as_str(),
                    "--allowed-service-types",
                    if listed.is_empty() { "none".to_owned() } else { listed.join(", ") }
                ));
                exposure.type_ = ServiceType::ClusterIP;
            }
            if let Some(allowed) = &self.service_annotation_keys {
                let what = format!("spec.services.{name} annotation");
                exposure
                    .annotations
                    .retain(|k, _| keep(allowed, k, &what, "--allowed-service-annotation-keys", &mut refused));
            }
        }
        refused
    }
}

/// Whether `allowed` lets `key` through; records the refusal when it does not.
fn keep(allowed: &KeyPatterns, key: &str, what: &str, flag: &str, refused: &mut Vec<String>) -> bool {
    let ok = allowed.allows(key);
    if !ok {
        refused.push(format!("{what} {key} ({flag} lists {})", allowed.describe()));
    }
    ok
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Toleration;

    use super::*;

    fn toleration(key: Option<&str>) -> Toleration {
        Toleration { key: key.map(str::to_owned), operator: Some("Exists".to_owned()), ..Default::default() }
    }

    #[test]
    fn security_profiles_system_priorities_and_control_plane_tolerations_are_left_out() {
        let mut p = PodPlacement {
            priority_class_name: Some("system-cluster-critical".to_owned()),
            tolerations: vec![
                toleration(Some("node-role.kubernetes.io/control-plane")),
                toleration(Some("node-role.kubernetes.io/master")),
                toleration(None),
                toleration(Some("dedicated")),
            ],
            ..Default::default()
        };
        for key in [
            "container.apparmor.security.beta.kubernetes.io/exporter",
            "seccomp.security.alpha.kubernetes.io/pod",
            "container.seccomp.security.alpha.kubernetes.io/mysqld",
            "team.example/cost-center",
        ] {
            p.annotations.insert(key.to_owned(), "unconfined".to_owned());
        }
        let refused = refuse_weakening(&mut p);
        assert_eq!(refused.len(), 7, "{refused:?}");
        assert_eq!(p.annotations.keys().collect::<Vec<_>>(), ["team.example/cost-center"]);
        assert_eq!(p.priority_class_name, None);
        assert_eq!(p.tolerations, vec![toleration(Some("dedicated"))]);
    }

    #[test]
    fn key_patterns_are_keys_or_prefixes() {
        let k = KeyPatterns::parse("team, example.com/*,cost-*").unwrap_or_else(|e| panic!("{e}"));
        for key in ["team", "example.com/owner", "example.com/", "cost-center"] {
            assert!(k.allows(key), "{key}");
        }
        for key in ["teams", "tea", "example.org/owner", "cost", "", "app.kubernetes.io/name"] {
            assert!(!k.allows(key), "{key}");
        }
        assert!(!KeyPatterns::parse("").unwrap_or_else(|e| panic!("{e}")).allows("team"), "empty lets nothing in");
        for bad in ["*.example.com/x", "a*b", "team name"] {
            assert!(KeyPatterns::parse(bad).is_err(), "{bad}");
        }
        assert!(Policy::parse_service_types("ClusterIP,LoadBalancer").is_ok());
        assert!(Policy::parse_service_types("ExternalName").is_err());
        assert!(Policy::parse_service_types("loadbalancer").is_err());
    }

    #[test]
    fn the_installers_lists_hold_pod_and_service_settings() {
        let list = |s: &str| Some(KeyPatterns::parse(s).unwrap_or_else(|e| panic!("{e}")));
        let policy = Policy {
            pod_label_keys: list("team"),
            pod_annotation_keys: list("example.com/*"),
            priority_classes: list("databases"),
            toleration_keys: list("dedicated"),
            service_types: Some(vec![ServiceType::LoadBalancer]),
            service_annotation_keys: list("service.beta.kubernetes.io/*"),
        };
        let mut p = PodPlacement {
            priority_class_name: Some("batch-high".to_owned()),
            tolerations: vec![toleration(Some("dedicated")), toleration(Some("gpu"))],
            ..Default::default()
        };
        p.labels.insert("team".to_owned(), "payments".to_owned());
        p.labels.insert("app".to_owned(), "web".to_owned());
        p.annotations.insert("example.com/owner".to_owned(), "x".to_owned());
        p.annotations.insert("sidecar.istio.io/inject".to_owned(), "true".to_owned());
        let mut services = ServicesSpec::default();
        services.primary.type_ = ServiceType::LoadBalancer;
        services
            .primary
            .annotations
            .insert("service.beta.kubernetes.io/aws-load-balancer-internal".into(), "true".into());
        services.primary.annotations.insert("external-dns.alpha.kubernetes.io/hostname".into(), "db.example".into());
        services.replicas.type_ = ServiceType::NodePort;
        let refused = policy.hold(&mut p, &mut services);
        assert_eq!(refused.len(), 6, "{refused:#?}");
        assert!(refused.iter().all(|r| r.contains("--allowed-")), "each names its flag: {refused:#?}");
        assert_eq!(p.labels.keys().collect::<Vec<_>>(), ["team"]);
        assert_eq!(p.annotations.keys().collect::<Vec<_>>(), ["example.com/owner"]);
        assert_eq!(p.priority_class_name, None);
        assert_eq!(p.tolerations, vec![toleration(Some("dedicated"))]);
        assert_eq!(services.primary.type_, ServiceType::LoadBalancer);
        assert_eq!(
            services.primary.annotations.keys().collect::<Vec<_>>(),
            ["service.beta.kubernetes.io/aws-load-balancer-internal"]
        );
        assert_eq!(services.replicas.type_, ServiceType::ClusterIP, "a refused type falls back to ClusterIP");

        // Unset lists let everything through.
        let (mut q, mut s) = (p.clone(), services.clone());
        q.labels.insert("app".to_owned(), "web".to_owned());
        s.replicas.type_ = ServiceType::NodePort;
        let before = (q.clone(), s.clone());
        assert!(Policy::default().hold(&mut q, &mut s).is_empty());
        assert_eq!((q, s), before);
    }

    #[test]
    fn ordinary_placement_passes_untouched() {
        let mut p = PodPlacement {
            priority_class_name: Some("databases".to_owned()),
            tolerations: vec![toleration(Some("dedicated"))],
            ..Default::default()
        };
        p.annotations.insert("prometheus.io/scrape".to_owned(), "false".to_owned());
        let before = p.clone();
        assert!(refuse_weakening(&mut p).is_empty());
        assert_eq!(p, before);
    }
}

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
//! Pod labels, other annotations and Service annotations still pass (see
//! docs/security.md for what that lets a `MySQL` author do).

use crate::api::PodPlacement;

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

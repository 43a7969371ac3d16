//! Shared by the integration tests: the fixture clock and entropy, the fixture list,
//! and the safety invariants every answer must satisfy.

#![allow(dead_code)]

use std::{collections::BTreeSet, fs, path::PathBuf, sync::Arc};

use hooks::{Context, Timestamp};
use mysql_hook::app::State;
use serde_json::Value;

/// The instant every fixture is answered at.
pub const FIXTURE_NOW: &str = "2026-11-29T12:00:00Z";

pub fn now() -> Timestamp {
    FIXTURE_NOW.parse().unwrap_or_else(|e| panic!("{e}"))
}

/// The randomness every fixture is answered with (the passwords it generates).
pub fn entropy() -> [u8; 32] {
    hooks::credentials::fold_seed(b"mysql-hook test fixtures")
}

/// The image repositories the fixtures are answered with (`--allowed-images`).
pub const FIXTURE_ALLOWED_IMAGES: &[&str] =
    &["registry.example.com/db/mysql", "registry.example.com/tools/aws-cli", "registry.example/mysqld-exporter"];

pub fn allowed_images() -> Vec<String> {
    FIXTURE_ALLOWED_IMAGES.iter().map(|s| (*s).to_owned()).collect()
}

/// The installer's `spec.pod` and `spec.services` lists the fixtures are answered
/// with (`--allowed-pod-label-keys` and the rest): every setting of the earlier
/// fixtures passes; `sync/pod-settings-not-allowed` sets what they do not name.
pub fn placement_policy() -> hooks::placement::Policy {
    let list = |s: &str| Some(hooks::placement::KeyPatterns::parse(s).unwrap_or_else(|e| panic!("{e}")));
    hooks::placement::Policy {
        pod_label_keys: list("team,example.com/*"),
        pod_annotation_keys: list("cost-center,example.com/*"),
        priority_classes: list("databases"),
        toleration_keys: list("dedicated"),
        service_types: None,
        service_annotation_keys: list("service.beta.kubernetes.io/*"),
    }
}

pub fn fixture_state() -> State {
    State::new(Arc::new(|| Some(entropy())), Arc::new(now), 16 * 1024 * 1024)
        .with_allowed_images(allowed_images())
        .with_placement_policy(placement_policy())
}

/// The path a fixture folder's hook is served at: `backup-sync` is `/backup/sync`.
pub fn hook_path(hook: &str) -> String {
    format!("/{}", hook.replacen("backup-", "backup/", 1))
}

/// `(hook, scenario dir)` for every fixture, sorted.
pub fn fixture_dirs() -> Vec<(String, PathBuf)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("test-fixtures");
    let mut out = Vec::new();
    for hook in ["sync", "finalize", "customize", "backup-sync", "backup-customize"] {
        let Ok(entries) = fs::read_dir(root.join(hook)) else { continue };
        for e in entries.flatten() {
            if e.path().join("request.json").exists() {
                out.push((hook.to_owned(), e.path()));
            }
        }
    }
    out.sort();
    out
}

/// Whether the request's StatefulSet template or any of its pods mounts ConfigMap `cm`.
fn mounted(request: &Value, cm: &str) -> bool {
    let names_it = |spec: &Value| {
        spec["volumes"].as_array().into_iter().flatten().any(|v| v["configMap"]["name"].as_str() == Some(cm))
    };
    request["children"]["StatefulSet.apps/v1"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .any(|s| names_it(&s["spec"]["template"]["spec"]))
        || request["related"]["Pod.v1"].as_object().into_iter().flat_map(|m| m.values()).any(|p| names_it(&p["spec"]))
}

/// Runs the core directly, as the HTTP shell does, and encodes the answer.
pub fn call_core(hook: &str, body: &[u8]) -> Vec<u8> {
    let ctx = Context {
        now: now(),
        entropy: entropy(),
        scripts_image: mysql_hook::DEFAULT_SCRIPTS_IMAGE.to_owned(),
        allowed_images: allowed_images(),
        placement_policy: placement_policy(),
    };
    let encoded = match hook {
        "backup-sync" => {
            let req = serde_json::from_slice(body).unwrap_or_else(|e| panic!("{e}"));
            serde_json::to_vec(&hooks::mysqlbackup::sync(&req, &ctx).unwrap_or_else(|e| panic!("{e}")))
        }
        "backup-customize" => {
            let req = serde_json::from_slice(body).unwrap_or_else(|e| panic!("{e}"));
            serde_json::to_vec(&hooks::mysqlbackup::customize(&req).unwrap_or_else(|e| panic!("{e}")))
        }
        "customize" => {
            let req = serde_json::from_slice(body).unwrap_or_else(|e| panic!("{e}"));
            serde_json::to_vec(&hooks::customize(&req).unwrap_or_else(|e| panic!("{e}")))
        }
        "finalize" => {
            let req = serde_json::from_slice(body).unwrap_or_else(|e| panic!("{e}"));
            serde_json::to_vec(&hooks::finalize(&req, &ctx).unwrap_or_else(|e| panic!("{e}")))
        }
        _ => {
            let req = serde_json::from_slice(body).unwrap_or_else(|e| panic!("{e}"));
            serde_json::to_vec(&hooks::sync(&req, &ctx).unwrap_or_else(|e| panic!("{e}")))
        }
    };
    encoded.unwrap_or_else(|e| panic!("{e}"))
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

/// Safety properties of any 200 answer:
/// - no observed StatefulSet, Secret or ConfigMap is dropped outside finalize;
/// - the `-primary` Service selects exactly `status.primary`;
/// - the `-replicas` endpoints never include the primary;
/// - children carry apiVersion, kind and a name, and no server-owned fields;
/// - children are sorted and unique.
pub fn invariants(hook: &str, request: &Value, response: &Value) -> Result<(), String> {
    if hook.ends_with("customize") {
        return Ok(());
    }
    let children = response["children"].as_array().ok_or("no children array")?;
    let mut seen = BTreeSet::new();
    for c in children {
        let (kind, n) = (c["kind"].as_str().unwrap_or_default(), name(c));
        if c["apiVersion"].as_str().is_none() || kind.is_empty() || n.is_empty() {
            return Err(format!("child without apiVersion/kind/name: {c}"));
        }
        for server_field in ["uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"] {
            if !c["metadata"][server_field].is_null() {
                return Err(format!("{kind}/{n} carries metadata.{server_field}"));
            }
        }
        if !c["status"].is_null() {
            return Err(format!("{kind}/{n} carries status"));
        }
        if !seen.insert((kind.to_owned(), n.to_owned())) {
            return Err(format!("{kind}/{n} emitted twice"));
        }
    }
    if hook == "sync" {
        for key in ["StatefulSet.apps/v1", "Secret.v1", "ConfigMap.v1"] {
            let kind = key.split('.').next().unwrap_or_default();
            for observed in request["children"][key].as_object().into_iter().flat_map(|m| m.values()) {
                // An option file of an older revision goes once nothing can start with
                // it any more (see hooks::build::config): that drop is the cleanup.
                let retired = kind == "ConfigMap"
                    && name(observed).contains("-config-")
                    && observed["immutable"] == true
                    && !mounted(request, name(observed));
                if !retired && !seen.contains(&(kind.to_owned(), name(observed).to_owned())) {
                    return Err(format!("observed {kind}/{} is dropped, which would delete it", name(observed)));
                }
            }
        }
        let primary = response["status"]["primary"].as_str().ok_or("status.primary missing")?;
        let cluster = name(&request["parent"]);
        let primary_svc = children
            .iter()
            .find(|c| {
                c["kind"] == "Service"
                    && name(c).ends_with("-primary")
                    && name(c).starts_with(&cluster[..cluster.len().min(20)])
            })
            .ok_or("no -primary Service")?;
        if primary_svc["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] != primary {
            return Err(format!("-primary Service does not select status.primary {primary}"));
        }
        for slice in children.iter().filter(|c| c["kind"] == "EndpointSlice") {
            for e in slice["endpoints"].as_array().into_iter().flatten() {
                if e["targetRef"]["name"] == primary {
                    return Err(format!("EndpointSlice {} routes to the primary", name(slice)));
                }
            }
        }
    }
    Ok(())
}

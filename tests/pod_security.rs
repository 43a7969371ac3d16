//! Least privilege: every pod template the hook emits (StatefulSets and Jobs in
//! every golden response) and the hook's own Deployment meet the Kubernetes
//! "restricted" Pod Security Standard, checked control by control as the
//! standard lists them (baseline controls included); the hook's ServiceAccount
//! mounts no API token.

use std::{fs, path::PathBuf};

use serde_json::Value;

/// Volume types the restricted profile allows.
const RESTRICTED_VOLUMES: &[&str] =
    &["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"];

/// Sysctls the baseline profile allows.
const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

fn is_true(v: &Value) -> bool {
    v.as_bool() == Some(true)
}

/// Every violation of the restricted profile in one pod spec.
fn restricted_violations(spec: &Value) -> Vec<String> {
    let mut v = Vec::new();
    let psc = &spec["securityContext"];
    // Baseline: host namespaces, host ports, hostPath, sysctls, windows host process.
    for ns in ["hostNetwork", "hostPID", "hostIPC"] {
        if is_true(&spec[ns]) {
            v.push(format!("{ns} is true"));
        }
    }
    for s in psc["sysctls"].as_array().into_iter().flatten() {
        let name = s["name"].as_str().unwrap_or_default();
        if !SAFE_SYSCTLS.contains(&name) {
            v.push(format!("unsafe sysctl {name}"));
        }
    }
    if is_true(&psc["windowsOptions"]["hostProcess"]) {
        v.push("windowsOptions.hostProcess".into());
    }
    // Restricted: volume types (so no hostPath either).
    for vol in spec["volumes"].as_array().into_iter().flatten() {
        let name = vol["name"].as_str().unwrap_or_default();
        let kinds: Vec<_> = vol.as_object().into_iter().flat_map(|m| m.keys()).filter(|k| *k != "name").collect();
        for k in kinds {
            if !RESTRICTED_VOLUMES.contains(&k.as_str()) {
                v.push(format!("volume {name} is of type {k}"));
            }
        }
    }
    // Pod-level settings that containers may inherit.
    let pod_non_root = is_true(&psc["runAsNonRoot"]);
    let pod_seccomp = psc["seccompProfile"]["type"].as_str();
    if psc["runAsUser"].as_i64() == Some(0) {
        v.push("pod runAsUser 0".into());
    }
    if let Some(t) = pod_seccomp {
        if t != "RuntimeDefault" && t != "Localhost" {
            v.push(format!("pod seccomp {t}"));
        }
    }
    let selinux = &psc["seLinuxOptions"];
    if let Some(ty) = selinux["type"].as_str() {
        if !["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"].contains(&ty) {
            v.push(format!("pod seLinuxOptions.type {ty}"));
        }
    }
    if selinux["user"].is_string() || selinux["role"].is_string() {
        v.push("pod seLinuxOptions user/role".into());
    }
    if let Some(t) = psc["appArmorProfile"]["type"].as_str() {
        if t != "RuntimeDefault" && t != "Localhost" {
            v.push(format!("pod appArmor {t}"));
        }
    }
    let containers = ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|k| spec[*k].as_array().into_iter().flatten());
    let mut count = 0;
    for c in containers {
        count += 1;
        let name = c["name"].as_str().unwrap_or_default();
        let sc = &c["securityContext"];
        if is_true(&sc["privileged"]) {
            v.push(format!("{name}: privileged"));
        }
        if sc["allowPrivilegeEscalation"].as_bool() != Some(false) {
            v.push(format!("{name}: allowPrivilegeEscalation is not false"));
        }
        let non_root = match sc["runAsNonRoot"].as_bool() {
            Some(b) => b,
            None => pod_non_root,
        };
        if !non_root {
            v.push(format!("{name}: runAsNonRoot is not true"));
        }
        if sc["runAsUser"].as_i64() == Some(0) {
            v.push(format!("{name}: runAsUser 0"));
        }
        match sc["seccompProfile"]["type"].as_str().or(pod_seccomp) {
            Some("RuntimeDefault" | "Localhost") => {}
            other => v.push(format!("{name}: seccomp {other:?}")),
        }
        let caps = &sc["capabilities"];
        let drops_all = caps["drop"].as_array().into_iter().flatten().any(|d| d == "ALL");
        if !drops_all {
            v.push(format!("{name}: capabilities.drop lacks ALL"));
        }
        for add in caps["add"].as_array().into_iter().flatten() {
            if add != "NET_BIND_SERVICE" {
                v.push(format!("{name}: adds capability {add}"));
            }
        }
        for p in c["ports"].as_array().into_iter().flatten() {
            if p["hostPort"].as_i64().is_some_and(|h| h != 0) {
                v.push(format!("{name}: hostPort"));
            }
        }
        if sc["procMount"].as_str().is_some_and(|m| m != "Default") {
            v.push(format!("{name}: procMount"));
        }
        if is_true(&sc["windowsOptions"]["hostProcess"]) {
            v.push(format!("{name}: windowsOptions.hostProcess"));
        }
        if let Some(t) = sc["appArmorProfile"]["type"].as_str() {
            if t != "RuntimeDefault" && t != "Localhost" {
                v.push(format!("{name}: appArmor {t}"));
            }
        }
        if let Some(ty) = sc["seLinuxOptions"]["type"].as_str() {
            if !["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"].contains(&ty) {
                v.push(format!("{name}: seLinuxOptions.type {ty}"));
            }
        }
    }
    if count == 0 {
        v.push("no containers".into());
    }
    v
}

/// `(where, pod spec)` of every pod template in a list of objects.
fn pod_specs<'a>(origin: &str, objects: impl Iterator<Item = &'a Value>) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for o in objects {
        let kind = o["kind"].as_str().unwrap_or_default();
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let spec = match kind {
            "StatefulSet" | "Job" | "Deployment" | "DaemonSet" | "ReplicaSet" => &o["spec"]["template"]["spec"],
            "CronJob" => &o["spec"]["jobTemplate"]["spec"]["template"]["spec"],
            "Pod" => &o["spec"],
            _ => continue,
        };
        out.push((format!("{origin}: {kind}/{name}"), spec.clone()));
    }
    out
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_emitted_pod_template_meets_the_restricted_standard() {
    let mut specs = Vec::new();
    for hook in ["sync", "finalize"] {
        let Ok(entries) = fs::read_dir(root().join("test-fixtures").join(hook)) else { continue };
        for e in entries.flatten() {
            let Ok(text) = fs::read_to_string(e.path().join("response.json")) else { continue };
            let v: Value = serde_json::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", e.path().display()));
            let origin = e.path().strip_prefix(root()).unwrap_or(&e.path()).display().to_string();
            specs.extend(pod_specs(&origin, v["children"].as_array().into_iter().flatten()));
        }
    }
    assert!(specs.iter().any(|(w, _)| w.contains("StatefulSet/")), "no StatefulSet found in the golden files");
    let failures: Vec<String> = specs
        .iter()
        .flat_map(|(w, s)| restricted_violations(s).into_iter().map(move |v| format!("{w}: {v}")))
        .collect();
    println!("{} pod templates checked", specs.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `(where, pod spec)` of every pod template in the golden sync and finalize answers.
fn golden_pod_specs() -> Vec<(String, Value)> {
    let mut specs = Vec::new();
    for hook in ["sync", "finalize"] {
        let Ok(entries) = fs::read_dir(root().join("test-fixtures").join(hook)) else { continue };
        for e in entries.flatten() {
            let Ok(text) = fs::read_to_string(e.path().join("response.json")) else { continue };
            let v: Value = serde_json::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", e.path().display()));
            let origin = e.path().strip_prefix(root()).unwrap_or(&e.path()).display().to_string();
            specs.extend(pod_specs(&origin, v["children"].as_array().into_iter().flatten()));
        }
    }
    specs
}

/// Issue 18.7: no emitted pod mounts a ServiceAccount token (none of them talks to
/// the API), and the database passwords reach the containers that need them as
/// files, never as environment variables: mysqld's environment, and every process
/// the scripts start, hold none.
#[test]
fn emitted_pods_mount_no_api_token_and_keep_passwords_out_of_the_environment() {
    let specs = golden_pod_specs();
    let mut failures = Vec::new();
    let mut with_credentials = 0;
    for (w, spec) in &specs {
        if spec["automountServiceAccountToken"] != Value::Bool(false) && !is_grow_job(w, spec, &mut failures) {
            failures.push(format!("{w}: automountServiceAccountToken is not false"));
        }
        let volumes: Vec<&Value> = spec["volumes"].as_array().into_iter().flatten().collect();
        for c in ["initContainers", "containers"].iter().flat_map(|k| spec[*k].as_array().into_iter().flatten()) {
            let name = c["name"].as_str().unwrap_or_default();
            for e in c["env"].as_array().into_iter().flatten() {
                let key = e["valueFrom"]["secretKeyRef"]["key"].as_str().unwrap_or_default();
                if key == "root-password" || key == "replication-password" {
                    failures.push(format!("{w}: container {name} has {key} in its environment ({})", e["name"]));
                }
                if name == "mysqld" && !e["valueFrom"]["secretKeyRef"].is_null() {
                    failures.push(format!("{w}: mysqld has a Secret in its environment ({})", e["name"]));
                }
            }
            let file = c["env"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| e["name"] == "MYSQL_ROOT_PASSWORD_FILE")
                .and_then(|e| e["value"].as_str());
            if let Some(file) = file {
                with_credentials += 1;
                let mounted = c["volumeMounts"].as_array().into_iter().flatten().any(|m| {
                    file.starts_with(m["mountPath"].as_str().unwrap_or("\0"))
                        && volumes.iter().any(|v| v["name"] == m["name"] && !v["secret"].is_null())
                });
                if !mounted {
                    failures.push(format!("{w}: container {name} reads {file}, which no Secret volume provides"));
                }
            }
        }
    }
    println!("{} pod templates checked, {with_credentials} containers read the passwords from files", specs.len());
    assert!(with_credentials > 0, "no container reads the passwords from files");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The one exception (issue 17.5): the grow Job's pod mounts the token of the
/// ServiceAccount `<name>-grow` to raise the claims' requests. It must run only
/// `mysql-hook grow-claims`, hold no Secret volume or Secret in its environment, and
/// its answer's Role must allow nothing but `get` and `patch` of named claims.
fn is_grow_job(w: &str, spec: &Value, failures: &mut Vec<String>) -> bool {
    if !w.contains(": Job/") || spec["automountServiceAccountToken"] != Value::Bool(true) {
        return false;
    }
    let account = spec["serviceAccountName"].as_str().unwrap_or_default();
    let containers: Vec<&Value> =
        ["initContainers", "containers"].iter().flat_map(|k| spec[*k].as_array().into_iter().flatten()).collect();
    let runs_grow = containers.len() == 1
        && containers[0]["command"].as_array().is_some_and(|c| c.get(1) == Some(&Value::from("grow-claims")));
    if !account.ends_with("-grow") || !runs_grow {
        return false;
    }
    let secret_env = containers.iter().any(|c| {
        c["env"].as_array().into_iter().flatten().any(|e| !e["valueFrom"]["secretKeyRef"].is_null())
            || !c["envFrom"].is_null()
    });
    let secret_volume = spec["volumes"].as_array().into_iter().flatten().any(|v| !v["secret"].is_null());
    if secret_env || secret_volume {
        failures.push(format!("{w}: the grow Job's pod, which holds an API token, also gets a Secret"));
    }
    // Its Role, in the same answer.
    let fixture = w.split(": ").next().unwrap_or_default();
    let text = fs::read_to_string(root().join(fixture).join("response.json")).unwrap_or_default();
    let answer: Value = serde_json::from_str(&text).unwrap_or_default();
    let children: Vec<&Value> = answer["children"].as_array().into_iter().flatten().collect();
    for c in &children {
        match c["kind"].as_str() {
            Some("Role") => {
                let rules = c["rules"].as_array().cloned().unwrap_or_default();
                let narrow = rules.iter().all(|r| {
                    r["apiGroups"] == serde_json::json!([""])
                        && r["resources"] == serde_json::json!(["persistentvolumeclaims"])
                        && r["verbs"] == serde_json::json!(["get", "patch"])
                        && r["resourceNames"].as_array().is_some_and(|n| !n.is_empty())
                });
                if !narrow {
                    failures.push(format!(
                        "{fixture}: Role {} allows more than get/patch of named claims",
                        c["metadata"]["name"]
                    ));
                }
            }
            Some("ClusterRole" | "ClusterRoleBinding") => {
                failures.push(format!("{fixture}: a cluster-wide RBAC object"))
            }
            _ => {}
        }
    }
    true
}

fn manifests() -> Vec<Value> {
    let text = fs::read_to_string(root().join("metacontroller/deployment.yaml")).unwrap_or_else(|e| panic!("{e}"));
    text.split("\n---").filter_map(|doc| serde_yaml::from_str::<Value>(doc).ok()).filter(|v| v.is_object()).collect()
}

#[test]
fn the_hook_deployment_is_restricted_and_has_no_api_token() {
    let docs = manifests();
    let specs = pod_specs("metacontroller/deployment.yaml", docs.iter());
    assert_eq!(specs.len(), 1, "one Deployment expected");
    let violations = restricted_violations(&specs[0].1);
    assert!(violations.is_empty(), "{}", violations.join("\n"));
    let spec = &specs[0].1;
    assert_eq!(spec["automountServiceAccountToken"], Value::Bool(false));
    let sa_name = spec["serviceAccountName"].as_str().unwrap_or_default();
    let sa = docs
        .iter()
        .find(|d| d["kind"] == "ServiceAccount" && d["metadata"]["name"] == sa_name)
        .unwrap_or_else(|| panic!("ServiceAccount {sa_name} not in deployment.yaml"));
    assert_eq!(sa["automountServiceAccountToken"], Value::Bool(false));
    // And the namespace enforces the profile, so a regression is refused by the cluster.
    let ns = fs::read_to_string(root().join("metacontroller/namespace.yaml")).unwrap_or_default();
    assert!(ns.contains("pod-security.kubernetes.io/enforce: restricted"), "{ns}");
}

#[test]
fn the_checker_catches_violations() {
    let bad: Value = serde_json::json!({
        "hostNetwork": true,
        "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
        "containers": [{"name": "c", "securityContext": {"privileged": true, "capabilities": {"add": ["SYS_ADMIN"]}}}]
    });
    let v = restricted_violations(&bad);
    for want in [
        "hostNetwork",
        "hostPath",
        "privileged",
        "allowPrivilegeEscalation",
        "runAsNonRoot",
        "seccomp",
        "drop lacks ALL",
        "SYS_ADMIN",
    ] {
        assert!(v.iter().any(|x| x.contains(want)), "{want} not caught: {v:?}");
    }
}

/// Issue 30.6: what `spec.pod` passes through never weakens a pod or reaches the
/// control plane: no emitted template carries a security-profile annotation, a
/// `system-*` priority class, a toleration of the control-plane taints or one
/// without a key (`sync/pod-settings-refused` asks for all of them).
#[test]
fn user_settings_cannot_weaken_the_pod() {
    let mut templates = 0;
    let mut failures = Vec::new();
    for hook in ["sync", "finalize"] {
        let Ok(entries) = fs::read_dir(root().join("test-fixtures").join(hook)) else { continue };
        for e in entries.flatten() {
            let Ok(text) = fs::read_to_string(e.path().join("response.json")) else { continue };
            let v: Value = serde_json::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", e.path().display()));
            for o in v["children"].as_array().into_iter().flatten() {
                let template = match o["kind"].as_str() {
                    Some("StatefulSet" | "Job") => &o["spec"]["template"],
                    Some("CronJob") => &o["spec"]["jobTemplate"]["spec"]["template"],
                    _ => continue,
                };
                templates += 1;
                let at = format!("{}: {}/{}", e.path().display(), o["kind"], o["metadata"]["name"]);
                for key in template["metadata"]["annotations"].as_object().into_iter().flat_map(|a| a.keys()) {
                    if key.contains("apparmor.security") || key.contains("seccomp.security") {
                        failures.push(format!("{at}: annotation {key}"));
                    }
                }
                if template["spec"]["priorityClassName"].as_str().is_some_and(|c| c.starts_with("system-")) {
                    failures.push(format!("{at}: priorityClassName {}", template["spec"]["priorityClassName"]));
                }
                for t in template["spec"]["tolerations"].as_array().into_iter().flatten() {
                    let key = t["key"].as_str().unwrap_or_default();
                    if key.is_empty() || key.starts_with("node-role.kubernetes.io/") {
                        failures.push(format!("{at}: toleration {t}"));
                    }
                }
            }
        }
    }
    assert!(templates > 100, "only {templates} pod templates in the golden answers");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The installer's lists (`--allowed-pod-label-keys` and the rest, issue 30.6) are
/// parsed when the hook starts: a malformed one stops it with the setting named,
/// rather than serving with a list that means something else.
#[test]
fn a_malformed_installer_list_stops_the_hook() {
    for (flag, value) in [
        ("--allowed-pod-label-keys", "*.example.com/team"),
        ("--allowed-toleration-keys", "dedicated node"),
        ("--allowed-service-types", "ExternalName"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mysql-hook"))
            .args(["serve", "--listen", "127.0.0.1:0", flag, value])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag} {value:?} was accepted: {stderr}");
        assert!(stderr.contains(flag), "the refusal names {flag}: {stderr}");
    }
}

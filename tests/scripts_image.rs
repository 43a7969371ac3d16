//! How the scripts reach a pod: `mysql-hook install-scripts DIR`, run from the
//! hook's own image by the first init container of every server and Job pod.

use std::{fs, os::unix::fs::PermissionsExt as _, path::Path, process::Command};

/// The binary writes every embedded script, byte for byte, readable and executable
/// by all, and a second run (a restarted init container) succeeds over the first.
#[test]
fn install_scripts_writes_every_script_and_can_run_again() {
    let dir = std::env::temp_dir().join(format!("mysql-hook-install-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    for run in 1..=2 {
        let out = Command::new(env!("CARGO_BIN_EXE_mysql-hook"))
            .args(["install-scripts", dir.to_str().unwrap_or_default()])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.status.success(), "run {run}: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(!hooks::scripts::SCRIPTS.is_empty());
    for (name, text) in hooks::scripts::SCRIPTS {
        let path = dir.join(name);
        assert_eq!(fs::read_to_string(&path).unwrap_or_default(), *text, "{name}");
        let mode = fs::metadata(&path).map(|m| m.permissions().mode() & 0o777).unwrap_or_default();
        assert_eq!(mode, 0o555, "{name}: mode {mode:o}");
    }
    let mut names: Vec<String> =
        fs::read_dir(&dir).into_iter().flatten().flatten().map(|e| e.file_name().to_string_lossy().into()).collect();
    names.sort();
    let want: Vec<String> = hooks::scripts::SCRIPTS.iter().map(|(n, _)| (*n).to_owned()).collect();
    assert_eq!(names, want, "nothing but the scripts (no partial files) is left");
    let _ = fs::remove_dir_all(&dir);
}

/// A directory that cannot be created is an error and a non-zero exit.
#[test]
fn install_scripts_fails_loudly() {
    let out = Command::new(env!("CARGO_BIN_EXE_mysql-hook"))
        .args(["install-scripts", "/proc/no-such-dir/scripts"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("installing the scripts into /proc/no-such-dir/scripts"));
}

/// The deployed hook tells pods to install the scripts from its own image, and
/// that image is the one this build is published as (a version bump moves both).
#[test]
fn deployment_names_its_own_image_for_the_scripts() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let yaml = fs::read_to_string(root.join("metacontroller/deployment.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&yaml)
        .map(|d| serde::Deserialize::deserialize(d).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap_or_else(|| panic!("no Deployment"));
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let image = container["image"].as_str().unwrap_or_default();
    let env = container["env"].as_sequence().cloned().unwrap_or_default();
    let scripts_image = env
        .iter()
        .find(|e| e["name"] == "MYSQL_HOOK_SCRIPTS_IMAGE")
        .and_then(|e| e["value"].as_str())
        .unwrap_or_else(|| panic!("MYSQL_HOOK_SCRIPTS_IMAGE not set in deployment.yaml"));
    assert_eq!(scripts_image, image);
    assert_eq!(image, mysql_hook::DEFAULT_SCRIPTS_IMAGE);
}

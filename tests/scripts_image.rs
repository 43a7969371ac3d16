//! How the scripts reach a pod: `mysql-hook install-scripts DIR`, run from the
//! hook's own image by the first init container of every server and Job pod.

use std::{
    fs,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::Command,
};

/// The binary writes every embedded script, byte for byte, and the agent, readable
/// and executable by all, and a second run (a restarted init container) succeeds
/// over the first.
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
    // The agent, copied from beside the binary (cargo builds it there).
    let agent = Path::new(env!("CARGO_BIN_EXE_mysql-hook")).with_file_name(hooks::scripts::AGENT);
    assert_eq!(fs::read(dir.join(hooks::scripts::AGENT)).ok(), fs::read(&agent).ok(), "the agent, byte for byte");
    let mode =
        fs::metadata(dir.join(hooks::scripts::AGENT)).map(|m| m.permissions().mode() & 0o777).unwrap_or_default();
    assert_eq!(mode, 0o555, "the agent: mode {mode:o}");
    let mut names: Vec<String> =
        fs::read_dir(&dir).into_iter().flatten().flatten().map(|e| e.file_name().to_string_lossy().into()).collect();
    names.sort();
    let mut want: Vec<String> = hooks::scripts::SCRIPTS.iter().map(|(n, _)| (*n).to_owned()).collect();
    want.push(hooks::scripts::AGENT.to_owned());
    want.sort();
    assert_eq!(names, want, "nothing but the scripts and the agent (no partial files) is left");
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

/// kustomize as users run it (`kubectl apply -k` embeds the same library), built
/// from the Go module proxy by `tests/k8s/build-components.sh --kustomize` into the
/// cache outside the repository (about a minute the first time). Never skipped:
/// without Go this fails and says so.
fn kustomize() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("bash")
        .arg(root.join("tests/k8s/build-components.sh"))
        .arg("--kustomize")
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running tests/k8s/build-components.sh --kustomize: {e}"));
    assert!(
        out.status.success(),
        "tests/k8s/build-components.sh --kustomize failed ({}): kustomize is built from the Go module proxy \
         and needs Go >= 1.26 on PATH",
        out.status
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let bin_dir = stdout.lines().rfind(|l| !l.trim().is_empty()).unwrap_or_default().trim();
    PathBuf::from(bin_dir).join("kustomize")
}

fn run_kustomize(kustomize: &Path, dir: &Path, args: &[&str]) -> String {
    let out = Command::new(kustomize).args(args).current_dir(dir).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "kustomize {} in {}: {}",
        args.join(" "),
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The Deployment's container image and its `MYSQL_HOOK_SCRIPTS_IMAGE` in a
/// rendered install.
fn rendered_images(yaml: &str) -> (String, String) {
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(yaml)
        .map(|d| serde::Deserialize::deserialize(d).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap_or_else(|| panic!("no Deployment"));
    let containers = deployment["spec"]["template"]["spec"]["containers"].as_sequence().cloned().unwrap_or_default();
    let container = containers.iter().find(|c| c["name"] == "mysql-hook").unwrap_or_else(|| panic!("no container"));
    let env = container["env"].as_sequence().cloned().unwrap_or_default();
    let scripts = env
        .iter()
        .find(|e| e["name"] == "MYSQL_HOOK_SCRIPTS_IMAGE")
        .and_then(|e| e["value"].as_str())
        .unwrap_or_else(|| panic!("MYSQL_HOOK_SCRIPTS_IMAGE not set"));
    (container["image"].as_str().unwrap_or_default().to_owned(), scripts.to_owned())
}

/// `dir` as a path relative to `from` (kustomize refuses absolute resource paths).
fn relative(from: &Path, dir: &Path) -> String {
    let up = "../".repeat(from.components().count().saturating_sub(1));
    format!("{up}{}", dir.strip_prefix("/").unwrap_or(dir).display())
}

/// One setting names the image: a user's `images:` override, in their own overlay
/// over `metacontroller/` or `metacontroller-monitored/`, or set in `metacontroller/`
/// itself with `kustomize edit set image`, reaches both the Deployment's `image:`
/// and `MYSQL_HOOK_SCRIPTS_IMAGE` (kustomizeconfig.yaml), rendered by real kustomize.
#[test]
fn an_images_override_moves_the_hook_image_and_the_scripts_image_together() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let kustomize = kustomize();
    let shipped = rendered_images(&run_kustomize(&kustomize, root, &["build", "metacontroller"]));
    let default = mysql_hook::DEFAULT_SCRIPTS_IMAGE.to_owned();
    assert_eq!(shipped, (default.clone(), default), "metacontroller/ as shipped");

    let tmp = std::env::temp_dir().join(format!("mysql-hook-kustomize-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    let cases = [
        (
            "metacontroller",
            "newName: registry.example.com/team/mysql-hook\n    newTag: 1.2.3",
            "registry.example.com/team/mysql-hook:1.2.3",
        ),
        ("metacontroller", "newTag: 0.2.0-rc.1", "ghcr.io/mysql-hook/mysql-hook:0.2.0-rc.1"),
        (
            "metacontroller",
            "newName: mirror.local:5000/mysql-hook\n    digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "mirror.local:5000/mysql-hook@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ),
        (
            "metacontroller-monitored",
            "newName: registry.example.com/team/mysql-hook\n    newTag: 1.2.3",
            "registry.example.com/team/mysql-hook:1.2.3",
        ),
    ];
    for (i, (base, fields, want)) in cases.iter().enumerate() {
        let overlay = tmp.join(format!("overlay-{i}"));
        fs::create_dir_all(&overlay).unwrap_or_else(|e| panic!("{e}"));
        let kustomization = format!(
            "resources:\n  - {}\nimages:\n  - name: ghcr.io/mysql-hook/mysql-hook\n    {fields}\n",
            relative(&overlay, &root.join(base))
        );
        fs::write(overlay.join("kustomization.yaml"), &kustomization).unwrap_or_else(|e| panic!("{e}"));
        let got = rendered_images(&run_kustomize(&kustomize, &overlay, &["build", "."]));
        assert_eq!(got, ((*want).to_owned(), (*want).to_owned()), "an overlay over {base}/:\n{kustomization}");
    }

    // `kustomize edit set image` in (a copy of) metacontroller/ itself.
    let copy = tmp.join("metacontroller");
    fs::create_dir_all(&copy).unwrap_or_else(|e| panic!("{e}"));
    for entry in fs::read_dir(root.join("metacontroller")).into_iter().flatten().flatten() {
        if entry.path().is_file() {
            fs::copy(entry.path(), copy.join(entry.file_name())).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let want = "registry.example.com/mirror/mysql-hook:2.0.0";
    run_kustomize(&kustomize, &copy, &["edit", "set", "image", &format!("ghcr.io/mysql-hook/mysql-hook={want}")]);
    let got = rendered_images(&run_kustomize(&kustomize, &copy, &["build", "."]));
    assert_eq!(got, (want.to_owned(), want.to_owned()), "kustomize edit set image in metacontroller/");
    let _ = fs::remove_dir_all(&tmp);
}

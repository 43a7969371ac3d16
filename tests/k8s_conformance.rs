//! A real Kubernetes API server judges the CRDs, the examples, invalid specs,
//! every child and status in the golden fixtures (DESIGN.md §6, layer 4), and both
//! install overlays rendered with kustomize as a user applies them (Metacontroller's
//! CRDs from `METACONTROLLER_CRDS` or its source tree, see `conformance.py`).
//!
//! Runs `python3 tests/k8s/conformance.py`, which builds pinned etcd and
//! kube-apiserver from the Go module proxy on first use (cached outside the repo,
//! see `tests/k8s/build-components.sh`), starts them on loopback and tears them down
//! again. Its output streams straight to the terminal. This test is never skipped:
//! without Go or Python it fails and says what is missing.

use std::path::Path;
use std::process::Command;

fn require_tool(program: &str, arg: &str, why: &str) {
    match Command::new(program).arg(arg).output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("`{program} {arg}` failed ({}): {why}\n{}", out.status, String::from_utf8_lossy(&out.stderr)),
        Err(err) => panic!("`{program}` is not available ({err}): {why}"),
    }
}

#[test]
fn kubernetes_api_server_accepts_crds_examples_and_fixture_children() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("MYSQL_HOOK_K8S_BIN_DIR").is_none() {
        require_tool(
            "go",
            "version",
            "the Kubernetes conformance test builds etcd and kube-apiserver from the Go module \
             proxy and needs the Go toolchain (>= 1.26) on PATH \
             (or MYSQL_HOOK_K8S_BIN_DIR pointing at prebuilt etcd and kube-apiserver)",
        );
    }
    require_tool(
        "python3",
        "--version",
        "the Kubernetes conformance suite is tests/k8s/conformance.py (Python 3 with PyYAML)",
    );

    let status = Command::new("python3")
        .arg("tests/k8s/conformance.py")
        // The `grow` section runs the real binary's `grow-claims` against the API server.
        .env("MYSQL_HOOK_BIN", env!("CARGO_BIN_EXE_mysql-hook"))
        .current_dir(root)
        .status()
        .unwrap_or_else(|err| panic!("could not run python3 tests/k8s/conformance.py: {err}"));
    assert!(
        status.success(),
        "tests/k8s/conformance.py failed ({status}); its FAIL lines above name the fixture, \
         the object and the API server's message"
    );
}

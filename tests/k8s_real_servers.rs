//! The whole system on real servers (DESIGN.md §6, layer 7): the full loop whose
//! pods are real processes. A real kubelet with containerd runs the StatefulSet's
//! and the Jobs' pods (MariaDB from Debian packages, the hook's scripts, the agent,
//! the probes) on a bridge of the test's own, CoreDNS serves pod names, and a real
//! Metacontroller drives this crate's hook binary. Scenarios run under a continuous
//! write stream; the table printed at the end counts acknowledged rows lost, the
//! seconds without a writable primary and samples with two writable servers.
//!
//! Runs `python3 tests/k8s/real_servers.py` with `MYSQL_HOOK_BIN` set to the binary
//! cargo built for this test (it also becomes the hook's image, `--scripts-image`).
//! Needs root, containerd, runc, containernetworking-plugins and mmdebstrap, and a
//! Metacontroller (its source tree, or `METACONTROLLER_BIN`/`METACONTROLLER_CRDS`);
//! where something is missing the script prints "real servers skipped: <reason>" and
//! passes, unless `MYSQL_HOOK_REQUIRE_REAL_SERVERS=1` (what `.ci/run` sets).

use std::path::Path;
use std::process::Command;

#[test]
fn real_servers_keep_every_acknowledged_row() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("python3")
        .arg("tests/k8s/real_servers.py")
        .env("MYSQL_HOOK_BIN", env!("CARGO_BIN_EXE_mysql-hook"))
        .current_dir(root)
        .status()
        .unwrap_or_else(|err| panic!("could not run python3 tests/k8s/real_servers.py: {err}"));
    assert!(
        status.success(),
        "tests/k8s/real_servers.py failed ({status}); the table above names each scenario's result, \
         and the FAIL / XPASS lines what was expected and seen (MYSQL_HOOK_K8S_LOGS=<dir> keeps \
         every component's and pod's log)"
    );
}

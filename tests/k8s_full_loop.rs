//! The full loop (DESIGN.md §6, layer 5): a real Metacontroller calls this crate's
//! hook binary while kube-controller-manager, kube-scheduler and kwok play the rest
//! of a cluster, all on loopback. One MySQL is created, bootstrapped, watched for
//! churn while Running, put through failures, backed up by a `MySQLBackup`,
//! upgraded, failed over, and deleted with a final backup (`deletionPolicy: Backup`).
//!
//! Runs `python3 tests/k8s/full_loop.py` with `MYSQL_HOOK_BIN` set to the binary
//! cargo built for this test. Needs `METACONTROLLER_BIN` (a Metacontroller binary)
//! and `METACONTROLLER_CRDS` (its CRD YAML, a file or a directory); without them the
//! test says so and passes without having run anything. The control plane binaries
//! come from `tests/k8s/build-components.sh --full` (built on first use).

use std::path::Path;
use std::process::Command;

#[test]
fn metacontroller_drives_a_cluster_through_its_life() {
    let missing: Vec<&str> =
        ["METACONTROLLER_BIN", "METACONTROLLER_CRDS"].into_iter().filter(|v| std::env::var_os(v).is_none()).collect();
    if !missing.is_empty() {
        eprintln!(
            "full loop skipped: {} {} not set (METACONTROLLER_BIN: a Metacontroller binary; \
             METACONTROLLER_CRDS: its CRD YAML file or directory); nothing was run",
            missing.join(" and "),
            if missing.len() == 1 { "is" } else { "are" }
        );
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("python3")
        .arg("tests/k8s/full_loop.py")
        .env("MYSQL_HOOK_BIN", env!("CARGO_BIN_EXE_mysql-hook"))
        .current_dir(root)
        .status()
        .unwrap_or_else(|err| panic!("could not run python3 tests/k8s/full_loop.py: {err}"));
    assert!(
        status.success(),
        "tests/k8s/full_loop.py failed ({status}); the FAIL line above names the step, what was \
         expected and what was seen (MYSQL_HOOK_K8S_LOGS=<dir> keeps every component's log)"
    );
}

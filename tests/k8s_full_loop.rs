//! The full loop (DESIGN.md §6, layer 5): a real Metacontroller calls this crate's
//! hook binary while kube-controller-manager, kube-scheduler and kwok play the rest
//! of a cluster, all on loopback. One MySQL is created, bootstrapped, watched for
//! churn while Running, put through failures, backed up by a `MySQLBackup`,
//! upgraded, failed over, and deleted with a final backup (`deletionPolicy: Backup`).
//!
//! Runs `python3 tests/k8s/full_loop.py` with `MYSQL_HOOK_BIN` set to the binary
//! cargo built for this test. Metacontroller is built by `tests/k8s/build-components.sh
//! --full` from its source tree (`MYSQL_HOOK_METACONTROLLER_SRC`, else
//! `../shared/metacontroller`, else `/work/shared/metacontroller`), or taken from
//! `METACONTROLLER_BIN` and `METACONTROLLER_CRDS` when both are set. Only where
//! neither exists does the script print "full loop skipped: <reason>" and pass; with
//! `MYSQL_HOOK_REQUIRE_FULL_LOOP=1` (what `.ci/run` sets) a skip fails this test.

use std::path::Path;
use std::process::Command;

#[test]
fn metacontroller_drives_a_cluster_through_its_life() {
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

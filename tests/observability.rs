//! The shipped alerts and dashboard, judged by real Prometheus tools.
//!
//! - `rules`: `python3 tests/observability/rules.py`: `promtool check rules` and
//!   `promtool test rules` on the PrometheusRule, every alert tested, documented
//!   and given a runbook section, every dashboard query parsed. promtool is
//!   Debian's (the `prometheus` package) when on PATH, else (or with
//!   `PROMTOOL_BUILD=1`) built from the Go module proxy
//!   (`tests/observability/build-promtool.sh`, cached outside the repo).
//! - `manifests`: `python3 tests/observability/manifests.py`: a real API server
//!   (tests/k8s/harness.py) with the Prometheus Operator's own CRDs (fetched from
//!   the Go module proxy) accepts every object of the components in a strict
//!   dry-run; `kubectl kustomize metacontroller-monitored/` renders them when
//!   kubectl is on PATH.
//! - `live`: `python3 tests/observability/live.py`: Debian's Prometheus scrapes
//!   two hook processes and three real MariaDB servers through Debian's
//!   mysqld_exporter, evaluates the rules, and alerts fire and resolve as the
//!   servers fail and recover; every dashboard query returns data.
//!
//! Never skipped: without Go, Python or the Debian packages (installed with
//! apt-get when missing and running as root) they fail and say what is missing.

use std::{path::Path, process::Command};

fn run(script: &str, envs: &[(&str, &str)]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("python3")
        .arg(script)
        .current_dir(root)
        .envs(envs.iter().copied())
        .status()
        .unwrap_or_else(|err| panic!("could not run python3 {script}: {err}"));
    assert!(status.success(), "{script} failed ({status}); its FAIL lines above say what");
}

#[test]
fn rules() {
    run("tests/observability/rules.py", &[]);
}

#[test]
fn manifests() {
    run("tests/observability/manifests.py", &[]);
}

#[test]
fn live() {
    run("tests/observability/live.py", &[("MYSQL_HOOK_BIN", env!("CARGO_BIN_EXE_mysql-hook"))]);
}

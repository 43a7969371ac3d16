//! Runs the in-cluster scripts against real MariaDB servers:
//! `python3 -m pytest -q tests/scripts`, with the scripts installed by the built
//! `mysql-hook install-scripts`, exactly as a pod's first init container does.  The harness installs Debian's
//! mariadb-server when it is missing and we are root, and fails (never skips)
//! when it cannot run.

use std::path::Path;
use std::process::Command;

#[test]
fn mariadb_scripts_pass_against_real_servers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/scripts"])
        .current_dir(root)
        .env("MYSQL_HOOK_BIN", env!("CARGO_BIN_EXE_mysql-hook"))
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => panic!("cannot run python3 -m pytest: {e}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(out.status.success(), "pytest tests/scripts failed ({}):\n{stdout}\n{stderr}", out.status);
    // A run that collected or executed nothing is not a pass. Judged on pytest's
    // own summary line ("104 passed in 640.29s"), not on the scenarios' notes,
    // which may say "skipped" about a server.
    let summary = stdout.lines().rev().find(|l| l.contains(" passed") && l.contains(" in ")).unwrap_or_default();
    assert!(
        !summary.is_empty() && !summary.contains("skipped") && !summary.contains("deselected"),
        "pytest tests/scripts ran no test or skipped some (summary: {summary:?}):\n{stdout}"
    );
}

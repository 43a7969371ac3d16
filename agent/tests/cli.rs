//! The agent's command line: every command ends with one report line, on stdout
//! and in the termination log, and an exit status that says whether it failed.
//! (It also makes cargo build the binary that `mysql-hook install-scripts` copies
//! into pods, whenever the workspace's tests are built.)

use std::process::Command;

fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let log = std::env::temp_dir().join(format!("agent-cli-{}-{}", std::process::id(), args.join("-")));
    let out = Command::new(env!("CARGO_BIN_EXE_mysql-hook-agent"))
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .env("TERMINATION_LOG", &log)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let term = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), term)
}

#[test]
fn an_unknown_command_is_a_bad_env_report() {
    let (code, stdout, term) = run(&["frobnicate"], &[]);
    assert_eq!(code, 1);
    assert_eq!(stdout, term, "the same line on stdout and in the termination log");
    let r = protocol::Report::parse(&stdout);
    assert_eq!((r.result.as_str(), r.reason.as_deref()), ("error", Some("bad-env")));
}

#[test]
fn a_missing_environment_is_named_before_anything_connects() {
    let (code, stdout, _) = run(&["users"], &[("FLAVOR", "mysql"), ("PODS", "db-0=127.0.0.1:1")]);
    assert_eq!(code, 1);
    let r = protocol::Report::parse(&stdout);
    assert_eq!(r.reason.as_deref(), Some("bad-env"), "{stdout}");
    assert!(r.message.is_some_and(|m| m.contains("password")), "{stdout}");
}

#[test]
fn the_version_is_the_crates() {
    let (code, stdout, _) = run(&["--version"], &[]);
    assert_eq!(code, 0);
    assert_eq!(protocol::Report::parse(&stdout).message.as_deref(), Some(env!("CARGO_PKG_VERSION")));
}

//! `mysql-hook-agent COMMAND`: one command per operation on the servers, each
//! configured by its environment (see the library's modules), each ending with one
//! report line on stdout and in the termination log (`TERMINATION_LOG`, default
//! `/dev/termination-log`), exit status 0 for success and 1 for an error.

use std::process::ExitCode;

use agent::{
    Failure, Report,
    context::{Context, ProcessEnv},
};

fn main() -> ExitCode {
    let env = ProcessEnv;
    let command = std::env::args().nth(1).unwrap_or_default();
    if command == "probe" {
        return probe(&env, &std::env::args().nth(2).unwrap_or_default());
    }
    if command == "gtid" {
        return gtid(&env);
    }
    if command == "prestop" {
        // A preStop hook never fails and writes no termination log (mysqld's).
        println!("{}", agent::prestop::run(&env).line());
        return ExitCode::SUCCESS;
    }
    if command == "sidecar" {
        return match agent::sidecar::run(std::sync::Arc::new(ProcessEnv)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(f) => {
                println!("{}", f.report().line());
                ExitCode::FAILURE
            }
        };
    }
    let report = run(&command, &env).unwrap_or_else(|f| f.report());
    let line = report.line();
    println!("{line}");
    agent::context::write_termination_log(&env, &command, &line);
    // 75 (EX_TEMPFAIL): nothing done, try again later (as the scripts' `waiting`).
    match report.result.as_str() {
        "error" => ExitCode::FAILURE,
        "waiting" => ExitCode::from(75),
        _ => ExitCode::SUCCESS,
    }
}

/// `probe liveness|readiness|candidate`: a kubelet exec probe. One line on stdout
/// says why (the kubelet shows it in the pod's events); exit 0 passes. It writes
/// no termination log: that belongs to the container probed.
fn probe(env: &ProcessEnv, mode: &str) -> ExitCode {
    use agent::probe::{self, Paths, Verdict};
    let paths = Paths::from_env(env);
    let verdict = match (mode, Context::from_env(env)) {
        ("candidate", _) => probe::candidate_now(env, &paths),
        ("readiness", Ok(ctx)) => probe::readiness_now(&ctx, env, &paths),
        ("liveness", Ok(ctx)) => probe::liveness_now(&ctx, &paths),
        ("readiness" | "liveness", Err(f)) => Verdict::Fail(format!("probe: {}", f.message)),
        (other, _) => {
            Verdict::Fail(format!("usage: mysql-hook-agent probe liveness|readiness|candidate (got {other:?})"))
        }
    };
    println!("{}", verdict.text());
    if verdict.passed() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// `gtid OP ARGS...`: a GTID comparison for the scripts (see `agent::gtid_calc`).
/// No report line and no termination log: a text answer on stdout, exit 0 (holds),
/// 1 (does not), 2 (a text that does not parse, said on stderr).
fn gtid(env: &ProcessEnv) -> ExitCode {
    use agent::gtid_calc::Answer;
    let flavor = match agent::context::Flavor::from_env(env) {
        Ok(f) => f,
        Err(f) => {
            eprintln!("gtid: {}", f.message);
            return ExitCode::from(2);
        }
    };
    let args: Vec<String> = std::env::args().skip(3).collect();
    match agent::gtid_calc::calc(flavor, &std::env::args().nth(2).unwrap_or_default(), &args) {
        Ok(Answer::Holds(true)) => ExitCode::SUCCESS,
        Ok(Answer::Holds(false)) => ExitCode::FAILURE,
        Ok(Answer::Text(t)) => {
            print!("{t}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gtid: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(command: &str, env: &ProcessEnv) -> Result<Report, Failure> {
    match command {
        "users" => agent::users::run(&Context::from_env(env)?, env),
        "inspect" => agent::inspect::run(&Context::from_env(env)?, env),
        "exporter-user" => agent::exporter_user::run(&Context::from_env(env)?, env),
        "operator-user" => agent::operator_user::run(&Context::from_env(env)?, env),
        "tls-reload" => agent::tls_reload::run(&Context::from_env(env)?, env),
        "scale-down" => agent::scale_down::run(&Context::from_env(env)?, env),
        "fence" => agent::fence::run(&Context::from_env(env)?, env),
        "binlog-start" => agent::binlog::run(&Context::from_env(env)?, env),
        "dump-position" => agent::dump::run(env),
        "catalog" => agent::catalog::run(&Context::from_env(env)?, env),
        "events" => agent::events::run(&Context::from_env(env)?, env),
        "binlog-header" => agent::binlog::run_file(env),
        "received" => agent::relay::run_received(&Context::from_env(env)?, env),
        "drain" => agent::relay::run_drain(&Context::from_env(env)?, env),
        "examine" => agent::examine::run(&Context::from_env(env)?, env),
        "quarantine" => agent::quarantine::run(&Context::from_env(env)?, env),
        "--version" => Ok(Report { message: Some(env!("CARGO_PKG_VERSION").to_owned()), ..Report::new("version") }),
        other => Err(Failure::new(
            "bad-env",
            format!(
                "unknown command {other:?}; one of: users, inspect, prestop, operator-user, exporter-user, tls-reload, scale-down, fence, binlog-start, binlog-header, dump-position, catalog, events, received, drain, examine, quarantine"
            ),
        )),
    }
}

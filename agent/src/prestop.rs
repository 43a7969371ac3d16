//! `mysql-hook-agent prestop`: the mysqld container's preStop hook.
//!
//! A primary pod that is being deleted (eviction, node drain, rollout) should hand
//! over to a replica by a switchover — seconds of refused writes — not die and
//! cost a failover. The kubelet sends mysqld its SIGTERM only after this hook
//! returns, and the hook sees the pod's deletionTimestamp meanwhile and runs the
//! switchover. So:
//!
//! - this pod (`POD_NAME`) is not the primary — neither named in `PRIMARY_FILE`
//!   nor a writable non-replica itself — or `PODS` has one member: return at once;
//! - otherwise wait, up to `PRESTOP_WAIT` seconds (90: below the pod's 120 s
//!   termination grace period), until this server is read-only *and* another
//!   member is a writable non-replica (the switchover happened); then return.
//!
//! Whatever it waited for, a server still writable when it returns is fenced
//! first (the agent's `fence`, with `shutdown`): its client sessions killed, and a
//! server that a commit waiting for a semi-sync acknowledgement keeps writable
//! shut down by the agent. The kubelet's SIGTERM would shut it down anyway, and a
//! shutdown ends the wait and commits: that commit's client got OK for a row no
//! replica had (seen on MySQL 9.7.4 in the real-server loop: a cluster deleted
//! while a replica hung; the next bootstrap rightly rebuilt the server that alone
//! held it). A killed session's connection only drops.
//!
//! It never fails: a failed preStop hook only delays the kill, so the command
//! always exits 0 and says on stderr why it stopped waiting. It writes no
//! termination log (that belongs to mysqld). One report line on stdout:
//! `not-primary`, `single-member`, `handed-over` (with `newPrimary`), `timeout`,
//! `self-unreachable`, or `error` (`bad-env`), each with `pod`, `primary` (the
//! recorded one), `waited` and `message`.
//!
//! Env: `FLAVOR`, `POD_NAME`, `PODS` (or `PODS_FILE`), the passwords, `PRIMARY_FILE`,
//! `PRESTOP_WAIT` [90] and `PRESTOP_INTERVAL` [1] seconds between checks.

use std::time::{Duration, Instant};

use crate::{
    Report,
    context::{Context, Env},
    server::Server,
};

/// The hook (see the module docs): never an error, always a report.
#[must_use]
pub fn run(env: &dyn Env) -> Report {
    let started = Instant::now();
    let pod = env.var("POD_NAME").unwrap_or_default();
    let recorded = crate::probe::first_line(env, env.var("PRIMARY_FILE").as_deref().map(std::path::Path::new));
    let report = match Context::from_env(env) {
        Ok(ctx) if ctx.addr(&pod).is_some() => {
            let waited = wait(&ctx, env, &pod, recorded.as_deref(), started);
            fence_if_writable(&ctx, &pod, waited)
        }
        Ok(_) => Report::error("bad-env", format!("POD_NAME '{pod}' is not in PODS")),
        Err(f) => f.report(),
    };
    if let Some(m) = &report.message {
        eprintln!("prestop: {m}");
    }
    Report {
        pod: Some(pod),
        primary: Some(recorded.unwrap_or_default()),
        waited: Some(i64::try_from(started.elapsed().as_secs()).unwrap_or(i64::MAX)),
        ..report
    }
}

/// Fences this server when it is still writable (see the module docs); the
/// report says how, in `fenced` and its message.
fn fence_if_writable(ctx: &Context, pod: &str, report: Report) -> Report {
    let Ok(mut me) = Server::connect(ctx, pod) else {
        return report;
    };
    if !me.writable().unwrap_or(false) {
        return report;
    }
    let (fenced, how) = match crate::fence::fence(&mut me, 4, 2, true) {
        Ok(f) => (true, f.describe(pod)),
        Err(f) => (false, f.message),
    };
    eprintln!("prestop: still writable, fenced before the stop: {how}");
    Report {
        fenced: Some(fenced),
        message: Some(format!("{}; still writable, fenced before the stop: {how}", report.message.unwrap_or_default())),
        ..report
    }
}

fn seconds(env: &dyn Env, name: &str, default: u64) -> Duration {
    Duration::from_secs(env.var(name).and_then(|v| v.trim().parse().ok()).unwrap_or(default))
}

fn stop(result: &str, message: String) -> Report {
    Report { message: Some(message), ..Report::new(result) }
}

/// A writable server that replicates from nobody: the primary, whatever the
/// (possibly stale) recorded name says. Unknown (an error) counts as not.
fn is_open(s: &mut Server) -> bool {
    s.writable().unwrap_or(false) && s.is_replica().is_ok_and(|r| !r)
}

fn wait(ctx: &Context, env: &dyn Env, pod: &str, recorded: Option<&str>, started: Instant) -> Report {
    let limit = seconds(env, "PRESTOP_WAIT", 90);
    let interval = seconds(env, "PRESTOP_INTERVAL", 1);
    if ctx.pods.len() < 2 {
        return stop("single-member", "one-member cluster: nobody to hand over to".to_owned());
    }
    let Ok(mut me) = Server::connect(ctx, pod) else {
        return stop("self-unreachable", format!("{pod} does not answer; nothing to hand over"));
    };
    if recorded != Some(pod) && !is_open(&mut me) {
        return stop(
            "not-primary",
            format!("{pod} is not the primary (recorded: {}); nothing to wait for", recorded.unwrap_or("none")),
        );
    }
    eprintln!("prestop: {pod} is the primary; waiting up to {}s for the switchover", limit.as_secs());
    loop {
        // A fresh session each round: the server may restart or drop this one.
        let Ok(mut me) = Server::connect(ctx, pod) else {
            return stop("self-unreachable", format!("{pod} stopped answering after {}s", started.elapsed().as_secs()));
        };
        if me.writable().is_ok_and(|w| !w) {
            for (other, _) in ctx.pods.iter().filter(|(name, _)| name != pod) {
                if Server::connect(ctx, other).is_ok_and(|mut s| is_open(&mut s)) {
                    return Report {
                        new_primary: Some(other.clone()),
                        ..stop(
                            "handed-over",
                            format!(
                                "{pod} is read-only and {other} is the writable primary after {}s",
                                started.elapsed().as_secs()
                            ),
                        )
                    };
                }
            }
        }
        if started.elapsed() >= limit {
            return stop(
                "timeout",
                format!("no switchover within {}s; stopping anyway (the hook fails over)", limit.as_secs()),
            );
        }
        std::thread::sleep(interval);
    }
}

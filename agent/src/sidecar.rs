//! `mysql-hook-agent sidecar`: the `agent` container of every server pod.
//!
//! Four jobs, on their own threads, so a slow one never holds the others up:
//!
//! - **Fence an old primary** (issue 31.1). Every `FENCE_INTERVAL` seconds
//!   (default 1) it compares this server with the published primary and epoch
//!   ([`crate::fence`]); a writable server the cluster has moved on from is fenced
//!   at once (read-only, client sessions killed), whoever could or could not reach
//!   it during the failover. The published record reaches the pod through the
//!   mounted ConfigMap, up to a minute late; so a writable server also asks the
//!   other members each round whether one serves as the primary of a newer epoch
//!   (issue 32.5), which ends a healed network cut within a second.
//! - **Follow the cluster.** Every `AGENT_INTERVAL` seconds (default 10) it runs
//!   the one-shot steps that keep this server in its role: `join.sh` (become or
//!   stay a replica of the recorded primary, or of a newer one the servers
//!   know before the mounted record does: [`crate::probe::Newer`], issue 32.5),
//!   and on the primary the agent's own
//!   [`crate::operator_user`] (with `OPERATOR_PASSWORD_FILE`) and [`crate::exporter_user`] (with
//!   `EXPORTER_PASSWORD_FILE`); on every server [`crate::events`] (events
//!   enabled on the primary, disabled on a read-only MariaDB server); with `TLS_MODE_FILE` (`spec.tls`) it runs
//!   [`crate::tls_reload`] at the start and whenever the mounted certificate, key or CA
//!   change. `join.sh` is still a script (issue 32 ports them one by one); the
//!   other steps and this loop, which was `agent.sh`, are not. Each step's result
//!   line is printed when it differs from the last one.
//! - **Release stranded clients** (issue 35.1). With `PRIMARY_SERVICE`, every
//!   `FENCE_INTERVAL` seconds while this server is read-only and may have been
//!   the primary a moment ago (seen writable, or its record still names it), it
//!   asks the `-primary` Service which server it leads to; once that
//!   is another one, the client sessions opened here through it are killed, so
//!   they reconnect to the new primary ([`crate::stranded`]).
//! - **Answer the probes** on `AGENT_LISTEN` (default `0.0.0.0:9106`), from one
//!   session with the local server kept open between probes (reopened when it
//!   breaks): `GET /readyz` is mysqld's readiness ([`crate::probe::readiness`]),
//!   `GET /candidate` this container's own readiness (could the server be
//!   promoted), `GET /livez` whether the agent runs. 200 passes, 503 fails; the
//!   body says why. Liveness of mysqld stays an exec probe of its own
//!   (`mysql-hook-agent probe liveness`), so an agent that stopped answering can
//!   never get the database restarted.
//!
//! SIGTERM ends it at once (it is PID 1 of its container).

use std::{
    io::{BufRead as _, BufReader, Write as _},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::Command,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use crate::{
    Failure, Result,
    context::{Context, Env},
    probe::{self, Paths, Verdict},
    server::Server,
};

/// The port the probes are answered on.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9106";

/// The readiness answer, from a session kept open between probes.
pub struct Prober {
    pub(crate) ctx: Context,
    paths: Paths,
    session: Mutex<Option<Server>>,
    /// The recorded primary once answered as a writable primary
    /// ([`probe::primary_serves`]): the cluster is bootstrapped, and stays so for
    /// the life of this pod, so it is not asked again.
    bootstrapped: AtomicBool,
    /// The surveys of a writable server (the fencing thread's, every second,
    /// and readiness's own), in seconds since `started`.
    surveys: Mutex<probe::Surveys>,
    started: Instant,
    /// Whether the last readiness answer passed: a change is printed (the
    /// container's log then says when and why the server turned (Not)Ready).
    last_ready: Mutex<Option<bool>>,
    /// The newest primary the servers named to [`Prober::newer_primary`], kept
    /// while the mounted record is older (see [`remember`]).
    known: Mutex<Option<probe::Newer>>,
}

impl Prober {
    #[must_use]
    pub fn new(ctx: Context, paths: Paths) -> Self {
        Self {
            ctx,
            paths,
            session: Mutex::new(None),
            bootstrapped: AtomicBool::new(false),
            surveys: Mutex::new(probe::Surveys::default()),
            started: Instant::now(),
            last_ready: Mutex::new(None),
            known: Mutex::new(None),
        }
    }

    /// Whether the last survey reached none of the other members.
    fn isolated(&self) -> bool {
        self.surveys.lock().unwrap_or_else(std::sync::PoisonError::into_inner).isolated
    }

    fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// The other members asked afresh whether one serves as the primary of an
    /// epoch newer than `than`; remembered for readiness.
    fn survey_now(&self, pod: &str, than: i64) -> probe::Survey {
        let found = probe::survey(&self.ctx, pod, than);
        self.surveys.lock().unwrap_or_else(std::sync::PoisonError::into_inner).record(self.now(), than, found.clone());
        found
    }

    /// What readiness judges a writable server by ([`probe::Surveys`]): the
    /// newer primary, from the last survey when it will do, else one asked
    /// now; and whether it is holding after reaching nobody.
    fn survey_for_readiness(&self, pod: &str, than: i64) -> (Option<probe::Newer>, bool) {
        let kept =
            self.surveys.lock().unwrap_or_else(std::sync::PoisonError::into_inner).usable(self.now(), than).cloned();
        let found = kept.unwrap_or_else(|| {
            // A survey that reached nobody is asked again, twice, a moment
            // apart: the first packets after a cut heals can fail at once (the
            // neighbour entries went stale), and a probe must not call an old
            // primary Ready on them (real-server scenario 15: Ready 0.6 s after a
            // heal). One that still reaches nobody answers Ready, as before:
            // a primary whose replicas are all down is not made NotReady.
            let deadline = Instant::now() + Duration::from_secs(2);
            let mut found = self.survey_now(pod, than);
            for _ in 0..2 {
                if found.answered > 0 || found.asked == 0 || Instant::now() >= deadline {
                    break;
                }
                std::thread::sleep(Duration::from_millis(300));
                found = self.survey_now(pod, than);
            }
            found
        });
        let holding = self.surveys.lock().unwrap_or_else(std::sync::PoisonError::into_inner).holding(self.now());
        (found.newer, holding)
    }

    /// The primary newer than the mounted record, if the servers know one
    /// ([`probe::check_newer_primary`], asked afresh each time, so never an
    /// answer older than the servers' state): `join.sh` follows it instead of
    /// the record.
    pub fn newer_primary(&self, env: &dyn Env) -> Option<probe::Newer> {
        let mut facts = {
            let mut kept = self.session.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            self.gather_kept(&mut kept, env)?
        };
        let recorded = facts.recorded_epoch;
        let found = probe::check_newer_primary(&self.ctx, &mut facts);
        remember(&mut self.known.lock().unwrap_or_else(std::sync::PoisonError::into_inner), found, recorded)
    }

    /// The facts through the kept session: opened when missing, dropped when a
    /// query on it fails (a restarted server).
    fn gather_kept(&self, kept: &mut Option<Server>, env: &dyn Env) -> Option<probe::Facts> {
        if kept.is_none() {
            *kept = Server::connect_socket(&self.ctx, &self.paths.pod, &self.paths.socket).ok();
        }
        match probe::gather(kept.as_mut()?, env, &self.paths) {
            Ok(f) => Some(f),
            Err(_) => {
                *kept = None;
                None
            }
        }
    }

    /// Readiness of `facts`, completed with what is known of the recorded primary
    /// (connections to other members: called without the session's lock, so the
    /// fencing thread never waits on them).
    fn judge(&self, mut facts: probe::Facts) -> Verdict {
        probe::check_newer_primary(&self.ctx, &mut facts);
        if let Some(than) = facts.role().asks_for_newer() {
            (facts.superseded_by, facts.just_reconnected) = self.survey_for_readiness(&facts.pod, than);
        }
        if self.bootstrapped.load(Ordering::Relaxed) {
            facts.primary_serves = true;
        } else {
            probe::check_primary(&self.ctx, &mut facts);
            if facts.primary_serves {
                self.bootstrapped.store(true, Ordering::Relaxed);
            }
        }
        probe::readiness(&facts)
    }

    /// Readiness now: through the kept session, opened (again) when it is missing
    /// or a query on it failed.
    pub fn readiness(&self, env: &dyn Env) -> Verdict {
        let mut guard = self.session.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // A kept session that fails (a restarted server) is opened once more.
        let kept = guard.is_some();
        for fresh in [!kept, true] {
            if fresh {
                match Server::connect_socket(&self.ctx, &self.paths.pod, &self.paths.socket) {
                    Ok(s) => *guard = Some(s),
                    Err(e) => {
                        *guard = None;
                        return Verdict::Fail(format!("not ready: {e}"));
                    }
                }
            }
            let Some(s) = guard.as_mut() else { break };
            match probe::gather(s, env, &self.paths) {
                Ok(facts) => {
                    drop(guard);
                    return self.judge(facts);
                }
                Err(f) if fresh => {
                    *guard = None;
                    return Verdict::Fail(format!("not ready: {}", f.message));
                }
                Err(_) => {}
            }
        }
        Verdict::Fail("not ready: no session with the server".to_owned())
    }

    pub fn candidate(&self, env: &dyn Env) -> Verdict {
        probe::candidate_now(env, &self.paths)
    }
}

impl Prober {
    /// The fencing rule, once, through the kept session (see [`crate::fence`]):
    /// `Some(line)` when it fenced (or failed to fence) the server. A writable
    /// server the record does not condemn asks the other members whether one
    /// serves as the primary of a newer epoch ([`crate::fence::Role::asks_for_newer`]):
    /// without the session's lock, so the probes never wait on the network.
    pub fn fence_if_stale(&self, env: &dyn Env) -> Option<String> {
        let role = {
            let mut guard = self.session.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            self.gather_kept(&mut guard, env)?.role()
        };
        let (why, primary) = match crate::fence::stale_primary(&role) {
            Some(why) => (why, role.recorded_primary.clone()),
            None => {
                let newer = self.survey_now(&role.pod, role.asks_for_newer()?).newer?;
                (crate::fence::superseded(&role, &newer.primary, newer.epoch), Some(newer.primary))
            }
        };
        let mut guard = self.session.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // A commit that can never be acknowledged holds MySQL's read-only off:
        // the server is shut down, and restarts read-only (crate::fence).
        let mut report = match crate::fence::fence(guard.as_mut()?, 4, 2, true) {
            Ok(fenced) => protocol::Report {
                message: Some(format!("{why}: fenced: {}", fenced.describe(&role.pod))),
                ..protocol::Report::new("fenced-self")
            },
            Err(f) => f.report(),
        };
        report.primary = primary;
        Some(report.line())
    }
}

impl Prober {
    /// One round of [`crate::stranded`]: `Some(line)` when client sessions a
    /// moved `-primary` Service left here were killed (or that failed). The
    /// Service is asked without the session's lock.
    pub fn release_stranded(&self, env: &dyn Env, watch: &mut crate::stranded::Watch) -> Option<String> {
        let service = self.ctx.primary_service.as_ref()?;
        let (pod, own) = {
            let mut guard = self.session.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let role = self.gather_kept(&mut guard, env)?.role();
            if !watch.suspect(&role) {
                return None;
            }
            (role.pod, crate::stranded::own_id(guard.as_mut()?).ok()?)
        };
        let routed = crate::stranded::ask_service(&self.ctx, service);
        let mut guard = self.session.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match watch.round(guard.as_mut()?, own, routed.as_ref()) {
            Ok(released) => released.map(|r| r.report(&pod).line()),
            Err(f) => Some(f.report().line()),
        }
    }
}

/// The primary `join.sh` follows instead of the mounted record: the newest the
/// servers named (`found` now, or `known` from an earlier round), while its
/// epoch is newer than the record's (`recorded`). Kept across rounds so that a
/// survey that misses the newer primary once (it restarts, a packet is lost)
/// never sends `join.sh` back to the record's older primary, which a cut
/// network may have left writable (real-server scenario 15); forgotten in
/// effect once the record catches up.
fn remember(
    known: &mut Option<probe::Newer>,
    found: Option<probe::Newer>,
    recorded: Option<i64>,
) -> Option<probe::Newer> {
    if let Some(found) = found
        && known.as_ref().is_none_or(|k| found.epoch >= k.epoch)
    {
        *known = Some(found);
    }
    known.clone().filter(|k| recorded.is_some_and(|r| k.epoch > r))
}

/// One HTTP/1.1 request on `stream`, answered and closed. Only `GET` of the three
/// paths; the request line is all that is read.
fn answer(stream: &mut TcpStream, prober: &Prober, env: &dyn Env) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut line = String::new();
    let mut reader = BufReader::new(&*stream);
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or_default().to_owned();
    let verdict = match path.as_str() {
        "/readyz" => {
            let v = prober.readiness(env);
            let mut last = prober.last_ready.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if *last != Some(v.passed()) {
                *last = Some(v.passed());
                let result = if v.passed() { "ready" } else { "not-ready" };
                println!(
                    "{}",
                    protocol::Report { message: Some(v.text().to_owned()), ..protocol::Report::new(result) }.line()
                );
            }
            v
        }
        "/candidate" => prober.candidate(env),
        "/livez" => Verdict::Pass("the agent runs".to_owned()),
        _ => {
            let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            return;
        }
    };
    let (status, body) = match &verdict {
        Verdict::Pass(t) => ("200 OK", t),
        Verdict::Fail(t) => ("503 Service Unavailable", t),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}\n",
        body.len() + 1
    );
}

/// The probe server: one thread, one request at a time (the kubelet sends a few
/// a second at most).
///
/// # Errors
/// `bad-env` when the address cannot be listened on.
pub fn serve_probes(listen: &str, prober: Arc<Prober>, env: Arc<dyn Env + Send + Sync>) -> Result<()> {
    let listener =
        TcpListener::bind(listen).map_err(|e| Failure::new("bad-env", format!("AGENT_LISTEN {listen}: {e}")))?;
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            answer(&mut s, &prober, env.as_ref());
        }
    });
    Ok(())
}

/// The last stdout line of a step (a script's result line), run with `env`
/// added to the agent's own environment.
fn step(scripts: &Path, script: &str, env: &[(&str, &str)]) -> String {
    match Command::new("bash").arg(scripts.join(script)).envs(env.iter().copied()).output() {
        Ok(out) => String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().to_owned(),
        Err(e) => format!(r#"{{"result":"error","reason":"script-failed","message":"{script}: {e}"}}"#),
    }
}

/// The result line of one of the agent's own steps, also written to the
/// container's termination log (as the scripts do: it holds the last step's line).
fn finished(env: &dyn Env, result: Result<protocol::Report>) -> String {
    let line = result.unwrap_or_else(|f| f.report()).line();
    crate::context::write_termination_log(env, "agent", &line);
    line
}

/// The loop's memory: the last line of each step, and the TLS files last loaded.
#[derive(Default)]
struct Loop {
    last: std::collections::BTreeMap<&'static str, String>,
    tls_loaded: Option<Vec<u8>>,
}

impl Loop {
    fn report(&mut self, name: &'static str, line: String) -> String {
        if self.last.get(name) != Some(&line) {
            println!("{line}");
            self.last.insert(name, line.clone());
        }
        line
    }
}

/// The TLS files' bytes, to notice a renewal.
fn tls_files(ca: &Path) -> Option<Vec<u8>> {
    let dir = ca.parent()?;
    let mut all = Vec::new();
    for f in ["tls.crt", "tls.key", "ca.crt"] {
        all.extend(std::fs::read(dir.join(f)).ok()?);
    }
    Some(all)
}

/// The sidecar (see the module docs). Runs until SIGTERM.
///
/// # Errors
/// A setting it cannot work with.
pub fn run(env: Arc<dyn Env + Send + Sync>) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| Failure::new("bad-env", format!("cannot handle signals: {e}")))?;
    }
    let ctx = Context::from_env(env.as_ref())?;
    let paths = Paths::from_env(env.as_ref());
    let interval = env.var("AGENT_INTERVAL").and_then(|v| v.parse().ok()).unwrap_or(10_u64);
    let iterations: u64 = env.var("AGENT_ITERATIONS").and_then(|v| v.parse().ok()).unwrap_or(0);
    // The scripts are installed beside the agent (install-scripts); SCRIPTS_DIR
    // names them elsewhere (the tests).
    let scripts = env
        .var("SCRIPTS_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok().and_then(|p| p.parent().map(Path::to_path_buf)))
        .unwrap_or_else(|| PathBuf::from("/opt/mysql-hook"));
    let listen = env.var("AGENT_LISTEN").unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    let prober = Arc::new(Prober::new(ctx, paths));
    serve_probes(&listen, Arc::clone(&prober), Arc::clone(&env))?;
    let fence_every = env.var("FENCE_INTERVAL").and_then(|v| v.parse().ok()).unwrap_or(1_u64).max(1);
    {
        let (prober, env, stop) = (Arc::clone(&prober), Arc::clone(&env), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(line) = prober.fence_if_stale(env.as_ref()) {
                    println!("{line}");
                }
                // Cut off (the last survey reached nobody): asked again soon, so a
                // healed cut is noticed within about a second (a survey left waiting on
                // the resolver keeps a thread until the resolver gives up).
                let pause =
                    if prober.isolated() { Duration::from_millis(500) } else { Duration::from_secs(fence_every) };
                std::thread::sleep(pause);
            }
        });
    }
    if prober.ctx.primary_service.is_some() {
        // Its own thread: a Service nothing routes makes each question wait for
        // its timeout, which must not slow the fencing down.
        let (prober, env, stop) = (Arc::clone(&prober), Arc::clone(&env), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut watch = crate::stranded::Watch::default();
            while !stop.load(Ordering::Relaxed) {
                if let Some(line) = prober.release_stranded(env.as_ref(), &mut watch) {
                    println!("{line}");
                }
                std::thread::sleep(Duration::from_secs(fence_every));
            }
        });
    }
    let tls_ca = env
        .var("TLS_MODE_FILE")
        .map(|_| PathBuf::from(env.var("TLS_CA").unwrap_or_else(|| "/etc/mysql/tls/ca.crt".to_owned())));
    let mut state = Loop::default();
    let mut round = 0_u64;
    while !stop.load(Ordering::Relaxed) {
        // Fenced before join.sh looks at it: a fenced old primary is rejoined.
        if let Some(line) = prober.fence_if_stale(env.as_ref()) {
            state.report("fence", line);
        }
        // Events follow the role (issue 31.8): enabled on the primary, disabled on
        // a read-only MariaDB server. Before join.sh, whose line stays the round's
        // last (the termination log's).
        state.report("events", finished(env.as_ref(), crate::events::run(&prober.ctx, env.as_ref())));
        // A primary newer than the mounted record (the kubelet refreshes it up
        // to a minute late) is followed at once: join.sh takes PRIMARY when
        // PRIMARY_FILE is empty, and checks that it serves as every primary.
        let newer = prober.newer_primary(env.as_ref());
        let follow: Vec<(&str, &str)> =
            newer.as_ref().map(|n| vec![("PRIMARY_FILE", ""), ("PRIMARY", n.primary.as_str())]).unwrap_or_default();
        let joined = state.report("join", step(&scripts, "join.sh", &follow));
        let primary = protocol::Report::parse(&joined).result == "is-primary";
        if primary && (env.var("OPERATOR_PASSWORD_FILE").is_some() || env.var("OPERATOR_PASSWORD").is_some()) {
            // Read afresh each round, as the script was: a rotated operator
            // password (the mounted Secret) is set on the next round.
            let result = Context::from_env(env.as_ref()).and_then(|ctx| crate::operator_user::run(&ctx, env.as_ref()));
            state.report("operator", finished(env.as_ref(), result));
        }
        if primary && (env.var("EXPORTER_PASSWORD_FILE").is_some() || env.var("EXPORTER_PASSWORD").is_some()) {
            state.report("exporter", finished(env.as_ref(), crate::exporter_user::run(&prober.ctx, env.as_ref())));
        }
        if let Some(ca) = &tls_ca
            && let Some(files) = tls_files(ca)
            && state.tls_loaded.as_ref() != Some(&files)
        {
            let line = state.report("tls", finished(env.as_ref(), crate::tls_reload::run(&prober.ctx, env.as_ref())));
            if protocol::Report::parse(&line).result == "reloaded" {
                state.tls_loaded = Some(files);
            }
        }
        round += 1;
        if iterations > 0 && round >= iterations {
            break;
        }
        for _ in 0..interval * 10 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn newer(primary: &str, epoch: i64) -> probe::Newer {
        probe::Newer { primary: primary.into(), epoch }
    }

    #[test]
    fn the_newest_primary_learned_is_followed_until_the_record_catches_up() {
        let mut known = None;
        assert_eq!(remember(&mut known, None, Some(3)), None, "nothing learned: the record");
        assert_eq!(remember(&mut known, Some(newer("db-1", 4)), Some(3)), Some(newer("db-1", 4)));
        // the next survey misses db-1: still db-1, never the record's db-0 of epoch 3
        assert_eq!(remember(&mut known, None, Some(3)), Some(newer("db-1", 4)));
        assert_eq!(remember(&mut known, Some(newer("db-2", 2)), Some(1)), Some(newer("db-1", 4)), "older: ignored");
        assert_eq!(remember(&mut known, Some(newer("db-2", 5)), Some(3)), Some(newer("db-2", 5)));
        assert_eq!(remember(&mut known, None, Some(5)), None, "the record caught up");
        assert_eq!(remember(&mut known, None, None), None, "no epoch recorded: no judgement");
    }
}

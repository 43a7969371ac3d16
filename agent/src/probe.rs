//! The server pods' probes: may this server take client traffic (readiness), is
//! mysqld alive (liveness), could it be promoted (candidate).
//!
//! What the probes decide is a pure function of a few facts ([`Facts`]), unit
//! tested here; [`gather`] reads them from the server (one session over its own
//! socket, as root: root has no network account) and from the files the pod
//! mounts. The rules, in this order (the same as the shell probe's, so a rolling
//! cluster judges every pod alike):
//!
//! The record (`PRIMARY_FILE`, `EPOCH_FILE`) comes from the config ConfigMap,
//! which the kubelet refreshes up to a minute late. When it names this server and
//! the server is read-only, the other members are asked first ([`Newer`]): one
//! that serves as the primary of a newer epoch replaces the record.
//!
//! 1. The recorded primary (`PRIMARY_FILE` names this pod) of a bootstrapped
//!    cluster is Ready only while writable. Every server starts read-only, so a
//!    recorded primary that restarted comes back read-only: NotReady lets the
//!    hook's failover (after its grace period) promote the most advanced server,
//!    possibly this one again, instead of an "up" primary nobody can write to.
//! 2. An old primary the cluster has moved on from (writable, not the published
//!    primary, of an epoch not newer than the published one: [`crate::fence`]):
//!    NotReady, never in `-replicas`, until its agent has fenced it and it rejoined.
//! 3. Writable and replicating from nobody: Ready (a primary the mounted file does
//!    not name yet; the kubelet refreshes it up to a minute late).
//! 4. A rebuild marker (transactions the primary lacks): NotReady.
//! 5. A seed marker (a donor's data is being copied in): NotReady.
//! 6. A cluster not bootstrapped yet (neither `INITIALIZED_FILE` says `true`, nor
//!    the `repl` account exists, nor does the recorded primary answer as a
//!    writable primary: [`primary_serves`]): Ready when it answers (restores and
//!    the bootstrap need the servers up). The third test closes a window: the
//!    mounted file can say "not initialized" up to a minute after the bootstrap
//!    (the kubelet's refresh), and an empty server that missed the bootstrap has
//!    no `repl` account, so without it such a server was Ready, in `-replicas`
//!    and counted by the hook, before it held any data.
//! 7. A replica: Ready only while both replication threads run without a recorded
//!    error and it lags at most `MAX_LAG_FILE` seconds (default 60), so a stopped,
//!    seeding, unjoined or far-behind replica serves no stale reads.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    Failure, Result,
    context::{Context, Env, Flavor},
    server::Server,
    status::ReplicaStatus,
};

/// What a probe says, and why (the kubelet shows it in the pod's events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass(String),
    Fail(String),
}

impl Verdict {
    #[must_use]
    pub fn passed(&self) -> bool {
        matches!(self, Self::Pass(_))
    }
    #[must_use]
    pub fn text(&self) -> &str {
        match self {
            Self::Pass(t) | Self::Fail(t) => t,
        }
    }
}

/// What readiness is decided from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Facts {
    pub pod: String,
    pub writable: bool,
    /// The replication account exists (the cluster was bootstrapped).
    pub repl_account: bool,
    pub replica: Option<ReplicaStatus>,
    /// `PRIMARY_FILE`'s first line.
    pub recorded_primary: Option<String>,
    /// `EPOCH_FILE`'s first line: the published primary's epoch.
    pub recorded_epoch: Option<i64>,
    /// The epoch this server was promoted in ([`crate::fence::local_epoch`]).
    pub local_epoch: Option<i64>,
    /// `INITIALIZED_FILE` says `true`.
    pub initialized: bool,
    /// The recorded primary, another member, answered as a writable server that
    /// replicates from nobody ([`primary_serves`]): only the bootstrap, a failover
    /// or a switchover open a server for writes, so the cluster is bootstrapped.
    pub primary_serves: bool,
    /// The rebuild marker's first line, when it exists.
    pub rebuild: Option<String>,
    /// The seed marker's donor and start, when it exists.
    pub seed: Option<(String, String)>,
    pub max_lag: u64,
    /// For a writable server: another member that serves as the primary of a
    /// newer epoch ([`survey`]), whatever this server's record says.
    pub superseded_by: Option<Newer>,
    /// For a writable server: the members answered again only moments ago after
    /// a survey that reached none of them ([`Surveys::holding`]).
    pub just_reconnected: bool,
}

impl Facts {
    /// What the fencing rule needs of these facts.
    #[must_use]
    pub fn role(&self) -> crate::fence::Role {
        crate::fence::Role {
            pod: self.pod.clone(),
            writable: self.writable,
            replica: self.replica.is_some(),
            local_epoch: self.local_epoch,
            recorded_primary: self.recorded_primary.clone(),
            recorded_epoch: self.recorded_epoch,
        }
    }
}

/// The default for `MAX_LAG_FILE` (`spec.replication.maxLagSeconds`).
pub const DEFAULT_MAX_LAG: u64 = 60;

/// Readiness (see the module docs for the rules).
#[must_use]
pub fn readiness(f: &Facts) -> Verdict {
    let me = &f.pod;
    let bootstrapped = f.initialized || f.repl_account || f.primary_serves;
    if f.writable
        && let Some(n) = &f.superseded_by
    {
        return Verdict::Fail(format!(
            "not ready: an old primary, to be fenced: {} serves as the primary of epoch {}, newer than {me}'s",
            n.primary, n.epoch
        ));
    }
    if f.writable && f.just_reconnected {
        return Verdict::Fail(format!(
            "not ready: {me} reached none of the other members until moments ago (a cut network?): \
             asking them whether a newer primary serves before it is Ready"
        ));
    }
    if f.recorded_primary.as_deref() == Some(me.as_str()) && bootstrapped {
        return if f.writable {
            Verdict::Pass(format!("ready: {me} is the primary (writable)"))
        } else {
            Verdict::Fail(format!("not ready: {me} is the recorded primary but read-only"))
        };
    }
    if let Some(why) = crate::fence::stale_primary(&f.role()) {
        return Verdict::Fail(format!("not ready: an old primary, to be fenced: {why}"));
    }
    if f.replica.is_none() && f.writable {
        return Verdict::Pass(format!(
            "ready: {me} is writable and replicates from nobody (the primary; the primary file names {} yet)",
            f.recorded_primary.as_deref().unwrap_or("nobody")
        ));
    }
    if let Some(why) = &f.rebuild {
        return Verdict::Fail(format!("not ready: {me} must be rebuilt: {}", clip(why, 300)));
    }
    if let Some((donor, since)) = &f.seed {
        return Verdict::Fail(format!("not ready: {me} is being seeded from {donor} since {since} (copying its data)"));
    }
    if !bootstrapped {
        return Verdict::Pass(format!(
            "ready: read_only={}, the cluster is not bootstrapped yet (primary {})",
            u8::from(!f.writable),
            f.recorded_primary.as_deref().unwrap_or("none")
        ));
    }
    let Some(r) = &f.replica else {
        return Verdict::Fail(format!(
            "not ready: {me} does not replicate (its agent has not joined it to {} yet)",
            f.recorded_primary.as_deref().unwrap_or("the primary")
        ));
    };
    if !r.healthy() {
        let mut why = format!("receiver {:?}, applier {:?}", r.receiver, r.applier);
        if r.receiver_errno != 0 {
            why.push_str(&format!("; receiver error {}: {}", r.receiver_errno, clip(&r.receiver_error, 200)));
        }
        if r.applier_errno != 0 {
            why.push_str(&format!("; applier error {}: {}", r.applier_errno, clip(&r.applier_error, 200)));
        }
        return Verdict::Fail(format!("not ready: {me} replicates from {} with {why}", r.source_host));
    }
    match r.lag {
        None => Verdict::Fail(format!("not ready: {me} replicates from {}, lag unknown (NULL)", r.source_host)),
        Some(lag) if lag > f.max_lag => {
            Verdict::Fail(format!("not ready: {me} lags {lag}s behind {} (at most {}s)", r.source_host, f.max_lag))
        }
        Some(lag) => {
            Verdict::Pass(format!("ready: {me} replicates from {}, lag {lag}s (at most {}s)", r.source_host, f.max_lag))
        }
    }
}

/// Could this server be promoted? Not while it holds a partial copy (seed
/// marker) or transactions the primary lacks (rebuild marker, unless it is the
/// recorded primary). No server call: a replica whose primary died is NotReady
/// (its receiver fails) but is exactly what a failover needs.
#[must_use]
pub fn candidate(pod: &str, recorded_primary: Option<&str>, seeding: bool, rebuild: bool) -> Verdict {
    if seeding {
        Verdict::Fail(format!("not a candidate: {pod} is being seeded (partial data)"))
    } else if rebuild && recorded_primary != Some(pod) {
        Verdict::Fail(format!("not a candidate: {pod} holds transactions the primary lacks"))
    } else {
        Verdict::Pass("candidate".to_owned())
    }
}

fn clip(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_owned();
    }
    let end = (0..=n).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
    format!("{}...", &s[..end])
}

/// The files and names the probes read, from the pod's environment.
#[derive(Debug, Clone)]
pub struct Paths {
    pub pod: String,
    pub socket: PathBuf,
    pub primary_file: Option<PathBuf>,
    pub epoch_file: Option<PathBuf>,
    pub initialized_file: Option<PathBuf>,
    pub rebuild_marker: Option<PathBuf>,
    pub seed_marker: Option<PathBuf>,
    pub max_lag_file: Option<PathBuf>,
}

/// The server's socket: `SERVER_SOCKET`, else where the server images put it.
#[must_use]
pub fn socket(env: &dyn Env) -> PathBuf {
    env.var("SERVER_SOCKET").map_or_else(|| PathBuf::from("/var/run/mysqld/mysqld.sock"), PathBuf::from)
}

impl Paths {
    #[must_use]
    pub fn from_env(env: &dyn Env) -> Self {
        let path = |name: &str| env.var(name).map(PathBuf::from);
        Self {
            pod: env.var("POD_NAME").unwrap_or_else(|| "this server".to_owned()),
            socket: socket(env),
            primary_file: path("PRIMARY_FILE"),
            epoch_file: path("EPOCH_FILE"),
            initialized_file: path("INITIALIZED_FILE"),
            rebuild_marker: path("REBUILD_MARKER"),
            seed_marker: path("SEED_MARKER"),
            max_lag_file: path("MAX_LAG_FILE"),
        }
    }
}

/// A file's first line without whitespace; `None` when unreadable or empty.
pub fn first_line(env: &dyn Env, path: Option<&Path>) -> Option<String> {
    let bytes = env.read(path?).ok()?;
    let line: String = String::from_utf8_lossy(&bytes).lines().next()?.split_whitespace().collect();
    (!line.is_empty()).then_some(line)
}

/// The candidate probe, from the markers alone.
#[must_use]
pub fn candidate_now(env: &dyn Env, p: &Paths) -> Verdict {
    let exists = |path: &Option<PathBuf>| path.as_deref().is_some_and(Path::exists);
    candidate(
        &p.pod,
        first_line(env, p.primary_file.as_deref()).as_deref(),
        exists(&p.seed_marker),
        exists(&p.rebuild_marker),
    )
}

/// Reads the facts: the server through `s`, the rest from the pod's files.
///
/// # Errors
/// The server's error.
pub fn gather(s: &mut Server, env: &dyn Env, p: &Paths) -> Result<Facts> {
    let writable = s.writable()?;
    let repl_account = s.value("SELECT COUNT(*) FROM mysql.user WHERE user = 'repl'")?.as_deref() != Some("0");
    let q = match s.flavor {
        Flavor::Mysql => "SHOW REPLICA STATUS",
        Flavor::Mariadb => "SHOW SLAVE STATUS",
    };
    let rows = s.rows(q)?;
    let replica = ReplicaStatus::from_rows(&s.name, &rows)?;
    let seed = first_line_raw(env, p.seed_marker.as_deref()).map(|l| {
        let mut words = l.split_whitespace();
        (words.next().unwrap_or("a donor").to_owned(), words.next().unwrap_or("?").to_owned())
    });
    let max_lag = first_line(env, p.max_lag_file.as_deref()).and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_MAX_LAG);
    let local_epoch = crate::fence::local_epoch(s)?;
    Ok(Facts {
        recorded_epoch: first_line(env, p.epoch_file.as_deref()).and_then(|v| v.parse().ok()),
        local_epoch,
        pod: p.pod.clone(),
        writable,
        repl_account,
        replica,
        recorded_primary: first_line(env, p.primary_file.as_deref()),
        initialized: first_line(env, p.initialized_file.as_deref()).as_deref() == Some("true"),
        // asked by the caller, only when it matters (check_primary)
        primary_serves: false,
        rebuild: first_line_raw(env, p.rebuild_marker.as_deref()),
        seed,
        max_lag,
        // asked by the caller, only for a writable server (survey)
        superseded_by: None,
        just_reconnected: false,
    })
}

/// Whether readiness would call this cluster "not bootstrapped yet" on local
/// knowledge alone, while the recorded primary is another member: only then is
/// [`primary_serves`] worth a connection.
#[must_use]
pub fn needs_primary_check(f: &Facts) -> bool {
    !f.initialized && !f.repl_account && f.recorded_primary.as_deref().is_some_and(|p| p != f.pod)
}

/// How long the check of the recorded primary may wait for a connection: a
/// probe answers within the kubelet's timeout (5 s) whatever the peer does.
pub const PRIMARY_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// A session with member `name` when it answers (within
/// [`PRIMARY_CHECK_TIMEOUT`]) as a writable server that replicates from nobody:
/// a primary, since only the bootstrap, a failover or a switchover open one.
/// Anything else (not a member, unreachable, read-only, a replica, an error) is
/// `None`: the caller then judges on what it knew before.
fn serving(ctx: &Context, name: &str) -> Option<Server> {
    ask(ctx, name).and_then(|(s, serves)| serves.then_some(s))
}

/// A session with member `name` when it answers (within
/// [`PRIMARY_CHECK_TIMEOUT`]), and whether it serves as a primary (writable,
/// replicating from nobody); `None` when it does not answer.
fn ask(ctx: &Context, name: &str) -> Option<(Server, bool)> {
    let quick = Context { connect_timeout: PRIMARY_CHECK_TIMEOUT, query_timeout: PRIMARY_CHECK_TIMEOUT, ..ctx.clone() };
    let mut s = Server::connect(&quick, name).ok()?;
    let (writable, replica) = (s.writable().ok()?, s.is_replica().ok()?);
    Some((s, writable && !replica))
}

/// Does member `primary` answer as a primary ([`serving`])?
#[must_use]
pub fn primary_serves(ctx: &Context, primary: &str) -> bool {
    serving(ctx, primary).is_some()
}

/// Completes `f` with [`Facts::primary_serves`] when it matters (a connection to
/// the recorded primary, only in the state [`needs_primary_check`]).
pub fn check_primary(ctx: &Context, f: &mut Facts) {
    if needs_primary_check(f)
        && let Some(primary) = f.recorded_primary.clone()
    {
        f.primary_serves = primary_serves(ctx, &primary);
    }
}

/// A primary newer than the mounted record, learned from the servers: the
/// member that answers as writable, replicating from nobody, and carries an
/// epoch (`_mysqlhook.epoch`, written by the promotion before any write) newer
/// than the record's. Epochs are handed out by the hook, one per role change, so
/// a newer epoch is a later decision: adopting it can never put an agent back on
/// an older one (issue 32.5). The mounted file stays the durable record; this
/// only bridges the kubelet's refresh (up to about a minute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Newer {
    pub primary: String,
    pub epoch: i64,
}

impl Facts {
    /// Whether the record may be stale in a way the servers can settle. This
    /// server is read-only, and either the record names it (after a switchover,
    /// or a failover while it was away), or, in a bootstrapped cluster, it does
    /// not receive from a source (a replica a failover could not repoint, still
    /// connecting to the dead primary). Only then are the other members asked: a
    /// healthy replica and the serving primary cost nothing.
    #[must_use]
    pub fn record_may_be_stale(&self) -> bool {
        if self.writable || self.recorded_epoch.is_none() {
            return false;
        }
        let names_me = self.recorded_primary.as_deref() == Some(self.pod.as_str());
        let receiving = self.replica.as_ref().is_some_and(|r| r.receiver == crate::status::Thread::Yes);
        names_me || (!receiving && (self.initialized || self.repl_account))
    }

    /// Whether this read-only server replicates from another member than its
    /// record names: a failover or switchover repointed it before the kubelet
    /// refreshed the record. The servers are asked then too: a replica that
    /// followed the stale record instead would be repointed to an old primary
    /// (left writable by a cut network) and, holding commits that one lacks,
    /// called errant and rebuilt from it (real-server scenario 15).
    #[must_use]
    pub fn streams_from_another(&self, ctx: &Context) -> bool {
        if self.writable || self.recorded_epoch.is_none() {
            return false;
        }
        let (Some(r), Some(primary)) = (&self.replica, &self.recorded_primary) else { return false };
        ctx.member_at(&r.source_host, r.source_port).is_some_and(|source| source != primary)
    }

    /// Takes `newer` as the record when its epoch is newer than the record's.
    pub fn adopt(&mut self, newer: &Newer) {
        if self.recorded_epoch.is_some_and(|e| newer.epoch > e) {
            self.recorded_primary = Some(newer.primary.clone());
            self.recorded_epoch = Some(newer.epoch);
        }
    }
}

/// What the other members said when asked for a primary newer than this
/// server's knowledge.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Survey {
    /// Members asked (all but this server).
    pub asked: usize,
    /// Members that answered at all.
    pub answered: usize,
    /// The member that serves as the primary of the newest epoch above the one
    /// asked about.
    pub newer: Option<Newer>,
}

/// How long a survey's answer stands for readiness, and how long a writable
/// server stays NotReady once the members answer again after a survey that
/// reached none of them (seconds).
pub const SURVEY_FRESH: f64 = 3.0;

/// What a writable server remembers of its surveys (the sidecar's fencing
/// thread asks every second; readiness asks when the last answer will not do).
/// Times are seconds on the caller's monotonic clock.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Surveys {
    /// The last survey: when, of which epoch, what it found.
    pub last: Option<(f64, i64, Survey)>,
    /// The last survey reached none of the members.
    pub isolated: bool,
    /// When the members answered again after a survey that reached none.
    pub reconnected: Option<f64>,
}

impl Surveys {
    pub fn record(&mut self, now: f64, than: i64, found: Survey) {
        if found.asked > 0 && found.answered == 0 {
            self.isolated = true;
            self.reconnected = None;
        } else if self.isolated {
            self.isolated = false;
            self.reconnected = Some(now);
        }
        self.last = Some((now, than, found));
    }

    /// The last answer, when readiness may take it without asking: recent, of
    /// the same epoch, and from every member. A partial answer is not enough:
    /// right after a cut heals, one member can answer a moment before the one
    /// that has become the primary (seen in real-server scenario 15).
    #[must_use]
    pub fn usable(&self, now: f64, than: i64) -> Option<&Survey> {
        let (at, epoch, found) = self.last.as_ref()?;
        (now - at < SURVEY_FRESH && *epoch == than && found.answered == found.asked).then_some(found)
    }

    /// Whether the members answered again less than [`SURVEY_FRESH`] ago after
    /// a survey that reached none of them: readiness holds the server NotReady
    /// meanwhile, so a probe that arrives the moment a cut heals never finds an
    /// old primary Ready before its surveys had a fair chance to reach the newer
    /// one. A server whose peers were down (not its own network) only waits as
    /// long once they return.
    #[must_use]
    pub fn holding(&self, now: f64) -> bool {
        self.reconnected.is_some_and(|t| now - t < SURVEY_FRESH)
    }
}

/// How long a survey waits for the members' answers in all: a member whose
/// name does not resolve in time (a cut network: the resolver's own timeouts are
/// seconds) counts as not answering, and its thread is left to end on its own.
pub const SURVEY_DEADLINE: Duration = Duration::from_millis(1500);

/// Asks every other member at once (1 s connect timeout each, one thread each,
/// [`SURVEY_DEADLINE`] in all, so a probe answers in about a second however
/// many are down) for the one that answers as a writable primary of an epoch
/// newer than `than` (the newest, should two answer: the older one is fenced by
/// its own agent).
#[must_use]
pub fn survey(ctx: &Context, me: &str, than: i64) -> Survey {
    // per member: None (no answer), Some(None) (answered, no primary's epoch),
    // Some(Some(epoch)) (serves as a primary of that epoch)
    let (tx, rx) = std::sync::mpsc::channel::<(String, Option<Option<i64>>)>();
    let mut asked = 0;
    for name in ctx.names().filter(|n| *n != me) {
        asked += 1;
        let (ctx, name, tx) = (ctx.clone(), name.to_owned(), tx.clone());
        std::thread::spawn(move || {
            let answer = ask(&ctx, &name)
                .map(|(mut s, serves)| if serves { crate::fence::local_epoch(&mut s).ok().flatten() } else { None });
            let _ = tx.send((name, answer));
        });
    }
    drop(tx);
    let deadline = std::time::Instant::now() + SURVEY_DEADLINE;
    let mut out = Survey { asked, ..Survey::default() };
    for _ in 0..asked {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let Ok((name, answer)) = rx.recv_timeout(left) else { break };
        let Some(epoch) = answer else { continue };
        out.answered += 1;
        if let Some(epoch) = epoch
            && epoch > than
            && out.newer.as_ref().is_none_or(|b| epoch > b.epoch)
        {
            out.newer = Some(Newer { primary: name, epoch });
        }
    }
    out
}

/// [`survey`]'s newer primary.
#[must_use]
pub fn newer_primary(ctx: &Context, me: &str, than: i64) -> Option<Newer> {
    survey(ctx, me, than).newer
}

/// Completes `f` with a newer primary when its record may be stale
/// ([`Facts::record_may_be_stale`], [`Facts::streams_from_another`]); returns
/// what it learned.
pub fn check_newer_primary(ctx: &Context, f: &mut Facts) -> Option<Newer> {
    if !f.record_may_be_stale() && !f.streams_from_another(ctx) {
        return None;
    }
    let newer = newer_primary(ctx, &f.pod, f.recorded_epoch?)?;
    f.adopt(&newer);
    Some(newer)
}

/// A file's first line as it is (`None` when the file does not exist).
fn first_line_raw(env: &dyn Env, path: Option<&Path>) -> Option<String> {
    let bytes = env.read(path?).ok()?;
    Some(String::from_utf8_lossy(&bytes).lines().next().unwrap_or_default().to_owned())
}

/// The readiness probe: one session over the socket.
#[must_use]
pub fn readiness_now(ctx: &Context, env: &dyn Env, p: &Paths) -> Verdict {
    let facts = Server::connect_socket(ctx, &p.pod, &p.socket)
        .map_err(|e| Failure::new("unreachable", e.to_string()))
        .and_then(|mut s| gather(&mut s, env, p));
    match facts {
        Ok(mut f) => {
            check_newer_primary(ctx, &mut f);
            check_primary(ctx, &mut f);
            if let Some(than) = f.role().asks_for_newer() {
                f.superseded_by = survey(ctx, &f.pod, than).newer;
            }
            readiness(&f)
        }
        Err(f) => Verdict::Fail(format!("not ready: {}", f.message)),
    }
}

/// Liveness: the server answers on its socket, even if it refuses the login (a
/// wrong password is no reason to restart it).
#[must_use]
pub fn liveness_now(ctx: &Context, p: &Paths) -> Verdict {
    match Server::connect_socket(ctx, &p.pod, &p.socket) {
        Ok(_) => Verdict::Pass(format!("alive: {} answers", p.pod)),
        Err(crate::server::ConnectError::Refused(m)) => Verdict::Pass(format!("alive: {} answers ({m})", p.pod)),
        Err(crate::server::ConnectError::Unreachable(m)) => Verdict::Fail(format!("not alive: {m}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Thread;

    fn replica(receiver: Thread, lag: Option<u64>) -> ReplicaStatus {
        ReplicaStatus {
            source_host: "db-0.db".into(),
            source_port: 3306,
            receiver,
            applier: Thread::Yes,
            lag,
            receiver_errno: 0,
            receiver_error: String::new(),
            applier_errno: 0,
            applier_error: String::new(),
        }
    }

    fn facts() -> Facts {
        Facts {
            pod: "db-1".into(),
            repl_account: true,
            recorded_primary: Some("db-0".into()),
            max_lag: 60,
            replica: Some(replica(Thread::Yes, Some(0))),
            ..Facts::default()
        }
    }

    #[test]
    fn a_healthy_replica_is_ready() {
        assert!(readiness(&facts()).passed());
        let behind = Facts { replica: Some(replica(Thread::Yes, Some(61))), ..facts() };
        assert!(readiness(&behind).text().contains("lags 61s"));
        let lost = Facts { replica: Some(replica(Thread::Connecting, Some(0))), ..facts() };
        assert!(!readiness(&lost).passed());
        let unknown = Facts { replica: Some(replica(Thread::Yes, None)), ..facts() };
        assert!(readiness(&unknown).text().contains("lag unknown"));
    }

    #[test]
    fn the_recorded_primary_is_ready_only_while_writable() {
        let primary = Facts { pod: "db-0".into(), replica: None, ..facts() };
        assert!(!readiness(&primary).passed(), "restarted read-only: the failover must see it");
        assert!(readiness(&Facts { writable: true, ..primary }).passed());
    }

    #[test]
    fn an_old_primary_is_never_ready() {
        let old = Facts {
            pod: "db-0".into(),
            writable: true,
            replica: None,
            recorded_primary: Some("db-1".into()),
            recorded_epoch: Some(4),
            local_epoch: Some(3),
            ..facts()
        };
        assert!(readiness(&old).text().contains("an old primary"), "{:?}", readiness(&old));
        // newer than the mounted file: the new primary, Ready
        assert!(readiness(&Facts { local_epoch: Some(5), ..old }).passed());
    }

    #[test]
    fn a_writable_server_superseded_by_a_newer_primary_is_never_ready() {
        let newer = Newer { primary: "db-1".into(), epoch: 5 };
        // its record still names it (stale): before, "the primary (writable)"
        let stale = Facts {
            pod: "db-0".into(),
            writable: true,
            replica: None,
            recorded_primary: Some("db-0".into()),
            recorded_epoch: Some(4),
            local_epoch: Some(4),
            superseded_by: Some(newer.clone()),
            ..facts()
        };
        assert!(readiness(&stale).text().contains("db-1 serves as the primary of epoch 5"), "{:?}", readiness(&stale));
        assert!(readiness(&Facts { superseded_by: None, ..stale.clone() }).passed());
        assert!(readiness(&Facts { recorded_primary: None, ..stale.clone() }).text().contains("old primary"));
    }

    #[test]
    fn a_server_that_reached_nobody_waits_before_it_is_ready_again() {
        let all = Survey { asked: 2, answered: 2, newer: None };
        let none = Survey { asked: 2, answered: 0, newer: None };
        let some = Survey { asked: 2, answered: 1, newer: None };
        let mut s = Surveys::default();
        s.record(0.0, 4, all.clone());
        assert_eq!(s.usable(1.0, 4), Some(&all));
        assert_eq!(s.usable(3.5, 4), None, "too old");
        assert_eq!(s.usable(1.0, 5), None, "another epoch");
        assert!(!s.holding(1.0));
        s.record(10.0, 4, none);
        assert_eq!(s.usable(10.5, 4), None, "reached nobody: ask again");
        assert!(!s.holding(10.5), "isolated: readiness asks afresh, no hold yet");
        // the cut heals: one member answers first
        s.record(100.0, 4, some);
        assert_eq!(s.usable(100.1, 4), None, "a partial answer is not enough");
        assert!(s.holding(100.1) && s.holding(102.9) && !s.holding(103.0));
        s.record(101.0, 4, all);
        assert!(s.holding(101.5), "the hold runs its time");
        // readiness of a writable server holding
        let f = Facts { pod: "db-0".into(), writable: true, replica: None, just_reconnected: true, ..facts() };
        assert!(readiness(&f).text().contains("reached none of the other members"), "{:?}", readiness(&f));
        assert!(readiness(&Facts { just_reconnected: false, ..f }).passed());
    }

    #[test]
    fn markers_and_bootstrap() {
        let rebuild = Facts { rebuild: Some("errant 0-2-5".into()), ..facts() };
        assert!(readiness(&rebuild).text().contains("must be rebuilt: errant 0-2-5"));
        let seeding = Facts { seed: Some(("db-2".into(), "12:00".into())), ..facts() };
        assert!(readiness(&seeding).text().contains("seeded from db-2"));
        let fresh = Facts { repl_account: false, replica: None, ..facts() };
        assert!(readiness(&fresh).passed(), "not bootstrapped: up is enough");
        // the mounted file is stale, but the recorded primary serves: an empty
        // server that missed the bootstrap is not Ready until it has joined
        let missed = Facts { primary_serves: true, ..fresh.clone() };
        assert!(readiness(&missed).text().contains("does not replicate"), "{:?}", readiness(&missed));
        let unjoined = Facts { replica: None, ..facts() };
        assert!(readiness(&unjoined).text().contains("does not replicate"));
    }

    #[test]
    fn the_primary_is_asked_only_when_local_knowledge_says_not_bootstrapped() {
        let fresh = Facts { repl_account: false, replica: None, ..facts() };
        assert!(needs_primary_check(&fresh));
        assert!(!needs_primary_check(&Facts { initialized: true, ..fresh.clone() }));
        assert!(!needs_primary_check(&Facts { repl_account: true, ..fresh.clone() }));
        assert!(!needs_primary_check(&Facts { recorded_primary: None, ..fresh.clone() }));
        assert!(!needs_primary_check(&Facts { recorded_primary: Some("db-1".into()), ..fresh }), "itself");
    }

    #[test]
    fn a_replica_repointed_before_its_record_asks_the_servers() {
        let e = crate::context::tests::env(&[
            ("FLAVOR", "mariadb"),
            ("PODS", "db-0=db-0.db:3306 db-1=db-1.db:3306"),
            ("OPERATOR_PASSWORD", "x"),
        ]);
        let ctx = Context::from_env(&e).map_err(|f| f.message).unwrap_or_else(|m| panic!("{m}"));
        // facts(): db-1 replicates from db-0.db:3306, its record names db-0
        let follows = Facts { recorded_epoch: Some(3), ..facts() };
        assert!(!follows.streams_from_another(&ctx), "it streams from the recorded primary");
        let moved = Facts { recorded_primary: Some("db-2".into()), ..follows.clone() };
        assert!(moved.streams_from_another(&ctx), "repointed by a role change the record does not show yet");
        assert!(!Facts { recorded_epoch: None, ..moved.clone() }.streams_from_another(&ctx), "no epoch: no judgement");
        assert!(!Facts { writable: true, ..moved.clone() }.streams_from_another(&ctx));
        assert!(!Facts { replica: None, ..moved }.streams_from_another(&ctx));
        let elsewhere =
            Facts { replica: Some(ReplicaStatus { source_port: 9, ..replica(Thread::Yes, Some(0)) }), ..follows };
        assert!(!elsewhere.streams_from_another(&ctx), "a source that is no member: the record is followed");
    }

    #[test]
    fn a_newer_primary_is_adopted_only_when_newer() {
        let stale =
            Facts { pod: "db-0".into(), recorded_primary: Some("db-0".into()), recorded_epoch: Some(4), ..facts() };
        assert!(stale.record_may_be_stale());
        assert!(!Facts { writable: true, ..stale.clone() }.record_may_be_stale(), "a writable primary: no question");
        assert!(!Facts { recorded_epoch: None, ..stale.clone() }.record_may_be_stale(), "no epoch: no judgement");
        assert!(!facts().record_may_be_stale(), "a healthy replica");
        let cut_off = Facts { recorded_epoch: Some(4), replica: Some(replica(Thread::Connecting, None)), ..facts() };
        assert!(cut_off.record_may_be_stale(), "a replica still connecting to its source");
        assert!(!Facts { repl_account: false, ..cut_off.clone() }.record_may_be_stale(), "before the bootstrap");
        assert!(Facts { replica: None, ..cut_off }.record_may_be_stale(), "not a replica at all");
        let mut same = stale.clone();
        same.adopt(&Newer { primary: "db-1".into(), epoch: 4 });
        assert_eq!(same, stale, "an epoch not newer changes nothing");
        let mut moved = stale.clone();
        moved.adopt(&Newer { primary: "db-1".into(), epoch: 5 });
        assert_eq!((moved.recorded_primary.as_deref(), moved.recorded_epoch), (Some("db-1"), Some(5)));
        // the old primary, now a healthy replica of db-1: Ready; before: NotReady
        assert!(!readiness(&stale).passed());
        assert!(readiness(&moved).passed(), "{:?}", readiness(&moved));
    }

    #[test]
    fn candidates() {
        assert!(candidate("db-1", Some("db-0"), false, false).passed());
        assert!(!candidate("db-1", Some("db-0"), true, false).passed());
        assert!(!candidate("db-1", Some("db-0"), false, true).passed());
        assert!(candidate("db-0", Some("db-0"), false, true).passed(), "the recorded primary itself");
    }
}

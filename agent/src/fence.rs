//! Fencing: making a server read-only and cutting off its clients, and the rule
//! by which a server's own agent fences it (issue 31.1).
//!
//! **The rule.** Every promotion records its epoch on the server it makes
//! writable (`_mysqlhook.epoch`, local, never replicated), before any write is
//! allowed; the hook publishes the primary with its epoch in the config
//! ConfigMap (`primary`, `epoch`). A server that is writable, replicates from
//! nobody, is not the published primary, and whose own epoch is not newer than
//! the published one is an old primary the cluster has moved on from (a failover
//! that could not reach it, a network cut that healed): its agent fences it. A
//! published record older than the server's own epoch is a stale copy (the kubelet
//! refreshes a mounted ConfigMap up to a minute late) and is ignored, so a newly
//! promoted primary is never fenced by the file that still names its predecessor.
//!
//! **The fence** (the scripts' `fence`, ported): `read_only` (MySQL
//! `super_read_only`) with a short `lock_wait_timeout`; when blocked (a long
//! statement, a commit waiting for a semi-sync acknowledgement) the client
//! sessions are killed and it tries again; once read-only the client sessions are
//! killed once more (MariaDB accounts that bypass `read_only`, open transactions),
//! and read-only is verified. A commit killed while it waited for its
//! acknowledgement was never acknowledged to its client.
//!
//! **A commit that can never be acknowledged.** On MySQL a commit waiting for its
//! semi-sync acknowledgement holds a lock `super_read_only` needs, and `KILL` does
//! not end that wait (the session shows `Killed` and keeps waiting; seen on MySQL
//! 9.7.4, as MySQL bugs 104015 and 101056 describe). When no replica receives from
//! this server (a failover moved them away, or its network was cut) that wait never
//! ends, and neither would the fence. With `shutdown` (a failover, and a server's own
//! agent; never a switchover, which refuses instead) the server is then shut down
//! (`SHUTDOWN`): the waiting client gets no OK (its connection drops), the server
//! restarts read-only as every server does (in a pod the kubelet restarts the
//! container), and the commit it recovers from its binary log is an errant
//! transaction `join.sh` finds, never an acknowledged one.

use std::time::Duration;

use crate::{
    Failure, Result,
    context::Flavor,
    server::{Server, text},
};

/// What the rule is decided from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Role {
    pub pod: String,
    pub writable: bool,
    pub replica: bool,
    /// The epoch this server was promoted in (`None`: never, or before epochs).
    pub local_epoch: Option<i64>,
    /// The published primary and its epoch (the config ConfigMap).
    pub recorded_primary: Option<String>,
    pub recorded_epoch: Option<i64>,
}

/// Why this server must be fenced, if it must (see the module docs).
#[must_use]
pub fn stale_primary(r: &Role) -> Option<String> {
    let primary = r.recorded_primary.as_deref()?;
    let recorded = r.recorded_epoch?;
    if !r.writable || r.replica || primary == r.pod {
        return None;
    }
    match r.local_epoch {
        Some(local) if local > recorded => None,
        local => Some(format!(
            "{} is writable, but the primary is {primary} of epoch {recorded} and this server's epoch is {}",
            r.pod,
            local.map_or_else(|| "unrecorded".to_owned(), |e| e.to_string())
        )),
    }
}

impl Role {
    /// The epoch a primary must beat to supersede this server, when this server
    /// should ask the other members for one: it is writable and replicates from
    /// nobody (it serves, or served, as the primary) and knows some epoch (its own,
    /// or the record's). Its record can be older than the servers' state: the
    /// kubelet refreshes it up to a minute late, and not at all while the node is
    /// cut off. The members answer at once when the network heals (issue 32.5).
    #[must_use]
    pub fn asks_for_newer(&self) -> Option<i64> {
        if !self.writable || self.replica {
            return None;
        }
        match (self.local_epoch, self.recorded_epoch) {
            (Some(local), Some(recorded)) => Some(local.max(recorded)),
            (local, recorded) => local.or(recorded),
        }
    }
}

/// Why this writable server must be fenced now that `primary` serves as the
/// primary of `epoch` (newer than [`Role::asks_for_newer`]'s), whatever its
/// record says: a later decision of the hook opened that server.
#[must_use]
pub fn superseded(r: &Role, primary: &str, epoch: i64) -> String {
    format!(
        "{} is writable, but {primary} serves as the primary of epoch {epoch}, newer than this server's {} \
         (its record names {} of epoch {})",
        r.pod,
        r.local_epoch.map_or_else(|| "unrecorded".to_owned(), |e| e.to_string()),
        r.recorded_primary.as_deref().unwrap_or("nobody"),
        r.recorded_epoch.map_or_else(|| "none".to_owned(), |e| e.to_string()),
    )
}

/// The epoch recorded on the server (`None` without the table or its row).
///
/// # Errors
/// The server's error, other than the table missing.
pub fn local_epoch(s: &mut Server) -> Result<Option<i64>> {
    let exists = s.value(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '_mysqlhook' AND table_name = 'epoch'",
    )?;
    if exists.as_deref() != Some("1") {
        return Ok(None);
    }
    let v = s.value("SELECT epoch FROM _mysqlhook.epoch WHERE id = 1")?;
    v.map(|v| v.parse().map_err(|_| Failure::new("sql-failed", format!("{}: epoch {v:?}", s.name)))).transpose()
}

/// One row of the process list, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: u64,
    pub user: String,
    pub command: String,
    pub state: String,
}

/// Whether a session's commit waits for a semi-sync acknowledgement (MySQL:
/// `Waiting for semi-sync ACK from replica`, MariaDB: `... from slave`).
#[must_use]
pub fn waits_for_ack(sessions: &[Session]) -> bool {
    sessions.iter().any(|s| s.state.starts_with("Waiting for semi-sync ACK"))
}

/// The sessions a fence kills: every client but `own`, never the replication
/// threads (source side `Binlog Dump`, `Binlog Dump GTID`; replica side `system
/// user` and MariaDB's `Slave_*` commands) nor the server's own (`event_scheduler`,
/// `Daemon`).
#[must_use]
pub fn victims(sessions: &[Session], own: u64) -> Vec<u64> {
    sessions
        .iter()
        .filter(|s| s.id != own)
        .filter(|s| !matches!(s.user.as_str(), "system user" | "event_scheduler"))
        .filter(|s| {
            !matches!(
                s.command.as_str(),
                "Binlog Dump" | "Binlog Dump GTID" | "Daemon" | "Slave_IO" | "Slave_SQL" | "Slave_worker"
            )
        })
        .map(|s| s.id)
        .collect()
}

fn sessions(s: &mut Server) -> Result<Vec<Session>> {
    let rows = s.rows("SELECT ID, USER, COMMAND, STATE FROM information_schema.PROCESSLIST")?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            Some(Session {
                id: text(r, 0)?.parse().ok()?,
                user: text(r, 1).unwrap_or_default(),
                command: text(r, 2).unwrap_or_default(),
                state: text(r, 3).unwrap_or_default(),
            })
        })
        .collect())
}

pub(crate) fn kill_clients(s: &mut Server) -> Result<usize> {
    let own: u64 = s.value("SELECT CONNECTION_ID()")?.and_then(|v| v.parse().ok()).unwrap_or(0);
    let ids = victims(&sessions(s)?, own);
    for id in &ids {
        // A session already gone is no error.
        let _ = s.exec(&format!("KILL CONNECTION {id}"));
    }
    Ok(ids.len())
}

/// How a fence ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fenced {
    /// Client sessions killed.
    pub killed: usize,
    /// The server was shut down: a commit waiting for an acknowledgement that
    /// cannot come held read-only off (see the module docs).
    pub shut_down: bool,
}

impl Fenced {
    /// What happened, for a report's message.
    #[must_use]
    pub fn describe(&self, pod: &str) -> String {
        if self.shut_down {
            format!(
                "{pod} shut down: a commit waiting for a semi-sync acknowledgement held read-only off \
                 ({} client session(s) killed); it restarts read-only, that commit unacknowledged",
                self.killed
            )
        } else {
            format!("{pod} read-only, {} client session(s) killed", self.killed)
        }
    }
}

/// Fences `s` (see the module docs): `attempts` tries, each waiting at most
/// `lock_wait` seconds for the locks; with `shutdown`, a server a waiting commit
/// keeps writable is shut down.
///
/// # Errors
/// `fence-failed` when the server is still writable after every attempt (and not
/// shut down).
pub fn fence(s: &mut Server, attempts: u32, lock_wait: u32, shutdown: bool) -> Result<Fenced> {
    let variable = match s.flavor {
        Flavor::Mysql => "super_read_only",
        Flavor::Mariadb => "read_only",
    };
    let mut killed = 0;
    let mut last = String::new();
    for _ in 0..attempts {
        // One statement per call: the error of a multi-statement's second
        // statement is lost when its result is dropped (seen on MySQL 9.7.4: the
        // blocked SET GLOBAL looked like a success).
        let set = s.exec(&format!("SET SESSION lock_wait_timeout = {lock_wait}"));
        match set.and_then(|()| s.exec(&format!("SET GLOBAL {variable} = ON"))) {
            Ok(()) => {
                killed += kill_clients(s)?;
                if s.value(&format!("SELECT @@global.{variable}"))?.as_deref() == Some("1") {
                    // Its events stop at once, not at its agent's next round
                    // (issue 31.8: on MariaDB one whose definer passes read_only
                    // would write errant transactions). Best effort: the fence
                    // stands, and the agent's round does it again.
                    if let Err(f) = crate::events::reconcile(s) {
                        eprintln!("fence {}: events not disabled yet: {}", s.name, f.message);
                    }
                    return Ok(Fenced { killed, shut_down: false });
                }
            }
            Err(f) => {
                last = f.message;
                killed += kill_clients(s)?;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if shutdown && waits_for_ack(&sessions(s)?) {
        // Every client session killed once more, right before: a shutdown ends a
        // semi-sync wait and commits, and a session that was not killed gets its
        // OK (Percona PS-9916; seen on MySQL 9.7.4), while a killed one's
        // connection only drops. This also catches a commit begun since the
        // last kill.
        killed += kill_clients(s)?;
        // The statement's own answer may be lost as the server goes: whether it
        // went is what counts, and the caller sees it stop answering.
        let _ = s.exec("SHUTDOWN");
        return Ok(Fenced { killed, shut_down: true });
    }
    Err(Failure::new("fence-failed", format!("{} is still writable after {attempts} attempts: {last}", s.name)))
}

/// `mysql-hook-agent fence`: fences member `FENCE_POD` (the scripts' `fence`,
/// which calls it): `FENCE_ATTEMPTS` (default 4) tries of `FENCE_LOCK_WAIT`
/// (default 2) seconds; `FENCE_SHUTDOWN=1` shuts a server down that a commit
/// waiting for its acknowledgement keeps writable (a failover). Result `fenced`
/// (the message says how), or an error: `unreachable`, `fence-failed`.
///
/// # Errors
/// As above, and `bad-env` for settings it cannot use.
pub fn run(ctx: &crate::context::Context, env: &dyn crate::context::Env) -> Result<protocol::Report> {
    let pod = env.var("FENCE_POD").unwrap_or_default();
    if ctx.addr(&pod).is_none() {
        return Err(Failure::new("bad-env", format!("FENCE_POD '{pod}' is not in PODS")));
    }
    let number = |name: &str, default: u32| -> Result<u32> {
        env.var(name).map_or(Ok(default), |v| {
            v.trim()
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| Failure::new("bad-env", format!("{name} '{v}' is not a positive number")))
        })
    };
    let attempts = number("FENCE_ATTEMPTS", 4)?;
    let lock_wait = number("FENCE_LOCK_WAIT", 2)?;
    let shutdown = env.var("FENCE_SHUTDOWN").as_deref() == Some("1");
    let mut s = Server::connect(ctx, &pod).map_err(|e| Failure::new("unreachable", e.to_string()))?;
    let fenced = fence(&mut s, attempts, lock_wait, shutdown)?;
    Ok(protocol::Report {
        pod: Some(pod.clone()),
        message: Some(fenced.describe(&pod)),
        ..protocol::Report::new("fenced")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role() -> Role {
        Role {
            pod: "db-0".into(),
            writable: true,
            replica: false,
            local_epoch: Some(3),
            recorded_primary: Some("db-1".into()),
            recorded_epoch: Some(4),
        }
    }

    #[test]
    fn an_old_primary_of_an_older_epoch_is_fenced() {
        assert!(stale_primary(&role()).is_some());
        assert!(stale_primary(&Role { local_epoch: None, ..role() }).is_some(), "promoted before epochs");
        assert!(stale_primary(&Role { local_epoch: Some(4), ..role() }).is_some(), "two promotions of one epoch");
    }

    #[test]
    fn a_newer_primary_ignores_a_stale_file() {
        // promoted in epoch 5 while the mounted file still names db-1 of epoch 4
        assert_eq!(stale_primary(&Role { local_epoch: Some(5), ..role() }), None);
    }

    #[test]
    fn only_writable_non_replicas_not_named_are_fenced() {
        assert_eq!(stale_primary(&Role { writable: false, ..role() }), None);
        assert_eq!(stale_primary(&Role { replica: true, ..role() }), None);
        assert_eq!(stale_primary(&Role { recorded_primary: Some("db-0".into()), ..role() }), None);
        assert_eq!(stale_primary(&Role { recorded_epoch: None, ..role() }), None, "no published epoch: no judgement");
    }

    #[test]
    fn a_writable_server_asks_for_a_newer_primary() {
        let primary = Role { recorded_primary: Some("db-0".into()), recorded_epoch: Some(2), ..role() };
        assert_eq!(primary.asks_for_newer(), Some(3), "its own epoch is newer than the record's");
        assert_eq!(Role { local_epoch: Some(1), ..primary.clone() }.asks_for_newer(), Some(2));
        assert_eq!(Role { local_epoch: None, ..primary.clone() }.asks_for_newer(), Some(2), "before epochs");
        assert_eq!(Role { local_epoch: None, recorded_epoch: None, ..primary.clone() }.asks_for_newer(), None);
        assert_eq!(Role { writable: false, ..primary.clone() }.asks_for_newer(), None, "read-only: probe's question");
        assert_eq!(Role { replica: true, ..primary.clone() }.asks_for_newer(), None, "a replica");
        let why = superseded(&primary, "db-1", 4);
        assert!(why.contains("db-1 serves as the primary of epoch 4") && why.contains("this server's 3"), "{why}");
    }

    #[test]
    fn a_commit_waiting_for_its_acknowledgement_is_seen_on_both_flavors() {
        let s = |state: &str| Session { id: 1, user: "app".into(), command: "Query".into(), state: state.into() };
        assert!(waits_for_ack(&[s("executing"), s("Waiting for semi-sync ACK from replica")]), "MySQL");
        assert!(waits_for_ack(&[s("Waiting for semi-sync ACK from slave")]), "MariaDB");
        assert!(!waits_for_ack(&[s("Waiting for table metadata lock"), s("")]));
        let f = Fenced { killed: 2, shut_down: true };
        assert!(f.describe("db-0").starts_with("db-0 shut down"), "{}", f.describe("db-0"));
    }

    #[test]
    fn the_fence_spares_replication_and_itself() {
        let s = |id, user: &str, command: &str| Session {
            id,
            user: user.into(),
            command: command.into(),
            state: String::new(),
        };
        let list = [
            s(1, "app", "Query"),
            s(2, "mysqlhook", "Sleep"),
            s(3, "repl", "Binlog Dump GTID"),
            s(4, "system user", "Connect"),
            s(5, "event_scheduler", "Daemon"),
            s(6, "root", "Query"),
            s(7, "repl", "Binlog Dump"),
        ];
        assert_eq!(victims(&list, 2), vec![1, 6]);
    }
}

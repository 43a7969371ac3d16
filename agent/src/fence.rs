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

fn kill_clients(s: &mut Server) -> Result<usize> {
    let own: u64 = s.value("SELECT CONNECTION_ID()")?.and_then(|v| v.parse().ok()).unwrap_or(0);
    let rows = s.rows("SELECT ID, USER, COMMAND FROM information_schema.PROCESSLIST")?;
    let sessions: Vec<Session> = rows
        .iter()
        .filter_map(|r| {
            Some(Session {
                id: text(r, 0)?.parse().ok()?,
                user: text(r, 1).unwrap_or_default(),
                command: text(r, 2).unwrap_or_default(),
            })
        })
        .collect();
    let ids = victims(&sessions, own);
    for id in &ids {
        // A session already gone is no error.
        let _ = s.exec(&format!("KILL CONNECTION {id}"));
    }
    Ok(ids.len())
}

/// Fences `s` (see the module docs): `attempts` tries, each waiting at most
/// `lock_wait` seconds for the locks. Returns the client sessions killed.
///
/// # Errors
/// `fence-failed` when the server is still writable after every attempt.
pub fn fence(s: &mut Server, attempts: u32, lock_wait: u32) -> Result<usize> {
    let variable = match s.flavor {
        Flavor::Mysql => "super_read_only",
        Flavor::Mariadb => "read_only",
    };
    let mut killed = 0;
    let mut last = String::new();
    for _ in 0..attempts {
        match s.exec(&format!("SET SESSION lock_wait_timeout = {lock_wait}; SET GLOBAL {variable} = ON")) {
            Ok(()) => {
                killed += kill_clients(s)?;
                if s.value(&format!("SELECT @@global.{variable}"))?.as_deref() == Some("1") {
                    return Ok(killed);
                }
            }
            Err(f) => {
                last = f.message;
                killed += kill_clients(s)?;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(Failure::new("fence-failed", format!("{} is still writable after {attempts} attempts: {last}", s.name)))
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
    fn the_fence_spares_replication_and_itself() {
        let s = |id, user: &str, command: &str| Session { id, user: user.into(), command: command.into() };
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

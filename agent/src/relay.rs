//! What a replica has received, and applying all of it before it is promoted or
//! repointed (the scripts' `sql_gtid_received`, `mdb_received`, `mdb_relay_scan`
//! and `sql_drain_relay_log`, ported; issues 31.5 and 32).
//!
//! **Why it matters.** A commit the primary acknowledged is, with semi-sync, in at
//! least one replica's relay log, not necessarily applied. A failover compares what
//! each replica *received* and promotes the one that holds the most; that replica
//! then applies its relay log to the end before it is opened for writes. A received
//! set that comes out short promotes the wrong server, and a promotion that does not
//! apply the relay log first discards acknowledged commits.
//!
//! **MySQL** reports both sets: `gtid_executed` and
//! `performance_schema.replication_connection_status.RECEIVED_TRANSACTION_SET`, kept
//! across restarts. Applying is `START REPLICA SQL_THREAD` (the relay log is kept),
//! then `WAIT_FOR_EXECUTED_GTID_SET`.
//!
//! **MariaDB 10.11** keeps no received position across a restart (`Gtid_IO_Pos` is
//! empty until the receiver runs again) and, in GTID mode, deletes the relay log
//! whenever a replication thread starts while both are stopped, refetching from
//! `gtid_slave_pos`: what was received but not applied is gone unless the source
//! still has it. So when the applier is stopped or the receiver's position is
//! unknown, the relay log is read (`SHOW RELAYLOG EVENTS`) from the applier's
//! position to its end: every complete transaction in it counts as received, and
//! the first one not applied yet is where applying starts, by file position
//! (`MASTER_USE_GTID=no, RELAY_LOG_FILE, RELAY_LOG_POS`: no relay log purge when a
//! relay log position is given). The replica stays in file-position mode until it
//! is repointed or promoted.
//!
//! **A read that does not finish fails** (issue 31.5): each file must be read within
//! `QUERY_TIMEOUT`, and any error but "no such file" fails the scan. Counted as a
//! missing file, an unfinished read made the received set short, and a promotion
//! then discarded the unread, acknowledged rest. A failed scan makes the replica
//! "not examined": the failover refuses rather than guess.
//!
//! The bash read 150 000 relay log events in about 30 s on an idle machine (and
//! twice per failover: survey, then drain); under load the failover outlived its
//! Job's patience. Here the rows are streamed and parsed as they arrive.

use std::time::{Duration, Instant};

use mysql::{Row, prelude::Queryable};
use protocol::gtid::{
    mariadb::{Gtid, GtidList},
    mysql::GtidSet,
};

use crate::{
    Failure, Result,
    context::{Context, Env, Flavor},
    server::{Server, text},
};

/// ER_ERROR_WHEN_EXECUTING_COMMAND: `SHOW RELAYLOG EVENTS` of a file the server
/// does not have says so with this code and "Could not find target log".
const ER_ERROR_WHEN_EXECUTING_COMMAND: u16 = 1220;

/// The complete transactions of a relay log, read event by event.
///
/// A transaction is a `Gtid` event (`BEGIN GTID d-s-n` ...) ended by `Xid` or a
/// `COMMIT` query (a rolled-back one does not count), or a standalone `Gtid` event
/// (`GTID d-s-n`, DDL) ended by its one query. State carries across files: a
/// transaction may span two.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelayScan {
    /// The open transaction: its GTID, where its `Gtid` event is, standalone.
    open: Option<(Gtid, String, u64, bool)>,
    /// Every complete transaction seen, as a state.
    pub gtids: GtidList,
    /// The `Gtid` event of the first complete transaction not applied yet.
    pub first_unapplied: Option<(String, u64)>,
}

impl RelayScan {
    /// One event (`SHOW RELAYLOG EVENTS`: `Log_name`, `Pos`, `Event_type`, `Info`),
    /// against what the replica applied (a position).
    ///
    /// # Errors
    /// `corrupt`: a `Gtid` event whose GTID does not parse.
    pub fn event(&mut self, applied: &GtidList, file: &str, pos: u64, kind: &str, info: &str) -> Result<()> {
        let ends = match kind {
            "Gtid" => {
                let gtid = gtid_of(info)
                    .ok_or_else(|| Failure::new("corrupt", format!("relay log {file}:{pos}: Gtid event {info:?}")))?;
                self.open = Some((gtid, file.to_owned(), pos, !info.starts_with("BEGIN")));
                return Ok(());
            }
            "Xid" => true,
            "Query" => match &self.open {
                Some((_, _, _, true)) => true,
                _ => info.starts_with("COMMIT") || info.starts_with("ROLLBACK"),
            },
            _ => false,
        };
        if !ends {
            return Ok(());
        }
        let Some((gtid, gfile, gpos, _)) = self.open.take() else { return Ok(()) };
        if info.starts_with("ROLLBACK") {
            return Ok(());
        }
        self.gtids.insert(gtid);
        if self.first_unapplied.is_none() && applied.max_seq(gtid.domain).is_none_or(|n| gtid.seq > n) {
            self.first_unapplied = Some((gfile, gpos));
        }
        Ok(())
    }
}

/// The GTID in a `Gtid` event's `Info`: `BEGIN GTID 0-1-19`, `GTID 0-1-20`,
/// `BEGIN GTID 0-1-21 cid=57`, `XA START ... GTID 0-1-22`.
fn gtid_of(info: &str) -> Option<Gtid> {
    let mut words = info.split_ascii_whitespace();
    words.by_ref().find(|w| *w == "GTID")?;
    Gtid::parse(words.next()?).ok()
}

/// `relay-bin.000009` -> `relay-bin.000010`; `None` for a name without a number.
fn next_file(name: &str) -> Option<String> {
    let (base, num) = name.rsplit_once('.')?;
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = num.parse().ok()?;
    Some(format!("{base}.{:0width$}", n + 1, width = num.len()))
}

/// What a replica received, and where applying it starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Received {
    /// Executed and received, canonical text (MySQL a GTID set, MariaDB a state).
    pub received: String,
    /// MariaDB: what it applied (a position), for the log.
    pub applied: String,
    /// It replicates from a source (a replica status row with a host).
    pub replica: bool,
    /// Its applier runs.
    pub applying: bool,
    /// MariaDB, when the relay log was read: the first transaction not applied yet.
    pub relay_from: Option<(String, u64)>,
}

/// What `s` has executed and received (see the module docs).
///
/// # Errors
/// `sql-failed`; `corrupt` for a GTID text that does not parse; `incomplete` when
/// the relay log could not be read to its end.
pub fn received(ctx: &Context, s: &mut Server) -> Result<Received> {
    match s.flavor {
        Flavor::Mysql => mysql_received(s),
        Flavor::Mariadb => mariadb_received(ctx, s),
    }
}

pub(crate) fn mysql_set(server: &str, what: &str, text: &str) -> Result<GtidSet> {
    GtidSet::parse(&text.replace('\n', "")).map_err(|e| Failure::new("corrupt", format!("{server}: {what}: {e}")))
}

fn mysql_received(s: &mut Server) -> Result<Received> {
    let executed = s.value("SELECT @@global.gtid_executed")?.unwrap_or_default();
    let mut set = mysql_set(&s.name, "gtid_executed", &executed)?;
    let rows = s.rows(
        "SELECT RECEIVED_TRANSACTION_SET FROM performance_schema.replication_connection_status \
         WHERE RECEIVED_TRANSACTION_SET <> ''",
    )?;
    for row in &rows {
        set = set.union(&mysql_set(&s.name, "RECEIVED_TRANSACTION_SET", &text(row, 0).unwrap_or_default())?);
    }
    let status = s.rows("SHOW REPLICA STATUS")?;
    let replica = column(&status, &["Source_Host"]).is_some_and(|h| !h.is_empty());
    let applying = column(&status, &["Replica_SQL_Running"]).as_deref() == Some("Yes");
    Ok(Received { received: set.to_string(), replica, applying, ..Received::default() })
}

pub(crate) fn mariadb_list(server: &str, what: &str, text: &str) -> Result<GtidList> {
    GtidList::parse(text).map_err(|e| Failure::new("corrupt", format!("{server}: {what}: {e}")))
}

fn mariadb_received(ctx: &Context, s: &mut Server) -> Result<Received> {
    let mut all = GtidList::new();
    for var in ["gtid_binlog_state", "gtid_current_pos", "gtid_slave_pos"] {
        let v = s.value(&format!("SELECT @@global.{var}"))?.unwrap_or_default();
        all = all.union(&mariadb_list(&s.name, var, &v)?);
    }
    let applied = all.position();
    let status = s.rows("SHOW SLAVE STATUS")?;
    let replica = column(&status, &["Master_Host"]).is_some_and(|h| !h.is_empty());
    let applying = column(&status, &["Slave_SQL_Running"]).as_deref() == Some("Yes");
    let io_pos = column(&status, &["Gtid_IO_Pos"]).unwrap_or_default();
    let mut recv = all.union(&mariadb_list(&s.name, "Gtid_IO_Pos", &io_pos)?);
    let mut relay_from = None;
    if replica && (!applying || io_pos.is_empty()) {
        let file = column(&status, &["Relay_Log_File"]).unwrap_or_default();
        let file = file.rsplit('/').next().unwrap_or_default().to_owned();
        let pos = column(&status, &["Relay_Log_Pos"]).unwrap_or_default();
        let pos: u64 = if pos.is_empty() {
            4
        } else {
            pos.parse().map_err(|_| Failure::new("sql-failed", format!("{}: Relay_Log_Pos is {pos:?}", s.name)))?
        };
        if next_file(&file).is_some() {
            let scan = scan(s, &file, pos, &applied, ctx.query_timeout)?;
            recv = recv.union(&scan.gtids);
            relay_from = scan.first_unapplied;
        }
    }
    Ok(Received { received: recv.to_string(), applied: applied.to_string(), replica, applying, relay_from })
}

/// A column of the first row by name (either flavor's name), `None` when there is
/// no row or no such column.
fn column(rows: &[Row], names: &[&str]) -> Option<String> {
    let row = rows.first()?;
    let i = row.columns_ref().iter().position(|c| names.iter().any(|n| c.name_str() == *n))?;
    Some(text(row, i).unwrap_or_default())
}

/// Reads `s`'s relay log from `file`:`pos` to its end. A file the server says it
/// does not have ends the scan when the next one is missing too (purged while we
/// read, or past the end); each file must be read within `within`.
///
/// # Errors
/// `incomplete` when a read failed or did not finish; `corrupt` (see
/// [`RelayScan::event`]).
pub fn scan(s: &mut Server, file: &str, pos: u64, applied: &GtidList, within: Duration) -> Result<RelayScan> {
    let mut state = RelayScan::default();
    let (mut file, mut pos, mut missing) = (file.to_owned(), pos, 0);
    while missing < 2 {
        let q = format!("SHOW RELAYLOG EVENTS IN {} FROM {pos}", crate::sql::string(&file));
        match read_file(s, &q, &mut state, applied, Instant::now() + within) {
            Ok(()) => missing = 0,
            Err(ReadError::Missing) => missing += 1,
            Err(ReadError::Failed(why)) => {
                return Err(Failure::new(
                    "incomplete",
                    format!(
                        "{}: reading its relay log {file} did not finish ({why}; QUERY_TIMEOUT {}s): \
                         what it received is unknown",
                        s.name,
                        within.as_secs_f64()
                    ),
                ));
            }
            Err(ReadError::Corrupt(f)) => return Err(f),
        }
        let Some(next) = next_file(&file) else { break };
        (file, pos) = (next, 4);
    }
    Ok(state)
}

enum ReadError {
    Missing,
    Failed(String),
    Corrupt(Failure),
}

fn read_file(
    s: &mut Server,
    q: &str,
    state: &mut RelayScan,
    applied: &GtidList,
    deadline: Instant,
) -> std::result::Result<(), ReadError> {
    let failed = |e: &mysql::Error| match e {
        mysql::Error::MySqlError(m)
            if m.code == ER_ERROR_WHEN_EXECUTING_COMMAND && m.message.contains("Could not find target log") =>
        {
            ReadError::Missing
        }
        other => ReadError::Failed(other.to_string()),
    };
    let mut result = s.conn().query_iter(q).map_err(|e| failed(&e))?;
    let set = result.iter().ok_or_else(|| ReadError::Failed("no result set".into()))?;
    for row in set {
        let row = row.map_err(|e| failed(&e))?;
        if Instant::now() > deadline {
            return Err(ReadError::Failed("timed out".into()));
        }
        // Log_name, Pos, Event_type, Server_id, End_log_pos, Info.
        let f = text(&row, 0).unwrap_or_default();
        let p = text(&row, 1).unwrap_or_default();
        let p: u64 =
            p.parse().map_err(|_| ReadError::Corrupt(Failure::new("corrupt", format!("relay log {f}: Pos {p:?}"))))?;
        let kind = text(&row, 2).unwrap_or_default();
        let info = text(&row, 5).unwrap_or_default();
        state.event(applied, &f, p, &kind, &info).map_err(ReadError::Corrupt)?;
    }
    Ok(())
}

/// `mysql-hook-agent received`: what member `RECEIVED_POD` executed and received,
/// canonical text, written to the file `RECEIVED_OUT` (result `received`, the set
/// in `gtid`).
///
/// # Errors
/// `bad-env`, `unreachable`, and those of [`received`].
pub fn run_received(ctx: &Context, env: &dyn Env) -> Result<protocol::Report> {
    let pod = member(ctx, env, "RECEIVED_POD")?;
    let out = env.var("RECEIVED_OUT").filter(|o| !o.is_empty());
    let out = out.ok_or_else(|| Failure::new("bad-env", "RECEIVED_OUT is required"))?;
    let mut s = Server::connect(ctx, &pod).map_err(|e| Failure::new("unreachable", e.to_string()))?;
    let r = received(ctx, &mut s)?;
    std::fs::write(&out, &r.received).map_err(|e| Failure::new("bad-env", format!("RECEIVED_OUT: {out}: {e}")))?;
    Ok(protocol::Report {
        pod: Some(pod),
        gtid: Some(r.received),
        message: r.relay_from.map(|(f, p)| format!("relay log read; not applied from {f}:{p}")),
        ..protocol::Report::new("received")
    })
}

/// `mysql-hook-agent drain`: member `DRAIN_POD`, whose receiver is stopped (nothing
/// new arrives), applies everything it received, within `DRAIN_SECONDS`. Result
/// `drained`; error `not-drained` when the applier did not get there in time (it
/// keeps running).
///
/// # Errors
/// `bad-env`, `unreachable`, `not-drained`, and those of [`received`].
pub fn run_drain(ctx: &Context, env: &dyn Env) -> Result<protocol::Report> {
    let pod = member(ctx, env, "DRAIN_POD")?;
    let seconds = env.var("DRAIN_SECONDS").unwrap_or_default();
    let seconds: u64 = seconds
        .parse()
        .ok()
        .filter(|s| *s <= 86_400)
        .ok_or_else(|| Failure::new("bad-env", format!("DRAIN_SECONDS '{seconds}' is not a number of seconds")))?;
    let mut s = Server::connect(ctx, &pod).map_err(|e| Failure::new("unreachable", e.to_string()))?;
    let r = received(ctx, &mut s)?;
    let report = |message: String| protocol::Report {
        pod: Some(pod.clone()),
        gtid: Some(r.received.clone()),
        message: Some(message),
        ..protocol::Report::new("drained")
    };
    let wait = match s.flavor {
        Flavor::Mysql => {
            // The applier may already run, or have stopped on an error; either way
            // the wait below says whether it got there.
            let _ = s.exec("START REPLICA SQL_THREAD");
            format!("SELECT WAIT_FOR_EXECUTED_GTID_SET({}, {seconds})", crate::sql::string(&r.received))
        }
        Flavor::Mariadb => {
            if !r.replica {
                return Ok(report("not a replica: nothing to apply".into()));
            }
            if let (false, Some((file, pos))) = (r.applying, &r.relay_from) {
                s.exec(&format!(
                    "CHANGE MASTER TO MASTER_USE_GTID=no, RELAY_LOG_FILE={}, RELAY_LOG_POS={pos}; START SLAVE SQL_THREAD",
                    crate::sql::string(file)
                ))?;
            }
            let pos = GtidList::parse(&r.received).map(|l| l.position().to_string()).unwrap_or_default();
            format!("SELECT MASTER_GTID_WAIT({}, {seconds})", crate::sql::string(&pos))
        }
    };
    if r.received.is_empty() {
        return Ok(report("nothing received".into()));
    }
    // The wait outlasts QUERY_TIMEOUT: a session of its own with room for it.
    let mut waiting = ctx.clone();
    waiting.query_timeout = Duration::from_secs(seconds + 30);
    let mut w = Server::connect(&waiting, &pod).map_err(|e| Failure::new("unreachable", e.to_string()))?;
    let from = r.relay_from.as_ref().map(|(f, p)| format!(" from its relay log {f}:{p}")).unwrap_or_default();
    match w.value(&wait)?.as_deref() {
        Some("0") => Ok(report(format!("applied everything received{from} (applied before: [{}])", r.applied))),
        other => Err(Failure::new(
            "not-drained",
            format!(
                "{pod}: not everything received [{}] applied within {seconds}s{from} (wait said {other:?})",
                r.received
            ),
        )),
    }
}

fn member(ctx: &Context, env: &dyn Env, var: &str) -> Result<String> {
    let pod = env.var(var).unwrap_or_default();
    if ctx.addr(&pod).is_none() {
        return Err(Failure::new("bad-env", format!("{var} '{pod}' is not in PODS")));
    }
    Ok(pod)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(applied: &str, events: &[(&str, u64, &str, &str)]) -> Result<RelayScan> {
        let applied = GtidList::parse(applied).map_err(|e| Failure::new("corrupt", e.to_string()))?;
        let mut s = RelayScan::default();
        for (f, p, k, i) in events {
            s.event(&applied, f, *p, k, i)?;
        }
        Ok(s)
    }

    #[test]
    fn complete_transactions_count_and_the_first_unapplied_is_found() -> Result<()> {
        let s = scan(
            "0-1-18",
            &[
                ("r.000002", 4, "Format_desc", "Server ver"),
                ("r.000002", 300, "Gtid", "BEGIN GTID 0-1-18"),
                ("r.000002", 340, "Xid", "COMMIT /* xid=1 */"),
                ("r.000002", 380, "Gtid", "BEGIN GTID 0-1-19 cid=7"),
                ("r.000002", 420, "Query", "use `hook`; INSERT INTO t VALUES (1)"),
                ("r.000002", 460, "Xid", "COMMIT /* xid=2 */"),
                ("r.000003", 4, "Gtid", "GTID 0-1-20"),
                ("r.000003", 50, "Query", "CREATE TABLE x (a INT)"),
                // Cut off: no commit arrived.
                ("r.000003", 90, "Gtid", "BEGIN GTID 0-1-21"),
                ("r.000003", 130, "Query", "INSERT INTO t VALUES (2)"),
            ],
        )?;
        assert_eq!(s.gtids.to_string(), "0-1-20");
        assert_eq!(s.first_unapplied, Some(("r.000002".to_owned(), 380)));
        Ok(())
    }

    /// Events as MariaDB 10.11 lists them (from `tests/scripts/test_pure.py`,
    /// where the bash parser was tested).
    const RELAY: &[(&str, u64, &str, &str)] = &[
        ("relay-bin.000002", 4, "Format_desc", "Server ver: 10.11.19-MariaDB-log, Binlog ver: 4"),
        ("relay-bin.000002", 621, "Gtid", "GTID 0-1-4"),
        ("relay-bin.000002", 663, "Query", "CREATE DATABASE hook"),
        ("relay-bin.000002", 793, "Gtid", "BEGIN GTID 0-1-5"),
        ("relay-bin.000002", 835, "Annotate_rows", "INSERT INTO hook.t VALUES (1)"),
        ("relay-bin.000002", 900, "Write_rows_v1", "table_id: 18 flags: STMT_END_F"),
        ("relay-bin.000002", 950, "Xid", "COMMIT /* xid=57 */"),
        ("relay-bin.000002", 981, "Gtid", "BEGIN GTID 0-1-6"),
        ("relay-bin.000002", 1023, "Write_rows_v1", "table_id: 18 flags: STMT_END_F"),
        ("relay-bin.000002", 1075, "Rotate", "relay-bin.000003;pos=4"),
        ("relay-bin.000003", 4, "Format_desc", "Server ver: 10.11.19-MariaDB-log, Binlog ver: 4"),
        ("relay-bin.000003", 256, "Xid", "COMMIT /* xid=58 */"),
        ("relay-bin.000003", 287, "Gtid", "BEGIN GTID 0-2-7 cid=12"),
        ("relay-bin.000003", 329, "Write_rows_v1", "table_id: 18 flags: STMT_END_F"),
    ];

    #[test]
    fn a_mariadb_relay_log_as_the_server_lists_it() -> Result<()> {
        // 0-1-4 (DDL), 0-1-5, 0-1-6 (spans two files) are complete; 0-2-7 is not.
        let s = scan("0-1-4", RELAY)?;
        assert_eq!(s.gtids.to_string(), "0-1-6");
        assert_eq!(s.first_unapplied, Some(("relay-bin.000002".to_owned(), 793)));
        let s = scan("0-1-6", RELAY)?;
        assert_eq!((s.gtids.to_string(), s.first_unapplied), ("0-1-6".to_owned(), None));
        Ok(())
    }

    #[test]
    fn a_transaction_spans_files_and_a_rollback_does_not_count() -> Result<()> {
        let s = scan(
            "",
            &[
                ("r.000002", 300, "Gtid", "BEGIN GTID 0-2-5"),
                ("r.000003", 4, "Query", "COMMIT"),
                ("r.000003", 40, "Gtid", "BEGIN GTID 0-2-6"),
                ("r.000003", 80, "Query", "ROLLBACK"),
            ],
        )?;
        assert_eq!(s.gtids.to_string(), "0-2-5");
        assert_eq!(s.first_unapplied, Some(("r.000002".to_owned(), 300)), "nothing applied in domain 0");
        Ok(())
    }

    #[test]
    fn a_gtid_event_that_does_not_parse_is_corrupt() {
        for info in ["BEGIN GTID 0-1-$(id)", "BEGIN GTID", "BEGIN"] {
            let e = scan("", &[("r.000002", 4, "Gtid", info)]);
            assert_eq!(e.map_err(|f| f.reason), Err("corrupt"), "{info}");
        }
    }

    #[test]
    fn relay_files_are_numbered() {
        assert_eq!(next_file("relay-bin.000009").as_deref(), Some("relay-bin.000010"));
        assert_eq!(next_file("relay-bin.999999").as_deref(), Some("relay-bin.1000000"));
        assert_eq!(next_file("relay-bin"), None);
        assert_eq!(next_file("relay-bin.0x1"), None);
    }
}

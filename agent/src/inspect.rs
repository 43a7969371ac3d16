//! `mysql-hook-agent inspect`: what every member says about itself, for the hook's
//! `status.servers` (the `inspect` Job, run whenever the primary or a member's
//! readiness changes).
//!
//! It reads and changes nothing: one session per member, a handful of reads each.
//! Per member, in `PODS` order, the report holds what is known (see
//! [`protocol::ServerReport`]): whether it answers, whether it is writable, its
//! source and thread states, lag and last error, its GTID position, whether it
//! holds a partial seed, the transactions the primary (`PRIMARY`) lacks, and on
//! the primary its semi-sync state. A value the server reports that does not
//! parse is left out, never guessed; a GTID text that does not parse gives no
//! `errant` entry (nothing is compared with a guess).
//!
//! Texts are clipped (GTID 120, error 300, errant 80 characters), and a line
//! still too long for the 4 KiB termination message loses the GTID texts, then
//! the errors ([`protocol::Report::line`]), never `writable` or `errant`. The
//! hook reads this line and the one `inspect.sh` wrote with one type.
//!
//! Report: `{"result":"inspected","primary":…,"servers":[…]}`; errors `bad-env`.

use protocol::{
    ServerReport,
    gtid::{mariadb::GtidList, mysql::GtidSet},
};

use crate::{
    Report, Result,
    context::{Context, Env, Flavor},
    server::Server,
    status::{ReplicaStatus, Thread},
};

/// The command (see the module docs).
///
/// # Errors
/// None past the environment: a member that does not answer is reported as such.
pub fn run(ctx: &Context, env: &dyn Env) -> Result<Report> {
    let primary = env.var("PRIMARY").unwrap_or_default();
    let mut sessions: Vec<(String, Option<Server>)> =
        ctx.pods.iter().map(|(name, _)| (name.clone(), Server::connect(ctx, name).ok())).collect();
    let primary_executed = sessions
        .iter_mut()
        .find(|(name, _)| *name == primary)
        .and_then(|(_, s)| s.as_mut())
        .and_then(|s| executed(s, ctx.flavor));
    let servers = sessions
        .iter_mut()
        .map(|(name, session)| match session {
            None => ServerReport { name: name.clone(), up: Some(false), ..ServerReport::default() },
            Some(s) => member(ctx, s, name, *name == primary, primary_executed.as_ref()),
        })
        .collect();
    Ok(Report { primary: Some(primary), servers: Some(servers), ..Report::new("inspected") })
}

/// A member's executed transactions, typed for comparison (MySQL `gtid_executed`,
/// MariaDB `gtid_binlog_state`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Executed {
    Mysql(GtidSet),
    Mariadb(GtidList),
}

impl Executed {
    /// What `self` holds that `primary` lacks, as text (empty: nothing).
    fn errant(&self, primary: &Self) -> Option<String> {
        let left = match (self, primary) {
            (Self::Mysql(a), Self::Mysql(b)) => a.subtract(b).to_string(),
            (Self::Mariadb(a), Self::Mariadb(b)) => a.subtract(b).to_string(),
            _ => return None,
        };
        (!left.is_empty()).then_some(left)
    }
}

fn executed(s: &mut Server, flavor: Flavor) -> Option<Executed> {
    match flavor {
        Flavor::Mysql => {
            let text = s.value("SELECT @@global.gtid_executed").ok()??;
            GtidSet::parse(&text.replace('\n', "")).ok().map(Executed::Mysql)
        }
        Flavor::Mariadb => {
            let text = s.value("SELECT @@global.gtid_binlog_state").ok()??;
            GtidList::parse(&text).ok().map(Executed::Mariadb)
        }
    }
}

fn member(ctx: &Context, s: &mut Server, name: &str, is_primary: bool, primary: Option<&Executed>) -> ServerReport {
    let mut r = ServerReport { name: name.to_owned(), ..ServerReport::default() };
    let Ok(writable) = s.writable() else {
        r.up = Some(false);
        return r;
    };
    r.up = Some(true);
    r.writable = Some(writable);
    let q = match ctx.flavor {
        Flavor::Mysql => "SHOW REPLICA STATUS",
        Flavor::Mariadb => "SHOW SLAVE STATUS",
    };
    if let Ok(Some(status)) = s.rows(q).and_then(|rows| ReplicaStatus::from_rows(name, &rows)) {
        r.source = Some(member_at(ctx, &status.source_host, status.source_port));
        r.io = Some(thread(status.receiver).to_owned());
        r.sql = Some(thread(status.applier).to_owned());
        r.lag = status.lag.and_then(|l| i64::try_from(l).ok());
        let error = if status.receiver_error.is_empty() {
            worker_error(s, ctx.flavor, &status.applier_error).unwrap_or(status.applier_error)
        } else {
            status.receiver_error
        };
        r.error = (!error.is_empty()).then(|| clip(&error, 300));
    }
    let position = match ctx.flavor {
        Flavor::Mysql => "SELECT @@global.gtid_executed",
        Flavor::Mariadb => "SELECT @@global.gtid_binlog_pos",
    };
    // One line: MySQL folds a long gtid_executed over several.
    r.gtid = Some(clip(&s.value(position).ok().flatten().unwrap_or_default().replace('\n', ""), 120));
    r.seeding = seeding(s, ctx.flavor);
    if !is_primary
        && let Some(primary) = primary
        && let Some(mine) = executed(s, ctx.flavor)
    {
        r.errant = mine.errant(primary).map(|e| clip(&e, 80));
    }
    if is_primary {
        let (enabled, clients) = match ctx.flavor {
            Flavor::Mysql => ("SELECT @@global.rpl_semi_sync_source_enabled", "Rpl_semi_sync_source_clients"),
            Flavor::Mariadb => ("SELECT @@global.rpl_semi_sync_master_enabled", "Rpl_semi_sync_master_clients"),
        };
        r.semi_sync = match s.value(enabled).ok().flatten().as_deref() {
            Some("1") => Some(true),
            Some("0") => Some(false),
            _ => None,
        };
        // A status variable by its name, through the schema (no LIKE pattern: `_`
        // would match any character; names compare case-insensitively there).
        let q = format!(
            "SELECT VARIABLE_VALUE FROM {} WHERE VARIABLE_NAME = {}",
            match ctx.flavor {
                Flavor::Mysql => "performance_schema.global_status",
                Flavor::Mariadb => "information_schema.GLOBAL_STATUS",
            },
            crate::sql::string(clients)
        );
        r.semi_sync_clients = s.value(&q).ok().flatten().and_then(|v| v.parse().ok());
    }
    r
}

/// MySQL's multi-threaded applier reports "Coordinator stopped because there
/// were error(s) in the worker(s)…" and the transaction's id before the cause,
/// which clipping would cut: the failed worker's own message says what went
/// wrong (`performance_schema.replication_applier_status_by_worker`).
fn worker_error(s: &mut Server, flavor: Flavor, applier_error: &str) -> Option<String> {
    if flavor != Flavor::Mysql || !applier_error.starts_with("Coordinator stopped") {
        return None;
    }
    let q = "SELECT LAST_ERROR_MESSAGE FROM performance_schema.replication_applier_status_by_worker \
             WHERE LAST_ERROR_NUMBER <> 0 ORDER BY LAST_ERROR_TIMESTAMP DESC LIMIT 1";
    s.value(q).ok().flatten().filter(|m| !m.is_empty())
}

/// Whether the server holds a partial copy: MySQL's clone in progress, or the
/// mark a MariaDB seed leaves (`_mysqlhook.seeding`).
pub(crate) fn seeding(s: &mut Server, flavor: Flavor) -> bool {
    let q = match flavor {
        Flavor::Mysql => "SELECT COUNT(*) FROM performance_schema.clone_status WHERE STATE = 'In Progress'",
        Flavor::Mariadb => {
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '_mysqlhook' AND table_name = 'seeding'"
        }
    };
    s.value(q).ok().flatten().is_some_and(|n| n != "0")
}

/// The member with that address, or `host:port`.
fn member_at(ctx: &Context, host: &str, port: u16) -> String {
    ctx.member_at(host, port).map_or_else(|| format!("{host}:{port}"), str::to_owned)
}

fn thread(t: Thread) -> &'static str {
    match t {
        Thread::Yes => "Yes",
        Thread::No => "No",
        Thread::Connecting => "Connecting",
    }
}

/// At most `n` characters, then `...`.
fn clip(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_clipped_by_characters() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "abc...");
        assert_eq!(clip("ééééé", 2), "éé...");
    }

    #[test]
    fn errant_is_what_the_primary_lacks() {
        let set = |t: &str| Executed::Mysql(GtidSet::parse(t).unwrap_or_default());
        let primary = set("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10");
        assert_eq!(set("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-7").errant(&primary), None);
        assert_eq!(
            set("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10,4e11fa47-71ca-11e1-9e33-c80aa9429562:1").errant(&primary),
            Some("4e11fa47-71ca-11e1-9e33-c80aa9429562:1".to_owned())
        );
        let list = |t: &str| Executed::Mariadb(GtidList::parse(t).unwrap_or_default());
        assert_eq!(list("0-1-5").errant(&list("0-1-9")), None);
        assert_eq!(list("0-1-5,0-4-6").errant(&list("0-1-9")), Some("0-4-6".to_owned()));
    }
}

//! Scheduled events follow the primary (issue 31.8).
//!
//! A replica's copy of an event is disabled there by the server itself (MariaDB
//! `SLAVESIDE_DISABLED`, MySQL `REPLICA_SIDE_DISABLED`, `SLAVESIDE_DISABLED` before
//! 8.2), so that only the source runs it. Nothing enabled them again when a replica
//! was promoted: an application's events stopped for good at the first role change.
//! And a demoted old primary kept its own enabled: on MariaDB an event whose
//! definer may write past `read_only` (`READ ONLY ADMIN`, root's) went on writing
//! there, transactions no other member has (errant), which a later role change
//! must then rebuild or refuse.
//!
//! So every round of the agent sidecar, and every fence:
//! - on the writable primary, an event disabled as a replica's copy is enabled
//!   (`ALTER EVENT … ENABLE`);
//! - on a read-only MariaDB server, an enabled event is disabled as a replica's
//!   copy (`ALTER EVENT … DISABLE ON SLAVE`). MySQL needs nothing there:
//!   `super_read_only` refuses every event's writes (and would refuse the
//!   `ALTER` too).
//!
//! Both without the binary log: nothing of it is replicated (the replicas' copies
//! stay as the server marks them) or counted as the server's own transaction, so
//! an `ALTER` that lands on a server fenced meanwhile is no errant transaction.
//! Each names the event's definer, so the event runs as the account it ran as,
//! never as the operator's.
//!
//! An event the user disabled (`DISABLED`) is never touched.

use crate::{
    Failure, Result,
    context::{Context, Env, Flavor},
    server::{Server, text},
    sql,
};

/// What the server's copy of an event looks like when the server disabled it as a
/// replica's: MariaDB and MySQL before 8.2 `SLAVESIDE_DISABLED`, MySQL 8.2 and
/// later `REPLICA_SIDE_DISABLED`.
const REPLICA_SIDE: &str = "STATUS IN ('SLAVESIDE_DISABLED', 'REPLICA_SIDE_DISABLED')";

/// An event: its quoted `schema.name`, and its definer, quoted, as the `ALTER`
/// must name it (without it the server may make the altering account, the
/// operator's, the definer the event then runs as).
struct Event {
    name: String,
    definer: String,
}

/// The events of `s` whose status satisfies `condition`.
fn events(s: &mut Server, condition: &str) -> Result<Vec<Event>> {
    let rows = s.rows(&format!(
        "SELECT event_schema, event_name, definer FROM information_schema.events WHERE {condition} \
         ORDER BY event_schema, event_name"
    ))?;
    rows.iter()
        .map(|r| {
            let name = format!(
                "{}.{}",
                sql::ident(&text(r, 0).unwrap_or_default()),
                sql::ident(&text(r, 1).unwrap_or_default())
            );
            // `user@host`: the host has no `@`, the user may.
            let definer = text(r, 2).unwrap_or_default();
            let (user, host) = definer.rsplit_once('@').ok_or_else(|| {
                Failure::new("sql-failed", format!("{}: event {name} has the definer {definer:?}", s.name))
            })?;
            Ok(Event { name, definer: sql::account(user, host) })
        })
        .collect()
}

/// Brings `s`'s events in line with its role (see the module docs); the events
/// changed, quoted. A server that is neither writable nor MariaDB is left alone.
///
/// # Errors
/// The server's error.
pub fn reconcile(s: &mut Server) -> Result<Vec<String>> {
    let (changed, to) = if s.writable()? {
        (events(s, REPLICA_SIDE)?, "ENABLE")
    } else if s.flavor == Flavor::Mariadb {
        (events(s, "STATUS = 'ENABLED'")?, "DISABLE ON SLAVE")
    } else {
        return Ok(Vec::new());
    };
    if changed.is_empty() {
        return Ok(Vec::new());
    }
    // Never binary-logged: not replicated (the replicas' copies stay as the
    // server marks them), never a transaction of this server's own, so an ALTER
    // that lands on a server fenced meanwhile is not an errant transaction.
    s.exec("SET SESSION sql_log_bin = 0")?;
    for e in &changed {
        s.exec(&format!("ALTER DEFINER = {} EVENT {} {to}", e.definer, e.name))?;
    }
    s.exec("SET SESSION sql_log_bin = 1")?;
    Ok(changed.into_iter().map(|e| e.name).collect())
}

/// `mysql-hook-agent events`: [`reconcile`] on member `POD_NAME`. Result `events`
/// with the events changed in `message` (none: nothing written).
///
/// # Errors
/// `bad-env`, `unreachable`, the server's error.
pub fn run(ctx: &Context, env: &dyn Env) -> Result<protocol::Report> {
    let pod = env.var("POD_NAME").unwrap_or_default();
    if ctx.addr(&pod).is_none() {
        return Err(Failure::new("bad-env", format!("POD_NAME '{pod}' is not in PODS")));
    }
    let mut s = Server::connect(ctx, &pod).map_err(|e| Failure::new("unreachable", e.to_string()))?;
    let changed = reconcile(&mut s)?;
    Ok(protocol::Report {
        pod: Some(pod),
        message: Some(if changed.is_empty() { "in line".to_owned() } else { changed.join(", ") }),
        ..protocol::Report::new("events")
    })
}

//! Client sessions stranded on an old primary (issue 35.1).
//!
//! A role change fences the old primary: read-only, every client session killed.
//! The clients reconnect at once, through the `-primary` Service, which still
//! leads to the old primary until the hook has seen the role change end and
//! moved it (seconds later). Those new sessions land on a read-only server, and a
//! client that keeps its connections (a pool that does not drop one on error
//! 1290, read-only; sysbench) stays there: every write of it fails for as long as
//! the connection lives. Measured with sysbench through the Service: no
//! transaction at all for the rest of the run after a switchover.
//!
//! So, while this server is read-only and may have been the primary a moment
//! ago (its agent saw it writable, or its mounted record still names it: the
//! record reaches the pod up to a minute late, in either direction), its
//! agent asks the Service every second which server it leads to. Once that is
//! another server, the Service has moved: every client session here was opened
//! through it before, and is killed once; the clients come back through the
//! Service to the new primary. Sessions opened after that (through `-replicas`,
//! which lists this server only once the hook has recorded the new primary) are
//! left alone: the kill happens once per server the Service moved to.
//!
//! The question goes through the Service itself, not through the Kubernetes API
//! (server pods hold no API token): its answer is exactly where a client
//! reconnecting now would land. A Service that cannot be reached from the pod (no
//! kube-proxy, a policy) answers nothing, and nothing is killed.
//!
//! Data safety: this only ends client sessions on a read-only server; no role,
//! no replication channel and no write is touched (the replication threads are
//! never killed, [`crate::fence::victims`]).

use crate::{
    Result,
    context::{Addr, Context},
    fence::Role,
    server::{Server, text},
};

/// How long the Service's answer is waited for.
const ASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether the Service may have led writing clients to this server: it is
/// read-only, and its agent saw it writable since the last release
/// (`was_writable`) or its mounted record names it as the primary.
#[must_use]
pub fn suspect(r: &Role, was_writable: bool) -> bool {
    !r.writable && (was_writable || r.recorded_primary.as_deref() == Some(r.pod.as_str()))
}

/// A server, as the Service's answer names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub server_id: u64,
    /// The member it is (by `report_host` and `report_port`), else its
    /// `report_host` (`None` when the server has none).
    pub name: Option<String>,
}

/// What one round found: the server the Service leads to, when that is another
/// one than this and not the one the last kill was for.
#[must_use]
pub fn moved_to(own_id: u64, routed: Option<&Answer>, killed_for: Option<u64>) -> Option<&Answer> {
    routed.filter(|a| a.server_id != own_id && killed_for != Some(a.server_id))
}

/// The memory of one server's agent: whether it saw the server writable since
/// the last release, and the server the last kill was for.
#[derive(Debug, Default)]
pub struct Watch {
    was_writable: bool,
    killed_for: Option<u64>,
}

/// What a kill did, for the agent's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    pub to: Answer,
    pub killed: usize,
}

impl Released {
    #[must_use]
    pub fn report(&self, pod: &str) -> protocol::Report {
        let to = self.to.name.clone().unwrap_or_else(|| format!("server_id {}", self.to.server_id));
        protocol::Report {
            message: Some(format!(
                "the primary Service leads to {to}, no longer to read-only {pod}: {} client session(s) opened \
                 through it here killed, to reconnect there",
                self.killed
            )),
            primary: self.to.name.clone(),
            ..protocol::Report::new("released-clients")
        }
    }
}

/// The server `addr` leads to, asked over a fresh session; `None` when it does
/// not answer.
#[must_use]
pub fn ask_service(ctx: &Context, addr: &Addr) -> Option<Answer> {
    // Quick: a Service nothing routes (no kube-proxy) drops the connection
    // attempt, and the next round asks again anyway.
    let quick = Context { connect_timeout: ASK_TIMEOUT, query_timeout: ASK_TIMEOUT, ..ctx.clone() };
    let mut s = Server::connect_via(&quick, "the primary Service", addr).ok()?;
    let rows = s.rows("SELECT @@global.server_id, @@global.report_host, @@global.report_port").ok()?;
    let row = rows.first()?;
    let host = text(row, 1).filter(|n| !n.is_empty());
    let port: Option<u16> = text(row, 2).and_then(|p| p.parse().ok());
    // The member whose address the server reports (init.sh sets report_host and
    // report_port from it); else the reported host as it is.
    let member = ctx.pods.iter().find(|(_, a)| Some(&a.host) == host.as_ref() && Some(a.port) == port);
    Some(Answer { server_id: text(row, 0)?.parse().ok()?, name: member.map(|(n, _)| n.clone()).or(host) })
}

/// This server's `server_id`.
///
/// # Errors
/// The server's error.
pub fn own_id(s: &mut Server) -> Result<u64> {
    let v = s.value("SELECT @@global.server_id")?.unwrap_or_default();
    v.parse().map_err(|_| crate::Failure::new("sql-failed", format!("server_id '{v}' is not a number")))
}

impl Watch {
    /// Whether `r` is [`suspect`]; remembers a writable server, and forgets the
    /// last kill once the server is no longer suspect (writable, or its record
    /// moved on and it was released), so a later role change starts afresh.
    pub fn suspect(&mut self, r: &Role) -> bool {
        if r.writable {
            self.was_writable = true;
        }
        let suspect = suspect(r, self.was_writable);
        if !suspect {
            self.killed_for = None;
        }
        suspect
    }

    /// One round for a [`suspect`] server: kills the client sessions through
    /// `local` when `routed` names another server than `own_id` for the first
    /// time.
    ///
    /// # Errors
    /// The local server's error.
    pub fn round(&mut self, local: &mut Server, own_id: u64, routed: Option<&Answer>) -> Result<Option<Released>> {
        let Some(to) = moved_to(own_id, routed, self.killed_for) else { return Ok(None) };
        let killed = crate::fence::kill_clients(local)?;
        self.killed_for = Some(to.server_id);
        self.was_writable = false;
        Ok(Some(Released { to: to.clone(), killed }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(pod: &str, writable: bool, recorded: &str) -> Role {
        Role {
            pod: pod.to_owned(),
            writable,
            recorded_primary: Some(recorded.to_owned()).filter(|r| !r.is_empty()),
            ..Role::default()
        }
    }

    #[test]
    fn only_a_read_only_server_that_was_or_is_recorded_primary_is_suspect() {
        assert!(suspect(&role("db-0", false, "db-0"), false), "a fenced old primary, its record not refreshed");
        assert!(suspect(&role("db-0", false, "db-1"), true), "fenced, its record already refreshed");
        assert!(!suspect(&role("db-0", true, "db-0"), true), "the primary");
        assert!(!suspect(&role("db-1", false, "db-0"), false), "a replica: only -replicas leads here");
        assert!(!suspect(&role("db-0", true, "db-1"), false), "writable: the fence's business, not this");
        assert!(!suspect(&role("db-0", false, ""), false), "no record");
    }

    #[test]
    fn the_watch_remembers_a_writable_server_until_it_is_released() {
        let mut w = Watch::default();
        assert!(!w.suspect(&role("db-0", false, "db-1")), "a replica since the agent started");
        assert!(!w.suspect(&role("db-0", true, "db-0")), "the primary");
        assert!(w.suspect(&role("db-0", false, "db-1")), "demoted, its record refreshed at once");
        w.killed_for = Some(2);
        w.was_writable = false; // what a release does
        assert!(!w.suspect(&role("db-0", false, "db-1")), "released: a replica like the others");
        assert_eq!(w.killed_for, None);
    }

    #[test]
    fn a_kill_happens_once_per_server_the_service_moved_to() {
        let other = Answer { server_id: 2, name: Some("db-1".to_owned()) };
        let me = Answer { server_id: 1, name: Some("db-0".to_owned()) };
        assert_eq!(moved_to(1, Some(&other), None), Some(&other), "moved: kill");
        assert_eq!(moved_to(1, Some(&other), Some(2)), None, "killed for it already");
        assert_eq!(moved_to(1, Some(&me), None), None, "the Service still leads here");
        assert_eq!(moved_to(1, None, None), None, "no answer: nothing is known");
        let third = Answer { server_id: 3, name: None };
        assert_eq!(moved_to(1, Some(&third), Some(2)), Some(&third), "moved on again");
    }

    #[test]
    fn the_report_names_where_the_clients_go() {
        let r = Released { to: Answer { server_id: 2, name: Some("db-1".to_owned()) }, killed: 3 };
        let line = r.report("db-0").line();
        assert!(line.contains(r#""result":"released-clients""#) && line.contains("3 client session(s)"), "{line}");
        assert!(line.contains(r#""primary":"db-1""#), "{line}");
        let r = Released { to: Answer { server_id: 7, name: None }, killed: 0 };
        assert!(r.report("db-0").line().contains("server_id 7"));
    }
}

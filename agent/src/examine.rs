//! `mysql-hook-agent examine`: what each member holds, read with nothing new
//! arriving, for a failover's choice (issue 31.8, ported from `failover.sh`).
//!
//! A failover promotes the member that holds every commit an acknowledgement
//! was given for; it can only tell which one that is once nothing more arrives.
//! So each member's receiver is stopped first (`STOP REPLICA IO_THREAD`, MariaDB
//! `STOP SLAVE IO_THREAD`) and the stop is verified (`Replica_IO_Running` /
//! `Slave_IO_Running` says `No`): the script ignored the statement's errors,
//! and a receiver that went on receiving (and acknowledging, semi-sync) made the
//! received set read next already stale. A member whose receiver cannot be shown
//! stopped is not examined, as if it did not answer: the quorum then decides
//! whether the failover may go on without it (never promote on a set that may
//! have grown since it was read).
//!
//! The members are examined at once, one thread each: a receiver stuck
//! connecting to the lost primary can hold its `STOP` for seconds, and the
//! script paid that once per member, in turn (real-server scenario 15: about 4
//! s of the time without a writable primary).
//!
//! Per member it reads: executed (MySQL `gtid_executed`, MariaDB
//! `gtid_binlog_state`, as the server writes them, after checking that they
//! parse), executed plus received ([`crate::relay::received`]) and the identity
//! its own transactions carry (MySQL `server_uuid`, MariaDB `server_id`).
//!
//! Input: `EXAMINE_PODS` (member names, whitespace separated, each in `PODS`),
//! `EXAMINE_OUT` (a directory). Output, per member: `EXAMINE_OUT/<pod>`, three
//! lines (executed, received, identity) when examined, else `EXAMINE_OUT/<pod>.why`
//! (one line: why not). Result `examined`, naming both lists.

use std::path::Path;

use crate::{
    Failure, Result,
    context::{Context, Env, Flavor},
    server::Server,
    status::{ReplicaStatus, Thread},
};

/// What a member holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holdings {
    pub executed: String,
    pub received: String,
    pub identity: String,
}

impl Holdings {
    /// The file's text: three lines.
    #[must_use]
    pub fn text(&self) -> String {
        format!("{}\n{}\n{}\n", self.executed, self.received, self.identity)
    }
}

/// Whether a receiver in this state may be trusted to receive nothing more.
#[must_use]
pub fn receiver_stopped(status: Option<&ReplicaStatus>) -> bool {
    status.is_none_or(|st| st.receiver == Thread::No)
}

/// Stops `s`'s receiver and verifies it stopped.
///
/// # Errors
/// `receiver-running` when the stop failed or the receiver still runs after it.
pub fn stop_receiver(s: &mut Server) -> Result<()> {
    if receiver_stopped(ReplicaStatus::read(s)?.as_ref()) {
        return Ok(());
    }
    let stop = match s.flavor {
        Flavor::Mysql => "STOP REPLICA IO_THREAD",
        Flavor::Mariadb => "STOP SLAVE IO_THREAD",
    };
    let stopped = s.exec(stop);
    let after = ReplicaStatus::read(s)?;
    if receiver_stopped(after.as_ref()) {
        return Ok(());
    }
    let why = match stopped {
        Err(f) => f.message,
        Ok(()) => format!("its receiver is {:?} after {stop}", after.map(|st| st.receiver)),
    };
    Err(Failure::new("receiver-running", format!("{}: {why}", s.name)))
}

/// One member: its receiver stopped, then what it holds.
///
/// # Errors
/// Why it is not examined.
pub fn examine(ctx: &Context, pod: &str) -> Result<Holdings> {
    let mut s = Server::connect(ctx, pod).map_err(|e| Failure::new("unreachable", e.to_string()))?;
    stop_receiver(&mut s)?;
    let (executed, identity) = match s.flavor {
        Flavor::Mysql => {
            let e = s.value("SELECT REPLACE(@@global.gtid_executed, '\\n', '')")?.unwrap_or_default();
            crate::relay::mysql_set(pod, "gtid_executed", &e)?;
            (e, s.value("SELECT @@global.server_uuid")?.unwrap_or_default())
        }
        Flavor::Mariadb => {
            let e = s.value("SELECT @@global.gtid_binlog_state")?.unwrap_or_default();
            crate::relay::mariadb_list(pod, "gtid_binlog_state", &e)?;
            (e, s.value("SELECT @@global.server_id")?.unwrap_or_default())
        }
    };
    if identity.is_empty() || !identity.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
        return Err(Failure::new("corrupt", format!("{pod}: server identity {identity:?}")));
    }
    let received = crate::relay::received(ctx, &mut s)?.received;
    Ok(Holdings { executed, received, identity })
}

/// Every member of `pods` examined at once.
#[must_use]
pub fn examine_all(ctx: &Context, pods: &[String]) -> Vec<(String, Result<Holdings>)> {
    std::thread::scope(|scope| {
        let running: Vec<_> = pods.iter().map(|p| (p, scope.spawn(|| examine(ctx, p)))).collect();
        running
            .into_iter()
            .map(|(p, h)| {
                let r = h.join().unwrap_or_else(|_| Err(Failure::new("error", format!("{p}: the examination failed"))));
                (p.clone(), r)
            })
            .collect()
    })
}

/// The command (see the module docs).
///
/// # Errors
/// `bad-env` for a member not in `PODS` or an output directory it cannot write.
pub fn run(ctx: &Context, env: &dyn Env) -> Result<protocol::Report> {
    let pods: Vec<String> = env.var("EXAMINE_PODS").unwrap_or_default().split_whitespace().map(str::to_owned).collect();
    if let Some(p) = pods.iter().find(|p| ctx.addr(p).is_none()) {
        return Err(Failure::new("bad-env", format!("EXAMINE_PODS: '{p}' is not in PODS")));
    }
    let out = env.var("EXAMINE_OUT").ok_or_else(|| Failure::new("bad-env", "EXAMINE_OUT is required"))?;
    let write = |name: String, text: String| {
        std::fs::write(Path::new(&out).join(&name), text)
            .map_err(|e| Failure::new("bad-env", format!("EXAMINE_OUT: {out}/{name}: {e}")))
    };
    let (mut examined, mut not) = (Vec::new(), Vec::new());
    for (pod, r) in examine_all(ctx, &pods) {
        match r {
            Ok(h) => {
                write(pod.clone(), h.text())?;
                examined.push(pod);
            }
            Err(f) => {
                write(format!("{pod}.why"), format!("{}: {}\n", f.reason, f.message.replace('\n', " ")))?;
                not.push(format!("{pod} ({})", f.reason));
            }
        }
    }
    Ok(protocol::Report {
        message: Some(format!(
            "examined: {}; not examined: {}",
            if examined.is_empty() { "none".to_owned() } else { examined.join(" ") },
            if not.is_empty() { "none".to_owned() } else { not.join(", ") }
        )),
        ..protocol::Report::new("examined")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(receiver: Thread) -> ReplicaStatus {
        ReplicaStatus {
            source_host: "db-0".to_owned(),
            source_port: 3306,
            receiver,
            applier: Thread::Yes,
            lag: None,
            receiver_errno: 0,
            receiver_error: String::new(),
            applier_errno: 0,
            applier_error: String::new(),
        }
    }

    #[test]
    fn only_a_stopped_receiver_or_none_is_trusted() {
        assert!(receiver_stopped(None), "not a replica: nothing arrives");
        assert!(receiver_stopped(Some(&status(Thread::No))));
        assert!(!receiver_stopped(Some(&status(Thread::Yes))));
        assert!(!receiver_stopped(Some(&status(Thread::Connecting))), "connecting may still receive");
    }

    #[test]
    fn holdings_are_three_lines() {
        let h = Holdings { executed: "0-1-5".to_owned(), received: "0-1-7".to_owned(), identity: "1".to_owned() };
        assert_eq!(h.text(), "0-1-5\n0-1-7\n1\n");
    }
}

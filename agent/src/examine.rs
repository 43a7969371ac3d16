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
//! Each member is also asked whether it is being seeded (a partial copy).
//!
//! Then the choice is made ([`crate::decide`]: the quorum and its exception,
//! the errant members, the candidate), so that `failover.sh` only relays it.
//!
//! Input: `PRIMARY` (the old primary), `EXAMINE_PODS` (the members other than
//! `PRIMARY` that answered, whitespace separated, each in `PODS`),
//! `EXAMINE_OLD_UP=true` when the old primary answered (it is examined too),
//! `QUORUM` (how many members other than `PRIMARY` must be examined; default
//! all of them), `FORCE` (`1`: the quorum is waived), `PRIMARY_GTID` (what the
//! hook last saw executed on `PRIMARY`). Output files in `EXAMINE_OUT`, one line
//! each, names separated by spaces: `examined`, `unreachable` (members other than
//! `PRIMARY` not examined), `old-up` (`true`/`false`: the old primary was
//! examined); `errant` once the quorum allowed looking at them; then either
//! `candidate` (two lines: the name, its executed-plus-received set) or
//! `refused` (two lines: the reason, the message). What each member holds and
//! why one was not examined go to standard error (the Job's log). Result
//! `decided` (`primary`: the candidate) or `refused` (`reason`, `message`),
//! exit 0 either way: the refusal is the failover's, reported by the script.

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

/// One member: its receiver stopped, then what it holds, and whether it is
/// being seeded.
///
/// # Errors
/// Why it is not examined.
pub fn examine(ctx: &Context, pod: &str) -> Result<(Holdings, bool)> {
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
    let flavor = s.flavor;
    let seeding = crate::inspect::seeding(&mut s, flavor);
    Ok((Holdings { executed, received, identity }, seeding))
}

/// Every member of `pods` examined at once.
#[must_use]
pub fn examine_all(ctx: &Context, pods: &[String]) -> Vec<(String, Result<(Holdings, bool)>)> {
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

/// The settings of [`run`], read and checked before anything is examined.
struct Settings {
    old: String,
    old_up: bool,
    pods: Vec<String>,
    quorum: usize,
    force: bool,
    primary_gtid: String,
    out: String,
}

fn settings(ctx: &Context, env: &dyn Env) -> Result<Settings> {
    let bad = |m: String| Failure::new("bad-env", m);
    let old = env.var("PRIMARY").unwrap_or_default();
    if ctx.addr(&old).is_none() {
        return Err(bad(format!("PRIMARY '{old}' is not in PODS")));
    }
    let pods: Vec<String> = env.var("EXAMINE_PODS").unwrap_or_default().split_whitespace().map(str::to_owned).collect();
    if let Some(p) = pods.iter().find(|p| ctx.addr(p).is_none() || **p == old) {
        return Err(bad(format!("EXAMINE_PODS: '{p}' is not a member other than PRIMARY")));
    }
    let others = ctx.names().filter(|n| *n != old).count();
    let quorum = match env.var("QUORUM") {
        None => others,
        Some(q) => q.parse().map_err(|_| bad(format!("QUORUM '{q}' must be a number")))?,
    };
    let force = match env.var("FORCE").as_deref() {
        None | Some("0") => false,
        Some("1") => true,
        Some(f) => return Err(bad(format!("FORCE '{f}' must be 0 or 1"))),
    };
    let primary_gtid = env.var("PRIMARY_GTID").unwrap_or_default();
    if !primary_gtid.is_empty()
        && !matches!(
            crate::gtid_calc::calc(ctx.flavor, "ok", std::slice::from_ref(&primary_gtid)),
            Ok(crate::gtid_calc::Answer::Holds(true))
        )
    {
        return Err(bad("PRIMARY_GTID is not a GTID text of this flavor".to_owned()));
    }
    let out = env.var("EXAMINE_OUT").ok_or_else(|| bad("EXAMINE_OUT is required".to_owned()))?;
    let old_up = env.var("EXAMINE_OLD_UP").as_deref() == Some("true");
    Ok(Settings { old, old_up, pods, quorum, force, primary_gtid, out })
}

/// The command (see the module docs).
///
/// # Errors
/// `bad-env` for a setting it cannot use or an output directory it cannot write.
pub fn run(ctx: &Context, env: &dyn Env) -> Result<protocol::Report> {
    let set = settings(ctx, env)?;
    let write = |name: &str, text: String| {
        std::fs::write(Path::new(&set.out).join(name), text)
            .map_err(|e| Failure::new("bad-env", format!("EXAMINE_OUT: {}/{name}: {e}", set.out)))
    };
    let mut ask = set.pods.clone();
    if set.old_up {
        ask.push(set.old.clone());
    }
    let mut old_holdings = None;
    let mut examined = Vec::new();
    for (pod, r) in examine_all(ctx, &ask) {
        match r {
            Ok((h, seeding)) => {
                eprintln!("examine: {pod} executed=[{}] received=[{}]", h.executed, h.received);
                if pod == set.old {
                    old_holdings = Some(h);
                } else {
                    examined.push(crate::decide::Member { name: pod, holdings: h, seeding });
                }
            }
            Err(f) if pod == set.old => {
                eprintln!("examine: old primary {pod} is not examined: {}: {}", f.reason, f.message);
            }
            Err(f) => eprintln!("examine: {pod} is not examined: {}: {}", f.reason, f.message),
        }
    }
    // in ordinal order, whatever order they were named in
    let order: Vec<String> = ctx.names().map(str::to_owned).collect();
    examined.sort_by_key(|m| order.iter().position(|n| *n == m.name));
    let survey = crate::decide::Survey {
        flavor: ctx.flavor,
        old: set.old.clone(),
        old_holdings,
        others: order.iter().filter(|n| **n != set.old).cloned().collect(),
        examined,
        quorum: set.quorum,
        force: set.force,
        primary_gtid: set.primary_gtid.clone(),
    };
    let names = |v: Vec<String>| format!("{}\n", v.join(" "));
    write("examined", names(survey.examined.iter().map(|m| m.name.clone()).collect()))?;
    write("unreachable", names(survey.unreachable()))?;
    write("old-up", format!("{}\n", survey.old_holdings.is_some()))?;
    match crate::decide::decide(&survey) {
        Ok(d) => {
            for note in &d.notes {
                eprintln!("examine: {note}");
            }
            write("errant", names(d.errant))?;
            write("candidate", format!("{}\n{}\n", d.candidate, d.received))?;
            Ok(protocol::Report { primary: Some(d.candidate), ..protocol::Report::new("decided") })
        }
        Err((f, errant)) => {
            if let Some(e) = errant {
                write("errant", names(e))?;
            }
            let message = f.message.replace('\n', " ");
            write("refused", format!("{}\n{message}\n", f.reason))?;
            Ok(protocol::Report {
                reason: Some(f.reason.to_owned()),
                message: Some(message),
                ..protocol::Report::new("refused")
            })
        }
    }
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

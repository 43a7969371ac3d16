//! `mysql-hook-agent scale-down`: proves that the servers a scale-down keeps hold
//! every commit the removed ones acknowledged, so that the failover arithmetic may
//! shrink (issue 31.4).
//!
//! **Why.** A commit returns OK once one replica has received it (lossless
//! semi-sync, A = 1), and a failover therefore examines every replica (E = R). When
//! `spec.replicas` shrinks, the removed replica may have been the only one to
//! acknowledge the last commits (the others lagging or reconnecting); a failover
//! that examined only the remaining R' replicas could promote one that lacks them.
//! So the hook keeps the old R in the failover's `QUORUM` until this command has
//! succeeded, and runs it only once the removed pods are gone: from then on no
//! removed server can acknowledge anything.
//!
//! **What it proves.** Everything the removed servers acknowledged was committed on
//! the primary before they went, so it is in the primary's executed set read now.
//! Once one remaining replica has executed that set, an examination of the
//! remaining replicas finds every acknowledged commit again, and `QUORUM` for R'
//! is safe. MySQL compares `gtid_executed` sets; MariaDB the primary's
//! `gtid_binlog_pos` with the replica's `gtid_slave_pos` (what `MASTER_GTID_WAIT`
//! compares: the applier's position, not the replica's own writes).
//!
//! Environment: `PRIMARY` (the writable primary), `PODS` (the members that stay),
//! `SCALE_DOWN_WAIT` (seconds for a remaining replica to get there [300]).
//!
//! Report: `{"result":"settled","primary":…,"pod":<the replica>,"gtid":…,"waited":s}`;
//! errors `bad-env`, `primary-unreachable`, `primary-not-writable` (a role change
//! moved it: the hook runs this again for the new primary), `replicas-behind` (no
//! remaining replica got there in time; each one's state in the message).

use std::time::{Duration, Instant};

use protocol::gtid::{mariadb::GtidList, mysql::GtidSet};

use crate::{
    Failure, Report, Result,
    context::{Context, Env, Flavor},
    server::Server,
};

/// The wait for a remaining replica when `SCALE_DOWN_WAIT` is unset.
const DEFAULT_WAIT: u64 = 300;

/// What a server has executed, typed for the comparison this command makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Executed {
    Mysql(GtidSet),
    Mariadb(GtidList),
}

impl Executed {
    /// True when a replica at `self` has executed everything of the primary's `primary`.
    #[must_use]
    pub fn reached(&self, primary: &Self) -> bool {
        match (self, primary) {
            (Self::Mysql(mine), Self::Mysql(theirs)) => theirs.is_subset(mine),
            (Self::Mariadb(mine), Self::Mariadb(theirs)) => mine.position_ge(&theirs.position()),
            _ => false,
        }
    }
}

impl std::fmt::Display for Executed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Mysql(s) => s.fmt(f),
            Self::Mariadb(l) => l.fmt(f),
        }
    }
}

/// The command (see the module docs).
///
/// # Errors
/// As listed in the module docs.
pub fn run(ctx: &Context, env: &dyn Env) -> Result<Report> {
    let primary = env.var("PRIMARY").unwrap_or_default();
    if ctx.addr(&primary).is_none() {
        return Err(Failure::new("bad-env", format!("PRIMARY '{primary}' is not in PODS")));
    }
    let wait = match env.var("SCALE_DOWN_WAIT") {
        None => Duration::from_secs(DEFAULT_WAIT),
        Some(v) => Duration::from_secs(v.trim().parse().map_err(|_| {
            Failure::new("bad-env", format!("SCALE_DOWN_WAIT must be a number of seconds (got {v:?})"))
        })?),
    };
    let replicas: Vec<&str> = ctx.names().filter(|n| *n != primary).collect();
    if replicas.is_empty() {
        return Err(Failure::new("bad-env", "PODS names no member besides PRIMARY: nothing to wait for"));
    }
    let started = Instant::now();
    let mut p = Server::connect(ctx, &primary)
        .map_err(|e| Failure::new("primary-unreachable", format!("{primary} does not answer: {e}")))?;
    if !p.writable()? {
        return Err(Failure::new(
            "primary-not-writable",
            format!("{primary} is read-only: a role change moved the primary; nothing proven"),
        ));
    }
    let target = primary_executed(&mut p, ctx.flavor)?;
    eprintln!("scale-down: waiting up to {}s for a remaining replica to execute [{target}]", wait.as_secs());
    loop {
        let mut states = Vec::new();
        for name in &replicas {
            match Server::connect(ctx, name) {
                Err(e) => states.push(format!("{name} does not answer ({e})")),
                Ok(mut s) => match replica_executed(&mut s, ctx.flavor) {
                    Err(f) => states.push(f.message),
                    Ok(mine) if mine.reached(&target) => {
                        return Ok(Report {
                            primary: Some(primary.clone()),
                            pod: Some((*name).to_owned()),
                            gtid: Some(target.to_string()),
                            waited: Some(i64::try_from(started.elapsed().as_secs()).unwrap_or(i64::MAX)),
                            message: Some(format!(
                                "{name} has executed everything {primary} had committed once the removed servers were gone"
                            )),
                            ..Report::new("settled")
                        });
                    }
                    Ok(mine) => states.push(format!("{name} is at [{mine}]")),
                },
            }
        }
        if started.elapsed() >= wait {
            return Err(Failure::new(
                "replicas-behind",
                format!(
                    "no remaining replica executed [{target}] of {primary} within {}s: {}",
                    wait.as_secs(),
                    states.join("; ")
                ),
            ));
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The primary's executed transactions: MySQL `gtid_executed`, MariaDB
/// `gtid_binlog_pos`. A text that does not parse is an error, never a guess.
fn primary_executed(s: &mut Server, flavor: Flavor) -> Result<Executed> {
    let q = match flavor {
        Flavor::Mysql => "SELECT @@global.gtid_executed",
        Flavor::Mariadb => "SELECT @@global.gtid_binlog_pos",
    };
    parse(s, flavor, q)
}

/// What a replica has applied: MySQL `gtid_executed`, MariaDB `gtid_slave_pos`.
fn replica_executed(s: &mut Server, flavor: Flavor) -> Result<Executed> {
    let q = match flavor {
        Flavor::Mysql => "SELECT @@global.gtid_executed",
        Flavor::Mariadb => "SELECT @@global.gtid_slave_pos",
    };
    parse(s, flavor, q)
}

fn parse(s: &mut Server, flavor: Flavor, q: &str) -> Result<Executed> {
    // MySQL folds a long gtid_executed over several lines.
    let text = s.value(q)?.unwrap_or_default().replace('\n', "");
    let unparsable = |e: &dyn std::fmt::Display| {
        Failure::new("sql-failed", format!("{}: {q} gave {text:?}, which does not parse: {e}", s.name))
    };
    match flavor {
        Flavor::Mysql => GtidSet::parse(&text).map(Executed::Mysql).map_err(|e| unparsable(&e)),
        Flavor::Mariadb => GtidList::parse(&text).map(Executed::Mariadb).map_err(|e| unparsable(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mysql(t: &str) -> Executed {
        Executed::Mysql(GtidSet::parse(t).unwrap_or_else(|e| panic!("{t}: {e}")))
    }

    fn mariadb(t: &str) -> Executed {
        Executed::Mariadb(GtidList::parse(t).unwrap_or_else(|e| panic!("{t}: {e}")))
    }

    #[test]
    fn a_mysql_replica_has_reached_the_primary_when_it_holds_its_whole_set() {
        let primary = mysql("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-30");
        assert!(mysql("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-30").reached(&primary));
        assert!(!mysql("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10").reached(&primary));
        // a gap is not reached, however high the end
        assert!(!mysql("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10:12-40").reached(&primary));
        // the replica's own (errant) transactions do not stand in for the primary's
        assert!(
            !mysql("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10,4e11fa47-71ca-11e1-9e33-c80aa9429562:1-50")
                .reached(&primary)
        );
        assert!(mysql("").reached(&mysql("")));
    }

    #[test]
    fn a_mariadb_replica_has_reached_the_primary_when_its_applier_is_as_far_in_every_domain() {
        let primary = mariadb("0-1-30,1-1-4");
        assert!(mariadb("0-1-30,1-1-4").reached(&primary));
        assert!(mariadb("0-1-31,1-1-4").reached(&primary));
        assert!(!mariadb("0-1-29,1-1-4").reached(&primary));
        assert!(!mariadb("0-1-30").reached(&primary), "a domain it never applied");
    }

    #[test]
    fn flavors_never_compare() {
        assert!(!mysql("").reached(&mariadb("0-1-1")));
        assert!(!mariadb("0-1-1").reached(&mysql("")));
    }
}

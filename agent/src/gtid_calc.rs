//! `mysql-hook-agent gtid OP ARGS...`: the scripts' GTID comparisons, computed
//! by the strict parsers of [`protocol::gtid`] (issues 30.2, 32).
//!
//! The scripts compared GTID texts in bash: MySQL interval arithmetic and MariaDB
//! per-domain maxima, over texts read from servers, backup stores and files. A
//! text reached `(( ))` only after a regular expression had accepted it, and every
//! comparison was a few hundred lines of bash nobody could test against the
//! hook's own Rust types. Now every comparison a script makes goes through this
//! command: one parser, one algebra, for the hook, the agent and the scripts.
//!
//! Each operation is the bash function of the same meaning, ported:
//!
//! | op | bash | MySQL | MariaDB |
//! |---|---|---|---|
//! | `ok T` | `gtid_text_ok` | `T` parses (no empty items) | `T` parses (no empty items) |
//! | `subset A B` | `gtid_subset` | A ⊆ B | every (d, s, n) of A is in B at n or later |
//! | `contains A B` | `gtid_contains` | B ⊆ A | B's state within A's, and A's position at least B's |
//! | `ge A B` | `gtid_ge` | B ⊆ A | A's position at least B's, per domain |
//! | `within S P` | `gtid_within` | S ⊆ P | per domain of S, P at least S's highest |
//! | `subtract A B` | `gtid_subtract` | A − B | A's entries B does not cover |
//! | `union A...` | `gtid_union`, `mdb_state_max` | A ∪ ... | per (domain, server) the highest |
//! | `position A...` | `mdb_pos_max` | — | per domain the highest, of the union |
//! | `own-errant S O I` | `gtid_own_errant` | S − O holds a GTID of UUID I | an entry of server id I in S that O does not cover |
//! | `seed-state B A P` | `mdb_seed_state` | — | see [`seed_state`] |
//! | `choose N S...` | `choose_most_advanced` | the first N whose S contains every other's | the same |
//! | `errant B N I S...` | `split_errant` | the errant members, one per line | the same |
//!
//! Inputs are the scripts' texts: items may be empty or surrounded by whitespace
//! (`CONCAT_WS` of an empty variable, a server's newline after a comma); those are
//! dropped, then the rest must be exactly the flavor's grammar. Exit status 0:
//! holds (a text op prints its canonical text, no newline); 1: does not hold; 2:
//! a text that does not parse, or a usage error, said on stderr. The scripts end
//! with `corrupt` on 2; a text is never guessed at.

use protocol::gtid::{
    mariadb::GtidList,
    mysql::{GtidSet, Uuid},
};

use crate::context::Flavor;

/// What an operation answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Holds(bool),
    Text(String),
}

/// The scripts' text with empty and whitespace-only items dropped.
fn clean(text: &str) -> String {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(",")
}

fn mysql(text: &str) -> Result<GtidSet, String> {
    GtidSet::parse(&clean(text)).map_err(|e| e.to_string())
}

fn mariadb(text: &str) -> Result<GtidList, String> {
    GtidList::parse(&clean(text)).map_err(|e| e.to_string())
}

/// Runs `op` on `args` (see the module docs).
///
/// # Errors
/// A text that does not parse, an unknown op, the wrong number of arguments, or
/// an op the flavor does not have.
pub fn calc(flavor: Flavor, op: &str, args: &[String]) -> Result<Answer, String> {
    let want = |n: usize| -> Result<(), String> {
        if args.len() == n { Ok(()) } else { Err(format!("gtid {op} takes {n} arguments, got {}", args.len())) }
    };
    let two = || -> Result<(&str, &str), String> {
        want(2)?;
        Ok((args[0].as_str(), args[1].as_str()))
    };
    match (flavor, op) {
        (_, "ok") => {
            want(1)?;
            // Exactly the grammar: no empty items (a reader's text, checked before
            // it is stored or used).
            Ok(Answer::Holds(match flavor {
                Flavor::Mysql => GtidSet::parse(&args[0]).is_ok(),
                Flavor::Mariadb => GtidList::parse(&args[0]).is_ok(),
            }))
        }
        (Flavor::Mysql, "subset") => two().and_then(|(a, b)| Ok(Answer::Holds(mysql(a)?.is_subset(&mysql(b)?)))),
        (Flavor::Mysql, "contains" | "ge") => {
            two().and_then(|(a, b)| Ok(Answer::Holds(mysql(b)?.is_subset(&mysql(a)?))))
        }
        (Flavor::Mysql, "within") => two().and_then(|(s, p)| Ok(Answer::Holds(mysql(s)?.is_subset(&mysql(p)?)))),
        (Flavor::Mysql, "subtract") => {
            two().and_then(|(a, b)| Ok(Answer::Text(mysql(a)?.subtract(&mysql(b)?).to_string())))
        }
        (Flavor::Mysql, "union") => {
            let mut out = GtidSet::new();
            for a in args {
                out = out.union(&mysql(a)?);
            }
            Ok(Answer::Text(out.to_string()))
        }
        (Flavor::Mysql, "own-errant") => {
            want(3)?;
            let left = mysql(&args[0])?.subtract(&mysql(&args[1])?);
            let ident = Uuid::parse(args[2].trim()).map_err(|e| e.to_string())?;
            Ok(Answer::Holds(left.iter().any(|(uuid, _, _)| *uuid == ident)))
        }
        (Flavor::Mariadb, "subset") => {
            two().and_then(|(a, b)| Ok(Answer::Holds(mariadb(a)?.state_subset(&mariadb(b)?))))
        }
        (Flavor::Mariadb, "contains") => two().and_then(|(a, b)| Ok(Answer::Holds(mariadb(a)?.contains(&mariadb(b)?)))),
        (Flavor::Mariadb, "ge") => two().and_then(|(a, b)| Ok(Answer::Holds(mariadb(a)?.position_ge(&mariadb(b)?)))),
        (Flavor::Mariadb, "within") => two().and_then(|(s, p)| Ok(Answer::Holds(mariadb(s)?.within(&mariadb(p)?)))),
        (Flavor::Mariadb, "subtract") => {
            two().and_then(|(a, b)| Ok(Answer::Text(mariadb(a)?.subtract(&mariadb(b)?).to_string())))
        }
        (Flavor::Mariadb, "union" | "position") => {
            let mut out = GtidList::new();
            for a in args {
                out = out.union(&mariadb(a)?);
            }
            Ok(Answer::Text(if op == "position" { out.position() } else { out }.to_string()))
        }
        (Flavor::Mariadb, "own-errant") => {
            want(3)?;
            let id: u32 = args[2].trim().parse().map_err(|_| format!("server id {:?} is not a number", args[2]))?;
            let own = mariadb(&args[0])?.originated_by(id);
            Ok(Answer::Holds(!own.state_subset(&mariadb(&args[1])?)))
        }
        (Flavor::Mariadb, "seed-state") => {
            want(3)?;
            Ok(match seed_state(&mariadb(&args[0])?, &mariadb(&args[1])?, &mariadb(&args[2])?) {
                Some(state) => Answer::Text(state.to_string()),
                None => Answer::Holds(false),
            })
        }
        (_, "choose") => choose(flavor, args),
        (_, "errant") => errant(flavor, args),
        (_, other) => Err(format!("gtid: no operation {other:?} for {flavor:?}")),
    }
}

fn holds(flavor: Flavor, op: &str, args: &[&str]) -> Result<bool, String> {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    match calc(flavor, op, &args)? {
        Answer::Holds(h) => Ok(h),
        Answer::Text(_) => Err(format!("gtid {op} answers a text")),
    }
}

/// `choose NAME SET [NAME SET]...` (the scripts' `choose_most_advanced`): the
/// first NAME, in the order given (callers list the preferred first), whose SET
/// contains every other's; does not hold when none does (diverged: two
/// histories, never "the longer one").
fn choose(flavor: Flavor, args: &[String]) -> Result<Answer, String> {
    if args.is_empty() || args.len() % 2 != 0 {
        return Err("gtid choose takes NAME SET pairs".into());
    }
    let cands: Vec<(&str, &str)> = args.chunks(2).map(|c| (c[0].as_str(), c[1].as_str())).collect();
    for (name, set) in &cands {
        let mut all = true;
        for (other, theirs) in &cands {
            if other != name && !holds(flavor, "contains", &[set, theirs])? {
                all = false;
                break;
            }
        }
        if all {
            return Ok(Answer::Text((*name).to_owned()));
        }
    }
    Ok(Answer::Holds(false))
}

/// `errant BASE NAME IDENT SET [NAME IDENT SET]...` (the scripts' `split_errant`):
/// the members holding a transaction they originated themselves (IDENT: MySQL
/// `server_uuid`, MariaDB `server_id`) that neither BASE (the old primary's
/// executed set, `-` when there is none) nor any other member has, one name per
/// line, in the order given. The rule needs another set to compare with: a sole
/// member without BASE is never errant.
fn errant(flavor: Flavor, args: &[String]) -> Result<Answer, String> {
    let Some((base, members)) = args.split_first() else { return Err("gtid errant takes BASE first".into()) };
    if members.len() % 3 != 0 {
        return Err("gtid errant takes NAME IDENT SET triples after BASE".into());
    }
    let members: Vec<&[String]> = members.chunks(3).collect();
    let mut out = Vec::new();
    for m in &members {
        let mut others: Vec<String> = members.iter().filter(|o| o[0] != m[0]).map(|o| o[2].clone()).collect();
        if base != "-" {
            others.push(base.clone());
        }
        if others.is_empty() {
            continue;
        }
        let Answer::Text(others) = calc(flavor, "union", &others)? else { return Err("union".into()) };
        if holds(flavor, "own-errant", &[&m[2], &others, &m[1]])? {
            out.push(m[0].clone());
        }
    }
    Ok(Answer::Text(out.join("\n")))
}

/// MariaDB: a donor's `gtid_binlog_state` at a dump's snapshot, from its states
/// read `before` and `after` the dump and the dump's position `pos`: each entry as
/// before, the position's own (domain, server id) at the position. `None` when
/// that cannot be known: an entry of another server changed while the dump ran
/// (a role change), or the position is past the state read after it.
///
/// The position may be *below* the state read before the dump: a commit is
/// written to the binary log before the engine commits it, and with semi-sync
/// (`AFTER_SYNC`) it stays there, outside every snapshot, until a replica
/// acknowledges it. Such commits are in the donor's binary log (the primary's
/// own, or received from it), so the seeded server fetches them by replication
/// from the position; refusing them left a primary with no replica that could
/// ever acknowledge (real-server scenario 15).
#[must_use]
pub fn seed_state(before: &GtidList, after: &GtidList, pos: &GtidList) -> Option<GtidList> {
    if pos.is_empty() || before.iter().any(|g| after.get(g.domain, g.server_id).is_none()) {
        return None;
    }
    let mut out = GtidList::new();
    for g in after.iter() {
        if pos.get(g.domain, g.server_id).is_some() {
            continue;
        }
        if before.get(g.domain, g.server_id) != Some(g.seq) {
            return None;
        }
        out.insert(g);
    }
    for p in pos.iter() {
        if p.seq > after.get(p.domain, p.server_id)? {
            return None;
        }
        out.insert(p);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const B: &str = "4e11fa47-71ca-11e1-9e33-c80aa9429562";

    fn run(flavor: Flavor, op: &str, args: &[&str]) -> Result<Answer, String> {
        calc(flavor, op, &args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn mysql_sets() {
        let m = Flavor::Mysql;
        let (a5, a3) = (format!("{A}:1-5"), format!("{A}:1-3"));
        assert_eq!(run(m, "subset", &[&a3, &a5]), Ok(Answer::Holds(true)));
        assert_eq!(run(m, "contains", &[&a3, &a5]), Ok(Answer::Holds(false)));
        assert_eq!(run(m, "ge", &[&a5, &a3]), Ok(Answer::Holds(true)));
        assert_eq!(run(m, "subtract", &[&a5, &a3]), Ok(Answer::Text(format!("{A}:4-5"))));
        let two = format!("{B}:1-2,\n{A}:1-3,");
        assert_eq!(run(m, "union", &[&two, "", &a5]), Ok(Answer::Text(format!("{A}:1-5,{B}:1-2"))));
        assert_eq!(run(m, "own-errant", &[&two, &a5, &B.to_uppercase()]), Ok(Answer::Holds(true)));
        assert_eq!(run(m, "own-errant", &[&two, &a5, A]), Ok(Answer::Holds(false)));
    }

    #[test]
    fn mariadb_lists() {
        let d = Flavor::Mariadb;
        assert_eq!(run(d, "contains", &["0-1-10,0-2-3", "0-1-9"]), Ok(Answer::Holds(true)));
        // Same length, another primary's history: not contained.
        assert_eq!(run(d, "contains", &["0-2-10", "0-1-10"]), Ok(Answer::Holds(false)));
        assert_eq!(run(d, "ge", &["0-2-10", "0-1-10"]), Ok(Answer::Holds(true)));
        assert_eq!(run(d, "position", &[",0-1-10", "0-2-12,1-1-3"]), Ok(Answer::Text("0-2-12,1-1-3".into())));
        assert_eq!(run(d, "own-errant", &["0-1-10,0-3-4", "0-1-10", "3"]), Ok(Answer::Holds(true)));
        assert_eq!(run(d, "own-errant", &["0-1-10,0-3-4", "0-3-4", "3"]), Ok(Answer::Holds(false)));
        assert_eq!(run(d, "within", &["0-1-5,0-2-7", "0-2-7"]), Ok(Answer::Holds(true)));
    }

    #[test]
    fn a_text_that_does_not_parse_is_an_error_never_false() {
        let injection = "BASH_VERSINFO[$(id)0]";
        assert!(run(Flavor::Mariadb, "subset", &[injection, "0-1-1"]).is_err());
        assert!(run(Flavor::Mysql, "subset", &[injection, ""]).is_err());
        assert_eq!(run(Flavor::Mysql, "ok", &[injection]), Ok(Answer::Holds(false)));
        assert!(run(Flavor::Mysql, "position", &["", ""]).is_err(), "MariaDB only");
        assert!(run(Flavor::Mysql, "subset", &[""]).is_err(), "two arguments");
    }

    #[test]
    fn the_most_advanced_is_chosen_and_a_divergence_refused() {
        let d = Flavor::Mariadb;
        let choose = |args: &[&str]| run(d, "choose", args);
        assert_eq!(choose(&["db-0", "0-1-10", "db-1", "0-1-12", "db-2", "0-1-10"]), Ok(Answer::Text("db-1".into())));
        assert_eq!(choose(&["db-0", "0-1-12", "db-1", "0-1-12"]), Ok(Answer::Text("db-0".into())), "a tie: the first");
        assert_eq!(choose(&["db-1", "0-1-12", "db-2", "0-1-10,0-9-11"]), Ok(Answer::Holds(false)));
        assert!(choose(&["db-1"]).is_err());
    }

    #[test]
    fn errant_members_are_those_with_writes_of_their_own_nobody_has() {
        let m = Flavor::Mysql;
        let (e0, e1) = (format!("{A}:1-10"), format!("{A}:1-10,{B}:1"));
        assert_eq!(run(m, "errant", &["-", "db-1", B, &e1, "db-2", A, &e0]), Ok(Answer::Text("db-1".into())));
        assert_eq!(run(m, "errant", &[&e1, "db-1", B, &e1, "db-2", A, &e0]), Ok(Answer::Text(String::new())));
        assert_eq!(run(m, "errant", &["-", "db-1", B, &e1]), Ok(Answer::Text(String::new())), "a sole survivor");
    }

    #[test]
    fn a_seed_state_is_the_snapshot_or_unknown() {
        let l = |t: &str| GtidList::parse(t).unwrap_or_default();
        let s = seed_state(&l("0-1-5,0-2-3"), &l("0-1-9,0-2-3"), &l("0-1-7"));
        assert_eq!(s.map(|s| s.to_string()), Some("0-1-7,0-2-3".into()));
        assert_eq!(seed_state(&l("0-1-5,0-2-3"), &l("0-1-9,0-2-4"), &l("0-1-7")), None, "0-2 moved: a role change");
        assert_eq!(seed_state(&l("0-1-5"), &l("0-1-9"), &l("0-1-10")), None, "past the after state");
        assert_eq!(seed_state(&l("0-1-5"), &l("0-1-5"), &l("0-2-1")), None, "a server the donor never knew");
        // commits in the binary log, waiting for an acknowledgement, outside the snapshot
        let pending = seed_state(&l("0-1-2161,0-2-2988"), &l("0-1-2161,0-2-2988"), &l("0-2-2986"));
        assert_eq!(pending.map(|s| s.to_string()), Some("0-1-2161,0-2-2986".to_owned()));
        assert_eq!(seed_state(&l("0-1-5"), &l("0-1-9"), &l("")), None);
    }
}

//! A failover's choice (issue 32, ported from `failover.sh` steps 3 and 4):
//! from what [`crate::examine`] read, with every receiver stopped, whether the
//! failover may promote at all (the quorum, and its one exception) and whom.
//!
//! Pure: the sets are texts as the servers wrote them, compared by
//! [`crate::gtid_calc`] (which parses them; a text that does not parse is
//! `corrupt`, never a guess).
//!
//! **The quorum.** Semi-sync acknowledges a commit once one replica has it, so
//! the failover must examine enough members that one of them holds every
//! acknowledged commit: `QUORUM` of the members other than the old primary
//! (the hook passes how many; all of them unless it says otherwise). Fewer
//! answered: nothing is promoted (`no-quorum`), unless
//! - `FORCE` (a human's decision, accepting the loss of commits only the
//!   missing members hold), or
//! - the old primary answers and its received set contains every examined
//!   member's and `PRIMARY_GTID` (what the hook last saw executed on it). This
//!   needs a witness: with no member examined, "contains every examined
//!   member's" holds of an old primary that came back empty or from an older
//!   volume (issue 31.3).
//!
//! **The candidates.** The old primary when it answers (fenced by then; its own
//! transactions are never errant: the base the others are compared with), and
//! every examined member that is neither errant (it wrote transactions of its
//! own that no other member nor the old primary has; [`crate::gtid_calc`]'s
//! `errant`) nor being seeded (a partial copy). The one chosen holds, executed
//! or received, every other candidate's transactions: the old primary first on
//! a tie, then the members in ordinal order. None does: `diverged`, nothing
//! promoted (two histories are never settled by "the longer one").

use crate::{Failure, Result, context::Flavor, examine::Holdings, gtid_calc};

/// A member other than the old primary, as examined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub holdings: Holdings,
    /// It holds a partial copy (a seed in progress).
    pub seeding: bool,
}

/// What the choice is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survey {
    pub flavor: Flavor,
    /// The old primary's name.
    pub old: String,
    /// What it holds, when it answered and was examined.
    pub old_holdings: Option<Holdings>,
    /// Every member but the old primary, in ordinal order.
    pub others: Vec<String>,
    /// Those of them examined, in ordinal order.
    pub examined: Vec<Member>,
    /// How many of `others` must be examined.
    pub quorum: usize,
    pub force: bool,
    /// What the hook last saw executed on the old primary (may be empty).
    pub primary_gtid: String,
}

/// The choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub candidate: String,
    /// Its executed plus received set: what it must have applied before it is
    /// opened.
    pub received: String,
    /// Examined members left out as errant, in ordinal order.
    pub errant: Vec<String>,
    /// What the log should say about the choice, in order.
    pub notes: Vec<String>,
}

impl Survey {
    /// The members that did not answer or were not examined, in ordinal order.
    #[must_use]
    pub fn unreachable(&self) -> Vec<String> {
        self.others.iter().filter(|o| !self.examined.iter().any(|m| &m.name == *o)).cloned().collect()
    }

    fn not_answering(&self) -> String {
        let u = self.unreachable();
        if u.is_empty() { "none".to_owned() } else { u.join(" ") }
    }
}

fn contains(flavor: Flavor, a: &str, b: &str) -> Result<bool> {
    match gtid_calc::calc(flavor, "contains", &[a.to_owned(), b.to_owned()]) {
        Ok(gtid_calc::Answer::Holds(h)) => Ok(h),
        Ok(gtid_calc::Answer::Text(_)) => Err(Failure::new("error", "gtid contains answered a text")),
        Err(e) => Err(Failure::new("corrupt", format!("the members' GTID sets do not parse: {e}"))),
    }
}

/// Whether a member holds nothing at all (no transaction executed or received):
/// one that never joined (a scale-up's new server, a replaced volume). It cannot
/// have acknowledged a commit, so it is no witness for the quorum (issue 31.8:
/// the hook leaves members that never held data out of `QUORUM`, and one that
/// starts meanwhile must not make up for a member that does hold commits).
#[must_use]
pub fn holds_nothing(m: &Member) -> bool {
    m.holdings.executed.trim().is_empty() && m.holdings.received.trim().is_empty()
}

/// The quorum rule (see the module docs): `Ok(note)` when the failover may go
/// on, `no-quorum` with the reason otherwise. Only members that hold something
/// count ([`holds_nothing`]).
fn quorum(s: &Survey) -> Result<Option<String>> {
    let (n, total) = (s.examined.iter().filter(|m| !holds_nothing(m)).count(), s.others.len());
    if n >= s.quorum {
        return Ok(None);
    }
    let mut holds_all = false;
    let mut lacks_known = false;
    if let Some(old) = &s.old_holdings
        && n > 0
    {
        holds_all = true;
        for m in s.examined.iter().filter(|m| !holds_nothing(m)) {
            if !contains(s.flavor, &old.received, &m.holdings.received)? {
                holds_all = false;
                break;
            }
        }
        if holds_all && !s.primary_gtid.is_empty() && !contains(s.flavor, &old.received, &s.primary_gtid)? {
            holds_all = false;
            lacks_known = true;
        }
    }
    if s.force {
        return Ok(Some(format!("quorum not met ({n} of {total} answer, {} needed); FORCE=1: going on", s.quorum)));
    }
    if holds_all {
        return Ok(Some(format!(
            "quorum not met, but {} answers and holds every examined member's received transactions",
            s.old
        )));
    }
    let force = "force the failover to promote anyway, accepting the loss of commits only they hold";
    let message = match &s.old_holdings {
        Some(old) if lacks_known => format!(
            "{n} of {total} replicas answer, {} needed; {} answers but lacks transactions the hook saw executed on it \
             (PRIMARY_GTID=[{}], it holds [{}]): it may be back from an older volume, so nothing proves it holds every \
             acknowledged commit (not answering: {}); {force}",
            s.quorum,
            s.old,
            s.primary_gtid,
            old.received,
            s.not_answering()
        ),
        Some(_) if n == 0 => format!(
            "0 of {total} replicas answer; {} answers but there is no replica to compare it with, so nothing proves it \
             holds every acknowledged commit (it may have come back empty or from an older volume; not answering: {}); \
             {force}",
            s.old,
            s.not_answering()
        ),
        _ => format!(
            "{n} of {total} replicas answer; {} needed to be sure the promoted server holds every acknowledged commit \
             (not answering: {}); {force}",
            s.quorum,
            s.not_answering()
        ),
    };
    Err(Failure::new("no-quorum", message))
}

/// The examined members that are errant (see the module docs).
///
/// # Errors
/// `corrupt` when a set does not parse.
pub fn errant(s: &Survey) -> Result<Vec<String>> {
    let mut args = vec![s.old_holdings.as_ref().map_or_else(|| "-".to_owned(), |o| o.executed.clone())];
    for m in &s.examined {
        args.extend([m.name.clone(), m.holdings.identity.clone(), m.holdings.executed.clone()]);
    }
    match gtid_calc::calc(s.flavor, "errant", &args) {
        Ok(gtid_calc::Answer::Text(t)) => Ok(t.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect()),
        Ok(gtid_calc::Answer::Holds(_)) => Err(Failure::new("error", "gtid errant answered a truth value")),
        Err(e) => Err(Failure::new("corrupt", format!("the members' GTID sets do not parse: {e}"))),
    }
}

/// The choice (see the module docs). `Err` carries the refusal's reason
/// (`no-quorum`, `no-candidate`, `diverged`, `corrupt`) and the errant members
/// found before it, if any.
///
/// # Errors
/// The refusal, with the errant members found before it.
pub fn decide(s: &Survey) -> std::result::Result<Decision, (Failure, Option<Vec<String>>)> {
    let mut notes: Vec<String> = quorum(s).map_err(|f| (f, None))?.into_iter().collect();
    let errant = errant(s).map_err(|f| (f, None))?;
    let mut candidates: Vec<(&str, &str)> = Vec::new();
    if let Some(old) = &s.old_holdings {
        candidates.push((&s.old, &old.received));
    }
    for m in &s.examined {
        if errant.contains(&m.name) {
            notes.push(format!("{} is errant: it wrote transactions no other member has", m.name));
        } else if m.seeding {
            notes.push(format!("{} is being seeded: not a candidate", m.name));
        } else {
            candidates.push((&m.name, &m.holdings.received));
        }
    }
    let refuse = |reason: &'static str, message: String| Err((Failure::new(reason, message), Some(errant.clone())));
    if candidates.is_empty() {
        let e = if errant.is_empty() { "none".to_owned() } else { errant.join(" ") };
        return refuse("no-candidate", format!("no member answers that could be promoted (errant: {e})"));
    }
    for (name, set) in &candidates {
        let mut all = true;
        for (other, theirs) in &candidates {
            if other != name && !contains(s.flavor, set, theirs).map_err(|f| (f, Some(errant.clone())))? {
                all = false;
                break;
            }
        }
        if all {
            notes.push(format!("candidate: {name}"));
            return Ok(Decision { candidate: (*name).to_owned(), received: (*set).to_owned(), errant, notes });
        }
    }
    let sets: Vec<String> = candidates.iter().map(|(n, s)| format!("{n}=[{s}]")).collect();
    refuse("diverged", format!("no candidate contains all others: {} ", sets.join(" ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(executed: &str, received: &str, identity: &str) -> Holdings {
        Holdings { executed: executed.into(), received: received.into(), identity: identity.into() }
    }

    fn member(name: &str, executed: &str, received: &str, identity: &str) -> Member {
        Member { name: name.into(), holdings: h(executed, received, identity), seeding: false }
    }

    /// db-0 the old primary (server id 1), db-1 and db-2 replicas.
    fn survey(old: Option<Holdings>, examined: Vec<Member>) -> Survey {
        Survey {
            flavor: Flavor::Mariadb,
            old: "db-0".into(),
            old_holdings: old,
            others: vec!["db-1".into(), "db-2".into()],
            examined,
            quorum: 2,
            force: false,
            primary_gtid: String::new(),
        }
    }

    fn reason(r: std::result::Result<Decision, (Failure, Option<Vec<String>>)>) -> String {
        r.err().map(|(f, _)| f.reason.to_owned()).unwrap_or_default()
    }

    #[test]
    fn the_most_advanced_member_is_chosen() {
        let s = survey(None, vec![member("db-1", "0-1-10", "0-1-10", "2"), member("db-2", "0-1-10", "0-1-12", "3")]);
        let d = decide(&s).map_err(|(f, _)| f.message).unwrap_or_else(|m| panic!("{m}"));
        assert_eq!((d.candidate.as_str(), d.received.as_str()), ("db-2", "0-1-12"));
        assert!(d.errant.is_empty());
    }

    #[test]
    fn the_old_primary_first_on_a_tie_then_ordinal_order() {
        let tie = vec![member("db-1", "0-1-10", "0-1-10", "2"), member("db-2", "0-1-10", "0-1-10", "3")];
        let d = decide(&survey(Some(h("0-1-10", "0-1-10", "1")), tie.clone())).map_err(|(f, _)| f.message);
        assert_eq!(d.map(|d| d.candidate), Ok("db-0".to_owned()));
        let d = decide(&survey(None, tie)).map_err(|(f, _)| f.message);
        assert_eq!(d.map(|d| d.candidate), Ok("db-1".to_owned()));
    }

    #[test]
    fn the_quorum_and_its_exception() {
        let one = vec![member("db-1", "0-1-10", "0-1-10", "2")];
        let r = decide(&survey(None, one.clone()));
        let msg = r.as_ref().err().map(|(f, _)| f.message.clone()).unwrap_or_default();
        assert_eq!(reason(r), "no-quorum");
        assert!(msg.starts_with("1 of 2 replicas answer; 2 needed") && msg.contains("not answering: db-2"), "{msg}");
        // the old primary holds every examined member's set: it may go on
        let old = Some(h("0-1-11", "0-1-11", "1"));
        let d = decide(&survey(old.clone(), one.clone())).map_err(|(f, _)| f.message);
        assert_eq!(d.map(|d| d.candidate), Ok("db-0".to_owned()));
        // ... unless it lacks what the hook saw executed on it
        let mut s = survey(old.clone(), one.clone());
        s.primary_gtid = "0-1-12".into();
        let r = decide(&s);
        assert!(r.as_ref().err().is_some_and(|(f, _)| f.message.contains("PRIMARY_GTID=[0-1-12]")), "{r:?}");
        // ... and needs a witness
        let r = decide(&survey(old, vec![]));
        assert!(r.as_ref().err().is_some_and(|(f, _)| f.message.starts_with("0 of 2 replicas answer; db-0")), "{r:?}");
        // an old primary behind the examined member: no exception
        assert_eq!(reason(decide(&survey(Some(h("0-1-9", "0-1-9", "1")), one.clone()))), "no-quorum");
        // FORCE: a human's decision
        let mut s = survey(None, one);
        s.force = true;
        let d = decide(&s).map_err(|(f, _)| f.message);
        assert!(d.as_ref().is_ok_and(|d| d.notes[0].contains("FORCE=1")), "{d:?}");
    }

    #[test]
    fn a_member_that_holds_nothing_is_no_witness() {
        // db-2 started empty meanwhile (it never held data); db-1, which may hold
        // the only copy of acknowledged commits, does not answer
        let s = survey(None, vec![member("db-2", "", "", "3")]);
        let mut one = s.clone();
        one.quorum = 1;
        let r = decide(&one);
        assert!(
            r.as_ref().err().is_some_and(|(f, _)| f.message.starts_with("0 of 2 replicas answer; 1 needed")),
            "{r:?}"
        );
        // counted as usual once it holds something
        one.examined = vec![member("db-2", "0-1-4", "0-1-4", "3")];
        assert!(decide(&one).is_ok());
        assert_eq!(reason(decide(&s)), "no-quorum");
    }

    #[test]
    fn errant_and_seeding_members_are_never_candidates() {
        // db-2 wrote 0-3-1 that nobody else has; db-1 is being seeded
        let mut seeding = member("db-1", "0-1-10", "0-1-10", "2");
        seeding.seeding = true;
        let s = survey(None, vec![seeding.clone(), member("db-2", "0-1-10,0-3-1", "0-1-10,0-3-1", "3")]);
        let r = decide(&s);
        assert!(
            r.as_ref()
                .err()
                .is_some_and(|(f, e)| f.reason == "no-candidate" && e.as_deref() == Some(&["db-2".into()][..])),
            "{r:?}"
        );
        let s = survey(
            None,
            vec![member("db-1", "0-1-10", "0-1-10", "2"), member("db-2", "0-1-10,0-3-1", "0-1-10,0-3-1", "3")],
        );
        let d = decide(&s).map_err(|(f, _)| f.message);
        assert!(d.as_ref().is_ok_and(|d| d.candidate == "db-1" && d.errant == ["db-2"]), "{d:?}");
    }

    #[test]
    fn two_histories_are_never_settled() {
        let s =
            survey(None, vec![member("db-1", "0-1-10", "0-1-10,0-2-1", "2"), member("db-2", "0-1-10", "0-1-11", "3")]);
        assert_eq!(reason(decide(&s)), "diverged");
    }

    #[test]
    fn a_set_that_does_not_parse_is_corrupt() {
        let s = survey(None, vec![member("db-1", "0-1-x", "0-1-10", "2"), member("db-2", "0-1-10", "0-1-10", "3")]);
        assert_eq!(reason(decide(&s)), "corrupt");
    }

    proptest::proptest! {
        /// Whatever the members hold: the chosen one is examined (or the old
        /// primary), never errant nor seeding, and holds every other candidate's
        /// received set.
        #[test]
        fn the_choice_holds_every_candidate(
            seqs in proptest::collection::vec((0_u64..6, 0_u64..6, 0_u64..3, proptest::bool::ANY), 0..4),
            old in proptest::option::of(0_u64..6),
        ) {
            let names = ["db-1", "db-2", "db-3", "db-4"];
            let examined: Vec<Member> = seqs.iter().enumerate().map(|(i, (e, extra, own, seeding))| {
                let executed = if *own > 0 { format!("0-1-{e},0-{}-{own}", i + 2) } else { format!("0-1-{e}") };
                let received = format!("0-1-{},{}", e + extra, executed.split_once(',').map_or("", |(_, o)| o));
                Member {
                    name: names[i].into(),
                    holdings: h(&executed, received.trim_end_matches(','), &(i + 2).to_string()),
                    seeding: *seeding,
                }
            }).collect();
            let mut s = survey(old.map(|o| h(&format!("0-1-{o}"), &format!("0-1-{o}"), "1")), examined);
            s.others = names.iter().map(|n| (*n).to_owned()).collect();
            s.force = true;
            if let Ok(d) = decide(&s) {
                let chosen = s.examined.iter().find(|m| m.name == d.candidate);
                proptest::prop_assert!(chosen.is_some() || (d.candidate == "db-0" && s.old_holdings.is_some()));
                if let Some(m) = chosen {
                    proptest::prop_assert!(!m.seeding && !d.errant.contains(&m.name));
                }
                for m in s.examined.iter().filter(|m| !m.seeding && !d.errant.contains(&m.name)) {
                    proptest::prop_assert!(contains(s.flavor, &d.received, &m.holdings.received).unwrap_or(false));
                }
            }
        }
    }
}

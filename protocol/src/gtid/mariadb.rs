//! MariaDB GTID lists: `0-1-42,0-2-17`.
//!
//! A MariaDB GTID is `domain_id-server_id-seq_no` (RM "Global Transaction ID").
//! The server never writes a *set* of transactions; it writes the *last* GTID
//! of something:
//!
//! - a **state** (`@@gtid_binlog_state`): the last GTID per (domain, server id)
//!   in the binary log, e.g. `0-1-500,0-2-1050` after server 2 took over from
//!   server 1 in domain 0;
//! - a **position** (`@@gtid_binlog_pos`, `@@gtid_slave_pos`,
//!   `@@gtid_current_pos`): the last GTID per domain, `0-2-1050`. This is what
//!   replication and `MASTER_GTID_WAIT` take.
//!
//! Both are the same text, so both are a [`GtidList`]; [`GtidList::position`]
//! reduces a state to its position. The grammar:
//!
//! ```text
//! list  = "" | gtid ("," gtid)*        (ASCII whitespace around "," and at the ends)
//! gtid  = domain "-" server_id "-" seq_no
//!         domain, server_id: decimal digits, 0..=2^32-1; seq_no: 0..=2^64-1
//! ```
//!
//! With `gtid_strict_mode` (which this operator sets) every domain has one
//! increasing sequence, so "at least as far" is a comparison of sequence
//! numbers per domain. It cannot tell two histories apart that reached the
//! same number through different primaries; comparing states per server id
//! ([`GtidList::contains`]) can, which is why the hook compares states.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::{ParseError, Reason, entries, piece};

const LIST: &str = "MariaDB GTID list";

/// One MariaDB GTID: the transaction `seq` of `domain`, written by `server_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gtid {
    /// The replication domain (`gtid_domain_id`).
    pub domain: u32,
    /// The server that wrote the transaction (its `server_id`).
    pub server_id: u32,
    /// The sequence number in the domain.
    pub seq: u64,
}

impl Gtid {
    /// Parse one `domain-server_id-seq_no`, strictly; no whitespace is trimmed.
    pub fn parse(text: &str) -> Result<Gtid, ParseError> {
        parse_gtid(text).map_err(|reason| ParseError::new("MariaDB GTID", reason, text))
    }
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.domain, self.server_id, self.seq)
    }
}

impl FromStr for Gtid {
    type Err = ParseError;
    fn from_str(text: &str) -> Result<Gtid, ParseError> {
        Gtid::parse(text)
    }
}

fn parse_gtid(entry: &str) -> Result<Gtid, Reason> {
    let bad = || Reason::BadGtid(piece(entry));
    let mut parts = entry.split('-');
    let (Some(domain), Some(server_id), Some(seq), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    // A part that is not digits makes the whole entry "not d-s-n" (quoting the
    // entry says more than quoting an empty or junk part); a number too large
    // keeps its own reason.
    let number = |text: &str, field: &'static str, max: u64| match super::decimal(text, field, max) {
        Err(Reason::BadNumber(_)) => Err(bad()),
        other => other,
    };
    let domain = number(domain, "domain id", u32::MAX.into())?;
    let server_id = number(server_id, "server id", u32::MAX.into())?;
    let seq = number(seq, "sequence number", u64::MAX)?;
    // Both were bounded by u32::MAX just above.
    let (Ok(domain), Ok(server_id)) = (u32::try_from(domain), u32::try_from(server_id)) else {
        return Err(bad());
    };
    Ok(Gtid { domain, server_id, seq })
}

/// A MariaDB GTID list (a state or a position, see the [module docs](self)):
/// per (domain, server id) the highest sequence number.
///
/// A text naming the same (domain, server id) twice keeps the higher number:
/// that is what a concatenation of lists read from several variables means
/// (the last transaction of that server is the later one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct GtidList {
    last: BTreeMap<(u32, u32), u64>,
}

impl GtidList {
    /// The empty list (a server that has written nothing reports `""`).
    pub fn new() -> GtidList {
        GtidList::default()
    }

    /// Parse a GTID list text strictly (see the [module docs](self) for the
    /// grammar). Accepts what the server and `mariadb-binlog` print (lines
    /// folded after the commas included); refuses everything else, naming the
    /// reason.
    pub fn parse(text: &str) -> Result<GtidList, ParseError> {
        let parse = || -> Result<GtidList, Reason> {
            let mut list = GtidList::new();
            for entry in entries(text)? {
                list.insert(parse_gtid(entry)?);
            }
            Ok(list)
        };
        parse().map_err(|reason| ParseError::new(LIST, reason, text))
    }

    /// True when the list names no GTID.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// How many (domain, server id) pairs the list names.
    pub fn len(&self) -> usize {
        self.last.len()
    }

    /// The GTIDs, sorted by domain then server id.
    pub fn iter(&self) -> impl Iterator<Item = Gtid> + '_ {
        self.last.iter().map(|(&(domain, server_id), &seq)| Gtid { domain, server_id, seq })
    }

    /// The sequence number of (`domain`, `server_id`), if the list names it.
    pub fn get(&self, domain: u32, server_id: u32) -> Option<u64> {
        self.last.get(&(domain, server_id)).copied()
    }

    /// The highest sequence number of `domain`, whichever server wrote it.
    pub fn max_seq(&self, domain: u32) -> Option<u64> {
        self.last.range((domain, 0)..=(domain, u32::MAX)).map(|(_, &seq)| seq).max()
    }

    /// Add `gtid`; when its (domain, server id) is already there, the higher
    /// sequence number stays.
    pub fn insert(&mut self, gtid: Gtid) {
        let seq = self.last.entry((gtid.domain, gtid.server_id)).or_insert(gtid.seq);
        *seq = (*seq).max(gtid.seq);
    }

    /// The position of a state: per domain the GTID with the highest sequence
    /// number (`mdb_pos_max` in the scripts; what `MASTER_GTID_WAIT` takes).
    ///
    /// Two server ids with the same highest number in one domain cannot happen
    /// under `gtid_strict_mode`; if a text says so anyway, the lower server id
    /// is kept (the first in this list's order). The bash kept the first in its
    /// input's order; only the server id of such a tie can differ.
    pub fn position(&self) -> GtidList {
        let mut best: BTreeMap<u32, Gtid> = BTreeMap::new();
        for gtid in self.iter() {
            let kept = best.entry(gtid.domain).or_insert(gtid);
            if gtid.seq > kept.seq {
                *kept = gtid;
            }
        }
        let mut out = GtidList::new();
        best.into_values().for_each(|gtid| out.insert(gtid));
        out
    }

    /// Per (domain, server id) the higher sequence number of the two: the union
    /// of two states (`mdb_state_max`), e.g. what was executed and what was
    /// received.
    pub fn union(&self, other: &GtidList) -> GtidList {
        let mut out = self.clone();
        other.iter().for_each(|gtid| out.insert(gtid));
        out
    }

    /// True when every (domain, server id, n) of `self` is in `other` with a
    /// sequence number of at least n (`mdb_state_subset`): `other`'s state has
    /// seen every server's last transaction of `self`.
    pub fn state_subset(&self, other: &GtidList) -> bool {
        self.last.iter().all(|(key, &seq)| other.last.get(key).is_some_and(|&theirs| theirs >= seq))
    }

    /// True when every domain of `other` is in `self` with a highest sequence
    /// number at least `other`'s highest in that domain (`mdb_pos_ge`): as a
    /// position, `self` is at least as far as `other`.
    pub fn position_ge(&self, other: &GtidList) -> bool {
        let mine = self.domain_max();
        other.domain_max().iter().all(|(domain, &seq)| mine.get(domain).is_some_and(|&m| m >= seq))
    }

    /// True when `self` holds everything `other` holds (`gtid_contains`):
    /// `other`'s state is a subset of `self`'s *and* `self` is at least as far
    /// per domain. The first part is what tells two histories of the same length
    /// written by different primaries apart; the second what makes a state that
    /// lacks a later primary's entry not "contain" it.
    pub fn contains(&self, other: &GtidList) -> bool {
        other.state_subset(self) && self.position_ge(other)
    }

    /// The entries of `self` that `other` does not cover, i.e. whose (domain,
    /// server id) is missing from `other` or has a lower sequence number there
    /// (`gtid_subtract`; for reports and for finding errant transactions).
    pub fn subtract(&self, other: &GtidList) -> GtidList {
        let last = self
            .last
            .iter()
            .filter(|&(key, &seq)| other.last.get(key).is_none_or(|&theirs| theirs < seq))
            .map(|(&key, &seq)| (key, seq))
            .collect();
        GtidList { last }
    }

    /// True when every transaction of the state `self` lies within the position
    /// `pos`: per domain of `self`, `pos` names it with a sequence number at least
    /// `self`'s highest (`gtid_within`: a binary log that began at `self` can
    /// continue a dump taken at `pos`). The empty list is within every position.
    pub fn within(&self, pos: &GtidList) -> bool {
        pos.position_ge(self)
    }

    /// The entries written by `server_id` (for errant transactions: a server's
    /// own writes that the others lack).
    pub fn originated_by(&self, server_id: u32) -> GtidList {
        let last = self.last.iter().filter(|((_, s), _)| *s == server_id).map(|(&k, &v)| (k, v)).collect();
        GtidList { last }
    }

    /// Per domain the highest sequence number.
    fn domain_max(&self) -> BTreeMap<u32, u64> {
        let mut max: BTreeMap<u32, u64> = BTreeMap::new();
        for (&(domain, _), &seq) in &self.last {
            let m = max.entry(domain).or_insert(seq);
            *m = (*m).max(seq);
        }
        max
    }
}

impl fmt::Display for GtidList {
    /// The canonical text: `d-s-n` sorted by domain then server id, joined by
    /// `,` without whitespace; `""` for the empty list.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, gtid) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{gtid}")?;
        }
        Ok(())
    }
}

impl FromStr for GtidList {
    type Err = ParseError;
    fn from_str(text: &str) -> Result<GtidList, ParseError> {
        GtidList::parse(text)
    }
}

impl FromIterator<Gtid> for GtidList {
    fn from_iter<I: IntoIterator<Item = Gtid>>(iter: I) -> GtidList {
        let mut list = GtidList::new();
        iter.into_iter().for_each(|gtid| list.insert(gtid));
        list
    }
}

super::serde_as_text!(GtidList, "a MariaDB GTID list");
super::serde_as_text!(Gtid, "a MariaDB GTID");

#[cfg(test)]
mod tests {
    use super::*;

    fn list(text: &str) -> GtidList {
        match GtidList::parse(text) {
            Ok(l) => l,
            Err(e) => panic!("{text:?}: {e}"),
        }
    }

    /// What a refused text's reason should look like.
    type Expect = fn(&Reason) -> bool;

    fn reason(text: &str) -> Reason {
        match GtidList::parse(text) {
            Ok(l) => panic!("{text:?} was accepted as {l}"),
            Err(e) => e.reason().clone(),
        }
    }

    #[test]
    fn parses_and_prints_sorted() {
        assert_eq!(list("").to_string(), "");
        assert!(list(" \n").is_empty());
        assert_eq!(list("1-2-3,0-9-1, 0-1-7").to_string(), "0-1-7,0-9-1,1-2-3");
        // mariadb-binlog folds a Gtid_list over lines
        assert_eq!(list("0-2-781,\n0-1-1828,\n0-3-1830\n").to_string(), "0-1-1828,0-2-781,0-3-1830");
        // a repeated (domain, server id) keeps the higher number
        assert_eq!(list("0-1-5,0-1-9,0-1-7").to_string(), "0-1-9");
        let max = format!("{}-{}-{}", u32::MAX, u32::MAX, u64::MAX);
        assert_eq!(list(&max).to_string(), max);
        assert_eq!(list("00-01-0010").to_string(), "0-1-10");
        assert_eq!(list("0-1-0").get(0, 1), Some(0));
        let l = list("0-1-5,0-2-9,3-1-1");
        assert_eq!(
            (l.len(), l.get(0, 2), l.get(1, 2), l.max_seq(0), l.max_seq(3), l.max_seq(4)),
            (3, Some(9), None, Some(9), Some(1), None)
        );
        assert_eq!(l.iter().collect::<GtidList>(), l);
        assert_eq!(Gtid::parse("1-2-3").ok(), Some(Gtid { domain: 1, server_id: 2, seq: 3 }));
    }

    // tests/scripts/test_pure.py: test_mariadb_gtid_lists
    #[test]
    fn the_bash_tests() {
        // mdb_pos_max A B: the position of both
        assert_eq!(list("0-1-5,1-2-3").union(&list("0-2-9,1-2-1")).position().to_string(), "0-2-9,1-2-3");
        // mdb_state_max A B "": the union of states
        let u = list("0-1-5,0-2-7").union(&list("0-1-9,1-3-2")).union(&list(""));
        assert_eq!(u.to_string(), "0-1-9,0-2-7,1-3-2");
        assert!(list("0-1-5").state_subset(&list("0-1-9,0-2-1")));
        assert!(!list("0-1-5,0-3-1").state_subset(&list("0-1-9")));
        assert!(list("0-2-10").position_ge(&list("0-1-9")));
        assert!(!list("0-2-8").position_ge(&list("0-1-9")));
        assert_eq!(list("0-1-20,0-9-21").subtract(&list("0-1-20")).to_string(), "0-9-21");
    }

    // tests/scripts/test_pure.py: test_gtid_within (MariaDB rows) and the
    // three-servers binary log's Gtid_list.
    #[test]
    fn within() {
        for (start, pos, within) in [
            ("", "0-1-5", true),
            ("0-1-5", "0-1-5", true),
            ("0-1-3,0-2-5", "0-2-5", true),
            ("0-1-6", "0-1-5", false),
            ("0-1-5,1-1-2", "0-1-9", false), // a domain the dump lacks
            ("0-2-781,0-1-1828,0-3-1830", "0-3-1830", true),
            ("", "", true),
            ("0-1-1", "", false),
        ] {
            assert_eq!(list(start).within(&list(pos)), within, "{start:?} within {pos:?}");
        }
    }

    // tests/scripts/test_pure.py: test_choose_most_advanced and test_split_errant
    // (their GTID decisions, MariaDB rows).
    #[test]
    fn the_bash_decisions() {
        let (small, big, other) = (list("0-1-10"), list("0-1-12"), list("0-1-10,0-9-11"));
        assert!(big.contains(&small) && !small.contains(&big));
        assert!(big.contains(&big));
        // same length, different histories: diverged, never "the longer one"
        assert!(!big.contains(&other) && !other.contains(&big));
        // position alone would call `other` as far as `big`... and further
        assert!(other.position_ge(&list("0-1-11")));

        let errant = |mine: &str, others: &str, server_id: u32| {
            !list(mine).subtract(&list(others)).originated_by(server_id).is_empty()
        };
        let (db0, db1, db2) = ("0-1-10", "0-1-10,0-2-11", "0-1-9");
        assert!(errant(db1, db2, 2));
        assert!(!errant(db2, db1, 3));
        assert!(!errant(db1, &format!("{db1},{db2}"), 2), "on the old primary too: legit");
        assert!(!errant(db0, db2, 2));
        assert_eq!(list(db1).originated_by(2).to_string(), "0-2-11");
    }

    #[test]
    fn position_ties_keep_the_lower_server_id() {
        assert_eq!(list("0-7-5,0-3-5,1-1-2").position().to_string(), "0-3-5,1-1-2");
        assert_eq!(list("0-7-6,0-3-5").position().to_string(), "0-7-6");
    }

    #[test]
    fn refuses_what_is_not_the_grammar() {
        let cases: &[(&str, Expect)] = &[
            ("0-1-BASH_VERSINFO[$(touch${IFS}x)0]", |r| matches!(r, Reason::BadGtid(_))),
            ("0-1-", |r| matches!(r, Reason::BadGtid(_))),
            ("1--2-3", |r| matches!(r, Reason::BadGtid(_))),
            ("0-1-2,", |r| matches!(r, Reason::EmptyEntry)),
            (",0-1-2", |r| matches!(r, Reason::EmptyEntry)),
            ("0-1-2,,0-2-3", |r| matches!(r, Reason::EmptyEntry)),
            ("0-1", |r| matches!(r, Reason::BadGtid(_))),
            ("0-1-2-3", |r| matches!(r, Reason::BadGtid(_))),
            ("-0-1-2", |r| matches!(r, Reason::BadGtid(_))),
            ("+0-1-2", |r| matches!(r, Reason::BadGtid(_))),
            ("0-+1-2", |r| matches!(r, Reason::BadGtid(_))),
            ("0-1-0x2", |r| matches!(r, Reason::BadGtid(_))),
            ("0-1-2x", |r| matches!(r, Reason::BadGtid(_))),
            ("x0-1-2", |r| matches!(r, Reason::BadGtid(_))),
            ("0-1-2;0-1-3", |r| matches!(r, Reason::BadGtid(_))),
            ("0 -1-2", |r| matches!(r, Reason::WhitespaceInEntry(_))),
            ("0-1- 2", |r| matches!(r, Reason::WhitespaceInEntry(_))),
            ("0-1-2 0-1-3", |r| matches!(r, Reason::WhitespaceInEntry(_))),
            ("0-1-2\u{a0}", |r| matches!(r, Reason::BadGtid(_))),
            ("4294967296-1-2", |r| matches!(r, Reason::TooLarge { field: "domain id", .. })),
            ("0-4294967296-2", |r| matches!(r, Reason::TooLarge { field: "server id", .. })),
            ("0-1-18446744073709551616", |r| matches!(r, Reason::TooLarge { field: "sequence number", .. })),
            ("0-1-99999999999999999999999", |r| matches!(r, Reason::TooLarge { .. })),
            ("3e11fa47-71ca-11e1-9e33-c80aa9429562:1", |r| matches!(r, Reason::BadGtid(_))),
        ];
        for (text, expected) in cases {
            let r = reason(text);
            assert!(expected(&r), "{text:?}: {r:?}");
        }
    }

    #[test]
    fn the_error_names_the_problem_and_quotes_the_input() {
        let e = match GtidList::parse("0-1-5,0-1-") {
            Err(e) => e,
            Ok(l) => panic!("{l}"),
        };
        assert_eq!(
            e.to_string(),
            "not a MariaDB GTID list: \"0-1-\" is not domain-server_id-seq_no (in \"0-1-5,0-1-\")"
        );
        let e = match GtidList::parse("0-4294967296-1") {
            Err(e) => e,
            Ok(l) => panic!("{l}"),
        };
        assert_eq!(
            e.to_string(),
            "not a MariaDB GTID list: \"4294967296\" is above 4294967295, the largest server id (in \"0-4294967296-1\")"
        );
    }

    #[test]
    fn serde_carries_the_canonical_text() {
        let l = list("1-1-1, 0-1-2");
        let json = serde_json::to_string(&l).unwrap_or_default();
        assert_eq!(json, "\"0-1-2,1-1-1\"");
        assert_eq!(serde_json::from_str::<GtidList>(&json).ok(), Some(l));
        assert!(serde_json::from_str::<GtidList>("\"0-1-\"").is_err());
        assert!(serde_json::from_str::<GtidList>("5").is_err());
    }
}

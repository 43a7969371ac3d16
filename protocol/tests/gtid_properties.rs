//! Property tests of `protocol::gtid`, through its public API only.
//!
//! Three kinds of properties:
//! - every operation agrees with a naive model (sets of single GTIDs for MySQL,
//!   the raw list of entries as the bash read them for MariaDB) over small
//!   ranges, with texts written in every shape the grammar allows (split,
//!   shuffled, grouped, upper case, whitespace around commas);
//! - algebraic laws over sets with numbers anywhere up to the largest allowed;
//! - the parser never panics, and refuses the characters that once reached
//!   shell arithmetic (`$ ( ) [ ] ; ' " \``) and whitespace inside an entry.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use proptest::sample::Index;
use protocol::gtid::mariadb::{Gtid, GtidList};
use protocol::gtid::mysql::{GtidSet, Interval, MAX_TRANSACTION_NUMBER, Tag, Uuid};

/// Characters that must never be part of a GTID text.
const FORBIDDEN: &[char] = &['$', '(', ')', '[', ']', ';', '\'', '"', '`', '\\'];
/// Whitespace the grammars allow around commas and at the ends.
const SPACES: &[&str] = &["", " ", "\n", "\t", "\r\n", " \n "];

fn space(i: usize) -> &'static str {
    SPACES.get(i % SPACES.len()).copied().unwrap_or_default()
}

/// Byte offsets strictly inside an entry: both neighbours are neither a comma
/// nor whitespace, so a character inserted there lands inside a token.
fn inside_offsets(text: &str) -> Vec<usize> {
    let b = text.as_bytes();
    (1..b.len())
        .filter(|&i| {
            let token = |c: u8| c != b',' && !c.is_ascii_whitespace();
            token(b[i - 1]) && token(b[i])
        })
        .collect()
}

fn insert_at(text: &str, at: usize, what: char) -> String {
    let mut out = text.to_string();
    out.insert(at, what);
    out
}

// ------------------------------------------------------------------ MySQL

const UUIDS: [&str; 3] = [
    "3e11fa47-71ca-11e1-9e33-c80aa9429562",
    "aaaaaaaa-0000-0000-0000-000000000002",
    "bbbbbbbb-0000-0000-0000-00000000000c",
];
const TAGS: [&str; 2] = ["t", "tag_2"];

fn uuid(i: usize) -> Uuid {
    UUIDS.get(i).and_then(|u| Uuid::parse(u).ok()).unwrap_or_else(|| panic!("uuid {i}"))
}

fn tag(i: usize) -> Tag {
    TAGS.get(i).and_then(|t| Tag::parse(t).ok()).unwrap_or_else(|| panic!("tag {i}"))
}

/// A single GTID of the model: (uuid index, tag index, transaction number).
type Model = BTreeSet<(usize, Option<usize>, u64)>;

/// A piece of a GTID set text: `uuid[:tag]:start[-start+len]`, and how to
/// write it: upper case or not, joined to the previous entry when it can be,
/// which whitespace around the comma before it.
#[derive(Debug, Clone)]
struct Piece {
    uuid: usize,
    tag: Option<usize>,
    start: u64,
    len: u64,
    upper: bool,
    join: bool,
    space: (usize, usize),
}

fn piece() -> impl Strategy<Value = Piece> {
    (0..3usize, prop::option::of(0..2usize), 1..=30u64, 0..=6u64, any::<bool>(), any::<bool>(), (0..6usize, 0..6usize))
        .prop_map(|(uuid, tag, start, len, upper, join, space)| Piece { uuid, tag, start, len, upper, join, space })
}

fn pieces() -> impl Strategy<Value = (Vec<Piece>, (usize, usize))> {
    (prop::collection::vec(piece(), 0..8), (0..6usize, 0..6usize))
}

fn case(text: &str, upper: bool) -> String {
    if upper { text.to_ascii_uppercase() } else { text.to_string() }
}

/// A text for the pieces, in one of the many shapes that mean the same set.
fn render((pieces, ends): &(Vec<Piece>, (usize, usize))) -> String {
    let mut out = String::new();
    // The UUID and the current tag of the entry being written.
    let mut open: Option<(usize, Option<usize>)> = None;
    for p in pieces {
        // A tag cannot be switched back to "untagged" within an entry.
        let joinable = open.is_some_and(|(u, t)| u == p.uuid && (p.tag.is_some() || t.is_none()));
        if p.join && joinable {
            if open.is_some_and(|(_, t)| t != p.tag) {
                out += &format!(":{}", case(TAGS[p.tag.unwrap_or_default()], p.upper));
            }
        } else {
            if !out.is_empty() {
                out += &format!("{},{}", space(p.space.0), space(p.space.1));
            }
            out += &case(UUIDS[p.uuid], p.upper);
            if let Some(t) = p.tag {
                out += &format!(":{}", case(TAGS[t], p.upper));
            }
        }
        open = Some((p.uuid, p.tag));
        if p.len == 0 {
            out += &format!(":{}", p.start);
        } else {
            out += &format!(":{}-{}", p.start, p.start + p.len);
        }
    }
    format!("{}{out}{}", space(ends.0), space(ends.1))
}

fn model_of_pieces((pieces, _): &(Vec<Piece>, (usize, usize))) -> Model {
    pieces.iter().flat_map(|p| (p.start..=p.start + p.len).map(move |n| (p.uuid, p.tag, n))).collect()
}

fn model_of_set(set: &GtidSet) -> Model {
    let mut model = Model::new();
    for (u, t, ivs) in set.iter() {
        let ui = UUIDS.iter().position(|x| *x == u.to_string()).unwrap_or_else(|| panic!("uuid {u}"));
        let ti = t.map(|t| TAGS.iter().position(|x| *x == t.as_str()).unwrap_or_else(|| panic!("tag {t}")));
        for iv in ivs {
            model.extend((iv.start()..=iv.end()).map(|n| (ui, ti, n)));
        }
    }
    model
}

fn parse_set(text: &str) -> GtidSet {
    GtidSet::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

/// A set with numbers anywhere in 1..=2^63-1, biased to both ends.
fn wide_set() -> impl Strategy<Value = GtidSet> {
    let number =
        || prop_oneof![1..=40u64, (MAX_TRANSACTION_NUMBER - 40)..=MAX_TRANSACTION_NUMBER, 1..=MAX_TRANSACTION_NUMBER];
    prop::collection::vec((0..3usize, prop::option::of(0..2usize), number(), number()), 0..10).prop_map(|runs| {
        let mut set = GtidSet::new();
        for (u, t, a, b) in runs {
            let iv = Interval::new(a.min(b), a.max(b)).unwrap_or_else(|| panic!("{a} {b}"));
            set.insert(uuid(u), t.map(tag), iv);
        }
        set
    })
}

proptest! {
    #[test]
    fn mysql_text_means_its_model((a, b) in (pieces(), pieces())) {
        let (ta, tb) = (render(&a), render(&b));
        let (sa, sb) = (parse_set(&ta), parse_set(&tb));
        let (ma, mb) = (model_of_pieces(&a), model_of_pieces(&b));
        prop_assert_eq!(&model_of_set(&sa), &ma, "{:?}", ta);

        // display / parse round trip, and the canonical text is a fixed point
        let canonical = sa.to_string();
        prop_assert_eq!(&parse_set(&canonical), &sa);
        prop_assert_eq!(parse_set(&canonical).to_string(), canonical);

        // every operation agrees with the model
        prop_assert_eq!(model_of_set(&sa.union(&sb)), ma.union(&mb).copied().collect::<Model>());
        prop_assert_eq!(model_of_set(&sa.subtract(&sb)), ma.difference(&mb).copied().collect::<Model>());
        prop_assert_eq!(model_of_set(&sa.intersection(&sb)), ma.intersection(&mb).copied().collect::<Model>());
        prop_assert_eq!(sa.is_subset(&sb), ma.is_subset(&mb));
        prop_assert_eq!(sa.is_empty(), ma.is_empty());
        prop_assert_eq!(sa.count(), ma.len() as u128);
        for u in 0..UUIDS.len() {
            let own: Model = ma.iter().filter(|g| g.0 == u).copied().collect();
            prop_assert_eq!(model_of_set(&sa.originated_by(&uuid(u))), own);
            for t in [None, Some(0), Some(1)] {
                for n in 0..=40 {
                    prop_assert_eq!(sa.contains_gtid(&uuid(u), t.map(tag).as_ref(), n), ma.contains(&(u, t, n)));
                }
            }
        }
        // a comma-joined text is the union
        if !ma.is_empty() && !mb.is_empty() {
            prop_assert_eq!(parse_set(&format!("{ta},{tb}")), sa.union(&sb));
        }
    }

    #[test]
    fn mysql_round_trip(s in wide_set()) {
        prop_assert_eq!(parse_set(&s.to_string()), s.clone());
        let upper = s.to_string().to_ascii_uppercase().replace(",", " ,\n");
        prop_assert_eq!(parse_set(&upper), s);
    }

    #[test]
    fn mysql_union_laws(a in wide_set(), b in wide_set(), c in wide_set()) {
        prop_assert_eq!(a.union(&b), b.union(&a));
        prop_assert_eq!(a.union(&b).union(&c), a.union(&b.union(&c)));
        prop_assert_eq!(a.union(&a), a.clone());
        prop_assert_eq!(a.union(&GtidSet::new()), a.clone());
        prop_assert!(a.is_subset(&a.union(&b)) && b.is_subset(&a.union(&b)));
        prop_assert!(a.union(&b).count() <= a.count() + b.count());
    }

    #[test]
    fn mysql_subtract_laws(a in wide_set(), b in wide_set()) {
        let d = a.subtract(&b);
        prop_assert!(d.intersection(&b).is_empty());
        prop_assert_eq!(d.union(&a.intersection(&b)), a.clone());
        prop_assert_eq!(a.is_subset(&b), d.is_empty());
        prop_assert_eq!(a.intersection(&b), b.intersection(&a));
        prop_assert!(a.intersection(&b).is_subset(&a) && d.is_subset(&a));
        prop_assert_eq!(d.count() + a.intersection(&b).count(), a.count());
        prop_assert!(a.subtract(&a).is_empty() && a.is_subset(&a));
        // a subset of each other is equality
        prop_assert_eq!(a.is_subset(&b) && b.is_subset(&a), a == b);
    }

    #[test]
    fn mysql_parse_never_panics(text in any::<String>(), grammarish in "[0-9a-fA-F:,tT_ \n-]{0,90}") {
        for t in [&text, &grammarish] {
            if let Ok(s) = GtidSet::parse(t) {
                prop_assert_eq!(parse_set(&s.to_string()), s);
            }
        }
    }

    #[test]
    fn mysql_mutated_texts_parse_consistently(p in pieces(), at in any::<Index>(), c in any::<char>()) {
        let text = render(&p);
        let mut chars: Vec<char> = text.chars().collect();
        let i = at.index(chars.len() + 1);
        chars.insert(i, c);
        let mutated: String = chars.iter().collect();
        if let Ok(s) = GtidSet::parse(&mutated) {
            prop_assert_eq!(parse_set(&s.to_string()), s);
        }
        if !chars.is_empty() {
            chars.remove(at.index(chars.len()));
            let _ = GtidSet::parse(&chars.iter().collect::<String>());
        }
    }

    #[test]
    fn mysql_refuses_forbidden_characters(p in pieces(), at in any::<Index>(), c in prop::sample::select(FORBIDDEN)) {
        let text = render(&p);
        let i = at.index(text.len() + 1);
        let bad = insert_at(&text, i, c);
        prop_assert!(GtidSet::parse(&bad).is_err(), "{:?} was accepted", bad);
    }

    #[test]
    fn mysql_refuses_whitespace_inside_an_entry(p in pieces(), at in any::<Index>(), w in prop::sample::select(vec![' ', '\t', '\n'])) {
        let text = render(&p);
        let offsets = inside_offsets(&text);
        prop_assume!(!offsets.is_empty());
        let bad = insert_at(&text, offsets[at.index(offsets.len())], w);
        prop_assert!(GtidSet::parse(&bad).is_err(), "{:?} was accepted", bad);
    }
}

// ------------------------------------------------------------------ MariaDB

/// The raw entries of a list text, as the bash functions read them (repeats
/// kept), and how to write them.
#[derive(Debug, Clone)]
struct Raw {
    gtids: Vec<(u32, u32, u64)>,
    spaces: Vec<(usize, usize)>,
    ends: (usize, usize),
}

fn raw() -> impl Strategy<Value = Raw> {
    (
        prop::collection::vec((0..3u32, 0..4u32, 0..20u64), 0..8),
        prop::collection::vec((0..6usize, 0..6usize), 8),
        (0..6usize, 0..6usize),
    )
        .prop_map(|(gtids, spaces, ends)| Raw { gtids, spaces, ends })
}

fn render_list(r: &Raw) -> String {
    let mut out = String::new();
    for (i, (d, s, n)) in r.gtids.iter().enumerate() {
        if i > 0 {
            let (a, b) = r.spaces.get(i).copied().unwrap_or_default();
            out += &format!("{},{}", space(a), space(b));
        }
        out += &format!("{d}-{s}-{n}");
    }
    format!("{}{out}{}", space(r.ends.0), space(r.ends.1))
}

fn parse_list(text: &str) -> GtidList {
    GtidList::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn list_of(r: &Raw) -> GtidList {
    parse_list(&render_list(r))
}

/// mdb_state_subset A B over the raw entries.
fn naive_state_subset(a: &Raw, b: &Raw) -> bool {
    a.gtids.iter().all(|&(d, s, n)| b.gtids.iter().any(|&(bd, bs, m)| (bd, bs) == (d, s) && m >= n))
}

/// mdb_pos_ge A B over the raw entries.
fn naive_pos_ge(a: &Raw, b: &Raw) -> bool {
    b.gtids.iter().all(|&(d, _, n)| a.gtids.iter().any(|&(ad, _, m)| ad == d && m >= n))
}

fn wide_list() -> impl Strategy<Value = GtidList> {
    prop::collection::vec((any::<u32>(), prop_oneof![0..4u32, any::<u32>()], any::<u64>()), 0..8)
        .prop_map(|gtids| gtids.into_iter().map(|(domain, server_id, seq)| Gtid { domain, server_id, seq }).collect())
}

proptest! {
    #[test]
    fn mariadb_text_means_its_model(a in raw(), b in raw()) {
        let (la, lb) = (list_of(&a), list_of(&b));
        // per (domain, server id) the highest number
        let mut last: BTreeMap<(u32, u32), u64> = BTreeMap::new();
        for &(d, s, n) in &a.gtids {
            let m = last.entry((d, s)).or_insert(n);
            *m = (*m).max(n);
        }
        prop_assert_eq!(la.iter().map(|g| ((g.domain, g.server_id), g.seq)).collect::<BTreeMap<_, _>>(), last.clone());
        prop_assert_eq!(parse_list(&la.to_string()), la.clone());

        prop_assert_eq!(la.state_subset(&lb), naive_state_subset(&a, &b));
        prop_assert_eq!(la.position_ge(&lb), naive_pos_ge(&a, &b));
        prop_assert_eq!(la.contains(&lb), naive_state_subset(&b, &a) && naive_pos_ge(&a, &b));
        // gtid_within START POS = mdb_pos_ge POS (mdb_pos_max START)
        prop_assert_eq!(la.within(&lb), naive_pos_ge(&b, &a));
        // gtid_subtract: the entries of A that B does not cover
        let rest: BTreeMap<(u32, u32), u64> = last
            .iter()
            .filter(|&(&(d, s), &n)| !b.gtids.iter().any(|&(bd, bs, m)| (bd, bs) == (d, s) && m >= n))
            .map(|(&k, &v)| (k, v))
            .collect();
        prop_assert_eq!(la.subtract(&lb).iter().map(|g| ((g.domain, g.server_id), g.seq)).collect::<BTreeMap<_, _>>(), rest);
        // the position: per domain the highest, the lower server id on a tie
        let mut pos: BTreeMap<u32, (u64, u32)> = BTreeMap::new();
        for (&(d, s), &n) in &last {
            let best = pos.entry(d).or_insert((n, s));
            if n > best.0 || (n == best.0 && s < best.1) {
                *best = (n, s);
            }
        }
        prop_assert_eq!(la.position().iter().map(|g| (g.domain, (g.seq, g.server_id))).collect::<BTreeMap<_, _>>(), pos);
        for server in 0..4 {
            let own: Vec<Gtid> = la.iter().filter(|g| g.server_id == server).collect();
            prop_assert_eq!(la.originated_by(server).iter().collect::<Vec<_>>(), own);
        }
        // a comma-joined text is the union
        if !a.gtids.is_empty() && !b.gtids.is_empty() {
            prop_assert_eq!(parse_list(&format!("{},{}", render_list(&a), render_list(&b))), la.union(&lb));
        }
    }

    #[test]
    fn mariadb_round_trip(l in wide_list()) {
        prop_assert_eq!(parse_list(&l.to_string()), l.clone());
        prop_assert_eq!(parse_list(&format!("\n{}\n", l.to_string().replace(",", ", \n"))), l);
    }

    #[test]
    fn mariadb_laws(a in wide_list(), b in wide_list(), c in wide_list()) {
        prop_assert_eq!(a.union(&b), b.union(&a));
        prop_assert_eq!(a.union(&b).union(&c), a.union(&b.union(&c)));
        prop_assert_eq!(a.union(&a), a.clone());
        prop_assert!(a.contains(&a));
        prop_assert!(a.union(&b).contains(&a) && a.union(&b).contains(&b));
        prop_assert!(a.state_subset(&a.union(&b)) && b.state_subset(&a.union(&b)));
        prop_assert!(a.subtract(&b).state_subset(&a) && a.subtract(&a).is_empty());
        prop_assert_eq!(a.state_subset(&b), a.subtract(&b).is_empty());
        prop_assert!(a.within(&a.position()) && a.position().position_ge(&a) && a.position_ge(&a.position()));
    }

    #[test]
    fn mariadb_parse_never_panics(text in any::<String>(), grammarish in "[0-9, \n-]{0,60}") {
        for t in [&text, &grammarish] {
            if let Ok(l) = GtidList::parse(t) {
                prop_assert_eq!(parse_list(&l.to_string()), l);
            }
        }
    }

    #[test]
    fn mariadb_refuses_forbidden_characters(r in raw(), at in any::<Index>(), c in prop::sample::select(FORBIDDEN)) {
        let text = render_list(&r);
        let bad = insert_at(&text, at.index(text.len() + 1), c);
        prop_assert!(GtidList::parse(&bad).is_err(), "{:?} was accepted", bad);
    }

    #[test]
    fn mariadb_refuses_whitespace_inside_an_entry(r in raw(), at in any::<Index>(), w in prop::sample::select(vec![' ', '\t', '\n'])) {
        let text = render_list(&r);
        let offsets = inside_offsets(&text);
        prop_assume!(!offsets.is_empty());
        let bad = insert_at(&text, offsets[at.index(offsets.len())], w);
        prop_assert!(GtidList::parse(&bad).is_err(), "{:?} was accepted", bad);
    }
}

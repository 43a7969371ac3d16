//! MySQL GTID sets: `uuid:1-5:7,uuid:tag:1-3`.
//!
//! A MySQL GTID is `source_uuid[:tag]:transaction_number`; a GTID *set* is every
//! transaction a server has executed, written as intervals (RM "GTID Format and
//! Storage", "GTID Sets"). The text grammar accepted here (MySQL 8.4 / 9.x, tags
//! from 8.3):
//!
//! ```text
//! set      = "" | entry ("," entry)*          (ASCII whitespace around "," and at the ends)
//! entry    = uuid (":" token)+
//! token    = tag | interval                   (a tag must be followed by an interval)
//! uuid     = 8-4-4-4-12 hexadecimal digits, any case
//! tag      = [A-Za-z_][A-Za-z0-9_]{0,31}, any case
//! interval = n | n "-" m                      (decimal digits, 1 <= n <= m <= 2^63-1)
//! ```
//!
//! A tag token switches the tag for the intervals after it, until the entry ends
//! or another tag comes; intervals before any tag are untagged. So
//! `uuid:1-5:tag1:1-3` and `uuid:1-5,uuid:tag1:1-3` are the same set. A tagged
//! GTID is a different transaction from the untagged one with the same number:
//! `uuid:t:1` is not in `uuid:1`.
//!
//! UUIDs and tags are case-insensitive and kept in lower case. Overlapping and
//! adjacent intervals are merged, so equal sets are equal values and print the
//! same text, whatever order and shape they were written in.
//!
//! The operations are those of the server's functions (RM "Functions Used with
//! Global Transaction Identifiers"): [`GtidSet::union`], [`GtidSet::subtract`]
//! (`GTID_SUBTRACT`), [`GtidSet::is_subset`] (`GTID_SUBSET`), computed here so
//! that no comparison needs a server round trip and the same code runs in the
//! unit tests.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::{ParseError, Reason, entries, piece};

/// The largest transaction number MySQL accepts (`2^63 - 1`, a signed 64-bit
/// integer on the server).
pub const MAX_TRANSACTION_NUMBER: u64 = i64::MAX as u64;

/// The longest tag, in characters (RM: "up to 32 characters").
pub const MAX_TAG_LEN: usize = 32;

const SET: &str = "MySQL GTID set";

/// A server's UUID (`@@server_uuid`), the source part of the GTIDs it writes.
///
/// Stored as its 16 bytes, so two spellings (`3E11FA47-...`, `3e11fa47-...`)
/// are one value; printed in lower case. The byte order sorts like the lower-case
/// text does, so sets print their UUIDs in text order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uuid([u8; 16]);

impl Uuid {
    /// Parse `8-4-4-4-12` hexadecimal digits, any case. No whitespace is trimmed:
    /// the caller has already cut the value out of whatever carried it.
    pub fn parse(text: &str) -> Result<Uuid, ParseError> {
        parse_uuid(text).ok_or_else(|| ParseError::new("MySQL server UUID", Reason::BadUuid(piece(text)), text))
    }

    /// The UUID's 16 bytes, in text order.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl From<[u8; 16]> for Uuid {
    fn from(bytes: [u8; 16]) -> Uuid {
        Uuid(bytes)
    }
}

fn parse_uuid(text: &str) -> Option<Uuid> {
    let bytes = text.as_bytes();
    if bytes.len() != 36 {
        return None;
    }
    let mut out = [0u8; 16];
    let mut nibbles = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            if b != b'-' {
                return None;
            }
            continue;
        }
        let value = char::from(b).to_digit(16)?;
        let slot = out.get_mut(nibbles / 2)?;
        // `to_digit(16)` is below 16: the cast cannot truncate.
        *slot = (*slot << 4) | value as u8;
        nibbles += 1;
    }
    Some(Uuid(out))
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl FromStr for Uuid {
    type Err = ParseError;
    fn from_str(text: &str) -> Result<Uuid, ParseError> {
        Uuid::parse(text)
    }
}

/// A GTID tag (MySQL 8.3+): a name for a group of transactions of one source,
/// `[A-Za-z_][A-Za-z0-9_]{0,31}`, case-insensitive, kept in lower case.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tag(String);

impl Tag {
    /// Parse a tag, any case. No whitespace is trimmed.
    pub fn parse(text: &str) -> Result<Tag, ParseError> {
        parse_tag(text).map_err(|reason| ParseError::new("MySQL GTID tag", reason, text))
    }

    /// The tag, in lower case.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn parse_tag(text: &str) -> Result<Tag, Reason> {
    let mut chars = text.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if first_ok && rest_ok && text.len() <= MAX_TAG_LEN {
        Ok(Tag(text.to_ascii_lowercase()))
    } else {
        Err(Reason::BadTag(piece(text)))
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Tag {
    type Err = ParseError;
    fn from_str(text: &str) -> Result<Tag, ParseError> {
        Tag::parse(text)
    }
}

/// The transaction numbers `start..=end` of one source and tag; never empty,
/// `1 <= start <= end <=` [`MAX_TRANSACTION_NUMBER`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Interval {
    start: u64,
    end: u64,
}

impl Interval {
    /// `start..=end`, or `None` unless `1 <= start <= end <=` [`MAX_TRANSACTION_NUMBER`].
    pub fn new(start: u64, end: u64) -> Option<Interval> {
        (1 <= start && start <= end && end <= MAX_TRANSACTION_NUMBER).then_some(Interval { start, end })
    }

    /// The first transaction number.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// The last transaction number (inclusive).
    pub fn end(&self) -> u64 {
        self.end
    }

    /// How many transactions: at least 1, at most `2^63 - 1`.
    pub fn count(&self) -> u64 {
        self.end - self.start + 1
    }
}

impl fmt::Display for Interval {
    /// `n` for a single transaction, `n-m` otherwise, as MySQL prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.start == self.end { write!(f, "{}", self.start) } else { write!(f, "{}-{}", self.start, self.end) }
    }
}

/// The key of one run of intervals: the source and the tag (`None` = untagged).
/// `None` sorts before every tag, which is the order MySQL prints them in.
type Key = (Uuid, Option<Tag>);

/// A MySQL GTID set, normalized: per (UUID, tag) the intervals sorted, disjoint
/// and not adjacent (`1-3:4-5` is stored as `1-5`), and no key without
/// intervals. Equal sets are therefore equal values.
///
/// Parse with [`GtidSet::parse`] or [`str::parse`]; print with `Display`
/// (canonical text, see [`GtidSet`'s `Display`](#impl-Display-for-GtidSet)).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct GtidSet {
    runs: BTreeMap<Key, Vec<Interval>>,
}

impl GtidSet {
    /// The empty set (what a server without transactions reports, `""`).
    pub fn new() -> GtidSet {
        GtidSet::default()
    }

    /// Parse a GTID set text strictly (see the [module docs](self) for the
    /// grammar). Accepts what MySQL prints for `@@gtid_executed` (newlines after
    /// the commas included), what `GTID_SUBTRACT` and friends return, and any
    /// order, case or overlap; refuses everything else, naming the reason.
    pub fn parse(text: &str) -> Result<GtidSet, ParseError> {
        parse_set(text).map_err(|reason| ParseError::new(SET, reason, text))
    }

    /// True when the set holds no transaction.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// How many transactions the set holds. A `u128`: one source alone can hold
    /// `2^63 - 1`, and there is no limit on the number of sources and tags.
    pub fn count(&self) -> u128 {
        self.runs.values().flatten().map(|iv| u128::from(iv.count())).sum()
    }

    /// Every (UUID, tag, intervals) run, sorted by UUID then tag (untagged first);
    /// the intervals are sorted, disjoint and never empty.
    pub fn iter(&self) -> impl Iterator<Item = (&Uuid, Option<&Tag>, &[Interval])> {
        self.runs.iter().map(|((uuid, tag), ivs)| (uuid, tag.as_ref(), ivs.as_slice()))
    }

    /// The intervals of one source and tag (empty when the set has none).
    pub fn intervals(&self, uuid: &Uuid, tag: Option<&Tag>) -> &[Interval] {
        self.runs.get(&(*uuid, tag.cloned())).map_or(&[], Vec::as_slice)
    }

    /// Add the transactions `interval` of `uuid` and `tag` to the set.
    pub fn insert(&mut self, uuid: Uuid, tag: Option<Tag>, interval: Interval) {
        let ivs = self.runs.entry((uuid, tag)).or_default();
        ivs.push(interval);
        normalize(ivs);
    }

    /// True when the set holds the transaction `uuid[:tag]:n`.
    pub fn contains_gtid(&self, uuid: &Uuid, tag: Option<&Tag>, n: u64) -> bool {
        let ivs = self.intervals(uuid, tag);
        // The last interval starting at or before n is the only one that can hold it.
        let i = ivs.partition_point(|iv| iv.start <= n);
        i.checked_sub(1).and_then(|i| ivs.get(i)).is_some_and(|iv| n <= iv.end)
    }

    /// True when every transaction of `self` is in `other`: `GTID_SUBSET(self,
    /// other)`. The empty set is a subset of every set.
    pub fn is_subset(&self, other: &GtidSet) -> bool {
        self.runs.iter().all(|(key, ivs)| {
            let theirs = other.runs.get(key).map_or(&[][..], Vec::as_slice);
            ivs.iter().all(|iv| {
                // Other's intervals are merged: one of them must cover `iv` whole.
                let i = theirs.partition_point(|t| t.start <= iv.start);
                i.checked_sub(1).and_then(|i| theirs.get(i)).is_some_and(|t| iv.end <= t.end)
            })
        })
    }

    /// Every transaction in either set (what a comma-joined text of both means).
    pub fn union(&self, other: &GtidSet) -> GtidSet {
        let mut runs = self.runs.clone();
        for (key, ivs) in &other.runs {
            let mine = runs.entry(key.clone()).or_default();
            mine.extend_from_slice(ivs);
            normalize(mine);
        }
        GtidSet { runs }
    }

    /// The transactions in both sets.
    pub fn intersection(&self, other: &GtidSet) -> GtidSet {
        let runs = self
            .runs
            .iter()
            .filter_map(|(key, ivs)| {
                let both = intersect(ivs, other.runs.get(key)?);
                (!both.is_empty()).then(|| (key.clone(), both))
            })
            .collect();
        GtidSet { runs }
    }

    /// The transactions of `self` that `other` lacks: `GTID_SUBTRACT(self, other)`.
    pub fn subtract(&self, other: &GtidSet) -> GtidSet {
        let runs = self
            .runs
            .iter()
            .filter_map(|(key, ivs)| {
                let rest = match other.runs.get(key) {
                    Some(theirs) => subtract(ivs, theirs),
                    None => ivs.clone(),
                };
                (!rest.is_empty()).then(|| (key.clone(), rest))
            })
            .collect();
        GtidSet { runs }
    }

    /// The transactions that `uuid` wrote itself (its own `server_uuid` as their
    /// source), with every tag. An errant transaction is one a replica wrote
    /// that nobody else has: `mine.subtract(&others).originated_by(&my_uuid)`.
    pub fn originated_by(&self, uuid: &Uuid) -> GtidSet {
        let runs = self.runs.range((*uuid, None)..).take_while(|((u, _), _)| u == uuid);
        GtidSet { runs: runs.map(|(k, v)| (k.clone(), v.clone())).collect() }
    }
}

impl fmt::Display for GtidSet {
    /// The canonical text: UUIDs in order, each once, its untagged intervals
    /// first and then each tag (in order) with its intervals, entries joined by
    /// `,` without whitespace; `""` for the empty set. This is the shape MySQL
    /// prints (`uuid:1-5:7:tag1:1-3,uuid2:1`), minus the newlines.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut previous: Option<&Uuid> = None;
        for ((uuid, tag), ivs) in &self.runs {
            if previous != Some(uuid) {
                if previous.is_some() {
                    f.write_str(",")?;
                }
                write!(f, "{uuid}")?;
                previous = Some(uuid);
            }
            if let Some(tag) = tag {
                write!(f, ":{tag}")?;
            }
            for iv in ivs {
                write!(f, ":{iv}")?;
            }
        }
        Ok(())
    }
}

impl FromStr for GtidSet {
    type Err = ParseError;
    fn from_str(text: &str) -> Result<GtidSet, ParseError> {
        GtidSet::parse(text)
    }
}

super::serde_as_text!(GtidSet, "a MySQL GTID set");
super::serde_as_text!(Uuid, "a MySQL server UUID");
super::serde_as_text!(Tag, "a MySQL GTID tag");

fn parse_set(text: &str) -> Result<GtidSet, Reason> {
    let mut runs: BTreeMap<Key, Vec<Interval>> = BTreeMap::new();
    for entry in entries(text)? {
        parse_entry(entry, &mut runs)?;
    }
    // Collected as written; sorted and merged once per key at the end, so a
    // text of many small entries costs n log n, not n^2.
    runs.values_mut().for_each(normalize);
    Ok(GtidSet { runs })
}

/// One `uuid:token:token...` entry, its intervals added to `runs` unsorted.
fn parse_entry(entry: &str, runs: &mut BTreeMap<Key, Vec<Interval>>) -> Result<(), Reason> {
    let mut tokens = entry.split(':');
    let uuid_text = tokens.next().unwrap_or_default();
    let uuid = parse_uuid(uuid_text).ok_or_else(|| Reason::BadUuid(piece(uuid_text)))?;
    let mut tag: Option<Tag> = None;
    // The text of a tag no interval has followed yet.
    let mut pending_tag: Option<&str> = None;
    let mut intervals = 0usize;
    for token in tokens {
        match token.as_bytes().first() {
            None => return Err(Reason::EmptyToken(piece(entry))),
            Some(b) if b.is_ascii_digit() => {
                let iv = parse_interval(token)?;
                runs.entry((uuid, tag.clone())).or_default().push(iv);
                pending_tag = None;
                intervals += 1;
            }
            Some(b) if b.is_ascii_alphabetic() || *b == b'_' => {
                if let Some(previous) = pending_tag {
                    return Err(Reason::TagWithoutInterval(piece(previous)));
                }
                tag = Some(parse_tag(token)?);
                pending_tag = Some(token);
            }
            Some(_) => return Err(Reason::BadToken(piece(token))),
        }
    }
    if let Some(previous) = pending_tag {
        return Err(Reason::TagWithoutInterval(piece(previous)));
    }
    if intervals == 0 {
        return Err(Reason::NoInterval(piece(entry)));
    }
    Ok(())
}

/// `n` or `n-m`: decimal digits only, `1 <= n <= m <= 2^63-1`.
fn parse_interval(token: &str) -> Result<Interval, Reason> {
    let number = |text: &str| match super::decimal(text, "transaction number", MAX_TRANSACTION_NUMBER) {
        // Quote the whole token (`1-x`), not just the bad half.
        Err(Reason::BadNumber(_)) => Err(Reason::BadNumber(piece(token))),
        Ok(0) => Err(Reason::Zero(piece(token))),
        other => other,
    };
    let (start, end) = match token.split_once('-') {
        None => {
            let n = number(token)?;
            (n, n)
        }
        Some((start, end)) => (number(start)?, number(end)?),
    };
    Interval::new(start, end).ok_or_else(|| Reason::Reversed(piece(token)))
}

/// Sort and merge in place: overlapping and adjacent (`1-3`, `4-5`) intervals
/// become one, so the representation of a set is unique.
fn normalize(ivs: &mut Vec<Interval>) {
    ivs.sort_unstable();
    let mut merged: Vec<Interval> = Vec::with_capacity(ivs.len());
    for iv in ivs.drain(..) {
        match merged.last_mut() {
            // `end <= 2^63-1`: `end + 1` cannot overflow a u64.
            Some(last) if iv.start <= last.end + 1 => last.end = last.end.max(iv.end),
            _ => merged.push(iv),
        }
    }
    *ivs = merged;
}

/// `a ∩ b` of two normalized interval lists, normalized.
fn intersect(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::new();
    let (mut a, mut b) = (a.iter().peekable(), b.iter().peekable());
    while let (Some(x), Some(y)) = (a.peek(), b.peek()) {
        let (start, end) = (x.start.max(y.start), x.end.min(y.end));
        if start <= end {
            out.push(Interval { start, end });
        }
        // Drop whichever ends first: it cannot meet anything later in the other.
        if x.end < y.end {
            a.next();
        } else {
            b.next();
        }
    }
    out
}

/// `a − b` of two normalized interval lists, normalized.
fn subtract(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::new();
    // b's intervals that end before the current `a` interval starts are behind
    // every later `a` interval too: skip them once.
    let mut skip = 0usize;
    for iv in a {
        let rest = b.get(skip..).unwrap_or_default();
        skip += rest.iter().take_while(|y| y.end < iv.start).count();
        let mut start = iv.start;
        for y in b.get(skip..).unwrap_or_default().iter().take_while(|y| y.start <= iv.end) {
            if y.start > start {
                out.push(Interval { start, end: y.start - 1 });
            }
            // `end <= 2^63-1`: `end + 1` cannot overflow a u64.
            start = start.max(y.end + 1);
            if start > iv.end {
                break;
            }
        }
        if start <= iv.end {
            out.push(Interval { start, end: iv.end });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const U1: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const U2: &str = "aaaaaaaa-0000-0000-0000-000000000002";
    const U3: &str = "bbbbbbbb-0000-0000-0000-000000000003";

    fn set(text: &str) -> GtidSet {
        match GtidSet::parse(text) {
            Ok(s) => s,
            Err(e) => panic!("{text:?}: {e}"),
        }
    }

    fn uuid(text: &str) -> Uuid {
        match Uuid::parse(text) {
            Ok(u) => u,
            Err(e) => panic!("{e}"),
        }
    }

    fn tag(text: &str) -> Tag {
        match Tag::parse(text) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        }
    }

    /// What a refused text's reason should look like.
    type Expect = fn(&Reason) -> bool;

    fn reason(text: &str) -> Reason {
        match GtidSet::parse(text) {
            Ok(s) => panic!("{text:?} was accepted as {s}"),
            Err(e) => e.reason().clone(),
        }
    }

    fn norm(text: &str) -> String {
        set(text).to_string()
    }

    #[test]
    fn the_manuals_text_shapes() {
        // RM "GTID Format and Storage": a single GTID, a range, several ranges of
        // one source, several sources (with a space after the comma), tags.
        let up = U1.to_uppercase();
        assert_eq!(norm(&format!("{up}:23")), format!("{U1}:23"));
        assert_eq!(norm(&format!("{up}:1-5")), format!("{U1}:1-5"));
        assert_eq!(norm(&format!("{up}:1-3:11:47-49")), format!("{U1}:1-3:11:47-49"));
        assert_eq!(
            norm("2174B383-5441-11E8-B90A-C80AA9429562:1-3, 24DA1670-0C0C-11E8-8442-00059A3C7B00:1-19"),
            "2174b383-5441-11e8-b90a-c80aa9429562:1-3,24da1670-0c0c-11e8-8442-00059a3c7b00:1-19"
        );
        // a first group of 7 digits is not a UUID
        assert!(matches!(
            reason("2174B383-5441-11E8-B90A-C80AA9429562:1-3, 24DA167-0C0C-11E8-8442-00059A3C7B00:1-19"),
            Reason::BadUuid(_)
        ));
        // The tagged example, and what MySQL 9.1 prints for it in @@gtid_executed
        // (bugs.mysql.com 116789): one UUID, tags lower case.
        assert_eq!(
            norm(&format!("{up}:Domain_1:1-3:15-21, {up}:Domain_2:8-52")),
            format!("{U1}:domain_1:1-3:15-21:domain_2:8-52")
        );
        assert_eq!(norm(&format!("{up}:1-5:Domain_1:7")), format!("{U1}:1-5:domain_1:7"));
    }

    #[test]
    fn parses_what_a_server_prints() {
        let text = format!("{U1}:1-5,\n{U2}:1-3");
        let s = set(&text);
        assert_eq!(s.to_string(), format!("{U1}:1-5,{U2}:1-3"));
        assert_eq!(s.count(), 8);
        // whitespace of any ASCII kind around commas and at the ends
        assert_eq!(set(&format!(" \r\n{U1}:1-5 ,\r\n\t{U2}:1-3\n")), s);
        assert_eq!(set(""), GtidSet::new());
        assert_eq!(set(" \n "), GtidSet::new());
        assert!(set("").is_empty() && set("").to_string().is_empty());
    }

    #[test]
    fn tags_switch_the_tag_of_the_intervals_after_them() {
        assert_eq!(set(&format!("{U1}:1-5:tag1:1-3")), set(&format!("{U1}:1-5,{U1}:tag1:1-3")));
        assert_eq!(norm(&format!("{U1}:tag1:1-3,{U1}:1-5")), format!("{U1}:1-5:tag1:1-3"));
        assert_eq!(norm(&format!("{U1}:b:1:a:2:TAG_9:3")), format!("{U1}:a:2:b:1:tag_9:3"));
        assert_eq!(norm(&format!("{U1}:_:1")), format!("{U1}:_:1"));
        let longest = "t".repeat(MAX_TAG_LEN);
        assert_eq!(norm(&format!("{U1}:{longest}:1")), format!("{U1}:{longest}:1"));
        assert!(matches!(reason(&format!("{U1}:{longest}x:1")), Reason::BadTag(_)));
        // a tagged GTID is another transaction
        let s = set(&format!("{U1}:t:1"));
        assert!(s.contains_gtid(&uuid(U1), Some(&tag("T")), 1));
        assert!(!s.contains_gtid(&uuid(U1), None, 1));
    }

    #[test]
    fn uuids_and_tags_are_case_insensitive() {
        assert_eq!(norm(&format!("{}:1:TaG:2", U1.to_uppercase())), format!("{U1}:1:tag:2"));
        assert_eq!(uuid(&U1.to_uppercase()), uuid(U1));
        assert_eq!(uuid(U1).to_string(), U1);
        assert_eq!(tag("AbC_1").as_str(), "abc_1");
    }

    // tests/scripts/test_pure.py: test_mysql_gtid_text. The bash printed one
    // entry per (uuid, tag) (`U2:2,U2:tag1:1-5`); the canonical text here groups
    // them per UUID as MySQL does (`U2:2:tag1:1-5`): the same set.
    #[test]
    fn the_bash_tests() {
        let same = |got: GtidSet, bash: &str, canonical: &str| {
            assert_eq!(got, set(bash), "bash's {bash:?}");
            assert_eq!(got.to_string(), canonical);
        };
        same(set(&format!("{}:1-5:7,\n {U1}:6", U1.to_uppercase())), &format!("{U1}:1-7"), &format!("{U1}:1-7"));
        same(
            set(&format!("{U2}:2:TAG1:1-3:5,{U2}:tag1:4")),
            &format!("{U2}:2,{U2}:tag1:1-5"),
            &format!("{U2}:2:tag1:1-5"),
        );
        same(
            set(&format!("{U1}:1-3")).union(&set("")).union(&set(&format!("{U1}:4-9,{U2}:1"))),
            &format!("{U1}:1-9,{U2}:1"),
            &format!("{U1}:1-9,{U2}:1"),
        );
        same(
            set(&format!("{U1}:21-57")).subtract(&set(&format!("{U1}:20-25,{U1}:30,{U1}:40-60"))),
            &format!("{U1}:26-29:31-39"),
            &format!("{U1}:26-29:31-39"),
        );
        same(
            set(&format!("{U1}:1-10:t:1-5")).subtract(&set(&format!("{U1}:t:2"))),
            &format!("{U1}:1-10,{U1}:t:1:3-5"),
            &format!("{U1}:1-10:t:1:3-5"),
        );
        same(set(&format!("{U1}:1-3")).subtract(&set(&format!("{U1}:1-9"))), "", "");
        // the manual's GTID_SUBSET examples (RM 14.18.2)
        assert!(set(&format!("{U1}:23")).is_subset(&set(&format!("{U1}:21-57"))));
        assert!(!set(&format!("{U1}:20-25")).is_subset(&set(&format!("{U1}:21-57"))));
        assert!(set("").is_subset(&set("")) && set("").is_subset(&set(&format!("{U1}:1"))));
        assert!(!set(&format!("{U1}:1")).is_subset(&set("")));
        assert!(!set(&format!("{U1}:t:1")).is_subset(&set(&format!("{U1}:1"))), "a tagged GTID is another transaction");
        // a long-lived cluster: many sources and intervals, far beyond 1024 bytes
        let big: Vec<String> = (0..60)
            .map(|i| format!("{i:08x}-0000-0000-0000-000000000000:1-{}:{}-{}", 1000 + i, 2000 + i, 3000 + i))
            .collect();
        let big = big.join(",");
        assert!(big.len() > 3000);
        assert!(set(&big).is_subset(&set(&format!("{big},{U1}:1"))));
        assert!(!set(&format!("{big},{U1}:1")).is_subset(&set(&big)));
        assert_eq!(set(&big).to_string(), big, "already canonical");
    }

    // tests/scripts/test_pure.py: test_gtid_within (MySQL: START subset of POS),
    // test_choose_most_advanced and test_split_errant (their GTID decisions).
    #[test]
    fn the_bash_decisions() {
        assert!(set(&format!("{U1}:1-5")).is_subset(&set(&format!("{U1}:1-9"))));
        assert!(!set(&format!("{U1}:1-10")).is_subset(&set(&format!("{U1}:1-9"))));
        assert!(set("").is_subset(&set(&format!("{U1}:1-9"))));

        // same length, different histories: neither contains the other
        let (big, other) = (set(&format!("{U1}:1-12")), set(&format!("{U1}:1-10,{U2}:1")));
        assert!(!big.is_subset(&other) && !other.is_subset(&big));

        // errant: own transactions (by server_uuid) that the others lack
        let errant = |mine: &str, others: &str, ident: &str| {
            !set(mine).subtract(&set(others)).originated_by(&uuid(ident)).is_empty()
        };
        let db0 = format!("{U1}:1-10");
        let db1 = format!("{U1}:1-10,{U2}:1");
        let db2 = format!("{U1}:1-9");
        assert!(errant(&db1, &db2, U2));
        assert!(!errant(&db2, &db1, U3));
        // db-1's own transaction is on the old primary too: legit
        assert!(!errant(&db1, &format!("{db1},{db2}"), U2));
        assert!(!errant(&db0, &db2, U2), "extra transactions of another source are not db-0's own");
        // the identity is compared case-insensitively, tags included
        assert!(errant(&format!("{U2}:t:1"), "", &U2.to_uppercase()));
    }

    #[test]
    fn operations() {
        let a = set(&format!("{U1}:1-10:t:1-5,{U2}:3-4"));
        let b = set(&format!("{U1}:5-20:t:5,{U3}:1"));
        assert_eq!(a.intersection(&b).to_string(), format!("{U1}:5-10:t:5"));
        assert_eq!(a.union(&b).to_string(), format!("{U1}:1-20:t:1-5,{U2}:3-4,{U3}:1"));
        assert_eq!(a.subtract(&b).to_string(), format!("{U1}:1-4:t:1-4,{U2}:3-4"));
        assert_eq!(a.originated_by(&uuid(U1)).to_string(), format!("{U1}:1-10:t:1-5"));
        assert_eq!(a.originated_by(&uuid(U3)), GtidSet::new());
        assert_eq!(a.count(), 17);
        assert_eq!(a.intervals(&uuid(U1), Some(&tag("t"))), &[Interval { start: 1, end: 5 }]);
        assert_eq!(a.intervals(&uuid(U3), None), &[]);
        let runs: Vec<String> = a.iter().map(|(u, t, ivs)| format!("{u}/{t:?}/{}", ivs.len())).collect();
        assert_eq!(runs, [format!("{U1}/None/1"), format!("{U1}/Some(Tag(\"t\"))/1"), format!("{U2}/None/1")]);
        assert!(a.contains_gtid(&uuid(U2), None, 3) && a.contains_gtid(&uuid(U2), None, 4));
        assert!(!a.contains_gtid(&uuid(U2), None, 2) && !a.contains_gtid(&uuid(U2), None, 5));

        let mut c = GtidSet::new();
        for (s, e) in [(7, 9), (1, 3), (4, 5), (11, 11)] {
            c.insert(uuid(U1), None, Interval::new(s, e).unwrap_or_else(|| panic!("{s}-{e}")));
        }
        assert_eq!(c.to_string(), format!("{U1}:1-5:7-9:11"));

        let max = MAX_TRANSACTION_NUMBER;
        let full = set(&format!("{U1}:1-{max}"));
        assert_eq!(full.count(), u128::from(max));
        assert_eq!(full.subtract(&set(&format!("{U1}:{max}"))).to_string(), format!("{U1}:1-{}", max - 1));
        assert_eq!(full.subtract(&set(&format!("{U1}:1"))).to_string(), format!("{U1}:2-{max}"));
        assert!(full.contains_gtid(&uuid(U1), None, max) && !full.contains_gtid(&uuid(U1), None, 0));
        assert_eq!(set(&format!("{U1}:1-{max},{U2}:1-{max}")).count(), 2 * u128::from(max));
    }

    #[test]
    fn merges_overlapping_and_adjacent_intervals() {
        assert_eq!(norm(&format!("{U1}:4-5:1-3")), format!("{U1}:1-5"));
        assert_eq!(norm(&format!("{U1}:1-10:2-3:10:11")), format!("{U1}:1-11"));
        assert_eq!(norm(&format!("{U1}:1:3,{U1}:2")), format!("{U1}:1-3"));
        assert_eq!(norm(&format!("{U1}:1:3")), format!("{U1}:1:3"));
        assert_eq!(norm(&format!("{U1}:007-010")), format!("{U1}:7-10"));
    }

    #[test]
    fn refuses_what_is_not_the_grammar() {
        let max = MAX_TRANSACTION_NUMBER;
        let cases: Vec<(String, Expect)> = vec![
            (format!("{U1}:0"), |r| matches!(r, Reason::Zero(_))),
            (format!("{U1}:0-3"), |r| matches!(r, Reason::Zero(_))),
            (format!("{U1}:5-3"), |r| matches!(r, Reason::Reversed(_))),
            (format!("{U1}:99999999999999999999"), |r| matches!(r, Reason::TooLarge { .. })),
            (format!("{U1}:{}", max + 1), |r| matches!(r, Reason::TooLarge { .. })),
            (format!("{U1}:1-{}", max + 1), |r| matches!(r, Reason::TooLarge { .. })),
            (format!("{U1}:1-BASH_VERSINFO[$(x)0]"), |r| matches!(r, Reason::BadNumber(_))),
            (format!("{U1}:1-BASH_VERSINFO[$(touch${{IFS}}x)0]"), |r| matches!(r, Reason::BadNumber(_))),
            (format!("{U1}:+1"), |r| matches!(r, Reason::BadToken(_))),
            (format!("{U1}:-1"), |r| matches!(r, Reason::BadToken(_))),
            (format!("{U1}:1-+2"), |r| matches!(r, Reason::BadNumber(_))),
            (format!("{U1}:1--2"), |r| matches!(r, Reason::BadNumber(_))),
            (format!("{U1}:1-2-3"), |r| matches!(r, Reason::BadNumber(_))),
            (format!("{U1}:1-"), |r| matches!(r, Reason::BadNumber(_))),
            (format!("{U1}:0x10"), |r| matches!(r, Reason::BadNumber(_))),
            (format!("{U1}:1e3"), |r| matches!(r, Reason::BadNumber(_))),
            (format!("{U1}:١"), |r| matches!(r, Reason::BadToken(_))),
            (U1.to_string(), |r| matches!(r, Reason::NoInterval(_))),
            (format!("{U1}:"), |r| matches!(r, Reason::EmptyToken(_))),
            (format!("{U1}::1"), |r| matches!(r, Reason::EmptyToken(_))),
            (format!("{U1}:1:"), |r| matches!(r, Reason::EmptyToken(_))),
            (format!("{U1}:tag"), |r| matches!(r, Reason::TagWithoutInterval(_))),
            (format!("{U1}:1:tag"), |r| matches!(r, Reason::TagWithoutInterval(_))),
            (format!("{U1}:a:b:1"), |r| matches!(r, Reason::TagWithoutInterval(_))),
            (format!("{U1}:tag-1:1"), |r| matches!(r, Reason::BadTag(_))),
            (format!("{U1}:tä:1"), |r| matches!(r, Reason::BadTag(_))),
            (format!("{U1}:1,"), |r| matches!(r, Reason::EmptyEntry)),
            (format!(",{U1}:1"), |r| matches!(r, Reason::EmptyEntry)),
            (format!("{U1}:1,,{U2}:1"), |r| matches!(r, Reason::EmptyEntry)),
            (",".to_string(), |r| matches!(r, Reason::EmptyEntry)),
            (format!("{U1}: 1"), |r| matches!(r, Reason::WhitespaceInEntry(_))),
            (format!("{U1} :1"), |r| matches!(r, Reason::WhitespaceInEntry(_))),
            (format!("{U1}:1 -2"), |r| matches!(r, Reason::WhitespaceInEntry(_))),
            (format!("{U1}:1\n:2"), |r| matches!(r, Reason::WhitespaceInEntry(_))),
            (format!("{U1}:1 x"), |r| matches!(r, Reason::WhitespaceInEntry(_))),
            (format!("x{U1}:1"), |r| matches!(r, Reason::BadUuid(_))),
            (format!("{U1}x:1"), |r| matches!(r, Reason::BadUuid(_))),
            (format!("{{{U1}}}:1"), |r| matches!(r, Reason::BadUuid(_))),
            ("3e11fa4771ca11e19e33c80aa9429562:1".to_string(), |r| matches!(r, Reason::BadUuid(_))),
            ("3e11fa47-71ca-11e1-9e33-c80aa942956g:1".to_string(), |r| matches!(r, Reason::BadUuid(_))),
            ("3e11fa47-71ca-11e1-9e33c-80aa9429562:1".to_string(), |r| matches!(r, Reason::BadUuid(_))),
            ("0-1-2".to_string(), |r| matches!(r, Reason::BadUuid(_))),
            (format!("{U1}:1;{U2}:1"), |r| matches!(r, Reason::BadNumber(_))),
            (format!("{U1}:1\0"), |r| matches!(r, Reason::BadNumber(_))),
            (format!("\u{a0}{U1}:1"), |r| matches!(r, Reason::BadUuid(_))),
        ];
        for (text, expected) in &cases {
            let r = reason(text);
            assert!(expected(&r), "{text:?}: {r:?}");
        }
    }

    #[test]
    fn the_error_names_the_problem_and_quotes_the_input() {
        let e = match GtidSet::parse(&format!("{U1}:5-3")) {
            Err(e) => e,
            Ok(s) => panic!("{s}"),
        };
        assert_eq!(
            e.to_string(),
            format!("not a MySQL GTID set: \"5-3\": the interval ends before it starts (in \"{U1}:5-3\")")
        );
        let long = format!("{U1}:1-5,{U2}:1-5,{U3}:x-y");
        let e = match GtidSet::parse(&long) {
            Err(e) => e,
            Ok(s) => panic!("{s}"),
        };
        assert_eq!(e.input().chars().count(), 81, "80 characters and …");
        assert!(e.to_string().contains("\"x-y\" is not a tag"), "{e}");
        let e = match Uuid::parse("nope") {
            Err(e) => e,
            Ok(u) => panic!("{u}"),
        };
        assert_eq!(
            e.to_string(),
            "not a MySQL server UUID: \"nope\" is not a UUID (8-4-4-4-12 hexadecimal digits) (in \"nope\")"
        );
        assert!(Tag::parse("1a").is_err() && Tag::parse("").is_err() && Tag::parse(" a").is_err());
    }

    #[test]
    fn serde_carries_the_canonical_text() {
        let s = set(&format!("{U2}:3,{}:1-2", U1.to_uppercase()));
        let json = serde_json::to_string(&s).unwrap_or_default();
        assert_eq!(json, format!("\"{U1}:1-2,{U2}:3\""));
        assert_eq!(serde_json::from_str::<GtidSet>(&json).ok(), Some(s));
        let bad = serde_json::from_str::<GtidSet>(&format!("\"{U1}:0\""));
        assert!(bad.is_err_and(|e| e.to_string().contains("transaction numbers start at 1")));
        assert_eq!(serde_json::to_string(&uuid(U1)).ok(), Some(format!("\"{U1}\"")));
    }
}

//! GTID texts of both flavors, parsed strictly, with the algebra the hook needs.
//!
//! Every decision about which server may become primary, whether a member holds
//! errant transactions, or whether a chain of binary logs continues a dump comes
//! down to comparing GTIDs. The two flavors write them very differently:
//!
//! - [`mysql::GtidSet`]: a MySQL GTID *set* (`@@gtid_executed`), every transaction
//!   ever executed, as intervals of transaction numbers per source UUID and, from
//!   MySQL 8.3, per tag (`uuid:1-5:tag1:1-3`). Set operations are exact.
//! - [`mariadb::GtidList`]: a MariaDB GTID *list* (`@@gtid_binlog_state`,
//!   `@@gtid_binlog_pos`), only the *last* transaction per (domain, server id)
//!   or per domain (`0-1-42,0-2-17`). It does not say which transactions lie
//!   below the last one, so its comparisons are "is at least as far", not set
//!   arithmetic.
//!
//! # Why parsing is strict
//!
//! These texts come from servers, from files in backup stores and from reports of
//! other pods: a store is not trusted. The shell scripts this replaces once
//! evaluated such a text in arithmetic, where `BASH_VERSINFO[$(cmd)0]` runs `cmd`
//! (issue 30.2). Here nothing is evaluated, but a text that is "almost" a GTID
//! set is still not one: guessing what it meant (dropping a bad entry, reading
//! `0` as "nothing", clamping a number) would silently change which transactions
//! a server is believed to hold, and with it which server is promoted. So a text
//! is either exactly the grammar, or a [`ParseError`] that says what was wrong;
//! there is no partial result and no default.
//!
//! Both grammars allow ASCII whitespace (space, tab, `\n`, `\r`, form feed)
//! around the commas and at both ends, because servers print it there
//! (`@@gtid_executed` puts a newline after each comma, `mariadb-binlog` folds long
//! lists over lines). Whitespace inside an entry, an empty entry (`a,,b`, a
//! trailing comma) or anything else is refused.
//!
//! # Canonical text
//!
//! Both types print ([`std::fmt::Display`]) a canonical text: lower case, sorted,
//! merged. Parsing that text gives back an equal value, so the text can be stored
//! and compared as a string, and [`serde`] carries both types as that string
//! (deserializing goes through the same strict parser).

pub mod mariadb;
pub mod mysql;

/// How many characters of the input a [`ParseError`] quotes: enough to recognise
/// the value in a log line, not so many that a hostile megabyte ends up there.
const QUOTE_CHARS: usize = 80;
/// How many characters of the offending piece a [`Reason`] quotes.
const PIECE_CHARS: usize = 40;

/// A text that is not a GTID set (MySQL) or GTID list (MariaDB), or one of their
/// parts (a UUID, a tag, a single MariaDB GTID).
///
/// The message names what was parsed, why it was refused ([`Reason`]) and quotes
/// the start of the input (at most 80 characters, control characters escaped), so
/// the log line says where to look without carrying the whole value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a {what}: {reason} (in {input:?})")]
pub struct ParseError {
    what: &'static str,
    reason: Reason,
    input: String,
}

impl ParseError {
    pub(crate) fn new(what: &'static str, reason: Reason, input: &str) -> Self {
        ParseError { what, reason, input: clip(input, QUOTE_CHARS) }
    }

    /// Why the text was refused.
    pub fn reason(&self) -> &Reason {
        &self.reason
    }

    /// The start of the refused text (at most 80 characters, `…` when cut).
    pub fn input(&self) -> &str {
        &self.input
    }
}

/// Why a GTID text was refused. The quoted pieces are cut at 40 characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Reason {
    /// `a,,b`, a comma at either end, or an entry of only whitespace.
    #[error("an empty entry (a comma at an end, or two commas in a row)")]
    EmptyEntry,
    /// Whitespace is allowed around commas and at the ends only.
    #[error("whitespace inside the entry {0:?}")]
    WhitespaceInEntry(String),
    /// MySQL: the part before the first `:` is not `8-4-4-4-12` hex digits.
    #[error("{0:?} is not a UUID (8-4-4-4-12 hexadecimal digits)")]
    BadUuid(String),
    /// MySQL: an entry that is only a UUID (`uuid`), with nothing after it.
    #[error("the entry {0:?} has no interval")]
    NoInterval(String),
    /// MySQL: `uuid::1` or `uuid:1:`.
    #[error("an empty token in the entry {0:?} (`::`, or `:` at its end)")]
    EmptyToken(String),
    /// MySQL: a token that starts like neither a tag nor an interval (`+1`, `-1`, `$x`).
    #[error("{0:?} is neither a tag nor an interval")]
    BadToken(String),
    /// MySQL: a token that starts like a tag but is not one.
    #[error("{0:?} is not a tag (a letter or `_`, then up to 31 letters, digits or `_`)")]
    BadTag(String),
    /// MySQL: a tag with no interval after it (`uuid:1:tag`, `uuid:tag1:tag2:1`).
    #[error("the tag {0:?} is not followed by an interval")]
    TagWithoutInterval(String),
    /// A number that is not only decimal digits (`1-x`, `1--2`, `1-`).
    #[error("{0:?} is not a decimal number")]
    BadNumber(String),
    /// MySQL: transaction numbers start at 1.
    #[error("{0:?}: transaction numbers start at 1")]
    Zero(String),
    /// MySQL: `n-m` with `m < n`.
    #[error("{0:?}: the interval ends before it starts")]
    Reversed(String),
    /// A number above the largest value of its field.
    #[error("{number:?} is above {max}, the largest {field}")]
    TooLarge {
        /// The number as written.
        number: String,
        /// What the number is (`transaction number`, `domain id`, ...).
        field: &'static str,
        /// The largest value allowed.
        max: u64,
    },
    /// MariaDB: an entry that is not three numbers joined by `-`.
    #[error("{0:?} is not domain-server_id-seq_no")]
    BadGtid(String),
}

/// The first `max` characters of `text`, with `…` when it was longer.
pub(crate) fn clip(text: &str, max: usize) -> String {
    let mut chars = text.chars();
    let mut out: String = chars.by_ref().take(max).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

/// A piece of the input for a [`Reason`], cut to [`PIECE_CHARS`].
pub(crate) fn piece(text: &str) -> String {
    clip(text, PIECE_CHARS)
}

/// The ASCII whitespace both grammars allow around commas and at the ends.
/// Deliberately not [`char::is_whitespace`]: a non-breaking space or a Unicode
/// line separator is not something a server prints, so it is refused.
pub(crate) fn is_space(c: char) -> bool {
    c.is_ascii_whitespace()
}

/// The entries of a comma-separated text, trimmed of ASCII whitespace; an empty
/// (all-whitespace) text has none. An empty entry or whitespace inside an entry is
/// an error. Shared by both flavors, which differ only in what an entry is.
pub(crate) fn entries(text: &str) -> Result<Vec<&str>, Reason> {
    if text.chars().all(is_space) {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|raw| {
            let entry = raw.trim_matches(is_space);
            if entry.is_empty() {
                Err(Reason::EmptyEntry)
            } else if entry.contains(is_space) {
                Err(Reason::WhitespaceInEntry(piece(entry)))
            } else {
                Ok(entry)
            }
        })
        .collect()
}

/// A decimal number of only ASCII digits (no sign, no `_`, leading zeros allowed
/// as bash's `10#` read them), at most `max`. `field` names it in the error.
pub(crate) fn decimal(text: &str, field: &'static str, max: u64) -> Result<u64, Reason> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Reason::BadNumber(piece(text)));
    }
    let too_large = || Reason::TooLarge { number: piece(text), field, max };
    let mut value: u64 = 0;
    for digit in text.bytes() {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(digit - b'0')))
            .filter(|v| *v <= max)
            .ok_or_else(too_large)?;
    }
    Ok(value)
}

/// `Serialize` as the canonical text and `Deserialize` through the strict parser,
/// for a type with `Display` and `FromStr<Err = ParseError>`.
macro_rules! serde_as_text {
    ($ty:ty, $expecting:literal) => {
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Visitor;
                impl serde::de::Visitor<'_> for Visitor {
                    type Value = $ty;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<$ty, E> {
                        text.parse().map_err(E::custom)
                    }
                }
                deserializer.deserialize_str(Visitor)
            }
        }
    };
}
pub(crate) use serde_as_text;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_counts_characters_not_bytes() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "abc…");
        assert_eq!(clip("ééééé", 2), "éé…");
    }

    #[test]
    fn entries_allow_whitespace_around_commas_only() {
        assert_eq!(entries(""), Ok(vec![]));
        assert_eq!(entries(" \n\t"), Ok(vec![]));
        assert_eq!(entries(" a ,\n b\r\n"), Ok(vec!["a", "b"]));
        assert_eq!(entries("a,"), Err(Reason::EmptyEntry));
        assert_eq!(entries(",a"), Err(Reason::EmptyEntry));
        assert_eq!(entries("a, ,b"), Err(Reason::EmptyEntry));
        assert_eq!(entries("a b"), Err(Reason::WhitespaceInEntry("a b".into())));
        // not ASCII whitespace: kept, for the entry's grammar to refuse
        assert_eq!(entries("\u{a0}a"), Ok(vec!["\u{a0}a"]));
    }

    #[test]
    fn decimal_is_digits_only_and_bounded() {
        assert_eq!(decimal("0", "n", 9), Ok(0));
        assert_eq!(decimal("007", "n", 9), Ok(7));
        assert_eq!(decimal("18446744073709551615", "n", u64::MAX), Ok(u64::MAX));
        for bad in ["", "+1", "-1", "1_0", "0x1", " 1", "١"] {
            assert_eq!(decimal(bad, "n", u64::MAX), Err(Reason::BadNumber(piece(bad))), "{bad:?}");
        }
        assert!(matches!(decimal("10", "n", 9), Err(Reason::TooLarge { max: 9, .. })));
        assert!(matches!(decimal("18446744073709551616", "n", u64::MAX), Err(Reason::TooLarge { .. })));
        assert!(matches!(decimal(&"9".repeat(200), "n", u64::MAX), Err(Reason::TooLarge { .. })));
    }

    #[test]
    fn the_error_quotes_at_most_80_characters() {
        let long = "x".repeat(500);
        let e = ParseError::new("thing", Reason::BadGtid(piece(&long)), &long);
        assert_eq!(e.input().chars().count(), 81);
        let msg = e.to_string();
        assert!(msg.len() < 200, "{msg}");
        assert!(msg.starts_with("not a thing: "), "{msg}");
        // control characters are escaped, so a message is one log line
        let e = ParseError::new("thing", Reason::EmptyEntry, "a,\nb");
        assert!(e.to_string().contains(r#""a,\nb""#), "{e}");
    }
}

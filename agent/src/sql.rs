//! The one place SQL text is built from values: quoting of strings, identifiers
//! and grant patterns. Everything else in the agent builds statements only from
//! constants and these functions' results.
//!
//! String literals are quoted with backslash escapes (`\'`, `\\`, and the control
//! characters the manual lists), which is only right while the session's
//! `sql_mode` lacks `NO_BACKSLASH_ESCAPES`: the agent clears that mode in every
//! session it opens ([`crate::server::Server::connect`]), so a user's
//! `spec.config` `sql_mode` cannot turn a quoted password into something else.

/// `s` as a SQL string literal, quotes included.
#[must_use]
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{1a}' => out.push_str("\\Z"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// `s` as a quoted identifier (a database, table or column name): backticks, a
/// backtick inside doubled.
#[must_use]
pub fn ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

/// A database name as the `db` of `GRANT … ON db.*`, which is a pattern: `_` and
/// `%` are wildcards there (`my_ql` matches `mysql`), so each is escaped with a
/// backslash, as is a backslash itself, and the result quoted as an identifier.
#[must_use]
pub fn grant_database(db: &str) -> String {
    let mut escaped = String::with_capacity(db.len() + 4);
    for c in db.chars() {
        if matches!(c, '_' | '%' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    ident(&escaped)
}

/// An account name `'user'@'host'`.
#[must_use]
pub fn account(user: &str, host: &str) -> String {
    format!("{}@{}", string(user), string(host))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn strings_escape_what_ends_or_changes_a_literal() {
        assert_eq!(string("it's"), r"'it\'s'");
        assert_eq!(string(r"a\b"), r"'a\\b'");
        assert_eq!(string("a\nb\0"), r"'a\nb\0'");
        assert_eq!(string(r#"op'er "ator#$\1"#), r#"'op\'er "ator#$\\1'"#);
    }

    #[test]
    fn grant_patterns_are_literal() {
        assert_eq!(grant_database("my_ql"), r"`my\_ql`");
        assert_eq!(grant_database("a%b"), r"`a\%b`");
        assert_eq!(grant_database("shop"), "`shop`");
        assert_eq!(ident("we`ird"), "`we``ird`");
    }

    /// The quoted literal, read back as MySQL's lexer reads a string with
    /// backslash escapes, is the original.
    fn unquote(lit: &str) -> Option<String> {
        let inner = lit.strip_prefix('\'')?.strip_suffix('\'')?;
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.push(match chars.next()? {
                    '0' => '\0',
                    'n' => '\n',
                    'r' => '\r',
                    'Z' => '\u{1a}',
                    other => other,
                }),
                // an unescaped quote would end the literal early
                '\'' => return None,
                c => out.push(c),
            }
        }
        Some(out)
    }

    proptest! {
        #[test]
        fn any_string_round_trips(s in any::<String>()) {
            prop_assert_eq!(unquote(&string(&s)), Some(s));
        }

        #[test]
        fn identifiers_never_end_early(s in any::<String>()) {
            let q = ident(&s);
            let inner = &q[1..q.len() - 1];
            prop_assert_eq!(inner.replace("``", ""), s.replace('`', ""));
        }
    }
}

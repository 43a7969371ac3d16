//! The GTID position a logical dump records (the scripts' `dump_gtid`, ported;
//! issue 34.12).
//!
//! A backup records the position its dump was taken at; a point-in-time restore
//! replays the binary logs from there, and archive retention keeps what that
//! position needs. The dump tool writes it as a statement of its own:
//!
//! - `mysqldump --set-gtid-purged=ON` in the header, before any database:
//!   `SET @@GLOBAL.GTID_PURGED=/*!80000 '+'*/ 'uuid:1-5,` with the rest of the set
//!   on the following lines, up to `';`;
//! - `mariadb-dump --master-data=2 --gtid` (10.11, seen here) in the trailer,
//!   after every database, routine, trigger and event: `-- SET GLOBAL
//!   gtid_slave_pos='0-1-4';`.
//!
//! Everything between is the users' SQL, and routine, trigger and event bodies
//! and their comments are written verbatim. The script took the first match of
//! `gtid_slave_pos='…'` anywhere in the first 400 lines, so a procedure that
//! merely mentions it (`SET @x = 'gtid_slave_pos=''0-1-1'''`) made every backup
//! fail `no-gtid`, and one written to carry a position ahead of the dump's data
//! would make a point-in-time restore skip the transactions in between. Here
//! only the dump tool's own statement counts: on MySQL the first one, and only
//! before the first database; on MariaDB the last line that is exactly the
//! statement, and only when nothing but the dump's own closing lines follows it.

use std::io::BufRead;

use protocol::gtid::{mariadb::GtidList, mysql::GtidSet};

use crate::{Failure, Result, context::Flavor};

const MYSQL_PREFIX: &str = "SET @@GLOBAL.GTID_PURGED=";
/// mysqldump's marker that makes the statement add to `gtid_purged` (8.0+).
const MYSQL_APPEND: &str = "/*!80000 '+'*/";
const MARIADB_PREFIX: &str = "-- SET GLOBAL gtid_slave_pos='";
const MARIADB_SUFFIX: &str = "';";

/// The line that starts the users' part of a mysqldump: after it, a line is
/// the users' SQL, never the header.
fn mysql_header_ended(line: &str) -> bool {
    line.starts_with("-- Current Database:")
        || ["CREATE ", "USE ", "INSERT ", "DELIMITER ", "LOCK TABLES "].iter().any(|p| line.starts_with(p))
}

/// What mariadb-dump writes after its position: comments, blank lines, and its
/// `/*!… */;` (11.8 also `/*M!… */;`) restores of session settings.
fn mariadb_trailer(line: &str) -> bool {
    let l = line.trim_end();
    l.is_empty() || l.starts_with("--") || (l.starts_with("/*") && l.ends_with("*/;"))
}

/// The position a dump records: the canonical text, `None` when it records none.
///
/// # Errors
/// `corrupt`: the dump tool's statement holds a text that is not a GTID set (MySQL)
/// or list (MariaDB), or the dump cannot be read.
pub fn position(flavor: Flavor, dump: impl BufRead) -> Result<Option<String>> {
    match flavor {
        Flavor::Mysql => mysql_position(dump),
        Flavor::Mariadb => mariadb_position(dump),
    }
}

fn unreadable(e: &std::io::Error) -> Failure {
    Failure::new("corrupt", format!("the dump cannot be read: {e}"))
}

fn mysql_position(dump: impl BufRead) -> Result<Option<String>> {
    let mut text: Option<String> = None;
    for line in dump.lines() {
        let line = line.map_err(|e| unreadable(&e))?;
        match &mut text {
            None if line.starts_with(MYSQL_PREFIX) => {
                let rest = line[MYSQL_PREFIX.len()..].trim_start();
                text = Some(rest.strip_prefix(MYSQL_APPEND).unwrap_or(rest).to_owned());
            }
            None if mysql_header_ended(&line) => return Ok(None),
            None => continue,
            Some(t) => {
                t.push('\n');
                t.push_str(&line);
            }
        }
        if let Some(t) = &text
            && let Some(end) = t.find(';')
        {
            let quoted = t[..end].trim();
            let set = quoted
                .strip_prefix('\'')
                .and_then(|q| q.strip_suffix('\''))
                .ok_or_else(|| Failure::new("corrupt", format!("GTID_PURGED is not one quoted text: {quoted:.80}")))?;
            let set = GtidSet::parse(set).map_err(|e| Failure::new("corrupt", format!("GTID_PURGED: {e}")))?;
            return Ok(Some(set.to_string()));
        }
    }
    match text {
        Some(_) => Err(Failure::new("corrupt", "the dump ends inside its GTID_PURGED statement")),
        None => Ok(None),
    }
}

fn mariadb_position(dump: impl BufRead) -> Result<Option<String>> {
    // The last statement seen, and whether only trailer lines followed it.
    let mut last: Option<String> = None;
    for line in dump.lines() {
        let line = line.map_err(|e| unreadable(&e))?;
        if let Some(rest) = line.strip_prefix(MARIADB_PREFIX)
            && let Some(list) = rest.strip_suffix(MARIADB_SUFFIX)
        {
            last = Some(list.to_owned());
        } else if !mariadb_trailer(&line) {
            last = None;
        }
    }
    last.map(|l| {
        GtidList::parse(&l).map(|l| l.to_string()).map_err(|e| Failure::new("corrupt", format!("gtid_slave_pos: {e}")))
    })
    .transpose()
}

/// `mysql-hook-agent dump-position`: the position of the dump read on standard
/// input (the script decompresses it), written (canonical text, no newline) to
/// `DUMP_POSITION_OUT`; empty when the dump records none. Result `dump-position`
/// with the text in `gtid`.
///
/// # Errors
/// `bad-env`, and those of [`position`].
pub fn run(env: &dyn crate::context::Env) -> Result<protocol::Report> {
    let flavor = Flavor::from_env(env)?;
    let out = env.var("DUMP_POSITION_OUT").filter(|o| !o.is_empty());
    let out = out.ok_or_else(|| Failure::new("bad-env", "DUMP_POSITION_OUT is required"))?;
    let mut input = std::io::stdin().lock();
    let gtid = position(flavor, &mut input)?.unwrap_or_default();
    // Read to the end: the script pipes the decompressor into this command under
    // `pipefail`, and stopping at MySQL's header would kill it with SIGPIPE and
    // fail the backup (seen on the real node, where dumps outgrow the pipe).
    std::io::copy(&mut input, &mut std::io::sink()).map_err(|e| unreadable(&e))?;
    std::fs::write(&out, &gtid).map_err(|e| Failure::new("bad-env", format!("DUMP_POSITION_OUT: {out}: {e}")))?;
    Ok(protocol::Report {
        message: Some(if gtid.is_empty() { "the dump records no position" } else { "the dump's position" }.into()),
        gtid: Some(gtid),
        ..protocol::Report::new("dump-position")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const B: &str = "4e11fa47-71ca-11e1-9e33-c80aa9429562";

    fn pos(flavor: Flavor, dump: &str) -> Result<Option<String>> {
        position(flavor, dump.as_bytes())
    }

    /// A MariaDB dump as mariadb-dump 10.11 and 11.8 wrote it here, with a procedure that
    /// mentions the position before the tool's own line (issue 34.12).
    fn mariadb_dump(routine: &str) -> String {
        format!(
            "-- MariaDB dump 10.19\n/*!40101 SET NAMES utf8mb4 */;\n-- CHANGE MASTER TO MASTER_USE_GTID=slave_pos;\n\
             CREATE DATABASE `aaa`;\nUSE `aaa`;\nDELIMITER ;;\nCREATE PROCEDURE `p`()\n{routine}\n;;\nDELIMITER ;\n\
             -- SET GLOBAL gtid_slave_pos='0-1-4';\n/*!40103 SET TIME_ZONE=@OLD_TIME_ZONE */;\n\
             /*M!100616 SET NOTE_VERBOSITY=@OLD_NOTE_VERBOSITY */;\n\n-- Dump completed\n"
        )
    }

    #[test]
    fn mariadb_takes_the_tools_line_not_the_users() {
        for routine in [
            "SET @x = 'gtid_slave_pos=''0-1-1'''",
            "BEGIN\n-- SET GLOBAL gtid_slave_pos='0-1-999';\nEND",
            "-- SET GLOBAL gtid_slave_pos='0-1-999';",
        ] {
            assert_eq!(pos(Flavor::Mariadb, &mariadb_dump(routine)), Ok(Some("0-1-4".into())), "{routine}");
        }
    }

    #[test]
    fn mariadb_refuses_a_line_users_sql_follows() {
        let dump = "-- SET GLOBAL gtid_slave_pos='0-1-999';\nCREATE TABLE t (i int);\n";
        assert_eq!(pos(Flavor::Mariadb, dump), Ok(None));
        let planted = "-- SET GLOBAL gtid_slave_pos='0-1-$(id)';\n";
        assert_eq!(pos(Flavor::Mariadb, planted).map_err(|f| f.reason), Err("corrupt"));
        assert_eq!(
            pos(Flavor::Mariadb, "-- no application schemas\n-- SET GLOBAL gtid_slave_pos='';\n"),
            Ok(Some(String::new()))
        );
    }

    #[test]
    fn mysql_takes_the_header_statement_over_lines() {
        let dump = format!(
            "-- MySQL dump 10.13\nSET @@SESSION.SQL_LOG_BIN= 0;\n\n--\n-- GTID state at the beginning of the backup \n--\n\n\
             SET @@GLOBAL.GTID_PURGED=/*!80000 '+'*/ '{B}:1-3,\n{A}:1-5';\n\n-- Current Database: `aaa`\n\
             CREATE DATABASE `aaa`;\n"
        );
        assert_eq!(pos(Flavor::Mysql, &dump), Ok(Some(format!("{A}:1-5,{B}:1-3"))));
        assert_eq!(pos(Flavor::Mysql, &format!("SET @@GLOBAL.GTID_PURGED='{A}:1-2';\n")), Ok(Some(format!("{A}:1-2"))));
    }

    #[test]
    fn mysql_ignores_what_users_write_after_the_header() {
        let dump = format!("-- MySQL dump\n-- Current Database: `aaa`\nSET @@GLOBAL.GTID_PURGED='{A}:1-999';\n");
        assert_eq!(pos(Flavor::Mysql, &dump), Ok(None));
        for bad in ["'nope';", &format!("'{A}:1-5' -- x\n"), "'a';"] {
            let dump = format!("SET @@GLOBAL.GTID_PURGED={bad}\n");
            assert_eq!(pos(Flavor::Mysql, &dump).map_err(|f| f.reason), Err("corrupt"), "{bad}");
        }
    }
}

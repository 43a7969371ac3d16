//! The binary log archive's reads of the server (the scripts'
//! `sql_binlog_start_state`, ported; issue 34.12).
//!
//! An archived binary log file carries a `.start` beside it: the GTIDs the server
//! had binlogged before the file began. The archive Job decides from it whether
//! the current file holds a transaction (and must be closed and archived now) and
//! which files retention may prune; a restore checks continuity with it. The
//! server says it in the file's first events: MySQL's `Previous_gtids` event, whose
//! `Info` is a GTID set printed with a newline after each comma, and MariaDB's
//! `Gtid_list` event, `[d-s-n,...]`.
//!
//! Read through the `mysql` client in batch mode, that newline arrived as the two
//! characters `\n`, which the script kept: with two or more source UUIDs (any
//! cluster after its first failover) the text no longer parsed, so the archive Job
//! failed (before the strict parser of issue 30.2, it flushed a new binary log on
//! every run and retention stopped pruning). Here the value comes over the
//! protocol as the server sent it and is parsed strictly into a set; the `.start`
//! file holds its canonical text, so two reads of one file are equal strings.

use std::path::Path;

use protocol::gtid::{mariadb::GtidList, mysql::GtidSet};

use crate::{
    Failure, Result,
    context::{Context, Env, Flavor},
    server::{Server, text},
};

/// The event that opens a binary log file with the server's GTID state.
fn header_event(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Mysql => "Previous_gtids",
        Flavor::Mariadb => "Gtid_list",
    }
}

/// The canonical GTID text of a header event's `Info`: MySQL a GTID set (newlines
/// after the commas allowed), MariaDB a bracketed GTID list.
///
/// # Errors
/// `corrupt`: the text is not what the flavor's event holds.
pub fn start_state_of(flavor: Flavor, info: &str) -> Result<String> {
    let bad = |e: &dyn std::fmt::Display| Failure::new("corrupt", format!("{} event: {e}", header_event(flavor)));
    match flavor {
        Flavor::Mysql => GtidSet::parse(info).map(|s| s.to_string()).map_err(|e| bad(&e)),
        Flavor::Mariadb => {
            let list = info
                .trim()
                .strip_prefix('[')
                .and_then(|s| s.strip_suffix(']'))
                .ok_or_else(|| bad(&format!("{info:?} is not a bracketed GTID list")))?;
            GtidList::parse(list).map(|l| l.to_string()).map_err(|e| bad(&e))
        }
    }
}

/// The GTIDs `s` had binlogged before its binary log `file` began.
///
/// # Errors
/// The server's error (`sql-failed`; an unknown file is one), `no-header` when the
/// file's first events hold no GTID header, `corrupt` when the header's text does
/// not parse.
pub fn start_state(s: &mut Server, file: &str) -> Result<String> {
    let want = header_event(s.flavor);
    // SHOW BINLOG EVENTS: Log_name, Pos, Event_type, Server_id, End_log_pos, Info.
    let rows = s.rows(&format!("SHOW BINLOG EVENTS IN {} LIMIT 4", crate::sql::string(file)))?;
    for row in &rows {
        if text(row, 2).as_deref() == Some(want) {
            return start_state_of(s.flavor, &text(row, 5).unwrap_or_default());
        }
    }
    Err(Failure::new("no-header", format!("{}: {file} has no {want} event among its first 4", s.name)))
}

/// `mysql-hook-agent binlog-start`: the start state of binary log `BINLOG_FILE`
/// on member `BINLOG_POD`, written (canonical text, no newline) to the file
/// `BINLOG_START_OUT`, which the archive Job renames into the archive. Result
/// `binlog-start` with the text in `gtid`.
///
/// # Errors
/// `bad-env`, `unreachable`, and those of [`start_state`].
pub fn run(ctx: &Context, env: &dyn Env) -> Result<protocol::Report> {
    let pod = env.var("BINLOG_POD").unwrap_or_default();
    if ctx.addr(&pod).is_none() {
        return Err(Failure::new("bad-env", format!("BINLOG_POD '{pod}' is not in PODS")));
    }
    let file = env.var("BINLOG_FILE").unwrap_or_default();
    // A binary log's name is the server's basename and a number; nothing else is
    // asked for (the name is quoted in the statement all the same).
    if file.is_empty() || !file.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_')) {
        return Err(Failure::new("bad-env", format!("BINLOG_FILE '{file}' is not a binary log file name")));
    }
    let out = env.var("BINLOG_START_OUT").filter(|o| !o.is_empty());
    let out = out.ok_or_else(|| Failure::new("bad-env", "BINLOG_START_OUT is required"))?;
    let mut s = Server::connect(ctx, &pod).map_err(|e| Failure::new("unreachable", e.to_string()))?;
    let state = start_state(&mut s, &file)?;
    std::fs::write(Path::new(&out), &state)
        .map_err(|e| Failure::new("bad-env", format!("BINLOG_START_OUT: {out}: {e}")))?;
    Ok(protocol::Report {
        pod: Some(pod),
        gtid: Some(state),
        message: Some(format!("start state of {file}")),
        ..protocol::Report::new("binlog-start")
    })
}

/// The start state printed by the flavor's binary log tool (`mysqlbinlog`,
/// `mariadb-binlog`) for a file's first events: MySQL's `Previous-GTIDs` line
/// followed by the set on `# ` lines (`# [empty]` for a server's first file, as
/// MySQL 9.7 prints it), MariaDB's `Gtid list [` folded over `# ` lines up to `]`.
///
/// # Errors
/// `no-header` when the text holds no such event, `corrupt` when its text does not
/// parse.
pub fn start_state_in_tool_output(flavor: Flavor, out: &str) -> Result<String> {
    let mut lines = out.lines();
    let none = || Failure::new("no-header", format!("no {} event in the file's first events", header_event(flavor)));
    match flavor {
        Flavor::Mysql => {
            lines.by_ref().find(|l| l.contains("Previous-GTIDs")).ok_or_else(none)?;
            let mut set = String::new();
            for l in lines {
                match l.strip_prefix("# ") {
                    Some(rest) if !l.starts_with("# at ") => set.push_str(rest.trim()),
                    _ => break,
                }
            }
            let set = if set == "[empty]" { String::new() } else { set };
            start_state_of(flavor, &set)
        }
        Flavor::Mariadb => {
            let first = lines.by_ref().find_map(|l| l.split_once("Gtid list [").map(|(_, r)| r)).ok_or_else(none)?;
            let mut list = format!("[{}", first.trim());
            for l in lines {
                if list.contains(']') {
                    break;
                }
                let rest = l
                    .strip_prefix("# ")
                    .ok_or_else(|| Failure::new("corrupt", format!("Gtid_list event folded over {l:?}")))?;
                list.push_str(rest.trim());
            }
            let end = list.find(']').ok_or_else(|| Failure::new("corrupt", format!("{list:?} has no ']'")))?;
            start_state_of(flavor, &list[..=end])
        }
    }
}

/// `mysql-hook-agent binlog-header`: the start state of the binary log file at
/// `BINLOG_PATH` (a file fetched into a backup or the archive), read by running the
/// flavor's tool `BINLOG_TOOL` (`FLAVOR`) on its first 4 KiB, written (canonical
/// text) to `BINLOG_START_OUT`. The scripts parsed the tool's text in bash, and
/// took MySQL 9.7's `[empty]` (a server's first file) for a missing header: every
/// point-in-time restore on MySQL failed `binlog-gap` (seen on the real node).
///
/// # Errors
/// `bad-env`, `no-header` (the tool failed, or printed no header), `corrupt`.
pub fn run_file(env: &dyn Env) -> Result<protocol::Report> {
    let flavor = Flavor::from_env(env)?;
    let path = env.var("BINLOG_PATH").ok_or_else(|| Failure::new("bad-env", "BINLOG_PATH is required"))?;
    let tool = env.var("BINLOG_TOOL").ok_or_else(|| Failure::new("bad-env", "BINLOG_TOOL is required"))?;
    let out = env.var("BINLOG_START_OUT").ok_or_else(|| Failure::new("bad-env", "BINLOG_START_OUT is required"))?;
    let run = std::process::Command::new(&tool)
        .arg("--stop-position=4096")
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| Failure::new("bad-env", format!("{tool}: {e}")))?;
    let text = String::from_utf8_lossy(&run.stdout);
    let state = start_state_in_tool_output(flavor, &text).map_err(|f| {
        let err = String::from_utf8_lossy(&run.stderr);
        Failure::new(f.reason, format!("{path}: {} ({tool}: {}, {})", f.message, run.status, err.trim()))
    })?;
    std::fs::write(Path::new(&out), &state)
        .map_err(|e| Failure::new("bad-env", format!("BINLOG_START_OUT: {out}: {e}")))?;
    Ok(protocol::Report {
        gtid: Some(state),
        message: Some(format!("start state of {path}")),
        ..protocol::Report::new("binlog-start")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const B: &str = "4e11fa47-71ca-11e1-9e33-c80aa9429562";

    #[test]
    fn a_mysql_header_with_two_sources_is_one_set() {
        // As the server sends it: a newline after the comma (issue 34.12).
        let info = format!("{B}:1-3,\n{A}:1-5");
        assert_eq!(start_state_of(Flavor::Mysql, &info), Ok(format!("{A}:1-5,{B}:1-3")));
        assert_eq!(start_state_of(Flavor::Mysql, ""), Ok(String::new()), "a server's first file");
    }

    #[test]
    fn the_two_characters_a_batch_client_printed_are_refused() {
        let e = start_state_of(Flavor::Mysql, &format!("{A}:1-5,\\n{B}:1-3"));
        assert_eq!(e.map_err(|f| f.reason), Err("corrupt"));
    }

    #[test]
    fn the_tools_text_of_a_header() {
        // mysqlbinlog 9.7.4 on a server's first file, and on a later one.
        let first = "# at 127\n#261207 15:32:35 server id 3  end_log_pos 158 CRC32 0x8ed2e38e \tPrevious-GTIDs\n# [empty]\n# at 158\n";
        assert_eq!(start_state_in_tool_output(Flavor::Mysql, first), Ok(String::new()));
        let later = format!("#261207 \tPrevious-GTIDs\n# {B}:1-2457,\n# {A}:1-4086\n# at 278\n#261207 GTID\n");
        assert_eq!(start_state_in_tool_output(Flavor::Mysql, &later), Ok(format!("{A}:1-4086,{B}:1-2457")));
        assert_eq!(start_state_in_tool_output(Flavor::Mysql, "# at 4\n").map_err(|f| f.reason), Err("no-header"));
        // mariadb-binlog folds a long list over lines.
        let folded = "#261207 server id 1 \tGtid list [0-2-781,\n# 0-1-1828,\n# 0-3-1830]\n# at 300\n";
        assert_eq!(start_state_in_tool_output(Flavor::Mariadb, folded), Ok("0-1-1828,0-2-781,0-3-1830".to_owned()));
        assert_eq!(start_state_in_tool_output(Flavor::Mariadb, "Gtid list []\n"), Ok(String::new()));
        let bad = "Gtid list [0-1-1,\nBASH_VERSINFO[$(id)0]\n";
        assert_eq!(start_state_in_tool_output(Flavor::Mariadb, bad).map_err(|f| f.reason), Err("corrupt"));
    }

    #[test]
    fn a_mariadb_header_is_a_bracketed_list() {
        assert_eq!(start_state_of(Flavor::Mariadb, "[0-2-781,0-1-1828]"), Ok("0-1-1828,0-2-781".to_owned()));
        assert_eq!(start_state_of(Flavor::Mariadb, "[]"), Ok(String::new()));
        for bad in ["0-1-5", "[0-1-5", "[0-1-$(id)]", "[0-1-5],[0-1-6]"] {
            assert_eq!(start_state_of(Flavor::Mariadb, bad).map_err(|f| f.reason), Err("corrupt"), "{bad}");
        }
    }
}

//! `mysql-hook-agent quarantine`: the binary logs of a server that is about to
//! be rebuilt kept aside first (issue 31.8).
//!
//! `rebuildErrant` empties a replica that holds transactions of its own the
//! primary lacks, and copies a donor into it (`join.sh`, `seed.sh`). Those
//! transactions are, by the rule that picks them, on no other member: an old
//! primary's commit that was never acknowledged, or, were an upstream decision
//! wrong, the last copy of something that was. So they are kept before the wipe:
//! every binary log file the server lists (`SHOW BINARY LOGS`) is hard-linked
//! (copied, where a link cannot be made) into
//! `<datadir>/.mysql-hook-quarantine/<UTC time>-<pod>/`, with a file `ERRANT`
//! naming the transactions and the primary of the moment. The seed's
//! `RESET MASTER` (MariaDB) or `CLONE` (MySQL) then removes the server's own
//! names for the files, not the data. A human reads or replays them with
//! `mysqlbinlog`/`mariadb-binlog` and deletes the folder when done
//! (docs/runbook.md); it takes no space until then beyond the logs it keeps.
//!
//! Only a read-only server is quarantined (a writable one is never rebuilt).
//! Input: `POD_NAME` (this server, a member), `QUARANTINE_ERRANT` (its errant
//! transactions, as `join.sh` found them; must parse), `QUARANTINE_PRIMARY`.
//! Report `quarantined` (`location`: the folder); errors `bad-env`,
//! `self-writable`, `quarantine-failed`.

use std::path::{Path, PathBuf};

use crate::{
    Failure, Result,
    context::{Context, Env},
    server::Server,
};

/// The folder under the data directory that holds the quarantines.
pub const FOLDER: &str = ".mysql-hook-quarantine";

/// `YYYYMMDDTHHMMSSZ` of `secs` seconds since 1970 (UTC), for folder names.
#[must_use]
pub fn utc_stamp(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // civil from days (H. Hinnant's algorithm)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// A binary log file name as the server lists it: a plain file name.
#[must_use]
pub fn plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\0')
}

/// Links (or copies) `files` of `from` into `to`, which is created and must not
/// exist yet.
///
/// # Errors
/// `quarantine-failed`, naming the file.
pub fn keep(from: &Path, files: &[String], to: &Path) -> Result<()> {
    let failed = |what: String| Failure::new("quarantine-failed", what);
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| failed(format!("{}: {e}", parent.display())))?;
    }
    std::fs::create_dir(to).map_err(|e| failed(format!("{}: {e}", to.display())))?;
    for f in files {
        let (src, dst) = (from.join(f), to.join(f));
        if std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst).map_err(|e| failed(format!("{} -> {}: {e}", src.display(), dst.display())))?;
        }
    }
    Ok(())
}

/// The command (see the module docs).
///
/// # Errors
/// `bad-env`, `self-writable`, `quarantine-failed`, or the server's error.
pub fn run(ctx: &Context, env: &dyn Env) -> Result<protocol::Report> {
    let pod = env.var("POD_NAME").unwrap_or_default();
    if ctx.addr(&pod).is_none() {
        return Err(Failure::new("bad-env", format!("POD_NAME '{pod}' is not in PODS")));
    }
    let errant = env.var("QUARANTINE_ERRANT").unwrap_or_default();
    let parses = crate::gtid_calc::calc(ctx.flavor, "ok", std::slice::from_ref(&errant));
    if errant.is_empty() || !matches!(parses, Ok(crate::gtid_calc::Answer::Holds(true))) {
        return Err(Failure::new("bad-env", "QUARANTINE_ERRANT is not a GTID text of this flavor"));
    }
    let primary = env.var("QUARANTINE_PRIMARY").unwrap_or_default();
    let mut s = Server::connect(ctx, &pod).map_err(|e| Failure::new("unreachable", e.to_string()))?;
    if s.writable()? {
        return Err(Failure::new("self-writable", format!("{pod} is writable; a writable server is never rebuilt")));
    }
    let datadir = s.value("SELECT @@global.datadir")?.unwrap_or_default();
    let base = s.value("SELECT @@global.log_bin_basename")?.unwrap_or_default();
    let logs = PathBuf::from(&base).parent().map(Path::to_path_buf).unwrap_or_default();
    if datadir.is_empty() || base.is_empty() {
        return Err(Failure::new("quarantine-failed", format!("{pod} names no data directory or binary log")));
    }
    let files: Vec<String> = s.rows("SHOW BINARY LOGS")?.iter().filter_map(|r| crate::server::text(r, 0)).collect();
    if let Some(bad) = files.iter().find(|f| !plain_name(f)) {
        return Err(Failure::new("corrupt", format!("{pod} lists a binary log named {bad:?}")));
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let to = Path::new(&datadir).join(FOLDER).join(format!("{}-{pod}", utc_stamp(now)));
    keep(&logs, &files, &to)?;
    let note = format!(
        "errant transactions: {errant}\nserver: {pod}\nprimary: {primary}\nbinary logs: {}\n\
         Kept by mysql-hook before rebuildErrant emptied the server (docs/runbook.md).\n",
        files.join(" ")
    );
    std::fs::write(to.join("ERRANT"), note)
        .map_err(|e| Failure::new("quarantine-failed", format!("{}: {e}", to.display())))?;
    Ok(protocol::Report {
        pod: Some(pod.clone()),
        location: Some(to.display().to_string()),
        message: Some(format!("{} binary log file(s) of {pod} kept, holding {errant}", files.len())),
        ..protocol::Report::new("quarantined")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_utc() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        assert_eq!(utc_stamp(1_796_000_000), "20261130T005320Z", "date -u -d @1796000000");
        assert_eq!(utc_stamp(951_782_400), "20000229T000000Z", "a leap day");
    }

    #[test]
    fn only_plain_file_names() {
        assert!(plain_name("binlog.000001"));
        for bad in ["", ".", "..", "../x", "a/b", "x\0"] {
            assert!(!plain_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn files_are_kept_apart_and_never_over_an_earlier_quarantine() {
        let root = std::env::temp_dir().join(format!("quarantine-test-{}", std::process::id()));
        let logs = root.join("data");
        std::fs::create_dir_all(&logs).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(logs.join("binlog.000001"), b"one").unwrap_or_else(|e| panic!("{e}"));
        let to = root.join("data").join(FOLDER).join("t-db-0");
        assert!(keep(&logs, &["binlog.000001".to_owned()], &to).is_ok());
        std::fs::remove_file(logs.join("binlog.000001")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(std::fs::read(to.join("binlog.000001")).ok().as_deref(), Some(&b"one"[..]), "outlives the original");
        assert_eq!(keep(&logs, &[], &to).err().map(|f| f.reason), Some("quarantine-failed"), "never merged into one");
        let _ = std::fs::remove_dir_all(&root);
    }
}

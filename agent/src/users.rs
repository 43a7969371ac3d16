//! `mysql-hook-agent users`: the application accounts of `spec.users`, made on
//! the primary exactly as declared, idempotently, so applications never need root.
//!
//! Environment (as the hook's users Job sets it):
//! - `USERS`: `name:database:rw|ro ...`, checked here again (the hook and the CRD
//!   checked them first);
//! - `USERS_DIR`: one file per user, named after it, holding its password (the
//!   password Secrets, projected); one trailing newline is not part of it;
//! - `PRIMARY`: the recorded primary, where the accounts are made (they replicate).
//!
//! For each user: the database is created if missing; the account `name@'%'` is
//! created or its password set; every privilege is revoked and the declared ones
//! granted on its database only (`rw`: ALL PRIVILEGES, `ro`: SELECT, SHOW VIEW),
//! the name granted literally ([`crate::sql::grant_database`]: `_` is a wildcard
//! in a grant). The accounts made here are listed in `_mysqlhook.users`; one listed
//! there and no longer declared is dropped. No account outside that list is
//! dropped.
//!
//! Safety (the role-safety review, finding 7): the check that `PRIMARY` is the
//! writable primary and every write go through **one session**. A fence of that
//! server (a switchover, a failover) sets it read-only and then kills every client
//! session, so a write issued after the fence is refused or dies with its session,
//! never landing on a fenced old primary as an errant transaction; the hook then
//! runs the Job again against the new primary.
//!
//! Report: `{"result":"users-applied","primary","users":[..],"dropped":[..]}`;
//! errors: `bad-env`, `not-primary` (the hook retries), `primary-unreachable`,
//! `sql-failed`.

use std::{collections::BTreeSet, path::Path, time::Duration};

use crate::{
    Failure, Report, Result,
    context::{Context, Env},
    server::{self, text},
    sql,
};

/// The schemas no application account is granted, in any letter case.
pub const SYSTEM_SCHEMAS: &[&str] = &["mysql", "sys", "information_schema", "performance_schema", "_mysqlhook"];

/// Read-write or read-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    ReadWrite,
    ReadOnly,
}

/// One declared user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    pub name: String,
    pub database: String,
    pub access: Access,
}

fn bad_env(message: impl Into<String>) -> Failure {
    Failure::new("bad-env", message)
}

/// `USERS`, checked: names `[a-z][a-z0-9_]{0,31}`, databases `[A-Za-z0-9_]{1,64}`
/// and no system schema in any case, access `rw` or `ro`, no name twice.
///
/// # Errors
/// `bad-env` naming the first entry that is not so.
pub fn parse_declared(list: &str) -> Result<Vec<Declared>> {
    let mut out: Vec<Declared> = Vec::new();
    for entry in list.split_ascii_whitespace() {
        let mut parts = entry.split(':');
        let (Some(name), Some(database), Some(access), None) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad_env(format!("USERS entry '{entry}' is not name:database:rw|ro")));
        };
        let name_ok = (1..=32).contains(&name.len())
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !name_ok {
            return Err(bad_env(format!("user name '{name}' is not [a-z][a-z0-9_]{{0,31}}")));
        }
        let db_ok =
            (1..=64).contains(&database.len()) && database.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !db_ok {
            return Err(bad_env(format!("database '{database}' of {name} is not [A-Za-z0-9_]{{1,64}}")));
        }
        if SYSTEM_SCHEMAS.iter().any(|s| s.eq_ignore_ascii_case(database)) {
            return Err(bad_env(format!("database '{database}' of {name} is a system schema")));
        }
        let access = match access {
            "rw" => Access::ReadWrite,
            "ro" => Access::ReadOnly,
            other => return Err(bad_env(format!("access '{other}' of {name} is not rw or ro"))),
        };
        if out.iter().any(|u| u.name == name) {
            return Err(bad_env(format!("user {name} is declared twice")));
        }
        out.push(Declared { name: name.to_owned(), database: database.to_owned(), access });
    }
    Ok(out)
}

/// The statements that make one user as declared (MySQL and MariaDB accept the
/// same ones).
#[must_use]
pub fn statements(u: &Declared, password: &str) -> Vec<String> {
    let account = sql::account(&u.name, "%");
    let pw = sql::string(password);
    let grant = match u.access {
        Access::ReadWrite => "ALL PRIVILEGES",
        Access::ReadOnly => "SELECT, SHOW VIEW",
    };
    vec![
        format!("CREATE DATABASE IF NOT EXISTS {}", sql::ident(&u.database)),
        format!("CREATE USER IF NOT EXISTS {account} IDENTIFIED BY {pw}"),
        format!("ALTER USER {account} IDENTIFIED BY {pw}"),
        format!("REVOKE ALL PRIVILEGES, GRANT OPTION FROM {account}"),
        format!("GRANT {grant} ON {}.* TO {account}", sql::grant_database(&u.database)),
        format!("INSERT IGNORE INTO _mysqlhook.users (name) VALUES ({})", sql::string(&u.name)),
    ]
}

/// A user's password: its file's bytes, one trailing newline removed.
fn password(env: &dyn Env, dir: &Path, name: &str) -> Result<String> {
    let bytes =
        env.read(&dir.join(name)).map_err(|e| bad_env(format!("no password file {}/{name}: {e}", dir.display())))?;
    let mut pw = String::from_utf8(bytes).map_err(|_| bad_env(format!("the password of {name} is not UTF-8")))?;
    if pw.ends_with('\n') {
        pw.pop();
    }
    if pw.is_empty() {
        return Err(bad_env(format!("the password of {name} is empty")));
    }
    Ok(pw)
}

/// The command.
///
/// # Errors
/// See the module docs.
pub fn run(ctx: &Context, env: &dyn Env) -> Result<Report> {
    let primary = env.var("PRIMARY").unwrap_or_default();
    if ctx.addr(&primary).is_none() {
        return Err(bad_env(format!("PRIMARY '{primary}' is not in PODS")));
    }
    let dir = env.var("USERS_DIR").unwrap_or_default();
    let declared = parse_declared(&env.var("USERS").unwrap_or_default())?;
    let passwords = declared.iter().map(|u| password(env, Path::new(&dir), &u.name)).collect::<Result<Vec<_>>>()?;
    let mut report = Report::new("users-applied");
    report.primary = Some(primary.clone());

    let mut s = server::wait_connect(ctx, &primary, Duration::from_secs(60))
        .map_err(|e| Failure::new("primary-unreachable", format!("{primary} does not answer: {e}")))?;
    // One session from the check to the last write (see the module docs).
    if !s.writable()? || s.is_replica()? {
        return Err(Failure::new("not-primary", format!("{primary} is not the writable primary; the hook retries")));
    }
    s.exec("CREATE DATABASE IF NOT EXISTS _mysqlhook")?;
    s.exec("CREATE TABLE IF NOT EXISTS _mysqlhook.users (name VARCHAR(32) PRIMARY KEY)")?;
    for (u, pw) in declared.iter().zip(&passwords) {
        for q in statements(u, pw) {
            s.exec(&q)?;
        }
        let access = if u.access == Access::ReadWrite { "rw" } else { "ro" };
        log(&format!("user {}: {access} on {}", u.name, u.database));
    }
    let want: BTreeSet<&str> = declared.iter().map(|u| u.name.as_str()).collect();
    let mut dropped = Vec::new();
    for row in s.rows("SELECT name FROM _mysqlhook.users ORDER BY name")? {
        let Some(name) = text(&row, 0) else { continue };
        if want.contains(name.as_str()) || parse_declared(&format!("{name}:x:rw")).is_err() {
            continue;
        }
        s.exec(&format!("DROP USER IF EXISTS {}", sql::account(&name, "%")))?;
        s.exec(&format!("DELETE FROM _mysqlhook.users WHERE name = {}", sql::string(&name)))?;
        log(&format!("user {name} dropped: no longer declared"));
        dropped.push(name);
    }
    report.users = Some(declared.into_iter().map(|u| u.name).collect());
    report.dropped = Some(dropped);
    Ok(report)
}

/// A log line on stderr, as the scripts write them.
pub fn log(msg: &str) {
    eprintln!("users: {msg}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_are_checked_as_the_hook_checks_them() {
        let ok = parse_declared("shopper:shop:rw shop_ro:shop:ro u1:my_ql:rw").unwrap_or_default();
        assert_eq!(ok.len(), 3);
        assert_eq!(ok[1], Declared { name: "shop_ro".into(), database: "shop".into(), access: Access::ReadOnly });
        for bad in [
            "x';DROP:shop:rw",
            "app:MySQL:rw",
            "app:PERFORMANCE_SCHEMA:ro",
            "app:_MySQLHook:rw",
            "app:my%ql:rw",
            "app:shop:admin",
            "app:shop",
            "app:shop:rw:x",
            "app:shop:rw app:x:ro",
            "App:shop:rw",
        ] {
            assert!(parse_declared(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn grants_name_the_database_literally() {
        let u = Declared { name: "u0".into(), database: "my_ql".into(), access: Access::ReadWrite };
        let q = statements(&u, "p'w\\");
        assert_eq!(q[4], r"GRANT ALL PRIVILEGES ON `my\_ql`.* TO 'u0'@'%'");
        assert_eq!(q[0], "CREATE DATABASE IF NOT EXISTS `my_ql`");
        assert_eq!(q[1], r"CREATE USER IF NOT EXISTS 'u0'@'%' IDENTIFIED BY 'p\'w\\'");
    }
}

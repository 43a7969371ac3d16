//! What a backup carries besides its dump: the application schemas it dumps and
//! the statements that recreate its accounts (the scripts' `sql_user_schemas` and
//! `accounts_dump`, ported; issue 34.6).
//!
//! The dump is one consistent snapshot, but neither of these can be read inside
//! it: the schema list names what the dump tool is to dump, so it is read before
//! the snapshot begins, and `SHOW CREATE USER` / `SHOW GRANTS` read the server's
//! grant cache, not a snapshot. Read once each, a database created between the
//! list and the snapshot was silently missing from the backup (a restore lacked
//! it, `verify` passed), and an account created while the dump ran was in
//! `accounts.sql` as well as after the dump's position, so every point-in-time
//! replay of its `CREATE USER` failed (ERROR 1396).
//!
//! So `backup.sh` reads the catalog before the dump and again after it, with
//! `CATALOG_SINCE` naming the first read: equal, the dump's snapshot (which lies
//! between the two reads) saw these schemas and these accounts; different, the
//! command reports `waiting` (`catalog-changed`, exit 75) and the backup fails so
//! that its Job's next attempt takes all of it again. Two changes that cancel out
//! within the dump (a database or account dropped and created again) are not seen
//! here; the dump of a database missing at its snapshot fails, and so does the
//! replay of a `CREATE USER` for an account `accounts.sql` already has: loudly,
//! never a restore that silently lacks what was acknowledged.
//!
//! Values come over the protocol as the server sent them, byte for byte (the
//! `mysql` client's batch output doubled backslashes and escaped newlines in an
//! account's name or a grant).

use std::path::Path;

use mysql::Row;

use crate::{
    Failure, Result,
    context::{Context, Env, Flavor, OPERATOR_USER},
    server::{Server, text},
    sql,
};

/// The replication account (common.sh `REPL_USER`).
const REPL_USER: &str = "repl";

/// The file of schema names in a catalog directory: each name followed by a NUL
/// (a quoted schema name may hold a newline).
pub const SCHEMAS: &str = "schemas";
/// The statements that recreate the accounts.
pub const ACCOUNTS_SQL: &str = "accounts.sql";
/// How many accounts `accounts.sql` recreates (decimal).
pub const ACCOUNTS_COUNT: &str = "accounts.count";
/// With `CATALOG_SINCE`: what changed since that read, for people (the backup's
/// error message), written only when something did.
pub const CHANGES: &str = "changes";

/// The schemas a backup dumps: not the system ones, not the hook's own marker
/// schema `_mysqlhook` (restore.sh writes it), not MariaDB's `#mysql50#` names
/// (any directory of the data dir shows as one, `#mysql50#lost+found` on ext4).
const USER_SCHEMAS: &str = "SELECT schema_name FROM information_schema.schemata \
     WHERE schema_name NOT IN ('mysql','sys','information_schema','performance_schema','_mysqlhook') \
     AND schema_name NOT LIKE '#mysql50#%' ORDER BY schema_name";

/// A server's application schemas and the SQL that recreates its accounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    pub schemas: Vec<String>,
    pub accounts: usize,
    pub sql: Vec<u8>,
}

/// One account a backup carries: its quoted name, and whether it is a role.
struct Account {
    quoted: String,
    role: bool,
}

/// The accounts a backup carries (issue 19.2): every user and role but root, the
/// replication and operator accounts (every new cluster makes its own) and the
/// server's built-in ones.
/// MySQL: `mysql.user` (a role is a locked account there, made with `CREATE USER`
/// like any other). MariaDB: `mysql.user` with `is_role` (a role has no host;
/// `PUBLIC` is built in); roles first, so that grants of them find them.
fn accounts(s: &mut Server) -> Result<Vec<Account>> {
    let skip = [
        "root",
        REPL_USER,
        OPERATOR_USER,
        "",
        "mysql.sys",
        "mysql.session",
        "mysql.infoschema",
        "mariadb.sys",
        "PUBLIC",
    ]
    .map(sql::string)
    .join(", ");
    let q = match s.flavor {
        Flavor::Mysql => format!("SELECT user, host, 0 FROM mysql.user WHERE user NOT IN ({skip}) ORDER BY user, host"),
        Flavor::Mariadb => format!(
            "SELECT user, host, IF(is_role = 'Y', 1, 0) FROM mysql.user WHERE user NOT IN ({skip}) \
             ORDER BY is_role DESC, user, host"
        ),
    };
    let rows = s.rows(&q)?;
    Ok(rows
        .iter()
        .map(|r| {
            let (user, host) = (text(r, 0).unwrap_or_default(), text(r, 1).unwrap_or_default());
            let role = text(r, 2).as_deref() == Some("1");
            let quoted = if role { sql::ident(&user) } else { format!("{}@{}", sql::ident(&user), sql::ident(&host)) };
            Account { quoted, role }
        })
        .collect())
}

/// The first column of each row, exact bytes, each followed by `;` and a newline.
fn statements(rows: &[Row], out: &mut Vec<u8>) {
    for r in rows {
        if let Some(mysql::Value::Bytes(b)) = r.as_ref(0) {
            out.extend_from_slice(b);
            out.extend_from_slice(b";\n");
        }
    }
}

/// Reads `s`'s catalog: first every account (dropped if it exists, so a rerun
/// after a crash starts clean), then every grant (roles exist by then).
/// MySQL: `SHOW CREATE USER` with `print_identified_with_as_hex` (a binary hash
/// survives as text), `SHOW GRANTS`. MariaDB: `CREATE ROLE` for a role,
/// `SHOW CREATE USER` for a user, `SHOW GRANTS` for both (it ends with
/// `SET DEFAULT ROLE` where one is set).
///
/// # Errors
/// The server's error.
pub fn read(s: &mut Server) -> Result<Catalog> {
    let schemas = s.rows(USER_SCHEMAS)?.iter().filter_map(|r| text(r, 0)).collect();
    if s.flavor == Flavor::Mysql {
        s.exec("SET SESSION print_identified_with_as_hex = ON")?;
    }
    let accounts = accounts(s)?;
    let mut sql = format!(
        "-- accounts of {} (not root, not {REPL_USER}, not {OPERATOR_USER}), written by mysql-hook-agent catalog\n",
        s.name
    )
    .into_bytes();
    for a in &accounts {
        if a.role {
            sql.extend_from_slice(format!("DROP ROLE IF EXISTS {0};\nCREATE ROLE {0};\n", a.quoted).as_bytes());
        } else {
            sql.extend_from_slice(format!("DROP USER IF EXISTS {};\n", a.quoted).as_bytes());
            statements(&s.rows(&format!("SHOW CREATE USER {}", a.quoted))?, &mut sql);
        }
    }
    for a in &accounts {
        statements(&s.rows(&format!("SHOW GRANTS FOR {}", a.quoted))?, &mut sql);
    }
    Ok(Catalog { schemas, accounts: accounts.len(), sql })
}

/// What differs between an earlier catalog's files and `now`, for people; `None`
/// when nothing does.
#[must_use]
pub fn changes(schemas_before: &[u8], sql_before: &[u8], now: &Catalog) -> Option<String> {
    let before: Vec<String> = schemas_before
        .split(|b| *b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect();
    let mut said = Vec::new();
    let added: Vec<&str> = now.schemas.iter().filter(|n| !before.contains(n)).map(String::as_str).collect();
    let dropped: Vec<&str> = before.iter().filter(|n| !now.schemas.contains(n)).map(String::as_str).collect();
    if !added.is_empty() {
        said.push(format!("schemas created: {}", added.join(", ")));
    }
    if !dropped.is_empty() {
        said.push(format!("schemas dropped: {}", dropped.join(", ")));
    }
    if sql_before != now.sql.as_slice() {
        said.push("accounts or their grants changed".to_owned());
    }
    (!said.is_empty()).then(|| said.join("; "))
}

fn schema_file(schemas: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for n in schemas {
        out.extend_from_slice(n.as_bytes());
        out.push(0);
    }
    out
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, bytes).map_err(|e| Failure::new("bad-env", format!("{}: {e}", path.display())))
}

/// `mysql-hook-agent catalog`: the catalog of member `CATALOG_POD` written into the
/// directory `CATALOG_OUT` ([`SCHEMAS`], [`ACCOUNTS_SQL`], [`ACCOUNTS_COUNT`]).
/// With `CATALOG_SINCE` (the directory of an earlier read), a catalog that differs
/// from that one is reported `waiting` with reason `catalog-changed` (exit 75) and
/// what changed written to [`CHANGES`]; the catalog is written all the same.
/// Result `catalog`.
///
/// # Errors
/// `bad-env`, `unreachable`, the server's error.
pub fn run(ctx: &Context, env: &dyn Env) -> Result<protocol::Report> {
    let pod = env.var("CATALOG_POD").unwrap_or_default();
    if ctx.addr(&pod).is_none() {
        return Err(Failure::new("bad-env", format!("CATALOG_POD '{pod}' is not in PODS")));
    }
    let out = env.var("CATALOG_OUT").ok_or_else(|| Failure::new("bad-env", "CATALOG_OUT is required"))?;
    let out = Path::new(&out);
    std::fs::create_dir_all(out)
        .map_err(|e| Failure::new("bad-env", format!("CATALOG_OUT: {}: {e}", out.display())))?;
    let mut s = Server::connect(ctx, &pod).map_err(|e| Failure::new("unreachable", e.to_string()))?;
    let catalog = read(&mut s)?;
    write(out, SCHEMAS, &schema_file(&catalog.schemas))?;
    write(out, ACCOUNTS_SQL, &catalog.sql)?;
    write(out, ACCOUNTS_COUNT, catalog.accounts.to_string().as_bytes())?;
    let what = format!("{} schemas, {} accounts", catalog.schemas.len(), catalog.accounts);
    if let Some(since) = env.var("CATALOG_SINCE") {
        let since = Path::new(&since);
        let read_file = |name: &str| {
            env.read(&since.join(name))
                .map_err(|e| Failure::new("bad-env", format!("CATALOG_SINCE: {}: {e}", since.join(name).display())))
        };
        if let Some(changed) = changes(&read_file(SCHEMAS)?, &read_file(ACCOUNTS_SQL)?, &catalog) {
            let said = format!("{pod} changed while it was dumped ({changed}): the dump is not kept");
            write(out, CHANGES, said.as_bytes())?;
            return Ok(crate::waiting(&pod, "catalog-changed", said));
        }
    }
    Ok(protocol::Report { pod: Some(pod), message: Some(what), ..protocol::Report::new("catalog") })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog(schemas: &[&str], sql: &str) -> Catalog {
        Catalog { schemas: schemas.iter().map(|s| (*s).to_owned()).collect(), accounts: 0, sql: sql.into() }
    }

    #[test]
    fn an_equal_catalog_has_no_changes() {
        let c = catalog(&["app", "a\nb"], "CREATE USER x;\n");
        assert_eq!(changes(&schema_file(&c.schemas), &c.sql, &c), None);
    }

    #[test]
    fn a_schema_or_an_account_that_changed_is_named() {
        let before = catalog(&["app", "old"], "CREATE USER x;\n");
        let now = catalog(&["app", "late"], "CREATE USER x;\nCREATE USER u2;\n");
        assert_eq!(
            changes(&schema_file(&before.schemas), &before.sql, &now).as_deref(),
            Some("schemas created: late; schemas dropped: old; accounts or their grants changed")
        );
    }
}

//! `mysql-hook-agent operator-user`: the operator account, `mysqlhook@'%'`, that
//! every Job and agent logs in as over the network (issue 18.5), and root kept to
//! the server's own socket (ported from `operator-user.sh`, issue 32).
//!
//! Run by the agent sidecar on the pod of the primary when the pod has the
//! operator account's password (`OPERATOR_PASSWORD_FILE`, the credentials Secret's
//! key `operator-password`). It makes sure that:
//!
//! - `mysqlhook@'%'` logs in with that password and holds every privilege `WITH
//!   GRANT OPTION` (seeds copy accounts; restores grant what applications held);
//! - when `ROOT_REMOTE_FILE` (the config ConfigMap's key `rootRemote`) reads
//!   `drop`, root has no account but `root@'localhost'`. The hook writes `drop`
//!   once every server's pod has the operator password: until then a pod of the
//!   older template may still log in as root over the network.
//!
//! It logs in as `root@'localhost'` through the server's socket (`SERVER_SOCKET`,
//! default `/var/run/mysqld/mysqld.sock`): the one account that exists in every
//! state (a new cluster, one made before the operator account, one whose operator
//! password changed since).
//!
//! **Only on the writable primary, checked in the session that writes** (issue
//! 31.6). The changes reach the replicas through the binary log, like `repl`; a
//! replica written to directly would hold a transaction the primary lacks. The
//! script checked `read_only` once and wrote over new connections, so a fence in
//! between let its writes land on a fenced old primary. Here one session checks
//! and writes, and checks again before each write: a fence sets the server
//! read-only and then kills every client session, this one included, so a write
//! after the fence is refused (MySQL: `super_read_only` stops root too) or dies
//! with its session. What remains on MariaDB, whose root bypasses `read_only`: a
//! fence's own few milliseconds between `SET GLOBAL read_only` and its `KILL`.
//! A steady cluster writes nothing: the operator logs in, and root has no other
//! host.
//!
//! Report: `{"result":"operator-user","pod","changed"}`; `waiting` (exit 75: not
//! the writable primary, or not answering on the socket; the sidecar tries again
//! next round); errors `bad-env`, `login-failed`, `sql-failed`.

use std::path::Path;

use crate::{
    Failure, Report, Result,
    context::{Context, Env, OPERATOR_USER, Secret},
    server::{Server, text},
    sql, waiting,
};

/// The statements that make the operator account as it must be.
#[must_use]
pub fn statements(password: &str) -> Vec<String> {
    let account = sql::account(OPERATOR_USER, "%");
    let pw = sql::string(password);
    vec![
        format!("CREATE USER IF NOT EXISTS {account} IDENTIFIED BY {pw}"),
        format!("ALTER USER {account} IDENTIFIED BY {pw}"),
        format!("GRANT ALL PRIVILEGES ON *.* TO {account} WITH GRANT OPTION"),
    ]
}

/// `rootRemote`'s first line, trimmed, says `drop`: root's network accounts go.
/// A missing or unreadable file keeps them (the older template may need them).
#[must_use]
pub fn drop_root_remote(file_text: Option<&str>) -> bool {
    file_text.and_then(|t| t.lines().next()).is_some_and(|l| l.trim() == "drop")
}

/// The statement dropping root's account at `host` (a value read from the
/// server, quoted).
#[must_use]
pub fn drop_root(host: &str) -> String {
    format!("DROP USER IF EXISTS {}", sql::account("root", host))
}

/// Can the operator log in over the network with `password`, and ask something?
fn operator_login_ok(ctx: &Context, pod: &str, password: &Secret) -> bool {
    Server::login(ctx, pod, OPERATOR_USER, password).is_ok_and(|mut s| s.value("SELECT 1").is_ok())
}

/// Writes `q` only while `s` is still the writable primary (see the module docs).
fn write_as_primary(s: &mut Server, q: &str) -> Result<bool> {
    if !s.writable()? || s.is_replica()? {
        return Ok(false);
    }
    s.exec(q)?;
    Ok(true)
}

/// The command (see the module docs).
///
/// # Errors
/// `bad-env`, `login-failed`, `sql-failed`.
pub fn run(ctx: &Context, env: &dyn Env) -> Result<Report> {
    let pod = env.var("POD_NAME").unwrap_or_default();
    if ctx.addr(&pod).is_none() {
        return Err(Failure::new("bad-env", format!("POD_NAME '{pod}' is not in PODS")));
    }
    let password = ctx.operator.clone().ok_or_else(|| Failure::new("bad-env", "OPERATOR_PASSWORD_FILE is required"))?;
    if ctx.root.is_none() {
        return Err(Failure::new("bad-env", "MYSQL_ROOT_PASSWORD_FILE is required (root logs in through the socket)"));
    }
    let socket = crate::probe::socket(env);
    let not_primary =
        || waiting(&pod, "self-read-only", format!("{pod} is not writable; the primary sets the operator account"));
    let Ok(mut s) = Server::connect_socket(ctx, &pod, &socket) else {
        return Ok(waiting(&pod, "self-unreachable", format!("{pod} does not answer on {}", socket.display())));
    };
    // One session from the check to the last write (see the module docs).
    if !s.writable()? || s.is_replica()? {
        return Ok(not_primary());
    }
    let mut changed = false;
    if !operator_login_ok(ctx, &pod, &password) {
        for q in statements(&password.0) {
            if !write_as_primary(&mut s, &q)? {
                return Ok(not_primary());
            }
        }
        if !operator_login_ok(ctx, &pod, &password) {
            return Err(Failure::new("login-failed", format!("{OPERATOR_USER} still cannot log in to {pod}")));
        }
        log(&format!("account {OPERATOR_USER}@'%' set on {pod}"));
        changed = true;
    }
    let remote = env.var("ROOT_REMOTE_FILE").and_then(|f| env.read(Path::new(&f)).ok());
    if drop_root_remote(remote.as_deref().map(String::from_utf8_lossy).as_deref()) {
        let hosts: Vec<String> = s
            .rows("SELECT host FROM mysql.user WHERE user = 'root' AND host <> 'localhost' ORDER BY host")?
            .iter()
            .filter_map(|r| text(r, 0))
            .collect();
        for host in &hosts {
            if !write_as_primary(&mut s, &drop_root(host))? {
                return Ok(not_primary());
            }
        }
        if !hosts.is_empty() {
            log(&format!("root's network accounts dropped on {pod}: root is local only"));
            changed = true;
        }
    }
    Ok(Report { pod: Some(pod), changed: Some(changed), ..Report::new("operator-user") })
}

/// A log line on stderr, as the scripts write them.
fn log(msg: &str) {
    eprintln!("operator-user: {msg}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_account_holds_everything_and_its_password_is_quoted() {
        let q = statements(r#"p'w"\#"#);
        assert_eq!(q[0], r#"CREATE USER IF NOT EXISTS 'mysqlhook'@'%' IDENTIFIED BY 'p\'w"\\#'"#);
        assert_eq!(q[1], r#"ALTER USER 'mysqlhook'@'%' IDENTIFIED BY 'p\'w"\\#'"#);
        assert_eq!(q[2], "GRANT ALL PRIVILEGES ON *.* TO 'mysqlhook'@'%' WITH GRANT OPTION");
    }

    #[test]
    fn root_remote_drops_only_on_an_exact_drop() {
        assert!(drop_root_remote(Some("drop\n")));
        assert!(drop_root_remote(Some("  drop \nkeep")));
        for keep in [None, Some(""), Some("keep\n"), Some("dropped"), Some("\ndrop")] {
            assert!(!drop_root_remote(keep), "{keep:?}");
        }
    }

    #[test]
    fn a_host_read_from_the_server_is_quoted() {
        assert_eq!(drop_root("%"), "DROP USER IF EXISTS 'root'@'%'");
        assert_eq!(drop_root("x' OR '1"), r"DROP USER IF EXISTS 'root'@'x\' OR \'1'");
    }
}

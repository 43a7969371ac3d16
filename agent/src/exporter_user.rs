//! `mysql-hook-agent exporter-user`: the `mysqld_exporter` sidecar's account,
//! `exporter@'localhost'`, with the password of the `<name>-exporter` Secret and
//! only what the exporter's default collectors need (ported from
//! `exporter-user.sh`):
//!
//! - MySQL: `PROCESS` (InnoDB tables of `information_schema`), `REPLICATION
//!   CLIENT` (`SHOW REPLICA STATUS`, `SHOW BINARY LOGS`);
//! - MariaDB: `PROCESS`, `BINLOG MONITOR` (`SHOW BINLOG STATUS`), `SLAVE MONITOR`
//!   (`SHOW SLAVE STATUS`, 10.5.9+);
//! - both: `SELECT` on `performance_schema` only (never application data), at
//!   most 3 connections; `localhost`: the server's socket only.
//!
//! Run by the agent sidecar on the pod of the primary. Nothing is written when the
//! exporter can already log in through `EXPORTER_SOCKET` (a steady cluster writes
//! nothing; a changed Secret is set again). Otherwise the account is made on this
//! server only if it is the writable primary, and the check and the writes go
//! through **one session** (issue 31.6): a fence sets the server read-only and then
//! kills every client session, so a write after a fence is refused or dies with
//! its session, never landing on a fenced old primary as an errant transaction
//! (the script checked `read_only` once and wrote over new connections). The
//! account reaches the replicas through the binary log, like `repl`.
//!
//! Environment: `POD_NAME` (a member), `EXPORTER_PASSWORD_FILE` (or
//! `EXPORTER_PASSWORD`), `EXPORTER_SOCKET`, plus the [`Context`].
//!
//! Report: `{"result":"exporter-user","pod","changed"}`; `waiting` (exit 75: not
//! writable, or not answering; the sidecar tries again next round); errors
//! `bad-env`, `login-failed`, `sql-failed`.

use std::path::Path;

use crate::{
    Failure, Report, Result,
    context::{self, Context, Env, Flavor, Secret},
    server::Server,
    sql, waiting,
};

/// The account's name; `localhost` only.
pub const USER: &str = "exporter";

/// The statements that make the account as it must be.
#[must_use]
pub fn statements(flavor: Flavor, password: &str) -> Vec<String> {
    let account = sql::account(USER, "localhost");
    let pw = sql::string(password);
    let monitor = match flavor {
        Flavor::Mysql => "PROCESS, REPLICATION CLIENT",
        Flavor::Mariadb => "PROCESS, BINLOG MONITOR, SLAVE MONITOR",
    };
    vec![
        format!("CREATE USER IF NOT EXISTS {account} IDENTIFIED BY {pw} WITH MAX_USER_CONNECTIONS 3"),
        format!("ALTER USER {account} IDENTIFIED BY {pw} WITH MAX_USER_CONNECTIONS 3"),
        format!("GRANT {monitor} ON *.* TO {account}"),
        format!("GRANT SELECT ON performance_schema.* TO {account}"),
    ]
}

/// Can the exporter log in with `password` through the socket, and ask something?
fn login_ok(ctx: &Context, pod: &str, socket: &Path, password: &Secret) -> bool {
    Server::login_socket(ctx, pod, socket, USER, password).is_ok_and(|mut s| s.value("SELECT 1").is_ok())
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
    let password = context::secret(env, "EXPORTER_PASSWORD")?
        .ok_or_else(|| Failure::new("bad-env", "EXPORTER_PASSWORD_FILE is required"))?;
    let socket = env.var("EXPORTER_SOCKET").ok_or_else(|| Failure::new("bad-env", "EXPORTER_SOCKET is required"))?;
    let socket = Path::new(&socket);
    let done =
        |changed: bool| Report { pod: Some(pod.clone()), changed: Some(changed), ..Report::new("exporter-user") };
    if login_ok(ctx, &pod, socket, &password) {
        return Ok(done(false));
    }
    let Ok(mut s) = Server::connect(ctx, &pod) else {
        return Ok(waiting(&pod, "self-unreachable", format!("{pod} does not answer")));
    };
    // One session from the check to the last write (see the module docs).
    if !s.writable()? || s.is_replica()? {
        return Ok(waiting(&pod, "self-read-only", format!("{pod} is not writable; the primary creates the account")));
    }
    for q in statements(ctx.flavor, &password.0) {
        s.exec(&q)?;
    }
    if !login_ok(ctx, &pod, socket, &password) {
        return Err(Failure::new(
            "login-failed",
            format!("the exporter still cannot log in through {}", socket.display()),
        ));
    }
    eprintln!("exporter-user: account exporter@localhost set on {pod}");
    Ok(done(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_account_is_local_least_privilege_and_its_password_quoted() {
        let q = statements(Flavor::Mariadb, r#"p'w"\#"#);
        assert_eq!(
            q[0],
            r#"CREATE USER IF NOT EXISTS 'exporter'@'localhost' IDENTIFIED BY 'p\'w"\\#' WITH MAX_USER_CONNECTIONS 3"#
        );
        assert_eq!(q[2], "GRANT PROCESS, BINLOG MONITOR, SLAVE MONITOR ON *.* TO 'exporter'@'localhost'");
        assert_eq!(
            statements(Flavor::Mysql, "x")[2],
            "GRANT PROCESS, REPLICATION CLIENT ON *.* TO 'exporter'@'localhost'"
        );
        assert!(q.iter().all(|s| !s.contains("ALL PRIVILEGES") && !s.contains("'%'")));
    }
}

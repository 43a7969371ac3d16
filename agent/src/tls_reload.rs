//! `mysql-hook-agent tls-reload`: makes the server load the certificate, key and
//! CA now in its TLS files (`spec.tls`; ported from `tls-reload.sh`, issue 32).
//!
//! The server reads them once, at start. cert-manager renews a certificate well
//! before it expires and the kubelet then replaces the mounted files, but without
//! a reload the server would go on presenting the old certificate until it
//! expired, and from then on every client that verifies (the failover and
//! switchover Jobs among them) would be refused. The agent sidecar runs this at
//! its start and whenever the mounted files change.
//!
//! It logs in as root through the server's own socket (`SERVER_SOCKET`), never
//! TCP: a verifying TCP client would check the server's old certificate against
//! the new CA, which fails exactly when a CA rotation needs the reload.
//!
//! - MySQL: `ALTER INSTANCE RELOAD TLS` (RM 15.1.5, 8.0.16+; never written to the
//!   binary log);
//! - MariaDB: `FLUSH LOCAL SSL` (KB "FLUSH", 10.4+). `LOCAL`: a `FLUSH` is
//!   otherwise written to the binary log, and on a replica that would be a
//!   transaction of its own, errant for the rest of the cluster.
//!
//! A reload that fails (a broken new certificate) leaves the server with the one
//! it had (both servers keep the old context on error), and says so.
//!
//! Report: `{"result":"reloaded"}`; errors `bad-env`, `reload-failed` (not
//! answering on the socket, or the server refused the files).

use crate::{
    Failure, Report, Result,
    context::{Context, Env, Flavor},
    server::Server,
};

/// The statement that reloads the TLS files, without a binary log event.
#[must_use]
pub fn statement(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Mysql => "ALTER INSTANCE RELOAD TLS",
        Flavor::Mariadb => "FLUSH LOCAL SSL",
    }
}

/// The command (see the module docs).
///
/// # Errors
/// `bad-env`, `reload-failed`.
pub fn run(ctx: &Context, env: &dyn Env) -> Result<Report> {
    let pod = env.var("POD_NAME").unwrap_or_else(|| "this server".to_owned());
    let socket = crate::probe::socket(env);
    let stmt = statement(ctx.flavor);
    let failed = |why: String| Failure::new("reload-failed", format!("{stmt}: {why}"));
    let mut s = Server::connect_socket(ctx, &pod, &socket).map_err(|e| failed(e.to_string()))?;
    s.exec(stmt).map_err(|f| failed(f.message))?;
    eprintln!("tls-reload: {pod} loaded its TLS files ({stmt})");
    Ok(Report::new("reloaded"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reload_never_reaches_the_binary_log() {
        assert_eq!(statement(Flavor::Mariadb), "FLUSH LOCAL SSL");
        assert_eq!(statement(Flavor::Mysql), "ALTER INSTANCE RELOAD TLS");
    }
}

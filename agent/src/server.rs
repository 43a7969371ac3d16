//! A connection to one server, and the few reads every command makes.
//!
//! Over TCP the agent logs in as the operator account (`mysqlhook@'%'`); a server
//! that refuses it (ER 1045: a cluster moving to that account, which reaches each
//! server through replication) is asked again as root while root's password is
//! given. With TLS mode `verify` every TCP connection uses TLS and checks the
//! server's certificate against the CA and the host name connected to. Over the
//! local socket the agent logs in as root (`root@'localhost'`).
//!
//! Every session clears `NO_BACKSLASH_ESCAPES` from its `sql_mode`, which the
//! quoting of [`crate::sql`] relies on.

use std::{path::Path, time::Duration};

use mysql::{Conn, OptsBuilder, Row, SslOpts, prelude::Queryable};

use crate::{
    Failure, Result,
    context::{Addr, Context, Flavor, OPERATOR_USER, Secret},
};

/// ER_ACCESS_DENIED_ERROR: the account or its password is not known there.
const ER_ACCESS_DENIED: u16 = 1045;

/// One open session.
pub struct Server {
    conn: Conn,
    pub name: String,
    pub flavor: Flavor,
}

/// Why a connection failed: the server refused the login, or did not answer.
#[derive(Debug)]
pub enum ConnectError {
    Refused(String),
    Unreachable(String),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Refused(m) | Self::Unreachable(m) => f.write_str(m),
        }
    }
}

impl Server {
    /// A TCP session with member `pod` (see the module docs for the account).
    ///
    /// # Errors
    /// `bad-env` when `pod` is not a member; otherwise why it could not connect.
    pub fn connect(ctx: &Context, pod: &str) -> std::result::Result<Self, ConnectError> {
        let addr = ctx.addr(pod).ok_or_else(|| ConnectError::Refused(format!("{pod} is not in PODS")))?;
        Self::connect_tcp(ctx, pod, addr, true)
    }

    /// A TCP session with whichever server `addr` leads to (a Service), named
    /// `label`, logged in as [`Self::connect`] does. With TLS mode `verify` the
    /// certificate must chain to the CA, but need not name `addr`: a Service's
    /// name is in no server's certificate, and which of the servers answered is
    /// what the caller asks it.
    ///
    /// # Errors
    /// Why it could not connect.
    pub fn connect_via(ctx: &Context, label: &str, addr: &Addr) -> std::result::Result<Self, ConnectError> {
        Self::connect_tcp(ctx, label, addr, false)
    }

    fn connect_tcp(ctx: &Context, pod: &str, addr: &Addr, check_name: bool) -> std::result::Result<Self, ConnectError> {
        let tcp = |ctx: &Context, addr: &Addr| tcp(ctx, addr, check_name);
        let (user, password) = match (&ctx.operator, &ctx.root) {
            (Some(op), _) => (OPERATOR_USER, op),
            (None, Some(root)) => ("root", root),
            (None, None) => return Err(ConnectError::Refused("no password to log in with".to_owned())),
        };
        match Self::open(ctx, pod, tcp(ctx, addr), user, password) {
            Err(ConnectError::Refused(m)) if user == OPERATOR_USER && ctx.root.is_some() => {
                let root = ctx.root.as_ref().map_or(password, |r| r);
                Self::open(ctx, pod, tcp(ctx, addr), "root", root).map_err(|e| match e {
                    ConnectError::Refused(r) => ConnectError::Refused(format!("{m}; as root: {r}")),
                    other => other,
                })
            }
            other => other,
        }
    }

    /// A TCP session with member `pod` as `user` with `password`: no fallback to
    /// another account (a check that this very login works).
    ///
    /// # Errors
    /// `Refused` for a wrong account or password, else why it could not connect.
    pub fn login(ctx: &Context, pod: &str, user: &str, password: &Secret) -> std::result::Result<Self, ConnectError> {
        let addr = ctx.addr(pod).ok_or_else(|| ConnectError::Refused(format!("{pod} is not in PODS")))?;
        Self::open(ctx, pod, tcp(ctx, addr, true), user, password)
    }

    /// A session over the server's own socket, as root (`root@'localhost'`).
    ///
    /// # Errors
    /// Why it could not connect.
    pub fn connect_socket(ctx: &Context, pod: &str, socket: &Path) -> std::result::Result<Self, ConnectError> {
        let Some(root) = &ctx.root else {
            return Err(ConnectError::Refused("no root password for the socket".to_owned()));
        };
        Self::login_socket(ctx, pod, socket, "root", root)
    }

    /// A session over the server's socket as `user@'localhost'` with `password`.
    ///
    /// # Errors
    /// Why it could not connect (`Refused` for a wrong password).
    pub fn login_socket(
        ctx: &Context,
        pod: &str,
        socket: &Path,
        user: &str,
        password: &Secret,
    ) -> std::result::Result<Self, ConnectError> {
        let opts = OptsBuilder::new()
            .socket(Some(socket.to_string_lossy().into_owned()))
            .prefer_socket(true)
            .tcp_connect_timeout(Some(ctx.connect_timeout))
            .read_timeout(Some(ctx.query_timeout))
            .write_timeout(Some(ctx.query_timeout));
        Self::open(ctx, pod, opts, user, password)
    }

    fn open(
        ctx: &Context,
        pod: &str,
        opts: OptsBuilder,
        user: &str,
        password: &Secret,
    ) -> std::result::Result<Self, ConnectError> {
        let opts = opts.user(Some(user)).pass(Some(password.0.clone())).init(vec![
            // The quoting of crate::sql needs backslash escapes.
            "SET SESSION sql_mode = REPLACE(@@SESSION.sql_mode, 'NO_BACKSLASH_ESCAPES', '')",
        ]);
        match Conn::new(opts) {
            Ok(conn) => Ok(Self { conn, name: pod.to_owned(), flavor: ctx.flavor }),
            Err(mysql::Error::MySqlError(e)) if e.code == ER_ACCESS_DENIED => {
                Err(ConnectError::Refused(format!("{pod}: {user}: {}", e.message)))
            }
            // MySQL answers a login for an account it does not have with a switch
            // to `sha256_password` (so that a client cannot tell which accounts
            // exist), a plugin this client does not speak and no account of ours
            // uses: the server answered and refused this account. Counted as
            // unreachable, it kept the agent from logging in as root on a server
            // that has no operator account yet (seen on MySQL 9.7).
            Err(mysql::Error::DriverError(mysql::DriverError::UnknownAuthPlugin(plugin))) => {
                Err(ConnectError::Refused(format!(
                    "{pod}: {user}: the server asked for the {plugin} plugin, which no account of ours uses: no such account"
                )))
            }
            Err(e) => Err(ConnectError::Unreachable(format!("{pod}: {e}"))),
        }
    }

    /// The session itself, for a caller that streams a large result
    /// ([`crate::relay`]).
    pub(crate) fn conn(&mut self) -> &mut Conn {
        &mut self.conn
    }

    /// Rows of a query.
    ///
    /// # Errors
    /// The server's error, as `sql-failed` naming the server.
    pub fn rows(&mut self, q: &str) -> Result<Vec<Row>> {
        self.conn.query::<Row, _>(q).map_err(|e| self.failed(&e))
    }

    /// Runs statements, discarding what they return.
    ///
    /// # Errors
    /// The server's error, as `sql-failed` naming the server.
    pub fn exec(&mut self, q: &str) -> Result<()> {
        self.conn.query_drop(q).map_err(|e| self.failed(&e))
    }

    /// The first column of the first row, as text (`None`: no row, or NULL).
    ///
    /// # Errors
    /// The server's error.
    pub fn value(&mut self, q: &str) -> Result<Option<String>> {
        let rows = self.rows(q)?;
        Ok(rows.first().and_then(|r| text(r, 0)))
    }

    /// `@@global.read_only` is OFF: applications may write.
    ///
    /// # Errors
    /// The server's error, or an answer that is not 0 or 1.
    pub fn writable(&mut self) -> Result<bool> {
        match self.value("SELECT @@global.read_only")?.as_deref() {
            Some("0") => Ok(true),
            Some("1") => Ok(false),
            other => Err(Failure::new("sql-failed", format!("{}: read_only is {other:?}", self.name))),
        }
    }

    /// The server replicates from a source (a replica status row exists).
    ///
    /// # Errors
    /// The server's error.
    pub fn is_replica(&mut self) -> Result<bool> {
        let q = match self.flavor {
            Flavor::Mysql => "SHOW REPLICA STATUS",
            Flavor::Mariadb => "SHOW SLAVE STATUS",
        };
        Ok(!self.rows(q)?.is_empty())
    }

    fn failed(&self, e: &mysql::Error) -> Failure {
        Failure::new("sql-failed", format!("{}: {e}", self.name))
    }
}

/// A column of a row as text (`None` for NULL or a missing column).
#[must_use]
pub fn text(row: &Row, i: usize) -> Option<String> {
    match row.as_ref(i)? {
        mysql::Value::NULL => None,
        mysql::Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        other => Some(other.as_sql(true).trim_matches('\'').to_owned()),
    }
}

/// Options for a TCP session with `addr`; with TLS mode `verify`, the
/// certificate must chain to the CA and, when `check_name`, name `addr`'s host.
fn tcp(ctx: &Context, addr: &Addr, check_name: bool) -> OptsBuilder {
    let mut opts = OptsBuilder::new()
        .ip_or_hostname(Some(addr.host.clone()))
        .tcp_port(addr.port)
        .prefer_socket(false)
        .tcp_connect_timeout(Some(ctx.connect_timeout))
        .read_timeout(Some(ctx.query_timeout))
        .write_timeout(Some(ctx.query_timeout));
    if let Some(ca) = &ctx.tls_ca {
        opts = opts.ssl_opts(
            SslOpts::default().with_root_cert_path(Some(ca.clone())).with_danger_skip_domain_validation(!check_name),
        );
    }
    opts
}

/// Waits until `pod` answers, at most `within`.
///
/// # Errors
/// The last reason it did not answer.
pub fn wait_connect(ctx: &Context, pod: &str, within: Duration) -> std::result::Result<Server, ConnectError> {
    let deadline = std::time::Instant::now() + within;
    loop {
        match Server::connect(ctx, pod) {
            Ok(s) => return Ok(s),
            Err(e) if std::time::Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_secs(1)),
        }
    }
}

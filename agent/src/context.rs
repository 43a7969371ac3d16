//! What every agent command is given: its environment, read once and checked.
//!
//! The names are those the shell scripts read (hooks/scripts/README.md), so the
//! hook emits the same pods and Jobs for an agent command as for a script: the
//! members (`PODS`, or `PODS_FILE` in server pods, where the ConfigMap follows
//! scaling), the flavor, the credentials as files of the mounted Secret (never
//! the environment: an environment is inherited by every process and readable in
//! `/proc/<pid>/environ`), and the TLS mode.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{Failure, Result};

/// The server flavor: the statements and names that differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Mysql,
    Mariadb,
}

impl Flavor {
    /// The flavor `FLAVOR` names, for a command that needs no other setting (the
    /// [`Context`] reads it the same way).
    ///
    /// # Errors
    /// `bad-env` unless it is `mysql` or `mariadb`.
    pub fn from_env(env: &dyn Env) -> Result<Self> {
        match env.var("FLAVOR").as_deref() {
            Some("mysql") => Ok(Self::Mysql),
            Some("mariadb") => Ok(Self::Mariadb),
            other => Err(bad_env(format!("FLAVOR must be mysql or mariadb (got {:?})", other.unwrap_or("")))),
        }
    }
}

/// A member's address, `host:port` (`[v6]:port` too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addr {
    pub host: String,
    pub port: u16,
}

/// A password: exact bytes of its file, as text (the client protocol takes text).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// The environment of one command.
#[derive(Debug, Clone)]
pub struct Context {
    pub flavor: Flavor,
    /// Members by name, in ordinal order.
    pub pods: Vec<(String, Addr)>,
    /// The operator account's password (`mysqlhook@'%'`); without it (a cluster
    /// made before that account) commands log in as root over the network.
    pub operator: Option<Secret>,
    /// Root's password: for the local socket, and for the network only while a
    /// cluster moves to the operator account.
    pub root: Option<Secret>,
    pub replication: Option<Secret>,
    /// TLS mode `verify`: the CA every server's certificate must chain to.
    pub tls_ca: Option<PathBuf>,
    /// `PRIMARY_SERVICE`: the address clients write through (the `-primary`
    /// Service), `host:port`; server pods only ([`crate::stranded`]).
    pub primary_service: Option<Addr>,
    pub connect_timeout: Duration,
    pub query_timeout: Duration,
}

/// The operator account's name.
pub const OPERATOR_USER: &str = "mysqlhook";

/// Reads the environment (see the module docs); anything malformed is `bad-env`.
pub trait Env: Send + Sync {
    fn var(&self, name: &str) -> Option<String>;
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>>;
}

/// Writes `line` as the container's termination log (`TERMINATION_LOG`, default
/// `/dev/termination-log`), where the hook reads a Job pod's result as it reads a
/// script's. `who` names the writer in the warning when it cannot.
pub fn write_termination_log(env: &dyn Env, who: &str, line: &str) {
    let log = env.var("TERMINATION_LOG").unwrap_or_else(|| "/dev/termination-log".to_owned());
    if let Err(e) = std::fs::write(&log, format!("{line}\n")) {
        eprintln!("{who}: cannot write {log}: {e}");
    }
}

/// The process's own environment and file system.
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        std::fs::read(path)
    }
}

fn bad_env(message: impl Into<String>) -> Failure {
    Failure::new("bad-env", message)
}

/// The password `name`: the exact bytes of the file `<name>_FILE` names (a mounted
/// Secret key), else the variable `name` itself (tests, by hand); `None` when
/// neither says one.
///
/// # Errors
/// `bad-env` for a file that cannot be read or is not UTF-8.
pub fn secret(env: &dyn Env, name: &str) -> Result<Option<Secret>> {
    if let Some(file) = env.var(&format!("{name}_FILE")) {
        let bytes = env.read(Path::new(&file)).map_err(|e| bad_env(format!("{name}_FILE: {file}: {e}")))?;
        let text = String::from_utf8(bytes).map_err(|_| bad_env(format!("{name}_FILE: {file} is not UTF-8")))?;
        return Ok(Some(Secret(text)).filter(|s| !s.0.is_empty()));
    }
    Ok(env.var(name).map(Secret))
}

impl Context {
    /// # Errors
    /// `bad-env` for a missing or malformed setting.
    pub fn from_env(env: &dyn Env) -> Result<Self> {
        let flavor = Flavor::from_env(env)?;
        let mut list = env.var("PODS").unwrap_or_default();
        if let Some(file) = env.var("PODS_FILE")
            && let Ok(bytes) = env.read(Path::new(&file))
        {
            list = String::from_utf8_lossy(&bytes).into_owned();
        }
        let mut pods = parse_pods(&list)?;
        if let (Some(name), Some(host)) = (env.var("POD_NAME"), env.var("POD_HOST"))
            && !pods.iter().any(|(n, _)| *n == name)
        {
            let addr = parse_addr(&host).ok_or_else(|| bad_env(format!("POD_HOST '{host}' is not host:port")))?;
            pods.push((name, addr));
        }
        if pods.is_empty() {
            return Err(bad_env("PODS is empty"));
        }
        let secret = |name: &str| secret(env, name);
        let operator = secret("OPERATOR_PASSWORD")?;
        let root = secret("MYSQL_ROOT_PASSWORD")?;
        let replication = secret("REPLICATION_PASSWORD")?;
        if operator.is_none() && root.is_none() {
            return Err(bad_env("neither OPERATOR_PASSWORD_FILE nor MYSQL_ROOT_PASSWORD_FILE names a password"));
        }
        let mut mode = env.var("TLS_MODE").unwrap_or_default();
        if let Some(file) = env.var("TLS_MODE_FILE")
            && let Ok(bytes) = env.read(Path::new(&file))
        {
            mode = String::from_utf8_lossy(&bytes).lines().next().unwrap_or_default().to_owned();
        }
        let tls_ca = match mode.trim() {
            "" => None,
            "verify" => Some(PathBuf::from(env.var("TLS_CA").unwrap_or_else(|| "/etc/mysql/tls/ca.crt".to_owned()))),
            other => {
                return Err(bad_env(format!(
                    "TLS mode '{other}' (TLS_MODE or TLS_MODE_FILE) must be 'verify' or empty"
                )));
            }
        };
        let primary_service = match env.var("PRIMARY_SERVICE") {
            None => None,
            Some(a) => Some(parse_addr(&a).ok_or_else(|| bad_env(format!("PRIMARY_SERVICE '{a}' is not host:port")))?),
        };
        let seconds = |name: &str, default: u64| -> Result<Duration> {
            match env.var(name) {
                None => Ok(Duration::from_secs(default)),
                // Fractions are allowed (the scripts' `timeout` takes them: `0.3`).
                Some(v) => v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| v.bytes().all(|b| b.is_ascii_digit() || b == b'.') && (0.001..=86_400.0).contains(s))
                    .map(Duration::from_secs_f64)
                    .ok_or_else(|| bad_env(format!("{name} '{v}' is not a number of seconds"))),
            }
        };
        Ok(Self {
            flavor,
            pods,
            operator,
            root,
            replication,
            tls_ca,
            primary_service,
            connect_timeout: seconds("CONNECT_TIMEOUT", 5)?,
            query_timeout: seconds("QUERY_TIMEOUT", 60)?,
        })
    }

    /// A member's address.
    #[must_use]
    pub fn addr(&self, pod: &str) -> Option<&Addr> {
        self.pods.iter().find(|(n, _)| n == pod).map(|(_, a)| a)
    }

    /// The member with that address (as a replica's source names it).
    #[must_use]
    pub fn member_at(&self, host: &str, port: u16) -> Option<&str> {
        self.pods.iter().find(|(_, a)| a.host == host && a.port == port).map(|(n, _)| n.as_str())
    }

    /// The member names, in ordinal order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.pods.iter().map(|(n, _)| n.as_str())
    }
}

/// `name=host:port ...` (whitespace separated), in the order given.
///
/// # Errors
/// `bad-env` for an entry of another shape or a name given twice.
pub fn parse_pods(list: &str) -> Result<Vec<(String, Addr)>> {
    let mut out: Vec<(String, Addr)> = Vec::new();
    let mut seen = BTreeMap::new();
    for entry in list.split_ascii_whitespace() {
        let parsed = entry.split_once('=').and_then(|(n, a)| Some((n, parse_addr(a)?)));
        let Some((name, addr)) = parsed.filter(|(n, _)| is_pod_name(n)) else {
            return Err(bad_env(format!("PODS entry '{entry}' is not name=host:port")));
        };
        if seen.insert(name.to_owned(), ()).is_some() {
            return Err(bad_env(format!("PODS names {name} twice")));
        }
        out.push((name.to_owned(), addr));
    }
    Ok(out)
}

fn is_pod_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 253
        && n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

fn parse_addr(a: &str) -> Option<Addr> {
    let (host, port) = a.rsplit_once(':')?;
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    let port = port.parse::<u16>().ok().filter(|p| *p > 0)?;
    let ok = !host.is_empty() && host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:_".contains(&b));
    ok.then(|| Addr { host: host.to_owned(), port })
}

/// The ordinal of a StatefulSet pod name: the digits after the last `-`.
#[must_use]
pub fn ordinal(pod: &str) -> Option<u32> {
    pod.rsplit_once('-').and_then(|(_, n)| n.parse().ok())
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// An environment given as a map, files included.
    #[derive(Default)]
    pub struct MapEnv {
        pub vars: BTreeMap<String, String>,
        pub files: BTreeMap<PathBuf, Vec<u8>>,
    }

    impl Env for MapEnv {
        fn var(&self, name: &str) -> Option<String> {
            self.vars.get(name).cloned().filter(|v| !v.is_empty())
        }
        fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
            self.files.get(path).cloned().ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        }
    }

    pub fn env(vars: &[(&str, &str)]) -> MapEnv {
        MapEnv { vars: vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(), ..MapEnv::default() }
    }

    #[test]
    fn pods_keep_their_order_and_take_v6() {
        let pods = parse_pods("db-0=127.0.0.1:9 db-1=[::1]:3307 db-2=db-2.db.ns.svc:3306").unwrap_or_default();
        let names: Vec<_> = pods.iter().map(|(n, a)| (n.as_str(), a.host.as_str(), a.port)).collect();
        assert_eq!(names, [("db-0", "127.0.0.1", 9), ("db-1", "::1", 3307), ("db-2", "db-2.db.ns.svc", 3306)]);
        for bad in ["db-0", "db-0=host", "db-0=h:0", "x;y=h:1", "db-0=h:1 db-0=h:2", "db-0=$(x):1"] {
            assert!(parse_pods(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn passwords_come_from_files_exactly() {
        let mut e = env(&[("FLAVOR", "mysql"), ("PODS", "db-0=h:1"), ("OPERATOR_PASSWORD_FILE", "/s/op")]);
        e.files.insert("/s/op".into(), b"p w'\n\n".to_vec());
        let c = Context::from_env(&e).map_err(|f| f.message).unwrap_or_else(|m| panic!("{m}"));
        assert_eq!(c.operator, Some(Secret("p w'\n\n".to_owned())));
        assert_eq!(c.root, None);
        assert_eq!(c.flavor, Flavor::Mysql);
    }

    #[test]
    fn bad_settings_are_named() {
        let reason = |vars: &[(&str, &str)]| Context::from_env(&env(vars)).err().map(|f| f.message);
        assert!(reason(&[("FLAVOR", "oracle")]).is_some_and(|m| m.contains("FLAVOR")));
        assert!(reason(&[("FLAVOR", "mysql"), ("PODS", "db-0=h:1")]).is_some_and(|m| m.contains("password")));
        assert!(
            reason(&[("FLAVOR", "mysql"), ("PODS", "db-0=h:1"), ("MYSQL_ROOT_PASSWORD", "x"), ("TLS_MODE", "on")])
                .is_some_and(|m| m.contains("verify"))
        );
        assert!(
            reason(&[
                ("FLAVOR", "mysql"),
                ("PODS", "db-0=h:1"),
                ("MYSQL_ROOT_PASSWORD", "x"),
                ("QUERY_TIMEOUT", "1+1")
            ])
            .is_some_and(|m| m.contains("QUERY_TIMEOUT"))
        );
        for bad in ["0", "-1", "1e3", "inf", "NaN", "0.0001", "86401"] {
            let env = [("FLAVOR", "mysql"), ("PODS", "db-0=h:1"), ("MYSQL_ROOT_PASSWORD", "x"), ("QUERY_TIMEOUT", bad)];
            assert!(reason(&env).is_some_and(|m| m.contains("QUERY_TIMEOUT")), "{bad}");
        }
        let env = [("FLAVOR", "mysql"), ("PODS", "db-0=h:1"), ("MYSQL_ROOT_PASSWORD", "x"), ("QUERY_TIMEOUT", "0.3")];
        assert_eq!(reason(&env), None, "a fraction of a second");
        let base = [("FLAVOR", "mysql"), ("PODS", "db-0=h:1"), ("MYSQL_ROOT_PASSWORD", "x")];
        for bad in ["db-primary.ns.svc", "db-primary:0", "$(x):3306"] {
            let env = [base.as_slice(), &[("PRIMARY_SERVICE", bad)]].concat();
            assert!(reason(&env).is_some_and(|m| m.contains("PRIMARY_SERVICE")), "{bad:?}");
        }
        let env = [base.as_slice(), &[("PRIMARY_SERVICE", "db-primary.ns.svc:3306")]].concat();
        let c = Context::from_env(&super::tests::env(&env)).map_err(|f| f.message).unwrap_or_else(|m| panic!("{m}"));
        assert_eq!(c.primary_service, Some(Addr { host: "db-primary.ns.svc".to_owned(), port: 3306 }));
    }
}

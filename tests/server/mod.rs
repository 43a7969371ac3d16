//! Runs the built `mysql-hook` binary on a loopback port and talks HTTP/1.1 to it
//! over plain sockets (or rustls), for the tests that need a real process:
//! signals, overload, logs, TLS.

#![allow(dead_code)]

use std::{
    fs,
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::Arc,
    thread,
    time::{Duration, Instant},
};

pub struct Server {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
}

/// A port free right now on 127.0.0.1.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    l.local_addr().unwrap_or_else(|e| panic!("{e}")).port()
}

/// A scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mysql-hook-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    dir
}

impl Server {
    /// Starts the binary with `args` (plus `--listen`), stderr to `log`, and waits
    /// until `/healthz` answers (plain HTTP unless `tls` is given).
    pub fn start(name: &str, args: &[&str], envs: &[(&str, &str)], tls: Option<&Tls>) -> Self {
        let port = free_port();
        let log = scratch(name).join("stderr.log");
        let file = fs::File::create(&log).unwrap_or_else(|e| panic!("{e}"));
        let child = Command::new(env!("CARGO_BIN_EXE_mysql-hook"))
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .args(args)
            .envs(envs.iter().copied())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning mysql-hook: {e}"));
        let mut server = Self { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(r) = server.try_request("GET", "/healthz", &[], b"", tls) {
                if r.status == 200 {
                    return server;
                }
            }
            let exited = server.child.try_wait().ok().flatten().is_some();
            assert!(!exited && Instant::now() < deadline, "mysql-hook did not come up:\n{}", server.logs());
            thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn logs(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).unwrap_or_else(|e| panic!("{e}"));
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap_or_else(|e| panic!("{e}"));
        s
    }

    pub fn try_request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        tls: Option<&Tls>,
    ) -> std::io::Result<Response> {
        let stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let raw = raw_request(method, path, headers, body);
        let bytes = match tls {
            Some(t) => t.exchange(stream, &raw)?,
            None => exchange(stream, &raw)?,
        };
        Ok(Response::parse(&bytes))
    }

    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
        self.try_request(method, path, headers, body, None).unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    pub fn post_json(&self, path: &str, body: &[u8]) -> Response {
        self.request("POST", path, &[("content-type", "application/json")], body)
    }

    /// Sends `signal` (e.g. "TERM") with kill(1).
    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{signal} failed");
    }

    /// Waits for the process to exit, at most `timeout`; its exit code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// The peak resident memory of the process (VmHWM), in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        let status = fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn raw_request(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n");
    for (k, v) in headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    raw.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    let mut raw = raw.into_bytes();
    raw.extend_from_slice(body);
    raw
}

fn exchange(mut stream: TcpStream, raw: &[u8]) -> std::io::Result<Vec<u8>> {
    stream.write_all(raw)?;
    let mut out = Vec::new();
    stream.read_to_end(&mut out)?;
    Ok(out)
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn parse(bytes: &[u8]) -> Self {
        let split = bytes.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(bytes.len());
        let head = String::from_utf8_lossy(&bytes[..split]).into_owned();
        let mut lines = head.lines();
        let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let body = bytes.get(split + 4..).unwrap_or_default().to_vec();
        Self { status, headers, body }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A TLS client that trusts only `tests/tls/ca.pem`.
pub struct Tls {
    config: Arc<rustls::ClientConfig>,
}

impl Tls {
    pub fn new() -> Self {
        use rustls::pki_types::{CertificateDer, pem::PemObject};
        let ca = fixture_path("tests/tls/ca.pem");
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(&ca).unwrap_or_else(|e| panic!("{e}")) {
            roots.add(cert.unwrap_or_else(|e| panic!("{e}"))).unwrap_or_else(|e| panic!("{e}"));
        }
        let mut config =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap_or_else(|e| panic!("{e}"))
                .with_root_certificates(roots)
                .with_no_client_auth();
        // Every connection a full handshake: a resumed session would show the old certificate.
        config.resumption = rustls::client::Resumption::disabled();
        Self { config: Arc::new(config) }
    }

    /// One request over TLS; also returns nothing of the certificate (see `peer_subject`).
    pub fn exchange(&self, stream: TcpStream, raw: &[u8]) -> std::io::Result<Vec<u8>> {
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap_or_else(|e| panic!("{e}"));
        let conn = rustls::ClientConnection::new(Arc::clone(&self.config), name).map_err(std::io::Error::other)?;
        let mut tls = rustls::StreamOwned::new(conn, stream);
        tls.write_all(raw)?;
        let mut out = Vec::new();
        match tls.read_to_end(&mut out) {
            Ok(_) => Ok(out),
            // actix closes without close_notify sometimes; what arrived is complete.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !out.is_empty() => Ok(out),
            Err(e) => Err(e),
        }
    }

    /// The DER of the leaf certificate the server presents now.
    pub fn peer_certificate(&self, port: u16) -> Vec<u8> {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap_or_else(|e| panic!("{e}"));
        let conn = rustls::ClientConnection::new(Arc::clone(&self.config), name).unwrap_or_else(|e| panic!("{e}"));
        let mut tls = rustls::StreamOwned::new(conn, stream);
        tls.write_all(&raw_request("GET", "/healthz", &[], b"")).unwrap_or_else(|e| panic!("{e}"));
        let mut out = Vec::new();
        let _ = tls.read_to_end(&mut out);
        tls.conn.peer_certificates().and_then(|c| c.first()).map(|c| c.to_vec()).unwrap_or_default()
    }
}

pub fn fixture_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative)
}

pub fn fixture(relative: &str) -> Vec<u8> {
    fs::read(fixture_path(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

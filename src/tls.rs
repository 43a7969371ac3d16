//! Optional TLS serving, with the certificate and key re-read when their files
//! change.
//!
//! cert-manager (or any tool writing a `kubernetes.io/tls` Secret) renews the
//! certificate in place; the Secret volume's files change under the running
//! process. Each handshake checks the files' modification times (at most once a
//! second) and loads the new pair; a pair that does not load (a half-written
//! rotation, a key that does not match) is logged and the last good one is kept.

use std::{
    fmt, fs,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use rustls::{
    ServerConfig,
    crypto::ring,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::{ClientHello, ResolvesServerCert},
    sign::CertifiedKey,
};

/// How often the files are looked at, at most.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Serves the certificate in `cert` with the key in `key`, reloading both on change.
pub struct ReloadingCert {
    cert: PathBuf,
    key: PathBuf,
    state: Mutex<Loaded>,
}

struct Loaded {
    checked: Instant,
    stamps: (Option<SystemTime>, Option<SystemTime>),
    certified: Arc<CertifiedKey>,
}

impl fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadingCert").field("cert", &self.cert).field("key", &self.key).finish_non_exhaustive()
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn load(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| format!("{}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("{}: no certificate", cert.display()));
    }
    // The key's content never goes into the message.
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
    let provider = ring::default_provider();
    let certified = CertifiedKey::from_der(chain, key_der, &provider)
        .map_err(|e| format!("{} and {}: {e}", cert.display(), key.display()))?;
    Ok(Arc::new(certified))
}

impl ReloadingCert {
    /// Loads the pair once; failing to is an error at start.
    ///
    /// # Errors
    /// When either file cannot be read or parsed, or the key does not match.
    pub fn load(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Result<Self, String> {
        let (cert, key) = (cert.into(), key.into());
        let stamps = (modified(&cert), modified(&key));
        let certified = load(&cert, &key)?;
        Ok(Self { cert, key, state: Mutex::new(Loaded { checked: Instant::now(), stamps, certified }) })
    }

    /// The pair to present now, reloaded first if the files changed.
    fn current(&self) -> Arc<CertifiedKey> {
        let mut state = match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if state.checked.elapsed() >= CHECK_EVERY {
            state.checked = Instant::now();
            let stamps = (modified(&self.cert), modified(&self.key));
            if stamps != state.stamps {
                match load(&self.cert, &self.key) {
                    Ok(certified) => {
                        state.certified = certified;
                        state.stamps = stamps;
                        tracing::info!(cert = %self.cert.display(), "TLS certificate reloaded");
                    }
                    Err(e) => tracing::warn!(error = %e, "TLS files changed but do not load; keeping the last pair"),
                }
            }
        }
        Arc::clone(&state.certified)
    }

    /// A server configuration (TLS 1.2 and 1.3, ring) presenting this pair.
    ///
    /// # Errors
    /// If the crypto provider refuses the default protocol versions (not expected).
    pub fn server_config(self) -> Result<ServerConfig, String> {
        // actix-web adds the ALPN protocols (h2, http/1.1) itself.
        Ok(ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(self)))
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

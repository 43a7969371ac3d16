//! Optional bearer-token check for the hook endpoints and `/metrics`.
//!
//! Metacontroller (v4.16 and newer) can send `Authorization: Bearer <token>` with
//! every hook call (`webhook.authorization.secretRef` in the CompositeController).
//! The hook reads the same token from a file, normally the same Secret mounted as a
//! volume, and re-reads it whenever the file changes (Kubernetes swaps a Secret
//! volume's files atomically when the Secret is updated), so a token can be rotated
//! without a restart. If a later read fails, the last good token stays in force:
//! failing closed would stop every reconciliation, failing open would drop the
//! check.
//!
//! Tokens are compared as SHA-256 digests with a constant-time equality, so the
//! time taken reveals neither a prefix nor the length of the expected token.
//! `/healthz` and `/readyz` are never checked: the kubelet sends no token.

use std::{
    fs,
    path::{Path, PathBuf},
    sync::Mutex,
    time::SystemTime,
};

use sha2::{Digest, Sha256};

/// The expected token, as read from its file.
#[derive(Debug)]
pub struct TokenFile {
    path: PathBuf,
    cached: Mutex<Cached>,
}

#[derive(Debug, Clone)]
struct Cached {
    stamp: Stamp,
    digest: [u8; 32],
}

/// What tells that a file changed: modification time and length.
type Stamp = (Option<SystemTime>, u64);

fn stamp(path: &Path) -> std::io::Result<Stamp> {
    let m = fs::metadata(path)?;
    Ok((m.modified().ok(), m.len()))
}

fn read_token(path: &Path) -> Result<(Stamp, [u8; 32]), String> {
    let stamp = stamp(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let bytes = fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let token = bytes.trim_ascii();
    if token.is_empty() {
        return Err(format!("{}: the bearer token file is empty", path.display()));
    }
    Ok((stamp, digest(token)))
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Equality whose time does not depend on where the inputs differ.
fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl TokenFile {
    /// Reads the token once; a missing, unreadable or empty file is an error at start.
    ///
    /// # Errors
    /// When the file cannot be read or holds only whitespace.
    pub fn load(path: impl Into<PathBuf>) -> Result<Self, String> {
        let path = path.into();
        let (stamp, digest) = read_token(&path)?;
        Ok(Self { path, cached: Mutex::new(Cached { stamp, digest }) })
    }

    /// The expected token's digest, re-read first if the file changed.
    fn current(&self) -> [u8; 32] {
        let mut cached = match self.cached.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if stamp(&self.path).ok().is_some_and(|s| s != cached.stamp) {
            match read_token(&self.path) {
                Ok((stamp, digest)) => {
                    *cached = Cached { stamp, digest };
                    tracing::info!(path = %self.path.display(), "bearer token reloaded");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "bearer token file changed but cannot be read; keeping the last one")
                }
            }
        }
        cached.digest
    }

    /// Whether an `Authorization` header value carries the expected bearer token.
    #[must_use]
    pub fn accepts(&self, authorization: Option<&[u8]>) -> bool {
        let Some(value) = authorization else { return false };
        let Some((scheme, token)) = value.trim_ascii().split_at_checked(7) else { return false };
        if !scheme.eq_ignore_ascii_case(b"bearer ") {
            return false;
        }
        let token = token.trim_ascii();
        !token.is_empty() && constant_time_eq(&digest(token), &self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mysql-hook-auth-{}-{name}", std::process::id()));
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let path = dir.join("token");
        fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
        path
    }

    #[test]
    fn accepts_only_the_bearer_token() {
        let t = TokenFile::load(temp_file("accepts", "s3cret\n")).unwrap_or_else(|e| panic!("{e}"));
        assert!(t.accepts(Some(b"Bearer s3cret")));
        assert!(t.accepts(Some(b"bearer s3cret ")));
        for bad in [&b"Bearer s3cre"[..], b"Bearer s3cret2", b"Basic s3cret", b"s3cret", b"Bearer ", b""] {
            assert!(!t.accepts(Some(bad)), "{}", String::from_utf8_lossy(bad));
        }
        assert!(!t.accepts(None));
    }

    #[test]
    fn rereads_a_changed_file_and_keeps_the_last_good_token() {
        let path = temp_file("reload", "first");
        let t = TokenFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(t.accepts(Some(b"Bearer first")));
        fs::write(&path, "second-token").unwrap_or_else(|e| panic!("{e}"));
        assert!(t.accepts(Some(b"Bearer second-token")));
        assert!(!t.accepts(Some(b"Bearer first")));
        fs::write(&path, "  \n").unwrap_or_else(|e| panic!("{e}"));
        assert!(t.accepts(Some(b"Bearer second-token")), "an empty file keeps the last token");
    }

    #[test]
    fn an_empty_file_is_refused_at_start() {
        assert!(TokenFile::load(temp_file("empty", "\n")).is_err());
        assert!(TokenFile::load("/nonexistent/mysql-hook-token").is_err());
    }
}

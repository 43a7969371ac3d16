//! The cluster's generated passwords.
//!
//! The core may not read entropy itself, so passwords are derived: HMAC-SHA256 of
//! the parent's UID under [`Context::entropy`](crate::Context::entropy), fresh
//! randomness the HTTP shell draws for every request. The same request and
//! entropy always give the same bytes (the golden tests pin both), and nobody can
//! predict them: an earlier design keyed them by a per-process or file seed, which
//! made every hook replica a password oracle for anyone who could POST a made-up
//! sync with a victim's (public) uid. Once the Secret exists its values are read
//! back and kept (its child resource is never updated, `OnDelete`), so a new
//! draw never rotates a password.

use std::collections::BTreeMap;

use hmac::{Hmac, Mac};
use k8s_openapi::ByteString;
use sha2::Sha256;

pub const ROOT_PASSWORD: &str = "root-password";
pub const REPLICATION_PASSWORD: &str = "replication-password";
/// The operator account's password (`mysqlhook@'%'`, the scripts' only network
/// account: root is local only). Optional: a Secret made before it existed, or a
/// user's own without it, keeps the scripts logging in as root over the network
/// (see [`crate::model::Cluster::operator_account`]).
pub const OPERATOR_PASSWORD: &str = "operator-password";

/// Keys every credentials Secret has.
pub const KEYS: [&str; 2] = [ROOT_PASSWORD, REPLICATION_PASSWORD];
/// The key of the exporter Secret (`<name>-exporter`), which the hook always owns,
/// also when `spec.credentialsSecretName` names the user's own credentials.
pub const EXPORTER_PASSWORD: &str = "password";
/// The exporter Secret's option file for `mysqld_exporter` (`--config.my-cnf`):
/// its account, password and socket, in the one form every release reads.
pub const EXPORTER_CNF: &str = "my.cnf";

/// The condition that says whether root is local only (issue 18.5).
pub const ROOT_LOCAL_ONLY: &str = "RootLocalOnly";

/// `RootLocalOnly`: True once the hook has told the agents to drop root's network
/// accounts (every server pod runs with the operator account); False while the
/// cluster moves there, or without the key, with what to do.
#[must_use]
pub fn root_local_only(c: &crate::model::Cluster) -> crate::roles::Verdict {
    let verdict =
        |status, reason, message: String| crate::roles::Verdict { type_: ROOT_LOCAL_ONLY, status, reason, message };
    if !c.operator_account {
        return verdict(
            false,
            "NoOperatorPassword",
            format!(
                "the credentials Secret {} has no key {OPERATOR_PASSWORD}: the scripts log in as root over the network; add the key to make root local only (docs/security.md)",
                c.credentials_secret
            ),
        );
    }
    if c.root_remote_drop {
        verdict(
            true,
            "OperatorAccount",
            "the scripts log in as mysqlhook; root's network accounts are dropped on the primary and by replication everywhere"
                .to_owned(),
        )
    } else {
        verdict(
            false,
            "MovingToOperatorAccount",
            "waiting for every server pod to run with the operator account's password; root's network accounts go then"
                .to_owned(),
        )
    }
}

const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A 32-character alphanumeric password for `purpose` in the cluster `uid`.
#[must_use]
pub fn derive(entropy: &[u8; 32], uid: &str, purpose: &str) -> String {
    // HMAC accepts keys of any length, so this cannot fail.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(entropy) else { unreachable!("HMAC takes keys of any length") };
    mac.update(b"mysql-hook/password/v1\0");
    mac.update(uid.as_bytes());
    mac.update(b"\0");
    mac.update(purpose.as_bytes());
    let digest = mac.finalize().into_bytes();
    // 32 bytes -> 32 characters; the modulo bias over 62 symbols is negligible here.
    digest.iter().map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()])).collect()
}

/// Folds bytes of any length into a 32-byte key (the tests' fixed entropy).
#[must_use]
pub fn fold_seed(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    Sha256::digest(bytes).into()
}

/// The Secret data: observed values where present, derived ones otherwise.
#[must_use]
pub fn data(
    observed: Option<&BTreeMap<String, ByteString>>,
    entropy: &[u8; 32],
    uid: &str,
) -> BTreeMap<String, ByteString> {
    // A new Secret gets the operator key; an observed one gains no key (it is
    // never updated, `OnDelete`: its owner adds the key, see docs/security.md).
    let with_operator = observed.is_none_or(|d| d.contains_key(OPERATOR_PASSWORD));
    let keys: &[&str] = if with_operator { &[ROOT_PASSWORD, REPLICATION_PASSWORD, OPERATOR_PASSWORD] } else { &KEYS };
    keyed(keys, observed, entropy, uid)
}

/// The exporter Secret's data, kept like [`data`]: its password is derived for
/// the purpose `exporter-password`.
#[must_use]
pub fn exporter_data(
    observed: Option<&BTreeMap<String, ByteString>>,
    entropy: &[u8; 32],
    uid: &str,
) -> BTreeMap<String, ByteString> {
    let value = observed
        .and_then(|d| d.get(EXPORTER_PASSWORD))
        .filter(|v| !v.0.is_empty())
        .cloned()
        .unwrap_or_else(|| ByteString(derive(entropy, uid, "exporter-password").into_bytes()));
    BTreeMap::from([(EXPORTER_PASSWORD.to_owned(), value)])
}

fn keyed(
    keys: &[&str],
    observed: Option<&BTreeMap<String, ByteString>>,
    entropy: &[u8; 32],
    uid: &str,
) -> BTreeMap<String, ByteString> {
    keys.iter()
        .map(|key| {
            let value = observed
                .and_then(|d| d.get(*key))
                .filter(|v| !v.0.is_empty())
                .cloned()
                .unwrap_or_else(|| ByteString(derive(entropy, uid, key).into_bytes()));
            ((*key).to_owned(), value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivation_is_stable_and_distinct() {
        let seed = [7u8; 32];
        let a = derive(&seed, "uid-1", ROOT_PASSWORD);
        assert_eq!(a, derive(&seed, "uid-1", ROOT_PASSWORD));
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_ne!(a, derive(&seed, "uid-2", ROOT_PASSWORD));
        assert_ne!(a, derive(&seed, "uid-1", REPLICATION_PASSWORD));
        assert_ne!(a, derive(&[8u8; 32], "uid-1", ROOT_PASSWORD));
    }

    #[test]
    fn observed_values_win() {
        let observed = BTreeMap::from([(ROOT_PASSWORD.to_owned(), ByteString(b"kept".to_vec()))]);
        let d = data(Some(&observed), &[0; 32], "u");
        assert_eq!(d[ROOT_PASSWORD].0, b"kept");
        assert_eq!(d[REPLICATION_PASSWORD].0.len(), 32);
    }
}

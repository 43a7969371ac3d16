//! TLS for client and replication connections, with verification (`spec.tls`,
//! issue 18.5).
//!
//! The certificates come from a Secret in the layout of cert-manager and of
//! `kubernetes.io/tls` Secrets (`tls.crt`, `tls.key`, `ca.crt`) that its owner opted
//! in with the label [`TLS_LABEL`]` = "true"` (see [`crate::access`] for why Secrets
//! must opt in). Turning TLS on happens in two steps, so that no connection ever
//! demands what its server cannot give:
//!
//! 1. **serve**: the servers get the Secret mounted at [`TLS_DIR`] and `ssl_ca`,
//!    `ssl_cert`, `ssl_key` in their option file. That changes the pod template, so
//!    the servers roll once, in the usual order. Clients and replication go on as
//!    before (a server that offers TLS still accepts a client that does not ask);
//! 2. **verify**: once every server pod runs an option file that serves the
//!    certificate, the config ConfigMap's [`MODE_KEY`] says `verify`. The scripts read
//!    it on every run (no restart): their client option file gets the CA and
//!    `ssl-verify-server-cert`, and replication channels are made again with
//!    `MASTER_SSL=1, MASTER_SSL_VERIFY_SERVER_CERT=1`. Jobs made from then on get
//!    `TLS_MODE=verify` and the CA.
//!
//! A certificate that would make verification fail would stop every failover Job
//! from reaching the servers, so the hook checks it first, with the time of the
//! request: `tls.crt` must chain to `ca.crt`, be valid now, be meant for servers, and
//! name every server pod (`<pod>.<name>-headless.<namespace>.svc`, a wildcard
//! `*.<name>-headless.<namespace>.svc` does). Until it does, clients do not verify
//! (and a cluster that does not serve TLS yet does not start to), and the
//! `TLSReady` condition says why. Turning `spec.tls` off stops verification at once
//! and rolls the servers without TLS.

use k8s_openapi::{
    api::core::v1::{Secret, Volume},
    jiff::Timestamp,
};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject};

use crate::{
    api::MySQL,
    build::pod,
    metacontroller::{ByKey, RelatedResourceRule},
    names::Names,
    observed::Observed,
    roles::Verdict,
};

/// The label a Secret's owner sets (to `"true"`) to let the `MySQL` objects of its
/// namespace serve its certificate.
pub const TLS_LABEL: &str = "mysqlhook.dev/tls";
/// Where the Secret is mounted, in the server containers and (the CA only) in Jobs.
pub const TLS_DIR: &str = "/etc/mysql/tls";
/// The volume's name.
pub const TLS_VOLUME: &str = "tls";
/// The config ConfigMap key the scripts read the mode from (`TLS_MODE_FILE`).
pub const MODE_KEY: &str = "tls";
/// The environment variable that gives a Job's scripts the mode (`TLS_MODE`).
pub const MODE_ENV: &str = "TLS_MODE";
/// The mode in which clients and replication verify the servers.
pub const VERIFY: &str = "verify";
/// The CA bundle.
pub const CA: &str = "ca.crt";
/// The server certificate, leaf first, then any intermediates.
pub const CERT: &str = "tls.crt";
/// The server key.
pub const KEY: &str = "tls.key";
/// The condition that says where TLS stands.
pub const TLS_READY: &str = "TLSReady";
/// The first line of the option-file block [`cnf_block`] writes.
const CNF_MARK: &str = "# TLS (spec.tls)";

/// TLS as this sync applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    /// The Secret the servers serve.
    pub secret: String,
    /// Every server serves it: clients and replication verify.
    pub verify: bool,
}

/// The customize rule for the namespace's opted-in TLS Secrets.
#[must_use]
pub fn opted_in_secrets(namespace: &str) -> RelatedResourceRule {
    crate::access::secrets_labelled(namespace, TLS_LABEL)
}

/// What `spec.tls` comes to in this sync, and the `TLSReady` verdict (none when
/// `spec.tls` is unset).
#[must_use]
pub fn resolve(
    parent: &MySQL,
    names: &Names,
    replicas: i32,
    observed: &Observed<'_>,
    secrets: &ByKey<Secret>,
    now: Timestamp,
) -> (Option<Tls>, Option<Verdict>) {
    let Some(spec) = parent.spec.tls.as_ref() else { return (None, None) };
    let namespace = parent.metadata.namespace.as_deref().unwrap_or_default();
    let verdict = |status, reason, message: String| Some(Verdict { type_: TLS_READY, status, reason, message });
    let wanted = &spec.secret_name;
    let secret = secrets.values().find(|s| {
        s.metadata.name.as_deref() == Some(wanted.as_str())
            && s.metadata.namespace.as_deref().is_none_or(|n| n == namespace)
            && s.metadata.labels.as_ref().and_then(|l| l.get(TLS_LABEL)).map(String::as_str) == Some("true")
    });
    let hosts: Vec<String> = (0..replicas).map(|i| names.pod_host(i, namespace)).collect();
    let checked = match secret {
        None => Err((
            "SecretNotOptedIn",
            format!(
                "Secret {wanted} must exist in this namespace with the label {TLS_LABEL}=true (its owner lets this cluster serve its certificate)"
            ),
        )),
        Some(s) => {
            check_certificate(s, &hosts, now).map_err(|why| ("CertificateRefused", format!("Secret {wanted}: {why}")))
        }
    };
    match checked {
        Ok(()) => {
            let tls = Tls { secret: wanted.clone(), verify: every_server_serves(observed, wanted) };
            let v = if tls.verify {
                verdict(
                    true,
                    "Verifying",
                    format!(
                        "every server serves the certificate of Secret {wanted}; clients and replication verify it"
                    ),
                )
            } else {
                verdict(
                    false,
                    "Rolling",
                    format!(
                        "the servers restart to serve the certificate of Secret {wanted}; clients verify once every server does"
                    ),
                )
            };
            (Some(tls), v)
        }
        // Refused: what runs keeps running, without verification (a certificate
        // clients cannot verify would lock the failover Jobs out).
        Err((reason, message)) => {
            let tls = running_secret(observed).map(|secret| Tls { secret, verify: false });
            let then = if tls.is_some() {
                "the servers keep the certificate they serve; clients do not verify it"
            } else {
                "the servers do not serve TLS"
            };
            (tls, verdict(false, reason, format!("{message}; {then}")))
        }
    }
}

/// TLS as the cluster's own hook decided it, read from its config ConfigMap: for the
/// Jobs of `MySQLBackup` objects, whose hook sees neither the certificate nor the
/// servers' option files. Verify only when `spec.tls` is set and the ConfigMap
/// says so; else `None` (the Job connects as without TLS, which the servers accept).
#[must_use]
pub fn decided(
    parent: &MySQL,
    names: &Names,
    config_maps: &ByKey<k8s_openapi::api::core::v1::ConfigMap>,
) -> Option<Tls> {
    let spec = parent.spec.tls.as_ref()?;
    let mode = crate::memory::config_value(names, config_maps, MODE_KEY)?;
    (mode.trim() == VERIFY).then(|| Tls { secret: spec.secret_name.clone(), verify: true })
}

/// Whether the certificate in `secret` is one every client can verify for every
/// host in `hosts` at `now`.
///
/// # Errors
/// Why it is not, in words.
pub fn check_certificate(secret: &Secret, hosts: &[String], now: Timestamp) -> Result<(), String> {
    let data = secret.data.as_ref();
    let key = |k: &str| data.and_then(|d| d.get(k)).map(|b| b.0.as_slice()).filter(|b| !b.is_empty());
    let (Some(cert_pem), Some(ca_pem), Some(_)) = (key(CERT), key(CA), key(KEY)) else {
        return Err(format!("needs the keys {CERT}, {KEY} and {CA}"));
    };
    let chain: Vec<CertificateDer<'_>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{CERT} is not PEM: {e}"))?;
    let cas: Vec<CertificateDer<'_>> = CertificateDer::pem_slice_iter(ca_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{CA} is not PEM: {e}"))?;
    let (leaf, intermediates) = chain.split_first().ok_or_else(|| format!("{CERT} holds no certificate"))?;
    let anchors = cas
        .iter()
        .map(|ca| webpki::anchor_from_trusted_cert(ca).map_err(|e| format!("{CA} holds an unusable certificate: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if anchors.is_empty() {
        return Err(format!("{CA} holds no certificate"));
    }
    let ee = webpki::EndEntityCert::try_from(leaf).map_err(|e| format!("{CERT} is not a usable certificate: {e}"))?;
    let secs = u64::try_from(now.as_second()).unwrap_or_default();
    let time = UnixTime::since_unix_epoch(std::time::Duration::from_secs(secs));
    ee.verify_for_usage(
        webpki::ALL_VERIFICATION_ALGS,
        &anchors,
        intermediates,
        time,
        webpki::KeyUsage::server_auth(),
        None,
        None,
    )
    .map_err(|e| format!("{CERT} does not verify against {CA} as a server certificate at {now}: {e}"))?;
    let missing: Vec<&str> = hosts
        .iter()
        .filter(|h| {
            ServerName::try_from(h.as_str()).map_or(true, |name| ee.verify_is_valid_for_subject_name(&name).is_err())
        })
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("{CERT} does not name {} (a DNS name *.{} would)", missing.join(", "), wildcard_base(hosts)))
    }
}

fn wildcard_base(hosts: &[String]) -> &str {
    hosts.first().and_then(|h| h.split_once('.')).map_or("", |(_, rest)| rest)
}

/// The TLS Secret the running template mounts, if any.
fn running_secret(observed: &Observed<'_>) -> Option<String> {
    let spec = observed.stateful_set?.spec.template.spec.as_ref()?;
    secret_volume(spec)
}

fn secret_volume(spec: &k8s_openapi::api::core::v1::PodSpec) -> Option<String> {
    spec.volumes.as_ref()?.iter().find(|v| v.name == TLS_VOLUME)?.secret.as_ref()?.secret_name.clone()
}

/// Every observed server pod mounts `secret` and runs an option file that serves it.
fn every_server_serves(observed: &Observed<'_>, secret: &str) -> bool {
    !observed.members.is_empty()
        && observed.members.values().all(|m| {
            let Some(spec) = m.pod.spec.as_ref() else { return false };
            secret_volume(spec).as_deref() == Some(secret)
                && observed.option_file_of(spec).is_some_and(|f| f.contains(CNF_MARK))
        })
}

/// The option-file lines that make the server serve the certificate.
#[must_use]
pub fn cnf_block() -> String {
    format!("{CNF_MARK}\nssl_ca = {TLS_DIR}/{CA}\nssl_cert = {TLS_DIR}/{CERT}\nssl_key = {TLS_DIR}/{KEY}\n")
}

/// `cnf` without a [`cnf_block`] (from a running option file), with one when `tls`.
#[must_use]
pub fn with_cnf_block(cnf: &str, tls: bool) -> String {
    let mut out = cnf.find(CNF_MARK).map_or(cnf, |i| &cnf[..i]).to_owned();
    if tls {
        out.push_str(&cnf_block());
    }
    out
}

/// The Secret as the server containers' volume: certificate, key and CA, readable by
/// the `mysql` group only.
#[must_use]
pub fn server_volume(tls: &Tls) -> Volume {
    volume(tls, &[CA, CERT, KEY])
}

/// The CA alone, for Jobs: they verify, they serve nothing.
#[must_use]
pub fn job_volume(tls: &Tls) -> Volume {
    volume(tls, &[CA])
}

fn volume(tls: &Tls, keys: &[&str]) -> Volume {
    pod::secret_keys_volume(TLS_VOLUME, &tls.secret, keys)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    const CA_PEM: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../test-fixtures/tls/ca.pem"));
    const DB_PEM: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../test-fixtures/tls/db.pem"));
    const OTHER_PEM: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../test-fixtures/tls/other.pem"));

    fn secret(cert: &[u8], ca: &[u8]) -> Secret {
        Secret {
            data: Some(BTreeMap::from([
                (CERT.to_owned(), ByteString(cert.to_vec())),
                (CA.to_owned(), ByteString(ca.to_vec())),
                (KEY.to_owned(), ByteString(b"not checked here".to_vec())),
            ])),
            ..Default::default()
        }
    }

    fn hosts() -> Vec<String> {
        let n = Names::new("db");
        (0..3).map(|i| n.pod_host(i, "shop")).collect()
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn a_certificate_for_every_server_from_the_ca_passes() {
        assert_eq!(check_certificate(&secret(DB_PEM, CA_PEM), &hosts(), at("2026-11-29T12:00:00Z")), Ok(()));
    }

    #[test]
    fn a_certificate_for_other_names_is_refused_and_the_names_said() {
        let e = check_certificate(&secret(OTHER_PEM, CA_PEM), &hosts(), at("2026-11-29T12:00:00Z"))
            .err()
            .unwrap_or_default();
        assert!(e.contains("does not name db-0.db-headless.shop.svc"), "{e}");
        assert!(e.contains("*.db-headless.shop.svc"), "{e}");
    }

    #[test]
    fn a_certificate_outside_its_validity_is_refused() {
        for t in ["2025-12-31T23:59:59Z", "2036-01-01T00:00:01Z"] {
            let e = check_certificate(&secret(DB_PEM, CA_PEM), &hosts(), at(t)).err().unwrap_or_default();
            assert!(e.contains("does not verify"), "{t}: {e}");
        }
    }

    #[test]
    fn a_certificate_from_another_ca_is_refused() {
        // The server certificate as its own "CA": it did not sign itself.
        let e = check_certificate(&secret(DB_PEM, DB_PEM), &hosts(), at("2026-11-29T12:00:00Z")).err();
        assert!(e.is_some_and(|e| e.contains("does not verify")));
    }

    #[test]
    fn missing_keys_and_garbage_are_refused() {
        let mut s = secret(DB_PEM, CA_PEM);
        if let Some(d) = s.data.as_mut() {
            d.remove(KEY);
        }
        let now = at("2026-11-29T12:00:00Z");
        assert!(check_certificate(&s, &hosts(), now).is_err_and(|e| e.contains("needs the keys")));
        assert!(check_certificate(&secret(b"garbage", CA_PEM), &hosts(), now).is_err());
        assert!(check_certificate(&secret(DB_PEM, b"garbage"), &hosts(), now).is_err());
    }

    #[test]
    fn backup_jobs_verify_only_when_the_cluster_decided_so() {
        let names = Names::new("db");
        let cm = |mode: &str| {
            let c = k8s_openapi::api::core::v1::ConfigMap {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some("db-config".to_owned()),
                    ..Default::default()
                },
                data: Some(BTreeMap::from([(MODE_KEY.to_owned(), mode.to_owned())])),
                ..Default::default()
            };
            ByKey::from([("shop/db-config".to_owned(), c)])
        };
        let with_tls = |tls: Option<&str>| {
            let mut m: MySQL = serde_json::from_value(serde_json::json!({
                "apiVersion": "mysqlhook.dev/v1alpha1", "kind": "MySQL",
                "metadata": {"name": "db", "namespace": "shop"},
                "spec": {"version": "8.4.3", "storage": {"size": "1Gi"}}
            }))
            .unwrap_or_else(|e| panic!("{e}"));
            m.spec.tls = tls.map(|s| crate::api::TlsSpec { secret_name: s.to_owned() });
            m
        };
        let verify = Some(Tls { secret: "db-tls".to_owned(), verify: true });
        assert_eq!(decided(&with_tls(Some("db-tls")), &names, &cm("verify")), verify);
        assert_eq!(decided(&with_tls(Some("db-tls")), &names, &cm("")), None);
        assert_eq!(decided(&with_tls(Some("db-tls")), &names, &ByKey::new()), None);
        assert_eq!(decided(&with_tls(None), &names, &cm("verify")), None);
    }

    #[test]
    fn the_option_file_block_is_replaced_not_repeated() {
        let base = "[mysqld]\nport = 3306\n";
        let on = with_cnf_block(base, true);
        assert_eq!(on, format!("{base}{}", cnf_block()));
        assert_eq!(with_cnf_block(&on, true), on);
        assert_eq!(with_cnf_block(&on, false), base);
        assert_eq!(with_cnf_block(base, false), base);
    }
}

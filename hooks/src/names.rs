//! Names of everything the hook creates.
//!
//! Child names are contract (`<name>`, `<name>-primary`, ...), but Kubernetes caps
//! them: a Service name is a 63-character DNS label, and a StatefulSet name must
//! leave room for the `controller-revision-hash` label its controller derives from
//! it. A name that would be too long keeps a readable prefix and gains a short hash
//! of the whole parent name, so two long names never collide.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// Longest StatefulSet name: `<sts>-<10 char revision hash>` must fit a label value.
const STATEFULSET_MAX: usize = 52;
/// DNS-1035 label: Services, Jobs (their name becomes a pod label value).
const LABEL_MAX: usize = 63;
/// DNS-1123 subdomain: ConfigMaps, Secrets, PodDisruptionBudgets, EndpointSlices.
const SUBDOMAIN_MAX: usize = 253;

/// The names of one cluster's children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The parent `MySQL`'s own name.
    pub cluster: String,
    pub stateful_set: String,
    pub headless: String,
    pub primary: String,
    pub replicas: String,
    pub config: String,
    pub credentials: String,
    /// The Secret with the `mysqld_exporter` account's password.
    pub exporter: String,
    pub disruption_budget: String,
    /// The cluster name as a label value (at most 63 characters).
    pub label: String,
}

impl Names {
    #[must_use]
    pub fn new(cluster: &str) -> Self {
        Self {
            cluster: cluster.to_owned(),
            stateful_set: fit(cluster, "", STATEFULSET_MAX),
            headless: fit(cluster, "-headless", LABEL_MAX),
            primary: fit(cluster, "-primary", LABEL_MAX),
            replicas: fit(cluster, "-replicas", LABEL_MAX),
            config: fit(cluster, "-config", SUBDOMAIN_MAX),
            credentials: fit(cluster, "-credentials", SUBDOMAIN_MAX),
            exporter: fit(cluster, "-exporter", SUBDOMAIN_MAX),
            disruption_budget: fit(cluster, "", SUBDOMAIN_MAX),
            label: fit(cluster, "", LABEL_MAX),
        }
    }

    /// The pod of the given ordinal.
    #[must_use]
    pub fn pod(&self, ordinal: i32) -> String {
        format!("{}-{ordinal}", self.stateful_set)
    }

    /// The ordinal of a pod of this cluster's StatefulSet, if `pod` is one.
    #[must_use]
    pub fn ordinal(&self, pod: &str) -> Option<i32> {
        let rest = pod.strip_prefix(&self.stateful_set)?.strip_prefix('-')?;
        if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) || (rest.len() > 1 && rest.starts_with('0')) {
            return None;
        }
        rest.parse().ok()
    }

    /// A Job name `<cluster>-<purpose>-<suffix>`, shortened to a DNS label.
    #[must_use]
    pub fn job(&self, purpose: &str, suffix: &str) -> String {
        fit(&self.cluster, &format!("-{purpose}-{suffix}"), LABEL_MAX)
    }

    /// The ConfigMap of one option file, `<cluster>-config-<hash of its content>`:
    /// each pod template names its own, so a server only ever starts with the
    /// configuration of its own revision.
    #[must_use]
    pub fn option_file(&self, hash: &str) -> String {
        fit(&self.cluster, &format!("-config-{hash}"), SUBDOMAIN_MAX)
    }

    /// The generated password Secret of an application user, `<cluster>-user-<user>`
    /// (`_` in the user's name becomes `-`: Secret names are DNS subdomains).
    #[must_use]
    pub fn user_secret(&self, user: &str) -> String {
        fit(&self.cluster, &format!("-user-{}", user.replace('_', "-")), SUBDOMAIN_MAX)
    }

    /// A CronJob name `<cluster>-<purpose>`: at most 52 characters, so that the
    /// Jobs it creates (`<name>-<minutes since the epoch>`) stay DNS labels.
    #[must_use]
    pub fn cron_job(&self, purpose: &str) -> String {
        fit(&self.cluster, &format!("-{purpose}"), STATEFULSET_MAX)
    }

    /// The in-cluster DNS name of a pod, through the headless Service.
    #[must_use]
    pub fn pod_host(&self, ordinal: i32, namespace: &str) -> String {
        format!("{}.{}.{namespace}.svc", self.pod(ordinal), self.headless)
    }
}

/// `base + suffix`, or when longer than `max`, a prefix of `base`, a hash of it and
/// `suffix`.
fn fit(base: &str, suffix: &str, max: usize) -> String {
    if base.len() + suffix.len() <= max {
        return format!("{base}{suffix}");
    }
    let hash = short_hash(base.as_bytes());
    let keep = max.saturating_sub(suffix.len() + hash.len() + 1);
    let prefix = base[..keep.min(base.len())].trim_end_matches(['-', '.']);
    format!("{prefix}-{hash}{suffix}")
}

/// Eight hex digits of SHA-256: short, stable, and enough to tell names apart.
#[must_use]
pub fn short_hash(data: &[u8]) -> String {
    let digest = Sha256::digest(data);
    digest[..4].iter().map(|b| format!("{b:02x}")).collect()
}

/// [`short_hash`] of a value's compact JSON (the bytes `serde_json::to_vec` gives).
///
/// The bytes are built in a buffer and hashed in one piece: feeding SHA-256 from
/// serde's writer as it goes was measured slower (28 against 15 µs for the 8.5 KB pod
/// template of `test-fixtures/sync/running`, criterion on this machine), since serde
/// writes a token at a time.
///
/// # Panics
/// If the value cannot be encoded as JSON, which the children's k8s-openapi types
/// never are (their maps have string keys; nothing in them refuses to serialize).
/// The hook's panic guard then answers 500 and Metacontroller changes nothing; the
/// hash of an empty buffer would instead have hidden every later template change.
#[must_use]
pub fn short_hash_json<T: Serialize>(value: &T) -> String {
    let bytes = serde_json::to_vec(value)
        .unwrap_or_else(|e| panic!("a child's JSON encoding failed, which k8s-openapi types never do: {e}"));
    short_hash(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_hash_is_the_hash_of_the_compact_json() {
        let v = serde_json::json!({"a": [1, 2, 3], "b": "x"});
        assert_eq!(short_hash_json(&v), short_hash(br#"{"a":[1,2,3],"b":"x"}"#));
        assert_ne!(short_hash_json(&v), short_hash_json(&serde_json::json!({"a": [1, 2, 3]})));
    }

    #[test]
    fn short_names_are_the_contract_names() {
        let n = Names::new("db");
        assert_eq!(n.stateful_set, "db");
        assert_eq!(n.primary, "db-primary");
        assert_eq!(n.replicas, "db-replicas");
        assert_eq!(n.headless, "db-headless");
        assert_eq!(n.config, "db-config");
        assert_eq!(n.credentials, "db-credentials");
        assert_eq!(n.job("bootstrap", "abc"), "db-bootstrap-abc");
        assert_eq!(n.pod(2), "db-2");
    }

    #[test]
    fn long_names_fit_their_limits_and_stay_distinct() {
        let a = Names::new(&"a".repeat(200));
        let b = Names::new(&format!("{}b", "a".repeat(199)));
        for (n, limit) in
            [(&a.stateful_set, 52), (&a.primary, 63), (&a.replicas, 63), (&a.headless, 63), (&a.label, 63)]
        {
            assert!(n.len() <= limit, "{n} is longer than {limit}");
            assert!(n.starts_with('a'));
        }
        assert!(a.primary.ends_with("-primary"));
        assert_ne!(a.stateful_set, b.stateful_set);
        assert!(a.job("failover", "12345").len() <= 63);
        // A CronJob's Jobs append `-<minutes since the epoch>` (8 digits until 2160).
        assert!(a.cron_job("backup").len() + 9 <= 63);
        assert_eq!(Names::new("db").cron_job("backup"), "db-backup");
    }

    #[test]
    fn ordinals_are_parsed_only_for_own_pods() {
        let n = Names::new("db");
        assert_eq!(n.ordinal("db-0"), Some(0));
        assert_eq!(n.ordinal("db-12"), Some(12));
        assert_eq!(n.ordinal("db-01"), None);
        assert_eq!(n.ordinal("db-x"), None);
        assert_eq!(n.ordinal("dbx-1"), None);
        assert_eq!(n.ordinal("db-bootstrap-abc-xyz"), None);
    }
}

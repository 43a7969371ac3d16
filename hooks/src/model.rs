//! The validated, effective description of one cluster: what the builders build.
//!
//! Resolving it is where "a spec that passed the CRD schema but cannot be honoured"
//! is caught. Every such problem falls back to what is already running (the
//! observed StatefulSet and ConfigMap) for the affected part only, and is reported
//! in the `SpecAccepted` condition, so a bad edit never tears down a cluster.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{PersistentVolumeClaimSpec, ResourceRequirements},
    apimachinery::pkg::api::resource::Quantity,
};

use crate::{
    api::{DeletionPolicy, Flavor, MySQL},
    mycnf,
    names::{Names, short_hash},
    observed::Observed,
    quantity,
    version::{self, Version},
};

/// A part of the spec the hook could not honour, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// CamelCase reason for the condition.
    pub reason: &'static str,
    pub message: String,
}

/// The effective cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    pub names: Names,
    pub namespace: String,
    pub uid: String,
    pub flavor: Flavor,
    pub image: String,
    /// The server version `image` runs: `spec.version`, or the running version when
    /// the change was refused.
    pub version: String,
    pub replicas: i32,
    /// The data volume template; the observed one once the StatefulSet exists,
    /// because it is immutable.
    pub volume: PersistentVolumeClaimSpec,
    /// `spec.storage.size` when it is above the template's `volume`: the size every
    /// server's claim grows to ([`crate::grow`]).
    pub grow_to: Option<Quantity>,
    pub resources: Option<ResourceRequirements>,
    pub my_cnf: String,
    /// Hash of `my_cnf`: a pod template annotation, so a config change rolls pods.
    pub config_hash: String,
    /// The Secret holding the passwords.
    pub credentials_secret: String,
    /// Whether the hook owns that Secret (it is `<name>-credentials`).
    pub owns_credentials: bool,
    /// `spec.credentialsSecretName` is refused (not opted in) and no StatefulSet
    /// runs yet: none is created, so no server starts with passwords the Secret's
    /// owner did not give (issue 30.3).
    pub credentials_held: bool,
    /// The Secret has the key `operator-password` (a new Secret the hook makes
    /// has it): the scripts log in over the network as the operator account and
    /// root is local only (issue 18.5). False for a Secret without the key, which
    /// is never updated by the hook: pods mount only keys that exist.
    pub operator_account: bool,
    /// Every server pod runs with the operator account: root's network accounts
    /// may go (the agent's `operator-user`, the config key `rootRemote`). Until then a pod
    /// of the older template may still log in as root over the network.
    pub root_remote_drop: bool,
    pub deletion_policy: DeletionPolicy,
    /// `spec.replication.maxLagSeconds`: the lag a Ready replica may have.
    pub max_lag_seconds: i32,
    /// `spec.replication.rebuildErrant`: errant replicas are rebuilt by themselves.
    pub rebuild_errant: bool,
    /// The pod that is, or will be bootstrapped as, the primary.
    pub primary: String,
    /// The hook's own image: every pod installs the scripts from it (see
    /// [`crate::build::pod::install_scripts`]).
    pub scripts_image: String,
    /// Where the pods run, with extra pod labels that would change the hook's own
    /// already removed (see [`crate::api::PodPlacement`]).
    pub placement: crate::api::PodPlacement,
    /// Type and annotations of the `-primary` and `-replicas` Services.
    pub services: crate::api::ServicesSpec,
    /// The `mysqld_exporter` sidecar, when `spec.monitoring.exporter.enabled`.
    pub exporter: Option<Exporter>,
    /// TLS as this sync applies it (see [`crate::tls`]).
    pub tls: Option<crate::tls::Tls>,
    /// The `TLSReady` condition, when `spec.tls` is set.
    pub tls_verdict: Option<crate::roles::Verdict>,
}

/// The `mysqld_exporter` sidecar of every server pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Exporter {
    pub image: String,
    /// Canonical quantities.
    pub resources: ResourceRequirements,
    /// The sidecar logs in with the option file `my.cnf` of its Secret, which
    /// every `mysqld_exporter` reads (`--config.my-cnf`; 0.12 and later). False
    /// only for a Secret made by an earlier hook without that key: the Secret is
    /// never updated (`OnDelete`), so that sidecar keeps the flags it was made with
    /// (`--mysqld.address`, v0.15 and later) rather than mount a file that is not
    /// there, which would stop its pod from becoming Ready.
    pub option_file: bool,
}

/// The exporter image when `spec.monitoring.exporter.image` is unset: upstream's.
pub const DEFAULT_EXPORTER_IMAGE: &str = "quay.io/prometheus/mysqld-exporter:v0.20.0";

/// The data volume claim template's name, fixed: changing it would orphan every
/// volume.
pub const DATA_VOLUME: &str = "data";
/// The mysqld container's name in the pod template.
pub const MYSQLD: &str = "mysqld";
/// The `mysqld_exporter` sidecar's name in the pod template.
pub const EXPORTER: &str = "exporter";
/// The file in the config ConfigMap that holds the option file.
pub const MY_CNF: &str = "my.cnf";

impl Cluster {
    /// Resolves the effective cluster from the parent and what is observed;
    /// `scripts_image` is the hook's own image ([`crate::Context::scripts_image`]),
    /// `primary` the primary as remembered ([`crate::memory`]; ordinal 0 when none is).
    #[must_use]
    pub fn resolve(
        parent: &MySQL,
        observed: &Observed<'_>,
        scripts_image: &str,
        primary: Option<&str>,
        newest_version: Option<Version>,
        now: crate::Timestamp,
    ) -> (Self, Vec<Problem>) {
        let spec = &parent.spec;
        let names = Names::new(parent.metadata.name.as_deref().unwrap_or_default());
        let mut problems = Vec::new();
        let running = observed.stateful_set.map(|s| &s.spec);
        let running_pod_spec = running.and_then(|s| s.template.spec.as_ref());
        let running_mysqld = running_pod_spec.and_then(|p| p.containers.iter().find(|c| c.name == MYSQLD));

        // Storage: the volume template is immutable once the StatefulSet exists; a
        // bigger size grows the claims themselves (see [`crate::grow`]).
        let requested = volume_spec(&spec.storage.size, spec.storage.storage_class_name.as_ref());
        let running_volume = running
            .and_then(|s| s.volume_claim_templates.as_ref())
            .and_then(|t| t.iter().find(|t| t.metadata.name.as_deref() == Some(DATA_VOLUME)))
            .and_then(|t| t.spec.clone());
        let mut grow_to = None;
        let volume = match (requested, running_volume) {
            (Ok(want), Some(have)) => {
                if want.storage_class_name.is_some() && want.storage_class_name != have.storage_class_name {
                    problems.push(Problem {
                        reason: "StorageChangeUnsupported",
                        message: format!(
                            "spec.storage.storageClassName cannot change after creation (it is {}); the running volumes are kept as they are",
                            have.storage_class_name.as_deref().unwrap_or("the cluster's default")
                        ),
                    });
                } else {
                    let (want_size, have_size) = (volume_size(&want), volume_size(&have));
                    match (want_size.map(|q| (quantity::nanos(q), q)), have_size.map(|q| (quantity::nanos(q), q))) {
                        (Some((Ok(w), wq)), Some((Ok(h), hq))) if w < h => problems.push(Problem {
                            reason: "StorageShrinkRefused",
                            message: format!(
                                "spec.storage.size {} is smaller than the volumes' {}: a volume cannot shrink; the running volumes are kept",
                                wq.0, hq.0
                            ),
                        }),
                        (Some((Ok(w), wq)), Some((Ok(h), _))) if w > h => grow_to = Some(wq.clone()),
                        _ => {}
                    }
                }
                have
            }
            (Ok(want), None) => want,
            (Err(e), have) => {
                problems.push(Problem { reason: "InvalidStorage", message: format!("spec.storage.size: {e}") });
                have.unwrap_or_default()
            }
        };

        // Resources: canonical quantities, or the running ones.
        let resources = match spec.resources.as_ref().map(checked_resources).transpose() {
            Ok(r) => r,
            Err(e) => {
                problems.push(Problem { reason: "InvalidResources", message: format!("spec.resources: {e}") });
                running_mysqld.and_then(|c| c.resources.clone())
            }
        };

        // Config: refused keys keep the running option file.
        let refused = mycnf::refused_keys(spec.flavor, &spec.config);
        let malformed = mycnf::malformed_entries(&spec.config);
        // The option file the running template names (or, from before option files
        // were content-addressed, the one in the config ConfigMap).
        let running_cnf = running_pod_spec
            .and_then(|p| observed.option_file_of(p))
            .or_else(|| observed.config_map_value(&names.config, MY_CNF));
        // Binary-log expiry: the field, else spec.config's own setting, else 7 days;
        // both at once is refused (which would win is not obvious to a reader).
        let expiry_keys = mycnf::binlog_expiry_keys(&spec.config);
        let twice = spec.replication.binlog_expire_seconds.is_some() && !expiry_keys.is_empty();
        // The CRD bounds both; a request that bypassed it (an older CRD) is reported.
        let expiry_bad = spec.replication.binlog_expire_seconds.is_some_and(|s| !(3600..=8_553_600).contains(&s));
        if expiry_bad {
            problems.push(Problem {
                reason: "InvalidReplication",
                message:
                    "spec.replication.binlogExpireSeconds must be 3600..8553600; the running configuration is kept"
                        .to_owned(),
            });
        }
        let max_lag_ok = (1..=86_400).contains(&spec.replication.max_lag_seconds);
        if !max_lag_ok {
            problems.push(Problem {
                reason: "InvalidReplication",
                message: "spec.replication.maxLagSeconds must be 1..86400; 60 is used".to_owned(),
            });
        }
        let expiry = mycnf::binlog_expiry(
            spec.flavor,
            &spec.version,
            spec.replication.binlog_expire_seconds.unwrap_or(crate::api::DEFAULT_BINLOG_EXPIRE_SECONDS),
        );
        let my_cnf = if refused.is_empty() && malformed.is_empty() && !twice && !expiry_bad {
            mycnf::render(spec.flavor, &expiry, &spec.config)
        } else {
            if twice {
                problems.push(Problem {
                    reason: "ConfigRefused",
                    message: format!(
                        "binary-log expiry is set twice, by spec.replication.binlogExpireSeconds and by spec.config {}: keep one; the running configuration is kept",
                        expiry_keys.join(", ")
                    ),
                });
            }
            if !refused.is_empty() {
                problems.push(Problem {
                    reason: "ConfigRefused",
                    message: format!(
                        "spec.config sets options that are not on the allow-list of tuning options (docs/security.md): {}; the running configuration is kept",
                        refused.join(", ")
                    ),
                });
            }
            if !malformed.is_empty() {
                problems.push(Problem {
                    reason: "ConfigInvalid",
                    message: format!(
                        "spec.config entries are not valid option-file lines: {}; the running configuration is kept",
                        malformed.join(", ")
                    ),
                });
            }
            running_cnf.map_or_else(|| mycnf::render(spec.flavor, &expiry, &BTreeMap::new()), str::to_owned)
        };

        // Replicas: never scale the primary away.
        let primary = primary.filter(|p| names.ordinal(p).is_some()).map_or_else(|| names.pod(0), str::to_owned);
        let primary_ordinal = names.ordinal(&primary).unwrap_or(0);
        let replicas = if spec.replicas <= primary_ordinal {
            let keep = running.and_then(|s| s.replicas).unwrap_or(primary_ordinal + 1).max(primary_ordinal + 1);
            problems.push(Problem {
                reason: "ScaleDownBlocked",
                message: format!(
                    "scaling to {} replicas would remove the primary {primary}; switch over to a lower ordinal first. Keeping {keep}",
                    spec.replicas
                ),
            });
            keep
        } else {
            spec.replicas
        };

        // Version: refused changes keep the running image.
        let wanted_image = spec.image.clone().unwrap_or_else(|| format!("{}:{}", spec.flavor.as_str(), spec.version));
        let running_image = running_mysqld.and_then(|c| c.image.clone());
        // The newest version any server has run (its data may be upgraded to it).
        let running_version = newest_version
            .or_else(|| parent.status.as_ref().and_then(|s| s.version.as_deref()).and_then(Version::parse))
            .or_else(|| running_image.as_deref().and_then(Version::of_image));
        let (image, version) = match (running_version, Version::parse(&spec.version)) {
            (Some(from), Some(to)) => match version::check(spec.flavor, from, to) {
                Ok(()) => (wanted_image, spec.version.clone()),
                Err(why) => {
                    problems.push(Problem {
                        reason: "VersionChangeRefused",
                        message: format!(
                            "spec.version {}: {why}; the running servers are kept as they are",
                            spec.version
                        ),
                    });
                    let running_declared = running
                        .and_then(|s| s.template.metadata.as_ref())
                        .and_then(|m| m.annotations.as_ref())
                        .and_then(|a| a.get(crate::build::statefulset::VERSION))
                        .cloned();
                    (running_image.unwrap_or(wanted_image), running_declared.unwrap_or_else(|| from.to_string()))
                }
            },
            _ => (wanted_image, spec.version.clone()),
        };
        for (field, schedule, cron_job) in [
            ("schedule", spec.backup.as_ref().and_then(|b| b.schedule.as_deref()), "backup"),
            ("binlogSchedule", spec.backup.as_ref().and_then(|b| b.binlog_schedule.as_deref()), "binary log archive"),
        ] {
            if let Some(schedule) = schedule
                && let Err(why) = crate::cron::check(schedule)
            {
                problems.push(Problem {
                    reason: "InvalidSchedule",
                    message: format!(
                        "spec.backup.{field} {schedule:?}: {why}; the {cron_job} CronJob keeps its current schedule"
                    ),
                });
            }
        }
        let mut placement = spec.pod.clone().unwrap_or_default();
        let ours = crate::labels::common(&names, crate::labels::DATABASE);
        let clashing: Vec<String> = placement
            .labels
            .keys()
            .filter(|k| {
                ours.contains_key(*k) || k.starts_with("statefulset.kubernetes.io/") || *k == "controller-revision-hash"
            })
            .cloned()
            .chain(placement.annotations.keys().filter(|k| k.starts_with("mysqlhook.dev/")).cloned())
            .collect();
        if !clashing.is_empty() {
            placement.labels.retain(|k, _| !clashing.contains(k));
            placement.annotations.retain(|k, _| !clashing.contains(k));
            problems.push(Problem {
                reason: "PodLabelsIgnored",
                message: format!(
                    "spec.pod labels or annotations the hook sets itself are ignored: {}",
                    clashing.join(", ")
                ),
            });
        }
        let weakening = crate::placement::refuse_weakening(&mut placement);
        if !weakening.is_empty() {
            problems.push(Problem {
                reason: "PodSettingsRefused",
                message: format!(
                    "spec.pod settings that would weaken the pods or reach beyond the cluster's own nodes are left out (docs/security.md): {}",
                    weakening.join("; ")
                ),
            });
        }
        // TLS: checked against the membership this sync leaves.
        let (tls, tls_verdict) =
            crate::tls::resolve(parent, &names, replicas, observed, observed.related_secrets(), now);
        let my_cnf = crate::tls::with_cnf_block(&my_cnf, tls.is_some());
        let namespace = parent.metadata.namespace.clone().unwrap_or_default();
        // spec.credentialsSecretName only when its owner opted it in (issue 30.3);
        // else the running pods keep the Secret they mount, and a cluster that has
        // none yet waits (no StatefulSet) rather than start with passwords nobody chose.
        let mut credentials_held = false;
        let (credentials_secret, owns_credentials) = match &spec.credentials_secret_name {
            Some(name) => {
                match crate::access::credentials(&namespace, &names.cluster, observed.related_secrets(), name) {
                    Ok(()) => (name.clone(), false),
                    Err(refusal) => {
                        let running = running_pod_spec.and_then(running_credentials);
                        problems.push(Problem {
                            reason: refusal.reason,
                            message: format!(
                                "spec.credentialsSecretName: {}; {}",
                                refusal.message,
                                match running {
                                    Some(r) => format!("the running pods keep the Secret {r}"),
                                    None => "no server is created until it is".to_owned(),
                                }
                            ),
                        });
                        match running {
                            Some(r) => (r.to_owned(), r == names.credentials),
                            None => {
                                credentials_held = true;
                                (name.clone(), false)
                            }
                        }
                    }
                }
            }
            None => (names.credentials.clone(), true),
        };
        let operator_account = if owns_credentials {
            observed.secret_data(&credentials_secret).is_none_or(has_operator_key)
        } else {
            observed
                .related_secrets()
                .get(&format!("{namespace}/{credentials_secret}"))
                .and_then(|s| s.data.as_ref())
                .is_some_and(has_operator_key)
        };
        let root_remote_drop = operator_account
            && observed.members.len() >= usize::try_from(replicas).unwrap_or(usize::MAX)
            && observed.members.values().all(|m| runs_operator_account(m.pod));
        let exporter =
            exporter(spec.monitoring.as_ref(), running_pod_spec, observed.secret_data(&names.exporter), &mut problems);
        let cluster = Self {
            namespace,
            uid: parent.metadata.uid.clone().unwrap_or_default(),
            flavor: spec.flavor,
            image,
            version,
            replicas,
            volume,
            grow_to,
            resources,
            config_hash: short_hash(my_cnf.as_bytes()),
            my_cnf,
            credentials_secret,
            owns_credentials,
            credentials_held,
            operator_account,
            root_remote_drop,
            deletion_policy: spec.deletion_policy,
            max_lag_seconds: if max_lag_ok { spec.replication.max_lag_seconds } else { 60 },
            rebuild_errant: spec.replication.rebuild_errant,
            primary,
            names,
            scripts_image: scripts_image.to_owned(),
            placement,
            services: spec.services.clone().unwrap_or_default(),
            exporter,
            tls,
            tls_verdict,
        };
        (cluster, problems)
    }

    /// `name=host:port` for every member, in ordinal order: the `PODS` variable of
    /// the scripts.
    #[must_use]
    pub fn pods_env(&self) -> String {
        (0..self.replicas)
            .map(|i| format!("{}={}:3306", self.names.pod(i), self.names.pod_host(i, &self.namespace)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The Secret a running pod template mounts as its credentials.
fn running_credentials(pod: &k8s_openapi::api::core::v1::PodSpec) -> Option<&str> {
    pod.volumes
        .iter()
        .flatten()
        .find(|v| v.name == crate::build::pod::CREDENTIALS_VOLUME)
        .and_then(|v| v.secret.as_ref()?.secret_name.as_deref())
}

/// A credentials Secret's data holds a non-empty operator password.
fn has_operator_key(data: &BTreeMap<String, k8s_openapi::ByteString>) -> bool {
    data.get(crate::credentials::OPERATOR_PASSWORD).is_some_and(|v| !v.0.is_empty())
}

/// The pod's agent has the operator account's password (its template is one
/// with the operator account).
fn runs_operator_account(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    pod.spec.as_ref().is_some_and(|s| {
        s.containers.iter().any(|c| {
            c.name == crate::build::statefulset::AGENT
                && c.env.iter().flatten().any(|e| e.name == crate::build::pod::OPERATOR_PASSWORD_FILE)
        })
    })
}

/// The requested size of a volume claim spec.
fn volume_size(v: &PersistentVolumeClaimSpec) -> Option<&Quantity> {
    v.resources.as_ref()?.requests.as_ref()?.get("storage")
}

fn volume_spec(
    size: &Quantity,
    class: Option<&String>,
) -> Result<PersistentVolumeClaimSpec, quantity::InvalidQuantity> {
    Ok(PersistentVolumeClaimSpec {
        access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
        resources: Some(k8s_openapi::api::core::v1::VolumeResourceRequirements {
            requests: Some(BTreeMap::from([("storage".to_owned(), quantity::canonical(size)?)])),
            ..Default::default()
        }),
        storage_class_name: class.cloned(),
        // The API server defaults this inside the template; Metacontroller replaces
        // the template list wholesale, so a missing default is a diff on every sync.
        volume_mode: Some("Filesystem".to_owned()),
        ..Default::default()
    })
}

/// Canonical resources, or why the API server would reject the StatefulSet that
/// carries them (which would also block scaling and every rollout step).
/// The exporter sidecar asked for, with canonical resources. Resources that cannot
/// be honoured keep the running sidecar's (or, without one, the defaults) and are
/// reported.
fn exporter(
    monitoring: Option<&crate::api::MonitoringSpec>,
    running: Option<&k8s_openapi::api::core::v1::PodSpec>,
    secret: Option<&BTreeMap<String, k8s_openapi::ByteString>>,
    problems: &mut Vec<Problem>,
) -> Option<Exporter> {
    let spec = &monitoring.filter(|m| m.exporter.enabled)?.exporter;
    let default = || crate::build::pod::small_resources("10m", "32Mi", "128Mi");
    let resources = match spec.resources.as_ref().map(checked_resources).transpose() {
        Ok(r) => r.unwrap_or_else(default),
        Err(e) => {
            problems.push(Problem {
                reason: "InvalidExporterResources",
                message: format!("spec.monitoring.exporter.resources: {e}; the running sidecar's are kept"),
            });
            running
                .and_then(|p| p.containers.iter().find(|c| c.name == EXPORTER))
                .and_then(|c| c.resources.clone())
                .unwrap_or_else(default)
        }
    };
    Some(Exporter {
        image: spec.image.clone().unwrap_or_else(|| DEFAULT_EXPORTER_IMAGE.to_owned()),
        resources,
        option_file: secret.is_none_or(|d| d.contains_key(crate::credentials::EXPORTER_CNF)),
    })
}

fn checked_resources(r: &ResourceRequirements) -> Result<ResourceRequirements, String> {
    let canonical = canonical_resources(r).map_err(|e| e.to_string())?;
    if canonical.claims.as_ref().is_some_and(|c| !c.is_empty()) {
        return Err("claims (dynamic resource allocation) are not supported for the servers".to_owned());
    }
    let value = |q: &Quantity| quantity::nanos(q).map_err(|e| e.to_string());
    for (kind, map) in [("requests", &canonical.requests), ("limits", &canonical.limits)] {
        for (name, q) in map.iter().flatten() {
            if value(q)? < 0 {
                return Err(format!("{kind}.{name} is negative ({})", q.0));
            }
        }
    }
    if let (Some(requests), Some(limits)) = (&canonical.requests, &canonical.limits) {
        for (name, request) in requests {
            if let Some(limit) = limits.get(name)
                && value(request)? > value(limit)?
            {
                return Err(format!("requests.{name} ({}) is above limits.{name} ({})", request.0, limit.0));
            }
        }
    }
    Ok(canonical)
}

fn canonical_resources(r: &ResourceRequirements) -> Result<ResourceRequirements, quantity::InvalidQuantity> {
    let canon = |m: &Option<BTreeMap<String, Quantity>>| {
        m.as_ref()
            .map(|m| {
                m.iter().map(|(k, v)| Ok((k.clone(), quantity::canonical(v)?))).collect::<Result<BTreeMap<_, _>, _>>()
            })
            .transpose()
    };
    Ok(ResourceRequirements { limits: canon(&r.limits)?, requests: canon(&r.requests)?, claims: r.claims.clone() })
}

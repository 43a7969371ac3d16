//! The StatefulSet `<name>`: the servers themselves.
//!
//! Each pod runs `init.sh` (initializes an empty data directory with the cluster's
//! users without writing GTIDs, writes the option file and the per-pod server id),
//! then mysqld, which always starts read-only, and `agent.sh`, a sidecar that keeps
//! a non-primary server replicating from the primary named in the ConfigMap. Pods
//! are managed in parallel so one unready pod never blocks the others (failover
//! depends on that).

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::{
            RollingUpdateStatefulSetStrategy, StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy,
            StatefulSetSpec, StatefulSetUpdateStrategy,
        },
        core::v1::{
            Affinity, Container, ContainerPort, ExecAction, Lifecycle, LifecycleHandler, PersistentVolumeClaim,
            PersistentVolumeClaimStatus, PodAffinityTerm, PodAntiAffinity, PodSpec, PodTemplateSpec, Probe,
            WeightedPodAffinityTerm,
        },
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta},
};

use super::{meta, pod};
use crate::{
    api::{DeletionPolicy, Flavor},
    labels, memory,
    model::{Cluster, DATA_VOLUME, MY_CNF, MYSQLD},
    names::short_hash,
    scripts,
};

/// Pod template annotation: a hash of the whole template without it. The rollout
/// compares it with the observed StatefulSet's to tell a new template, whatever
/// changed in it (version, image, configuration, resources, scripts image, ...).
pub const TEMPLATE_HASH: &str = "mysqlhook.dev/template-hash";
/// Pod template annotation: the server version the template runs, as declared (so
/// a custom image without a version tag still says which version its pods ran).
pub const VERSION: &str = "mysqlhook.dev/version";
const DATA_DIR: &str = "/var/lib/mysql";
const CONF_DIR: &str = "/etc/mysql/conf.d";

/// Builds the StatefulSet. `partition` holds back pods with a lower ordinal during
/// an ordered rollout.
#[must_use]
pub fn build(c: &Cluster, partition: i32) -> StatefulSet {
    let selector = labels::database_selector(&c.names);
    StatefulSet {
        metadata: meta(&c.names.stateful_set, labels::common(&c.names, labels::DATABASE)),
        spec: StatefulSetSpec {
            replicas: Some(c.replicas),
            service_name: Some(c.names.headless.clone()),
            selector: LabelSelector { match_labels: Some(selector.clone()), ..Default::default() },
            pod_management_policy: Some("Parallel".to_owned()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("RollingUpdate".to_owned()),
                rolling_update: Some(RollingUpdateStatefulSetStrategy {
                    partition: Some(partition),
                    ..Default::default()
                }),
            }),
            persistent_volume_claim_retention_policy: Some(StatefulSetPersistentVolumeClaimRetentionPolicy {
                when_deleted: Some(
                    match c.deletion_policy {
                        DeletionPolicy::Delete => "Delete",
                        DeletionPolicy::Retain | DeletionPolicy::Backup => "Retain",
                    }
                    .to_owned(),
                ),
                when_scaled: Some("Retain".to_owned()),
            }),
            volume_claim_templates: Some(vec![PersistentVolumeClaim {
                metadata: ObjectMeta { name: Some(DATA_VOLUME.to_owned()), ..Default::default() },
                spec: Some(c.volume.clone()),
                // The API server stores `status: {phase: Pending}` in every claim
                // template. Emitting it too keeps Metacontroller's merge (which
                // replaces this list whole) from seeing a difference on every sync.
                status: Some(PersistentVolumeClaimStatus { phase: Some("Pending".to_owned()), ..Default::default() }),
            }]),
            template: template(c),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The servers' pod template, with its [`TEMPLATE_HASH`].
#[must_use]
pub fn template(c: &Cluster) -> PodTemplateSpec {
    let selector = labels::database_selector(&c.names);
    let mut template = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels::common(&c.names, labels::DATABASE)),
            annotations: Some(BTreeMap::from([(VERSION.to_owned(), c.version.clone())])),
            ..Default::default()
        }),
        spec: Some(pod_spec(c, &selector)),
    };
    let hash = short_hash(&serde_json::to_vec(&template).unwrap_or_default());
    if let Some(a) = template.metadata.as_mut().and_then(|m| m.annotations.as_mut()) {
        a.insert(TEMPLATE_HASH.to_owned(), hash);
    }
    template
}

/// The [`TEMPLATE_HASH`] of a pod template, if it has one.
#[must_use]
pub fn template_hash(template: &PodTemplateSpec) -> Option<&str> {
    template.metadata.as_ref()?.annotations.as_ref()?.get(TEMPLATE_HASH).map(String::as_str)
}

fn pod_spec(c: &Cluster, selector: &BTreeMap<String, String>) -> PodSpec {
    let mut env = pod::server_env(c);
    env.extend([
        pod::env("CONF_DIR", CONF_DIR),
        pod::env("DATA_DIR", DATA_DIR),
        pod::env("PRIMARY_FILE", scripts::config_path(memory::PRIMARY_KEY)),
        // spec.replication, followed without a restart (the config ConfigMap).
        pod::env("MAX_LAG_FILE", scripts::config_path(memory::MAX_LAG_KEY)),
        pod::env("REBUILD_ERRANT_FILE", scripts::config_path(memory::REBUILD_ERRANT_KEY)),
        pod::env("MY_CNF", format!("{}/{MY_CNF}", pod::OPTION_FILE_DIR)),
        // Written by join.sh (agent) when this server has diverged, read by probe.sh
        // (mysqld): /tmp is the emptyDir both containers mount.
        pod::env("REBUILD_MARKER", "/tmp/mysql-hook-rebuild-needed"),
        // Held by seed.sh (agent) while it copies a donor, read by probe.sh.
        pod::env("SEED_MARKER", "/tmp/mysql-hook-seeding"),
        pod::env("TERMINATION_LOG", "/dev/termination-log"),
    ]);
    let mounts = vec![
        pod::mount(DATA_DIR_VOLUME, DATA_DIR, false),
        pod::mount("conf", CONF_DIR, false),
        pod::mount("run", "/var/run/mysqld", false),
        pod::mount("tmp", "/tmp", false),
        pod::config_mount(),
        pod::mount(pod::OPTION_FILE_VOLUME, pod::OPTION_FILE_DIR, true),
        pod::scripts_mount(),
        pod::credentials_mount(),
    ];
    let container = |name: &str, command: Vec<String>| Container {
        name: name.to_owned(),
        image: Some(c.image.clone()),
        command: Some(command),
        env: Some(env.clone()),
        volume_mounts: Some(mounts.clone()),
        security_context: Some(pod::container_security()),
        ..Default::default()
    };
    // `probe.sh liveness` is a ping that passes even when the login is refused;
    // `probe.sh readiness` also requires the recorded primary, once bootstrapped,
    // to be writable: a primary that restarted read-only turns NotReady, and
    // automatic failover (or the same server, promoted again) takes over.
    let probe = |check: &str, period: i32, failures: i32| Probe {
        exec: Some(ExecAction { command: Some(vec!["bash".to_owned(), scripts::path("probe.sh"), check.to_owned()]) }),
        period_seconds: Some(period),
        timeout_seconds: Some(5),
        failure_threshold: Some(failures),
        ..Default::default()
    };
    PodSpec {
        init_containers: Some(vec![pod::install_scripts(c), container("init", pod::run_script("init.sh"))]),
        containers: vec![
            Container {
                ports: Some(vec![ContainerPort {
                    name: Some("mysql".to_owned()),
                    container_port: 3306,
                    ..Default::default()
                }]),
                resources: c.resources.clone(),
                // Startup may replay a long redo log: up to 10 minutes before liveness applies.
                startup_probe: Some(probe("liveness", 10, 60)),
                liveness_probe: Some(probe("liveness", 10, 6)),
                readiness_probe: Some(probe("readiness", 2, 2)),
                // A primary being deleted (drain, eviction) keeps serving until the
                // hook's switchover has handed its role over (or PRESTOP_WAIT, below
                // the grace period, has passed): seconds of refused writes, not a failover.
                lifecycle: Some(Lifecycle {
                    pre_stop: Some(LifecycleHandler {
                        exec: Some(ExecAction { command: Some(pod::run_script("prestop.sh")) }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..container(MYSQLD, vec![server_binary(c.flavor).to_owned()])
            },
            Container {
                resources: Some(pod::small_resources("10m", "32Mi", "128Mi")),
                ..container("agent", pod::run_script("agent.sh"))
            },
        ],
        volumes: Some(vec![
            pod::config_volume(c),
            pod::option_file_volume(c),
            pod::scripts_volume(),
            pod::credentials_volume(c),
            pod::empty_dir("conf"),
            pod::empty_dir("run"),
            pod::empty_dir("tmp"),
        ]),
        security_context: Some(pod::pod_security()),
        // mysqld flushes and closes cleanly on SIGTERM; give a large buffer pool time.
        termination_grace_period_seconds: Some(120),
        affinity: Some(Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(vec![WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        topology_key: "kubernetes.io/hostname".to_owned(),
                        label_selector: Some(LabelSelector {
                            match_labels: Some(selector.clone()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        enable_service_links: Some(false),
        // Nothing in the pod talks to the Kubernetes API.
        automount_service_account_token: Some(false),
        ..Default::default()
    }
}

const DATA_DIR_VOLUME: &str = DATA_VOLUME;

/// The server binary of each image.
fn server_binary(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Mysql => "mysqld",
        Flavor::Mariadb => "mariadbd",
    }
}

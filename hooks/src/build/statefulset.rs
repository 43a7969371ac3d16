//! The StatefulSet `<name>`: the servers themselves.
//!
//! Each pod runs `init.sh` (initializes an empty data directory with the cluster's
//! users without writing GTIDs, writes the option file and the per-pod server id),
//! then mysqld, which always starts read-only, and the agent (`mysql-hook-agent
//! sidecar`), which keeps a non-primary server replicating from the primary named
//! in the ConfigMap and answers mysqld's readiness from a session it keeps open. Pods
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
            Affinity, Container, ContainerPort, EnvVar, ExecAction, HTTPGetAction, Lifecycle, LifecycleHandler,
            PersistentVolumeClaim, PersistentVolumeClaimStatus, PodAffinityTerm, PodAntiAffinity, PodSpec,
            PodTemplateSpec, Probe, SecretVolumeSource, TopologySpreadConstraint, Volume, WeightedPodAffinityTerm,
        },
    },
    apimachinery::pkg::{
        apis::meta::v1::{LabelSelector, ObjectMeta},
        util::intstr::IntOrString,
    },
};

use super::{meta, pod};
use crate::{
    api::{AntiAffinity, DeletionPolicy, Flavor},
    credentials, labels, memory,
    model::{Cluster, DATA_VOLUME, MY_CNF, MYSQLD},
    names::short_hash_json,
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
pub fn build(c: &Cluster, partition: i32, template: PodTemplateSpec) -> StatefulSet {
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
                when_deleted: Some(claims_when_deleted(c).to_owned()),
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
            template,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// What becomes of the volume claims when the StatefulSet is deleted, from
/// `spec.deletionPolicy` (finalize waits for the StatefulSet to carry it).
#[must_use]
pub fn claims_when_deleted(c: &Cluster) -> &'static str {
    match c.deletion_policy {
        DeletionPolicy::Delete => "Delete",
        DeletionPolicy::Retain | DeletionPolicy::Backup => "Retain",
    }
}

/// The servers' pod template, with its [`TEMPLATE_HASH`].
#[must_use]
pub fn template(c: &Cluster) -> PodTemplateSpec {
    let selector = labels::database_selector(&c.names);
    // Extra labels and annotations first, the hook's own over them (model.rs has
    // already removed and reported any that would clash).
    let mut pod_labels = c.placement.labels.clone();
    pod_labels.extend(labels::common(&c.names, labels::DATABASE));
    let mut annotations = c.placement.annotations.clone();
    annotations.insert(VERSION.to_owned(), c.version.clone());
    let mut template = PodTemplateSpec {
        metadata: Some(ObjectMeta { labels: Some(pod_labels), annotations: Some(annotations), ..Default::default() }),
        spec: Some(pod_spec(c, &selector)),
    };
    let hash = short_hash_json(&template);
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
        pod::env("EPOCH_FILE", scripts::config_path(memory::EPOCH_KEY)),
        // spec.replication, followed without a restart (the config ConfigMap).
        pod::env("MAX_LAG_FILE", scripts::config_path(memory::MAX_LAG_KEY)),
        pod::env("REBUILD_ERRANT_FILE", scripts::config_path(memory::REBUILD_ERRANT_KEY)),
        pod::env("MY_CNF", format!("{}/{MY_CNF}", pod::OPTION_FILE_DIR)),
        // Written by join.sh (agent) when this server has diverged, read by the
        // probes (mysqld): /tmp is the emptyDir both containers mount.
        pod::env("REBUILD_MARKER", "/tmp/mysql-hook-rebuild-needed"),
        // Held by seed.sh (agent) while it copies a donor, read by the probes.
        pod::env("SEED_MARKER", "/tmp/mysql-hook-seeding"),
        pod::env("TERMINATION_LOG", "/dev/termination-log"),
    ]);
    // spec.tls: the mode follows the config ConfigMap (verification starts once
    // every server serves the certificate, without a restart).
    if c.tls.is_some() {
        env.push(pod::env("TLS_MODE_FILE", scripts::config_path(crate::tls::MODE_KEY)));
    }
    // The operator account: whether root's network accounts may go yet
    // (`mysql-hook-agent operator-user`, run by the agent on the primary).
    if c.operator_account {
        env.push(pod::env("ROOT_REMOTE_FILE", scripts::config_path(memory::ROOT_REMOTE_KEY)));
    }
    let mut mounts = vec![
        pod::mount(DATA_DIR_VOLUME, DATA_DIR, false),
        pod::mount("conf", CONF_DIR, false),
        pod::mount("run", "/var/run/mysqld", false),
        pod::mount("tmp", "/tmp", false),
        pod::mount("files", crate::mycnf::FILES_DIR, false),
        pod::config_mount(),
        pod::mount(pod::OPTION_FILE_VOLUME, pod::OPTION_FILE_DIR, true),
        pod::scripts_mount(),
        pod::credentials_mount(),
    ];
    if c.tls.is_some() {
        mounts.push(pod::mount(crate::tls::TLS_VOLUME, crate::tls::TLS_DIR, true));
    }
    let container = |name: &str, command: Vec<String>| Container {
        name: name.to_owned(),
        image: Some(c.image.clone()),
        command: Some(command),
        env: Some(env.clone()),
        volume_mounts: Some(mounts.clone()),
        security_context: Some(pod::container_security()),
        ..Default::default()
    };
    // The agent's probes (agent/src/probe.rs). mysqld's liveness is an exec of the
    // static agent, one session over the socket: it passes when the server
    // answers, even refusing the login, and does not depend on the sidecar (an
    // agent that stopped answering can never get the database restarted).
    // Readiness is answered over HTTP by the sidecar from a session it keeps open
    // (no process per probe): it also requires the recorded primary, once
    // bootstrapped, to be writable, so a primary that restarted read-only turns
    // NotReady and automatic failover (or the same server, promoted again) takes
    // over. The agent container's own readiness says whether the server could be
    // promoted (a failover candidate).
    let probe = |check: &str, period: i32, failures: i32| Probe {
        exec: Some(ExecAction {
            command: Some(vec![scripts::path(scripts::AGENT), "probe".to_owned(), check.to_owned()]),
        }),
        period_seconds: Some(period),
        timeout_seconds: Some(5),
        failure_threshold: Some(failures),
        ..Default::default()
    };
    let http = |path: &str, period: i32, failures: i32| Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            // by number: a probe resolves a port name among its own container's
            // ports, and mysqld's readiness is answered by the agent container
            port: IntOrString::Int(AGENT_PORT),
            // as the API server stores it, so the emitted template never differs
            scheme: Some("HTTP".to_owned()),
            ..Default::default()
        }),
        period_seconds: Some(period),
        timeout_seconds: Some(5),
        failure_threshold: Some(failures),
        ..Default::default()
    };
    PodSpec {
        init_containers: Some(vec![pod::install_scripts(c), container("init", pod::run_script("init.sh"))]),
        containers: [
            Container {
                ports: Some(vec![ContainerPort {
                    name: Some("mysql".to_owned()),
                    container_port: 3306,
                    ..Default::default()
                }]),
                resources: c.resources.clone(),
                // Startup may replay a long redo log: up to 10 minutes before liveness
                // applies. Asked every second: readiness waits for it, and a restarted
                // server (read-only until a Job reopens it) is Ready within a second of
                // answering instead of up to 10 s later (issue 35.1).
                startup_probe: Some(probe("liveness", 1, 600)),
                liveness_probe: Some(probe("liveness", 10, 6)),
                readiness_probe: Some(http("/readyz", 2, 2)),
                // A primary being deleted (drain, eviction) keeps serving until the
                // hook's switchover has handed its role over (or PRESTOP_WAIT, below
                // the grace period, has passed): seconds of refused writes, not a failover.
                lifecycle: Some(Lifecycle {
                    pre_stop: Some(LifecycleHandler {
                        exec: Some(ExecAction { command: Some(pod::Program::Agent("prestop").command()) }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..container(MYSQLD, vec![server_binary(c.flavor).to_owned()])
            },
            Container {
                resources: Some(pod::small_resources("10m", "32Mi", "128Mi")),
                env: Some(env.iter().cloned().chain(agent_env(c)).chain(exporter_account_env(c)).collect()),
                volume_mounts: Some(
                    mounts
                        .iter()
                        .cloned()
                        .chain(c.exporter.as_ref().map(|_| pod::mount("exporter-secret", EXPORTER_SECRET_DIR, true)))
                        .collect(),
                ),
                ports: Some(vec![ContainerPort {
                    name: Some(AGENT_PORT_NAME.to_owned()),
                    container_port: AGENT_PORT,
                    ..Default::default()
                }]),
                readiness_probe: Some(http("/candidate", 2, 1)),
                ..container(AGENT, vec![scripts::path(scripts::AGENT), "sidecar".to_owned()])
            },
        ]
        .into_iter()
        .chain(exporter(c))
        .collect(),
        volumes: Some(
            vec![pod::config_volume(c), pod::option_file_volume(c), pod::scripts_volume(), pod::credentials_volume(c)]
                .into_iter()
                .chain(c.exporter.as_ref().map(|_| Volume {
                    name: "exporter-secret".to_owned(),
                    secret: Some(SecretVolumeSource {
                        secret_name: Some(c.names.exporter.clone()),
                        default_mode: Some(0o440),
                        optional: Some(false),
                        ..Default::default()
                    }),
                    ..Default::default()
                }))
                .chain(c.tls.as_ref().map(crate::tls::server_volume))
                .chain([pod::empty_dir("conf"), pod::empty_dir("run"), pod::empty_dir("tmp"), pod::empty_dir("files")])
                .collect(),
        ),
        security_context: Some(pod::pod_security()),
        // mysqld flushes and closes cleanly on SIGTERM; give a large buffer pool time.
        termination_grace_period_seconds: Some(120),
        affinity: Some(affinity(c, selector)),
        topology_spread_constraints: spread(c, selector),
        enable_service_links: Some(false),
        // Nothing in the pod talks to the Kubernetes API.
        automount_service_account_token: Some(false),
        node_selector: (!c.placement.node_selector.is_empty()).then(|| c.placement.node_selector.clone()),
        tolerations: (!c.placement.tolerations.is_empty()).then(|| c.placement.tolerations.clone()),
        priority_class_name: c.placement.priority_class_name.clone(),
        image_pull_secrets: (!c.placement.image_pull_secrets.is_empty())
            .then(|| c.placement.image_pull_secrets.clone()),
        ..Default::default()
    }
}

/// `spec.pod.affinity` when given; else the servers spread over nodes, preferred or
/// required (`spec.pod.antiAffinity`): a node lost then takes one server, not two.
fn affinity(c: &Cluster, selector: &BTreeMap<String, String>) -> Affinity {
    if let Some(a) = &c.placement.affinity {
        return a.clone();
    }
    let term = PodAffinityTerm {
        topology_key: "kubernetes.io/hostname".to_owned(),
        label_selector: Some(LabelSelector { match_labels: Some(selector.clone()), ..Default::default() }),
        ..Default::default()
    };
    let anti = match c.placement.anti_affinity {
        AntiAffinity::Preferred => PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![WeightedPodAffinityTerm {
                weight: 100,
                pod_affinity_term: term,
            }]),
            ..Default::default()
        },
        AntiAffinity::Required => PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![term]),
            ..Default::default()
        },
    };
    Affinity { pod_anti_affinity: Some(anti), ..Default::default() }
}

/// `spec.pod.topologySpreadConstraints`, each selecting the servers when it names no
/// pods of its own.
fn spread(c: &Cluster, selector: &BTreeMap<String, String>) -> Option<Vec<TopologySpreadConstraint>> {
    let constraints: Vec<TopologySpreadConstraint> = c
        .placement
        .topology_spread_constraints
        .iter()
        .map(|t| {
            let mut t = t.clone();
            if t.label_selector.is_none() {
                t.label_selector = Some(LabelSelector { match_labels: Some(selector.clone()), ..Default::default() });
            }
            t
        })
        .collect();
    (!constraints.is_empty()).then_some(constraints)
}

const DATA_DIR_VOLUME: &str = DATA_VOLUME;

/// The socket the exporter logs in through: mysqld's own in both images, on the
/// `run` emptyDir the containers share. A socket login is how MySQL 8.4's default
/// `caching_sha2_password` works without TLS, and it keeps the account local.
pub const SOCKET: &str = "/var/run/mysqld/mysqld.sock";
/// The exporter's account (`mysql-hook-agent exporter-user` makes it: `'exporter'@'localhost'`).
/// The agent sidecar's container name (`mysql-hook-agent sidecar`).
pub const AGENT: &str = "agent";
/// The port the sidecar answers the probes on (`AGENT_LISTEN`, its default), and
/// its name in the pod.
pub const AGENT_PORT: i32 = 9106;
const AGENT_PORT_NAME: &str = "agent";
pub const EXPORTER_USER: &str = "exporter";
/// The exporter's port.
pub const EXPORTER_PORT: i32 = 9104;

/// For the agent: the address clients write through, so that an old primary's
/// agent can tell when the `-primary` Service has left it and end the client
/// sessions it led there (`mysql-hook-agent` `stranded`, issue 35.1).
fn agent_env(c: &Cluster) -> [EnvVar; 1] {
    [pod::env("PRIMARY_SERVICE", format!("{}.{}.svc:3306", c.names.primary, c.namespace))]
}

/// For the agent, with the exporter: it keeps the account `exporter` on the primary
/// with this password (`mysql-hook-agent exporter-user`), checking it through the socket.
fn exporter_account_env(c: &Cluster) -> Vec<EnvVar> {
    if c.exporter.is_none() {
        return Vec::new();
    }
    vec![
        pod::env("EXPORTER_PASSWORD_FILE", format!("{EXPORTER_SECRET_DIR}/{}", credentials::EXPORTER_PASSWORD)),
        pod::env("EXPORTER_SOCKET", SOCKET),
    ]
}

/// Where the agent finds the exporter's password (a file, never its environment).
const EXPORTER_SECRET_DIR: &str = "/etc/mysql-hook-exporter";

/// The `mysqld_exporter` sidecar, when asked for. It has no probes on purpose: a
/// container that is not Ready makes the pod not Ready, and a primary pod that is
/// not Ready is failed over; an exporter that cannot log in says so itself
/// (`mysql_up 0`). It mounts only the socket's directory, read-only, and its
/// Secret's option file (`--config.my-cnf`, read by every release: Debian's 0.14
/// as well as upstream's current ones).
fn exporter(c: &Cluster) -> Option<Container> {
    let e = c.exporter.as_ref()?;
    let listen = format!("--web.listen-address=:{EXPORTER_PORT}");
    let socket = pod::mount("run", "/var/run/mysqld", true);
    let (args, env, mounts) = if e.option_file {
        let cnf = format!("--config.my-cnf={EXPORTER_SECRET_DIR}/{}", credentials::EXPORTER_CNF);
        (vec![cnf, listen], None, vec![socket, pod::mount("exporter-secret", EXPORTER_SECRET_DIR, true)])
    } else {
        // A Secret from before the option file: the flags it was made with.
        let args =
            vec![format!("--mysqld.address=unix://{SOCKET}"), format!("--mysqld.username={EXPORTER_USER}"), listen];
        let env = pod::secret_env("MYSQLD_EXPORTER_PASSWORD", &c.names.exporter, credentials::EXPORTER_PASSWORD);
        (args, Some(vec![env]), vec![socket])
    };
    Some(Container {
        name: crate::model::EXPORTER.to_owned(),
        image: Some(e.image.clone()),
        args: Some(args),
        env,
        ports: Some(vec![ContainerPort {
            name: Some("metrics".to_owned()),
            container_port: EXPORTER_PORT,
            ..Default::default()
        }]),
        resources: Some(e.resources.clone()),
        volume_mounts: Some(mounts),
        security_context: Some(pod::container_security()),
        ..Default::default()
    })
}

/// The server binary of each image.
fn server_binary(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Mysql => "mysqld",
        Flavor::Mariadb => "mariadbd",
    }
}

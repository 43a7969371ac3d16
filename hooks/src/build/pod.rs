//! Pieces shared by the server pods and the Job pods: the environment contract of
//! the scripts, volumes, and a security context that meets the "restricted" Pod
//! Security Standard.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{
        Capabilities, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, KeyToPath,
        ObjectFieldSelector, PodSecurityContext, ResourceRequirements, SeccompProfile, SecretKeySelector,
        SecretVolumeSource, SecurityContext, Volume, VolumeMount,
    },
    apimachinery::pkg::api::resource::Quantity,
};

use crate::{credentials, model::Cluster, scripts};

/// The uid and gid of the `mysql` user in both the MySQL and the MariaDB images.
pub const MYSQL_UID: i64 = 999;

/// Name of the volume that mounts the config ConfigMap.
pub const CONFIG_VOLUME: &str = "mysql-hook";
/// Name of the emptyDir the scripts are installed into.
pub const SCRIPTS_VOLUME: &str = "scripts";
/// Name of the init container that installs them.
pub const INSTALL_SCRIPTS: &str = "install-scripts";

/// `NAME=value`.
#[must_use]
pub fn env(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar { name: name.to_owned(), value: Some(value.into()), ..Default::default() }
}

/// `NAME` from key `key` of Secret `secret`.
#[must_use]
pub fn secret_env(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_owned(),
                key: key.to_owned(),
                optional: Some(false),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The variables every Job script reads (see `hooks/scripts/README.md`): a Job is
/// created for the membership of its moment, so `PODS` is part of it. The passwords
/// are files of the [`credentials_volume`] (mounted by [`credentials_mount`]), never
/// environment variables: an environment is inherited by every process a script
/// starts, readable in `/proc/<pid>/environ` and shown by `kubectl describe`.
#[must_use]
pub fn script_env(c: &Cluster) -> Vec<EnvVar> {
    let mut vars = credentials_env(c, jobs_hold_root(c));
    vars.insert(2, env("PODS", c.pods_env()));
    // spec.tls once every server serves it (see [`crate::tls`]): a Job made now
    // verifies; one made before connects as it was made to.
    if c.tls.as_ref().is_some_and(|t| t.verify) {
        vars.push(env(crate::tls::MODE_ENV, crate::tls::VERIFY));
    }
    vars
}

/// A Job pod whose scripts verify the servers (`TLS_MODE` in their environment, from
/// [`script_env`]) gets the CA of `spec.tls`, and nothing else of its Secret.
pub fn add_job_tls(c: &Cluster, spec: &mut k8s_openapi::api::core::v1::PodSpec) {
    let Some(tls) = c.tls.as_ref().filter(|t| t.verify) else { return };
    let verifies = |k: &Container| k.env.iter().flatten().any(|e| e.name == crate::tls::MODE_ENV);
    let mut any = false;
    for k in spec.init_containers.iter_mut().flatten().chain(spec.containers.iter_mut()).filter(|k| verifies(k)) {
        k.volume_mounts.get_or_insert_with(Vec::new).push(mount(crate::tls::TLS_VOLUME, crate::tls::TLS_DIR, true));
        any = true;
    }
    if any {
        spec.volumes.get_or_insert_with(Vec::new).push(crate::tls::job_volume(tls));
    }
}

/// The variables of the server pods' scripts. The membership is not among them:
/// it lives in the config ConfigMap (`pods`, read through `PODS_FILE`), so scaling
/// changes no pod template and restarts no server; a new pod that starts before
/// its kubelet sees the new file knows its own address from `POD_HOST`.
#[must_use]
pub fn server_env(c: &Cluster) -> Vec<EnvVar> {
    let mut vars = credentials_env(c, true);
    vars.extend([
        pod_name_env(),
        env("POD_HOST", format!("$(POD_NAME).{}.{}.svc:3306", c.names.headless, c.namespace)),
        env("PODS_FILE", scripts::config_path(crate::memory::PODS_KEY)),
    ]);
    vars
}

fn credentials_env(c: &Cluster, root: bool) -> Vec<EnvVar> {
    let mut vars = vec![env("FLAVOR", c.flavor.as_str()), env("CLUSTER", c.names.cluster.as_str())];
    if root {
        vars.push(env("MYSQL_ROOT_PASSWORD_FILE", credentials_path(credentials::ROOT_PASSWORD)));
    }
    vars.push(env("REPLICATION_PASSWORD_FILE", credentials_path(credentials::REPLICATION_PASSWORD)));
    if c.operator_account {
        vars.push(env(OPERATOR_PASSWORD_FILE, credentials_path(credentials::OPERATOR_PASSWORD)));
    }
    vars
}

/// The variable that names the operator account's password file: set, the
/// scripts log in over the network as that account, and probes as root through
/// the socket (see [`Cluster::operator_account`]).
pub const OPERATOR_PASSWORD_FILE: &str = "OPERATOR_PASSWORD_FILE";

/// Where the credentials Secret's keys are mounted, read-only.
pub const CREDENTIALS_DIR: &str = "/etc/mysql-hook-credentials";
/// Name of the volume of the credentials Secret.
pub const CREDENTIALS_VOLUME: &str = "credentials";

fn credentials_path(key: &str) -> String {
    format!("{CREDENTIALS_DIR}/{key}")
}

/// The password keys of the credentials Secret as files (the operator's only
/// when the Secret has it), readable by the `mysql` group only (`fsGroup`): for
/// the server pods.
#[must_use]
pub fn credentials_volume(c: &Cluster) -> Volume {
    credentials_keys_volume(c, true)
}

/// The same for a Job's pod: without root's password once root is local only
/// ([`jobs_hold_root`]).
#[must_use]
pub fn job_credentials_volume(c: &Cluster) -> Volume {
    credentials_keys_volume(c, jobs_hold_root(c))
}

/// Whether Jobs get root's password: not once every server runs with the operator
/// account (`rootRemote: drop`), when root has no network account left for a Job
/// to use; its password then stays in the server pods, where root can log in.
#[must_use]
pub fn jobs_hold_root(c: &Cluster) -> bool {
    !(c.operator_account && c.root_remote_drop)
}

fn credentials_keys_volume(c: &Cluster, root: bool) -> Volume {
    let mut keys: Vec<&str> = Vec::new();
    if root {
        keys.push(credentials::ROOT_PASSWORD);
    }
    keys.push(credentials::REPLICATION_PASSWORD);
    if c.operator_account {
        keys.push(credentials::OPERATOR_PASSWORD);
    }
    secret_keys_volume(CREDENTIALS_VOLUME, &c.credentials_secret, &keys)
}

/// Volume `name`: the keys `keys` of Secret `secret` as files of the same names,
/// readable by the `mysql` group only (`fsGroup`); the pod does not start without
/// them.
#[must_use]
pub fn secret_keys_volume(name: &str, secret: &str, keys: &[&str]) -> Volume {
    Volume {
        name: name.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.to_owned()),
            items: Some(
                keys.iter()
                    .map(|k| KeyToPath { key: (*k).to_owned(), path: (*k).to_owned(), ..Default::default() })
                    .collect(),
            ),
            default_mode: Some(0o440),
            optional: Some(false),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The credentials, for the containers that run scripts (and mysqld's probes).
#[must_use]
pub fn credentials_mount() -> VolumeMount {
    mount(CREDENTIALS_VOLUME, CREDENTIALS_DIR, true)
}

/// `POD_NAME` from the downward API.
#[must_use]
pub fn pod_name_env() -> EnvVar {
    EnvVar {
        name: "POD_NAME".to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector { field_path: "metadata.name".to_owned(), ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The name of the volume of a pod's own option file.
pub const OPTION_FILE_VOLUME: &str = "mysql-hook-cnf";
/// Where a server pod's own option file is mounted.
pub const OPTION_FILE_DIR: &str = "/etc/mysql-hook-cnf";

/// The option file ConfigMap of this template's revision, as a volume.
#[must_use]
pub fn option_file_volume(c: &Cluster) -> Volume {
    Volume {
        name: OPTION_FILE_VOLUME.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: c.names.option_file(&c.config_hash),
            default_mode: Some(0o444),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The config ConfigMap as a volume: current primary and membership.
#[must_use]
pub fn config_volume(c: &Cluster) -> Volume {
    Volume {
        name: CONFIG_VOLUME.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: c.names.config.clone(),
            default_mode: Some(0o444),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A scratch volume.
#[must_use]
pub fn empty_dir(name: &str) -> Volume {
    Volume { name: name.to_owned(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Default::default() }
}

#[must_use]
pub fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..Default::default()
    }
}

/// The config ConfigMap mounted where the scripts expect it.
#[must_use]
pub fn config_mount() -> VolumeMount {
    mount(CONFIG_VOLUME, scripts::CONFIG_DIR, true)
}

/// The emptyDir the scripts are installed into.
#[must_use]
pub fn scripts_volume() -> Volume {
    empty_dir(SCRIPTS_VOLUME)
}

/// The installed scripts, read-only, for the containers that run them.
#[must_use]
pub fn scripts_mount() -> VolumeMount {
    mount(SCRIPTS_VOLUME, scripts::DIR, true)
}

/// The first init container of every pod: copies the scripts out of the hook's own
/// image (`mysql-hook install-scripts`), so the server image needs nothing of ours.
#[must_use]
pub fn install_scripts(c: &Cluster) -> Container {
    Container {
        name: INSTALL_SCRIPTS.to_owned(),
        image: Some(c.scripts_image.clone()),
        command: Some(scripts::INSTALL_COMMAND.iter().map(|s| (*s).to_owned()).collect()),
        volume_mounts: Some(vec![mount(SCRIPTS_VOLUME, scripts::DIR, false)]),
        // It writes about 70 KB and exits.
        resources: Some(small_resources("10m", "16Mi", "64Mi")),
        security_context: Some(container_security()),
        ..Default::default()
    }
}

/// Where a Job pod runs, from `spec.pod`: the same nodes, taints, priority and
/// pull secrets as the servers (affinity and spread are the servers' own).
pub fn place_job(c: &Cluster, spec: &mut k8s_openapi::api::core::v1::PodSpec) {
    let p = &c.placement;
    spec.node_selector = (!p.node_selector.is_empty()).then(|| p.node_selector.clone());
    spec.tolerations = (!p.tolerations.is_empty()).then(|| p.tolerations.clone());
    spec.priority_class_name.clone_from(&p.priority_class_name);
    spec.image_pull_secrets = (!p.image_pull_secrets.is_empty()).then(|| p.image_pull_secrets.clone());
}

/// Pod-level security: non-root as the image's `mysql` user, RuntimeDefault seccomp.
#[must_use]
pub fn pod_security() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(MYSQL_UID),
        run_as_group: Some(MYSQL_UID),
        fs_group: Some(MYSQL_UID),
        seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".to_owned(), ..Default::default() }),
        ..Default::default()
    }
}

/// Container-level security: no privilege escalation, no capabilities, read-only
/// root filesystem (writable paths are emptyDirs).
#[must_use]
pub fn container_security() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities { drop: Some(vec!["ALL".to_owned()]), ..Default::default() }),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        ..Default::default()
    }
}

/// Requests `cpu` and `memory` and limits memory to `memory_limit`: for the small
/// containers beside the server (no CPU limit: throttling a probe or the agent
/// would only delay it).
#[must_use]
pub fn small_resources(cpu: &str, memory: &str, memory_limit: &str) -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), Quantity(cpu.to_owned())),
            ("memory".to_owned(), Quantity(memory.to_owned())),
        ])),
        limits: Some(BTreeMap::from([("memory".to_owned(), Quantity(memory_limit.to_owned()))])),
        ..Default::default()
    }
}

/// `bash <script>` for a shipped script.
#[must_use]
pub fn run_script(script: &str) -> Vec<String> {
    vec!["bash".to_owned(), scripts::path(script)]
}

/// What a container runs: a script of `hooks/scripts/` (run by the image's bash),
/// or a command of the agent (`mysql-hook-agent`, installed beside the scripts),
/// which replaces them one by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    Script(&'static str),
    Agent(&'static str),
}

impl Program {
    /// The container's command.
    #[must_use]
    pub fn command(self) -> Vec<String> {
        match self {
            Self::Script(script) => run_script(script),
            Self::Agent(command) => vec![scripts::path(scripts::AGENT), command.to_owned()],
        }
    }
}

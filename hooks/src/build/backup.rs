//! The pods that write and read backups: scheduled backups (a CronJob), one-shot
//! backups (`MySQLBackup` and the final backup on delete) and restores.
//!
//! The scripts run in the server image, which has the client tools but no S3
//! client. So for a PersistentVolumeClaim store a single container runs the script
//! against the mounted claim; for an S3 store the server image writes into a
//! scratch volume of bounded size in an init container and a second container,
//! from the configurable uploader image (`sh` plus the AWS CLI v2), runs
//! `s3.sh upload`: data first, `result.json` (the commit marker) last. Before the
//! dump, `s3.sh check` (uploader image) fails early on a store that cannot be used
//! and hands a backup an earlier attempt already committed back to `backup.sh`,
//! which reports it instead of dumping anew. Restores run `s3.sh download` (only
//! committed backups) before `restore.sh`, whose steps (check, load, finish) are
//! containers of their own so that the pod's status shows which one runs
//! ([`RESTORE_STEPS`]). Either way the pod's last container ends with the
//! script's one-line result in its termination message.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        batch::v1::{CronJob, CronJobSpec, JobSpec, JobTemplateSpec},
        core::v1::{
            Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, KeyToPath, ObjectFieldSelector,
            PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec, ResourceRequirements, SecretKeySelector,
            SecretVolumeSource, Volume, VolumeMount,
        },
    },
    apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::ObjectMeta},
};

use super::{meta, pod};
use crate::{
    access,
    api::{BackupStorage, S3Target, SecretKeyRef},
    labels,
    model::Cluster,
    scripts,
};

/// The uploader image when `s3.image` is unset: the AWS CLI release the tests run
/// against a real S3 server (Debian's `awscli` package is the same upstream
/// release, see `tests/scripts/objstore.py`).
pub const DEFAULT_UPLOADER_IMAGE: &str = "amazon/aws-cli:2.9.19";
/// Where a PersistentVolumeClaim store is mounted.
const PVC_MOUNT: &str = "/backups";
/// The scratch volume an S3 backup is staged in.
const STAGING: &str = "/backup";
/// A backup or restore may take long; bounded all the same (a restore's by
/// `spec.restore.timeoutSeconds` when set).
pub const DEADLINE_SECONDS: i64 = 6 * 3600;
/// A failed attempt is retried this many times (the scripts are idempotent).
pub const BACKOFF_LIMIT: i32 = 2;

/// What bounds one backup, archive or restore pod: its Job's deadline and the
/// resources of each of its containers (but the scripts' installer, which has
/// its own small ones).
#[derive(Debug, Clone)]
pub struct Bounds {
    pub deadline_seconds: i64,
    pub resources: ResourceRequirements,
    /// Size limit of the S3 staging volume and of `/tmp` (`spec.backup.workVolumeSize`;
    /// default, see [`staging_volume`]).
    pub work_volume_size: Option<Quantity>,
}

impl Bounds {
    /// From a `timeoutSeconds` (default [`DEADLINE_SECONDS`]) and a `resources`
    /// (default [`default_resources`]) of `spec.backup` or `spec.restore`, and
    /// `spec.backup.workVolumeSize`.
    #[must_use]
    pub fn from_spec(
        timeout_seconds: Option<i64>,
        resources: Option<&ResourceRequirements>,
        work_volume_size: Option<&Quantity>,
    ) -> Self {
        Bounds {
            deadline_seconds: timeout_seconds.unwrap_or(DEADLINE_SECONDS),
            resources: resources.cloned().unwrap_or_else(default_resources),
            work_volume_size: work_volume_size.cloned(),
        }
    }
}

/// The resources of a backup, archive or restore container when the spec sets
/// none: requests only, so the pod is Burstable, not BestEffort (the first a
/// node under pressure evicts, and refused where a ResourceQuota requires
/// requests); no limit, so a dump or a load is never throttled or OOM-killed
/// for using what the node has free.
#[must_use]
pub fn default_resources() -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), Quantity("100m".to_owned())),
            ("memory".to_owned(), Quantity("256Mi".to_owned())),
        ])),
        ..Default::default()
    }
}

/// A store with its prefix resolved.
#[must_use]
pub fn resolve(storage: &BackupStorage, default_prefix: &str) -> BackupStorage {
    let prefix = |p: &Option<String>| Some(p.clone().unwrap_or_else(|| default_prefix.to_owned()));
    BackupStorage {
        persistent_volume_claim: storage
            .persistent_volume_claim
            .as_ref()
            .map(|t| crate::api::PvcTarget { prefix: prefix(&t.prefix), ..t.clone() }),
        s3: storage.s3.as_ref().map(|t| S3Target { prefix: prefix(&t.prefix), ..t.clone() }),
    }
}

/// The prefix of a store that names none: `<namespace>/<cluster>` (as MOCO does),
/// so two clusters of the same name in different namespaces never write, or
/// prune, each other's backups.
#[must_use]
pub fn default_prefix(namespace: &str, cluster: &str) -> String {
    format!("{namespace}/{cluster}")
}

/// `pvc://<claim>/<prefix>/<name>` or `s3://<bucket>/<prefix>/<name>` of a
/// resolved store.
#[must_use]
pub fn location(storage: &BackupStorage, name: &str) -> String {
    location_in(store_location(storage).as_deref(), name)
}

/// `<store>/<name>`, or the name alone without a store.
#[must_use]
pub fn location_in(store: Option<&str>, name: &str) -> String {
    store.map_or_else(|| name.to_owned(), |s| format!("{s}/{name}"))
}

/// `pvc://<claim>/<prefix>` or `s3://<bucket>/<prefix>` of a resolved store (the
/// pods' [`labels::STORE`] annotation).
#[must_use]
pub fn store_location(storage: &BackupStorage) -> Option<String> {
    match (&storage.persistent_volume_claim, &storage.s3) {
        (Some(p), _) => Some(format!("pvc://{}/{}", p.claim_name, p.prefix.as_deref().unwrap_or_default())),
        (None, Some(s)) => Some(format!("s3://{}/{}", s.bucket, s.prefix.as_deref().unwrap_or_default())),
        (None, None) => None,
    }
}

/// The store a backup, archive or restore pod was built for (its
/// [`labels::STORE`] annotation), else `current` (pods of a release before the
/// annotation).
#[must_use]
pub fn written_to(pods: &[&k8s_openapi::api::core::v1::Pod], current: &BackupStorage) -> Option<String> {
    pods.iter()
        .find_map(|p| p.metadata.annotations.as_ref()?.get(labels::STORE).cloned())
        .or_else(|| store_location(current))
}

/// How the backup's name reaches the script.
#[derive(Debug, Clone)]
pub enum BackupName {
    /// Known to the hook.
    Fixed(String),
    /// The Job's own name, read from the pod's label: a CronJob names each Job
    /// `<cronjob>-<minutes since the epoch>`, so a retried pod of the same Job
    /// writes the same backup (and `backup.sh` reports an existing one again).
    FromJob,
}

/// Retention of scheduled backups: keep the newest `keep` complete backups whose
/// `OWNER` is exactly `owner` (never by name shape: a `MySQLBackup` or another
/// cluster's backup in the same prefix is never pruned).
#[derive(Debug, Clone)]
pub struct Retention {
    pub owner: String,
    pub keep: i32,
}

/// What a backup records as its `OWNER`: `<kind> <namespace>/<name> <uid>`, kind
/// `scheduled`, `final` or `mysqlbackup`.
#[must_use]
pub fn owner(kind: &str, namespace: &str, name: &str, uid: &str) -> String {
    format!("{kind} {namespace}/{name} {uid}")
}

/// One backup pod.
#[derive(Debug, Clone)]
pub struct BackupPod<'a> {
    pub cluster: &'a Cluster,
    /// Resolved store.
    pub storage: &'a BackupStorage,
    pub name: BackupName,
    /// `PRIMARY` for `backup.sh`: excluded when it looks for a healthy replica.
    pub primary: String,
    /// `PODS`, in the order `backup.sh` should try them.
    pub pods: String,
    pub retention: Option<Retention>,
    pub labels: BTreeMap<String, String>,
    /// The key `backup.sh` signs the backup with (`spec.backup.signingKey`).
    pub signing_key: Option<&'a SecretKeyRef>,
    /// `OWNER` of the backup (see [`owner`]).
    pub owner: String,
    /// Restore the backup into a throwaway server before it counts
    /// (`BACKUP_VERIFY`, `verify.sh`).
    pub verify: bool,
    /// The binary log archive holds the binary logs (`BACKUP_BINLOGS=archive`):
    /// the backup copies none.
    pub binlogs_archived: bool,
    /// The Job's deadline and the containers' resources (`spec.backup`).
    pub bounds: Bounds,
}

/// The Job spec of a backup.
#[must_use]
pub fn backup_job_spec(b: &BackupPod<'_>) -> JobSpec {
    let c = b.cluster;
    let mut env: Vec<EnvVar> = pod::script_env(c).into_iter().filter(|e| e.name != "PODS").collect();
    env.extend([
        pod::env("PODS", b.pods.as_str()),
        pod::env("PRIMARY", b.primary.as_str()),
        pod::env("TERMINATION_LOG", "/dev/termination-log"),
        pod::env("BACKUP_OWNER", b.owner.as_str()),
        backup_name_env(&b.name),
    ]);
    if b.verify {
        env.push(pod::env("BACKUP_VERIFY", "true"));
    }
    if b.binlogs_archived {
        env.push(pod::env("BACKUP_BINLOGS", "archive"));
    }
    let retention_env =
        |r: &Retention| [pod::env("RETENTION_OWNER", r.owner.as_str()), pod::env("KEEP", r.keep.to_string())];
    let (init, main, mut volumes) = match (&b.storage.persistent_volume_claim, &b.storage.s3) {
        (Some(pvc), _) => {
            let dir = format!("{PVC_MOUNT}/{}", pvc.prefix.as_deref().unwrap_or_default());
            env.push(pod::env("BACKUP_DIR", dir));
            // backup.sh prunes the store after a successful scheduled backup.
            env.extend(b.retention.iter().flat_map(retention_env));
            let script = format!("mkdir -p \"$BACKUP_DIR\" && exec bash {}\n", scripts::path("backup.sh"));
            let container = Container {
                volume_mounts: Some(vec![
                    pod::config_mount(),
                    pod::scripts_mount(),
                    pod::credentials_mount(),
                    pod::mount("tmp", "/tmp", false),
                    pod::mount("backups", PVC_MOUNT, false),
                ]),
                ..server_container(c, "backup", vec!["bash".to_owned(), "-c".to_owned(), script], env)
            };
            (vec![], container, vec![claim_volume(&pvc.claim_name, false)])
        }
        (None, Some(s3)) => {
            env.push(pod::env("BACKUP_DIR", STAGING));
            let dump = Container {
                volume_mounts: Some(vec![
                    pod::config_mount(),
                    pod::scripts_mount(),
                    pod::credentials_mount(),
                    pod::mount("tmp", "/tmp", false),
                    pod::mount("staging", STAGING, false),
                ]),
                ..server_container(c, "backup", pod::run_script("backup.sh"), env)
            };
            let mut s3_env = s3_env(s3);
            s3_env.push(backup_name_env(&b.name));
            let check = uploader(s3, "check", "check", s3_env.clone());
            s3_env.extend(b.retention.iter().flat_map(retention_env));
            (
                vec![check, dump],
                uploader(s3, "upload", "upload", s3_env),
                vec![staging_volume(c, b.bounds.work_volume_size.as_ref())],
            )
        }
        (None, None) => unreachable_storage(c),
    };
    let (mut init, mut main) = (init, main);
    for server in init.iter_mut().chain([&mut main]).filter(|k| k.name == "backup") {
        with_key(server, &mut volumes, b.signing_key, "BACKUP_SIGNING_KEY_FILE");
    }
    job_spec(c, b.storage, &b.labels, init, main, volumes, &b.bounds)
}

/// One restore pod: loads the backup into the server `target`.
#[derive(Debug, Clone)]
pub struct RestorePod<'a> {
    pub cluster: &'a Cluster,
    pub storage: &'a BackupStorage,
    pub name: &'a str,
    pub binlogs_from: Option<&'a str>,
    /// `YYYY-MM-DD HH:MM:SS`, UTC.
    pub until: Option<String>,
    pub target: String,
    pub labels: BTreeMap<String, String>,
    /// The key the backup's signature must verify with (`spec.restore.signingKey`).
    pub verify_key: Option<&'a SecretKeyRef>,
    /// The Job's deadline, which the script's load and replay may use whole, and
    /// the containers' resources (`spec.restore`).
    pub bounds: Bounds,
    /// `spec.restore.parallel`: clients loading the dump at once.
    pub parallel: Option<i32>,
}

/// The Job spec of a restore.
#[must_use]
pub fn restore_job_spec(r: &RestorePod<'_>) -> JobSpec {
    let c = r.cluster;
    let mut env = pod::script_env(c);
    env.extend([
        pod::env("POD_NAME", r.target.as_str()),
        pod::env("TERMINATION_LOG", "/dev/termination-log"),
        pod::env("RESTORE_DEADLINE_SECONDS", r.bounds.deadline_seconds.to_string()),
    ]);
    if let Some(until) = &r.until {
        env.push(pod::env("RESTORE_UNTIL", until.as_str()));
    }
    let mut mounts =
        vec![pod::config_mount(), pod::scripts_mount(), pod::credentials_mount(), pod::mount("tmp", "/tmp", false)];
    let (download, mut volumes) = match (&r.storage.persistent_volume_claim, &r.storage.s3) {
        (Some(pvc), _) => {
            let dir = format!("{PVC_MOUNT}/{}", pvc.prefix.as_deref().unwrap_or_default());
            env.push(pod::env("RESTORE_FROM", format!("{dir}/{}", r.name)));
            if let Some(b) = r.binlogs_from {
                env.push(pod::env("RESTORE_BINLOGS_FROM", format!("{dir}/{b}")));
            }
            if r.until.is_some() {
                env.push(pod::env("RESTORE_ARCHIVE", format!("{dir}/{ARCHIVE}")));
            }
            mounts.push(pod::mount("backups", PVC_MOUNT, true));
            (None, vec![claim_volume(&pvc.claim_name, true)])
        }
        (None, Some(s3)) => {
            env.push(pod::env("RESTORE_FROM", format!("{STAGING}/{}", r.name)));
            let mut download_env = s3_env(s3);
            download_env.push(pod::env("BACKUP_NAME", r.name));
            if let Some(b) = r.binlogs_from {
                env.push(pod::env("RESTORE_BINLOGS_FROM", format!("{STAGING}/{b}")));
                download_env.push(pod::env("BINLOGS_NAME", b));
            } else if r.until.is_some() {
                env.push(pod::env("RESTORE_ARCHIVE", format!("{STAGING}/{ARCHIVE}")));
                download_env.push(pod::env("ARCHIVE", "true"));
            }
            mounts.push(pod::mount("staging", STAGING, true));
            (
                Some(uploader(s3, "download", "download", download_env)),
                vec![staging_volume(c, r.bounds.work_volume_size.as_ref())],
            )
        }
        (None, None) => {
            let (init, main, volumes) = unreachable_storage(c);
            return job_spec(c, r.storage, &r.labels, init, main, volumes, &r.bounds);
        }
    };
    // A parallel load cuts the dump into pieces on a sized work volume first.
    let parallel = r.parallel.filter(|n| *n > 1);
    if let Some(n) = parallel {
        env.extend([pod::env("RESTORE_PARALLEL", n.to_string()), pod::env("RESTORE_WORK_DIR", PIECES)]);
    }
    // One container per step of restore.sh, so the pod's status shows where the
    // restore stands ([`RESTORE_STEPS`]); the last one carries the result.
    let [mut check, mut load, mut main] = RESTORE_STEPS.map(|(name, step)| {
        let mut env = env.clone();
        env.push(pod::env("RESTORE_STEP", step));
        Container {
            volume_mounts: Some(mounts.clone()),
            ..server_container(c, name, pod::run_script("restore.sh"), env)
        }
    });
    if let Some(key) = r.verify_key {
        volumes.push(key_volume(key));
        for step in [&mut check, &mut load, &mut main] {
            mount_key(step, "RESTORE_VERIFY_KEY_FILE");
        }
    }
    if parallel.is_some() {
        load.volume_mounts.get_or_insert_with(Vec::new).push(pod::mount("pieces", PIECES, false));
        volumes.push(Volume { name: "pieces".to_owned(), ..staging_volume(c, r.bounds.work_volume_size.as_ref()) });
    }
    let init = download.into_iter().chain([check, load]).collect();
    job_spec(c, r.storage, &r.labels, init, main, volumes, &r.bounds)
}

/// Where a parallel restore cuts the dump into pieces (`RESTORE_WORK_DIR`).
const PIECES: &str = "/restore-work";

/// The containers of a restore pod that run `restore.sh`, in order: (container,
/// `RESTORE_STEP`). Each is a step the pod's status shows; the last one (after the
/// uploader's `download` on S3) carries the result.
pub const RESTORE_STEPS: [(&str, &str); 3] =
    [(CHECK_CONTAINER, "check"), (LOAD_CONTAINER, "load"), (RESTORE_CONTAINER, "finish")];
/// The restore step that proves the backup and writes nothing.
pub const CHECK_CONTAINER: &str = "restore-check";
/// The restore step that loads the dump.
pub const LOAD_CONTAINER: &str = "restore-load";
/// The last restore step (replay, then done), which carries the result.
pub const RESTORE_CONTAINER: &str = "restore";

/// One run of the binary log archive (`binlog.sh`).
#[derive(Debug, Clone)]
pub struct ArchivePod<'a> {
    pub cluster: &'a Cluster,
    /// Resolved store.
    pub storage: &'a BackupStorage,
    pub labels: BTreeMap<String, String>,
    /// Archived files only the scheduled backups of this `OWNER` may need.
    pub retention_owner: String,
    /// The cluster's signing key (`spec.backup.signingKey`): with it, retention
    /// believes only the `POSITIONS` of backups signed with it.
    pub signing_key: Option<&'a SecretKeyRef>,
    /// The run's deadline ([`ARCHIVE_DEADLINE_SECONDS`]), each container's
    /// resources and the scratch volumes' size (`spec.backup`).
    pub bounds: Bounds,
}

/// The Job spec of a binary log archive run. A mounted store: `binlog.sh` writes
/// into `<prefix>/_binlog/` and prunes there. S3: `s3.sh archive-pull` fetches the
/// small files `binlog.sh` reads (never the archived files), `binlog.sh` writes the
/// new files into staging, and `s3.sh archive-push` uploads them (data before
/// sidecars) and deletes what retention let go.
#[must_use]
pub fn archive_job_spec(a: &ArchivePod<'_>) -> JobSpec {
    let c = a.cluster;
    let mut env = pod::script_env(c);
    env.extend([
        pod::env("PRIMARY", c.primary.as_str()),
        pod::env("TERMINATION_LOG", "/dev/termination-log"),
        pod::env("RETENTION_OWNER", a.retention_owner.as_str()),
    ]);
    let mounts = |store: VolumeMount| {
        vec![
            pod::config_mount(),
            pod::scripts_mount(),
            pod::credentials_mount(),
            pod::mount("tmp", "/tmp", false),
            store,
        ]
    };
    let (init, main, volumes) = match (&a.storage.persistent_volume_claim, &a.storage.s3) {
        (Some(pvc), _) => {
            let dir = format!("{PVC_MOUNT}/{}", pvc.prefix.as_deref().unwrap_or_default());
            env.extend([pod::env("ARCHIVE_DIR", format!("{dir}/{ARCHIVE}")), pod::env("BACKUP_ROOT", dir)]);
            let mut container = Container {
                volume_mounts: Some(mounts(pod::mount("backups", PVC_MOUNT, false))),
                ..server_container(c, "binlog", pod::run_script("binlog.sh"), env)
            };
            let mut volumes = vec![claim_volume(&pvc.claim_name, false)];
            with_key(&mut container, &mut volumes, a.signing_key, "ARCHIVE_VERIFY_KEY_FILE");
            (vec![], container, volumes)
        }
        (None, Some(s3)) => {
            env.extend([
                pod::env("ARCHIVE_DIR", format!("{STAGING}/{ARCHIVE}")),
                pod::env("ARCHIVE_REMOTE", "true"),
                pod::env("BACKUP_ROOT", STAGING),
            ]);
            if let Some(budget) = archive_budget(c, a.bounds.work_volume_size.as_ref()) {
                env.push(pod::env("ARCHIVE_MAX_BYTES", budget.to_string()));
            }
            let mut archive = Container {
                volume_mounts: Some(mounts(pod::mount("staging", STAGING, false))),
                ..server_container(c, "binlog", pod::run_script("binlog.sh"), env)
            };
            let mut volumes = vec![staging_volume(c, a.bounds.work_volume_size.as_ref())];
            with_key(&mut archive, &mut volumes, a.signing_key, "ARCHIVE_VERIFY_KEY_FILE");
            (
                vec![uploader(s3, "pull", "archive-pull", s3_env(s3)), archive],
                uploader(s3, "push", "archive-push", s3_env(s3)),
                volumes,
            )
        }
        (None, None) => unreachable_storage(c),
    };
    job_spec(c, a.storage, &a.labels, init, main, volumes, &a.bounds)
}

/// The folder of the binary log archive under a store's prefix: not a name a
/// Kubernetes object (so a backup) can have.
pub const ARCHIVE: &str = "_binlog";
/// One archive run copies the files closed since the last one: short.
pub const ARCHIVE_DEADLINE_SECONDS: i64 = 3600;

/// A CronJob of the cluster's backups (`<name>-backup`) or binary log archive
/// (`<name>-binlog`). Jobs never overlap; each runs in UTC.
#[must_use]
pub fn cron_job(
    name: &str,
    schedule: &str,
    c: &Cluster,
    job_labels: &BTreeMap<String, String>,
    job: JobSpec,
) -> CronJob {
    CronJob {
        metadata: meta(name, labels::common(&c.names, labels::JOB)),
        spec: CronJobSpec {
            schedule: schedule.to_owned(),
            time_zone: Some("Etc/UTC".to_owned()),
            concurrency_policy: Some("Forbid".to_owned()),
            starting_deadline_seconds: Some(3600),
            successful_jobs_history_limit: Some(3),
            failed_jobs_history_limit: Some(3),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(job_labels.clone()), ..Default::default() }),
                spec: Some(job),
            },
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The pod of a backup, archive or restore Job (also the final backup's and a
/// `MySQLBackup`'s). With `s3.serviceAccountName` it
/// runs as that ServiceAccount (for its workload identity), still without a
/// Kubernetes API token.
fn job_spec(
    c: &Cluster,
    storage: &BackupStorage,
    labels: &BTreeMap<String, String>,
    init: Vec<Container>,
    main: Container,
    mut volumes: Vec<Volume>,
    bounds: &Bounds,
) -> JobSpec {
    let (mut init, mut main) = (init, main);
    for container in init.iter_mut().chain([&mut main]) {
        container.resources = Some(bounds.resources.clone());
    }
    // Every pod's scratch `/tmp` is bounded like the staging volume: what the
    // scripts put there (the verification's throwaway server, the replayed binary
    // logs) fits in the data it comes from, and a pod that outgrows it is evicted,
    // and says so, instead of filling the node's disk.
    volumes.extend([
        pod::config_volume(c),
        pod::scripts_volume(),
        pod::job_credentials_volume(c),
        Volume { name: "tmp".to_owned(), ..staging_volume(c, bounds.work_volume_size.as_ref()) },
    ]);
    let mut spec = JobSpec {
        backoff_limit: Some(BACKOFF_LIMIT),
        active_deadline_seconds: Some(bounds.deadline_seconds),
        // One attempt at a time: by default a replacement starts as soon as the old
        // pod is terminating (a drain, an eviction), while the old one still works
        // through its grace period in the same `.partial` folder or S3 key, and a
        // mixed folder could be committed and counted toward `keep`. `Failed`: the
        // next attempt starts only once the last one has stopped.
        pod_replacement_policy: Some("Failed".to_owned()),
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels.clone()),
                annotations: store_location(storage).map(|s| BTreeMap::from([(labels::STORE.to_owned(), s)])),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                restart_policy: Some("Never".to_owned()),
                init_containers: Some([pod::install_scripts(c)].into_iter().chain(init).collect()),
                containers: vec![main],
                volumes: Some(volumes),
                security_context: Some(pod::pod_security()),
                enable_service_links: Some(false),
                // Nothing in the pod talks to the Kubernetes API.
                automount_service_account_token: Some(false),
                service_account_name: storage.s3.as_ref().and_then(|s| s.service_account_name.clone()),
                ..Default::default()
            }),
        },
        ..Default::default()
    };
    if let Some(pod_spec) = spec.template.spec.as_mut() {
        pod::place_job(c, pod_spec);
        pod::add_job_tls(c, pod_spec);
    }
    spec
}

fn server_container(c: &Cluster, name: &str, command: Vec<String>, env: Vec<EnvVar>) -> Container {
    Container {
        name: name.to_owned(),
        image: Some(c.image.clone()),
        command: Some(command),
        env: Some(env),
        security_context: Some(pod::container_security()),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Default::default()
    }
}

/// A container of the uploader image running `s3.sh <command>` on the staging
/// volume.
fn uploader(s3: &S3Target, name: &str, command: &str, env: Vec<EnvVar>) -> Container {
    Container {
        name: name.to_owned(),
        image: Some(s3.image.clone().unwrap_or_else(|| DEFAULT_UPLOADER_IMAGE.to_owned())),
        command: Some(vec!["sh".to_owned(), scripts::path("s3.sh"), command.to_owned()]),
        env: Some(env),
        volume_mounts: Some(vec![
            pod::scripts_mount(),
            pod::mount("tmp", "/tmp", false),
            pod::mount("staging", STAGING, false),
        ]),
        security_context: Some(pod::container_security()),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Default::default()
    }
}

/// The bucket's coordinates, and from the credentials Secret only the keys the AWS
/// CLI reads, one by one (never the whole Secret: see [`crate::access`]). With
/// `serviceAccountName` no keys: the CLI's default chain finds what the pod's
/// workload identity provides.
fn s3_env(s3: &S3Target) -> Vec<EnvVar> {
    let mut env: Vec<EnvVar> = s3
        .credentials_secret
        .iter()
        .flat_map(|secret| {
            access::S3_KEYS.iter().map(move |(key, required)| EnvVar {
                name: (*key).to_owned(),
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: secret.clone(),
                        key: (*key).to_owned(),
                        optional: Some(!required),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            })
        })
        .collect();
    env.extend([
        pod::env("S3_BUCKET", s3.bucket.as_str()),
        pod::env("S3_PREFIX", s3.prefix.as_deref().unwrap_or_default()),
        pod::env("AWS_DEFAULT_REGION", s3.region.as_deref().unwrap_or("us-east-1")),
        pod::env("HOME", "/tmp"),
    ]);
    if let Some(e) = &s3.endpoint {
        env.push(pod::env("S3_ENDPOINT", e.as_str()));
    }
    env
}

/// The scratch volume an S3 backup or restore is staged in: an emptyDir whose
/// `sizeLimit` is `spec.backup.workVolumeSize`, else the data volume's size (a
/// logical dump and the binary logs fit in the data they come from): the size
/// the claims grow to after `spec.storage.size` grew, not the StatefulSet's
/// immutable template, which keeps the size the cluster was created with. A pod
/// that outgrows it is evicted and the Job fails, instead of filling the node's
/// disk.
fn staging_volume(c: &Cluster, size: Option<&Quantity>) -> Volume {
    Volume {
        name: "staging".to_owned(),
        empty_dir: Some(EmptyDirVolumeSource { size_limit: staging_limit(c, size), ..Default::default() }),
        ..Default::default()
    }
}

/// The staging volume's size limit: canonical, as the API server stores it (else
/// a permanent diff); an invalid size (the CRD lets only quantities through) sets
/// no limit.
fn staging_limit(c: &Cluster, size: Option<&Quantity>) -> Option<Quantity> {
    size.or(c.grow_to.as_ref()).and_then(|q| crate::quantity::canonical(q).ok()).or_else(|| {
        c.volume.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage")).cloned()
    })
}

/// An S3 archive run's budget (`ARCHIVE_MAX_BYTES`): half the staging volume,
/// which holds every file the run archives until the push, so a backlog larger
/// than the volume is archived over several runs instead of being evicted in
/// every one (issue 34.12). Bytes as the server lists them, before gzip.
fn archive_budget(c: &Cluster, size: Option<&Quantity>) -> Option<i128> {
    let bytes = crate::quantity::nanos(&staging_limit(c, size)?).ok()? / 1_000_000_000;
    Some(bytes / 2).filter(|b| *b > 0)
}

fn backup_name_env(name: &BackupName) -> EnvVar {
    match name {
        BackupName::Fixed(n) => pod::env("BACKUP_NAME", n.as_str()),
        BackupName::FromJob => EnvVar {
            name: "BACKUP_NAME".to_owned(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.labels['batch.kubernetes.io/job-name']".to_owned(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
    }
}

/// Where a signing or verification key is mounted in the container that runs the
/// script.
const KEY_DIR: &str = "/etc/mysql-hook-signing";

/// The key (one item of an opted-in Secret, see [`crate::access`]) as the file
/// `variable` names, for `container` only: the uploader never sees it.
fn with_key(container: &mut Container, volumes: &mut Vec<Volume>, key: Option<&SecretKeyRef>, variable: &str) {
    let Some(key) = key else { return };
    volumes.push(key_volume(key));
    mount_key(container, variable);
}

/// The signing key's volume (see [`with_key`]).
fn key_volume(key: &SecretKeyRef) -> Volume {
    Volume {
        name: "signing-key".to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(key.name.clone()),
            items: Some(vec![KeyToPath { key: key.key.clone(), path: "key".to_owned(), ..Default::default() }]),
            default_mode: Some(0o440),
            optional: Some(false),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Gives a container the key of [`key_volume`] as the file named by `variable`.
fn mount_key(container: &mut Container, variable: &str) {
    container.volume_mounts.get_or_insert_with(Vec::new).push(pod::mount("signing-key", KEY_DIR, true));
    container.env.get_or_insert_with(Vec::new).push(pod::env(variable, format!("{KEY_DIR}/key")));
}

fn claim_volume(claim: &str, read_only: bool) -> Volume {
    Volume {
        name: "backups".to_owned(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim.to_owned(),
            read_only: read_only.then_some(true),
        }),
        ..Default::default()
    }
}

/// The CRD makes a store without a target impossible; callers check it too.
fn unreachable_storage(c: &Cluster) -> (Vec<Container>, Container, Vec<Volume>) {
    let script = "echo '{\"result\":\"error\",\"reason\":\"no-storage\",\"message\":\"no backup storage\"}' > /dev/termination-log; exit 1".to_owned();
    (
        Vec::new(),
        server_container(c, "backup", vec!["bash".to_owned(), "-c".to_owned(), script], Vec::new()),
        Vec::new(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::PvcTarget;

    #[test]
    fn prefixes_default_to_the_cluster_and_locations_name_the_store() {
        let pvc = BackupStorage {
            persistent_volume_claim: Some(PvcTarget { claim_name: "b".to_owned(), prefix: None }),
            s3: None,
        };
        assert_eq!(location(&resolve(&pvc, "db"), "db-backup-1"), "pvc://b/db/db-backup-1");
        let s3 = BackupStorage {
            persistent_volume_claim: None,
            s3: Some(S3Target {
                endpoint: None,
                bucket: "bk".to_owned(),
                prefix: Some("shop/db".to_owned()),
                region: None,
                credentials_secret: Some("s".to_owned()),
                service_account_name: None,
                image: None,
            }),
        };
        assert_eq!(location(&resolve(&s3, "db"), "x"), "s3://bk/shop/db/x");
    }
}

//! Jobs that run one in-cluster script or agent command: bootstrap, failover,
//! switchover, the users.
//!
//! Every Job runs in the server image (it has the client tools), retries a failed
//! pod a few times (the scripts are idempotent), and is bounded in time. Its pod is
//! labelled as the cluster's, so it comes back to the hook as a related object with
//! the script's one-line result in its termination message.

use k8s_openapi::{
    api::{
        batch::v1::{Job, JobSpec},
        core::v1::{Container, EnvVar, PodSpec, PodTemplateSpec},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

pub use super::pod::Program;
use super::{meta, pod};
use crate::{labels, model::Cluster};

/// What a Job does.
#[derive(Debug, Clone)]
pub struct JobRequest {
    /// Short purpose, part of the name and a label: `bootstrap`, `failover`, ...
    pub purpose: &'static str,
    /// Distinguishes attempts: `<cluster>-<purpose>-<suffix>`.
    pub suffix: String,
    /// What the container runs: a script of `hooks/scripts/` or an agent command.
    pub program: Program,
    /// Variables beyond the common ones (`PRIMARY`, `TARGET`, ...).
    pub env: Vec<EnvVar>,
}

#[must_use]
pub fn build(c: &Cluster, r: &JobRequest) -> Job {
    let name = c.names.job(r.purpose, &r.suffix);
    let mut pod_labels = labels::common(&c.names, labels::JOB);
    pod_labels.insert(labels::JOB_PURPOSE.to_owned(), r.purpose.to_owned());
    let mut env = pod::script_env(c);
    env.push(pod::env("TERMINATION_LOG", "/dev/termination-log"));
    env.extend(r.env.iter().cloned());
    let mut job = Job {
        metadata: meta(&name, pod_labels.clone()),
        spec: Some(JobSpec {
            backoff_limit: Some(3),
            active_deadline_seconds: Some(600),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(pod_labels), ..Default::default() }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".to_owned()),
                    init_containers: Some(vec![pod::install_scripts(c)]),
                    containers: vec![Container {
                        name: r.purpose.to_owned(),
                        image: Some(c.image.clone()),
                        command: Some(r.program.command()),
                        env: Some(env),
                        volume_mounts: Some(vec![
                            pod::config_mount(),
                            pod::scripts_mount(),
                            pod::credentials_mount(),
                            pod::mount("tmp", "/tmp", false),
                        ]),
                        security_context: Some(pod::container_security()),
                        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
                        ..Default::default()
                    }],
                    volumes: Some(vec![
                        pod::config_volume(c),
                        pod::scripts_volume(),
                        pod::job_credentials_volume(c),
                        pod::empty_dir("tmp"),
                    ]),
                    security_context: Some(pod::pod_security()),
                    enable_service_links: Some(false),
                    // Nothing in the pod talks to the Kubernetes API.
                    automount_service_account_token: Some(false),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    if let Some(spec) = job.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        pod::place_job(c, spec);
        pod::add_job_tls(c, spec);
    }
    job
}

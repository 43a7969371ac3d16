//! Command line and environment configuration.

use std::{net::SocketAddr, path::PathBuf};

use clap::{Parser, Subcommand};

/// A Metacontroller CompositeController hook that runs MySQL on Kubernetes.
#[derive(Parser, Debug, Clone)]
#[command(version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Subcommand, Debug, Clone)]
pub enum Command {
    /// Serve the hooks over HTTP (the default).
    Serve,
    /// Print the CustomResourceDefinitions generated from the Rust types, as YAML.
    Crd,
    /// Write the in-cluster scripts into DIR and exit: the first init container of
    /// every server and Job pod runs this from the hook's image.
    InstallScripts {
        /// Where to write them (an emptyDir in the pod).
        dir: PathBuf,
    },
    /// Show, offline, what the hook would do with a `MySQL` manifest: the children
    /// it would create, change (changed fields only) or delete, and the status it
    /// would report, given the live state as `kubectl get -o json` prints it.
    /// Secret values are never printed. Exit status 2: the hook would refuse.
    Plan(crate::plan::PlanArgs),
    /// Raise the storage request of volume claims to `--size` (never shrink one):
    /// what the grow Job runs, with the pod's ServiceAccount token, to grow the
    /// servers' volumes after `spec.storage.size` grew. Exit status 1 when the API
    /// server refuses a claim (its StorageClass does not allow expansion).
    GrowClaims(crate::grow::GrowArgs),
    /// Check backup schedules as `spec.backup.schedule` and `binlogSchedule` are
    /// checked: read one schedule per line on standard input, print `ok` or the
    /// reason it would be refused (`InvalidSchedule`) for each, in order. Exit
    /// status 2 when any is refused.
    CheckSchedules,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, global = true, env = "MYSQL_HOOK_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Largest request body accepted, in bytes; larger ones get 413.
    #[arg(long, global = true, env = "MYSQL_HOOK_MAX_BODY_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// No longer used: generated passwords come from fresh randomness drawn for
    /// every request. Accepted (with a warning) so that old manifests still start.
    #[arg(long, global = true, env = "MYSQL_HOOK_SECRET_SEED_FILE", hide = true)]
    pub secret_seed_file: Option<PathBuf>,

    /// The image server and Job pods install the scripts from: this hook's own image
    /// (the default is the one this build is published as). Set it when the image
    /// is mirrored or retagged; every cluster rolls once, in order, when it changes.
    #[arg(long, global = true, env = "MYSQL_HOOK_SCRIPTS_IMAGE", default_value = crate::DEFAULT_SCRIPTS_IMAGE)]
    pub scripts_image: String,

    /// Image repositories (`registry.example.com/db/mysql`, any tag or digest) that a
    /// `MySQL`'s `spec.image`, its `spec.monitoring.exporter.image` and an S3 backup
    /// store's `image` may name, comma separated. Anyone who may create a `MySQL`
    /// chooses these images, and they run with the database's credentials: list only
    /// images you trust. The default images (`mysql`, `mariadb`, `amazon/aws-cli`,
    /// `quay.io/prometheus/mysqld-exporter`) are always allowed. Empty (the default):
    /// no overrides.
    #[arg(long, global = true, env = "MYSQL_HOOK_ALLOWED_IMAGES", value_delimiter = ',')]
    pub allowed_images: Vec<String>,

    /// Pod label keys a `MySQL`'s `spec.pod.labels` may set, comma separated: a key,
    /// or a prefix ending in `*` (`example.com/*`). Unset: any (a label can make the
    /// servers endpoints of another Service whose selector it matches); empty: none.
    /// What the list does not name is left out and reported (`PodSettingsNotAllowed`).
    #[arg(long, global = true, env = "MYSQL_HOOK_ALLOWED_POD_LABEL_KEYS")]
    pub allowed_pod_label_keys: Option<String>,

    /// Pod annotation keys `spec.pod.annotations` may set (as above). Unset: any but
    /// the security-profile ones, which are always refused.
    #[arg(long, global = true, env = "MYSQL_HOOK_ALLOWED_POD_ANNOTATION_KEYS")]
    pub allowed_pod_annotation_keys: Option<String>,

    /// Priority classes `spec.pod.priorityClassName` may name (as above). Unset: any
    /// but `system-*`, which are always refused.
    #[arg(long, global = true, env = "MYSQL_HOOK_ALLOWED_PRIORITY_CLASSES")]
    pub allowed_priority_classes: Option<String>,

    /// Taint keys `spec.pod.tolerations` may tolerate (as above). Unset: any but the
    /// control-plane taints and keyless tolerations, which are always refused.
    #[arg(long, global = true, env = "MYSQL_HOOK_ALLOWED_TOLERATION_KEYS")]
    pub allowed_toleration_keys: Option<String>,

    /// Service types `spec.services.*.type` may name besides `ClusterIP`, comma
    /// separated (`NodePort`, `LoadBalancer`). Unset: both; a refused type is served
    /// as `ClusterIP`.
    #[arg(long, global = true, env = "MYSQL_HOOK_ALLOWED_SERVICE_TYPES")]
    pub allowed_service_types: Option<String>,

    /// Annotation keys `spec.services.*.annotations` may set (as for pod labels), e.g.
    /// `service.beta.kubernetes.io/*`. Unset: any (an `external-dns` hostname too).
    #[arg(long, global = true, env = "MYSQL_HOOK_ALLOWED_SERVICE_ANNOTATION_KEYS")]
    pub allowed_service_annotation_keys: Option<String>,

    /// Worker threads; defaults to the number of CPUs.
    #[arg(long, global = true, env = "MYSQL_HOOK_WORKERS")]
    pub workers: Option<usize>,

    /// Hook requests answered at once; past it the answer is 429 with `Retry-After`
    /// (Metacontroller retries then). 0: no limit.
    #[arg(long, global = true, env = "MYSQL_HOOK_MAX_CONCURRENT_REQUESTS", default_value_t = 16)]
    pub max_concurrent_requests: usize,

    /// The `Retry-After` sent with a 429, in whole seconds.
    #[arg(long, global = true, env = "MYSQL_HOOK_RETRY_AFTER_SECONDS", default_value_t = 1)]
    pub retry_after_seconds: u32,

    /// How long the core may take for one request, in milliseconds, before the
    /// answer is 503 (keep it below the CompositeController's webhook timeout).
    #[arg(long, global = true, env = "MYSQL_HOOK_REQUEST_TIMEOUT_MS", default_value_t = 8000)]
    pub request_timeout_ms: u64,

    /// How long the body of an admitted hook request may take to arrive, in
    /// milliseconds; then the answer is 408 and the request's admission slot is free
    /// again, so a slow client cannot hold one.
    #[arg(long, global = true, env = "MYSQL_HOOK_BODY_READ_TIMEOUT_MS", default_value_t = 5000)]
    pub body_read_timeout_ms: u64,

    /// On SIGTERM or SIGINT, seconds during which `/readyz` fails but requests are
    /// still served, so endpoints drop this pod before it stops listening.
    #[arg(long, global = true, env = "MYSQL_HOOK_SHUTDOWN_DELAY_SECONDS", default_value_t = 5)]
    pub shutdown_delay_seconds: u64,

    /// Then, seconds the requests in flight get to finish before the process exits.
    /// Delay plus timeout must stay below the pod's terminationGracePeriodSeconds.
    #[arg(long, global = true, env = "MYSQL_HOOK_SHUTDOWN_TIMEOUT_SECONDS", default_value_t = 20)]
    pub shutdown_timeout_seconds: u64,

    /// File holding the bearer token every request but `/healthz` and `/readyz`
    /// must carry (`Authorization: Bearer <token>`); re-read when it changes.
    /// Required to listen on anything but a loopback address (see
    /// `--allow-unauthenticated`).
    #[arg(long, global = true, env = "MYSQL_HOOK_AUTH_TOKEN_FILE")]
    pub auth_token_file: Option<PathBuf>,

    /// File holding the bearer token `/metrics` must carry instead of
    /// `--auth-token-file`'s, so that the scraper's credential cannot call the hooks
    /// (no hook route accepts it); re-read when it changes.
    #[arg(long, global = true, env = "MYSQL_HOOK_METRICS_TOKEN_FILE")]
    pub metrics_token_file: Option<PathBuf>,

    /// Serve on a non-loopback address without `--auth-token-file`. Anyone who can
    /// reach such a hook can ask it what it would do with any cluster; only use it
    /// behind a NetworkPolicy or equivalent that admits Metacontroller alone.
    #[arg(long, global = true, env = "MYSQL_HOOK_ALLOW_UNAUTHENTICATED", default_value_t = false)]
    pub allow_unauthenticated: bool,

    /// PEM certificate chain to serve HTTPS with (needs `--tls-key-file`);
    /// re-read when it changes.
    #[arg(long, global = true, env = "MYSQL_HOOK_TLS_CERT_FILE", requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM private key of `--tls-cert-file`.
    #[arg(long, global = true, env = "MYSQL_HOOK_TLS_KEY_FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,

    /// Seconds after which the per-cluster metrics of a cluster that no sync or
    /// finalize has named are dropped (a cluster deleted while another replica of
    /// the hook answered its last finalize).
    #[arg(long, global = true, env = "MYSQL_HOOK_CLUSTER_METRICS_TTL_SECONDS", default_value_t = 3 * 3600)]
    pub cluster_metrics_ttl_seconds: u64,

    /// Log format: `text` or `json`.
    #[arg(long, global = true, env = "MYSQL_HOOK_LOG_FORMAT", default_value = "text")]
    pub log_format: LogFormat,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl ServeArgs {
    /// The installer's [`Policy`](hooks::placement::Policy) for `spec.pod` and
    /// `spec.services`, from the `--allowed-*` settings.
    ///
    /// # Errors
    /// A list entry that is not a key, a prefix ending in `*`, or a Service type,
    /// naming the setting: the hook then refuses to start.
    pub fn placement_policy(&self) -> Result<hooks::placement::Policy, String> {
        use hooks::placement::{KeyPatterns, Policy};
        let keys = |flag: &str, v: &Option<String>| {
            v.as_deref().map(KeyPatterns::parse).transpose().map_err(|e| format!("--{flag}: {e}"))
        };
        Ok(Policy {
            pod_label_keys: keys("allowed-pod-label-keys", &self.allowed_pod_label_keys)?,
            pod_annotation_keys: keys("allowed-pod-annotation-keys", &self.allowed_pod_annotation_keys)?,
            priority_classes: keys("allowed-priority-classes", &self.allowed_priority_classes)?,
            toleration_keys: keys("allowed-toleration-keys", &self.allowed_toleration_keys)?,
            service_types: self
                .allowed_service_types
                .as_deref()
                .map(Policy::parse_service_types)
                .transpose()
                .map_err(|e| format!("--allowed-service-types: {e}"))?,
            service_annotation_keys: keys("allowed-service-annotation-keys", &self.allowed_service_annotation_keys)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, Command};

    /// `mysql-hook serve --listen ...` must work, not only `mysql-hook --listen ... serve`:
    /// the flags are global, so they may follow the subcommand.
    #[test]
    fn serve_flags_may_follow_the_subcommand() {
        for argv in [
            ["mysql-hook", "serve", "--listen", "127.0.0.1:9000"],
            ["mysql-hook", "--listen", "127.0.0.1:9000", "serve"],
        ] {
            let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            assert!(matches!(cli.command, Some(Command::Serve)));
            assert_eq!(cli.serve.listen.to_string(), "127.0.0.1:9000");
        }
    }
}

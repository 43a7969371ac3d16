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
}

#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "MYSQL_HOOK_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Largest request body accepted, in bytes; larger ones get 413.
    #[arg(long, env = "MYSQL_HOOK_MAX_BODY_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// File holding the key that generated passwords are derived from (any bytes;
    /// mount a Secret). Without it a random key is drawn at start, which is fine as
    /// long as the credentials Secret, once created, is read back.
    #[arg(long, env = "MYSQL_HOOK_SECRET_SEED_FILE")]
    pub secret_seed_file: Option<PathBuf>,

    /// Worker threads; defaults to the number of CPUs.
    #[arg(long, env = "MYSQL_HOOK_WORKERS")]
    pub workers: Option<usize>,

    /// Log format: `text` or `json`.
    #[arg(long, env = "MYSQL_HOOK_LOG_FORMAT", default_value = "text")]
    pub log_format: LogFormat,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

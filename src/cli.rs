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
    #[arg(long, global = true, env = "MYSQL_HOOK_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Largest request body accepted, in bytes; larger ones get 413.
    #[arg(long, global = true, env = "MYSQL_HOOK_MAX_BODY_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// File holding the key that generated passwords are derived from (any bytes;
    /// mount a Secret). Without it a random key is drawn at start, which is fine as
    /// long as the credentials Secret, once created, is read back.
    #[arg(long, global = true, env = "MYSQL_HOOK_SECRET_SEED_FILE")]
    pub secret_seed_file: Option<PathBuf>,

    /// Worker threads; defaults to the number of CPUs.
    #[arg(long, global = true, env = "MYSQL_HOOK_WORKERS")]
    pub workers: Option<usize>,

    /// Log format: `text` or `json`.
    #[arg(long, global = true, env = "MYSQL_HOOK_LOG_FORMAT", default_value = "text")]
    pub log_format: LogFormat,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
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

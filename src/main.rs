//! `mysql-hook`: serve the hooks, or print the CRDs.

use std::{fs, io::Write as _, process::ExitCode, sync::Arc, time::Duration};

use actix_web::{App, HttpServer, web};
use clap::Parser;
use mysql_hook::{
    app::{self, State},
    cli::{Cli, Command, LogFormat, ServeArgs},
    request_span::HookSpans,
};
use tracing_actix_web::TracingLogger;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Crd) => print_crds(),
        Some(Command::Serve) | None => serve(&cli.serve),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mysql-hook: {e}");
            ExitCode::FAILURE
        }
    }
}

fn print_crds() -> Result<(), String> {
    let yaml = mysql_hook::crd_yaml().map_err(|e| e.to_string())?;
    std::io::stdout().write_all(yaml.as_bytes()).map_err(|e| e.to_string())
}

/// How long an idle keep-alive connection stays open. Metacontroller's webhook
/// client uses Go's default transport, which keeps idle connections for 90 s and
/// does not retry a POST whose pooled connection the server has just closed: with
/// actix's default of 5 s, a sync sent about 5 s after the previous one raced the
/// server's close and failed with `Post "http://.../sync": EOF` (seen in the full
/// loop). Outlasting the client's idle timeout lets the client always close first.
const KEEP_ALIVE: Duration = Duration::from_secs(120);

fn serve(args: &ServeArgs) -> Result<(), String> {
    init_tracing(args.log_format);
    let seed = secret_seed(args)?;
    let state = web::Data::new(State::new(seed, Arc::new(hooks::Timestamp::now), args.max_body_bytes));
    let workers = args.workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from));
    tracing::info!(listen = %args.listen, workers, "serving /sync, /finalize, /customize, /backup/sync, /backup/customize");
    actix_web::rt::System::new()
        .block_on(async move {
            HttpServer::new(move || {
                App::new().wrap(TracingLogger::<HookSpans>::new()).configure(app::configure(state.clone()))
            })
            .workers(workers)
            .keep_alive(KEEP_ALIVE)
            .shutdown_timeout(25)
            .bind(args.listen)?
            .run()
            .await
        })
        .map_err(|e| format!("serving on {}: {e}", args.listen))
}

fn secret_seed(args: &ServeArgs) -> Result<[u8; 32], String> {
    match &args.secret_seed_file {
        Some(path) => {
            let bytes = fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
            if bytes.len() < 16 {
                return Err(format!("{}: a secret seed needs at least 16 bytes", path.display()));
            }
            Ok(hooks::credentials::fold_seed(&bytes))
        }
        None => {
            let mut seed = [0u8; 32];
            getrandom::fill(&mut seed).map_err(|e| format!("drawing a random seed: {e}"))?;
            Ok(seed)
        }
    }
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

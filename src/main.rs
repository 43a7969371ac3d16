//! `mysql-hook`: serve the hooks, print the CRDs, install the scripts, plan, or grow claims.

use std::{io::Write as _, process::ExitCode, sync::Arc, time::Duration};

use actix_web::{App, HttpServer, dev::ServerHandle, web};
use clap::Parser;
use mysql_hook::{
    app::{self, Limits, State},
    auth::TokenFile,
    cli::{Cli, Command, LogFormat, ServeArgs},
    request_span::HookSpans,
    tls::ReloadingCert,
};
use tracing_actix_web::TracingLogger;

/// jemalloc: a request decodes into thousands of small strings and maps, all freed
/// at its end, on a pool thread other than the one that read the body. With glibc's
/// malloc that was about a quarter of the server's CPU; jemalloc cut the CPU per
/// 3-replica sync at 32 connections from 477/379 to 344/306 µs (two alternating 8 s
/// wrk runs) with peak RSS 25 MB. (mimalloc was faster than glibc too, but its
/// peak RSS under the same load was 57 to 70 MB.)
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Crd) => print_crds(),
        Some(Command::InstallScripts { dir }) => {
            mysql_hook::install_scripts(&dir).map_err(|e| format!("installing the scripts into {}: {e}", dir.display()))
        }
        Some(Command::Plan(args)) => return mysql_hook::plan::main(&args, &cli.serve),
        Some(Command::GrowClaims(args)) => return mysql_hook::grow::main(&args),
        Some(Command::CheckSchedules) => return check_schedules(),
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

/// `mysql-hook check-schedules`: the hook's own schedule check, for users before
/// they edit a spec and for the conformance suite, which holds it to the API
/// server's CronJob validation.
fn check_schedules() -> ExitCode {
    let mut refused = false;
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lines() {
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                eprintln!("mysql-hook check-schedules: reading standard input: {e}");
                return ExitCode::FAILURE;
            }
        };
        let verdict = match hooks::cron::check(&line) {
            Ok(()) => "ok".to_owned(),
            Err(why) => {
                refused = true;
                format!("refused: {why}")
            }
        };
        if writeln!(out, "{verdict}").is_err() {
            return ExitCode::FAILURE;
        }
    }
    if refused { ExitCode::from(2) } else { ExitCode::SUCCESS }
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

/// Threads per worker that run the core (see `serve`).
const BLOCKING_THREADS_PER_WORKER: usize = 2;

fn serve(args: &ServeArgs) -> Result<(), String> {
    init_tracing(args.log_format);
    check_exposure(args)?;
    if let Some(path) = &args.secret_seed_file {
        tracing::warn!(
            file = %path.display(),
            "--secret-seed-file has no effect any more: generated passwords come from fresh randomness drawn for every request"
        );
    }
    let limits = Limits {
        max_concurrent: args.max_concurrent_requests,
        retry_after_seconds: args.retry_after_seconds,
        core_timeout: Duration::from_millis(args.request_timeout_ms),
        body_timeout: Duration::from_millis(args.body_read_timeout_ms),
    };
    let allowed_images: Vec<String> =
        args.allowed_images.iter().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect();
    let mut state =
        State::with_limits(Arc::new(app::system_entropy), Arc::new(hooks::Timestamp::now), args.max_body_bytes, limits)
            .with_scripts_image(args.scripts_image.clone())
            .with_allowed_images(allowed_images.clone())
            .with_placement_policy(args.placement_policy()?)
            .with_cluster_metrics_ttl(Duration::from_secs(args.cluster_metrics_ttl_seconds));
    if let Some(path) = &args.auth_token_file {
        state = state.with_auth(TokenFile::load(path)?);
    }
    if let Some(path) = &args.metrics_token_file {
        state = state.with_metrics_auth(TokenFile::load(path)?);
    }
    let tls = match (&args.tls_cert_file, &args.tls_key_file) {
        (Some(cert), Some(key)) => Some(ReloadingCert::load(cert, key)?.server_config()?),
        _ => None,
    };
    let state = web::Data::new(state);
    let workers = args.workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from));
    tracing::info!(
        listen = %args.listen,
        workers,
        tls = tls.is_some(),
        bearer_token = args.auth_token_file.is_some(),
        metrics_token = args.metrics_token_file.is_some(),
        max_concurrent_requests = limits.max_concurrent,
        scripts_image = %args.scripts_image,
        ?allowed_images,
        "serving /sync, /finalize, /customize, /backup/sync, /backup/customize"
    );
    let (delay, listen) = (Duration::from_secs(args.shutdown_delay_seconds), args.listen);
    let shutdown_timeout = args.shutdown_timeout_seconds;
    actix_web::rt::System::new()
        .block_on(async move {
            let app_state = state.clone();
            let server = HttpServer::new(move || {
                App::new().wrap(TracingLogger::<HookSpans>::new()).configure(app::configure(app_state.clone()))
            })
            .workers(workers)
            // The core runs on each worker's blocking pool (so a slow request can be
            // answered 503 at its timeout). Its default of 512 / workers threads let
            // every concurrent request take its own thread: more threads than cores,
            // cold caches and a malloc arena each. Two per worker cut the server's CPU
            // per 3-replica sync at 32 connections from 548 to 467 µs (mean of three
            // alternating 8 s wrk runs); a runaway request still leaves the worker
            // and the other thread free.
            .worker_max_blocking_threads(BLOCKING_THREADS_PER_WORKER)
            // Longer than the idle timeout of Metacontroller's HTTP client (90 s), so the
            // client always closes first and never sends on a connection being closed.
            .keep_alive(KEEP_ALIVE)
            // Signals are ours: readiness must fail before the listener closes.
            .disable_signals()
            .shutdown_timeout(shutdown_timeout);
            let server = match tls {
                Some(config) => server.bind_rustls_0_23(listen, config)?,
                None => server.bind(listen)?,
            }
            .run();
            actix_web::rt::spawn(shutdown_on_signal(server.handle(), state, delay, shutdown_timeout));
            server.await
        })
        .map_err(|e| format!("serving on {listen}: {e}"))
}

/// On SIGTERM (the kubelet) or SIGINT (a terminal): fail `/readyz` at once, keep
/// serving for `delay` while the endpoints drop this pod, then stop accepting and
/// give the requests in flight the shutdown timeout to finish.
async fn shutdown_on_signal(server: ServerHandle, state: web::Data<State>, delay: Duration, timeout_seconds: u64) {
    use actix_web::rt::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::error!("cannot listen for SIGTERM/SIGINT; stopping now");
        server.stop(true).await;
        return;
    };
    let name = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    state.start_draining();
    tracing::info!(signal = name, delay_seconds = delay.as_secs(), "shutting down: /readyz now fails");
    actix_web::rt::time::sleep(delay).await;
    tracing::info!(in_flight = state.admission.in_use(), "no longer accepting; finishing the requests in flight");
    // actix force-drops the workers at the shutdown timeout, and the process then
    // ends. Once (one CI run; not in eleven others) it was still alive 5 s past that,
    // with one connection left "finishing"; the cause is not found. A plain thread makes the
    // promise hold anyway: exit 2 s after the timeout, within the pod's grace
    // period, rather than wait for the kubelet's SIGKILL.
    let watchdog = Duration::from_secs(timeout_seconds + 2);
    std::thread::spawn(move || {
        std::thread::sleep(watchdog);
        tracing::warn!(seconds = watchdog.as_secs(), "still running after the shutdown timeout; exiting now");
        std::process::exit(0);
    });
    server.stop(true).await;
    tracing::info!("stopped");
}

/// A hook that anyone can reach answers anyone: what it would build for any
/// cluster they describe. Off loopback it must demand a token, unless told not to.
fn check_exposure(args: &ServeArgs) -> Result<(), String> {
    if args.listen.ip().is_loopback() || args.auth_token_file.is_some() || args.allow_unauthenticated {
        return Ok(());
    }
    Err(format!(
        "refusing to serve on {} without --auth-token-file: every pod that can reach the hook could call it. \
         Give it a token (MYSQL_HOOK_AUTH_TOKEN_FILE; metacontroller/ does), listen on a loopback address, \
         or pass --allow-unauthenticated (MYSQL_HOOK_ALLOW_UNAUTHENTICATED=true) behind a NetworkPolicy that \
         admits only Metacontroller",
        args.listen
    ))
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

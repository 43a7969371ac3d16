//! Routes and the mapping from HTTP to the core.
//!
//! Metacontroller treats any answer but 200 as "change nothing, retry with
//! backoff", so every doubt becomes a non-200 with a one-line reason:
//! 400 malformed JSON, 415 not JSON, 413 too large, 422 well-formed but not a valid
//! request, 500 a panic in the core (caught, so the worker lives on).

use std::{
    panic::{AssertUnwindSafe, catch_unwind},
    sync::Arc,
    time::Instant,
};

use actix_web::{
    HttpRequest, HttpResponse,
    http::{StatusCode, header},
    web,
};
use hooks::{Context, Timestamp};
use serde::{Serialize, de::DeserializeOwned};

use crate::metrics::{HookLabels, Metrics, RequestLabels};

/// Where "now" comes from: the system clock when serving, a fixed instant in tests.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// Shared state of every worker.
pub struct State {
    pub metrics: Metrics,
    pub secret_seed: [u8; 32],
    pub clock: Clock,
    pub max_body_bytes: usize,
}

impl State {
    #[must_use]
    pub fn new(secret_seed: [u8; 32], clock: Clock, max_body_bytes: usize) -> Self {
        Self { metrics: Metrics::default(), secret_seed, clock, max_body_bytes }
    }
}

/// Registers every route. The binary and the tests both call this.
pub fn configure(state: web::Data<State>) -> impl FnOnce(&mut web::ServiceConfig) {
    move |cfg| {
        let limit = state.max_body_bytes;
        cfg.app_data(state)
            .app_data(web::PayloadConfig::new(limit))
            .route("/sync", web::post().to(sync))
            .route("/finalize", web::post().to(finalize))
            .route("/customize", web::post().to(customize))
            .route("/backup/sync", web::post().to(backup_sync))
            .route("/backup/customize", web::post().to(backup_customize))
            .route("/healthz", web::get().to(healthz))
            .route("/readyz", web::get().to(healthz))
            .route("/metrics", web::get().to(metrics));
    }
}

async fn sync(req: HttpRequest, body: web::Bytes, state: web::Data<State>) -> HttpResponse {
    handle(&req, &body, &state, "sync", |r: &hooks::metacontroller::SyncRequest, ctx| hooks::sync(r, ctx))
}

async fn finalize(req: HttpRequest, body: web::Bytes, state: web::Data<State>) -> HttpResponse {
    handle(&req, &body, &state, "finalize", |r: &hooks::metacontroller::SyncRequest, ctx| hooks::finalize(r, ctx))
}

async fn customize(req: HttpRequest, body: web::Bytes, state: web::Data<State>) -> HttpResponse {
    handle(&req, &body, &state, "customize", |r: &hooks::metacontroller::CustomizeRequest, _| hooks::customize(r))
}

async fn backup_sync(req: HttpRequest, body: web::Bytes, state: web::Data<State>) -> HttpResponse {
    handle(&req, &body, &state, "backup_sync", |r: &hooks::metacontroller::BackupSyncRequest, ctx| {
        hooks::mysqlbackup::sync(r, ctx)
    })
}

async fn backup_customize(req: HttpRequest, body: web::Bytes, state: web::Data<State>) -> HttpResponse {
    handle(&req, &body, &state, "backup_customize", |r: &hooks::metacontroller::BackupCustomizeRequest, _| {
        hooks::mysqlbackup::customize(r)
    })
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain").body("ok\n")
}

async fn metrics(state: web::Data<State>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
        .body(state.metrics.render())
}

/// Decodes, runs the core, encodes, and records the outcome.
fn handle<Req, Resp>(
    req: &HttpRequest,
    body: &[u8],
    state: &State,
    hook: &'static str,
    core: impl FnOnce(&Req, &Context) -> hooks::Result<Resp>,
) -> HttpResponse
where
    Req: DeserializeOwned,
    Resp: Serialize,
{
    let started = Instant::now();
    state.metrics.in_flight.inc();
    let (response, outcome) = answer(req, body, state, core);
    state.metrics.in_flight.dec();
    state.metrics.requests.get_or_create(&RequestLabels { hook, outcome }).inc();
    state.metrics.duration.get_or_create(&HookLabels { hook }).observe(started.elapsed().as_secs_f64());
    if response.status() != StatusCode::OK {
        tracing::warn!(hook, status = response.status().as_u16(), outcome, "hook request refused");
    }
    response
}

fn answer<Req, Resp>(
    req: &HttpRequest,
    body: &[u8],
    state: &State,
    core: impl FnOnce(&Req, &Context) -> hooks::Result<Resp>,
) -> (HttpResponse, &'static str)
where
    Req: DeserializeOwned,
    Resp: Serialize,
{
    let is_json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| {
            let m = m.trim();
            m.eq_ignore_ascii_case("application/json") || m.eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !is_json {
        return (
            error(StatusCode::UNSUPPORTED_MEDIA_TYPE, "the body must be JSON (Content-Type: application/json)"),
            "unsupported_media_type",
        );
    }
    let request: Req = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) if e.is_data() => {
            return (
                error(StatusCode::UNPROCESSABLE_ENTITY, &format!("not a valid hook request: {e}")),
                "invalid_request",
            );
        }
        Err(e) => return (error(StatusCode::BAD_REQUEST, &format!("malformed JSON: {e}")), "malformed_json"),
    };
    let ctx = Context { now: (state.clock)(), secret_seed: state.secret_seed };
    match catch_unwind(AssertUnwindSafe(|| core(&request, &ctx))) {
        Ok(Ok(response)) => match serde_json::to_vec(&response) {
            Ok(bytes) => (HttpResponse::Ok().content_type("application/json").body(bytes), "ok"),
            Err(e) => {
                (error(StatusCode::INTERNAL_SERVER_ERROR, &format!("encoding the response failed: {e}")), "internal")
            }
        },
        Ok(Err(e)) => (error(StatusCode::UNPROCESSABLE_ENTITY, &e.to_string()), e.metric_label()),
        Err(_) => (error(StatusCode::INTERNAL_SERVER_ERROR, "the hook panicked; nothing was changed"), "panic"),
    }
}

fn error(status: StatusCode, message: &str) -> HttpResponse {
    HttpResponse::build(status).content_type("text/plain; charset=utf-8").body(format!("{message}\n"))
}

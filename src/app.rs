//! Routes and the mapping from HTTP to the core.
//!
//! Metacontroller treats any answer but 200 as "change nothing, retry with
//! backoff", so every doubt becomes a non-200 with a one-line reason:
//! 400 malformed JSON, 401 missing or wrong bearer token, 415 not JSON, 413 too
//! large, 422 well-formed but not a valid request, 429 too many requests at once
//! (with `Retry-After`), 500 a panic in the core (caught, so the worker lives on),
//! 503 the core took longer than the per-request timeout.
//!
//! Every hook route passes, in this order: the bearer-token check ([`crate::auth`]),
//! admission ([`crate::admission`]), then the handler, which decodes, runs the core
//! and encodes on a blocking thread under a timeout. `/healthz` and `/readyz` pass
//! none of them; `/readyz` answers 503 once shutdown has begun.

use std::{
    panic::{AssertUnwindSafe, catch_unwind},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use actix_web::{
    Error, HttpMessage as _, HttpRequest, HttpResponse,
    body::{BoxBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    http::{StatusCode, header},
    middleware::{Next, from_fn},
    web,
};
use hooks::{Context, Timestamp};
use serde::{Serialize, de::DeserializeOwned};

use crate::{
    admission::{Admission, Permit},
    auth::TokenFile,
    cluster_metrics::Report,
    metrics::{HookLabels, Metrics, RequestLabels},
};

/// Where "now" comes from: the system clock when serving, a fixed instant in tests.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// Where each request's randomness ([`Context::entropy`]) comes from: the operating
/// system when serving, fixed bytes in tests. `None` when none could be drawn; the
/// request is then refused (503), never answered with guessable passwords.
pub type Entropy = Arc<dyn Fn() -> Option<[u8; 32]> + Send + Sync>;

/// Fresh randomness from the operating system.
#[must_use]
pub fn system_entropy() -> Option<[u8; 32]> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok().map(|()| bytes)
}

/// Overload and timeout settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Hook requests answered at once; past it, 429. `0`: no limit.
    pub max_concurrent: usize,
    /// The `Retry-After` of a 429, in seconds.
    pub retry_after_seconds: u32,
    /// How long the core may take for one request before the answer is 503.
    pub core_timeout: Duration,
    /// How long the body of an admitted request may take to arrive before the answer
    /// is 408 and its admission slot is free again.
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_concurrent: 16,
            retry_after_seconds: 1,
            core_timeout: Duration::from_secs(8),
            body_timeout: Duration::from_secs(5),
        }
    }
}

/// Shared state of every worker.
pub struct State {
    pub metrics: Metrics,
    pub entropy: Entropy,
    /// [`Context::scripts_image`].
    pub scripts_image: String,
    /// [`Context::allowed_images`].
    pub allowed_images: Vec<String>,
    /// [`Context::placement_policy`].
    pub placement_policy: hooks::placement::Policy,
    pub clock: Clock,
    pub max_body_bytes: usize,
    pub limits: Limits,
    pub admission: Admission,
    /// The bearer token hook calls must carry, if any.
    pub auth: Option<TokenFile>,
    /// The bearer token `/metrics` must carry instead of [`State::auth`], if any: a
    /// scraper's credential of its own, which no hook route accepts.
    pub metrics_auth: Option<TokenFile>,
    /// Set when shutdown begins: `/readyz` then fails so no new traffic is routed here.
    pub draining: AtomicBool,
}

impl State {
    #[must_use]
    pub fn new(entropy: Entropy, clock: Clock, max_body_bytes: usize) -> Self {
        Self::with_limits(entropy, clock, max_body_bytes, Limits::default())
    }

    #[must_use]
    pub fn with_limits(entropy: Entropy, clock: Clock, max_body_bytes: usize, limits: Limits) -> Self {
        Self {
            metrics: Metrics::new(clock.clone(), crate::cluster_metrics::DEFAULT_TTL),
            entropy,
            scripts_image: crate::DEFAULT_SCRIPTS_IMAGE.to_owned(),
            allowed_images: Vec::new(),
            placement_policy: hooks::placement::Policy::default(),
            clock,
            max_body_bytes,
            limits,
            admission: Admission::new(limits.max_concurrent),
            auth: None,
            metrics_auth: None,
            draining: AtomicBool::new(false),
        }
    }

    /// Pods install the scripts from `image` instead of [`crate::DEFAULT_SCRIPTS_IMAGE`].
    #[must_use]
    pub fn with_scripts_image(mut self, image: String) -> Self {
        self.scripts_image = image;
        self
    }

    /// [`Context::allowed_images`]: the image repositories `spec.image` and an S3
    /// store's `image` may name.
    #[must_use]
    pub fn with_allowed_images(mut self, repositories: Vec<String>) -> Self {
        self.allowed_images = repositories;
        self
    }

    /// Forgets a cluster's metrics when no sync or finalize has named it for `ttl`.
    #[must_use]
    pub fn with_cluster_metrics_ttl(mut self, ttl: Duration) -> Self {
        self.metrics = Metrics::new(self.clock.clone(), ttl);
        self
    }

    /// [`Context::placement_policy`]: what `spec.pod` and `spec.services` may set.
    #[must_use]
    pub fn with_placement_policy(mut self, policy: hooks::placement::Policy) -> Self {
        self.placement_policy = policy;
        self
    }

    /// Requires `Authorization: Bearer <token>` on every route but the probes.
    #[must_use]
    pub fn with_auth(mut self, token: TokenFile) -> Self {
        self.auth = Some(token);
        self
    }

    /// Makes `/metrics` require this token, and no longer the hook calls' one. The
    /// scraper (Prometheus) then holds a credential that can read metrics and nothing
    /// else: the hook calls' token would let it ask for any cluster's children.
    #[must_use]
    pub fn with_metrics_auth(mut self, token: TokenFile) -> Self {
        self.metrics_auth = Some(token);
        self
    }

    /// The token a route requires: `/metrics` its own if one is set.
    fn token_for(&self, path: &str) -> Option<&TokenFile> {
        match (&self.metrics_auth, path) {
            (Some(metrics), "/metrics") => Some(metrics),
            _ => self.auth.as_ref(),
        }
    }

    /// Makes `/readyz` fail from now on (shutdown has begun).
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }
}

/// Registers every route. The binary and the tests both call this.
pub fn configure(state: web::Data<State>) -> impl FnOnce(&mut web::ServiceConfig) {
    move |cfg| {
        let limit = state.max_body_bytes;
        cfg.app_data(state)
            .app_data(web::PayloadConfig::new(limit))
            .route("/healthz", web::get().to(healthz))
            .route("/readyz", web::get().to(readyz))
            .service(hook_resource("/sync").route(web::post().to(sync)))
            .service(hook_resource("/finalize").route(web::post().to(finalize)))
            .service(hook_resource("/customize").route(web::post().to(customize)))
            .service(hook_resource("/backup/sync").route(web::post().to(backup_sync)))
            .service(hook_resource("/backup/customize").route(web::post().to(backup_customize)))
            .service(web::resource("/metrics").wrap(from_fn(authenticate)).route(web::get().to(metrics)));
    }
}

/// A hook route: token check first (outermost), then admission.
fn hook_resource(
    path: &str,
) -> actix_web::Resource<
    impl actix_web::dev::ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = Error,
        InitError = (),
    >,
> {
    web::resource(path).wrap(from_fn(admit)).wrap(from_fn(authenticate))
}

/// The metrics label of a route.
fn hook_of(path: &str) -> &'static str {
    match path {
        "/sync" => "sync",
        "/finalize" => "finalize",
        "/customize" => "customize",
        "/backup/sync" => "backup_sync",
        "/backup/customize" => "backup_customize",
        "/metrics" => "metrics",
        _ => "other",
    }
}

async fn authenticate(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let Some(state) = req.app_data::<web::Data<State>>().cloned() else {
        return next.call(req).await.map(ServiceResponse::map_into_boxed_body);
    };
    let accepted = state
        .token_for(req.path())
        .is_none_or(|t| t.accepts(req.headers().get(header::AUTHORIZATION).map(header::HeaderValue::as_bytes)));
    if accepted {
        return next.call(req).await.map(ServiceResponse::map_into_boxed_body);
    }
    let hook = hook_of(req.path());
    state.metrics.requests.get_or_create(&RequestLabels { hook, outcome: "unauthorized" }).inc();
    tracing::warn!(hook, status = 401, "request without the expected bearer token refused");
    let response = HttpResponse::build(StatusCode::UNAUTHORIZED)
        .insert_header((header::WWW_AUTHENTICATE, r#"Bearer realm="mysql-hook""#))
        .content_type("text/plain; charset=utf-8")
        .body("a valid bearer token is required (Authorization: Bearer <token>)\n");
    Ok(req.into_response(response))
}

async fn admit(req: ServiceRequest, next: Next<impl MessageBody + 'static>) -> Result<ServiceResponse<BoxBody>, Error> {
    let Some(state) = req.app_data::<web::Data<State>>().cloned() else {
        return next.call(req).await.map(ServiceResponse::map_into_boxed_body);
    };
    let Some(permit) = state.admission.try_acquire() else {
        let hook = hook_of(req.path());
        state.metrics.requests.get_or_create(&RequestLabels { hook, outcome: "overloaded" }).inc();
        let seconds = state.limits.retry_after_seconds;
        tracing::warn!(
            hook,
            status = 429,
            limit = state.admission.limit(),
            "too many requests at once; asked to retry"
        );
        let response = HttpResponse::build(StatusCode::TOO_MANY_REQUESTS)
            .insert_header((header::RETRY_AFTER, seconds.to_string()))
            .content_type("text/plain; charset=utf-8")
            .body(format!("too many hook requests at once; retry in {seconds} s\n"));
        return Ok(req.into_response(response));
    };
    req.extensions_mut().insert(permit);
    next.call(req).await.map(ServiceResponse::map_into_boxed_body)
}

async fn sync(req: HttpRequest, body: web::Payload, state: web::Data<State>) -> HttpResponse {
    handle(&req, body, state, "sync").await
}

async fn finalize(req: HttpRequest, body: web::Payload, state: web::Data<State>) -> HttpResponse {
    handle(&req, body, state, "finalize").await
}

async fn customize(req: HttpRequest, body: web::Payload, state: web::Data<State>) -> HttpResponse {
    handle(&req, body, state, "customize").await
}

async fn backup_sync(req: HttpRequest, body: web::Payload, state: web::Data<State>) -> HttpResponse {
    handle(&req, body, state, "backup_sync").await
}

async fn backup_customize(req: HttpRequest, body: web::Payload, state: web::Data<State>) -> HttpResponse {
    handle(&req, body, state, "backup_customize").await
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain").body("ok\n")
}

/// Ready until shutdown begins; then 503, so the Service stops routing here while
/// the requests already in flight finish.
async fn readyz(state: web::Data<State>) -> HttpResponse {
    if state.draining.load(Ordering::Acquire) {
        HttpResponse::ServiceUnavailable().content_type("text/plain").body("shutting down\n")
    } else {
        HttpResponse::Ok().content_type("text/plain").body("ok\n")
    }
}

async fn metrics(state: web::Data<State>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
        .body(state.metrics.render())
}

/// An answer computed off the async workers (an `HttpResponse` cannot cross threads).
pub struct Answer {
    pub status: StatusCode,
    pub body: Vec<u8>,
    /// The metrics outcome.
    pub outcome: &'static str,
    /// What a sync or finalize answered about its cluster, for the per-cluster
    /// metrics.
    pub report: Option<Box<Report>>,
}

impl Answer {
    fn refusal(status: StatusCode, message: &str, outcome: &'static str) -> Self {
        Self { status, body: format!("{message}\n").into_bytes(), outcome, report: None }
    }

    fn into_response(self) -> HttpResponse {
        let content_type = if self.status == StatusCode::OK { "application/json" } else { "text/plain; charset=utf-8" };
        HttpResponse::build(self.status).content_type(content_type).body(self.body)
    }
}

/// Reads the body of an admitted request: at most `max_body_bytes`, within
/// `body_timeout`. The admission slot is taken before the body arrives, so a client
/// that trickles it in (or never sends it) must not keep the slot any longer.
async fn read_body(payload: web::Payload, state: &State) -> Result<web::Bytes, Answer> {
    let limit = state.max_body_bytes;
    match actix_web::rt::time::timeout(state.limits.body_timeout, payload.to_bytes_limited(limit)).await {
        Ok(Ok(Ok(body))) => Ok(body),
        Ok(Err(_)) => Err(Answer::refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the body is larger than {limit} bytes"),
            "too_large",
        )),
        Ok(Ok(Err(e))) => {
            Err(Answer::refusal(StatusCode::BAD_REQUEST, &format!("reading the body failed: {e}"), "bad_body"))
        }
        Err(_) => Err(Answer::refusal(
            StatusCode::REQUEST_TIMEOUT,
            &format!("the body did not arrive within {} ms", state.limits.body_timeout.as_millis()),
            "body_timeout",
        )),
    }
}

/// Reads the body under its deadline, then decodes, runs the core and encodes on a
/// blocking thread under the timeout, and records the outcome.
async fn handle(req: &HttpRequest, payload: web::Payload, state: web::Data<State>, hook: &'static str) -> HttpResponse {
    let started = Instant::now();
    state.metrics.in_flight.inc();
    let entropy = (state.entropy)();
    let body = if is_json(req) { Some(read_body(payload, &state).await) } else { None };
    let mut answer = match (body, entropy) {
        (None, _) => Answer::refusal(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be JSON (Content-Type: application/json)",
            "unsupported_media_type",
        ),
        (Some(Err(refusal)), _) => refusal,
        (Some(Ok(body)), Some(entropy)) => {
            // The blocking thread keeps the permit until it is really done, even if
            // the answer has gone out as a timeout by then.
            let permit: Option<Permit> = req.extensions().get::<Permit>().cloned();
            let ctx = Context {
                now: (state.clock)(),
                entropy,
                scripts_image: state.scripts_image.clone(),
                allowed_images: state.allowed_images.clone(),
                placement_policy: state.placement_policy.clone(),
            };
            let work = web::block(move || {
                let _permit = permit;
                answer_hook(hook, &body, &ctx)
            });
            match actix_web::rt::time::timeout(state.limits.core_timeout, work).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(_)) => Answer::refusal(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the hook panicked; nothing was changed",
                    "panic",
                ),
                Err(_) => Answer::refusal(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!(
                        "the hook did not answer within {} ms; nothing was changed",
                        state.limits.core_timeout.as_millis()
                    ),
                    "timeout",
                ),
            }
        }
        (Some(Ok(_)), None) => Answer::refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "no randomness could be drawn for generated passwords; nothing was changed",
            "no_entropy",
        ),
    };
    state.metrics.in_flight.dec();
    if let Some(report) = answer.report.take() {
        state.metrics.clusters.record(*report);
    }
    let outcome = answer.outcome;
    state.metrics.requests.get_or_create(&RequestLabels { hook, outcome }).inc();
    state.metrics.duration.get_or_create(&HookLabels { hook }).observe(started.elapsed().as_secs_f64());
    if answer.status != StatusCode::OK {
        tracing::warn!(hook, status = answer.status.as_u16(), outcome, "hook request refused");
    }
    answer.into_response()
}

fn is_json(req: &HttpRequest) -> bool {
    req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).and_then(|v| v.split(';').next()).is_some_and(
        |m| {
            let m = m.trim();
            m.eq_ignore_ascii_case("application/json") || m.eq_ignore_ascii_case("application/x-www-form-urlencoded")
        },
    )
}

/// Decodes a body, runs the core and encodes its answer: everything the shell does
/// with a hook request after the HTTP checks. Pure but for the panic guard; the
/// fuzz targets call it directly.
pub fn answer<Req, Resp>(body: &[u8], ctx: &Context, core: impl FnOnce(&Req, &Context) -> hooks::Result<Resp>) -> Answer
where
    Req: DeserializeOwned,
    Resp: Serialize,
{
    answer_reporting(body, ctx, core, |_: &Req, _: &Resp| None)
}

/// [`answer`], plus `report` read from the request and the answer of a 200, for
/// the per-cluster metrics.
fn answer_reporting<Req, Resp>(
    body: &[u8],
    ctx: &Context,
    core: impl FnOnce(&Req, &Context) -> hooks::Result<Resp>,
    report: impl FnOnce(&Req, &Resp) -> Option<Report>,
) -> Answer
where
    Req: DeserializeOwned,
    Resp: Serialize,
{
    // JSON is UTF-8 (RFC 8259); serde_json does not check the bytes of keys and
    // strings it skips, so a body with invalid UTF-8 in an unknown field would
    // otherwise decode (found by fuzzing).
    let text = match std::str::from_utf8(body) {
        Ok(text) => text,
        Err(e) => {
            return Answer::refusal(
                StatusCode::BAD_REQUEST,
                &format!("malformed JSON: the body is not UTF-8 (at byte {})", e.valid_up_to()),
                "malformed_json",
            );
        }
    };
    let request: Req = match serde_json::from_str(text) {
        Ok(r) => r,
        Err(e) if e.is_data() => {
            return Answer::refusal(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("not a valid hook request: {e}"),
                "invalid_request",
            );
        }
        Err(e) => return Answer::refusal(StatusCode::BAD_REQUEST, &format!("malformed JSON: {e}"), "malformed_json"),
    };
    match catch_unwind(AssertUnwindSafe(|| core(&request, ctx))) {
        Ok(Ok(response)) => match serde_json::to_vec(&response) {
            Ok(body) => {
                let report = report(&request, &response).map(Box::new);
                Answer { status: StatusCode::OK, body, outcome: "ok", report }
            }
            Err(e) => Answer::refusal(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("encoding the response failed: {e}"),
                "internal",
            ),
        },
        Ok(Err(e)) => Answer::refusal(StatusCode::UNPROCESSABLE_ENTITY, &e.to_string(), e.metric_label()),
        Err(_) => Answer::refusal(StatusCode::INTERNAL_SERVER_ERROR, "the hook panicked; nothing was changed", "panic"),
    }
}

/// [`answer`] for a hook by name (`sync`, `finalize`, `customize`, `backup_sync`,
/// `backup_customize`).
#[must_use]
pub fn answer_hook(hook: &str, body: &[u8], ctx: &Context) -> Answer {
    match hook {
        "customize" => answer(body, ctx, |r: &hooks::metacontroller::CustomizeRequest, _| hooks::customize(r)),
        "finalize" => answer_reporting(
            body,
            ctx,
            |r: &hooks::metacontroller::SyncRequest, ctx| hooks::finalize(r, ctx),
            |r, response| Report::of(r, &response.status, response.finalized),
        ),
        "backup_sync" => {
            answer(body, ctx, |r: &hooks::metacontroller::BackupSyncRequest, ctx| hooks::mysqlbackup::sync(r, ctx))
        }
        "backup_customize" => {
            answer(body, ctx, |r: &hooks::metacontroller::BackupCustomizeRequest, _| hooks::mysqlbackup::customize(r))
        }
        _ => answer_reporting(
            body,
            ctx,
            |r: &hooks::metacontroller::SyncRequest, ctx| hooks::sync(r, ctx),
            |r, response| {
                crate::role_trace::sync(r, response);
                Report::of(r, &response.status, false)
            },
        ),
    }
}

//! The span every hook request runs in.
//!
//! Hook calls get tracing-actix-web's standard root span (method, route, status,
//! request id, ...), so a refusal logged inside it says which request it was.
//! Probes and scrapes (`/healthz`, `/readyz`, `/metrics`), which arrive every few
//! seconds and never log anything, get no span: building one formats a dozen
//! fields for nothing.

use actix_web::{
    Error,
    body::MessageBody,
    dev::{ServiceRequest, ServiceResponse},
};
use tracing::Span;
use tracing_actix_web::{DefaultRootSpanBuilder, RootSpanBuilder};

/// Paths that run without a span.
pub const QUIET_PATHS: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

/// The [`RootSpanBuilder`] of the hook's `TracingLogger`.
pub struct HookSpans;

impl RootSpanBuilder for HookSpans {
    fn on_request_start(request: &ServiceRequest) -> Span {
        if QUIET_PATHS.contains(&request.path()) {
            Span::none()
        } else {
            DefaultRootSpanBuilder::on_request_start(request)
        }
    }

    fn on_request_end<B: MessageBody>(span: Span, outcome: &Result<ServiceResponse<B>, Error>) {
        if !span.is_none() {
            DefaultRootSpanBuilder::on_request_end(span, outcome);
        }
    }
}

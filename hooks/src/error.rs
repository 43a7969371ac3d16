//! Why the core refused a request. Every error maps to a non-200 answer, so
//! Metacontroller retries and changes nothing.

/// An error of the core.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The body is JSON but not a request the hook can act on.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
}

impl Error {
    /// A short label for metrics.
    #[must_use]
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::InvalidRequest(_) => "invalid_request",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

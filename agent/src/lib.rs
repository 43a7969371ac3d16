//! The agent: everything of mysql-hook that talks to a database server.
//!
//! The pure hook decides; the agent acts. It is one static binary,
//! `mysql-hook-agent`, that every server pod and Job pod gets from the hook's own
//! image (the `install-scripts` init container copies it beside the scripts), so a
//! pod always runs the agent of the hook that built it, in any server image
//! whatever its C library. Each command reads its environment
//! ([`context::Context`]), talks to servers through a MySQL-protocol client
//! ([`server`]), builds SQL only through [`sql`], and ends with one
//! [`protocol::Report`] line that the hook reads with the same type.
//!
//! A newcomer's map:
//! - [`context`]: the environment a command is given (members, credentials, TLS);
//! - [`server`]: a session with one server, and the reads every command makes;
//! - [`sql`]: quoting, the only place SQL is built from values;
//! - [`status`]: replica status, typed;
//! - [`binlog`]: the binary log archive's reads (a file's start state);
//! - [`dump`]: the position a logical dump records;
//! - [`catalog`]: the schemas and accounts a backup carries, read twice around its dump;
//! - [`relay`]: what a replica received, and applying all of it before a promotion;
//! - [`examine`]: a failover's look at every member, receivers stopped (and verified), at once;
//! - [`stranded`]: clients a moved `-primary` Service left on an old primary, released;
//! - [`gtid_calc`]: the scripts' GTID comparisons (`gtid subset A B`, ...);
//! - [`events`]: scheduled events follow the primary (enabled there, disabled on replicas);
//! - [`fence`]: fencing, and the epoch rule by which an old primary fences itself;
//! - [`probe`]: the server pods' probes;
//! - [`sidecar`]: the `agent` container: follows the cluster, answers the probes;
//! - [`users`]: the application accounts of `spec.users`;
//! - [`operator_user`], [`exporter_user`]: the operator's and the exporter's own accounts;
//! - [`tls_reload`]: a renewed certificate loaded without a restart;
//! - [`scale_down`]: the proof that lets the failover arithmetic shrink after a scale-down.

pub mod binlog;
pub mod catalog;
pub mod context;
pub mod decide;
pub mod dump;
pub mod events;
pub mod examine;
pub mod exporter_user;
pub mod fence;
pub mod gtid_calc;
pub mod inspect;
pub mod operator_user;
pub mod prestop;
pub mod probe;
pub mod quarantine;
pub mod relay;
pub mod scale_down;
pub mod server;
pub mod sidecar;
pub mod sql;
pub mod status;
pub mod stranded;
pub mod tls_reload;
pub mod users;

pub use protocol::Report;

/// Why a command failed: a stable `reason` the hook may act on, and a message for
/// people. It becomes the command's error [`Report`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub reason: &'static str,
    pub message: String,
}

impl Failure {
    #[must_use]
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self { reason, message: message.into() }
    }

    /// The error report of this failure.
    #[must_use]
    pub fn report(&self) -> Report {
        Report::error(self.reason, self.message.clone())
    }
}

pub type Result<T, E = Failure> = std::result::Result<T, E>;

/// The report of a command that did nothing on `pod` and is to be tried again
/// later (exit 75, as the scripts' `waiting`): not the server it acts on yet.
#[must_use]
pub fn waiting(pod: &str, reason: &str, message: String) -> Report {
    Report {
        pod: Some(pod.to_owned()),
        reason: Some(reason.to_owned()),
        message: Some(message),
        ..Report::new("waiting")
    }
}

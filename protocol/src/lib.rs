//! What the hook and its agent say to each other, typed once for both.
//!
//! The agent (`mysql-hook-agent`, beside every server and in every Job) reports
//! what it did as one JSON line; the pure hook reads it back from a container's
//! termination message. Both sides use these definitions, so the line cannot drift
//! between writer and reader. The GTID types are here too: the agent parses what
//! servers and backup stores say into them, and the hook compares positions with
//! the same algebra. Nothing here does I/O.
//!
//! - [`report`]: the one-line JSON report every agent command ends with;
//! - [`gtid`]: MySQL GTID sets (with tags) and MariaDB GTID lists, parsed strictly,
//!   with their algebra.

pub mod gtid;
pub mod report;

pub use report::{Report, ServerReport};

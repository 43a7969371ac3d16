//! The in-cluster scripts (`hooks/scripts/*.sh`), embedded at build time.
//!
//! They run inside the server image as Jobs, init containers and a sidecar, and are
//! the only code that talks to MySQL. `hooks/scripts/README.md` documents the
//! environment they read and the one-line JSON result each writes to its
//! termination log.

include!(concat!(env!("OUT_DIR"), "/scripts.rs"));

/// Where the config ConfigMap (option file, scripts, current primary) is mounted.
pub const MOUNT: &str = "/etc/mysql-hook";

/// The path of a script inside a pod.
#[must_use]
pub fn path(script: &str) -> String {
    format!("{MOUNT}/{script}")
}

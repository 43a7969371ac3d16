//! The in-cluster scripts (`hooks/scripts/*.sh`), embedded at build time.
//!
//! They run inside the server image as Jobs, init containers and a sidecar, and are
//! the only code that talks to MySQL. `hooks/scripts/README.md` documents the
//! environment they read and the one-line JSON result each writes to its
//! termination log.
//!
//! They reach a pod through the hook's own image: its first init container runs
//! `mysql-hook install-scripts` ([`INSTALL_COMMAND`]), which writes [`SCRIPTS`] into
//! an emptyDir at [`DIR`]. So a pod always runs the scripts of the hook version
//! that built it, and the scripts (about 70 KB) are not part of the ConfigMap that
//! Metacontroller sends back and forth on every sync.

include!(concat!(env!("OUT_DIR"), "/scripts.rs"));

/// Where the scripts are installed in every pod (an emptyDir).
pub const DIR: &str = "/opt/mysql-hook";

/// The agent's binary: beside the hook's in its image, and installed beside the
/// scripts in every pod (the same `install-scripts`). A static build, so it runs
/// in any server image whatever its C library.
pub const AGENT: &str = "mysql-hook-agent";

/// Where the config ConfigMap (option file, current primary) is mounted.
pub const CONFIG_DIR: &str = "/etc/mysql-hook";

/// The hook binary inside its image, and the subcommand that installs the scripts
/// into [`DIR`]. The Dockerfile puts the binary there.
pub const INSTALL_COMMAND: [&str; 3] = ["/usr/local/bin/mysql-hook", "install-scripts", DIR];

/// The path of a script inside a pod.
#[must_use]
pub fn path(script: &str) -> String {
    format!("{DIR}/{script}")
}

/// The path of a ConfigMap key inside a pod.
#[must_use]
pub fn config_path(key: &str) -> String {
    format!("{CONFIG_DIR}/{key}")
}

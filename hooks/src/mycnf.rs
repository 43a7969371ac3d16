//! The `my.cnf` every server starts with.
//!
//! Safe replication defaults come first and cannot be overridden: GTIDs, row-based
//! binary logs that replicas log too, every commit durable on disk, and every server
//! starting read-only so that only a promotion step ever makes one writable.
//! `spec.config` follows. The server id and report host are per pod and are written
//! by `init.sh`. Why each safety option is set (after MOCO's `pkg/mycnf`):
//!
//! - `sync_binlog = 1`, `innodb_flush_log_at_trx_commit = 1`: a commit that returned
//!   OK is on disk on the primary (and, with semi-sync, received by a replica).
//! - `relay_log_recovery = OFF`: with lossless semi-sync a replica acknowledges a
//!   transaction once it is in its relay log, before it is applied. Recovery ON would
//!   throw a restarted replica's relay log away; if the primary then dies, an
//!   acknowledged commit that only this replica held is lost (a chained failure).
//!   With GTID auto-positioning an incomplete last event is fetched again.
//! - `read_only` (and MySQL's `super_read_only`) ON, `skip_replica_start` ON: a
//!   restarted server is never writable and never replicates from a stale source
//!   until the agent or a role-change Job decides.
//! - semi-sync: wait `AFTER_SYNC` (the commit is invisible until acknowledged), a
//!   timeout of ~49 days and wait with no replica: never a silent fallback to
//!   asynchronous replication. MySQL's options carry the `loose_` prefix: the plugins
//!   are loaded by `plugin_load_add`, which `mysqld --initialize` does not do, and an
//!   unknown option would abort it.
//! - `skip_name_resolve`: accounts are by address; a slow DNS never delays a login.

use std::{collections::BTreeMap, fmt::Write as _};

use crate::api::Flavor;

/// Options the hook owns; `spec.config` may not set them.
const MANAGED: &[&str] = &[
    "bind_address",
    "binlog_format",
    "datadir",
    "enforce_gtid_consistency",
    "gtid_domain_id",
    "gtid_mode",
    "gtid_strict_mode",
    "log_bin",
    "log_replica_updates",
    "log_slave_updates",
    "plugin_load_add",
    "port",
    "read_only",
    "relay_log",
    "relay_log_recovery",
    "report_host",
    "server_id",
    "skip_name_resolve",
    "skip_replica_start",
    "skip_slave_start",
    "socket",
    "super_read_only",
    "sync_binlog",
];

/// Normalizes an option name the way mysqld does: `-` and `_` are the same, and a
/// `loose-` prefix only silences unknown-option errors.
fn normalize(key: &str) -> String {
    let key = key.replace('-', "_");
    key.strip_prefix("loose_").map_or(key.clone(), str::to_owned)
}

/// The `spec.config` keys that are not the user's to set, sorted.
#[must_use]
pub fn refused_keys(config: &BTreeMap<String, String>) -> Vec<String> {
    config
        .keys()
        .filter(|k| {
            let k = normalize(k);
            MANAGED.contains(&k.as_str()) || k.starts_with("rpl_semi_sync")
        })
        .cloned()
        .collect()
}

/// The keys or values of `spec.config` that cannot be written into an option file.
#[must_use]
pub fn malformed_entries(config: &BTreeMap<String, String>) -> Vec<String> {
    config
        .iter()
        .filter(|(k, v)| {
            k.is_empty()
                || !k.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
                || v.contains(['\n', '\r'])
        })
        .map(|(k, _)| k.clone())
        .collect()
}

/// Renders the option file. `config` must have passed [`refused_keys`] and
/// [`malformed_entries`].
#[must_use]
pub fn render(flavor: Flavor, config: &BTreeMap<String, String>) -> String {
    let mut out =
        String::from("# Written by mysql-hook. Replication safety options first; spec.config last.\n[mysqld]\n");
    let managed: &[(&str, &str)] = match flavor {
        Flavor::Mysql => &[
            ("gtid_mode", "ON"),
            ("enforce_gtid_consistency", "ON"),
            ("log_bin", "binlog"),
            ("binlog_format", "ROW"),
            ("log_replica_updates", "ON"),
            ("sync_binlog", "1"),
            ("innodb_flush_log_at_trx_commit", "1"),
            ("relay_log_recovery", "OFF"),
            ("skip_replica_start", "ON"),
            ("read_only", "ON"),
            ("super_read_only", "ON"),
            ("plugin_load_add", "semisync_source.so"),
            ("plugin_load_add", "semisync_replica.so"),
            ("loose_rpl_semi_sync_source_wait_point", "AFTER_SYNC"),
            ("loose_rpl_semi_sync_source_wait_for_replica_count", "1"),
            ("loose_rpl_semi_sync_source_timeout", "4294967295"),
            ("loose_rpl_semi_sync_source_wait_no_replica", "ON"),
            ("loose_rpl_semi_sync_replica_enabled", "ON"),
            ("relay_log", "relay-bin"),
            ("replica_net_timeout", "10"),
            ("skip_name_resolve", "ON"),
            ("bind_address", "*"),
            ("port", "3306"),
        ],
        Flavor::Mariadb => &[
            ("log_bin", "binlog"),
            ("binlog_format", "ROW"),
            ("log_slave_updates", "ON"),
            ("gtid_strict_mode", "ON"),
            ("sync_binlog", "1"),
            ("innodb_flush_log_at_trx_commit", "1"),
            ("relay_log_recovery", "OFF"),
            ("skip_slave_start", "ON"),
            ("read_only", "ON"),
            ("rpl_semi_sync_master_wait_point", "AFTER_SYNC"),
            ("rpl_semi_sync_master_timeout", "4294967295"),
            ("rpl_semi_sync_master_wait_no_slave", "ON"),
            ("rpl_semi_sync_slave_enabled", "ON"),
            ("gtid_domain_id", "0"),
            ("relay_log", "relay-bin"),
            ("slave_net_timeout", "10"),
            ("skip_name_resolve", "ON"),
            ("bind_address", "*"),
            ("port", "3306"),
        ],
    };
    for (k, v) in managed {
        let _ = writeln!(out, "{k} = {v}");
    }
    if !config.is_empty() {
        out.push_str("# spec.config\n");
        for (k, v) in config {
            let _ = writeln!(out, "{k} = {v}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_options_are_refused_in_any_spelling() {
        let config = BTreeMap::from([
            ("max_connections".to_owned(), "500".to_owned()),
            ("super-read-only".to_owned(), "OFF".to_owned()),
            ("loose-gtid_mode".to_owned(), "OFF".to_owned()),
            ("rpl_semi_sync_source_timeout".to_owned(), "1".to_owned()),
        ]);
        assert_eq!(refused_keys(&config), ["loose-gtid_mode", "rpl_semi_sync_source_timeout", "super-read-only"]);
    }

    #[test]
    fn option_file_injection_is_refused() {
        let config = BTreeMap::from([
            ("a".to_owned(), "1\n[client]".to_owned()),
            ("B".to_owned(), "1".to_owned()),
            ("ok".to_owned(), "1".to_owned()),
        ]);
        assert_eq!(malformed_entries(&config), ["B", "a"]);
    }

    #[test]
    fn user_options_follow_the_safety_defaults() {
        let text = render(Flavor::Mysql, &BTreeMap::from([("max_connections".to_owned(), "500".to_owned())]));
        let safety = text.find("super_read_only = ON").unwrap_or(usize::MAX);
        let user = text.find("max_connections = 500").unwrap_or(0);
        assert!(safety < user);
    }
}

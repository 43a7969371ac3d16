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
//! - binary-log expiry (`binlog_expire_logs_seconds`, from
//!   `spec.replication.binlogExpireSeconds`, 7 days by default): MariaDB's default
//!   keeps binary logs forever and fills the volume. Expiry is safe for replication
//!   since a replica that needs purged logs is seeded again (`seed.sh`); it bounds
//!   how far back the servers' own logs reach, which is what a point-in-time
//!   recovery from the last backup would replay (see docs/replication.md).
//!   `spec.config` may still set it (it comes last), but not together with the field.

use std::{collections::BTreeMap, fmt::Write as _};

use crate::api::Flavor;

/// Options `spec.config` may set, on both flavors.
///
/// An allow-list, not a list of what is forbidden: the server's option parser
/// takes far more spellings than a name comparison sees (`-`/`_`, the modifiers in
/// [`MODIFIERS`], MariaDB's abbreviations and `plugin-` aliases), and new server
/// versions add options. So every option here is one that tunes the server for the
/// applications and cannot:
/// - weaken replication safety or durability (GTIDs, the binary log, read-only,
///   semi-sync, `sync_binlog`, `innodb_flush_log_at_trx_commit`,
///   `innodb_doublewrite`, `innodb_flush_method`, server ids);
/// - open or redirect the server (`bind_address`, `port`, `socket`,
///   `skip_networking`, TLS options, `require_secure_transport`);
/// - switch off authentication or run or load code (`skip_grant_tables`,
///   `init_file`, `init_connect`, `init_slave`, `plugin_load*`, `plugin_dir`);
/// - read or write files outside what the server manages (`local_infile`,
///   `secure_file_priv`, every `*_file`, `*_dir`, `*_path` option, `general_log`);
/// - break the in-cluster scripts (`autocommit`, `default_storage_engine`).
///
/// Every name is the exact name of an option of the flavors it is listed for (exact
/// names win over abbreviations in MariaDB's parser). `tests/config_parser.rs`
/// proves, against the real `mariadbd`, that no accepted spelling reaches another
/// option. Widening the list is an issue, with that test extended.
const ALLOWED_BOTH: &[&str] = &[
    // connections and timeouts
    "back_log",
    "connect_timeout",
    "interactive_timeout",
    "lock_wait_timeout",
    "max_allowed_packet",
    "max_connect_errors",
    "max_connections",
    "max_user_connections",
    "net_buffer_length",
    "net_read_timeout",
    "net_write_timeout",
    "thread_cache_size",
    "thread_stack",
    "wait_timeout",
    // memory and caches
    "bulk_insert_buffer_size",
    "group_concat_max_len",
    "join_buffer_size",
    "key_buffer_size",
    "max_heap_table_size",
    "max_prepared_stmt_count",
    "max_sort_length",
    "max_sp_recursion_depth",
    "open_files_limit",
    "read_buffer_size",
    "read_rnd_buffer_size",
    "sort_buffer_size",
    "table_definition_cache",
    "table_open_cache",
    "table_open_cache_instances",
    "tmp_table_size",
    // InnoDB (not its durability or file locations)
    "innodb_adaptive_flushing",
    "innodb_adaptive_hash_index",
    "innodb_autoinc_lock_mode",
    "innodb_buffer_pool_chunk_size",
    "innodb_buffer_pool_size",
    "innodb_change_buffering",
    "innodb_deadlock_detect",
    "innodb_default_row_format",
    "innodb_file_per_table",
    "innodb_flush_neighbors",
    "innodb_ft_max_token_size",
    "innodb_ft_min_token_size",
    "innodb_io_capacity",
    "innodb_io_capacity_max",
    "innodb_lock_wait_timeout",
    "innodb_log_buffer_size",
    "innodb_log_file_size",
    "innodb_lru_scan_depth",
    "innodb_max_dirty_pages_pct",
    "innodb_max_dirty_pages_pct_lwm",
    "innodb_max_purge_lag",
    "innodb_max_undo_log_size",
    "innodb_old_blocks_time",
    "innodb_online_alter_log_max_size",
    "innodb_open_files",
    "innodb_print_all_deadlocks",
    "innodb_purge_threads",
    "innodb_read_io_threads",
    "innodb_rollback_on_timeout",
    "innodb_sort_buffer_size",
    "innodb_stats_auto_recalc",
    "innodb_stats_persistent",
    "innodb_strict_mode",
    "innodb_undo_log_truncate",
    "innodb_write_io_threads",
    // SQL behaviour
    "character_set_server",
    "collation_server",
    "default_time_zone",
    "default_week_format",
    "div_precision_increment",
    "eq_range_index_dive_limit",
    "event_scheduler",
    "explicit_defaults_for_timestamp",
    "ft_max_word_len",
    "ft_min_word_len",
    "lc_time_names",
    "optimizer_prune_level",
    "optimizer_search_depth",
    "optimizer_switch",
    "sql_mode",
    "transaction_isolation",
    // diagnostics
    "log_queries_not_using_indexes",
    "log_slow_admin_statements",
    "long_query_time",
    "min_examined_row_limit",
    "performance_schema",
    "slow_query_log",
    // binary log size and retention (not its format or durability)
    "binlog_cache_size",
    "binlog_expire_logs_seconds",
    "binlog_stmt_cache_size",
    "max_binlog_size",
];

/// Options only MySQL (8.4) has, under the same rules as [`ALLOWED_BOTH`].
const ALLOWED_MYSQL: &[&str] = &[
    "cte_max_recursion_depth",
    "information_schema_stats_expiry",
    "innodb_buffer_pool_instances",
    "innodb_redo_log_capacity",
    "log_error_verbosity",
    "log_slow_extra",
    "log_slow_replica_statements",
    "log_timestamps",
    "max_execution_time",
    "range_optimizer_max_mem_size",
    "replica_parallel_workers",
    "sql_require_primary_key",
    "temptable_max_ram",
];

/// Options only MariaDB has, under the same rules as [`ALLOWED_BOTH`].
const ALLOWED_MARIADB: &[&str] = &[
    "aria_pagecache_buffer_size",
    "expire_logs_days",
    "innodb_force_primary_key",
    "log_slow_slave_statements",
    "log_slow_verbosity",
    "log_warnings",
    "max_recursive_iterations",
    "max_statement_time",
    "query_cache_size",
    "query_cache_type",
    "slave_parallel_mode",
    "slave_parallel_threads",
    "thread_handling",
    "thread_pool_max_threads",
    "thread_pool_size",
];

/// The modifiers mysqld's option parser strips from the front of an option name:
/// `loose` (an unknown option is only a warning), `skip` and `disable` (off),
/// `enable` (on), `maximum` (the upper limit of a session value) and MariaDB's
/// `autoset`. The parser strips them in any number and order (`my_getopt.c`
/// restarts its prefix loop after each one): `skip-disable-read-only` turns
/// `read_only` off.
pub const MODIFIERS: &[&str] = &["loose", "skip", "disable", "enable", "maximum", "autoset"];

/// The options `spec.config` may set for `flavor`, sorted.
#[must_use]
pub fn allowed_options(flavor: Flavor) -> Vec<&'static str> {
    let only = match flavor {
        Flavor::Mysql => ALLOWED_MYSQL,
        Flavor::Mariadb => ALLOWED_MARIADB,
    };
    let mut all: Vec<&'static str> = ALLOWED_BOTH.iter().chain(only).copied().collect();
    all.sort_unstable();
    all
}

/// The option a `spec.config` key names once what the parser ignores is gone:
/// `-` and `_` are the same, and every leading modifier ([`MODIFIERS`]) is
/// stripped. The result is compared with the allow-list exactly, so a key the
/// server would read as an abbreviation or a `plugin-` alias is refused too.
#[must_use]
pub fn option_name(key: &str) -> String {
    let mut name = key.replace('-', "_");
    while let Some(rest) = MODIFIERS.iter().find_map(|m| name.strip_prefix(m).and_then(|r| r.strip_prefix('_'))) {
        name = rest.to_owned();
    }
    name
}

/// The `spec.config` keys that are not the user's to set for `flavor`, sorted: every
/// key whose [`option_name`] is not on the allow-list ([`allowed_options`]).
#[must_use]
pub fn refused_keys(flavor: Flavor, config: &BTreeMap<String, String>) -> Vec<String> {
    let allowed = allowed_options(flavor);
    config.keys().filter(|k| allowed.binary_search(&option_name(k).as_str()).is_err()).cloned().collect()
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

/// The `spec.config` keys that set binary-log expiry (any spelling), sorted.
#[must_use]
pub fn binlog_expiry_keys(config: &BTreeMap<String, String>) -> Vec<String> {
    config
        .keys()
        .filter(|k| matches!(option_name(k).as_str(), "binlog_expire_logs_seconds" | "expire_logs_days"))
        .cloned()
        .collect()
}

/// The binary-log expiry option line for `flavor` at `version`: seconds
/// (`binlog_expire_logs_seconds`, MySQL 8 and MariaDB 10.6 on), else whole days
/// rounded up (`expire_logs_days`, older MariaDB).
#[must_use]
pub fn binlog_expiry(flavor: Flavor, version: &str, seconds: i32) -> (&'static str, String) {
    let old_mariadb =
        flavor == Flavor::Mariadb && crate::version::Version::parse(version).is_some_and(|v| (v.0, v.1) < (10, 6));
    if old_mariadb {
        ("expire_logs_days", ((seconds.max(1) + 86_399) / 86_400).to_string())
    } else {
        ("binlog_expire_logs_seconds", seconds.to_string())
    }
}

/// The directory MariaDB may read and write files in (`secure_file_priv`): an
/// emptyDir of its own in the server pod, nothing else in it. MariaDB takes only a
/// directory there; MySQL takes `NULL` (no file access at all). Without it
/// `LOAD_FILE()` and `SELECT ... INTO OUTFILE` reach every file mysqld can read,
/// the mounted password files among them, for the operator account a restore
/// loads a store's SQL as (issue 30.3).
pub const FILES_DIR: &str = "/var/lib/mysql-files";

/// Renders the option file. `config` must have passed [`refused_keys`] and
/// [`malformed_entries`]; `expiry` is the binary-log expiry line ([`binlog_expiry`]).
#[must_use]
pub fn render(flavor: Flavor, expiry: &(&str, String), config: &BTreeMap<String, String>) -> String {
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
            // CLONE seeds a new or rebuilt replica from a donor (issue 33.5).
            ("plugin_load_add", "mysql_clone.so"),
            // No file import or export (see FILES_DIR).
            ("secure_file_priv", "NULL"),
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
            // Files only in an empty directory of their own (see FILES_DIR).
            ("secure_file_priv", FILES_DIR),
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
    let _ = writeln!(out, "{} = {}", expiry.0, expiry.1);
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
    fn only_allowed_options_pass_in_any_spelling() {
        let config: BTreeMap<String, String> = [
            "max_connections",
            "loose-max-connections",
            "skip_slow_query_log",
            "enable-loose-innodb_file_per_table",
            "super-read-only",
            "skip-super-read-only",
            "disable-read-only",
            "skip-disable-read-only",
            "loose-gtid_mode",
            "rpl_semi_sync_source_timeout",
            "skip_grant_tables",
            "skip-gr",
            "init_file",
            "plugin_load_add",
            "plugin-innodb-buffer-pool-size",
            "max_conn",
            "local_infile",
            "lower_case_table_names",
            "loose-lower-case-table-names",
        ]
        .into_iter()
        .map(|k| (k.to_owned(), "1".to_owned()))
        .collect();
        assert_eq!(
            refused_keys(Flavor::Mysql, &config),
            [
                "disable-read-only",
                "init_file",
                "local_infile",
                "loose-gtid_mode",
                "loose-lower-case-table-names",
                "lower_case_table_names",
                "max_conn",
                "plugin-innodb-buffer-pool-size",
                "plugin_load_add",
                "rpl_semi_sync_source_timeout",
                "skip-disable-read-only",
                "skip-gr",
                "skip-super-read-only",
                "skip_grant_tables",
                "super-read-only",
            ]
        );
    }

    #[test]
    fn flavors_have_their_own_options() {
        let config = BTreeMap::from([
            ("max_execution_time".to_owned(), "1000".to_owned()),
            ("max_statement_time".to_owned(), "1".to_owned()),
        ]);
        assert_eq!(refused_keys(Flavor::Mysql, &config), ["max_statement_time"]);
        assert_eq!(refused_keys(Flavor::Mariadb, &config), ["max_execution_time"]);
    }

    #[test]
    fn allowed_names_are_canonical_and_unmodified() {
        for flavor in [Flavor::Mysql, Flavor::Mariadb] {
            let all = allowed_options(flavor);
            for name in &all {
                // a name that began with a modifier would be compared without it
                assert_eq!(option_name(name), *name, "{name}");
                assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'), "{name}");
            }
            let mut dedup = all.clone();
            dedup.dedup();
            assert_eq!(dedup, all, "an option is listed twice");
        }
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
        let expiry = binlog_expiry(Flavor::Mysql, "8.4.3", 604_800);
        let text = render(Flavor::Mysql, &expiry, &BTreeMap::from([("max_connections".to_owned(), "500".to_owned())]));
        let safety = text.find("super_read_only = ON").unwrap_or(usize::MAX);
        let user = text.find("max_connections = 500").unwrap_or(0);
        assert!(safety < user);
    }

    /// Issue 30.3: no file a server pod mounts is readable through SQL; issue
    /// 33.5: MySQL loads the clone plugin.
    #[test]
    fn file_access_is_confined_and_mysql_can_clone() {
        let mysql = render(Flavor::Mysql, &binlog_expiry(Flavor::Mysql, "9.7.4", 3600), &BTreeMap::new());
        assert!(
            mysql.contains("\nsecure_file_priv = NULL\n") && mysql.contains("\nplugin_load_add = mysql_clone.so\n")
        );
        let mariadb = render(Flavor::Mariadb, &binlog_expiry(Flavor::Mariadb, "10.11.9", 3600), &BTreeMap::new());
        assert!(mariadb.contains(&format!("\nsecure_file_priv = {FILES_DIR}\n")), "{mariadb}");
    }

    #[test]
    fn binary_logs_expire() {
        assert_eq!(binlog_expiry(Flavor::Mariadb, "11.4.4", 604_800), ("binlog_expire_logs_seconds", "604800".into()));
        assert_eq!(binlog_expiry(Flavor::Mysql, "8.4.3", 3600), ("binlog_expire_logs_seconds", "3600".into()));
        assert_eq!(binlog_expiry(Flavor::Mariadb, "10.5.9", 90_000), ("expire_logs_days", "2".into()));
        let text = render(Flavor::Mariadb, &binlog_expiry(Flavor::Mariadb, "10.11.9", 7200), &BTreeMap::new());
        assert!(text.contains("\nbinlog_expire_logs_seconds = 7200\n"), "{text}");
        let config = BTreeMap::from([
            ("loose-expire-logs-days".to_owned(), "1".to_owned()),
            ("max_connections".to_owned(), "9".to_owned()),
        ]);
        assert_eq!(binlog_expiry_keys(&config), ["loose-expire-logs-days"]);
    }
}

//! `spec.config` judged by the real server's option parser (issue 18.4).
//!
//! mysqld's option parser (`my_getopt`) does more than match names: `-` and `_` are
//! the same; the modifiers `loose-`, `skip-`, `disable-`, `enable-`, `maximum-` (and
//! MariaDB's `autoset-`) are stripped in any number and order; MariaDB also takes
//! any unambiguous abbreviation of a name, and plugin options with a `plugin-`
//! prefix. A validator that compares names misses all of that (`skip-gr` is
//! `skip-grant-tables`, `skip-disable-read-only` turns `read_only` off).
//!
//! These tests ask the real parser, MariaDB's `mariadbd --help --verbose`, which
//! prints every variable's value after reading the option files, without starting
//! a server. They read the hook's rendered MariaDB `my.cnf` followed by one
//! `spec.config` entry, and compare with the `my.cnf` alone:
//!
//! - every spelling the hook accepts changes only options on the allow-list;
//! - spellings of managed and dangerous options, which the hook refuses, do change
//!   those options in the server (the refusal is needed, the normalisation right);
//! - no server option can be reached from an accepted spelling (checked over the
//!   server's whole option list, not only over the spellings tried).
//!
//! `mariadbd` comes from Debian's mariadb-server, installed by the tests/scripts
//! harness when missing (as root); the test fails, never skips, without it.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicUsize, Ordering},
};

use hooks::{api::Flavor, mycnf};

/// Path of `mariadbd`, installing Debian's package through the tests/scripts
/// harness when it is missing.
fn mariadbd() -> PathBuf {
    for p in ["/usr/sbin/mariadbd", "/usr/bin/mariadbd"] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys; sys.path.insert(0, 'tests/scripts'); import dbcluster; print(dbcluster.ensure_mariadb())",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 to install mariadb-server: {e}"));
    assert!(
        out.status.success(),
        "mariadbd is missing and could not be installed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// `-` and `_` are the same to the parser; compare in the `_` form.
fn underscore(s: &str) -> String {
    s.replace('-', "_")
}

struct Parser {
    exe: PathBuf,
    dir: PathBuf,
    base_cnf: String,
    runs: AtomicUsize,
}

impl Parser {
    fn new() -> Self {
        static INSTANCE: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mysql-hook-config-parser-{}-{}",
            std::process::id(),
            INSTANCE.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let files_dir = dir.display().to_string();
        Self {
            exe: mariadbd(),
            dir,
            // mariadbd refuses a secure_file_priv directory that does not exist; the
            // pod's is an emptyDir, here it is this test's own directory.
            base_cnf: mycnf::render(
                Flavor::Mariadb,
                &mycnf::binlog_expiry(Flavor::Mariadb, "10.11.9", 604_800),
                &BTreeMap::new(),
            )
            .replace(mycnf::FILES_DIR, &files_dir),
            runs: AtomicUsize::new(0),
        }
    }

    /// `mariadbd --help --verbose` after reading the hook's `my.cnf` plus `extra`
    /// (lines in its `[mysqld]` section): the variables and their values, or the
    /// server's error when it refuses the options.
    fn read(&self, extra: &str) -> Result<BTreeMap<String, String>, String> {
        let n = self.runs.fetch_add(1, Ordering::Relaxed);
        let file = self.dir.join(format!("{n}.cnf"));
        fs::write(&file, format!("{}{extra}\n", self.base_cnf)).unwrap_or_else(|e| panic!("{e}"));
        let out = Command::new(&self.exe)
            .arg(format!("--defaults-file={}", file.display()))
            .args(["--help", "--verbose"])
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", self.exe.display()));
        let _ = fs::remove_file(&file);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() || stderr.contains("[ERROR]") {
            return Err(stderr.lines().find(|l| l.contains("[ERROR]")).unwrap_or(&stderr).trim().to_owned());
        }
        let mut vars = BTreeMap::new();
        let mut table = false;
        for line in stdout.lines() {
            if line.starts_with("------------") {
                table = true;
                continue;
            }
            if table {
                let Some((k, v)) = line.split_once(' ') else { break };
                if k.is_empty() {
                    break;
                }
                vars.insert(underscore(k), v.trim().to_owned());
            }
        }
        assert!(vars.len() > 300, "no variable table in mariadbd --help --verbose:\n{stdout}");
        Ok(vars)
    }

    /// Every long option the server knows (the `--name` lines of `--help --verbose`,
    /// which also lists options that have no variable, such as `plugin-load`).
    fn options(&self) -> BTreeSet<String> {
        let out = Command::new(&self.exe)
            .args(["--no-defaults", "--help", "--verbose"])
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", self.exe.display()));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let mut names = BTreeSet::new();
        for line in stdout.lines() {
            let rest = line.trim_start();
            let rest =
                rest.split_once(", ").filter(|(s, _)| s.starts_with('-') && s.len() == 2).map_or(rest, |(_, r)| r);
            if let Some(opt) = rest.strip_prefix("--").filter(|_| line.starts_with("  -")) {
                let name: String =
                    opt.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
                if !name.is_empty() {
                    names.insert(underscore(&name));
                }
            }
        }
        assert!(names.len() > 500, "no option list in mariadbd --help --verbose");
        for known in ["plugin_load_add", "skip_grant_tables", "init_file", "read_only"] {
            assert!(names.contains(known), "{known} missing from the parsed option list");
        }
        names
    }

    /// Variables whose value differs from the `my.cnf` alone.
    fn changed(&self, base: &BTreeMap<String, String>, extra: &str) -> Result<BTreeSet<String>, String> {
        let vars = self.read(extra)?;
        Ok(vars.iter().filter(|(k, v)| base.get(*k) != Some(v)).map(|(k, _)| k.clone()).collect())
    }
}

impl Drop for Parser {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn refused(key: &str) -> bool {
    let config = BTreeMap::from([(key.to_owned(), "1".to_owned())]);
    !mycnf::refused_keys(Flavor::Mariadb, &config).is_empty()
}

/// Runs `f` over `items` on two threads (the suite's machines have two cores).
fn parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let half = items.len().div_ceil(2);
    std::thread::scope(|s| {
        let handles: Vec<_> =
            items.chunks(half.max(1)).map(|chunk| s.spawn(|| chunk.iter().map(&f).collect::<Vec<_>>())).collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|_| panic!("a parser thread panicked"))).collect()
    })
}

/// A managed or dangerous option, a spelling of it, the value written, and the
/// variable whose value shows that the server took it.
struct Walkaround {
    key: &'static str,
    value: Option<&'static str>,
    variable: &'static str,
    expect: &'static str,
}

/// Spellings of options that open the server, each of which the server takes:
/// the refusals that matter most.
const WALKAROUNDS: &[Walkaround] = &[
    Walkaround { key: "skip-read-only", value: None, variable: "read_only", expect: "FALSE" },
    Walkaround { key: "disable-read-only", value: None, variable: "read_only", expect: "FALSE" },
    Walkaround { key: "skip-disable-read-only", value: None, variable: "read_only", expect: "FALSE" },
    Walkaround { key: "enable-skip-read-only", value: None, variable: "read_only", expect: "FALSE" },
    Walkaround { key: "loose-skip-read-only", value: None, variable: "read_only", expect: "FALSE" },
    Walkaround { key: "loose_disable_read_only", value: None, variable: "read_only", expect: "FALSE" },
    Walkaround { key: "read-o", value: Some("OFF"), variable: "read_only", expect: "FALSE" },
    Walkaround { key: "skip-grant-tables", value: None, variable: "skip_grant_tables", expect: "TRUE" },
    Walkaround { key: "skip-gr", value: None, variable: "skip_grant_tables", expect: "TRUE" },
    Walkaround { key: "enable-skip-grant-tables", value: None, variable: "skip_grant_tables", expect: "TRUE" },
    Walkaround { key: "loose-skip-grant-tables", value: None, variable: "skip_grant_tables", expect: "TRUE" },
    Walkaround { key: "init-file", value: Some("/tmp/x.sql"), variable: "init_file", expect: "/tmp/x.sql" },
    Walkaround { key: "init-f", value: Some("/tmp/x.sql"), variable: "init_file", expect: "/tmp/x.sql" },
    Walkaround { key: "loose-init-file", value: Some("/tmp/x.sql"), variable: "init_file", expect: "/tmp/x.sql" },
    Walkaround { key: "init_connect", value: Some("DO 1"), variable: "init_connect", expect: "DO 1" },
    Walkaround { key: "init-slave", value: Some("DO 1"), variable: "init_slave", expect: "DO 1" },
    Walkaround { key: "plugin-dir", value: Some("/tmp"), variable: "plugin_dir", expect: "/tmp/" },
    Walkaround { key: "plugin_d", value: Some("/tmp"), variable: "plugin_dir", expect: "/tmp/" },
    // MariaDB 10.11 enables local_infile by default; the parser takes the option all the same.
    Walkaround { key: "skip-local-infile", value: None, variable: "local_infile", expect: "FALSE" },
    Walkaround { key: "secure-file-priv", value: Some("/"), variable: "secure_file_priv", expect: "/" },
    Walkaround { key: "skip-log-bin", value: None, variable: "log_bin", expect: "0" },
    Walkaround { key: "disable-log-slave-updates", value: None, variable: "log_slave_updates", expect: "FALSE" },
    Walkaround { key: "skip-gtid-strict-mode", value: None, variable: "gtid_strict_mode", expect: "FALSE" },
    Walkaround { key: "sync-binlog", value: Some("0"), variable: "sync_binlog", expect: "0" },
    Walkaround {
        key: "innodb-flush-log-at-trx-commit",
        value: Some("2"),
        variable: "innodb_flush_log_at_trx_commit",
        expect: "2",
    },
    Walkaround {
        key: "skip-rpl-semi-sync-master-wait-no-slave",
        value: None,
        variable: "rpl_semi_sync_master_wait_no_slave",
        expect: "FALSE",
    },
    Walkaround {
        key: "rpl-semi-sync-master-timeout",
        value: Some("10"),
        variable: "rpl_semi_sync_master_timeout",
        expect: "10",
    },
    Walkaround { key: "bind-address", value: Some("0.0.0.0"), variable: "bind_address", expect: "0.0.0.0" },
    Walkaround {
        key: "general-log-file",
        value: Some("/var/lib/mysql/x"),
        variable: "general_log_file",
        expect: "/var/lib/mysql/x",
    },
    Walkaround { key: "skip-symbolic-links", value: None, variable: "symbolic_links", expect: "FALSE" },
    Walkaround { key: "autocommit", value: Some("0"), variable: "autocommit", expect: "FALSE" },
    Walkaround { key: "innodb-doublewrite", value: Some("0"), variable: "innodb_doublewrite", expect: "FALSE" },
];

#[test]
fn walkarounds_open_the_real_server_and_the_hook_refuses_every_one() {
    let parser = Parser::new();
    let base = parser.read("").unwrap_or_else(|e| panic!("mariadbd refuses the hook's own my.cnf: {e}"));
    let mut problems = Vec::new();
    let results = parallel(WALKAROUNDS, |w| {
        let line = w.value.map_or_else(|| w.key.to_owned(), |v| format!("{} = {v}", w.key));
        (line.clone(), parser.read(&line))
    });
    for (w, (line, got)) in WALKAROUNDS.iter().zip(results) {
        match got {
            Ok(vars) => {
                let have = vars.get(w.variable).map(String::as_str);
                if have != Some(w.expect) {
                    problems.push(format!(
                        "`{line}`: mariadbd has {} = {have:?}, the test expected {:?}",
                        w.variable, w.expect
                    ));
                }
                if base.get(w.variable).map(String::as_str) == Some(w.expect) {
                    problems.push(format!("`{line}`: {} is {:?} already with the hook's my.cnf", w.variable, w.expect));
                }
            }
            Err(e) => problems.push(format!("`{line}`: mariadbd refused it ({e})")),
        }
        if !refused(w.key) {
            problems.push(format!("`{line}` sets {} = {} in mariadbd, and the hook accepts it", w.variable, w.expect));
        }
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}

/// A value for an allowed option that differs from the hook's default where one
/// is easy to name, so the run shows whether the server took it.
fn value_for(name: &str, base: Option<&String>) -> String {
    let special = [
        ("sql_mode", "ANSI"),
        ("character_set_server", "latin1"),
        ("collation_server", "latin1_swedish_ci"),
        ("default_time_zone", "+01:00"),
        ("lc_time_names", "de_DE"),
        ("optimizer_switch", "index_merge=off"),
        ("transaction_isolation", "READ-COMMITTED"),
        ("event_scheduler", "ON"),
        ("thread_handling", "pool-of-threads"),
        ("slave_parallel_mode", "aggressive"),
        ("log_slow_verbosity", "query_plan"),
        ("innodb_change_buffering", "none"),
        ("innodb_default_row_format", "compact"),
        ("query_cache_type", "ON"),
        ("long_query_time", "2.5"),
    ];
    if let Some((_, v)) = special.iter().find(|(k, _)| *k == name) {
        return (*v).to_owned();
    }
    match base.map(String::as_str) {
        Some("TRUE") => "OFF".to_owned(),
        Some("FALSE") => "ON".to_owned(),
        Some(v) => v.parse::<u64>().map_or_else(|_| v.to_owned(), |n| (n.saturating_mul(2).max(n + 1)).to_string()),
        None => "1".to_owned(),
    }
}

/// Other variables an allowed option changes in MariaDB 10.11, and why: new names
/// of the same variable, and sizes the server derives from it. None is managed.
const DERIVED: &[(&str, &[&str], &str)] = &[
    ("slow_query_log", &["log_slow_query"], "10.11's new name of the same variable"),
    ("long_query_time", &["log_slow_query_time"], "10.11's new name of the same variable"),
    ("min_examined_row_limit", &["log_slow_min_examined_row_limit"], "10.11's new name of the same variable"),
    ("log_queries_not_using_indexes", &["log_slow_filter"], "kept as a flag of log_slow_filter"),
    ("log_slow_admin_statements", &["log_slow_disabled_statements"], "kept as a flag of log_slow_disabled_statements"),
    ("log_slow_slave_statements", &["log_slow_disabled_statements"], "kept as a flag of log_slow_disabled_statements"),
    ("table_open_cache", &["table_cache"], "old name of the same variable"),
    ("tmp_table_size", &["tmp_memory_table_size"], "new name of the same variable"),
    ("slave_parallel_threads", &["slave_parallel_workers"], "new name of the same variable"),
    ("max_binlog_size", &["max_relay_log_size"], "relay logs follow max_binlog_size while max_relay_log_size is 0"),
    ("max_connections", &["host_cache_size"], "sized from max_connections"),
    (
        "performance_schema",
        &[
            "performance_schema_digests_size",
            "performance_schema_events_stages_history_long_size",
            "performance_schema_events_stages_history_size",
            "performance_schema_events_statements_history_long_size",
            "performance_schema_events_statements_history_size",
            "performance_schema_events_transactions_history_long_size",
            "performance_schema_events_transactions_history_size",
            "performance_schema_events_waits_history_long_size",
            "performance_schema_events_waits_history_size",
            "performance_schema_session_connect_attrs_size",
        ],
        "table sizes autosized when it is on",
    ),
];

/// The chains tried on every allowed option (each stripped by the parser; the
/// exhaustive check over the server's option list is the next test).
const ALLOWED_CHAINS: &[&str] = &["", "loose-", "skip-", "disable-enable-", "maximum-", "autoset-", "loose_skip_"];

#[test]
fn every_accepted_spelling_sets_only_allowed_options() {
    let parser = Parser::new();
    let base = parser.read("").unwrap_or_else(|e| panic!("mariadbd refuses the hook's own my.cnf: {e}"));
    let options = parser.options();
    let allowed: BTreeSet<String> = mycnf::allowed_options(Flavor::Mariadb).into_iter().map(str::to_owned).collect();
    // Exact names win over abbreviations: every allowed name must be a real option,
    // or the parser could read it as the abbreviation of another one.
    let unknown: Vec<_> = allowed.iter().filter(|a| !options.contains(*a)).collect();
    assert!(
        unknown.is_empty(),
        "allowed options mariadbd does not know (it would take them as abbreviations): {unknown:?}"
    );

    let mut lines = Vec::new();
    for name in &allowed {
        for (i, chain) in ALLOWED_CHAINS.iter().enumerate() {
            let spelled = if i % 2 == 0 { name.replace('_', "-") } else { name.clone() };
            let key = format!("{chain}{spelled}");
            assert!(!refused(&key), "the hook refuses `{key}`, a spelling of the allowed {name}");
            let bare = chain.ends_with("skip-")
                || chain.ends_with("disable-")
                || chain.ends_with("enable-")
                || chain.ends_with("skip_");
            let line = if bare { key } else { format!("{key} = {}", value_for(name, base.get(name))) };
            lines.push((name.clone(), line));
        }
    }
    let results = parallel(&lines, |(_, line)| parser.changed(&base, line));
    let (mut took, mut rejected, mut problems) = (0, 0, Vec::new());
    for ((name, line), got) in lines.iter().zip(results) {
        match got {
            Ok(changed) => {
                let derived = DERIVED.iter().find(|(o, _, _)| o == name).map_or(&[][..], |(_, d, _)| *d);
                let outside: Vec<_> =
                    changed.iter().filter(|c| !allowed.contains(*c) && !derived.contains(&c.as_str())).collect();
                if !outside.is_empty() {
                    problems.push(format!("`{line}` (accepted as {name}) changes {outside:?}"));
                }
                if changed.contains(name) {
                    took += 1;
                }
            }
            // The server refuses the spelling (e.g. `autoset-` on an option without
            // automatic setup): nothing starts, nothing is opened.
            Err(_) => rejected += 1,
        }
    }
    println!(
        "{} accepted spellings of {} allowed options: {took} changed their option, {rejected} refused by mariadbd, {} changed something else",
        lines.len(),
        allowed.len(),
        problems.len()
    );
    assert!(problems.is_empty(), "accepted spellings reach options off the allow-list:\n{}", problems.join("\n"));
    assert!(took >= allowed.len(), "too few runs changed their option ({took}): the test is not looking");
}

#[test]
fn no_server_option_is_reachable_from_an_accepted_spelling() {
    // The parser tries the whole key first, then strips one modifier at a time, and
    // takes the first stage that names an option exactly or by an unambiguous
    // abbreviation. An accepted key is `<modifiers><allowed name>`; it reaches another
    // option only if that option is spelt `<one or more modifiers><allowed name>...`.
    // Checked over every option the server lists, not only the spellings tried above.
    let parser = Parser::new();
    let allowed = mycnf::allowed_options(Flavor::Mariadb);
    let mut reachable = Vec::new();
    let options = parser.options();
    for option in &options {
        let mut rest = option.as_str();
        while let Some(r) = mycnf::MODIFIERS.iter().find_map(|m| rest.strip_prefix(m).and_then(|r| r.strip_prefix('_')))
        {
            rest = r;
            for a in &allowed {
                if rest.starts_with(a) {
                    reachable.push(format!("{option} (from a key that ends in {a})"));
                }
            }
        }
    }
    println!("{} server options checked against {} allowed names", options.len(), allowed.len());
    assert!(reachable.is_empty(), "server options an accepted key could reach:\n{}", reachable.join("\n"));
}

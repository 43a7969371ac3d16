//! The metrics, through the same app the binary serves: per-cluster series derived
//! from the fixtures' requests and answers, counted once, removed on finalize and
//! after the TTL; request durations past the timeout; build and process metrics.
//! `docs/metrics.md` lists every metric; a test below keeps it complete.

mod common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicI64, Ordering},
    },
    time::Duration,
};

use actix_web::{App, test, web};
use hooks::Timestamp;
use mysql_hook::app::{State, configure};

/// A clock the test moves, starting at the fixtures' instant.
#[derive(Clone)]
struct TestClock(Arc<AtomicI64>);

impl TestClock {
    fn new() -> Self {
        Self(Arc::new(AtomicI64::new(common::now().as_second())))
    }
    fn advance(&self, seconds: i64) {
        self.0.fetch_add(seconds, Ordering::SeqCst);
    }
    fn now(&self) -> Timestamp {
        Timestamp::from_second(self.0.load(Ordering::SeqCst)).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// Posts fixtures and scrapes `/metrics` against one app, as one hook process.
struct Hook {
    state: web::Data<State>,
    clock: TestClock,
}

impl Hook {
    fn new() -> Self {
        Self::with_ttl(mysql_hook::cluster_metrics::DEFAULT_TTL)
    }

    fn with_ttl(ttl: Duration) -> Self {
        let clock = TestClock::new();
        let c = clock.clone();
        let state = State::new(Arc::new(|| Some(common::entropy())), Arc::new(move || c.now()), 16 * 1024 * 1024)
            .with_cluster_metrics_ttl(ttl);
        Self { state: web::Data::new(state), clock }
    }

    /// Posts `test-fixtures/<fixture>/request.json` to its hook; the status code.
    async fn post(&self, fixture: &str) -> u16 {
        let (hook, _) = fixture.split_once('/').unwrap_or_else(|| panic!("{fixture}"));
        let body = std::fs::read(format!("{}/test-fixtures/{fixture}/request.json", env!("CARGO_MANIFEST_DIR")))
            .unwrap_or_else(|e| panic!("{fixture}: {e}"));
        let app = test::init_service(App::new().configure(configure(self.state.clone()))).await;
        let req = test::TestRequest::post()
            .uri(&common::hook_path(hook))
            .insert_header(("content-type", "application/json"))
            .set_payload(body)
            .to_request();
        test::call_service(&app, req).await.status().as_u16()
    }

    async fn scrape(&self) -> Scrape {
        let app = test::init_service(App::new().configure(configure(self.state.clone()))).await;
        let resp = test::call_service(&app, test::TestRequest::get().uri("/metrics").to_request()).await;
        assert_eq!(resp.status().as_u16(), 200);
        Scrape(String::from_utf8_lossy(&test::read_body(resp).await).into_owned())
    }
}

/// One `/metrics` answer.
struct Scrape(String);

impl Scrape {
    /// The value of the series written exactly as `series` (`name{labels}`).
    fn value(&self, series: &str) -> Option<f64> {
        self.0.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    fn expect(&self, series: &str, want: f64) {
        match self.value(series) {
            Some(v) if (v - want).abs() < 1e-9 => {}
            other => panic!("{series}: want {want}, got {other:?}\n{}", self.0),
        }
    }

    fn lines_with(&self, needle: &str) -> Vec<&str> {
        self.0.lines().filter(|l| !l.starts_with('#') && l.contains(needle)).collect()
    }
}

const DB: &str = r#"namespace="shop",name="db""#;

#[actix_rt::test]
async fn a_running_cluster() {
    let hook = Hook::new();
    assert_eq!(hook.post("sync/running").await, 200);
    let m = hook.scrape().await;
    m.expect(&format!("mysql_hook_cluster_phase{{{DB},phase=\"Running\"}}"), 1.0);
    m.expect(&format!("mysql_hook_cluster_phase{{{DB},phase=\"Failed\"}}"), 0.0);
    m.expect(&format!("mysql_hook_cluster_desired_servers{{{DB}}}"), 3.0);
    m.expect(&format!("mysql_hook_cluster_servers{{{DB}}}"), 3.0);
    m.expect(&format!("mysql_hook_cluster_ready_servers{{{DB}}}"), 3.0);
    m.expect(&format!("mysql_hook_cluster_primary_known{{{DB}}}"), 1.0);
    m.expect(&format!("mysql_hook_cluster_primary_ready{{{DB}}}"), 1.0);
    m.expect(&format!("mysql_hook_cluster_server_ready{{{DB},pod=\"db-0\",role=\"primary\"}}"), 1.0);
    m.expect(&format!("mysql_hook_cluster_server_ready{{{DB},pod=\"db-1\",role=\"replica\"}}"), 1.0);
    m.expect(
        &format!("mysql_hook_cluster_condition{{{DB},type=\"SpecAccepted\",status=\"True\",reason=\"Accepted\"}}"),
        1.0,
    );
    m.expect(&format!("mysql_hook_cluster_spec_accepted{{{DB}}}"), 1.0);
    m.expect(&format!("mysql_hook_cluster_semi_sync_protected{{{DB}}}"), 1.0);
    m.expect(&format!("mysql_hook_cluster_operation_in_flight{{{DB}}}"), 0.0);
    m.expect(&format!("mysql_hook_cluster_rollout_in_progress{{{DB}}}"), 0.0);
    m.expect(&format!("mysql_hook_cluster_last_sync_timestamp_seconds{{{DB}}}"), 1_795_953_600.0);
    m.expect("mysql_hook_clusters", 1.0);
    // Counters exist from the first sync, at 0.
    m.expect(&format!("mysql_hook_cluster_failover_attempts_total{{{DB}}}"), 0.0);
    m.expect(&format!("mysql_hook_cluster_backup_failures_total{{{DB},kind=\"scheduled\"}}"), 0.0);
    m.expect(
        &format!("mysql_hook_cluster_role_changes_total{{{DB},kind=\"Failover\",reason=\"PrimaryNotReady\"}}"),
        0.0,
    );
    m.expect(&format!("mysql_hook_cluster_role_changes_total{{{DB},kind=\"Switchover\",reason=\"Rollout\"}}"), 0.0);
}

#[actix_rt::test]
async fn a_failed_primary_a_failover_and_its_record() {
    let hook = Hook::new();
    hook.post("sync/failover-no-quorum").await;
    let m = hook.scrape().await;
    m.expect(&format!("mysql_hook_cluster_phase{{{DB},phase=\"Failed\"}}"), 1.0);
    m.expect(&format!("mysql_hook_cluster_primary_ready{{{DB}}}"), 0.0);
    m.expect(
        &format!(
            "mysql_hook_cluster_condition{{{DB},type=\"AutomaticFailover\",status=\"False\",reason=\"NoQuorum\"}}"
        ),
        1.0,
    );

    // The sync that starts the failover Job: one attempt, however often it is sent.
    hook.post("sync/failover-past-grace").await;
    hook.post("sync/failover-past-grace").await;
    hook.clock.advance(30);
    let m = hook.scrape().await;
    m.expect(&format!("mysql_hook_cluster_failover_attempts_total{{{DB}}}"), 1.0);
    m.expect(&format!("mysql_hook_cluster_operation_in_flight{{{DB}}}"), 1.0);
    m.expect(
        &format!("mysql_hook_cluster_operation_age_seconds{{{DB},kind=\"Failover\",reason=\"PrimaryNotReady\"}}"),
        30.0,
    );
    // The condition moved: the NoQuorum series is gone, not left at 1.
    assert!(m.lines_with("NoQuorum").is_empty(), "{}", m.0);

    // The sync that records it: one role change by kind and reason.
    hook.post("sync/failover-succeeded").await;
    hook.post("sync/failover-succeeded").await;
    let m = hook.scrape().await;
    m.expect(
        &format!("mysql_hook_cluster_role_changes_total{{{DB},kind=\"Failover\",reason=\"PrimaryNotReady\"}}"),
        1.0,
    );
    m.expect(&format!("mysql_hook_cluster_operation_in_flight{{{DB}}}"), 0.0);
    assert!(m.lines_with("mysql_hook_cluster_operation_age_seconds{").is_empty(), "{}", m.0);
    // Recorded at the hook's clock: 30 s after the fixtures' instant.
    m.expect(&format!("mysql_hook_cluster_last_role_change_timestamp_seconds{{{DB}}}"), 1_795_953_630.0);
}

#[actix_rt::test]
async fn failover_failures_and_backoff() {
    let hook = Hook::new();
    hook.post("sync/failover-failed").await;
    hook.post("sync/failover-failed").await;
    let m = hook.scrape().await;
    m.expect(&format!("mysql_hook_cluster_failover_failures_total{{{DB}}}"), 1.0);
    m.expect(&format!("mysql_hook_cluster_failover_failed_attempts{{{DB}}}"), 1.0);
    m.expect(
        &format!(
            "mysql_hook_cluster_condition{{{DB},type=\"AutomaticFailover\",status=\"False\",reason=\"RetryBackoff\"}}"
        ),
        1.0,
    );
}

#[actix_rt::test]
async fn refused_spec_and_stuck_rollout() {
    let hook = Hook::new();
    hook.post("sync/config-refused").await;
    let m = hook.scrape().await;
    m.expect(&format!("mysql_hook_cluster_spec_accepted{{{DB}}}"), 0.0);
    m.expect(
        &format!(
            "mysql_hook_cluster_condition{{{DB},type=\"SpecAccepted\",status=\"False\",reason=\"ConfigRefused\"}}"
        ),
        1.0,
    );
    hook.post("sync/upgrade-stuck").await;
    let m = hook.scrape().await;
    m.expect(
        &format!("mysql_hook_cluster_condition{{{DB},type=\"Progressing\",status=\"False\",reason=\"RolloutStuck\"}}"),
        1.0,
    );
    m.expect(&format!("mysql_hook_cluster_rollout_in_progress{{{DB}}}"), 1.0);
    assert!(m.value(&format!("mysql_hook_cluster_rollout_step_age_seconds{{{DB}}}")).is_some_and(|s| s > 600.0));
}

#[actix_rt::test]
async fn backups_since_overdue_and_failed() {
    let hook = Hook::with_ttl(Duration::from_secs(2 * 86_400));
    hook.post("sync/backup-last-succeeded").await;
    let m = hook.scrape().await;
    m.expect(&format!("mysql_hook_cluster_backup_scheduled{{{DB}}}"), 1.0);
    // Finished 2026-11-29T03:00:42Z; the fixtures answer at 12:00:00.
    m.expect(&format!("mysql_hook_cluster_seconds_since_last_successful_backup{{{DB}}}"), 32_358.0);
    // The next run (0 3 * * *) is due 2026-11-30T03:00:00Z: not yet.
    m.expect(&format!("mysql_hook_cluster_backup_overdue_seconds{{{DB}}}"), 0.0);
    m.expect(&format!("mysql_hook_cluster_last_backup_failed{{{DB}}}"), 0.0);
    // A day later, with no sync in between, the run due at 03:00 is 9 hours late.
    hook.clock.advance(24 * 3600);
    let m = hook.scrape().await;
    m.expect(&format!("mysql_hook_cluster_backup_overdue_seconds{{{DB}}}"), 9.0 * 3600.0);
    m.expect(&format!("mysql_hook_cluster_seconds_since_last_successful_backup{{{DB}}}"), 32_358.0 + 86_400.0);

    // Lifecycle review 18: the binary log archive reached 03:04:58 (binlogSchedule
    // */5): the run due at 03:05:00 has not archived past it by 12:00:00.
    let hook = Hook::new();
    hook.post("sync/binlog-archive-last-failed").await;
    let m = hook.scrape().await;
    m.expect(&format!("mysql_hook_cluster_binlog_archive_overdue_seconds{{{DB}}}"), 32_100.0);

    let hook = Hook::new();
    hook.post("sync/backup-last-failed").await;
    hook.post("sync/backup-last-failed").await;
    let m = hook.scrape().await;
    m.expect(&format!("mysql_hook_cluster_last_backup_failed{{{DB}}}"), 1.0);
    m.expect(&format!("mysql_hook_cluster_backup_failures_total{{{DB},kind=\"scheduled\"}}"), 1.0);
}

#[actix_rt::test]
async fn finalized_clusters_are_forgotten() {
    let hook = Hook::new();
    hook.post("sync/running").await;
    hook.post("finalize/retain-waiting").await;
    let m = hook.scrape().await;
    m.expect(&format!("mysql_hook_cluster_phase{{{DB},phase=\"Deleting\"}}"), 1.0);
    hook.post("finalize/retain-done").await;
    let m = hook.scrape().await;
    assert!(m.lines_with(DB).is_empty(), "{}", m.0);
    m.expect("mysql_hook_clusters", 0.0);
}

#[actix_rt::test]
async fn clusters_not_heard_of_expire() {
    let hook = Hook::with_ttl(Duration::from_secs(3600));
    hook.post("sync/running").await;
    hook.clock.advance(3599);
    assert!(!hook.scrape().await.lines_with(DB).is_empty());
    hook.clock.advance(1);
    let m = hook.scrape().await;
    assert!(m.lines_with(DB).is_empty(), "{}", m.0);
    m.expect("mysql_hook_clusters", 0.0);
    // Heard of again: back, its counters from zero.
    hook.post("sync/running").await;
    hook.scrape().await.expect(&format!("mysql_hook_cluster_failover_attempts_total{{{DB}}}"), 0.0);
}

/// Every fixture through one process: each cluster's series stay few, whatever it
/// went through, and no label carries anything but names and fixed values.
#[actix_rt::test]
async fn cardinality_stays_bounded() {
    let hook = Hook::new();
    for (kind, dir) in common::fixture_dirs() {
        if kind == "sync" || kind == "finalize" {
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
            hook.post(&format!("{kind}/{name}")).await;
        }
    }
    let m = hook.scrape().await;
    let mut per_cluster = std::collections::BTreeMap::<String, usize>::new();
    for line in m.0.lines().filter(|l| l.starts_with("mysql_hook_cluster_")) {
        let key = line.split(',').take(2).map(|s| s.split('{').next_back().unwrap_or(s)).collect::<Vec<_>>().join(",");
        *per_cluster.entry(key).or_default() += 1;
    }
    // 6 phases, ~10 conditions, 9 servers at most, a handful of role-change reasons,
    // and 25 single series.
    for (cluster, n) in &per_cluster {
        assert!(*n <= 70, "{cluster}: {n} series\n{}", m.0);
    }
    for line in m.0.lines().filter(|l| !l.starts_with('#')) {
        assert!(!line.contains("password") && !line.contains("uid="), "{line}");
    }
}

#[actix_rt::test]
async fn durations_reach_past_the_timeout_and_build_and_process_metrics() {
    let hook = Hook::new();
    hook.post("sync/running").await;
    let m = hook.scrape().await;
    m.expect(r#"mysql_hook_request_duration_seconds_bucket{le="8.0",hook="sync"}"#, 1.0);
    m.expect(r#"mysql_hook_request_duration_seconds_bucket{le="10.0",hook="sync"}"#, 1.0);
    m.expect(&format!(r#"mysql_hook_build_info{{version="{}"}}"#, env!("CARGO_PKG_VERSION")), 1.0);
    if std::path::Path::new("/proc/self/stat").exists() {
        for name in ["process_resident_memory_bytes", "process_cpu_seconds_total", "process_start_time_seconds"] {
            assert!(m.value(name).is_some_and(|v| v > 0.0), "{name}\n{}", m.0);
        }
    }
    assert!(m.0.ends_with("# EOF\n"));
}

/// `docs/metrics.md` documents every metric the hook exports.
#[actix_rt::test]
async fn every_metric_is_documented() {
    let hook = Hook::new();
    for fixture in ["sync/running", "sync/failover-running", "sync/upgrade-stuck", "sync/backup-last-succeeded"] {
        hook.post(fixture).await;
    }
    let m = hook.scrape().await;
    let docs = std::fs::read_to_string(format!("{}/docs/metrics.md", env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|e| panic!("docs/metrics.md: {e}"));
    let mut missing = Vec::new();
    for line in m.0.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let exposed = match kind {
                "counter" => format!("{name}_total"),
                "info" => format!("{name}_info"),
                _ => name.to_owned(),
            };
            if !docs.contains(&format!("`{exposed}`")) {
                missing.push(exposed);
            }
        }
    }
    assert!(missing.is_empty(), "not in docs/metrics.md: {missing:?}");
}

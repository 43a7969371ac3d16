//! Everything that runs real database servers, in one test binary so that its
//! two long suites run side by side (libtest runs a binary's tests in parallel;
//! cargo runs binaries one after another). Both spend most of their time waiting
//! on servers, failover grace periods and Metacontroller's resyncs, not on the
//! CPU: run one after the other they were half of a cold CI run (issue 33.7).
//!
//! - [`real_node_keeps_every_acknowledged_row`]: the whole system on real servers
//!   (DESIGN.md §6, layer 7), `tests/k8s/real_servers.py`.
//! - [`scripts_and_agent_pass_on_every_server`]: the in-cluster scripts and the
//!   agent's commands against real servers, `python3 -m pytest tests/scripts`, in
//!   shards that run at the same time (each its own servers, ports and temp dir;
//!   `MYSQL_HOOK_SCRIPT_JOBS` at once, default 5).
//!
//! A suite that cannot run fails (never skips) where `.ci/run` says so.

use std::{
    fs,
    path::Path,
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

/// The whole system on real servers: a real kubelet with containerd runs the
/// StatefulSet's and the Jobs' pods (MariaDB from Debian packages, the hook's
/// scripts, the agent, the probes) on a bridge of the test's own, CoreDNS serves
/// pod names, and a real Metacontroller drives this crate's hook binary. Scenarios
/// run under a continuous write stream; the table printed at the end counts
/// acknowledged rows lost, the seconds without a writable primary and samples with
/// two writable servers.
///
/// Runs `python3 tests/k8s/real_servers.py` with `MYSQL_HOOK_BIN` set to the
/// binary cargo built for this test (it also becomes the hook's image,
/// `--scripts-image`). Needs root, containerd, runc, containernetworking-plugins
/// and mmdebstrap, and a Metacontroller (its source tree, or
/// `METACONTROLLER_BIN`/`METACONTROLLER_CRDS`); where something is missing the
/// script prints "real servers skipped: <reason>" and passes, unless
/// `MYSQL_HOOK_REQUIRE_REAL_SERVERS=1` (what `.ci/run` sets).
#[test]
fn real_node_keeps_every_acknowledged_row() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("python3")
        .arg("tests/k8s/real_servers.py")
        .env("MYSQL_HOOK_BIN", env!("CARGO_BIN_EXE_mysql-hook"))
        .current_dir(root)
        .status()
        .unwrap_or_else(|err| panic!("could not run python3 tests/k8s/real_servers.py: {err}"));
    assert!(
        status.success(),
        "tests/k8s/real_servers.py failed ({status}); the table above names each scenario's result, \
         and the FAIL / XPASS lines what was expected and seen (MYSQL_HOOK_K8S_LOGS=<dir> keeps \
         every component's and pod's log)"
    );
}

/// The servers the suites run on, and into how many shards each is cut (about
/// ten minutes each when they share the machine with the real node). MariaDB 10.11
/// (Debian bookworm's, installed on this host by the harness when missing and we
/// are root) runs the whole suite; MySQL 9.7 (Debian sid) and MariaDB 11.8 (Debian
/// trixie), run from the root file systems of the real node's images
/// (`tests/k8s/images.py`, cached; never installed on the host), run the tests
/// marked `all_servers`: those of the operations ported to the agent (issue 32);
/// their summary lists what is left out.
const SERVERS: &[(&str, usize)] = &[("mariadb", 3), ("mysql-9.7", 2), ("mariadb-11.8", 2)];

/// One pytest process: shard `k` of `n` of a server's suite (conftest.py's
/// `MYSQL_HOOK_SHARD`), or, with `server` empty, the MinIO build the S3 tests
/// need, started first so that no shard waits for it long.
struct Job {
    server: &'static str,
    k: usize,
    n: usize,
}

impl Job {
    fn name(&self) -> String {
        if self.server.is_empty() {
            "MinIO build".to_string()
        } else {
            format!("{} shard {}/{}", self.server, self.k, self.n)
        }
    }

    fn start(&self, log: &Path) -> Child {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = fs::File::create(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        let err = out.try_clone().unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        let mut cmd = Command::new("python3");
        if self.server.is_empty() {
            cmd.arg("tests/scripts/objstore.py");
        } else {
            cmd.args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=5", "tests/scripts"])
                .env("MYSQL_HOOK_BIN", env!("CARGO_BIN_EXE_mysql-hook"))
                .env("MYSQL_HOOK_SERVER", self.server)
                .env("MYSQL_HOOK_SHARD", format!("{}/{}", self.k, self.n));
        }
        cmd.current_dir(root)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run python3: {e}"))
    }

    /// What is wrong with a finished job, judged on its exit status and on
    /// pytest's own summary line ("104 passed in 640.29s"), not on the scenarios'
    /// notes, which may say "skipped" about a server: a run that collected or
    /// executed nothing, or skipped anything, is not a pass; only the other
    /// servers may leave tests out (conftest.py).
    fn verdict(&self, success: bool, output: &str) -> Result<Option<Selected>, String> {
        if self.server.is_empty() {
            return if success { Ok(None) } else { Err("failed".to_string()) };
        }
        let summary = output.lines().rev().find(|l| l.contains(" passed") && l.contains(" in ")).unwrap_or_default();
        if !success {
            return Err(format!("pytest failed ({summary:?}){}", failed_tests(output)));
        }
        if summary.is_empty() || summary.contains("skipped") {
            return Err(format!("ran no test or skipped some ({summary:?})"));
        }
        if self.server == "mariadb" && summary.contains("deselected") {
            return Err(format!("the MariaDB 10.11 suite left tests out ({summary:?})"));
        }
        selected(output, self.k, self.n).map(Some).ok_or_else(|| format!("no \"shard {}/{}\" line", self.k, self.n))
    }
}

/// pytest's short summary of what failed or errored ("FAILED tests/...::test_x -
/// reason", "ERROR ..."), one per line and cut to 300 characters, so that the
/// panic message, which is what survives at the end of a long CI log, names them.
fn failed_tests(output: &str) -> String {
    output
        .lines()
        .filter(|l| l.starts_with("FAILED ") || l.starts_with("ERROR "))
        .map(|l| format!("\n    {}", l.chars().take(300).collect::<String>()))
        .collect()
}

/// A shard's own count: "shard K/N: X of the T tests selected".
struct Selected {
    ran: usize,
    of: usize,
}

fn selected(output: &str, k: usize, n: usize) -> Option<Selected> {
    let line = output.lines().find_map(|l| l.strip_prefix(&format!("shard {k}/{n}: ")))?;
    let mut words = line.split(' ');
    let ran = words.next()?.parse().ok()?;
    let of = words.nth(2)?.parse().ok()?;
    Some(Selected { ran, of })
}

/// How many jobs run at once: `MYSQL_HOOK_SCRIPT_JOBS`, default 5.
fn jobs() -> usize {
    match std::env::var("MYSQL_HOOK_SCRIPT_JOBS") {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or_else(|| panic!("MYSQL_HOOK_SCRIPT_JOBS={v:?}: not a positive number")),
        Err(_) => 5,
    }
}

/// The jobs in the order they start: MinIO's build, then the first shard of
/// every server, then the second, and so on.
fn plan() -> Vec<Job> {
    let mut plan = vec![Job { server: "", k: 0, n: 0 }];
    let most = SERVERS.iter().map(|(_, n)| *n).max().unwrap_or(0);
    for k in 1..=most {
        plan.extend(SERVERS.iter().filter(|(_, n)| k <= *n).map(|&(server, n)| Job { server, k, n }));
    }
    plan
}

#[test]
fn scripts_and_agent_pass_on_every_server() {
    let logs = tempfile_dir();
    let jobs = jobs();
    let t0 = Instant::now();
    let plan = plan();
    let mut pending: Vec<usize> = (0..plan.len()).rev().collect();
    let mut running: Vec<(usize, Child, Instant)> = Vec::new();
    let mut failures = Vec::new();
    // Per server: tests run by its shards, and the size of the selection they cut.
    let mut counts: Vec<(&str, usize, Vec<usize>)> = SERVERS.iter().map(|(s, _)| (*s, 0, Vec::new())).collect();
    while !pending.is_empty() || !running.is_empty() {
        while running.len() < jobs {
            let Some(i) = pending.pop() else { break };
            running.push((i, plan[i].start(&logs.join(format!("job-{i}.log"))), Instant::now()));
        }
        thread::sleep(Duration::from_millis(500));
        let mut still = Vec::new();
        for (i, mut child, began) in running {
            let Some(status) = child.try_wait().unwrap_or_else(|e| panic!("{}: {e}", plan[i].name())) else {
                still.push((i, child, began));
                continue;
            };
            let job = &plan[i];
            let output = fs::read_to_string(logs.join(format!("job-{i}.log"))).unwrap_or_default();
            println!(
                "===== {} ({status} after {:.0}s, {:.0}s into the suites)\n{output}",
                job.name(),
                began.elapsed().as_secs_f64(),
                t0.elapsed().as_secs_f64()
            );
            match job.verdict(status.success(), &output) {
                Err(why) => failures.push(format!("{}: {why}", job.name())),
                Ok(Some(sel)) => {
                    if let Some(entry) = counts.iter_mut().find(|(s, ..)| *s == job.server) {
                        entry.1 += sel.ran;
                        entry.2.push(sel.of);
                    }
                }
                Ok(None) => {}
            }
        }
        running = still;
    }
    let _ = fs::remove_dir_all(&logs);
    println!("script suites: {} jobs, {jobs} at a time, in {:.0}s", plan.len(), t0.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "script jobs failed (their output is above):\n{}", failures.join("\n"));
    // The shards of a server ran its whole selection between them: each cut the
    // same selection, and their counts add up to it.
    for (server, ran, of) in counts {
        assert!(of.windows(2).all(|w| w[0] == w[1]), "{server}: the shards selected from different sets ({of:?})");
        assert_eq!(Some(&ran), of.first(), "{server}: the shards ran {ran} tests between them, of {of:?}");
    }
}

/// A fresh directory for the shards' logs.
fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mysql-hook-script-shards-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

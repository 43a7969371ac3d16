//! How the cost of a sync grows with the request: time per request (decode, core,
//! encode) for 1, 3 and 9 replicas, and for a 3-replica cluster with 0 to 200
//! related Job pods (three per Job, each Job also an observed child). A least-squares
//! line through the pod sweep gives the cost per pod; its R² says whether growth is
//! linear (a quadratic matching of children to pods would bend it).
//!
//! Times are on-CPU time of the bench thread. Prints Markdown. `GROWTH_BUDGET_MS` (default 300) is the time spent per point.

// This harness measures time; the core it measures never reads the clock.
#![allow(clippy::disallowed_methods)]

mod support;

use std::{
    hint::black_box,
    time::{Duration, Instant},
};

use cpu_time::ThreadTime;

use hooks::metacontroller::SyncRequest;

/// On-CPU time of one call of `f` (the thread's CPU clock, so time spent
/// descheduled while other processes run is not counted): the fastest of nine
/// batches, the estimate least disturbed by a shared machine.
fn per_call(budget: Duration, mut f: impl FnMut()) -> Duration {
    // Warm up, and learn how many calls fit in a tenth of the budget.
    let start = Instant::now();
    let mut calls = 0u32;
    while start.elapsed() < budget / 10 || calls < 3 {
        f();
        calls += 1;
    }
    let batch = (calls / 2).max(1);
    (0..9)
        .map(|_| {
            let t = ThreadTime::now();
            for _ in 0..batch {
                f();
            }
            t.elapsed() / batch
        })
        .min()
        .unwrap_or_default()
}

/// `(slope, intercept, r²)` of the least-squares line through `points`.
fn fit(points: &[(f64, f64)]) -> (f64, f64, f64) {
    #[allow(clippy::cast_precision_loss)]
    let n = points.len() as f64;
    let (sx, sy) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let syy: f64 = points.iter().map(|(_, y)| (y - my) * (y - my)).sum();
    let slope = sxy / sxx;
    let r2 = if syy == 0.0 { 1.0 } else { (sxy * sxy) / (sxx * syy) };
    (slope, my - slope * mx, r2)
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    // `cargo bench` passes `--bench`; this harness takes no arguments.
    let budget =
        Duration::from_millis(std::env::var("GROWTH_BUDGET_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(300));
    let ctx = support::ctx();
    let measure = |replicas: usize, job_pods: usize| {
        let body = support::sync_request(replicas, job_pods, false);
        let request: SyncRequest = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{e}"));
        let path = per_call(budget, || {
            black_box(support::sync_path(black_box(&body), &ctx));
        });
        let core = per_call(budget, || {
            black_box(hooks::sync(black_box(&request), &ctx).unwrap_or_else(|e| panic!("{e}")));
        });
        (body.len(), path, core)
    };

    println!("| replicas | Job pods | request bytes | decode+sync+encode µs | sync core µs |");
    println!("|---:|---:|---:|---:|---:|");
    let mut replica_points = Vec::new();
    for replicas in [1, 3, 9] {
        let (bytes, path, core) = measure(replicas, 0);
        println!("| {replicas} | 0 | {bytes} | {:.1} | {:.1} |", micros(path), micros(core));
        #[allow(clippy::cast_precision_loss)]
        replica_points.push((replicas as f64, micros(path)));
    }
    let (mut path_points, mut core_points) = (Vec::new(), Vec::new());
    for job_pods in (0..=200).step_by(25) {
        let (bytes, path, core) = measure(3, job_pods);
        println!("| 3 | {job_pods} | {bytes} | {:.1} | {:.1} |", micros(path), micros(core));
        #[allow(clippy::cast_precision_loss)]
        let x = job_pods as f64;
        path_points.push((x, micros(path)));
        core_points.push((x, micros(core)));
    }
    println!();
    let (slope, intercept, r2) = fit(&replica_points);
    println!("growth per replica (1, 3, 9): {slope:.2} µs/replica over {intercept:.1} µs, R² = {r2:.4}");
    let (slope, intercept, r2) = fit(&path_points);
    println!("growth per Job pod (0..200), decode+sync+encode: {slope:.3} µs/pod over {intercept:.1} µs, R² = {r2:.4}");
    let (slope, intercept, r2) = fit(&core_points);
    println!("growth per Job pod (0..200), sync core alone: {slope:.3} µs/pod over {intercept:.1} µs, R² = {r2:.4}");
}

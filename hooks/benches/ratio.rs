//! `path / floor`, measured so that a noisy machine cannot fake it.
//!
//! Criterion (benches/core.rs) times `path` and `floor` one after the other, seconds
//! apart; on a shared machine a neighbour's burst during one of them moves the ratio
//! by 30% either way. Here the two alternate: each round times a batch of `path`
//! calls and a batch of `floor` calls back to back (in alternating order), and the
//! ratio is taken per round. The median over the rounds is the figure; the spread
//! (lowest and highest quartile) says how much to trust it.
//!
//! Times are on-CPU time of the bench thread. Prints Markdown. `RATIO_BUDGET_MS`
//! (default 2000) is the time spent per hook and size.

// This harness measures time; the core it measures never reads the clock.
#![allow(clippy::disallowed_methods)]

mod support;

use std::{
    hint::black_box,
    time::{Duration, Instant},
};

use cpu_time::ThreadTime;
use hooks::metacontroller::{CustomizeRequest, SyncRequest};

const ROUNDS: usize = 41;

/// `(label, replicas, job pods)`, as in benches/core.rs.
const SIZES: [(&str, usize, usize); 4] = [("1", 1, 0), ("3", 3, 0), ("9", 9, 0), ("large", 9, 48)];

/// Calls of `f` that take about `target` of wall time.
fn calls_in(target: Duration, f: &mut impl FnMut()) -> u32 {
    let start = Instant::now();
    let mut calls = 0u32;
    while start.elapsed() < target || calls < 2 {
        f();
        calls += 1;
    }
    calls
}

fn batch(calls: u32, f: &mut impl FnMut()) -> f64 {
    let t = ThreadTime::now();
    for _ in 0..calls {
        f();
    }
    t.elapsed().as_secs_f64() * 1e6 / f64::from(calls)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `(path µs, floor µs, ratio median, ratio lower quartile, ratio upper quartile)`.
fn measure(budget: Duration, mut path: impl FnMut(), mut floor: impl FnMut()) -> (f64, f64, f64, f64, f64) {
    // Warm up both, and size a batch so that all rounds fit the budget.
    let per_round = budget / u32::try_from(ROUNDS).unwrap_or(1);
    let calls = calls_in(per_round / 4, &mut path).max(calls_in(per_round / 4, &mut floor)).max(1);
    let (mut p, mut f, mut r) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (a, b) = if round % 2 == 0 {
            let a = batch(calls, &mut path);
            (a, batch(calls, &mut floor))
        } else {
            let b = batch(calls, &mut floor);
            (batch(calls, &mut path), b)
        };
        p.push(a);
        f.push(b);
        r.push(a / b);
    }
    let mut sorted = r.clone();
    sorted.sort_by(f64::total_cmp);
    let (q1, q3) = (sorted[ROUNDS / 4], sorted[ROUNDS * 3 / 4]);
    (median(&mut p), median(&mut f), median(&mut r), q1, q3)
}

fn main() {
    // `cargo bench` passes `--bench`; this harness takes no arguments.
    let budget =
        Duration::from_millis(std::env::var("RATIO_BUDGET_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(2000));
    let ctx = support::ctx();
    println!("| hook | size | path µs | floor µs | path / floor (median) | quartiles |");
    println!("|---|---|---:|---:|---:|---|");
    let row = |hook: &str, size: &str, (p, f, r, q1, q3): (f64, f64, f64, f64, f64)| {
        println!("| {hook} | {size} | {p:.1} | {f:.1} | {r:.2} | {q1:.2} to {q3:.2} |");
    };
    for (label, replicas, job_pods) in SIZES {
        let body = support::sync_request(replicas, job_pods, false);
        let request: SyncRequest = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{e}"));
        let response = hooks::sync(&request, &ctx).unwrap_or_else(|e| panic!("{e}"));
        row(
            "sync",
            label,
            measure(
                budget,
                || drop(black_box(support::sync_path(black_box(&body), &ctx))),
                || drop(black_box(support::floor::<SyncRequest, _>(black_box(&body), &response))),
            ),
        );
    }
    for (label, replicas, job_pods) in SIZES {
        let body = support::sync_request(replicas, job_pods, true);
        let request: SyncRequest = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{e}"));
        let response = hooks::finalize(&request, &ctx).unwrap_or_else(|e| panic!("{e}"));
        row(
            "finalize",
            label,
            measure(
                budget,
                || drop(black_box(support::finalize_path(black_box(&body), &ctx))),
                || drop(black_box(support::floor::<SyncRequest, _>(black_box(&body), &response))),
            ),
        );
    }
    for (label, replicas, _) in SIZES {
        let body = support::customize_request(replicas);
        let request: CustomizeRequest = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{e}"));
        let response = hooks::customize(&request).unwrap_or_else(|e| panic!("{e}"));
        row(
            "customize",
            label,
            measure(
                budget,
                || drop(black_box(support::customize_path(black_box(&body)))),
                || drop(black_box(support::floor::<CustomizeRequest, _>(black_box(&body), &response))),
            ),
        );
    }
}

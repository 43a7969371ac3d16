//! The hooks against their floor.
//!
//! For each hook and request size three benches, all on the same request bytes:
//! - `path/<size>`: what the HTTP shell does minus HTTP: decode the request with
//!   serde_json, run the core, encode the response;
//! - `floor/<size>`: decode the same request and encode the same (precomputed)
//!   response with serde_json and nothing else: the least any hook could do;
//! - `core/<size>`: the core alone on an already decoded request.
//!
//! Times are the bench thread's on-CPU time ([`support::cpu::OnCpu`]).
//! `path / floor` is the cost of the hook's own logic (target: at most 1.5).
//! Sizes: 1, 3 and 9 Ready replicas, and `large` (9 replicas plus 48 Job pods of
//! 16 Jobs). `bench/run.sh` runs this with a short measurement time and tabulates it.
//!
//! `decode/captured`: decoding a request Metacontroller really sent
//! (`test-fixtures/sync/captured-running`, compacted as Metacontroller sends it),
//! whose objects carry the `managedFields` the synthetic requests above lack.

mod support;

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use hooks::metacontroller::{CustomizeRequest, SyncRequest};
use serde::de::DeserializeOwned;
use support::cpu::OnCpu;

/// `(label, replicas, job pods)`.
const SIZES: [(&str, usize, usize); 4] = [("1", 1, 0), ("3", 3, 0), ("9", 9, 0), ("large", 9, 48)];

fn decode<T: DeserializeOwned>(body: &[u8]) -> T {
    serde_json::from_slice(body).unwrap_or_else(|e| panic!("{e}"))
}

fn sync(c: &mut Criterion<OnCpu>) {
    let ctx = support::ctx();
    let mut group = c.benchmark_group("sync");
    for (label, replicas, job_pods) in SIZES {
        let body = support::sync_request(replicas, job_pods, false);
        let request: SyncRequest = decode(&body);
        let response = hooks::sync(&request, &ctx).unwrap_or_else(|e| panic!("{e}"));
        group
            .bench_function(BenchmarkId::new("path", label), |b| b.iter(|| support::sync_path(black_box(&body), &ctx)));
        group.bench_function(BenchmarkId::new("floor", label), |b| {
            b.iter(|| support::floor::<SyncRequest, _>(black_box(&body), &response));
        });
        group.bench_function(BenchmarkId::new("core", label), |b| b.iter(|| hooks::sync(black_box(&request), &ctx)));
    }
    group.finish();
}

fn finalize(c: &mut Criterion<OnCpu>) {
    let ctx = support::ctx();
    let mut group = c.benchmark_group("finalize");
    for (label, replicas, job_pods) in SIZES {
        let body = support::sync_request(replicas, job_pods, true);
        let request: SyncRequest = decode(&body);
        let response = hooks::finalize(&request, &ctx).unwrap_or_else(|e| panic!("{e}"));
        group.bench_function(BenchmarkId::new("path", label), |b| {
            b.iter(|| support::finalize_path(black_box(&body), &ctx));
        });
        group.bench_function(BenchmarkId::new("floor", label), |b| {
            b.iter(|| support::floor::<SyncRequest, _>(black_box(&body), &response));
        });
        group.bench_function(BenchmarkId::new("core", label), |b| {
            b.iter(|| hooks::finalize(black_box(&request), &ctx));
        });
    }
    group.finish();
}

fn customize(c: &mut Criterion<OnCpu>) {
    let mut group = c.benchmark_group("customize");
    for (label, replicas, _) in SIZES {
        let body = support::customize_request(replicas);
        let request: CustomizeRequest = decode(&body);
        let response = hooks::customize(&request).unwrap_or_else(|e| panic!("{e}"));
        group.bench_function(BenchmarkId::new("path", label), |b| b.iter(|| support::customize_path(black_box(&body))));
        group.bench_function(BenchmarkId::new("floor", label), |b| {
            b.iter(|| support::floor::<CustomizeRequest, _>(black_box(&body), &response));
        });
        group.bench_function(BenchmarkId::new("core", label), |b| b.iter(|| hooks::customize(black_box(&request))));
    }
    group.finish();
}

fn decode_captured(c: &mut Criterion<OnCpu>) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../test-fixtures/sync/captured-running/request.json");
    let pretty = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let value: serde_json::Value = decode(&pretty);
    let body = serde_json::to_vec(&value).unwrap_or_else(|e| panic!("{e}"));
    let mut group = c.benchmark_group("decode");
    group.bench_function("captured", |b| b.iter(|| decode::<SyncRequest>(black_box(&body))));
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(OnCpu);
    targets = sync, finalize, customize, decode_captured
}
criterion_main!(benches);

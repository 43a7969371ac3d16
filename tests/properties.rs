//! Safety properties over mutated fixture requests (proptest): every fixture
//! request is mutated structurally (see `tests/mutation`) and sent through the
//! shell's decode-and-core path. For every mutated request:
//! - the answer is 200, 400 or 422: never a panic (500) or anything else;
//! - asking twice gives the same bytes;
//! - a 200 keeps the invariants of `tests/common` (no observed StatefulSet,
//!   Secret or ConfigMap dropped by sync, ...);
//! - a finalize answer drops an observed StatefulSet (the object that owns the
//!   volumes) only when its volume retention already says what
//!   `spec.deletionPolicy` asks: `Delete` only under `Delete`, never otherwise.
//!
//! `PROPTEST_CASES` raises the count (default 256 here), `PROPTEST_RNG_SEED`
//! changes the fixed seed; a failing request is written to
//! `target/tmp/properties-failure-<hook>.json`.

mod common;
mod mutation;

use std::{fs, sync::OnceLock};

use actix_web::http::StatusCode;
use hooks::Context;
use proptest::prelude::*;
use serde_json::Value;

fn fixtures() -> &'static [(String, Value)] {
    static FIXTURES: OnceLock<Vec<(String, Value)>> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        common::fixture_dirs()
            .into_iter()
            .filter_map(|(hook, dir)| {
                let bytes = fs::read(dir.join("request.json")).ok()?;
                Some((hook, serde_json::from_slice(&bytes).ok()?))
            })
            .collect()
    })
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

/// The finalize property: volumes go only when deletion of volumes was asked for.
fn finalize_keeps_volumes_unless_asked(request: &Value, response: &Value) -> Result<(), String> {
    let policy = request["parent"]["spec"]["deletionPolicy"].as_str().unwrap_or("Retain");
    let kept: Vec<&str> = response["children"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["kind"] == "StatefulSet")
        .map(name)
        .collect();
    for sts in request["children"]["StatefulSet.apps/v1"].as_object().into_iter().flat_map(|m| m.values()) {
        if kept.contains(&name(sts)) {
            continue;
        }
        let when_deleted =
            sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"].as_str().unwrap_or("Retain");
        if (when_deleted == "Delete") != (policy == "Delete") {
            return Err(format!(
                "finalize drops StatefulSet {} whose whenDeleted is {when_deleted} under deletionPolicy {policy}",
                name(sts)
            ));
        }
    }
    Ok(())
}

fn check(hook: &str, request: &Value) -> Result<(), TestCaseError> {
    let body = serde_json::to_vec(request).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let ctx = Context {
        now: common::now(),
        entropy: common::entropy(),
        scripts_image: mysql_hook::DEFAULT_SCRIPTS_IMAGE.to_owned(),
        allowed_images: common::allowed_images(),
        placement_policy: common::placement_policy(),
    };
    let answer = mysql_hook::app::answer_hook(hook, &body, &ctx);
    let text = String::from_utf8_lossy(&answer.body).into_owned();
    match answer.status {
        StatusCode::OK => {}
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => return Ok(()),
        other => return Err(TestCaseError::fail(format!("{hook}: {other}: {text}"))),
    }
    let again = mysql_hook::app::answer_hook(hook, &body, &ctx);
    prop_assert_eq!(&answer.body, &again.body, "{}: not deterministic", hook);
    let response: Value = serde_json::from_slice(&answer.body).map_err(|e| TestCaseError::fail(e.to_string()))?;
    common::invariants(hook, request, &response).map_err(|e| TestCaseError::fail(format!("{hook}: {e}")))?;
    if hook == "finalize" {
        finalize_keeps_volumes_unless_asked(request, &response).map_err(TestCaseError::fail)?;
    }
    Ok(())
}

/// 256 cases from a fixed seed, so CI is repeatable; `PROPTEST_CASES` and
/// `PROPTEST_RNG_SEED` (read by proptest) explore further.
fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 256;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = proptest::test_runner::RngSeed::Fixed(0x6d79_7371_6c68_6f6f);
    }
    config.failure_persistence = None;
    config
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn mutated_requests_are_refused_or_answered_safely(
        index in any::<prop::sample::Index>(),
        choices in prop::collection::vec(any::<u32>(), 1..96),
    ) {
        let all = fixtures();
        let (hook, request) = index.get(all);
        let mut request = request.clone();
        let mut pick = mutation::picker(&choices);
        mutation::mutate(&mut request, 8, &mut pick);
        let result = check(hook, &request);
        if result.is_err() {
            // The failing request, to turn into a fixture.
            let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("properties-failure-{hook}.json"));
            let _ = fs::write(&path, serde_json::to_vec_pretty(&request).unwrap_or_default());
        }
        result?;
    }
}

#[test]
fn every_fixture_unmutated_satisfies_the_properties() {
    for (hook, request) in fixtures() {
        check(hook, request).unwrap_or_else(|e| panic!("{hook}: {e}"));
    }
}

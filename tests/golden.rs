//! Golden tests: every `test-fixtures/<hook>/<scenario>/request.json` is sent through
//! the same actix app the binary serves, and the answer must equal
//! `response.json` (or, for a refused request, the status and message in
//! `error.txt`). The core is also called directly, twice, and must give the very
//! same bytes: determinism is part of the contract.
//!
//! Shipped scripts inside the config ConfigMap appear as `@hooks/scripts/<file>`.
//!
//! Rewrite the expectations after an intended change with
//! `UPDATE_GOLDEN=1 cargo test --test golden`, then read the diff as a reviewer.

mod common;

use std::{fs, path::Path};

use actix_web::{App, http::StatusCode, test, web};
use common::{FIXTURE_NOW, fixture_dirs, fixture_state, invariants};

#[actix_rt::test]
async fn every_fixture_matches_its_golden_answer() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let state = web::Data::new(fixture_state());
    let app = test::init_service(App::new().configure(mysql_hook::app::configure(state))).await;
    let dirs = fixture_dirs();
    assert!(update || dirs.len() >= 10, "expected the fixture scenarios under test-fixtures/, found {}", dirs.len());
    let mut failures = Vec::new();
    for (hook, dir) in &dirs {
        let body = fs::read(dir.join("request.json")).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let req = test::TestRequest::post()
            .uri(&common::hook_path(hook))
            .insert_header(("content-type", "application/json"))
            .set_payload(body.clone())
            .to_request();
        let resp = test::call_service(&app, req).await;
        let status = resp.status();
        let bytes = test::read_body(resp).await;
        let name = dir.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(dir).display().to_string();
        let error_file = dir.join("error.txt");
        if update && status == StatusCode::OK && error_file.exists() {
            fs::remove_file(&error_file).unwrap_or_else(|e| panic!("{}: {e}", error_file.display()));
        }
        if (error_file.exists() && !update) || (update && status != StatusCode::OK) {
            let got = format!("{}\n{}", status.as_u16(), String::from_utf8_lossy(&bytes).trim_end());
            if update {
                write(&error_file, &format!("{got}\n"));
                continue;
            }
            let want = fs::read_to_string(&error_file).unwrap_or_default();
            if got.trim_end() != want.trim_end() {
                failures.push(format!("{name}: expected\n{want}\ngot\n{got}"));
            }
            continue;
        }
        if status != StatusCode::OK {
            failures.push(format!("{name}: HTTP {status}: {}", String::from_utf8_lossy(&bytes)));
            continue;
        }
        let direct = common::call_core(hook, &body);
        assert_eq!(direct, bytes.to_vec(), "{name}: the HTTP answer differs from the core's");
        assert_eq!(direct, common::call_core(hook, &body), "{name}: the core is not deterministic");
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Err(e) = invariants(hook, &request, &value) {
            failures.push(format!("{name}: {e}"));
        }
        let pretty = format!("{}\n", serde_json::to_string_pretty(&value).unwrap_or_default());
        let golden = dir.join("response.json");
        if update {
            write(&golden, &pretty);
        } else {
            let want = fs::read_to_string(&golden).unwrap_or_default();
            if want != pretty {
                failures.push(format!(
                    "{name}: response differs from response.json (UPDATE_GOLDEN=1 rewrites it):\n{}",
                    diff(&want, &pretty)
                ));
            }
        }
    }
    let _ = FIXTURE_NOW;
    assert!(failures.is_empty(), "{} of {} fixtures failed:\n{}", failures.len(), dirs.len(), failures.join("\n\n"));
}

fn write(path: &Path, text: &str) {
    fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// The first differing lines, enough to see what changed.
fn diff(want: &str, got: &str) -> String {
    let (w, g): (Vec<_>, Vec<_>) = (want.lines().collect(), got.lines().collect());
    let first = w.iter().zip(&g).position(|(a, b)| a != b).unwrap_or(w.len().min(g.len()));
    let from = first.saturating_sub(3);
    format!(
        "  at line {}\n  expected: {}\n  got:      {}",
        first + 1,
        w[from..(first + 4).min(w.len())].join("\n            "),
        g[from..(first + 4).min(g.len())].join("\n            ")
    )
}

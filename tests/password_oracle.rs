//! The hook is no password oracle (security issue, item 1).
//!
//! A parent's uid is public (it is in every child's owner reference). When
//! passwords were derived from the uid under a per-process or file seed, anyone
//! who could reach the hook could POST a made-up sync for a victim cluster
//! without its Secret and read the victim's root password from the answer. Now
//! every request draws fresh randomness, and a hook on a reachable address
//! refuses to serve without a bearer token unless explicitly told to.

mod common;
mod server;

use std::{process::Command, sync::Arc, time::Duration};

use actix_web::{App, test as actix_test, web};
use mysql_hook::app::{State, configure, system_entropy};
use serde_json::Value;

/// The generated passwords in a sync answer.
fn passwords(answer: &Value) -> Vec<String> {
    let children = answer["children"].as_array().cloned().unwrap_or_default();
    let secret = children.iter().find(|c| c["kind"] == "Secret").unwrap_or_else(|| panic!("no Secret in {answer}"));
    let data = secret["data"].as_object().cloned().unwrap_or_default();
    let mut values: Vec<String> = data.values().map(|v| v.as_str().unwrap_or_default().to_owned()).collect();
    values.sort();
    assert_eq!(values.len(), 3, "root, replication and operator passwords expected: {secret}");
    values
}

#[actix_rt::test]
async fn the_same_request_never_yields_the_same_passwords() {
    // The serving configuration: system randomness, a real clock is irrelevant.
    let state = State::new(Arc::new(system_entropy), Arc::new(common::now), 16 * 1024 * 1024);
    let app = actix_test::init_service(App::new().configure(configure(web::Data::new(state)))).await;
    let body = server::fixture("test-fixtures/sync/new-cluster/request.json");
    let mut seen = Vec::new();
    for _ in 0..3 {
        let req = actix_test::TestRequest::post()
            .uri("/sync")
            .insert_header(("content-type", "application/json"))
            .set_payload(body.clone())
            .to_request();
        let answer: Value = actix_test::call_and_read_body_json(&app, req).await;
        seen.push(passwords(&answer));
    }
    assert_ne!(seen[0], seen[1], "two answers to one request carried the same passwords: an oracle");
    assert_ne!(seen[1], seen[2], "two answers to one request carried the same passwords: an oracle");
    assert!(seen[0].iter().all(|p| !seen[1].contains(p) && !seen[2].contains(p)), "a password repeated: {seen:?}");
}

#[actix_rt::test]
async fn an_observed_secret_is_kept_whatever_is_drawn() {
    let state = State::new(Arc::new(system_entropy), Arc::new(common::now), 16 * 1024 * 1024);
    let app = actix_test::init_service(App::new().configure(configure(web::Data::new(state)))).await;
    let body = server::fixture("test-fixtures/sync/running/request.json");
    let request: Value = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{e}"));
    let observed = request["children"]["Secret.v1"]
        .as_object()
        .and_then(|m| m.values().next())
        .map(|s| s["data"].clone())
        .unwrap_or_else(|| panic!("the running fixture observes its Secret"));
    let mut expected: Vec<String> =
        observed.as_object().into_iter().flatten().map(|(_, v)| v.as_str().unwrap_or_default().to_owned()).collect();
    expected.sort();
    for _ in 0..2 {
        let req = actix_test::TestRequest::post()
            .uri("/sync")
            .insert_header(("content-type", "application/json"))
            .set_payload(body.clone())
            .to_request();
        let answer: Value = actix_test::call_and_read_body_json(&app, req).await;
        assert_eq!(passwords(&answer), expected, "an existing password must never change");
    }
}

#[test]
fn refuses_to_serve_a_reachable_address_without_a_token() {
    let out = Command::new(env!("CARGO_BIN_EXE_mysql-hook"))
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env_remove("MYSQL_HOOK_AUTH_TOKEN_FILE")
        .env_remove("MYSQL_HOOK_ALLOW_UNAUTHENTICATED")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it served 0.0.0.0 without a token: {stderr}");
    assert!(stderr.contains("without --auth-token-file"), "the refusal says why: {stderr}");
}

#[test]
fn serves_a_reachable_address_when_explicitly_allowed() {
    let port = server::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mysql-hook"))
        .args(["serve", "--listen", &format!("0.0.0.0:{port}"), "--allow-unauthenticated"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut up = false;
    while std::time::Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(up, "--allow-unauthenticated did not let it serve 0.0.0.0");
}

//! The HTTP contract, through the same app the binary serves: media types, sizes,
//! health, metrics, and that no refusal is ever a 200.

mod common;

use actix_web::{App, http::StatusCode, test, web};
use mysql_hook::app::{State, configure};

async fn call(state: State, method: &str, uri: &str, content_type: Option<&str>, body: &[u8]) -> (StatusCode, String) {
    let app = test::init_service(App::new().configure(configure(web::Data::new(state)))).await;
    let mut req = match method {
        "GET" => test::TestRequest::get(),
        _ => test::TestRequest::post(),
    }
    .uri(uri)
    .set_payload(body.to_vec());
    if let Some(ct) = content_type {
        req = req.insert_header(("content-type", ct));
    }
    let resp = test::call_service(&app, req.to_request()).await;
    let status = resp.status();
    (status, String::from_utf8_lossy(&test::read_body(resp).await).into_owned())
}

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(format!("{}/test-fixtures/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap_or_else(|e| panic!("{e}"))
}

#[actix_rt::test]
async fn wrong_media_type_is_415() {
    let (status, body) =
        call(common::fixture_state(), "POST", "/sync", Some("text/plain"), &fixture("sync/new-cluster/request.json"))
            .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(body.contains("JSON"), "{body}");
}

#[actix_rt::test]
async fn curls_default_form_content_type_is_accepted() {
    let (status, _) = call(
        common::fixture_state(),
        "POST",
        "/sync",
        Some("application/x-www-form-urlencoded"),
        &fixture("sync/new-cluster/request.json"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[actix_rt::test]
async fn oversized_body_is_413() {
    let state = State::new(std::sync::Arc::new(|| Some(common::entropy())), std::sync::Arc::new(common::now), 1024);
    let (status, _) =
        call(state, "POST", "/sync", Some("application/json"), &fixture("sync/running/request.json")).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[actix_rt::test]
async fn health_and_metrics() {
    let (status, body) = call(common::fixture_state(), "GET", "/healthz", None, b"").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\n"));
    let (status, _) = call(common::fixture_state(), "GET", "/readyz", None, b"").await;
    assert_eq!(status, StatusCode::OK);

    let state = web::Data::new(common::fixture_state());
    let app = test::init_service(App::new().configure(configure(state.clone()))).await;
    for body in [fixture("sync/new-cluster/request.json"), b"{".to_vec()] {
        let req = test::TestRequest::post()
            .uri("/sync")
            .insert_header(("content-type", "application/json"))
            .set_payload(body)
            .to_request();
        test::call_service(&app, req).await;
    }
    let req = test::TestRequest::get().uri("/metrics").to_request();
    let text = String::from_utf8_lossy(&test::read_body(test::call_service(&app, req).await).await).into_owned();
    assert!(text.contains(r#"mysql_hook_requests_total{hook="sync",outcome="ok"} 1"#), "{text}");
    assert!(text.contains(r#"mysql_hook_requests_total{hook="sync",outcome="malformed_json"} 1"#), "{text}");
    assert!(text.contains("mysql_hook_request_duration_seconds_count{hook=\"sync\"} 2"), "{text}");
    assert!(text.contains("mysql_hook_in_flight_requests 0"), "{text}");
}

#[actix_rt::test]
async fn unknown_routes_and_methods_are_not_200() {
    let (status, _) = call(common::fixture_state(), "GET", "/sync", None, b"").await;
    assert_ne!(status, StatusCode::OK);
    let (status, _) = call(common::fixture_state(), "POST", "/nope", Some("application/json"), b"{}").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[actix_rt::test]
async fn passwords_never_reach_the_metrics_or_errors() {
    let body = fixture("sync/running/request.json");
    let (status, answer) = call(common::fixture_state(), "POST", "/sync", Some("application/json"), &body).await;
    assert_eq!(status, StatusCode::OK);
    let (_, refusal) = call(
        common::fixture_state(),
        "POST",
        "/sync",
        Some("application/json"),
        &fixture("sync/invalid-observed-child/request.json"),
    )
    .await;
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap_or_default();
    let secret =
        v["children"].as_array().into_iter().flatten().find(|c| c["kind"] == "Secret").cloned().unwrap_or_default();
    let password = secret["data"]["root-password"].as_str().unwrap_or("missing");
    assert!(!refusal.contains(password));
}

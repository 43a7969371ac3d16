//! Bearer-token authentication (through the same app the binary serves) and TLS
//! with certificate reload (the real binary, `tests/tls/` material).

mod common;
mod server;

use std::{fs, thread, time::Duration};

use actix_web::{App, http::StatusCode, test as atest, web};
use mysql_hook::{app::configure, auth::TokenFile};
use server::{Server, Tls, fixture, fixture_path, scratch};

#[actix_rt::test]
async fn hooks_and_metrics_need_the_token_probes_do_not() {
    let dir = scratch("auth-app");
    fs::write(dir.join("token"), "tok-123\n").unwrap_or_else(|e| panic!("{e}"));
    let token = TokenFile::load(dir.join("token")).unwrap_or_else(|e| panic!("{e}"));
    let state = web::Data::new(common::fixture_state().with_auth(token));
    let app = atest::init_service(App::new().configure(configure(state))).await;
    let body = fixture("test-fixtures/sync/running/request.json");
    for (auth, want) in [
        (None, StatusCode::UNAUTHORIZED),
        (Some("Bearer nope"), StatusCode::UNAUTHORIZED),
        (Some("Basic tok-123"), StatusCode::UNAUTHORIZED),
        (Some("Bearer tok-123"), StatusCode::OK),
    ] {
        for uri in ["/sync", "/finalize", "/customize"] {
            let mut req = atest::TestRequest::post()
                .uri(uri)
                .insert_header(("content-type", "application/json"))
                .set_payload(body.clone());
            if let Some(a) = auth {
                req = req.insert_header(("authorization", a));
            }
            let resp = atest::call_service(&app, req.to_request()).await;
            let status = resp.status();
            if status == StatusCode::UNAUTHORIZED {
                let challenge = resp.headers().get("www-authenticate").and_then(|v| v.to_str().ok());
                assert_eq!(challenge, Some(r#"Bearer realm="mysql-hook""#));
            }
            // customize/finalize may refuse a sync body, but never with 401 once authenticated.
            if want == StatusCode::OK {
                assert_ne!(status, StatusCode::UNAUTHORIZED, "{uri}");
            } else {
                assert_eq!(status, want, "{uri} with {auth:?}");
            }
        }
    }
    for uri in ["/healthz", "/readyz"] {
        let resp = atest::call_service(&app, atest::TestRequest::get().uri(uri).to_request()).await;
        assert_eq!(resp.status(), StatusCode::OK, "{uri} must not need a token");
    }
    let resp = atest::call_service(&app, atest::TestRequest::get().uri("/metrics").to_request()).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let req = atest::TestRequest::get().uri("/metrics").insert_header(("authorization", "Bearer tok-123")).to_request();
    let text = String::from_utf8_lossy(&atest::read_body(atest::call_service(&app, req).await).await).into_owned();
    assert!(text.contains(r#"outcome="unauthorized""#), "{text}");
}

/// With `--metrics-token-file` the scraper's token reads `/metrics` and calls no
/// hook, and the hook calls' token no longer reads `/metrics` (security review F8:
/// Prometheus held the token that asks the hook for any cluster's children).
#[actix_rt::test]
async fn metrics_have_a_token_of_their_own_that_no_hook_accepts() {
    let dir = scratch("auth-metrics");
    fs::write(dir.join("token"), "call-tok\n").unwrap_or_else(|e| panic!("{e}"));
    fs::write(dir.join("metrics"), "scrape-tok\n").unwrap_or_else(|e| panic!("{e}"));
    let load = |name: &str| TokenFile::load(dir.join(name)).unwrap_or_else(|e| panic!("{e}"));
    let state = web::Data::new(common::fixture_state().with_auth(load("token")).with_metrics_auth(load("metrics")));
    let app = atest::init_service(App::new().configure(configure(state))).await;
    let body = fixture("test-fixtures/sync/running/request.json");
    for uri in ["/sync", "/finalize", "/customize", "/backup/sync", "/backup/customize"] {
        let req = atest::TestRequest::post()
            .uri(uri)
            .insert_header(("content-type", "application/json"))
            .insert_header(("authorization", "Bearer scrape-tok"))
            .set_payload(body.clone());
        let resp = atest::call_service(&app, req.to_request()).await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{uri} must refuse the metrics token");
    }
    let metrics = |auth: &'static str| atest::TestRequest::get().uri("/metrics").insert_header(("authorization", auth));
    let resp = atest::call_service(&app, metrics("Bearer call-tok").to_request()).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "/metrics must refuse the hook calls' token");
    let resp = atest::call_service(&app, metrics("Bearer scrape-tok").to_request()).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let text = String::from_utf8_lossy(&atest::read_body(resp).await).into_owned();
    assert!(text.contains(r#"hook="sync",outcome="unauthorized""#), "{text}");
    assert!(text.contains(r#"hook="metrics",outcome="unauthorized""#), "{text}");
}

#[test]
fn serves_https_and_picks_up_a_renewed_certificate() {
    let dir = scratch("tls");
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let copy = |name: &str| {
        fs::copy(fixture_path(&format!("tests/tls/server-{name}.key")), &key).unwrap_or_else(|e| panic!("{e}"));
        fs::copy(fixture_path(&format!("tests/tls/server-{name}.pem")), &cert).unwrap_or_else(|e| panic!("{e}"));
    };
    copy("a");
    fs::write(dir.join("token"), "tls-token").unwrap_or_else(|e| panic!("{e}"));
    let tls = Tls::new();
    let server = Server::start(
        "tls-run",
        &[
            "--tls-cert-file",
            &cert.to_string_lossy(),
            "--tls-key-file",
            &key.to_string_lossy(),
            "--auth-token-file",
            &dir.join("token").to_string_lossy(),
        ],
        &[],
        Some(&tls),
    );
    let body = fixture("test-fixtures/sync/running/request.json");
    let headers = [("content-type", "application/json"), ("authorization", "Bearer tls-token")];
    let r = server.try_request("POST", "/sync", &headers, &body, Some(&tls)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.status, 200, "{}", r.text());
    let der = |name: &str| {
        use rustls::pki_types::{CertificateDer, pem::PemObject};
        CertificateDer::from_pem_file(fixture_path(&format!("tests/tls/server-{name}.pem")))
            .unwrap_or_else(|e| panic!("{e}"))
            .to_vec()
    };
    assert_eq!(tls.peer_certificate(server.port), der("a"));
    // Plain HTTP on the TLS port gets no answer that counts.
    assert_ne!(server.try_request("GET", "/healthz", &[], b"", None).map(|r| r.status).unwrap_or(0), 200);

    // Renewal: the files change under the running process.
    thread::sleep(Duration::from_millis(1100));
    copy("b");
    let mut served = Vec::new();
    for _ in 0..50 {
        served = tls.peer_certificate(server.port);
        if served == der("b") {
            break;
        }
        thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(served, der("b"), "the renewed certificate is served without a restart");
    // A broken pair is refused and the last good one kept.
    fs::write(&key, "not a key").unwrap_or_else(|e| panic!("{e}"));
    thread::sleep(Duration::from_millis(1100));
    assert_eq!(tls.peer_certificate(server.port), der("b"));
    assert!(server.logs().contains("TLS certificate reloaded"), "{}", server.logs());
}

//! Passwords, the bearer token and the password seed never appear in logs, in
//! refusals or in metrics: the real binary runs with every log level on
//! (`RUST_LOG=trace`, JSON) over every fixture, including the ones whose requests
//! carry the credentials Secret, plus refusals of every kind (401, 415, 400, 422,
//! 429); then its whole stderr, every non-200 body and `/metrics` are searched for
//! each secret, base64 and decoded.

mod server;

use std::{
    collections::BTreeSet,
    fs,
    io::{Read, Write},
    time::Duration,
};

use base64_free::decode;
use serde_json::Value;
use server::{Response, Server, fixture, raw_request, scratch};

/// A tiny base64 decoder, so the test needs no extra crate.
mod base64_free {
    pub fn decode(s: &str) -> Option<Vec<u8>> {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut bits = 0u32;
        let mut n = 0;
        let mut out = Vec::new();
        for c in s.bytes().filter(|&c| c != b'=') {
            let v = u32::try_from(alphabet.iter().position(|&a| a == c)?).ok()?;
            bits = (bits << 6) | v;
            n += 6;
            if n >= 8 {
                n -= 8;
                out.push(u8::try_from((bits >> n) & 0xff).ok()?);
            }
        }
        Some(out)
    }
}

/// Secret data values of every Secret in a request's children/related or a
/// response's children, base64 and decoded.
fn secrets_in(v: &Value, out: &mut BTreeSet<String>) {
    let mut add = |data: &Value| {
        for value in data.as_object().into_iter().flat_map(|m| m.values()).filter_map(Value::as_str) {
            if value.len() >= 8 {
                out.insert(value.to_owned());
            }
            if let Some(plain) = decode(value).and_then(|b| String::from_utf8(b).ok()) {
                if plain.len() >= 8 {
                    out.insert(plain);
                }
            }
        }
    };
    for section in ["children", "related"] {
        match &v[section] {
            Value::Object(by_type) => {
                for (key, objects) in by_type {
                    if key.starts_with("Secret.") {
                        objects.as_object().into_iter().flat_map(|m| m.values()).for_each(|s| add(&s["data"]));
                    }
                }
            }
            Value::Array(list) => list.iter().filter(|c| c["kind"] == "Secret").for_each(|s| add(&s["data"])),
            _ => {}
        }
    }
}

#[test]
fn no_secret_reaches_logs_refusals_or_metrics() {
    let dir = scratch("no-secrets");
    let token = "bearer-token-that-must-stay-secret-7f3a";
    let seed = "password-seed-that-must-stay-secret-91c2";
    fs::write(dir.join("token"), token).unwrap_or_else(|e| panic!("{e}"));
    fs::write(dir.join("seed"), seed).unwrap_or_else(|e| panic!("{e}"));
    let (token_file, seed_file) = (dir.join("token"), dir.join("seed"));
    let mut server = Server::start(
        "no-secrets-run",
        &[
            "--log-format",
            "json",
            "--auth-token-file",
            &token_file.to_string_lossy(),
            "--secret-seed-file",
            &seed_file.to_string_lossy(),
            "--max-concurrent-requests",
            "1",
            "--shutdown-delay-seconds",
            "0",
        ],
        &[("RUST_LOG", "trace")],
        None,
    );
    let auth = format!("Bearer {token}");
    let json = [("content-type", "application/json"), ("authorization", auth.as_str())];
    let mut secrets = BTreeSet::from([token.to_owned(), seed.to_owned()]);
    let mut refusals = Vec::new();
    let mut fixtures = 0;
    for hook in ["sync", "finalize", "customize"] {
        let mut dirs: Vec<_> = fs::read_dir(server::fixture_path(&format!("test-fixtures/{hook}")))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        dirs.sort();
        for d in dirs.iter().filter(|d| d.join("request.json").exists()) {
            fixtures += 1;
            let body = fs::read(d.join("request.json")).unwrap_or_else(|e| panic!("{e}"));
            if let Ok(v) = serde_json::from_slice::<Value>(&body) {
                secrets_in(&v, &mut secrets);
            }
            let path = format!("/{hook}");
            let ok = server.request("POST", &path, &json, &body);
            match serde_json::from_slice::<Value>(&ok.body) {
                Ok(v) if ok.status == 200 => secrets_in(&v, &mut secrets),
                _ => refusals.push(ok),
            }
            // The same body refused in every way the shell refuses.
            refusals.push(server.request("POST", &path, &[("content-type", "application/json")], &body));
            refusals.push(server.request(
                "POST",
                &path,
                &[("content-type", "application/json"), ("authorization", "Bearer wrong")],
                &body,
            ));
            refusals.push(server.request("POST", &path, &[("content-type", "text/plain"), json[1]], &body));
            refusals.push(server.request("POST", &path, &json, &body[..body.len() / 2]));
            let mut wrong_type: Value = serde_json::from_slice(&body).unwrap_or_default();
            if let Some(p) = wrong_type.get_mut("parent") {
                p["spec"] = Value::from("not an object");
            }
            refusals.push(server.request("POST", &path, &json, &serde_json::to_vec(&wrong_type).unwrap_or_default()));
        }
    }
    // A 429: one request holds the only slot.
    let body = fixture("test-fixtures/sync/running/request.json");
    let raw = raw_request("POST", "/sync", &json, &body);
    let mut held = server.connect();
    held.write_all(&raw[..raw.len() - 10]).unwrap_or_else(|e| panic!("{e}"));
    std::thread::sleep(Duration::from_millis(300));
    let busy = server.request("POST", "/sync", &json, &body);
    assert_eq!(busy.status, 429);
    refusals.push(busy);
    held.write_all(&raw[raw.len() - 10..]).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    held.read_to_end(&mut out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(Response::parse(&out).status, 200);

    let metrics = server.request("GET", "/metrics", &[("authorization", auth.as_str())], b"");
    assert_eq!(metrics.status, 200);
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(30)), Some(0));
    let logs = server.logs();

    assert!(fixtures >= 10, "fixtures found: {fixtures}");
    assert!(secrets.len() >= 6, "too few secrets collected to mean anything: {}", secrets.len());
    assert!(refusals.iter().all(|r| r.status != 200 && r.status != 0));
    assert!(logs.contains("hook request refused") && logs.contains("\"level\":\"TRACE\""), "logs not captured");
    let mut leaks = Vec::new();
    for s in &secrets {
        if logs.contains(s.as_str()) {
            leaks.push(format!("logs contain {s:?}"));
        }
        if metrics.text().contains(s.as_str()) {
            leaks.push(format!("metrics contain {s:?}"));
        }
        for r in &refusals {
            if r.text().contains(s.as_str()) {
                leaks.push(format!("a {} refusal contains {s:?}", r.status));
            }
        }
    }
    println!(
        "{} secrets checked against {} bytes of trace logs and {} refusals",
        secrets.len(),
        logs.len(),
        refusals.len()
    );
    assert!(leaks.is_empty(), "{}", leaks.join("\n"));
}

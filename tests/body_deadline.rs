//! A slow client cannot hold an admission slot (issue 18.7).
//!
//! A hook request takes its admission slot before its body is read. Without a
//! deadline a client that sends the headers and then trickles the body (or nothing)
//! keeps the slot as long as it likes, and with `--max-concurrent-requests` slots
//! held that way Metacontroller gets only 429s. The body must arrive within
//! `--body-read-timeout-ms`; otherwise the answer is 408 and the slot is free again.

mod server;

use std::{
    io::{Read, Write},
    time::{Duration, Instant},
};

use server::{Response, Server, fixture, raw_request};

#[test]
fn a_body_that_does_not_arrive_in_time_frees_its_slot() {
    // The environment variable, so that a binary without the setting still starts
    // (and shows the slot held).
    let server = Server::start(
        "body-deadline",
        &["--max-concurrent-requests", "1", "--workers", "1"],
        &[("MYSQL_HOOK_BODY_READ_TIMEOUT_MS", "1000")],
        None,
    );
    let body = fixture("test-fixtures/sync/running/request.json");
    let raw = raw_request("POST", "/sync", &[("content-type", "application/json")], &body);
    let half = raw.len() - body.len() / 2;

    let mut slow = server.connect();
    slow.set_read_timeout(Some(Duration::from_secs(10))).unwrap_or_else(|e| panic!("{e}"));
    slow.write_all(&raw[..half]).unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(server.post_json("/sync", &body).status, 429, "the slow request holds the only slot");

    // The slow client sends nothing more: it is answered at the deadline.
    let mut out = Vec::new();
    let _ = slow.read_to_end(&mut out);
    let waited = started.elapsed();
    let answer = Response::parse(&out);
    println!("slow body answered {} after {} ms", answer.status, waited.as_millis());
    assert_eq!(answer.status, 408, "{}", answer.text());
    assert!(waited < Duration::from_secs(5), "answered only after {waited:?}");

    // And the slot is free again.
    let r = server.post_json("/sync", &body);
    assert_eq!(r.status, 200, "{}", r.text());
    let metrics = server.request("GET", "/metrics", &[], b"").text();
    assert!(metrics.contains(r#"outcome="body_timeout""#), "{metrics}");
}

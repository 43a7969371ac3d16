//! Overload against the real binary on loopback: past `--max-concurrent-requests`
//! the answer is 429 with `Retry-After`, never a queue without end, never a 5xx;
//! probes keep answering; memory stays bounded. Bounded in count and time.

mod server;

use std::{
    io::{Read, Write},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use server::{Response, Server, fixture, raw_request};

const LIMIT: &str = "2";

#[test]
fn past_the_limit_every_request_gets_429_with_retry_after_and_nothing_fails() {
    let server = Server::start(
        "overload",
        &["--max-concurrent-requests", LIMIT, "--workers", "2", "--retry-after-seconds", "3"],
        &[],
        None,
    );
    let body = Arc::new(fixture("test-fixtures/sync/running/request.json"));
    let raw = raw_request("POST", "/sync", &[("content-type", "application/json")], &body);

    // Deterministic part: two requests in flight (body half sent) hold both slots.
    let half = raw.len() - body.len() / 2;
    let mut held: Vec<_> = (0..2)
        .map(|_| {
            let mut s = server.connect();
            s.write_all(&raw[..half]).unwrap_or_else(|e| panic!("{e}"));
            s
        })
        .collect();
    thread::sleep(Duration::from_millis(300));
    for _ in 0..20 {
        let r = server.post_json("/sync", &body);
        assert_eq!(r.status, 429, "{}", r.text());
        assert_eq!(r.header("retry-after"), Some("3"));
    }
    assert_eq!(server.request("GET", "/healthz", &[], b"").status, 200, "probes are never limited");
    assert_eq!(server.request("GET", "/readyz", &[], b"").status, 200, "probes are never limited");
    for s in &mut held {
        s.write_all(&raw[half..]).unwrap_or_else(|e| panic!("{e}"));
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Response::parse(&out).status, 200);
    }

    // Load: 16 clients x 40 requests at once, far past the limit of 2.
    let (clients, each) = (16, 40);
    let counts: Arc<[AtomicUsize; 4]> = Arc::new(Default::default()); // 200, 429, other, io error
    let started = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (counts, body) = (Arc::clone(&counts), Arc::clone(&body));
            let port = server.port;
            thread::spawn(move || {
                for _ in 0..each {
                    let slot = match std::net::TcpStream::connect(("127.0.0.1", port)).and_then(|mut s| {
                        s.set_read_timeout(Some(Duration::from_secs(30)))?;
                        s.write_all(&raw_request("POST", "/sync", &[("content-type", "application/json")], &body))?;
                        let mut out = Vec::new();
                        s.read_to_end(&mut out)?;
                        Ok(Response::parse(&out))
                    }) {
                        Ok(r) if r.status == 200 => 0,
                        Ok(r) if r.status == 429 && r.header("retry-after") == Some("3") => 1,
                        Ok(_) => 2,
                        Err(_) => 3,
                    };
                    counts[slot].fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap_or_else(|_| panic!("a client thread panicked"));
    }
    let elapsed = started.elapsed();
    let [ok, busy, other, failed] = [0, 1, 2, 3].map(|i| counts[i].load(Ordering::Relaxed));
    let peak_kib = server.peak_rss_kib();
    println!(
        "load: {} requests from {clients} clients in {:.2} s: {ok} x 200, {busy} x 429, {other} other, {failed} unanswered; peak RSS {} KiB",
        clients * each,
        elapsed.as_secs_f64(),
        peak_kib
    );
    assert_eq!(ok + busy, clients * each, "every request answered 200 or 429");
    assert_eq!((other, failed), (0, 0));
    assert!(ok > 0, "some requests must get through");
    assert!(peak_kib < 256 * 1024, "peak RSS {peak_kib} KiB");

    let metrics = server.request("GET", "/metrics", &[], b"").text();
    let overloaded = format!(r#"mysql_hook_requests_total{{hook="sync",outcome="overloaded"}} {}"#, busy + 20);
    assert!(metrics.contains(&overloaded), "{metrics}");
}

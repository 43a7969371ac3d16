//! Structural mutations of the fixture requests: libFuzzer's bytes choose a
//! fixture and up to eight JSON-level mutations (see `tests/mutation`), so the
//! inputs stay JSON and mostly well-typed and the core itself is exercised.
#![no_main]

mod check;
#[path = "../../tests/mutation/mod.rs"]
mod mutation;

use std::{fs, path::PathBuf, sync::OnceLock};

use libfuzzer_sys::fuzz_target;

/// `(hook, parsed request)` of every fixture, read once.
fn fixtures() -> &'static [(String, serde_json::Value)] {
    static FIXTURES: OnceLock<Vec<(String, serde_json::Value)>> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../test-fixtures");
        let mut out = Vec::new();
        for hook in ["sync", "finalize", "customize"] {
            let Ok(entries) = fs::read_dir(root.join(hook)) else { continue };
            let mut dirs: Vec<_> = entries.flatten().map(|e| e.path()).collect();
            dirs.sort();
            for dir in dirs {
                let Ok(bytes) = fs::read(dir.join("request.json")) else { continue };
                if let Ok(v) = serde_json::from_slice(&bytes) {
                    out.push((hook.to_owned(), v));
                }
            }
        }
        assert!(!out.is_empty(), "no fixtures under {}", root.display());
        out
    })
}

fuzz_target!(|data: &[u8]| {
    let choices: Vec<u32> = data.chunks(2).map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0))).collect();
    let mut pick = mutation::picker(&choices);
    let all = fixtures();
    let (hook, request) = &all[pick(all.len())];
    let mut request = request.clone();
    mutation::mutate(&mut request, 8, &mut pick);
    let body = serde_json::to_vec(&request).unwrap_or_default();
    check::check(hook, &body);
});

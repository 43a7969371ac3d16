//! Raw bytes as a hook request body, as the HTTP shell receives it: the first
//! byte picks the hook (sync, finalize, customize), the rest is the body.
//! Seeded with every fixture request (`fuzz/seed-corpus.sh`).
#![no_main]

mod check;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else { return };
    let hook = ["sync", "finalize", "customize"][usize::from(selector % 3)];
    check::check(hook, body);
});

//! What every fuzz input must satisfy, shared by the targets: the shell's decode
//! and core path answers without panicking, and any 200 answer keeps the safety
//! invariants of `tests/common` (no observed StatefulSet, Secret or ConfigMap
//! dropped outside finalize, `-primary` selects `status.primary`, ...), and is
//! byte-identical when asked twice.

#[path = "../../tests/common/mod.rs"]
#[allow(dead_code, unused_imports)]
mod common;

use actix_web::http::StatusCode;
use hooks::Context;

pub fn check(hook: &str, body: &[u8]) {
    let ctx = Context { now: common::now(), entropy: common::entropy(), scripts_image: mysql_hook::DEFAULT_SCRIPTS_IMAGE.to_owned(), allowed_images: common::allowed_images(), placement_policy: common::placement_policy() };
    let answer = mysql_hook::app::answer_hook(hook, body, &ctx);
    match answer.status {
        StatusCode::OK => {}
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => return,
        other => panic!("{hook}: unexpected {other}: {}", String::from_utf8_lossy(&answer.body)),
    }
    let again = mysql_hook::app::answer_hook(hook, body, &ctx);
    assert_eq!(answer.body, again.body, "{hook}: the same request gave different bytes");
    let request: serde_json::Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => panic!("{hook}: answered 200 to a body that is not JSON: {e}"),
    };
    let response: serde_json::Value =
        serde_json::from_slice(&answer.body).unwrap_or_else(|e| panic!("{hook}: the answer is not JSON: {e}"));
    if let Err(e) = common::invariants(hook, &request, &response) {
        panic!("{hook}: invariant broken: {e}");
    }
}

//! Structural mutations of fixture requests, shared by the property tests
//! (`tests/properties.rs`, driven by proptest) and the fuzz target
//! `fuzz/fuzz_targets/mutated_request.rs` (driven by libFuzzer's bytes).
//!
//! A byte-level fuzzer rarely gets past JSON decoding; these mutations keep the
//! request well-formed JSON and mostly well-typed, so the core itself is
//! exercised: pods that vanish or flip readiness, children that disappear or are
//! duplicated, numbers at their limits, odd strings where names go.
//!
//! The source of choices is a closure `pick(n) -> 0..n`, so proptest and
//! libFuzzer drive the very same code.

#![allow(dead_code)]

use serde_json::{Map, Value};

/// Strings that break naive code: empty, long, non-ASCII, DNS-invalid, numeric.
const STRINGS: &[&str] = &[
    "",
    "db",
    "db-0",
    "db-1",
    "db-9",
    "db-primary",
    "True",
    "False",
    "Unknown",
    "Ready",
    "Running",
    "Delete",
    "Retain",
    "Backup",
    "mariadb",
    "mysql",
    "8.4.3",
    "11.4.4",
    "0",
    "-1",
    "1.5",
    "10Gi",
    "1e3",
    "0.000001m",
    "Ünïcødé-ñame",
    "UPPER",
    "a.b.c",
    "with space",
    "2026-11-29T12:00:00Z",
    "1970-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "shop/db-0",
    "{\"result\":\"promoted\",\"primary\":\"db-1\",\"from\":\"db-0\"}",
    "{\"result\":\"error\",\"reason\":\"x\",\"message\":\"y\"}",
    "not json",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
];

fn scalar(pick: &mut impl FnMut(usize) -> usize) -> Value {
    match pick(8) {
        0 => Value::Null,
        1 => Value::Bool(pick(2) == 1),
        2 => Value::from([0i64, 1, 2, 3, 9, 10, -1, i64::from(i32::MAX), i64::MAX, i64::MIN][pick(10)]),
        3 => Value::from([0.5f64, -0.0, 1e300, 3.0][pick(4)]),
        4 => Value::Array(Vec::new()),
        5 => Value::Object(Map::new()),
        _ => Value::from(STRINGS[pick(STRINGS.len())]),
    }
}

/// Walks from the root to a random node, choosing a child at each step, and
/// returns the path as keys and indices.
fn random_path(root: &Value, pick: &mut impl FnMut(usize) -> usize) -> Vec<Step> {
    let mut path = Vec::new();
    let mut node = root;
    loop {
        let step = match node {
            Value::Object(m) if !m.is_empty() && pick(5) != 0 => {
                let Some((k, v)) = m.iter().nth(pick(m.len())) else { return path };
                node = v;
                Step::Key(k.clone())
            }
            Value::Array(a) if !a.is_empty() && pick(5) != 0 => {
                let i = pick(a.len());
                node = &a[i];
                Step::Index(i)
            }
            _ => return path,
        };
        path.push(step);
    }
}

#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

fn get_mut<'a>(root: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    let mut node = root;
    for s in path {
        node = match s {
            Step::Key(k) => node.get_mut(k.as_str())?,
            Step::Index(i) => node.get_mut(*i)?,
        };
    }
    Some(node)
}

/// Applies one mutation somewhere in `root`.
pub fn mutate_once(root: &mut Value, pick: &mut impl FnMut(usize) -> usize) {
    let path = random_path(root, pick);
    let op = pick(6);
    match op {
        // Replace the node with a scalar or empty container.
        0 | 1 => {
            if let Some(n) = get_mut(root, &path) {
                *n = scalar(pick);
            }
        }
        // Remove the node from its parent (a key or an array element).
        2 => {
            let Some((last, parent)) = path.split_last() else { return };
            match (get_mut(root, parent), last) {
                (Some(Value::Object(m)), Step::Key(k)) => {
                    m.remove(k);
                }
                (Some(Value::Array(a)), Step::Index(i)) if *i < a.len() => {
                    a.remove(*i);
                }
                _ => {}
            }
        }
        // Duplicate an array element, or copy an object entry under a new key.
        3 => {
            let Some((last, parent)) = path.split_last() else { return };
            match (get_mut(root, parent), last) {
                (Some(Value::Array(a)), Step::Index(i)) if *i < a.len() => {
                    let copy = a[*i].clone();
                    a.push(copy);
                }
                (Some(Value::Object(m)), Step::Key(k)) => {
                    if let Some(v) = m.get(k).cloned() {
                        m.insert(format!("{k}{}", STRINGS[pick(STRINGS.len())]), v);
                    }
                }
                _ => {}
            }
        }
        // Copy another random subtree over this node (types that fit elsewhere).
        4 => {
            let other = random_path(root, pick);
            let Some(copy) = get_mut(root, &other).map(|v| v.clone()) else { return };
            if let Some(n) = get_mut(root, &path) {
                *n = copy;
            }
        }
        // Flip booleans and "True"/"False" strings: readiness, conditions.
        _ => {
            if let Some(n) = get_mut(root, &path) {
                let flipped = match &*n {
                    Value::Bool(b) => Value::Bool(!*b),
                    Value::String(s) if s == "True" => Value::from("False"),
                    Value::String(s) if s == "False" => Value::from("True"),
                    Value::Number(x) => Value::from(x.as_i64().map_or(0, |v| v.saturating_add(1))),
                    other => other.clone(),
                };
                *n = flipped;
            }
        }
    }
}

/// Applies `1..=max` mutations.
pub fn mutate(root: &mut Value, max: usize, pick: &mut impl FnMut(usize) -> usize) {
    let count = 1 + pick(max.max(1));
    for _ in 0..count {
        mutate_once(root, pick);
    }
}

/// A `pick` that reads choices from a slice, then zeros.
pub fn picker(choices: &[u32]) -> impl FnMut(usize) -> usize + '_ {
    let mut i = 0;
    move |n| {
        let c = choices.get(i).copied().unwrap_or(0);
        i += 1;
        if n == 0 { 0 } else { c as usize % n }
    }
}

//! `mysql-hook plan` over fixture inputs, golden-style: every
//! `test-fixtures/plan/<scenario>/args` holds the arguments after `plan` (paths
//! relative to the scenario folder; a `stdin` file, if present, is piped in), and
//! `plan.txt` the expected output, with `[exit status N]` appended when it is not 0.
//! The binary is run for real. Secret values never appear in any output.
//!
//! Rewrite the expectations after an intended change with
//! `UPDATE_GOLDEN=1 cargo test --test plan`, then read `git diff test-fixtures/plan/`.

use std::{
    fs,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

fn scenarios() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("test-fixtures/plan");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("args").exists())
        .collect();
    dirs.sort();
    dirs
}

/// Runs `mysql-hook plan ARGS` in `dir`; stdout with the exit status appended when
/// it is not 0, and stderr.
fn plan(dir: &Path) -> (String, String) {
    let args = fs::read_to_string(dir.join("args")).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_mysql-hook"))
        .arg("plan")
        .args(args.split_whitespace())
        .current_dir(dir)
        .env_remove("MYSQL_HOOK_SCRIPTS_IMAGE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let stdin = fs::read(dir.join("stdin")).unwrap_or_default();
    if let Some(mut pipe) = child.stdin.take() {
        pipe.write_all(&stdin).unwrap_or_else(|e| panic!("{e}"));
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    let code = out.status.code().unwrap_or(-1);
    if code != 0 {
        text.push_str(&format!("[exit status {code}]\n"));
    }
    (text, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Every Secret value in the inputs, as stored (base64) and decoded.
fn secret_values(dir: &Path) -> Vec<String> {
    let args = fs::read_to_string(dir.join("args")).unwrap_or_default();
    let mut inputs: Vec<PathBuf> = args.split_whitespace().map(|a| dir.join(a)).filter(|p| p.is_file()).collect();
    inputs.push(dir.join("stdin"));
    let mut values = Vec::new();
    for path in inputs {
        let Ok(text) = fs::read_to_string(&path) else { continue };
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        let items = doc.get("items").and_then(|i| i.as_array()).cloned().unwrap_or_else(|| vec![doc.clone()]);
        for item in items.iter().filter(|i| i["kind"] == "Secret") {
            for v in item["data"].as_object().into_iter().flat_map(|m| m.values()) {
                if let Some(s) = v.as_str() {
                    values.push(s.to_owned());
                    if let Some(decoded) = decode(s) {
                        values.push(decoded);
                    }
                }
            }
        }
    }
    values.retain(|v| v.len() >= 6);
    values
}

fn decode(s: &str) -> Option<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let (mut bits, mut n, mut out) = (0u32, 0, Vec::new());
    for c in s.bytes().filter(|c| *c != b'=') {
        bits = (bits << 6) | u32::try_from(ALPHABET.iter().position(|a| *a == c)?).ok()?;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push(u8::try_from((bits >> n) & 0xff).ok()?);
        }
    }
    String::from_utf8(out).ok()
}

#[test]
fn every_plan_scenario_matches_its_golden_output() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let dirs = scenarios();
    assert!(dirs.len() >= 8, "expected the plan scenarios under test-fixtures/plan/, found {}", dirs.len());
    let mut failures = Vec::new();
    for dir in &dirs {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let (got, stderr) = plan(dir);
        for secret in secret_values(dir) {
            assert!(!got.contains(&secret) && !stderr.contains(&secret), "{name}: a Secret value is printed");
        }
        let again = plan(dir).0;
        assert_eq!(got, again, "{name}: two runs differ (time or randomness leaks into the output)");
        let golden = dir.join("plan.txt");
        if update {
            fs::write(&golden, &got).unwrap_or_else(|e| panic!("{e}"));
            continue;
        }
        let want = fs::read_to_string(&golden).unwrap_or_default();
        if want != got {
            failures.push(format!(
                "{name}: the plan differs from plan.txt (UPDATE_GOLDEN=1 rewrites it); got:\n{got}\nstderr:\n{stderr}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Bad inputs are errors on stderr with exit status 1, not plans.
#[test]
fn unusable_inputs_are_refused() {
    let tmp = std::env::temp_dir().join(format!("mysql-hook-plan-{}", std::process::id()));
    fs::create_dir_all(&tmp).unwrap_or_else(|e| panic!("{e}"));
    let cases: [(&str, &str, &str); 4] = [
        ("none", "", "give a MySQL manifest"),
        ("not-yaml.yaml", "{ [", "neither JSON nor YAML"),
        ("no-mysql.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "holds no MySQL"),
        (
            "two.yaml",
            "apiVersion: mysqlhook.dev/v1alpha1\nkind: MySQL\nmetadata: {name: a}\nspec: {version: 8.4.3}\n---\napiVersion: mysqlhook.dev/v1alpha1\nkind: MySQL\nmetadata: {name: b}\nspec: {version: 8.4.3}\n",
            "holds 2 MySQLs (a, b)",
        ),
    ];
    for (file, text, want) in cases {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mysql-hook"));
        cmd.arg("plan").current_dir(&tmp);
        if file != "none" {
            fs::write(tmp.join(file), text).unwrap_or_else(|e| panic!("{e}"));
            cmd.arg(file);
        }
        let out = cmd.output().unwrap_or_else(|e| panic!("{e}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{file}: {stderr}");
        assert!(stderr.contains(want), "{file}: {stderr}");
        assert!(out.stdout.is_empty(), "{file}");
    }
    let _ = fs::remove_dir_all(&tmp);
}

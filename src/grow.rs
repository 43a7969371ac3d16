//! `mysql-hook grow-claims`: raises the storage request of volume claims to a
//! target size (issue 17.5). The hook runs it as the grow Job
//! (`hooks::grow`), in its own image, as a ServiceAccount whose Role allows `get`
//! and `patch` on exactly these claims.
//!
//! For each claim: GET it; a request already at the target is left alone; a
//! request above it is refused (a volume cannot shrink, and nothing is sent);
//! otherwise a JSON merge patch sets `spec.resources.requests.storage`. The API
//! server decides the rest: it refuses the patch when the claim's StorageClass
//! does not allow expansion (the `PersistentVolumeClaimResize` admission plugin).
//! Every refusal is printed and makes the exit status 1; the one-line result goes
//! to the termination log, where the hook reads why the Job failed.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::Arc,
    time::Duration,
};

use hooks::quantity;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Value, json};

/// In-cluster defaults: the files the kubelet mounts for the pod's ServiceAccount.
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The kubelet keeps at most 4096 bytes of a termination message.
const TERMINATION_LOG_MAX: usize = 4000;

#[derive(clap::Args, Debug, Clone)]
pub struct GrowArgs {
    /// The claims' namespace.
    #[arg(long)]
    pub namespace: String,
    /// The size to grow every claim to (a Kubernetes quantity, e.g. `20Gi`).
    #[arg(long)]
    pub size: String,
    /// The claims.
    #[arg(required = true)]
    pub claims: Vec<String>,
    /// The API server, `https://host:port`. Default: the in-cluster address from
    /// `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT`.
    #[arg(long)]
    pub server: Option<String>,
    /// The bearer token (default: the pod's ServiceAccount token).
    #[arg(long, default_value_os_t = PathBuf::from(SERVICE_ACCOUNT_DIR).join("token"))]
    pub token_file: PathBuf,
    /// The CA certificates the API server's certificate must chain to (PEM).
    #[arg(long, default_value_os_t = PathBuf::from(SERVICE_ACCOUNT_DIR).join("ca.crt"))]
    pub ca_file: PathBuf,
    /// Where the one-line JSON result goes (empty: nowhere).
    #[arg(long, default_value = "/dev/termination-log")]
    pub termination_log: PathBuf,
}

/// Runs the subcommand: 0 when every claim's request is at least the size.
#[must_use]
pub fn main(args: &GrowArgs) -> ExitCode {
    let (ok, result) = match run(args) {
        Ok(report) if report.refused.is_empty() => {
            (true, json!({"result": "grown", "size": args.size, "message": report.done.join("; ")}))
        }
        Ok(report) => (
            false,
            json!({"result": "error", "reason": "refused", "size": args.size,
                   "message": report.refused.iter().chain(&report.done).cloned().collect::<Vec<_>>().join("; ")}),
        ),
        Err(e) => {
            eprintln!("mysql-hook grow-claims: {e}");
            (false, json!({"result": "error", "reason": "failed", "size": args.size, "message": e}))
        }
    };
    write_termination_log(&args.termination_log, &result);
    if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

#[derive(Debug, Default)]
struct Report {
    /// One line per claim whose request is now at least the size.
    done: Vec<String>,
    /// One line per claim that could not be grown, with why.
    refused: Vec<String>,
}

fn run(args: &GrowArgs) -> Result<Report, String> {
    let target = Quantity(args.size.clone());
    let target_n = quantity::nanos(&target).map_err(|e| format!("--size {}: {e}", args.size))?;
    if target_n <= 0 {
        return Err(format!("--size {} must be positive", args.size));
    }
    let server = match &args.server {
        Some(s) => s.trim_end_matches('/').to_owned(),
        None => in_cluster_server()?,
    };
    let token = std::fs::read_to_string(&args.token_file)
        .map_err(|e| format!("reading the token {}: {e}", args.token_file.display()))?;
    let token = token.trim();
    let agent = agent(&args.ca_file)?;
    let mut report = Report::default();
    for claim in &args.claims {
        let url = format!("{server}/api/v1/namespaces/{}/persistentvolumeclaims/{claim}", args.namespace);
        match grow_one(&agent, &url, token, claim, &target, target_n) {
            Ok(line) => {
                println!("{line}");
                report.done.push(line);
            }
            Err(line) => {
                eprintln!("{line}");
                report.refused.push(line);
            }
        }
    }
    Ok(report)
}

/// `Ok(what was done)` or `Err(why not)`, one line naming the claim.
fn grow_one(
    agent: &ureq::Agent,
    url: &str,
    token: &str,
    claim: &str,
    target: &Quantity,
    target_n: i128,
) -> Result<String, String> {
    let bearer = format!("Bearer {token}");
    let mut response = agent
        .get(url)
        .header("Authorization", &bearer)
        .header("Accept", "application/json")
        .call()
        .map_err(|e| format!("{claim}: GET failed: {e}"))?;
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_string().map_err(|e| format!("{claim}: reading the GET answer: {e}"))?;
    if status != 200 {
        return Err(format!("{claim}: the API server refused the GET ({status}): {}", api_message(&body)));
    }
    let object: Value = serde_json::from_str(&body).map_err(|e| format!("{claim}: the GET answer is not JSON: {e}"))?;
    let current = object["spec"]["resources"]["requests"]["storage"]
        .as_str()
        .ok_or_else(|| format!("{claim}: has no spec.resources.requests.storage"))?;
    let current_n = quantity::nanos(&Quantity(current.to_owned())).map_err(|e| format!("{claim}: request {e}"))?;
    if current_n == target_n {
        return Ok(format!("{claim}: already requests {current}"));
    }
    if current_n > target_n {
        return Err(format!("{claim}: requests {current}, more than {}: refusing to shrink a volume", target.0));
    }
    let patch = json!({"spec": {"resources": {"requests": {"storage": target.0}}}}).to_string();
    let mut response = agent
        .patch(url)
        .header("Authorization", &bearer)
        .header("Accept", "application/json")
        .header("Content-Type", "application/merge-patch+json")
        .send(patch)
        .map_err(|e| format!("{claim}: PATCH failed: {e}"))?;
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_string().map_err(|e| format!("{claim}: reading the PATCH answer: {e}"))?;
    if status != 200 {
        return Err(format!(
            "{claim}: the API server refused to raise {current} to {} ({status}): {}",
            target.0,
            api_message(&body)
        ));
    }
    Ok(format!("{claim}: request raised from {current} to {}", target.0))
}

/// The `message` of a `Status` answer, or the body itself.
fn api_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| body.trim().chars().take(500).collect())
}

fn in_cluster_server() -> Result<String, String> {
    let host = std::env::var("KUBERNETES_SERVICE_HOST")
        .map_err(|_| "KUBERNETES_SERVICE_HOST is not set (not in a pod?): pass --server".to_owned())?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".to_owned());
    let host = if host.contains(':') { format!("[{host}]") } else { host };
    Ok(format!("https://{host}:{port}"))
}

/// An HTTPS client that trusts only the CAs of `ca_file`.
fn agent(ca_file: &Path) -> Result<ureq::Agent, String> {
    use ureq::tls::{PemItem, RootCerts, TlsConfig, TlsProvider};
    let pem = std::fs::read(ca_file).map_err(|e| format!("reading the CA {}: {e}", ca_file.display()))?;
    let certs: Vec<_> = ureq::tls::parse_pem(&pem)
        .filter_map(|item| match item {
            Ok(PemItem::Certificate(c)) => Some(c.to_owned()),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(format!("{} holds no PEM certificate", ca_file.display()));
    }
    let tls = TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .root_certs(RootCerts::new_with_certs(&certs))
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .build();
    Ok(ureq::Agent::config_builder()
        .tls_config(tls)
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into())
}

fn write_termination_log(path: &Path, result: &Value) {
    if path.as_os_str().is_empty() {
        return;
    }
    let mut line = result.to_string();
    if line.len() > TERMINATION_LOG_MAX {
        // Shorten the message, keep the line valid JSON.
        let mut short = result.clone();
        let message: String = result["message"].as_str().unwrap_or_default().chars().take(3000).collect();
        short["message"] = Value::String(message);
        line = short.to_string();
    }
    let mut text = String::new();
    let _ = writeln!(text, "{line}");
    if let Err(e) = std::fs::write(path, text) {
        eprintln!("mysql-hook grow-claims: writing {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_servers_message_is_what_is_reported() {
        let status = r#"{"kind":"Status","status":"Failure","message":"persistentvolumeclaims \"x\" is forbidden: only dynamically provisioned pvc can be resized","code":403}"#;
        assert_eq!(
            api_message(status),
            "persistentvolumeclaims \"x\" is forbidden: only dynamically provisioned pvc can be resized"
        );
        assert_eq!(api_message("  plain text \n"), "plain text");
    }

    #[test]
    fn a_long_result_still_fits_the_termination_log_as_json() {
        let dir = std::env::temp_dir().join(format!("mysql-hook-grow-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let path = dir.join("termination-log");
        let result = json!({"result": "error", "reason": "refused", "message": "x".repeat(10_000)});
        write_termination_log(&path, &result);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(text.len() <= TERMINATION_LOG_MAX + 1, "{}", text.len());
        let back: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back["reason"], "refused");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_size_must_be_a_positive_quantity() {
        let args = |size: &str| GrowArgs {
            namespace: "shop".to_owned(),
            size: size.to_owned(),
            claims: vec!["data-db-0".to_owned()],
            server: Some("https://127.0.0.1:1".to_owned()),
            token_file: PathBuf::from("/nonexistent"),
            ca_file: PathBuf::from("/nonexistent"),
            termination_log: PathBuf::new(),
        };
        assert!(run(&args("lots")).is_err_and(|e| e.contains("--size lots")));
        assert!(run(&args("0")).is_err_and(|e| e.contains("must be positive")));
        // A good size goes on to the token, which is missing here.
        assert!(run(&args("20Gi")).is_err_and(|e| e.contains("reading the token")));
    }
}

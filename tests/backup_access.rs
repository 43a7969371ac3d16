//! What creating a `MySQL` or `MySQLBackup` lets a user reach (issue 18.2).
//!
//! An S3 store names a `credentialsSecret` and may name an uploader `image`; a
//! `MySQL` may name its server `image`. Without limits, anyone allowed to create a
//! `MySQL` could have a Job carry any Secret of the namespace, whole, into an image of
//! their choosing. These tests start from the committed S3 fixtures and change one
//! thing at a time: the Secret not opted in, opted in for other clusters only, an
//! image off the installer's list.

mod common;

use serde_json::{Value, json};

fn fixture(hook: &str, scenario: &str) -> Value {
    let path = format!("{}/test-fixtures/{hook}/{scenario}/request.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn answer(hook: &str, request: &Value) -> Value {
    let body = serde_json::to_vec(request).unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_slice(&common::call_core(hook, &body)).unwrap_or_else(|e| panic!("{e}"))
}

fn children<'a>(answer: &'a Value, kind: &str) -> Vec<&'a Value> {
    answer["children"].as_array().map(|c| c.iter().filter(|c| c["kind"] == kind).collect()).unwrap_or_default()
}

fn condition<'a>(answer: &'a Value, type_: &str) -> &'a Value {
    answer["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} condition in {}", answer["status"]))
}

/// Every container of every pod template in `answer` (Jobs, CronJobs, StatefulSets).
fn containers(answer: &Value) -> Vec<Value> {
    containers_with_account(answer).into_iter().map(|(c, _)| c).collect()
}

/// Every container of every pod template in `answer`, with its pod's
/// `serviceAccountName` (null when unset).
fn containers_with_account(answer: &Value) -> Vec<(Value, Value)> {
    let mut out = Vec::new();
    for child in answer["children"].as_array().into_iter().flatten() {
        let template = match child["kind"].as_str() {
            Some("CronJob") => &child["spec"]["jobTemplate"]["spec"]["template"],
            Some("Job" | "StatefulSet") => &child["spec"]["template"],
            _ => continue,
        };
        let account = &template["spec"]["serviceAccountName"];
        for list in ["initContainers", "containers"] {
            out.extend(template["spec"][list].as_array().into_iter().flatten().map(|c| (c.clone(), account.clone())));
        }
    }
    out
}

/// The opted-in credentials Secret the S3 fixtures carry as a related object.
fn secrets_of(request: &Value) -> Value {
    request["related"]["Secret.v1"].clone()
}

fn without_secrets(mut request: Value) -> Value {
    if let Some(related) = request["related"].as_object_mut() {
        related.remove("Secret.v1");
    }
    request
}

#[test]
fn no_pod_gets_a_whole_secret_and_uploaders_get_only_the_s3_keys() {
    let mut uploaders = 0;
    for (hook, dir) in common::fixture_dirs() {
        if hook.ends_with("customize") || dir.join("error.txt").exists() {
            continue;
        }
        let body = std::fs::read(dir.join("request.json")).unwrap_or_else(|e| panic!("{e}"));
        let got: Value = serde_json::from_slice(&common::call_core(&hook, &body)).unwrap_or_else(|e| panic!("{e}"));
        for (c, account) in containers_with_account(&got) {
            let name = c["name"].as_str().unwrap_or_default();
            assert!(
                c["envFrom"].is_null(),
                "{}: container {name} takes a whole Secret or ConfigMap: {}",
                dir.display(),
                c["envFrom"]
            );
            let secret_keys: Vec<&str> = c["env"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["valueFrom"]["secretKeyRef"]["key"].as_str())
                .collect();
            if ["upload", "download", "check", "pull", "push"].contains(&name) {
                uploaders += 1;
                // With s3.serviceAccountName the pod's workload identity stands in
                // for the keys: none at all then.
                let want: &[&str] = if account.is_string() {
                    &[]
                } else {
                    &["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"]
                };
                assert_eq!(secret_keys, want, "{}: {name} (serviceAccountName {account})", dir.display());
            } else {
                assert!(
                    secret_keys.iter().all(|k| !k.starts_with("AWS_")),
                    "{}: container {name} gets S3 credentials",
                    dir.display()
                );
            }
        }
    }
    assert!(uploaders >= 2, "no S3 uploader among the fixtures ({uploaders})");
}

#[test]
fn scheduled_s3_backups_need_an_opted_in_secret() {
    let request = fixture("sync", "backup-cronjob-s3");
    assert!(!children(&answer("sync", &request), "CronJob").is_empty(), "the opted-in fixture schedules backups");
    assert_eq!(condition(&answer("sync", &request), "SpecAccepted")["status"], "True");

    // The Secret exists but its owner never opted it in: Metacontroller does not even
    // send it (the customize hook selects by the label), and the hook refuses.
    let refused = answer("sync", &without_secrets(request.clone()));
    assert!(children(&refused, "CronJob").is_empty(), "a CronJob uses a Secret that did not opt in");
    let c = condition(&refused, "SpecAccepted");
    assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some("False"), Some("BackupCredentialsNotAllowed")));
    assert!(c["message"].as_str().unwrap_or_default().contains("mysqlhook.dev/backup-credentials=true"), "{c}");

    // Sent anyway without the label (a hand-made request): still refused.
    let mut unlabelled = request.clone();
    for secret in unlabelled["related"]["Secret.v1"].as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
        secret["metadata"]["labels"] = json!({});
    }
    assert!(children(&answer("sync", &unlabelled), "CronJob").is_empty());

    // Opted in for other clusters only.
    let mut others = request.clone();
    for secret in others["related"]["Secret.v1"].as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
        // Keep the fixture's other annotations (the allowed endpoints).
        secret["metadata"]["annotations"]["mysqlhook.dev/allowed-clusters"] = json!("billing,shop");
    }
    let refused = answer("sync", &others);
    assert!(children(&refused, "CronJob").is_empty());
    assert_eq!(condition(&refused, "SpecAccepted")["reason"], "BackupCredentialsNotAllowed");
    let mut mine = request;
    for secret in mine["related"]["Secret.v1"].as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
        // Keep the fixture's other annotations (the allowed endpoints).
        secret["metadata"]["annotations"]["mysqlhook.dev/allowed-clusters"] = json!("billing,db");
    }
    assert!(!children(&answer("sync", &mine), "CronJob").is_empty());
}

#[test]
fn restores_mysqlbackups_and_final_backups_need_an_opted_in_secret() {
    // Restore from an S3 store.
    let restore = fixture("sync", "restore-pitr-s3");
    assert!(!secrets_of(&restore).is_null(), "the fixture carries the opted-in Secret");
    let refused = answer("sync", &without_secrets(restore));
    assert!(
        children(&refused, "Job")
            .iter()
            .all(|j| !j["metadata"]["name"].as_str().unwrap_or_default().contains("-restore-")),
        "a restore Job reads a store whose Secret did not opt in"
    );
    assert_eq!(condition(&refused, "Restored")["reason"], "BackupCredentialsNotAllowed");
    assert_eq!(refused["status"]["restore"]["phase"], "Pending");

    // A MySQLBackup of a cluster with an S3 store.
    let backup = fixture("backup-sync", "running-s3");
    assert_eq!(children(&answer("backup-sync", &backup), "Job").len(), 1);
    let refused = answer("backup-sync", &without_secrets(backup));
    assert!(children(&refused, "Job").is_empty(), "a MySQLBackup Job uses a Secret that did not opt in");
    assert_eq!(refused["status"]["phase"], "Pending");
    assert!(
        refused["status"]["message"].as_str().unwrap_or_default().contains("not opted in"),
        "{}",
        refused["status"]
    );

    // The final backup of deletionPolicy: Backup.
    let finalize = fixture("finalize", "backup-s3-job-emitted");
    let ok = answer("finalize", &finalize);
    assert!(
        children(&ok, "Job")
            .iter()
            .any(|j| j["metadata"]["name"].as_str().unwrap_or_default().contains("-final-backup-"))
    );
    let refused = answer("finalize", &without_secrets(finalize));
    assert!(
        children(&refused, "Job")
            .iter()
            .all(|j| !j["metadata"]["name"].as_str().unwrap_or_default().contains("-final-backup-"))
    );
    assert_eq!(refused["finalized"], false, "the cluster must be kept");
    assert_eq!(condition(&refused, "Deleting")["reason"], "FinalBackupRefused");
}

#[test]
fn images_off_the_installers_list_are_refused() {
    // spec.image: the servers keep an allowed image.
    let mut evil = fixture("sync", "running");
    evil["parent"]["spec"]["image"] = json!("evil.example.com/mysql:8.4.3");
    let got = answer("sync", &evil);
    assert!(!containers(&got).is_empty());
    for c in containers(&got) {
        assert!(!c["image"].as_str().unwrap_or_default().starts_with("evil."), "{}", c["image"]);
    }
    let c = condition(&got, "SpecAccepted");
    assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some("False"), Some("ImageNotAllowed")));
    // A listed repository is taken.
    let mut mirror = fixture("sync", "running");
    mirror["parent"]["spec"]["image"] = json!("registry.example.com/db/mysql:8.4.3");
    let got = answer("sync", &mirror);
    assert!(containers(&got).iter().any(|c| c["image"] == "registry.example.com/db/mysql:8.4.3"));
    assert_eq!(condition(&got, "SpecAccepted")["status"], "True");

    // An S3 store's uploader image.
    let mut s3 = fixture("sync", "backup-cronjob-s3");
    s3["parent"]["spec"]["backup"]["storage"]["s3"]["image"] = json!("evil.example.com/aws-cli:2");
    let got = answer("sync", &s3);
    assert!(children(&got, "CronJob").is_empty());
    assert_eq!(condition(&got, "SpecAccepted")["reason"], "ImageNotAllowed");
    s3["parent"]["spec"]["backup"]["storage"]["s3"]["image"] = json!("registry.example.com/tools/aws-cli:2.30.1");
    assert!(!children(&answer("sync", &s3), "CronJob").is_empty());

    // The exporter sidecar (issue 30.4): it sits in every server pod, beside the
    // socket, with the exporter account.
    let mut exporter = fixture("sync", "monitoring-enabled");
    exporter["parent"]["spec"]["monitoring"]["exporter"]["image"] = json!("evil.example.com/x:1");
    let got = answer("sync", &exporter);
    let images: Vec<String> = containers(&got).iter().filter_map(|c| c["image"].as_str().map(str::to_owned)).collect();
    assert!(images.iter().any(|i| i.starts_with("quay.io/prometheus/mysqld-exporter")), "{images:?}");
    assert!(!images.iter().any(|i| i.starts_with("evil.")), "{images:?}");
    let c = condition(&got, "SpecAccepted");
    assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some("False"), Some("ImageNotAllowed")));
    assert!(c["message"].as_str().is_some_and(|m| m.contains("spec.monitoring.exporter.image")), "{c}");
    exporter["parent"]["spec"]["monitoring"]["exporter"]["image"] = json!("registry.example/mysqld-exporter:v0.21.0");
    let got = answer("sync", &exporter);
    assert!(containers(&got).iter().any(|c| c["image"] == "registry.example/mysqld-exporter:v0.21.0"));
}

#[test]
fn customize_asks_only_for_opted_in_secrets() {
    let rule = json!({"apiVersion": "v1", "resource": "secrets", "namespace": "shop",
                      "labelSelector": {"matchLabels": {"mysqlhook.dev/backup-credentials": "true"}}});
    let mut with_s3 = fixture("customize", "cluster");
    with_s3["parent"]["spec"]["backup"] =
        json!({"storage": {"s3": {"bucket": "db-backups", "credentialsSecret": "backup-s3"}}});
    let got = answer("customize", &with_s3);
    assert!(got["relatedResources"].as_array().is_some_and(|r| r.contains(&rule)), "{got}");
    let got = answer("customize", &fixture("customize", "cluster"));
    assert!(got["relatedResources"].as_array().is_some_and(|r| r.iter().all(|r| r["resource"] != "secrets")), "{got}");
    let got = answer("backup-customize", &fixture("backup-customize", "backup"));
    assert!(got["relatedResources"].as_array().is_some_and(|r| r.contains(&rule)), "{got}");
}

#[test]
fn signing_keys_reach_only_the_script_that_signs_or_verifies() {
    for (scenario, variable) in
        [("backup-signed", "BACKUP_SIGNING_KEY_FILE"), ("restore-pitr-s3-signed", "RESTORE_VERIFY_KEY_FILE")]
    {
        let got = answer("sync", &fixture("sync", scenario));
        let mut with_key = 0;
        for c in containers(&got) {
            let name = c["name"].as_str().unwrap_or_default().to_owned();
            let has_env = c["env"].as_array().into_iter().flatten().any(|e| e["name"] == variable);
            let has_mount =
                c["volumeMounts"].as_array().into_iter().flatten().any(|m| m["mountPath"] == "/etc/mysql-hook-signing");
            assert_eq!(has_env, has_mount, "{scenario}: container {name}");
            if has_env {
                with_key += 1;
                assert!(
                    name == "backup" || name == "restore" || name.starts_with("restore-"),
                    "{scenario}: {name} sees the signing key"
                );
            }
        }
        assert!(with_key >= 1, "{scenario}: no container gets {variable}");
        let refused = answer("sync", &without_secrets(fixture("sync", scenario)));
        assert!(
            containers(&refused)
                .iter()
                .all(|c| c["name"] != "backup" && !c["name"].as_str().is_some_and(|n| n.starts_with("restore"))),
            "{scenario}"
        );
    }
}

/// Issue 30.8: S3 keys reach a pod only as the uploader's environment, never as a
/// file (a signing key volume is mounted into the server-image container), and a
/// signing key named in an S3 Secret is refused.
#[test]
fn no_s3_key_is_mounted_as_a_file_and_signing_keys_live_apart() {
    for (hook, dir) in common::fixture_dirs() {
        if hook.ends_with("customize") || dir.join("error.txt").exists() {
            continue;
        }
        let body = std::fs::read(dir.join("request.json")).unwrap_or_else(|e| panic!("{e}"));
        let got: Value = serde_json::from_slice(&common::call_core(&hook, &body)).unwrap_or_else(|e| panic!("{e}"));
        for child in got["children"].as_array().into_iter().flatten() {
            let template = match child["kind"].as_str() {
                Some("CronJob") => &child["spec"]["jobTemplate"]["spec"]["template"],
                Some("Job" | "StatefulSet") => &child["spec"]["template"],
                _ => continue,
            };
            for volume in template["spec"]["volumes"].as_array().into_iter().flatten() {
                let sources = std::iter::once(&volume["secret"])
                    .chain(volume["projected"]["sources"].as_array().into_iter().flatten().map(|s| &s["secret"]));
                for item in sources.flat_map(|s| s["items"].as_array().into_iter().flatten()) {
                    let key = item["key"].as_str().unwrap_or_default();
                    assert!(!key.starts_with("AWS_"), "{}: volume {} mounts {key}", dir.display(), volume["name"]);
                }
            }
        }
    }
    for key in ["AWS_SECRET_ACCESS_KEY", "signing-key"] {
        let mut request = fixture("sync", "restore-pitr-s3-signed");
        request["parent"]["spec"]["restore"]["signingKey"] = json!({"name": "backup-s3", "key": key});
        for secret in request["related"]["Secret.v1"].as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
            if secret["metadata"]["name"] == "backup-s3" {
                secret["data"][key] = json!("bm90LWEtcmVhbC1zaWduaW5nLWtleS0wMTIzNDU2Nzg5YWJjZGVm");
            }
        }
        let got = answer("sync", &request);
        assert!(
            containers(&got).iter().all(|c| !c["name"].as_str().is_some_and(|n| n.starts_with("restore"))),
            "a signing key from the S3 Secret ({key}) reaches a restore container"
        );
        let c = condition(&got, "Restored");
        assert_eq!(c["reason"], "BackupCredentialsNotAllowed", "{c}");
    }
}

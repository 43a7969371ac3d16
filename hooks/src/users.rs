//! Application accounts (`spec.users`): what applications connect with, so that
//! root stays the operator's.
//!
//! Each user gets a database it may use, read-write or read-only, and a password in
//! a Secret an application can mount: `<name>-user-<user>` (generated once from
//! fresh randomness and never updated, like the credentials Secret; keys `username`,
//! `password`, `database`, `host`, `port`, `uri`), or a Secret of the user's own
//! that opts in with the label [`USER_CREDENTIALS_LABEL`] (its owner lets the
//! cluster use it; see [`crate::access`] for why Secrets must opt in). Without
//! `spec.users` the cluster has `app` (read-write) and `app_ro` (read-only) on the
//! database `app`; `spec.users: []` declares none.
//!
//! The Job `<name>-users-<hash>` (`mysql-hook-agent users`) makes the accounts on the primary
//! exactly as declared, idempotently: creates what is missing, sets passwords and
//! grants, drops the accounts it made that are no longer declared (it keeps a list
//! of them in the `_mysqlhook` schema, never touching other accounts). The hash
//! covers the declaration and the identity of each password Secret (uid and
//! resourceVersion), so a new declaration or a rotated password runs it again. The
//! succeeded Job is kept as the record that the current declaration is applied.

use std::collections::BTreeMap;

use k8s_openapi::{
    ByteString,
    api::{
        batch::v1::Job,
        core::v1::{KeyToPath, ProjectedVolumeSource, Secret, SecretProjection, Volume, VolumeProjection},
    },
};

use crate::{
    api::{MySQL, UserAccess, UserSpec},
    build::{
        job::{self, JobRequest},
        meta, pod,
    },
    credentials, jobs, labels,
    metacontroller::{ByKey, RelatedResourceRule},
    model::Cluster,
    names::short_hash,
    observed::{JobState, Observed},
    roles::Verdict,
};

/// The label a Secret's owner sets (to `"true"`) to let `MySQL` objects of its
/// namespace use it as an application user's password.
pub const USER_CREDENTIALS_LABEL: &str = "mysqlhook.dev/user-credentials";
/// The condition that says whether the declared users exist.
pub const USERS_READY: &str = "UsersReady";
/// The Job purpose.
pub const PURPOSE: &str = "users";
/// Where a users Job finds each password (`<dir>/<user>`).
const PASSWORDS_DIR: &str = "/etc/mysql-hook-users";
const PASSWORD_KEY: &str = "password";

/// The schemas no application account is granted, compared case-insensitively:
/// where names are case-insensitive (`lower_case_table_names`, or a server on a
/// case-insensitive file system) `MySQL` is `mysql`. The CRD's rule on
/// `spec.users[].database` lists the same names.
pub const SYSTEM_SCHEMAS: &[&str] = &["mysql", "sys", "information_schema", "performance_schema", "_mysqlhook"];

/// Accounts of the server's and of the hook's own, which no application user may
/// be. The CRD's rule on `spec.users[].name` lists the same names.
pub const RESERVED_ACCOUNTS: &[&str] = &[
    "root",
    "repl",
    "exporter",
    "mysqlhook",
    "mysql",
    "mariadb.sys",
    "mysql.sys",
    "mysql.session",
    "mysql.infoschema",
];

/// Name parts that would make a generated Secret `<cluster>-user-<user>` another
/// cluster's Secret (issue 30.8): user `b_credentials` of cluster `a` is
/// `a-user-b-credentials`, the credentials Secret of cluster `a-user-b`; user
/// `user_b` of cluster `a` is user `b` of cluster `a-user`. Without them the
/// user's part of a Secret name is everything after its last `-user-`, and no
/// user Secret ends as a cluster's own Secrets do (the tests below prove it).
/// Users with a `passwordSecret` of their own get no generated Secret and may
/// use them. The CRD's rule on `spec.users[]` lists the same parts.
pub const COLLIDING_PREFIXES: &[&str] = &["user_"];
/// See [`COLLIDING_PREFIXES`].
pub const COLLIDING_INFIXES: &[&str] = &["_user_"];
/// See [`COLLIDING_PREFIXES`]: `credentials` and `exporter` whole, or after a `_`.
pub const COLLIDING_SUFFIXES: &[&str] = &["credentials", "exporter"];

/// Whether a generated Secret of user `name` could be another cluster's Secret.
fn collides(name: &str) -> bool {
    COLLIDING_PREFIXES.iter().any(|p| name.starts_with(p))
        || COLLIDING_INFIXES.iter().any(|i| name.contains(i))
        || COLLIDING_SUFFIXES.iter().any(|s| name == *s || name.ends_with(&format!("_{s}")))
}

/// Why a declared user cannot be made, if it cannot: the CRD's rules, checked
/// again here because a request may come from an older CRD (or none), and a
/// database name reaches a GRANT.
#[must_use]
pub fn refusal(u: &UserSpec) -> Option<String> {
    let name_ok = u.name.len() <= 32
        && u.name.starts_with(|c: char| c.is_ascii_lowercase())
        && u.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    let database_ok =
        (1..=64).contains(&u.database.len()) && u.database.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !name_ok {
        Some(format!("user {:?}: the name must match [a-z][a-z0-9_]{{0,31}}", u.name))
    } else if RESERVED_ACCOUNTS.contains(&u.name.as_str()) {
        Some(format!("user {}: the name is one of the server's or the hook's own accounts", u.name))
    } else if u.password_secret.is_none() && collides(&u.name) {
        Some(format!(
            "user {}: its generated Secret <cluster>-user-{} could be another cluster's Secret (a name may not start with user_, contain _user_, or end with credentials or exporter after a _); rename it or give it a passwordSecret",
            u.name,
            u.name.replace('_', "-")
        ))
    } else if !database_ok {
        Some(format!("user {}: database {:?} must match [A-Za-z0-9_]{{1,64}}", u.name, u.database))
    } else if SYSTEM_SCHEMAS.iter().any(|s| s.eq_ignore_ascii_case(&u.database)) {
        Some(format!("user {}: database {} is a system schema", u.name, u.database))
    } else {
        None
    }
}

/// The users a cluster has: the declared ones, or the two defaults.
#[must_use]
pub fn declared(parent: &MySQL) -> Vec<UserSpec> {
    parent.spec.users.clone().unwrap_or_else(|| {
        vec![
            UserSpec {
                name: "app".to_owned(),
                database: "app".to_owned(),
                access: UserAccess::ReadWrite,
                password_secret: None,
            },
            UserSpec {
                name: "app_ro".to_owned(),
                database: "app".to_owned(),
                access: UserAccess::ReadOnly,
                password_secret: None,
            },
        ]
    })
}

/// The customize rule that brings the namespace's Secrets opted in as user
/// passwords into every sync (the hook sees no other Secret of the user's).
#[must_use]
pub fn opted_in_secrets(namespace: &str) -> RelatedResourceRule {
    crate::access::secrets_labelled(namespace, USER_CREDENTIALS_LABEL)
}

/// The users part of one sync's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Users {
    /// Generated password Secrets.
    pub secrets: Vec<Secret>,
    /// The users Job to emit, and older ones still running.
    pub jobs: Vec<Job>,
    pub verdict: Option<Verdict>,
    /// Look again soon: a Job runs, or a Secret is about to appear.
    pub busy: bool,
}

/// Where a user's password comes from.
enum Source<'a> {
    /// Generated: `<name>-user-<user>`, observed (or about to be created).
    Generated { secret: String, observed: Option<&'a Secret> },
    /// The user's own opted-in Secret.
    Own { secret: &'a Secret, key: String },
}

/// Decides the users' Secrets, the Job and the condition.
#[must_use]
pub fn plan(
    parent: &MySQL,
    c: &Cluster,
    observed: &Observed<'_>,
    related_secrets: &ByKey<Secret>,
    initialized: bool,
    entropy: &[u8; 32],
) -> Users {
    let users = declared(parent);
    let verdict = |status, reason, message: String| Some(Verdict { type_: USERS_READY, status, reason, message });
    let mut out = Users::default();
    let refused: Vec<String> = users.iter().filter_map(refusal).collect();
    if !refused.is_empty() {
        out.verdict = verdict(
            false,
            "InvalidUser",
            format!("{}; no user is changed until the declaration is fixed", refused.join("; ")),
        );
        return hold_secrets(keep_running(out, observed), c, observed);
    }
    let mut sources = Vec::new();
    for u in &users {
        match &u.password_secret {
            None => {
                let secret = c.names.user_secret(&u.name);
                let seen = observed.secret(&secret);
                out.secrets.push(generated_secret(c, u, &secret, seen, entropy));
                sources.push(Source::Generated { secret, observed: seen });
            }
            Some(r) => {
                let own = related_secrets.get(&format!("{}/{}", c.namespace, r.name)).filter(|s| {
                    s.metadata.labels.as_ref().and_then(|l| l.get(USER_CREDENTIALS_LABEL)).is_some_and(|v| v == "true")
                });
                let Some(own) = own.filter(|s| s.data.as_ref().is_some_and(|d| d.contains_key(&r.key))) else {
                    out.verdict = verdict(
                        false,
                        "SecretNotOptedIn",
                        format!(
                            "user {}: Secret {} must exist in this namespace with key {} and the label {USER_CREDENTIALS_LABEL}=true (its owner lets this cluster use it); no user is changed until it does",
                            u.name, r.name, r.key
                        ),
                    );
                    return hold_secrets(keep_running(out, observed), c, observed);
                };
                sources.push(Source::Own { secret: own, key: r.key.clone() });
            }
        }
    }
    if !initialized {
        out.verdict =
            verdict(false, "WaitingForBootstrap", "users are made once the first primary is writable".to_owned());
        return out;
    }
    // The Job mounts every password Secret: start it once they all exist, so that
    // one creation does not run it twice (their identity is part of its name).
    if sources.iter().any(|s| matches!(s, Source::Generated { observed: None, .. })) {
        out.verdict = verdict(false, "Applying", "waiting for the users' password Secrets to be created".to_owned());
        out.busy = true;
        return keep_running(out, observed);
    }
    let fingerprint = users
        .iter()
        .zip(&sources)
        .map(|(u, s)| {
            let (uid, version) = match s {
                Source::Generated { observed, .. } => identity(observed.map(|s| &s.metadata)),
                Source::Own { secret, .. } => identity(Some(&secret.metadata)),
            };
            format!("{}:{}:{:?}:{uid}:{version}", u.name, u.database, u.access)
        })
        .collect::<Vec<_>>()
        .join(";");
    let name = c.names.job(PURPOSE, &short_hash(fingerprint.as_bytes()));
    let job = users_job(c, &users, &sources, &name);
    let observed_job = observed.job(&name);
    let state = observed_job.map(Observed::job_state);
    // Older users Jobs still running are kept (never deleted mid-run); finished
    // ones go.
    out = keep_running(out, observed);
    out.jobs.retain(|j| j.metadata.name.as_deref() != Some(name.as_str()));
    match state {
        Some(JobState::Succeeded) => {
            out.verdict = verdict(
                true,
                "Applied",
                format!(
                    "{} exist as declared (Job {name})",
                    users.iter().map(|u| u.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
            );
        }
        Some(JobState::Failed) => {
            let why = observed
                .job_message(&name)
                .map_or_else(|| "no result was written".to_owned(), |m| jobs::ScriptResult::parse(m).explain());
            out.verdict = verdict(false, "Failed", format!("Job {name} failed: {why}; delete the Job to retry"));
        }
        Some(JobState::Running) | None => {
            out.verdict = verdict(false, "Applying", format!("Job {name} is making the declared users"));
            out.busy = true;
        }
    }
    out.jobs.push(observed_job.map_or(job, jobs::keep));
    out
}

/// Users Jobs of other declarations that still run: emitted as they are.
fn keep_running(mut out: Users, observed: &Observed<'_>) -> Users {
    out.jobs.extend(
        observed
            .jobs()
            .filter(|j| {
                j.metadata.labels.as_ref().and_then(|l| l.get(labels::JOB_PURPOSE)).is_some_and(|p| p == PURPOSE)
                    && Observed::job_state(j) == JobState::Running
            })
            .map(jobs::keep),
    );
    out
}

/// While a declaration is refused no user changes, so the generated Secrets
/// observed stay as they are: left out of the answer, Metacontroller would delete
/// them, and applications would lose their passwords (and get new ones once the
/// declaration is fixed). Every Secret child but the cluster's own two is a user's.
fn hold_secrets(mut out: Users, c: &Cluster, observed: &Observed<'_>) -> Users {
    let held: Vec<Secret> = observed
        .secrets()
        .filter(|s| {
            let name = s.metadata.name.as_deref().unwrap_or_default();
            name != c.names.credentials
                && name != c.names.exporter
                && !out.secrets.iter().any(|o| o.metadata.name.as_deref() == Some(name))
        })
        .map(|s| Secret {
            metadata: meta(s.metadata.name.as_deref().unwrap_or_default(), labels::common(&c.names, labels::DATABASE)),
            type_: s.type_.clone(),
            data: s.data.clone(),
            ..Default::default()
        })
        .collect();
    out.secrets.extend(held);
    out
}

fn identity(meta: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>) -> (String, String) {
    (
        meta.and_then(|m| m.uid.clone()).unwrap_or_default(),
        meta.and_then(|m| m.resource_version.clone()).unwrap_or_default(),
    )
}

/// The Service a user connects through: the primary's, or the replicas' for a
/// read-only user.
fn host(c: &Cluster, access: UserAccess) -> String {
    let service = match access {
        UserAccess::ReadWrite => &c.names.primary,
        UserAccess::ReadOnly => &c.names.replicas,
    };
    format!("{service}.{}.svc", c.namespace)
}

/// A generated password Secret: observed values are kept (it is never updated).
fn generated_secret(c: &Cluster, u: &UserSpec, name: &str, seen: Option<&Secret>, entropy: &[u8; 32]) -> Secret {
    let password =
        seen.and_then(|s| s.data.as_ref()).and_then(|d| d.get(PASSWORD_KEY)).filter(|v| !v.0.is_empty()).map_or_else(
            || credentials::derive(entropy, &c.uid, &format!("user/{}", u.name)),
            |v| String::from_utf8_lossy(&v.0).into_owned(),
        );
    let host = host(c, u.access);
    let uri = format!("mysql://{}:{password}@{host}:3306/{}", u.name, u.database);
    let data = BTreeMap::from([
        ("username".to_owned(), ByteString(u.name.clone().into_bytes())),
        (PASSWORD_KEY.to_owned(), ByteString(password.into_bytes())),
        ("database".to_owned(), ByteString(u.database.clone().into_bytes())),
        ("host".to_owned(), ByteString(host.into_bytes())),
        ("port".to_owned(), ByteString(b"3306".to_vec())),
        ("uri".to_owned(), ByteString(uri.into_bytes())),
    ]);
    Secret {
        metadata: meta(name, labels::common(&c.names, labels::DATABASE)),
        type_: Some("Opaque".to_owned()),
        data: Some(data),
        ..Default::default()
    }
}

/// The Job that applies the declaration: `USERS` lists `name:database:rw|ro`, each
/// password a file `<PASSWORDS_DIR>/<user>` of one projected volume.
fn users_job(c: &Cluster, users: &[UserSpec], sources: &[Source<'_>], name: &str) -> Job {
    let list = users
        .iter()
        .map(|u| {
            let access = match u.access {
                UserAccess::ReadWrite => "rw",
                UserAccess::ReadOnly => "ro",
            };
            format!("{}:{}:{access}", u.name, u.database)
        })
        .collect::<Vec<_>>()
        .join(" ");
    let projections = users
        .iter()
        .zip(sources)
        .map(|(u, s)| {
            let (secret, key) = match s {
                Source::Generated { secret, .. } => (secret.clone(), PASSWORD_KEY.to_owned()),
                Source::Own { secret, key } => (secret.metadata.name.clone().unwrap_or_default(), key.clone()),
            };
            VolumeProjection {
                secret: Some(SecretProjection {
                    name: secret,
                    items: Some(vec![KeyToPath { key, path: u.name.clone(), ..Default::default() }]),
                    optional: Some(false),
                }),
                ..Default::default()
            }
        })
        .collect();
    let request = JobRequest {
        purpose: PURPOSE,
        suffix: String::new(),
        program: job::Program::Agent("users"),
        env: vec![
            pod::env("PRIMARY", c.primary.as_str()),
            pod::env("USERS", list),
            pod::env("USERS_DIR", PASSWORDS_DIR),
        ],
    };
    let mut job = job::build(c, &request);
    job.metadata.name = Some(name.to_owned());
    if let Some(spec) = job.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: "users".to_owned(),
            projected: Some(ProjectedVolumeSource {
                sources: Some(projections),
                default_mode: Some(0o440),
                ..Default::default()
            }),
            ..Default::default()
        });
        if let Some(container) = spec.containers.first_mut() {
            container.volume_mounts.get_or_insert_with(Vec::new).push(pod::mount("users", PASSWORDS_DIR, true));
        }
    }
    job
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;

    use super::*;

    fn user(name: &str, database: &str) -> UserSpec {
        UserSpec {
            name: name.to_owned(),
            database: database.to_owned(),
            access: UserAccess::ReadWrite,
            password_secret: None,
        }
    }

    #[test]
    fn system_schemas_are_refused_in_any_spelling() {
        for db in ["mysql", "MySQL", "MYSQL", "sys", "SyS", "Information_Schema", "PERFORMANCE_SCHEMA", "_MySQLHook"] {
            let why = refusal(&user("app", db)).unwrap_or_default();
            assert!(why.contains("system schema"), "{db}: {why:?}");
        }
    }

    #[test]
    fn names_with_underscores_are_ordinary_databases() {
        // Granted literally (the users Job escapes `_`), so they are allowed.
        for db in ["my_ql", "_____", "my_q_", "app_data", "mysqlx", "sys2"] {
            assert_eq!(refusal(&user("app", db)), None, "{db}");
        }
    }

    #[test]
    fn what_the_crd_refuses_is_refused_here_too() {
        for (name, db) in
            [("repl", "shop"), ("mysqlhook", "shop"), ("App", "shop"), ("app", "my%ql"), ("app", ""), ("app", "a-b")]
        {
            assert!(refusal(&user(name, db)).is_some(), "{name} {db}");
        }
        assert_eq!(refusal(&user("app", &"d".repeat(64))), None);
        assert!(refusal(&user("app", &"d".repeat(65))).is_some());
    }

    /// The CRD's CEL rules name exactly the lists the hook checks, and the
    /// database rule compares lower-cased.
    #[test]
    fn the_crd_rules_list_the_same_names() {
        let crd = serde_json::to_string(&MySQL::crd()).unwrap_or_default();
        let quoted = |names: &[&str]| names.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ");
        assert!(crd.contains(&format!("!(self.lowerAscii() in [{}])", quoted(SYSTEM_SCHEMAS))), "database rule");
        assert!(crd.contains(&format!("!(self in [{}])", quoted(RESERVED_ACCOUNTS))), "name rule");

        // The collision rule is in the CRD too, with the same parts.
        for p in COLLIDING_PREFIXES {
            assert!(crd.contains(&format!("self.name.startsWith('{p}')")), "prefix {p}");
        }
        for i in COLLIDING_INFIXES {
            assert!(crd.contains(&format!("self.name.contains('{i}')")), "infix {i}");
        }
        for s in COLLIDING_SUFFIXES {
            assert!(crd.contains(&format!("self.name.endsWith('_{s}')")), "suffix _{s}");
            // The whole name: refused by this rule, or by the reserved-name one.
            assert!(crd.contains(&format!("self.name == '{s}'")) || RESERVED_ACCOUNTS.contains(s), "name {s}");
        }
    }

    /// Issue 30.8: the Secret names of two different clusters never meet. Names
    /// are drawn from the parts that collide, so the property is exercised, and
    /// the review's pair (`a` with `b_credentials`, `a-user-b`) is refused.
    #[test]
    fn no_user_secret_is_another_clusters_secret() {
        use proptest::prelude::*;

        let colliding = crate::names::Names::new("a").user_secret("b_credentials");
        assert_eq!(colliding, crate::names::Names::new("a-user-b").credentials, "the pair the review found");
        assert!(refusal(&user("b_credentials", "app")).is_some());
        assert_eq!(
            crate::names::Names::new("a").user_secret("user_b"),
            crate::names::Names::new("a-user").user_secret("b")
        );
        assert!(refusal(&user("user_b", "app")).is_some());
        // A user with a Secret of its own gets no generated one: nothing collides.
        let own = UserSpec {
            password_secret: Some(crate::api::PasswordSecretRef {
                name: "mine".to_owned(),
                key: "password".to_owned(),
            }),
            ..user("b_credentials", "app")
        };
        assert_eq!(refusal(&own), None);
        for ok in ["app", "app_ro", "users", "app_user", "user", "userx_b", "exporters", "my_credentials2"] {
            assert_eq!(refusal(&user(ok, "app")), None, "{ok}");
        }

        let parts = || prop::sample::select(vec!["a", "b", "user", "credentials", "exporter", "x1"]);
        let cluster = prop::collection::vec(parts(), 1..5).prop_map(|p| p.join("-"));
        let account = prop::collection::vec(parts(), 1..4).prop_map(|p| p.join("_"));
        let secrets = |cluster: &str, users: &[String]| {
            let n = crate::names::Names::new(cluster);
            let mut all = vec![n.credentials.clone(), n.exporter.clone()];
            all.extend(
                users
                    .iter()
                    .filter(|u| u.starts_with(|c: char| c.is_ascii_lowercase()) && refusal(&user(u, "app")).is_none())
                    .map(|u| n.user_secret(u)),
            );
            all
        };
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let users = prop::collection::vec(account, 0..6);
        let result = runner.run(&(cluster.clone(), users.clone(), cluster, users), |(a, ua, b, ub)| {
            prop_assume!(a != b);
            let theirs = secrets(&b, &ub);
            for name in secrets(&a, &ua) {
                prop_assert!(!theirs.contains(&name), "{name}: cluster {a} users {ua:?} and cluster {b} users {ub:?}");
            }
            Ok(())
        });
        assert!(result.is_ok(), "{result:?}");
    }
}

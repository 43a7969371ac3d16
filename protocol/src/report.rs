//! The one-line JSON report every agent command ends with.
//!
//! The agent prints it on stdout and writes it to the container's termination log
//! (`/dev/termination-log`), where the hook reads it back from the pod's status.
//! Kubernetes keeps at most 4096 bytes of a termination message, so a report is
//! kept under [`MAX_LINE`]: when too long, the lists go first and then the message
//! is shortened, never `result`, `reason` or `promoted` (the hook acts on them),
//! and `truncated` says so.
//!
//! The field names are those of the shell scripts' result lines, so the hook reads
//! a line of the previous release with the same type while a cluster rolls onto
//! this one (`tests` below parse lines the scripts wrote).

use serde::{Deserialize, Serialize};

/// The longest line written (bytes, without the newline); Kubernetes keeps 4096.
pub const MAX_LINE: usize = 4000;

/// What an agent command (or a script of an earlier release) reports.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// What happened: `users-applied`, `promoted`, ..., or `error`.
    #[serde(default)]
    pub result: String,
    /// Why it failed (with `result: error`): a stable word the hook may act on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The pod a role change made writable: carried by every report once it
    /// happened, errors included, so the hook follows a promotion whatever failed
    /// after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promoted: Option<String>,
    /// The pod a failover or switchover promoted (or bootstrap chose), or the
    /// primary an account Job wrote on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,
    /// Binary log files: copied by a backup, to replay in a restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binlogs: Option<i64>,
    /// How long a step took (a restore's load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gtid: Option<String>,
    /// A backup's checksum (SHA-256 of its `SHA256SUMS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// A backup restored into a throwaway server before it counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_tables: Option<i64>,
    /// A binary log archive run: every transaction before this time is archived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// The application accounts a users run made exist as declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<Vec<String>>,
    /// The accounts it dropped (made by an earlier run, no longer declared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<Vec<String>>,
    /// A failover: whether the old primary answered and was fenced (read-only, its
    /// client sessions killed) before the promotion. `false`: it did not answer, so
    /// the promotion rested on semi-sync, and fencing it is left to its own agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fenced: Option<bool>,
    /// The pod an account command ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// Whether an account command changed anything (a steady cluster writes nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<bool>,
    /// A human-readable account of what happened or went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// A preStop hook: how long it held the container (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited: Option<i64>,
    /// A preStop hook: the writable primary it saw take over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_primary: Option<String>,
    /// An inspection: what each member says about itself, in member order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub servers: Option<Vec<ServerReport>>,
    /// Fields were left out to keep the line short enough.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// One member as an inspection (`mysql-hook-agent inspect`, `inspect.sh` before
/// it) reports it: keys only when known.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServerReport {
    pub name: String,
    /// `false` when it does not answer (nothing else is known then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<bool>,
    /// `read_only` is OFF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writable: Option<bool>,
    /// The member (or `host:port`) it replicates from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Receiver and applier state: `Yes`, `No`, `Connecting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql: Option<String>,
    /// Seconds behind its source, when the server knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag: Option<i64>,
    /// The last replication error (receiver, then applier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its GTID position (MySQL `gtid_executed`, MariaDB `gtid_binlog_pos`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gtid: Option<String>,
    /// It holds a partial copy (a seed in progress).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub seeding: bool,
    /// Transactions the primary lacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errant: Option<String>,
    /// On the primary: semi-sync enabled as a source, and its connected clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semi_sync: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semi_sync_clients: Option<i64>,
}

impl Report {
    /// A success report.
    #[must_use]
    pub fn new(result: &str) -> Self {
        Self { result: result.to_owned(), ..Self::default() }
    }

    /// An error report with its reason and message.
    #[must_use]
    pub fn error(reason: &str, message: impl Into<String>) -> Self {
        Self {
            result: "error".to_owned(),
            reason: Some(reason.to_owned()),
            message: Some(message.into()),
            ..Self::default()
        }
    }

    /// A report line, or the raw text (a log tail) as the message: what the hook
    /// does with a termination message.
    #[must_use]
    pub fn parse(text: &str) -> Self {
        serde_json::from_str(text.trim()).unwrap_or_else(|_| Self {
            result: "error".to_owned(),
            message: Some(text.trim().to_owned()),
            ..Self::default()
        })
    }

    /// `reason: message`, for conditions.
    #[must_use]
    pub fn explain(&self) -> String {
        match (&self.reason, &self.message) {
            (Some(r), Some(m)) => format!("{r}: {m}"),
            (Some(r), None) => r.clone(),
            (None, Some(m)) => m.clone(),
            (None, None) => self.result.clone(),
        }
    }

    /// The report as one line of JSON of at most [`MAX_LINE`] bytes (see the
    /// module docs for what is left out first).
    #[must_use]
    pub fn line(&self) -> String {
        let mut r = self.clone();
        loop {
            let text = serde_json::to_string(&r).unwrap_or_else(|_| String::from(r#"{"result":"error"}"#));
            if text.len() <= MAX_LINE {
                return text;
            }
            r.truncated = true;
            if r.users.take().is_some() || r.dropped.take().is_some() {
                continue;
            }
            match &mut r.message {
                Some(m) if m.len() > 200 => {
                    let keep = m.char_indices().map(|(i, _)| i).take_while(|&i| i <= m.len() / 2).last().unwrap_or(0);
                    m.truncate(keep);
                    m.push_str("...");
                }
                _ if r.servers.as_ref().is_some_and(|v| v.iter().any(|s| s.gtid.is_some() || s.error.is_some())) => {
                    // An inspection of many members: their GTID texts, then their
                    // errors, go before what the hook acts on (`writable`, `errant`).
                    let gtids = r.servers.iter().flatten().any(|s| s.gtid.is_some());
                    for s in r.servers.iter_mut().flatten() {
                        if gtids {
                            s.gtid = None;
                        } else {
                            s.error = None;
                        }
                    }
                }
                _ => {
                    // Only short fields are left: drop the free-text ones.
                    if r.message.take().is_none() && r.gtid.take().is_none() && r.location.take().is_none() {
                        return text;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as the shell scripts of the previous release wrote them: the hook
    /// reads them with this type while a cluster rolls onto the agent.
    #[test]
    fn reads_the_lines_of_the_scripts() {
        let users =
            Report::parse(r#"{"result":"users-applied","primary":"db-0","users":["app","app_ro"],"dropped":[]}"#);
        assert_eq!(users.result, "users-applied");
        assert_eq!(users.users.as_deref(), Some(&["app".to_owned(), "app_ro".to_owned()][..]));
        let failed = Report::parse(
            r#"{"result":"error","primary":"db-1","promoted":"db-1","reason":"apply-timeout","message":"boom","truncated":true}"#,
        );
        assert_eq!(failed.promoted.as_deref(), Some("db-1"));
        assert_eq!(failed.explain(), "apply-timeout: boom");
        assert!(failed.truncated);
        // Unknown fields of other scripts are ignored, as the hook always did.
        let backup = Report::parse(r#"{"result":"backed-up","source":"db-1","bytes":10,"files":[{"path":"a"}]}"#);
        assert_eq!((backup.source.as_deref(), backup.bytes), (Some("db-1"), Some(10)));
        // A log tail instead of a line.
        assert_eq!(Report::parse("Killed\n").message.as_deref(), Some("Killed"));
    }

    #[test]
    fn reads_the_line_of_inspect_sh() {
        let line = r#"{"result":"inspected","primary":"db-0","servers":[{"name":"db-0","up":true,"writable":true,"gtid":"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-1042","semiSync":true,"semiSyncClients":2},{"name":"db-1","up":true,"writable":false,"source":"db-0","io":"Yes","sql":"Yes","lag":0,"gtid":"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-1042","seeding":true,"errant":"0-2-1"},{"name":"db-2","up":false}]}"#;
        let r = Report::parse(line);
        let servers = r.servers.clone().unwrap_or_default();
        assert_eq!((r.result.as_str(), r.primary.as_deref(), servers.len()), ("inspected", Some("db-0"), 3));
        assert_eq!(servers[0].semi_sync_clients, Some(2));
        assert!(servers[1].seeding && servers[1].errant.as_deref() == Some("0-2-1") && servers[1].lag == Some(0));
        assert_eq!(servers[2].up, Some(false));
        // and writes it back as the script did
        assert_eq!(r.line(), line);
    }

    #[test]
    fn long_inspections_keep_what_the_hook_acts_on() {
        let member = |i: usize| ServerReport {
            name: format!("db-{i}"),
            up: Some(true),
            writable: Some(i == 0),
            gtid: Some("x".repeat(400)),
            error: Some("e".repeat(160)),
            errant: Some("0-9-1".to_owned()),
            ..ServerReport::default()
        };
        let r = Report { servers: Some((0..9).map(member).collect()), ..Report::new("inspected") };
        let line = r.line();
        assert!(line.len() <= MAX_LINE, "{}", line.len());
        let back = Report::parse(&line);
        let servers = back.servers.unwrap_or_default();
        assert!(back.truncated && servers.len() == 9);
        assert!(servers.iter().all(|s| s.errant.is_some() && s.writable.is_some()));
    }

    #[test]
    fn long_reports_keep_what_the_hook_acts_on() {
        let mut r = Report::error("apply-timeout", "x".repeat(10_000));
        r.promoted = Some("db-1".to_owned());
        r.users = Some((0..500).map(|i| format!("user{i}")).collect());
        let line = r.line();
        assert!(line.len() <= MAX_LINE, "{}", line.len());
        let back = Report::parse(&line);
        assert_eq!(back.reason.as_deref(), Some("apply-timeout"));
        assert_eq!(back.promoted.as_deref(), Some("db-1"));
        assert!(back.truncated && back.users.is_none());
        assert!(back.message.is_some_and(|m| m.ends_with("...")));
    }

    #[test]
    fn short_reports_are_written_whole() {
        let mut r = Report::new("users-applied");
        r.users = Some(vec!["app".to_owned()]);
        r.dropped = Some(vec![]);
        assert_eq!(r.line(), r#"{"result":"users-applied","users":["app"],"dropped":[]}"#);
    }
}

//! `SHOW REPLICA STATUS` (MySQL) and `SHOW SLAVE STATUS` (MariaDB), typed.
//!
//! The row is read by column name, each flavor's names mapped to one field
//! (`Source_Host`/`Master_Host`, `Replica_IO_Running`/`Slave_IO_Running`, ...).
//! The scripts parsed the client's vertical text output, where an error message
//! holding a newline and `Slave_SQL_Running: Yes` could pass for a field; a
//! protocol row cannot be forged that way. A value that is not what the field
//! allows is an error, never a default.

use mysql::Row;

use crate::{Failure, Result};

/// A replication thread's state as the server reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thread {
    Yes,
    No,
    /// The receiver is (re)connecting to its source.
    Connecting,
}

/// One replication channel's status (the default channel).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaStatus {
    pub source_host: String,
    pub source_port: u16,
    pub receiver: Thread,
    pub applier: Thread,
    /// `Seconds_Behind_Source`: `None` when the server reports NULL (not applying).
    pub lag: Option<u64>,
    pub receiver_errno: u32,
    pub receiver_error: String,
    pub applier_errno: u32,
    pub applier_error: String,
}

impl ReplicaStatus {
    /// The status row, or `None` when the server is not a replica (no row).
    ///
    /// # Errors
    /// `sql-failed` when a field is missing or malformed.
    pub fn from_rows(server: &str, rows: &[Row]) -> Result<Option<Self>> {
        let Some(row) = rows.first() else { return Ok(None) };
        let get = |names: &[&str]| -> Result<String> {
            let columns = row.columns_ref();
            let i = columns
                .iter()
                .position(|c| names.iter().any(|n| c.name_str() == *n))
                .ok_or_else(|| bad(server, &format!("no column {}", names.join("/"))))?;
            Ok(crate::server::text(row, i).unwrap_or_default())
        };
        let thread = |names: &[&str]| -> Result<Thread> {
            match get(names)?.as_str() {
                "Yes" => Ok(Thread::Yes),
                "No" => Ok(Thread::No),
                "Connecting" | "Preparing" => Ok(Thread::Connecting),
                other => Err(bad(server, &format!("{} is {other:?}", names[0]))),
            }
        };
        let number = |names: &[&str]| -> Result<u32> {
            let v = get(names)?;
            if v.is_empty() { Ok(0) } else { v.parse().map_err(|_| bad(server, &format!("{} is {v:?}", names[0]))) }
        };
        let lag = get(&["Seconds_Behind_Source", "Seconds_Behind_Master"])?;
        let port = get(&["Source_Port", "Master_Port"])?;
        Ok(Some(Self {
            source_host: get(&["Source_Host", "Master_Host"])?,
            source_port: port.parse().map_err(|_| bad(server, &format!("Source_Port is {port:?}")))?,
            receiver: thread(&["Replica_IO_Running", "Slave_IO_Running"])?,
            applier: thread(&["Replica_SQL_Running", "Slave_SQL_Running"])?,
            lag: if lag.is_empty() {
                None
            } else {
                Some(lag.parse().map_err(|_| bad(server, &format!("Seconds_Behind_Source is {lag:?}")))?)
            },
            receiver_errno: number(&["Last_IO_Errno"])?,
            receiver_error: get(&["Last_IO_Error"])?,
            applier_errno: number(&["Last_SQL_Errno"])?,
            applier_error: get(&["Last_SQL_Error"])?,
        }))
    }

    /// `s`'s status, or `None` when it is not a replica.
    ///
    /// # Errors
    /// The server's error, or a malformed row.
    pub fn read(s: &mut crate::server::Server) -> Result<Option<Self>> {
        let q = match s.flavor {
            crate::context::Flavor::Mysql => "SHOW REPLICA STATUS",
            crate::context::Flavor::Mariadb => "SHOW SLAVE STATUS",
        };
        let rows = s.rows(q)?;
        Self::from_rows(&s.name, &rows)
    }

    /// Both threads run and no error is recorded.
    #[must_use]
    pub fn healthy(&self) -> bool {
        self.receiver == Thread::Yes
            && self.applier == Thread::Yes
            && self.receiver_errno == 0
            && self.applier_errno == 0
    }
}

fn bad(server: &str, what: &str) -> Failure {
    Failure::new("sql-failed", format!("{server}: replica status: {what}"))
}

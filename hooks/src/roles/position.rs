//! The old primary's last known position, for a failover's quorum exception
//! (issue 31.3).
//!
//! With fewer replicas answering than the quorum, `failover.sh` may still
//! promote the old primary when it answers and holds what every examined replica
//! received. That proves nothing about commits the silent replicas acknowledged
//! if the old primary came back from an older copy of its volume and the replicas
//! that answer are behind too. The hook has seen more: the inspections read the
//! primary's own position while it served as the primary. Every transaction a
//! server once executed stays executed on it, so that position is a lower bound
//! of what the old primary must still hold, and the Job is given it
//! (`PRIMARY_GTID`) to refuse an old primary that lacks it.
//!
//! The position is remembered, not read from the newest inspection alone: the
//! primary's outage changes the readiness the inspections are named after, so a
//! new inspection runs within seconds and finds the old primary down (no
//! position) or back from an older volume (an older one). The memory is the
//! union of every position read from the primary while it was up and writable,
//! kept for one primary and epoch ([`Known`]) on the config ConfigMap
//! ([`PRIMARY_POSITION`]), so it never moves back, and forgotten at a role
//! change (a new primary starts from what it is read to hold).
//!
//! The inspection clips long texts (`...` after 120 characters). A clipped text
//! is cut back to its last whole element (a MySQL `uuid:intervals` entry, a
//! MariaDB `domain-server-seq` GTID), which is still a lower bound; what is left
//! is parsed strictly and kept in canonical form, or not at all.

use protocol::gtid::{mariadb::GtidList, mysql::GtidSet};
use serde::{Deserialize, Serialize};

use crate::api::Flavor;

/// What the inspection agent appends to a clipped text.
const CLIPPED: &str = "...";

/// Annotation on the config ConfigMap: the primary's known position ([`Known`],
/// as JSON).
pub const PRIMARY_POSITION: &str = "mysqlhook.dev/primary-position";

/// What the primary `pod` of `epoch` is known to have executed (canonical GTID
/// text of the cluster's flavor).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Known {
    pub pod: String,
    pub epoch: i32,
    pub gtid: String,
}

impl Known {
    /// The annotation's value, read strictly: a value that does not parse, or
    /// whose GTID text is not canonical for `flavor`, is no memory (the Job then
    /// checks only what the replicas show, as before issue 31.3).
    #[must_use]
    pub fn recall(flavor: Flavor, value: Option<&str>) -> Option<Known> {
        let known: Known = serde_json::from_str(value?).ok()?;
        (canonical(flavor, &known.gtid).as_deref() == Some(known.gtid.as_str())).then_some(known)
    }

    /// The annotation's value.
    #[must_use]
    pub fn annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The known position of the primary `pod` of `epoch` after this sync: what was
/// remembered for the same pod and epoch, joined with what the newest inspection
/// read executed on it while it was the writable primary (`inspected`, possibly
/// clipped). Never smaller than what was remembered for them.
#[must_use]
pub fn remember(
    flavor: Flavor,
    remembered: Option<&Known>,
    pod: &str,
    epoch: i32,
    inspected: Option<&str>,
) -> Option<Known> {
    let kept = remembered.filter(|k| k.pod == pod && k.epoch == epoch).map(|k| k.gtid.as_str());
    let read = inspected.and_then(|g| known_position(flavor, g));
    let gtid = match (kept, read.as_deref()) {
        (None, None) => return None,
        (Some(g), None) | (None, Some(g)) => g.to_owned(),
        (Some(a), Some(b)) => union(flavor, a, b)?,
    };
    Some(Known { pod: pod.to_owned(), epoch, gtid })
}

/// The canonical form of a whole GTID text of `flavor`, if it is one and not empty.
fn canonical(flavor: Flavor, text: &str) -> Option<String> {
    match flavor {
        Flavor::Mysql => GtidSet::parse(text).ok().filter(|s| !s.is_empty()).map(|s| s.to_string()),
        Flavor::Mariadb => GtidList::parse(text).ok().filter(|l| !l.is_empty()).map(|l| l.to_string()),
    }
}

/// Two canonical texts joined: a MySQL set union, a MariaDB state union (per
/// domain and server id the higher sequence number).
fn union(flavor: Flavor, a: &str, b: &str) -> Option<String> {
    Some(match flavor {
        Flavor::Mysql => GtidSet::parse(a).ok()?.union(&GtidSet::parse(b).ok()?).to_string(),
        Flavor::Mariadb => GtidList::parse(a).ok()?.union(&GtidList::parse(b).ok()?).to_string(),
    })
}

/// The canonical GTID text a failover's old primary must still hold, from the
/// inspection's (possibly clipped) `gtid` of it; `None` when nothing whole and
/// well-formed is left (then the Job checks only what the replicas show).
#[must_use]
pub fn known_position(flavor: Flavor, inspected: &str) -> Option<String> {
    let whole = match inspected.strip_suffix(CLIPPED) {
        // The element the clip cut is dropped, the ones before it are whole.
        Some(clipped) => clipped.rsplit_once(',')?.0,
        None => inspected,
    };
    canonical(flavor, whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    const U1: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const U2: &str = "4e11fa47-71ca-11e1-9e33-c80aa9429562";

    #[test]
    fn whole_texts_are_kept_in_canonical_form() {
        assert_eq!(known_position(Flavor::Mariadb, "0-1-100").as_deref(), Some("0-1-100"));
        assert_eq!(known_position(Flavor::Mariadb, "1-2-5,0-1-100").as_deref(), Some("0-1-100,1-2-5"));
        let set = format!("{U2}:1-3,{}:1-5", U1.to_uppercase());
        assert_eq!(known_position(Flavor::Mysql, &set), Some(format!("{U1}:1-5,{U2}:1-3")));
    }

    #[test]
    fn a_clipped_text_keeps_only_its_whole_elements() {
        // "0-1-10" would be a prefix of "0-1-100": the cut element is never kept.
        assert_eq!(known_position(Flavor::Mariadb, "0-1-100,1-2-10...").as_deref(), Some("0-1-100"));
        assert_eq!(known_position(Flavor::Mariadb, "0-1-10..."), None);
        let clipped = format!("{U1}:1-5,{U2}:1-1...");
        assert_eq!(known_position(Flavor::Mysql, &clipped), Some(format!("{U1}:1-5")));
        assert_eq!(known_position(Flavor::Mysql, &format!("{U1}:1-5:7-1...")), None);
    }

    #[test]
    fn the_memory_only_grows_for_one_primary_and_epoch() {
        let known = |pod: &str, epoch, gtid: &str| Some(Known { pod: pod.into(), epoch, gtid: gtid.into() });
        let first = remember(Flavor::Mariadb, None, "db-0", 3, Some("0-1-100"));
        assert_eq!(first, known("db-0", 3, "0-1-100"));
        // An older read (the old primary back from an older volume) never lowers it.
        assert_eq!(remember(Flavor::Mariadb, first.as_ref(), "db-0", 3, Some("0-1-40")), first);
        // Nothing read (the primary is down): kept.
        assert_eq!(remember(Flavor::Mariadb, first.as_ref(), "db-0", 3, None), first);
        assert_eq!(
            remember(Flavor::Mariadb, first.as_ref(), "db-0", 3, Some("0-1-120,1-1-7")),
            known("db-0", 3, "0-1-120,1-1-7")
        );
        // Another primary or epoch starts afresh.
        assert_eq!(remember(Flavor::Mariadb, first.as_ref(), "db-1", 4, None), None);
        assert_eq!(remember(Flavor::Mariadb, first.as_ref(), "db-0", 5, Some("0-2-7")), known("db-0", 5, "0-2-7"));
        let set = remember(Flavor::Mysql, None, "db-0", 0, Some(&format!("{U1}:1-5")));
        assert_eq!(
            remember(Flavor::Mysql, set.as_ref(), "db-0", 0, Some(&format!("{U2}:1-2"))),
            known("db-0", 0, &format!("{U1}:1-5,{U2}:1-2"))
        );
    }

    #[test]
    fn the_annotation_is_read_strictly() {
        let known = Known { pod: "db-0".into(), epoch: 2, gtid: "0-1-100".into() };
        assert_eq!(Known::recall(Flavor::Mariadb, Some(&known.annotation())), Some(known.clone()));
        assert_eq!(Known::recall(Flavor::Mysql, Some(&known.annotation())), None);
        assert_eq!(Known::recall(Flavor::Mariadb, None), None);
        assert_eq!(Known::recall(Flavor::Mariadb, Some("0-1-100")), None);
        let bad = r#"{"pod":"db-0","epoch":2,"gtid":"0-1-$(id)"}"#;
        assert_eq!(Known::recall(Flavor::Mariadb, Some(bad)), None);
        let extra = r#"{"pod":"db-0","epoch":2,"gtid":"0-1-100","x":1}"#;
        assert_eq!(Known::recall(Flavor::Mariadb, Some(extra)), None);
    }

    #[test]
    fn nothing_is_passed_for_an_empty_or_malformed_text() {
        assert_eq!(known_position(Flavor::Mariadb, ""), None);
        assert_eq!(known_position(Flavor::Mysql, ""), None);
        assert_eq!(known_position(Flavor::Mariadb, "0-1-$(id)"), None);
        assert_eq!(known_position(Flavor::Mariadb, "0-1-1,,0-1-2"), None);
        assert_eq!(known_position(Flavor::Mariadb, "0-1-1;0-1-2"), None);
        assert_eq!(known_position(Flavor::Mysql, "0-1-100"), None);
        assert_eq!(known_position(Flavor::Mariadb, &format!("{U1}:1-5")), None);
        assert_eq!(known_position(Flavor::Mariadb, "..."), None);
    }
}

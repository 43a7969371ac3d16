//! Labels the hook puts on what it creates, and the selectors built from them.

use std::collections::BTreeMap;

use crate::names::Names;

pub const INSTANCE: &str = "app.kubernetes.io/instance";
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const COMPONENT: &str = "app.kubernetes.io/component";
pub const NAME: &str = "app.kubernetes.io/name";
/// The label every StatefulSet pod carries with its own name.
pub const POD_NAME: &str = "statefulset.kubernetes.io/pod-name";
/// Which operation a Job pod runs (`bootstrap`, `failover`, ...).
pub const JOB_PURPOSE: &str = "mysqlhook.dev/purpose";
/// Annotation of a backup, archive or restore pod: the store it reads or writes
/// (`s3://<bucket>/<prefix>` or `pvc://<claim>/<prefix>`), so that its status
/// names where it wrote even after `spec.backup.storage` changed.
pub const STORE: &str = "mysqlhook.dev/store";

pub const MANAGER: &str = "mysql-hook";
pub const DATABASE: &str = "database";
pub const JOB: &str = "job";

/// Labels selecting the database pods of one cluster (the StatefulSet selector:
/// immutable once created, so it never changes shape).
#[must_use]
pub fn database_selector(names: &Names) -> BTreeMap<String, String> {
    BTreeMap::from([
        (INSTANCE.to_owned(), names.label.clone()),
        (MANAGED_BY.to_owned(), MANAGER.to_owned()),
        (COMPONENT.to_owned(), DATABASE.to_owned()),
    ])
}

/// Labels selecting every pod of one cluster, database and Job pods alike: what
/// the customize hook asks Metacontroller for.
#[must_use]
pub fn cluster_pods(names: &Names) -> BTreeMap<String, String> {
    BTreeMap::from([(INSTANCE.to_owned(), names.label.clone()), (MANAGED_BY.to_owned(), MANAGER.to_owned())])
}

/// Labels on every child object and pod.
#[must_use]
pub fn common(names: &Names, component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME.to_owned(), "mysql".to_owned()),
        (INSTANCE.to_owned(), names.label.clone()),
        (MANAGED_BY.to_owned(), MANAGER.to_owned()),
        (COMPONENT.to_owned(), component.to_owned()),
    ])
}

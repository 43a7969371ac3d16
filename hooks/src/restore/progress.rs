//! Where each server's restore stands, read from its restore pod. Every step of
//! `restore.sh` is a container of its own ([`crate::build::backup::RESTORE_STEPS`], after the
//! uploader's `download` on S3), so the pod's status says which step runs and
//! since when, and each finished step's result line says what it found: the
//! dump's size, how long the load took, how many binary log files remain. A
//! restore of a large dump is then visibly loading, not silently "Running", and
//! `detail` gives the figures to judge how long it still takes.
//!
//! Only times the pod reports are used, never the clock: the status changes when
//! a step changes, not at every sync.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use crate::{
    api::{RestoreServerStatus, RestoreStep},
    build::backup::{CHECK_CONTAINER, LOAD_CONTAINER, RESTORE_CONTAINER},
    jobs::{self, Outcome, ScriptResult},
};

/// One server's restore.
#[must_use]
pub fn of_server(pod: &str, job: &str, outcome: &Outcome, pods: &[&Pod], replays: bool) -> RestoreServerStatus {
    let status =
        |step, since, detail| RestoreServerStatus { pod: pod.to_owned(), job: job.to_owned(), step, since, detail };
    match outcome {
        Outcome::Succeeded(_, at) => status(RestoreStep::Restored, at.clone(), None),
        Outcome::Failed(r, at) => status(RestoreStep::Failed, at.clone(), Some(r.explain())),
        Outcome::Running => {
            // The attempt that runs: the newest pod (names break ties, for determinism).
            let current = pods.iter().max_by(|a, b| {
                (&a.metadata.creation_timestamp, &a.metadata.name)
                    .cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
            });
            let (step, since, detail) = current.map_or((RestoreStep::Pending, None, None), |p| running(p, replays));
            status(step, since, detail)
        }
    }
}

/// The step a running restore pod is at: its first container that has not
/// ended well.
fn running(pod: &Pod, replays: bool) -> (RestoreStep, Option<String>, Option<String>) {
    let Some(st) = pod.status.as_ref() else { return (RestoreStep::Pending, None, None) };
    let statuses: Vec<&ContainerStatus> =
        st.init_container_statuses.iter().flatten().chain(st.container_statuses.iter().flatten()).collect();
    let in_steps =
        pod.spec.as_ref().is_some_and(|s| s.init_containers.iter().flatten().any(|c| c.name == LOAD_CONTAINER));
    let mut found = Found::default();
    for s in &statuses {
        let state = s.state.as_ref();
        match state.and_then(|x| x.terminated.as_ref()) {
            Some(t) if t.exit_code == 0 => {
                found.add(&s.name, &ScriptResult::parse(t.message.as_deref().unwrap_or_default()));
            }
            _ => {
                let since = state
                    .and_then(|x| x.running.as_ref())
                    .and_then(|r| r.started_at.as_ref())
                    .map(|t| jobs::seconds(t.0));
                let step = match s.name.as_str() {
                    "download" => RestoreStep::Downloading,
                    CHECK_CONTAINER => RestoreStep::Checking,
                    LOAD_CONTAINER => RestoreStep::Loading,
                    RESTORE_CONTAINER if !in_steps => RestoreStep::Restoring,
                    RESTORE_CONTAINER if replays => RestoreStep::Replaying,
                    RESTORE_CONTAINER => RestoreStep::Finishing,
                    // install-scripts: the pod is still starting
                    _ => RestoreStep::Pending,
                };
                return (step, since, found.detail(replays));
            }
        }
    }
    // No container status yet, or all ended and the pod's phase not yet updated.
    (RestoreStep::Pending, None, found.detail(replays))
}

/// What finished steps reported.
#[derive(Default)]
struct Found {
    /// The dump's size in bytes (check).
    bytes: Option<i64>,
    /// Binary log files to replay (check).
    binlogs: Option<i64>,
    /// How long the load took (load).
    load_seconds: Option<i64>,
}

impl Found {
    fn add(&mut self, container: &str, r: &ScriptResult) {
        match container {
            CHECK_CONTAINER => {
                self.bytes = r.bytes;
                self.binlogs = r.binlogs;
            }
            LOAD_CONTAINER => {
                self.bytes = r.bytes.or(self.bytes);
                self.load_seconds = r.seconds;
            }
            _ => {}
        }
    }

    fn detail(&self, replays: bool) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(b) = self.bytes {
            parts.push(format!("dump of {}", mib(b)));
        }
        if let Some(s) = self.load_seconds {
            parts.push(format!("loaded in {s} s"));
        }
        if let (true, Some(n)) = (replays, self.binlogs) {
            parts.push(format!("{n} binary log file{} to replay", if n == 1 { "" } else { "s" }));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// Bytes as MiB with one decimal (`304.0 MiB`), in integers: no float formatting.
fn mib(bytes: i64) -> String {
    let tenths = (bytes.max(0) * 10 + 524_288) / 1_048_576;
    format!("{}.{} MiB", tenths / 10, tenths % 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_mib_with_one_decimal() {
        assert_eq!(mib(318_767_104), "304.0 MiB");
        assert_eq!(mib(1378), "0.0 MiB");
        assert_eq!(mib(1_100_000), "1.0 MiB");
        assert_eq!(mib(1_200_000), "1.1 MiB");
    }

    fn pod(init: &[(&str, Option<i32>)], main: (&str, Option<i32>)) -> Pod {
        use k8s_openapi::api::core::v1::{
            Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, PodSpec, PodStatus,
        };
        let status = |(name, code): (&str, Option<i32>)| ContainerStatus {
            name: name.to_owned(),
            state: Some(match code {
                Some(exit_code) => ContainerState {
                    terminated: Some(ContainerStateTerminated { exit_code, ..Default::default() }),
                    ..Default::default()
                },
                None => ContainerState { running: Some(ContainerStateRunning::default()), ..Default::default() },
            }),
            ..Default::default()
        };
        let container = |name: &str| Container { name: name.to_owned(), ..Default::default() };
        Pod {
            spec: Some(PodSpec {
                init_containers: Some(init.iter().map(|(n, _)| container(n)).collect()),
                containers: vec![container(main.0)],
                ..Default::default()
            }),
            status: Some(PodStatus {
                init_container_statuses: Some(init.iter().copied().map(status).collect()),
                container_statuses: Some(vec![status(main)]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_step_is_the_first_container_that_has_not_ended_well() {
        let steps = |p: &Pod, replays| running(p, replays).0;
        let starting = pod(&[("install-scripts", None), (CHECK_CONTAINER, None)], (RESTORE_CONTAINER, None));
        assert_eq!(steps(&starting, true), RestoreStep::Pending);
        let loading = pod(&[(CHECK_CONTAINER, Some(0)), (LOAD_CONTAINER, None)], (RESTORE_CONTAINER, None));
        assert_eq!(steps(&loading, true), RestoreStep::Loading);
        let last = pod(&[(CHECK_CONTAINER, Some(0)), (LOAD_CONTAINER, Some(0))], (RESTORE_CONTAINER, None));
        assert_eq!((steps(&last, true), steps(&last, false)), (RestoreStep::Replaying, RestoreStep::Finishing));
        // A Job of an earlier mysql-hook: the whole restore in one container.
        assert_eq!(steps(&pod(&[], (RESTORE_CONTAINER, None)), false), RestoreStep::Restoring);
    }

    #[test]
    fn the_detail_names_what_finished_steps_found() {
        let mut f = Found::default();
        assert_eq!(f.detail(true), None);
        f.add(CHECK_CONTAINER, &ScriptResult { bytes: Some(318_767_104), binlogs: Some(3), ..ScriptResult::default() });
        assert_eq!(f.detail(true).as_deref(), Some("dump of 304.0 MiB, 3 binary log files to replay"));
        f.add(LOAD_CONTAINER, &ScriptResult { bytes: Some(318_767_104), seconds: Some(92), ..ScriptResult::default() });
        assert_eq!(f.detail(false).as_deref(), Some("dump of 304.0 MiB, loaded in 92 s"));
    }
}

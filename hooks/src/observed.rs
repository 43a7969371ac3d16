//! A read-only view of what Metacontroller observed, in the terms the hook reasons
//! in: the cluster's server pods by ordinal, their readiness, and its Jobs.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{apps::v1::StatefulSet, batch::v1::Job, core::v1::Pod},
    jiff::Timestamp,
};

use crate::{jobs, labels, metacontroller::SyncRequest, names::Names};

/// One server pod as the hook sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Member<'a> {
    pub name: &'a str,
    pub ordinal: i32,
    pub ready: bool,
    /// When the pod's Ready condition last changed, if it has one.
    pub ready_since: Option<Timestamp>,
    /// The pod's IP, once it has one.
    pub ip: Option<&'a str>,
    /// Being deleted.
    pub terminating: bool,
    /// The server container runs (whether or not it is Ready): a failover Job can
    /// reach it, fence it, and, when it is the most advanced, make it writable again.
    pub mysqld_running: bool,
    /// When the server container's previous run ended (its `lastState.terminated`):
    /// mysqld died or was killed then, and every server starts read-only, so a
    /// primary that died after it took its role cannot turn Ready by itself.
    pub mysqld_ended: Option<Timestamp>,
    /// The server runs and its agent's `/candidate` probe passes (no partial seed,
    /// no transactions the primary lacks): a failover may promote it although the
    /// pod is not Ready. A replica whose primary is gone is NotReady (its receiver
    /// lost the source) but is exactly what a failover needs (issue 31.2); the
    /// failover Job examines it again before it promotes anyone.
    pub candidate: bool,
    pub pod: &'a Pod,
}

/// How a Job ended, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Running,
    Succeeded,
    Failed,
}

/// The observed state of one cluster.
#[derive(Debug, Clone)]
pub struct Observed<'a> {
    /// Server pods by ordinal.
    pub members: BTreeMap<i32, Member<'a>>,
    pub stateful_set: Option<&'a StatefulSet>,
    /// Job pods, by the Job that owns them.
    job_pods: BTreeMap<&'a str, Vec<&'a Pod>>,
    request: &'a SyncRequest,
}

impl<'a> Observed<'a> {
    #[must_use]
    pub fn new(request: &'a SyncRequest, names: &Names) -> Self {
        let mut members = BTreeMap::new();
        let mut job_pods: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
        for pod in request.related.pods.values() {
            let pod_labels = pod.metadata.labels.as_ref();
            let label = |k: &str| pod_labels.and_then(|l| l.get(k)).map(String::as_str);
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            if label(labels::COMPONENT) == Some(labels::JOB) {
                // By the Job that controls the pod, never by its labels.
                if let Some((job, _)) = jobs::owner_job(pod) {
                    job_pods.entry(job).or_default().push(pod);
                }
                continue;
            }
            let Some(ordinal) = names.ordinal(name) else { continue };
            let ready_condition = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
            let container = |want: &str| {
                pod.status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .and_then(|c| c.iter().find(|c| c.name == want))
            };
            let mysqld_running =
                container(crate::model::MYSQLD).and_then(|c| c.state.as_ref()).is_some_and(|s| s.running.is_some());
            let mysqld_ended = container(crate::model::MYSQLD)
                .and_then(|c| c.last_state.as_ref())
                .and_then(|s| s.terminated.as_ref())
                .and_then(|t| t.finished_at.as_ref())
                .map(|t| t.0);
            let agent_ready = container(crate::build::statefulset::AGENT).is_some_and(|c| c.ready);
            members.insert(
                ordinal,
                Member {
                    name,
                    ordinal,
                    ready: ready_condition.is_some_and(|c| c.status == "True")
                        && pod.metadata.deletion_timestamp.is_none(),
                    ready_since: ready_condition.and_then(|c| c.last_transition_time.as_ref()).map(|t| t.0),
                    ip: pod.status.as_ref().and_then(|s| s.pod_ip.as_deref()),
                    terminating: pod.metadata.deletion_timestamp.is_some(),
                    mysqld_running,
                    mysqld_ended,
                    candidate: mysqld_running && agent_ready && pod.metadata.deletion_timestamp.is_none(),
                    pod,
                },
            );
        }
        // A Job that is a child is known by its uid too: pods of an earlier Job of
        // the same name, or claiming it falsely, do not count.
        for (job, pods) in &mut job_pods {
            if let Some(observed) = request.children.jobs.values().find(|j| j.metadata.name.as_deref() == Some(*job)) {
                pods.retain(|p| jobs::owned_by(p, observed));
            }
            pods.sort_by_key(|p| p.metadata.name.as_deref());
        }
        let stateful_set = request
            .children
            .stateful_sets
            .values()
            .find(|s| s.metadata.name.as_deref() == Some(names.stateful_set.as_str()));
        Self { members, stateful_set, job_pods, request }
    }

    /// The member with this pod name.
    #[must_use]
    pub fn member(&self, name: &str) -> Option<&Member<'a>> {
        self.members.values().find(|m| m.name == name)
    }

    /// Members that are Ready.
    pub fn ready_members(&self) -> impl Iterator<Item = &Member<'a>> {
        self.members.values().filter(|m| m.ready)
    }

    /// The pods of this cluster the scheduler could not place (`PodScheduled` False,
    /// reason `Unschedulable`), server pods and the pods of its Jobs, by name, each
    /// with the scheduler's message. A cluster whose pods wait for room otherwise
    /// reports only what it is waiting for ("bootstrapping db-0"), never why it
    /// does not happen; the scale rig (bench/scale.py) filled its nodes that way.
    #[must_use]
    pub fn unschedulable(&self) -> Vec<(&'a str, &'a str)> {
        let servers = self.members.values().map(|m| m.pod);
        let job_pods = self.job_pods.values().flatten().copied();
        let mut out: Vec<_> = servers
            .chain(job_pods)
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| {
                let scheduled = p.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "PodScheduled")?;
                (scheduled.status == "False" && scheduled.reason.as_deref() == Some("Unschedulable")).then(|| {
                    (p.metadata.name.as_deref().unwrap_or_default(), scheduled.message.as_deref().unwrap_or_default())
                })
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// The related volume claim of this name, in the cluster's namespace.
    #[must_use]
    pub fn claim(&self, name: &str) -> Option<&'a k8s_openapi::api::core::v1::PersistentVolumeClaim> {
        let ns = self.request.parent.metadata.namespace.as_deref().unwrap_or_default();
        self.request.related.claims.get(&format!("{ns}/{name}"))
    }

    /// Every observed Job child.
    pub fn jobs(&self) -> impl Iterator<Item = &'a Job> + use<'a> {
        self.request.children.jobs.values()
    }

    /// The name of every observed Job, and of every Job seen only through its pods
    /// (Metacontroller's view of its children can lag behind the related pods).
    pub fn job_names(&self) -> impl Iterator<Item = &'a str> + use<'a, '_> {
        self.jobs()
            .filter_map(|j| j.metadata.name.as_deref())
            .chain(self.job_pods.iter().filter(|(_, pods)| !pods.is_empty()).map(|(job, _)| *job))
    }

    /// An observed Job child by name.
    #[must_use]
    pub fn job(&self, name: &str) -> Option<&'a Job> {
        self.request.children.jobs.values().find(|j| j.metadata.name.as_deref() == Some(name))
    }

    /// Every observed ConfigMap child.
    pub fn config_maps(&self) -> impl Iterator<Item = &'a k8s_openapi::api::core::v1::ConfigMap> + use<'a> {
        self.request.children.config_maps.values()
    }

    /// A key of an observed ConfigMap child.
    #[must_use]
    pub fn config_map_value(&self, config_map: &str, key: &str) -> Option<&'a str> {
        self.request
            .children
            .config_maps
            .values()
            .find(|c| c.metadata.name.as_deref() == Some(config_map))?
            .data
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    /// The option file (`my.cnf`) a pod spec mounts, from the observed option-file
    /// ConfigMap its volume names.
    #[must_use]
    pub fn option_file_of(&self, spec: &k8s_openapi::api::core::v1::PodSpec) -> Option<&'a str> {
        let volume = spec.volumes.as_ref()?.iter().find(|v| v.name == crate::build::pod::OPTION_FILE_VOLUME)?;
        self.config_map_value(&volume.config_map.as_ref()?.name, crate::model::MY_CNF)
    }

    /// An annotation of an observed ConfigMap child.
    #[must_use]
    pub fn config_map_annotation(&self, config_map: &str, key: &str) -> Option<&'a str> {
        self.request
            .children
            .config_maps
            .values()
            .find(|c| c.metadata.name.as_deref() == Some(config_map))?
            .metadata
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    /// The related Secrets (those the customize hook asked for: opted in by their owners).
    #[must_use]
    pub fn related_secrets(&self) -> &'a crate::metacontroller::ByKey<k8s_openapi::api::core::v1::Secret> {
        &self.request.related.secrets
    }

    /// The observed Secret children.
    pub fn secrets(&self) -> impl Iterator<Item = &'a k8s_openapi::api::core::v1::Secret> + use<'a> {
        self.request.children.secrets.values()
    }

    /// An observed Secret child.
    #[must_use]
    pub fn secret(&self, secret: &str) -> Option<&'a k8s_openapi::api::core::v1::Secret> {
        self.request.children.secrets.values().find(|s| s.metadata.name.as_deref() == Some(secret))
    }

    /// An observed Secret child's data.
    #[must_use]
    pub fn secret_data(&self, secret: &str) -> Option<&'a BTreeMap<String, k8s_openapi::ByteString>> {
        self.request.children.secrets.values().find(|s| s.metadata.name.as_deref() == Some(secret))?.data.as_ref()
    }

    /// Whether any pod of the Job `job` was observed, in any state.
    #[must_use]
    pub fn job_has_pods(&self, job: &str) -> bool {
        self.job_pods.get(job).is_some_and(|p| !p.is_empty())
    }

    /// Whether a Job has finished, and how.
    #[must_use]
    pub fn job_state(job: &Job) -> JobState {
        let status = job.status.as_ref();
        let condition = |t: &str| {
            status
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == t && c.status == "True"))
        };
        if condition("Complete") || status.and_then(|s| s.succeeded).unwrap_or(0) > 0 {
            JobState::Succeeded
        } else if condition("Failed") {
            JobState::Failed
        } else {
            JobState::Running
        }
    }

    /// How a role-change Job stands, its pods included: [`Self::job_state`], except
    /// that a Job still marked running whose pod has already ended with exit
    /// status 0 has succeeded. One such pod ends the Job (one completion, no
    /// restart), so its result is final; the Job controller marks the Job Complete
    /// about a second later, and waiting for that kept writes refused that much
    /// longer at every role change (issue 35.1).
    #[must_use]
    pub fn role_job_state(&self, job: &Job) -> JobState {
        match Self::job_state(job) {
            JobState::Running if job.metadata.name.as_deref().is_some_and(|name| self.job_result(name).is_some()) => {
                JobState::Succeeded
            }
            state => state,
        }
    }

    /// The one-line result a Job's script wrote to its termination log: the
    /// message of the newest pod of that Job that terminated with one.
    #[must_use]
    pub fn job_result(&self, job: &str) -> Option<&'a str> {
        self.terminations(job).filter(|(_, code, _)| *code == 0).max_by_key(|(at, _, _)| *at).map(|(_, _, m)| m.trim())
    }

    /// [`Self::job_result`] with the time its pod finished.
    #[must_use]
    pub fn job_result_at(&self, job: &str) -> Option<(Option<Timestamp>, &'a str)> {
        self.terminations(job)
            .filter(|(_, code, _)| *code == 0)
            .max_by_key(|(at, _, _)| *at)
            .map(|(at, _, m)| (at, m.trim()))
    }

    /// The termination message of the newest terminated pod of a Job, whatever its
    /// exit code: why a failed Job failed.
    #[must_use]
    pub fn job_message(&self, job: &str) -> Option<&'a str> {
        self.terminations(job).max_by_key(|(at, _, _)| *at).map(|(_, _, m)| m.trim())
    }

    /// Whether any pod of a Job with one of these purposes, other than `except`,
    /// still runs (or waits to): a Job deleted in the background leaves its pods
    /// behind for a while.
    #[must_use]
    pub fn job_pods_active(&self, purposes: &[&str], except: Option<&str>) -> bool {
        self.job_pods.iter().filter(|(job, _)| Some(**job) != except).flat_map(|(_, pods)| pods).any(|p| {
            let purpose = p.metadata.labels.as_ref().and_then(|l| l.get(labels::JOB_PURPOSE));
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            purpose.is_some_and(|x| purposes.contains(&x.as_str())) && !matches!(phase, Some("Succeeded" | "Failed"))
        })
    }

    /// `(finishedAt, exitCode, message)` of every terminated container of a Job's
    /// pods that left a message.
    fn terminations(&self, job: &str) -> impl Iterator<Item = (Option<Timestamp>, i32, &'a str)> + '_ {
        self.job_pods.get(job).into_iter().flatten().copied().filter_map(|p: &'a Pod| {
            let statuses = p.status.as_ref()?.container_statuses.as_ref()?;
            statuses.iter().find_map(|c| {
                let t = c.state.as_ref()?.terminated.as_ref()?;
                Some((t.finished_at.as_ref().map(|t| t.0), t.exit_code, t.message.as_deref()?))
            })
        })
    }
}

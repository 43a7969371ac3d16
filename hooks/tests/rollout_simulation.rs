//! The whole rollout loop against a tiny simulated cluster: the hook's answer is
//! applied as Metacontroller and the StatefulSet controller would (new template,
//! partition; pods at or above the partition restart on the new revision; a
//! switchover Job succeeds and names its TARGET; a restarted pod is Ready one sync
//! later; `currentRevision` moves once every pod is updated and Ready; a pod deleted
//! below the partition comes back on `currentRevision`), and fed back as the next
//! request.
//! The rollout must finish, never restart the pod that is the primary at that
//! moment, and change roles exactly as documented: once for a primary below the
//! top ordinal, twice for a primary at the top, never for a single server.

use hooks::{Context, Timestamp, metacontroller::SyncRequest};
use serde_json::{Value, json};

const OLD: &str = "db-old";
const NEW: &str = "db-new";

fn at(offset: i64) -> String {
    Timestamp::from_second(1_795_953_600 + offset)
        .unwrap_or_else(|e| panic!("{e}"))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

struct Sim {
    replicas: i32,
    /// Revision of each pod.
    pods: Vec<&'static str>,
    /// Whether each pod is Ready.
    ready: Vec<bool>,
    /// The StatefulSet's `status.currentRevision`.
    current: &'static str,
    /// The last answer.
    response: Value,
    /// Jobs that exist, with whether they finished.
    jobs: Vec<Value>,
    clock: i64,
}

impl Sim {
    fn request(&self) -> Value {
        let sts = self.response["children"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["kind"] == "StatefulSet")
            .cloned()
            .unwrap_or(Value::Null);
        let mut children = json!({"StatefulSet.apps/v1": {}, "Job.batch/v1": {}});
        if !sts.is_null() {
            let mut sts = sts;
            let new_template = sts["spec"]["template"]["spec"]["containers"][0]["image"] == "mysql:8.4.5";
            let rev = if new_template { NEW } else { OLD };
            sts["status"] = json!({"replicas": self.replicas, "updateRevision": rev, "currentRevision": self.current});
            // Observed objects carry their namespace, as the API server returns them.
            sts["metadata"]["namespace"] = json!("shop");
            children["StatefulSet.apps/v1"]["shop/db"] = sts;
        }
        let mut pods = serde_json::Map::new();
        for (i, (rev, ready)) in self.pods.iter().zip(&self.ready).enumerate() {
            let name = format!("db-{i}");
            let ready = if *ready { "True" } else { "False" };
            pods.insert(
                format!("shop/{name}"),
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "shop", "labels": {
                           "app.kubernetes.io/instance": "db", "app.kubernetes.io/managed-by": "mysql-hook",
                           "app.kubernetes.io/component": "database", "controller-revision-hash": rev}},
                       "spec": {"containers": [{"name": "mysqld"}]},
                       "status": {"podIP": format!("10.0.0.{i}"),
                                  "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": at(-3600)}]}}),
            );
        }
        for job in &self.jobs {
            let name = job["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            let env = job["spec"]["template"]["spec"]["containers"][0]["env"].as_array().cloned().unwrap_or_default();
            let var =
                |k: &str| env.iter().find(|e| e["name"] == k).and_then(|e| e["value"].as_str()).map(str::to_owned);
            let (target, from) = (var("TARGET").unwrap_or_default(), var("PRIMARY").unwrap_or_default());
            let mut j = job.clone();
            j["metadata"]["namespace"] = json!("shop");
            j["status"] = json!({"succeeded": 1, "completionTime": at(self.clock),
                                 "conditions": [{"type": "Complete", "status": "True"}]});
            children["Job.batch/v1"][format!("shop/{name}")] = j;
            pods.insert(
                format!("shop/{name}-x"),
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": format!("{name}-x"), "namespace": "shop", "labels": {
                           "app.kubernetes.io/instance": "db", "app.kubernetes.io/managed-by": "mysql-hook",
                           "app.kubernetes.io/component": "job", "mysqlhook.dev/purpose": "switchover",
                           "batch.kubernetes.io/job-name": name},
                           // as the Job controller sets it: results count only from the Job's own pods
                           "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                                "uid": "sim", "controller": true}]},
                       "spec": {"containers": [{"name": "switchover"}]},
                       "status": {"phase": "Succeeded", "containerStatuses": [{"name": "switchover", "ready": false,
                           "restartCount": 0, "image": "", "imageID": "", "state": {"terminated": {"exitCode": 0,
                           "finishedAt": at(self.clock),
                           "message": format!(r#"{{"result":"switched","primary":"{target}","from":"{from}"}}"#)}}}]}}),
            );
        }
        json!({
            "parent": {
                "apiVersion": "mysqlhook.dev/v1alpha1", "kind": "MySQL",
                "metadata": {"name": "db", "namespace": "shop", "uid": "6f1c2a8e-3d4b-4e5f-9a01-2b3c4d5e6f70"},
                "spec": {"replicas": self.replicas, "version": "8.4.5", "storage": {"size": "10Gi"}},
                "status": self.response["status"],
            },
            "children": children,
            "related": {"Pod.v1": pods},
        })
    }

    fn step(&mut self) -> Value {
        let req: SyncRequest = serde_json::from_value(self.request()).unwrap_or_else(|e| panic!("{e}"));
        let ctx = Context {
            now: Timestamp::from_second(1_795_953_600 + self.clock).unwrap_or_else(|e| panic!("{e}")),
            entropy: [7; 32],
            scripts_image: "mysql-hook:test".to_owned(),
            allowed_images: Vec::new(),
            placement_policy: Default::default(),
        };
        self.clock += 5;
        let out = serde_json::to_value(hooks::sync(&req, &ctx).unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"));
        // Metacontroller: emitted Jobs exist (and succeed by the next call).
        self.jobs = out["children"].as_array().into_iter().flatten().filter(|c| c["kind"] == "Job").cloned().collect();
        self.response = out.clone();
        out
    }
}

/// Runs a rollout of a cluster whose primary is `primary`; returns the role changes.
/// With `kick_last`, the last pod to be updated is deleted once while it starts on
/// the new revision, before it is Ready (a drain, or an operator kicking a slow pod).
fn roll(replicas: i32, primary: i32, kick_last: bool) -> usize {
    let n = usize::try_from(replicas).unwrap_or(0);
    let mut sim = Sim {
        replicas,
        pods: vec![OLD; n],
        ready: vec![true; n],
        current: OLD,
        response: json!({"status": {
            "primary": format!("db-{primary}"), "version": "8.4.3", "replicas": replicas, "readyReplicas": replicas,
            "conditions": [{"type": "Initialized", "status": "True", "reason": "Bootstrapped", "message": "",
                            "lastTransitionTime": at(-7200)}]},
            "children": [{"kind": "StatefulSet", "metadata": {"name": "db"}, "spec": {
                "updateStrategy": {"rollingUpdate": {"partition": replicas}},
                "template": {"spec": {"containers": [{"name": "mysqld", "image": "mysql:8.4.3"}]}}}}]}),
        jobs: Vec::new(),
        clock: 0,
    };
    let mut kicked = false;
    for round in 0..100 {
        let out = sim.step();
        let status = &out["status"];
        if std::env::var_os("SIM_DEBUG").is_some() {
            eprintln!(
                "round {round}: primary {} op {} rollout {} pods {:?} ready {:?} current {} jobs {:?}",
                status["primary"],
                status["operation"],
                status["rollout"],
                sim.pods,
                sim.ready,
                sim.current,
                sim.jobs.iter().map(|j| j["metadata"]["name"].clone()).collect::<Vec<_>>()
            );
        }
        if status["rollout"].is_null() && status["version"] == "8.4.5" {
            assert!(sim.pods.iter().all(|r| *r == NEW), "done, yet not every pod is on the new revision");
            assert_eq!(sim.current, NEW, "done before the StatefulSet controller made the revision current");
            let sts = out["children"].as_array().into_iter().flatten().find(|c| c["kind"] == "StatefulSet");
            let partition =
                sts.map_or(-1, |s| s["spec"]["updateStrategy"]["rollingUpdate"]["partition"].as_i64().unwrap_or(-1));
            assert_eq!(partition, i64::from(replicas), "an idle cluster holds every pod");
            assert!(!kick_last || kicked, "the last pod was never kicked");
            return status["roleChanges"].as_array().map_or(0, Vec::len);
        }
        let primary = status["primary"].as_str().unwrap_or_default().to_owned();
        let sts = out["children"].as_array().into_iter().flatten().find(|c| c["kind"] == "StatefulSet").cloned();
        let sts = sts.unwrap_or_else(|| panic!("round {round}: no StatefulSet"));
        let partition = sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"].as_i64().unwrap_or(-1);
        let new_template = sts["spec"]["template"]["spec"]["containers"][0]["image"] == "mysql:8.4.5";
        let update = if new_template { NEW } else { OLD };
        // The StatefulSet controller. Pods that restarted last round are Ready now;
        // released pods restart on the new revision (not Ready yet).
        sim.ready.iter_mut().for_each(|r| *r = true);
        for (i, (rev, ready)) in sim.pods.iter_mut().zip(sim.ready.iter_mut()).enumerate() {
            let i = i64::try_from(i).unwrap_or(0);
            if i >= partition && *rev != update {
                assert!(
                    replicas == 1 || primary != format!("db-{i}"),
                    "round {round}: db-{i} restarts while it is the primary"
                );
                *rev = update;
                *ready = false;
            }
        }
        // The last pod is deleted while it starts: it comes back on the update
        // revision at or above the partition, on `currentRevision` below it.
        if kick_last && !kicked && sim.pods.iter().all(|r| *r == NEW) {
            if let Some(i) = sim.ready.iter().position(|r| !r) {
                kicked = true;
                let ordinal = i64::try_from(i).unwrap_or(0);
                sim.pods[i] = if ordinal >= partition { update } else { sim.current };
                assert_eq!(
                    sim.pods[i], NEW,
                    "round {round}: db-{i}, deleted while starting, came back on the old template"
                );
            }
        }
        if sim.pods.iter().all(|r| *r == update) && sim.ready.iter().all(|r| *r) {
            sim.current = update;
        }
    }
    panic!("the rollout of {replicas} servers with primary db-{primary} did not finish in 100 syncs");
}

#[test]
fn three_servers_primary_at_zero_switch_over_once() {
    assert_eq!(roll(3, 0, false), 1);
}

#[test]
fn a_primary_in_the_middle_switches_over_once() {
    assert_eq!(roll(3, 1, false), 1);
    assert_eq!(roll(5, 2, false), 1);
}

#[test]
fn a_primary_at_the_top_switches_over_twice() {
    assert_eq!(roll(3, 2, false), 2);
}

#[test]
fn a_single_server_is_updated_in_place() {
    assert_eq!(roll(1, 0, false), 0);
}

/// Issue 34.4: the partition stays down until the controller has made the new
/// revision current, so the last pod, deleted before it is Ready, comes back on
/// the new template.
#[test]
fn the_last_pod_deleted_before_it_is_ready_comes_back_on_the_new_template() {
    for (replicas, primary) in [(3, 0), (3, 2), (1, 0)] {
        roll(replicas, primary, true);
    }
}

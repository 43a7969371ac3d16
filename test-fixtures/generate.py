#!/usr/bin/env python3
"""Writes the request.json of every scenario under test-fixtures/.

Requests are Metacontroller v2 hook bodies: {controller, parent, children, related,
finalizing}; children and related are keyed `Kind.group/version`, then
`namespace/name`, as Metacontroller v4.17 sends them. Observed children are the
hook's own answer to an earlier scenario (its response.json) dressed as the API
server returns them (uid, resourceVersion, owner reference, status), so a chain of
scenarios walks a cluster through its life.

Run `test-fixtures/regenerate.sh`, not this file alone: it alternates this script
with `UPDATE_GOLDEN=1 cargo test --test golden` until the chain is stable. Review
every changed response.json as a behaviour change.
"""
import copy
import json
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
NS = "shop"
UID = "6f1c2a8e-3d4b-4e5f-9a01-2b3c4d5e6f70"
NOW = "2026-11-29T12:00:00Z"
KEYS = {
    "StatefulSet": "StatefulSet.apps/v1",
    "Service": "Service.v1",
    "ConfigMap": "ConfigMap.v1",
    "Secret": "Secret.v1",
    "PodDisruptionBudget": "PodDisruptionBudget.policy/v1",
    "EndpointSlice": "EndpointSlice.discovery.k8s.io/v1",
    "Job": "Job.batch/v1",
}

CONTROLLER = {
    "apiVersion": "metacontroller.k8s.io/v1alpha1",
    "kind": "CompositeController",
    "metadata": {"name": "mysql-hook", "uid": "0b5e4b6c-1111-4222-8333-944455566677"},
    "spec": {
        "generateSelector": True,
        "parentResource": {"apiVersion": "mysqlhook.dev/v1alpha1", "resource": "mysqls"},
        "childResources": [
            {"apiVersion": "apps/v1", "resource": "statefulsets", "updateStrategy": {"method": "InPlace"}},
            {"apiVersion": "v1", "resource": "services", "updateStrategy": {"method": "InPlace"}},
            {"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}},
            {"apiVersion": "v1", "resource": "secrets"},
            {"apiVersion": "policy/v1", "resource": "poddisruptionbudgets", "updateStrategy": {"method": "InPlace"}},
            {"apiVersion": "discovery.k8s.io/v1", "resource": "endpointslices", "updateStrategy": {"method": "InPlace"}},
            {"apiVersion": "batch/v1", "resource": "jobs"},
        ],
        "hooks": {
            "sync": {"version": "v2", "webhook": {"url": "http://mysql-hook.mysql-hook/sync"}},
            "finalize": {"version": "v2", "webhook": {"url": "http://mysql-hook.mysql-hook/finalize"}},
            "customize": {"version": "v2", "webhook": {"url": "http://mysql-hook.mysql-hook/customize"}},
        },
        "resyncPeriodSeconds": 60,
    },
}


def parent(name="db", replicas=3, status=None, **spec):
    s = {
        "replicas": replicas,
        "version": "8.4.3",
        "flavor": "mysql",
        "storage": {"size": "10Gi"},
        "deletionPolicy": "Retain",
        "failover": {"enabled": True, "gracePeriodSeconds": 10},
    }
    s.update(spec)
    p = {
        "apiVersion": "mysqlhook.dev/v1alpha1",
        "kind": "MySQL",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": UID,
            "generation": 1,
            "resourceVersion": "41000",
            "creationTimestamp": "2026-11-29T11:00:00Z",
            "finalizers": ["metacontroller.io/compositecontroller-mysql-hook"],
        },
        "spec": s,
    }
    if status is not None:
        p["status"] = status
    return p


def response_of(hook, scenario):
    path = os.path.join(ROOT, hook, scenario, "response.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def observed(children, job_states=None):
    """The hook's desired children as the API server would return them."""
    out = {k: {} for k in KEYS.values()}
    for i, c in enumerate(children or []):
        o = copy.deepcopy(c)
        m = o["metadata"]
        m.update({
            "namespace": NS,
            "uid": "00000000-0000-4000-8000-%012d" % (i + 1),
            "resourceVersion": str(42000 + i),
            "creationTimestamp": "2026-11-29T11:00:05Z",
            "ownerReferences": [{
                "apiVersion": "mysqlhook.dev/v1alpha1", "kind": "MySQL", "name": "db", "uid": UID,
                "controller": True, "blockOwnerDeletion": True,
            }],
        })
        m.setdefault("labels", {})["controller-uid"] = UID
        if o["kind"] == "StatefulSet":
            r = o["spec"]["replicas"]
            o["status"] = {"replicas": r, "readyReplicas": r, "currentReplicas": r, "updatedReplicas": r,
                           "currentRevision": m["name"] + "-7d9c8b6f5", "updateRevision": m["name"] + "-7d9c8b6f5",
                           "observedGeneration": 1, "availableReplicas": r}
        if o["kind"] == "Job":
            state = (job_states or {}).get(m["name"], "running")
            o["status"] = {"active": 1, "startTime": "2026-11-29T11:58:00Z"} if state == "running" else (
                {"succeeded": 1, "startTime": "2026-11-29T11:58:00Z", "completionTime": "2026-11-29T11:58:20Z",
                 "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": "2026-11-29T11:58:20Z"}]}
                if state == "succeeded" else
                {"failed": 4, "startTime": "2026-11-29T11:50:00Z",
                 "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                                 "lastTransitionTime": "2026-11-29T11:58:20Z"}]})
        out[KEYS[o["kind"]]][f"{NS}/{m['name']}"] = o
    return out


def server_pod(name, ordinal, ready, since="2026-11-29T11:59:00Z", cluster="db"):
    labels = {
        "app.kubernetes.io/name": "mysql", "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/managed-by": "mysql-hook", "app.kubernetes.io/component": "database",
        "statefulset.kubernetes.io/pod-name": name, "apps.kubernetes.io/pod-index": str(ordinal),
        "controller-revision-hash": f"{cluster}-7d9c8b6f5",
    }
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": f"10000000-0000-4000-8000-{ordinal:012d}",
                     "resourceVersion": str(43000 + ordinal), "labels": labels,
                     "creationTimestamp": "2026-11-29T11:00:10Z",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": cluster,
                                          "uid": "00000000-0000-4000-8000-000000000009", "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": {"containers": [{"name": "mysqld", "image": "mysql:8.4.3"}], "nodeName": f"node-{ordinal}"},
        "status": {
            "phase": "Running",
            "podIP": f"10.244.{ordinal}.7",
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-29T11:00:30Z"},
                {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": since},
                {"type": "ContainersReady", "status": "True" if ready else "False", "lastTransitionTime": since},
            ],
        },
    }


def job_pod(job, purpose, result=None, exit_code=0):
    labels = {"app.kubernetes.io/name": "mysql", "app.kubernetes.io/instance": "db",
              "app.kubernetes.io/managed-by": "mysql-hook", "app.kubernetes.io/component": "job",
              "mysqlhook.dev/purpose": purpose, "batch.kubernetes.io/job-name": job, "job-name": job}
    state = ({"terminated": {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error",
                             "message": result, "startedAt": "2026-11-29T11:58:01Z",
                             "finishedAt": "2026-11-29T11:58:19Z"}}
             if result is not None else {"running": {"startedAt": "2026-11-29T11:58:01Z"}})
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{job}-x7k2p", "namespace": NS, "uid": "20000000-0000-4000-8000-000000000001",
                     "resourceVersion": "44000", "labels": labels, "creationTimestamp": "2026-11-29T11:58:00Z"},
        "spec": {"containers": [{"name": purpose, "image": "mysql:8.4.3"}], "restartPolicy": "Never"},
        "status": {"phase": "Succeeded" if result and exit_code == 0 else "Running",
                   "containerStatuses": [{"name": purpose, "ready": False, "restartCount": 0, "image": "mysql:8.4.3",
                                          "imageID": "", "state": state}]},
    }


def related(*pods):
    return {"Pod.v1": {f"{NS}/{p['metadata']['name']}": p for p in pods}}


def request(parent_obj, children=None, rel=None, finalizing=False):
    return {"controller": CONTROLLER, "parent": parent_obj, "children": children or observed([]),
            "related": rel or related(), "finalizing": finalizing}


def pods(ready, cluster="db"):
    return [server_pod(f"{cluster}-{i}", i, r, cluster=cluster) for i, r in enumerate(ready)]


def write(hook, scenario, body, raw=None):
    d = os.path.join(ROOT, hook, scenario)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "request.json"), "w") as f:
        if raw is not None:
            f.write(raw)
        else:
            json.dump(body, f, indent=2, sort_keys=False)
            f.write("\n")


def main():
    new = response_of("sync", "new-cluster")
    primary_ready = response_of("sync", "primary-ready")
    succeeded = response_of("sync", "bootstrap-succeeded")
    running = response_of("sync", "running")

    write("sync", "new-cluster", request(parent()))
    write("sync", "long-name", request(parent(name="orders-" + "x" * 70 + "-eu-west-1-primary-cluster")))
    write("sync", "mariadb-new-cluster", request(parent(flavor="mariadb", version="11.4.4")))
    write("sync", "own-credentials", request(parent(credentialsSecretName="db-root-credentials")))
    if new is None:
        return
    status = new["status"]
    write("sync", "pods-starting", request(parent(status=status), observed(new["children"]),
                                             related(*pods([False, False, False]))))
    write("sync", "primary-ready", request(parent(status=status), observed(new["children"]),
                                             related(*pods([True, False, False]))))
    if primary_ready is None:
        return
    job = next(c["metadata"]["name"] for c in primary_ready["children"] if c["kind"] == "Job")
    write("sync", "bootstrap-running", request(
        parent(status=primary_ready["status"]), observed(primary_ready["children"]),
        related(*pods([True, True, False]), job_pod(job, "bootstrap"))))
    result = '{"result":"bootstrapped","primary":"db-0","semiSync":true}'
    write("sync", "bootstrap-succeeded", request(
        parent(status=primary_ready["status"]), observed(primary_ready["children"], {job: "succeeded"}),
        related(*pods([True, True, True]), job_pod(job, "bootstrap", result))))
    write("sync", "bootstrap-failed", request(
        parent(status=primary_ready["status"]), observed(primary_ready["children"], {job: "failed"}),
        related(*pods([True, True, True]), job_pod(job, "bootstrap", '{"result":"error","reason":"unreachable","message":"db-0 refused connections"}', 1))))
    if succeeded is None:
        return
    write("sync", "running", request(parent(status=succeeded["status"]),
                                       observed(succeeded["children"], {job: "succeeded"}),
                                       related(*pods([True, True, True]))))
    if running is None:
        return
    live = observed(running["children"])
    st = running["status"]
    write("sync", "replica-not-ready", request(parent(status=st), live, related(*pods([True, True, False]))))
    write("sync", "scale-up", request(parent(replicas=5, status=st), live, related(*pods([True, True, True]))))
    write("sync", "scale-down", request(parent(replicas=2, status=st), live, related(*pods([True, True, True]))))
    write("sync", "scale-down-blocked", request(parent(replicas=2, status=dict(st, primary="db-2")), live,
                                                  related(*pods([True, True, True]))))
    write("sync", "custom-config", request(
        parent(status=st, config={"max_connections": "500", "innodb_buffer_pool_size": "1073741824"}), live,
        related(*pods([True, True, True]))))
    write("sync", "config-refused", request(parent(status=st, config={"gtid_mode": "OFF", "max_connections": "500"}),
                                              live, related(*pods([True, True, True]))))
    write("sync", "storage-change", request(parent(status=st, storage={"size": "20Gi"}), live,
                                              related(*pods([True, True, True]))))
    write("sync", "resources-canonical", request(parent(status=st, resources={
        "requests": {"cpu": "0.5", "memory": "1.5Gi"}, "limits": {"memory": "2048Mi"}}), live,
        related(*pods([True, True, True]))))
    write("sync", "single-server", request(parent(replicas=1)))

    # Refused requests: nothing may be deleted, so none of these may answer 200.
    bad = request(parent(status=st), copy.deepcopy(live))
    del bad["parent"]["metadata"]["uid"]
    write("sync", "invalid-missing-uid", bad)
    bad = request(parent(status=st), copy.deepcopy(live))
    bad["parent"]["spec"]["replicas"] = "three"
    write("sync", "invalid-wrong-type", bad)
    write("sync", "invalid-malformed-json", None, raw='{"parent": {"metadata": ')
    bad = request(parent(status=st), copy.deepcopy(live))
    bad["children"]["StatefulSet.apps/v1"]["shop/db"]["spec"]["replicas"] = "many"
    write("sync", "invalid-observed-child", bad)

    # Finalize.
    def deleting(**spec):
        p = parent(status=st, **spec)
        p["metadata"]["deletionTimestamp"] = "2026-11-29T11:59:50Z"
        return p
    write("finalize", "retain-waiting", request(deleting(), live, related(*pods([True, True, True])), True))
    write("finalize", "retain-done", request(deleting(), observed([]), related(), True))
    write("finalize", "delete-updates-retention-first", request(deleting(deletionPolicy="Delete"), live,
                                                                related(*pods([True, True, True])), True))
    delete_live = observed([c for c in running["children"]])
    delete_live["StatefulSet.apps/v1"]["shop/db"]["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] = "Delete"
    write("finalize", "delete-waiting", request(deleting(deletionPolicy="Delete"), delete_live,
                                                related(*pods([False, False, False])), True))
    write("finalize", "backup-policy-kept", request(deleting(deletionPolicy="Backup"), live,
                                                    related(*pods([True, True, True])), True))

    reliability_scenarios(st, live)

    # Customize.
    write("customize", "cluster", {"controller": CONTROLLER, "parent": parent()})
    write("customize", "long-name", {"controller": CONTROLLER,
                                     "parent": parent(name="orders-" + "x" * 70 + "-eu-west-1-primary-cluster")})


def reliability_scenarios(st, live):
    """Regression inputs found by the mutation property test (tests/properties.rs):
    requests Metacontroller never sends, which must be refused, not obeyed, because
    obeying would delete the observed StatefulSet, Secret and ConfigMap."""
    # The parent's name differs from its children's (names are immutable).
    write("sync", "fuzz-renamed-parent", request(parent(name="db-0", status=st), copy.deepcopy(live),
                                                   related(*pods([True, True, True]))))
    # An observed credentials Secret without a name: invisible to the hook, which
    # would have dropped it and derived fresh passwords.
    nameless = request(parent(status=st), copy.deepcopy(live), related(*pods([True, True, True])))
    del nameless["children"]["Secret.v1"]["shop/db-credentials"]["metadata"]["name"]
    write("sync", "fuzz-nameless-secret", nameless)
    # Found by fuzz target hook_body: invalid UTF-8 inside an unknown key, which
    # serde_json skips without checking. JSON is UTF-8: refused as malformed.
    body = json.dumps(request(parent(status=st), copy.deepcopy(live), related(*pods([True, True, True]))),
                      indent=2).encode()
    body = body.replace(b'"defaultMode"', b'"def\xfdaultMode"', 1)
    d = os.path.join(ROOT, "sync", "fuzz-invalid-utf8")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "request.json"), "wb") as f:
        f.write(body + b"\n")


if __name__ == "__main__":
    sys.exit(main())

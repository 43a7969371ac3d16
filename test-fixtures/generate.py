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
import base64
import copy
import hashlib
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
    "CronJob": "CronJob.batch/v1",
    "NetworkPolicy": "NetworkPolicy.networking.k8s.io/v1",
    "ServiceAccount": "ServiceAccount.v1",
    "Role": "Role.rbac.authorization.k8s.io/v1",
    "RoleBinding": "RoleBinding.rbac.authorization.k8s.io/v1",
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
            {"apiVersion": "batch/v1", "resource": "cronjobs", "updateStrategy": {"method": "InPlace"}},
            {"apiVersion": "networking.k8s.io/v1", "resource": "networkpolicies", "updateStrategy": {"method": "InPlace"}},
            {"apiVersion": "v1", "resource": "serviceaccounts", "updateStrategy": {"method": "InPlace"}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "resource": "roles", "updateStrategy": {"method": "InPlace"}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "resource": "rolebindings",
             "updateStrategy": {"method": "InPlace"}},
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


def job_uid(name):
    """A Job's uid, derived from its name, so that its pods can name it as their owner."""
    return "21000000-0000-4000-8000-" + hashlib.sha256(name.encode()).hexdigest()[:12]


def job_owner(name):
    """The controller owner reference the Job controller sets on a Job's pods."""
    return [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": job_uid(name),
             "controller": True, "blockOwnerDeletion": True}]


def stable_digits(text, n):
    """n decimal digits derived from text."""
    import hashlib
    return str(int(hashlib.sha256(text.encode()).hexdigest(), 16))[:n].rjust(n, "0")


def observed(children, job_states=None):
    """The hook's desired children as the API server would return them."""
    out = {k: {} for k in KEYS.values()}
    for i, c in enumerate(children or []):
        o = copy.deepcopy(c)
        m = o["metadata"]
        m.update({
            "namespace": NS,
            # Stable per object (kind and name), as the API server keeps them: the hook
            # may derive names from them (the users Job hashes its Secrets' identity).
            "uid": "00000000-0000-4000-8000-" + stable_digits(o["kind"] + "/" + m["name"], 12),
            "resourceVersion": str(42000 + int(stable_digits(o["kind"] + "/" + m["name"], 4))),
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
            m["uid"] = job_uid(m["name"])
            # A bootstrap or users Job still in an answer is, unless said otherwise, the
            # record a running cluster keeps (of its first primary, of its users): finished.
            default = ("succeeded" if m["labels"].get("mysqlhook.dev/purpose") in ("bootstrap", "users")
                       else "running")
            state = (job_states or {}).get(m["name"], default)
            o["status"] = {"active": 1, "startTime": "2026-11-29T11:58:00Z"} if state == "running" else (
                {"succeeded": 1, "startTime": "2026-11-29T11:58:00Z", "completionTime": "2026-11-29T11:58:20Z",
                 "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": "2026-11-29T11:58:20Z"}]}
                if state == "succeeded" else
                {"failed": 4, "startTime": "2026-11-29T11:50:00Z",
                 "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                                 "lastTransitionTime": "2026-11-29T11:58:20Z"}]})
        out[KEYS[o["kind"]]][f"{NS}/{m['name']}"] = o
    return out


def server_pod(name, ordinal, ready, since="2026-11-29T11:59:00Z", cluster="db", mysqld="running", agent=None):
    """A StatefulSet pod; `mysqld` is the server container's state: running,
    starting (running, its startup probe not passed yet), or waiting (crash loop,
    image pull), or None for no container status yet;
    `agent` the agent container's readiness (its /candidate probe), None for no
    status of it."""
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
            **({"containerStatuses": [{
                "name": "mysqld", "ready": ready, "restartCount": 0, "image": "mysql:8.4.3", "imageID": "",
                "started": mysqld == "running",
                "state": ({"running": {"startedAt": "2026-11-29T11:00:31Z"}} if mysqld in ("running", "starting")
                          else {"waiting": {"reason": "CrashLoopBackOff"}}),
            }] + ([{
                "name": "agent", "ready": agent, "restartCount": 0, "image": "mysql:8.4.3", "imageID": "",
                "started": True, "state": {"running": {"startedAt": "2026-11-29T11:00:31Z"}},
            }] if agent is not None else [])} if mysqld else {}),
        },
    }


def died_at(pod, finished):
    """The pod with its server container restarted once: its last run ended
    (killed, crashed) at `finished`."""
    pod = copy.deepcopy(pod)
    c = pod["status"]["containerStatuses"][0]
    c["restartCount"] = 1
    c["lastState"] = {"terminated": {"exitCode": 137, "reason": "Error", "startedAt": "2026-11-29T11:00:31Z",
                                     "finishedAt": finished}}
    return pod


def unschedulable(pod):
    """The pod as the scheduler leaves it when no node has room: Pending, no IP,
    no container status, PodScheduled False (Unschedulable)."""
    pod = copy.deepcopy(pod)
    pod["spec"].pop("nodeName", None)
    pod["status"] = {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "lastTransitionTime": "2026-11-29T11:00:11Z",
        "message": "0/3 nodes are available: 3 Too many pods. preemption: 0/3 nodes are available: "
                   "3 No preemption victims found for incoming pod."}]}
    return pod


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
                     "resourceVersion": "44000", "labels": labels, "creationTimestamp": "2026-11-29T11:58:00Z",
                     "ownerReferences": job_owner(job)},
        "spec": {"containers": [{"name": purpose, "image": "mysql:8.4.3"}], "restartPolicy": "Never"},
        "status": {"phase": "Running" if result is None else "Succeeded" if exit_code == 0 else "Failed",
                   "containerStatuses": [{"name": purpose, "ready": False, "restartCount": 0, "image": "mysql:8.4.3",
                                          "imageID": "", "state": state}]},
    }


def related(*pods):
    return {"Pod.v1": {f"{NS}/{p['metadata']['name']}": p for p in pods}}


# The S3 credentials Secret of the fixtures, opted in by its owner (label); the
# customize hook asks Metacontroller for such Secrets only (hooks/src/access.rs).
S3_SECRET = {
    "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
    "metadata": {"name": "backup-s3", "namespace": NS, "uid": "30000000-0000-4000-8000-000000000001",
                 "resourceVersion": "39000", "creationTimestamp": "2026-11-01T09:00:00Z",
                 "labels": {"mysqlhook.dev/backup-credentials": "true"},
                 # issue 30.3: where its owner lets the credentials be used
                 "annotations": {"mysqlhook.dev/allowed-endpoints": "https://minio.storage.svc:9000"}},
    "data": {"AWS_ACCESS_KEY_ID": "QUtJQUVYQU1QTEVGSVhUVVJF", "AWS_SECRET_ACCESS_KEY": "bm90LWEtcmVhbC1zZWNyZXQta2V5"},
}


SIGNING_SECRET = {
    "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
    "metadata": {"name": "backup-signing", "namespace": NS, "uid": "30000000-0000-4000-8000-000000000002",
                 "resourceVersion": "39001", "creationTimestamp": "2026-11-01T09:00:00Z",
                 "labels": {"mysqlhook.dev/backup-credentials": "true"}},
    "data": {"signing-key": "bm90LWEtcmVhbC1zaWduaW5nLWtleS0wMTIzNDU2Nzg5YWJjZGVm"},
}


def with_signing_key(rel):
    rel = copy.deepcopy(rel)
    rel.setdefault("Secret.v1", {})[f"{NS}/backup-signing"] = copy.deepcopy(SIGNING_SECRET)
    return rel


def with_s3_secret(rel):
    rel = copy.deepcopy(rel)
    rel["Secret.v1"] = {f"{NS}/backup-s3": copy.deepcopy(S3_SECRET)}
    return rel


# Issue 19.5: a ServiceAccount whose workload identity (EKS IRSA here) holds the S3
# credentials, opted in by its owner.
S3_ACCOUNT = {
    "apiVersion": "v1", "kind": "ServiceAccount",
    "metadata": {"name": "backup-irsa", "namespace": NS, "uid": "30000000-0000-4000-8000-000000000002",
                 "resourceVersion": "39001", "creationTimestamp": "2026-11-01T09:00:00Z",
                 "labels": {"mysqlhook.dev/backup-credentials": "true"},
                 "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/db-backups",
                                 "mysqlhook.dev/allowed-endpoints": "https://minio.storage.svc:9000"}},
}


def with_s3_account(rel, account=None):
    rel = copy.deepcopy(rel)
    rel["ServiceAccount.v1"] = {f"{NS}/backup-irsa": copy.deepcopy(account or S3_ACCOUNT)}
    return rel


def s3_by_account(backup):
    b = copy.deepcopy(backup)
    del b["storage"]["s3"]["credentialsSecret"]
    b["storage"]["s3"]["serviceAccountName"] = "backup-irsa"
    return b


def request(parent_obj, children=None, rel=None, finalizing=False):
    return {"controller": CONTROLLER, "parent": parent_obj, "children": children or observed([]),
            "related": rel or related(), "finalizing": finalizing}


def pods(ready, cluster="db"):
    return [server_pod(f"{cluster}-{i}", i, r, cluster=cluster) for i, r in enumerate(ready)]


# Issue 30.5: the fixtures' backup store, a volume claim its owner opted in (label);
# the customize hooks ask Metacontroller for such claims whenever a store may be a
# claim, so every request that names one carries it (write() adds it).
STORE_CLAIM = {
    "apiVersion": "v1", "kind": "PersistentVolumeClaim",
    "metadata": {"name": "mysql-backups", "namespace": NS, "uid": "30000000-0000-4000-8000-000000000003",
                 "resourceVersion": "39002", "creationTimestamp": "2026-11-01T09:00:00Z",
                 "labels": {"mysqlhook.dev/backup-store": "true"}},
    "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "100Gi"}}},
    "status": {"phase": "Bound"},
}
NO_STORE_CLAIM = "no-store-claim"


def with_store_claim(body):
    """The labelled store claim in a request whose parent names a claim store (or
    restores from a MySQLBackup, whose store may be one), unless it says
    NO_STORE_CLAIM."""
    if not isinstance(body.get("related"), dict):
        return body
    # a copy: callers share their related objects between requests
    body = dict(body, related=copy.deepcopy(body["related"]))
    rel = body["related"]
    if rel.pop(NO_STORE_CLAIM, False):
        return body
    spec = json.dumps(body.get("parent", {}).get("spec", {}))
    if '"persistentVolumeClaim"' in spec or '"backup":' in spec or body.get("parent", {}).get("kind") == "MySQLBackup":
        rel.setdefault("PersistentVolumeClaim.v1", {}).setdefault(f"{NS}/mysql-backups", copy.deepcopy(STORE_CLAIM))
    return body


def write(hook, scenario, body, raw=None):
    d = os.path.join(ROOT, hook, scenario)
    os.makedirs(d, exist_ok=True)
    if raw is None:
        body = with_store_claim(body)
    with open(os.path.join(d, "request.json"), "w") as f:
        if raw is not None:
            f.write(raw)
        else:
            json.dump(body, f, indent=2, sort_keys=False)
            f.write("\n")


def older_crd(hook, scenario, expect):
    """Marks a scenario whose parent today's CRD refuses (it was stored under an
    older one): the conformance test checks the API server refuses it with `expect`."""
    with open(os.path.join(ROOT, hook, scenario, "older-crd.txt"), "w") as f:
        f.write(expect + "\n")


def job_named(response, purpose):
    """The name of the Job with this purpose in a hook answer."""
    return next(c["metadata"]["name"] for c in response["children"]
                if c["kind"] == "Job" and c["metadata"]["labels"].get("mysqlhook.dev/purpose") == purpose)


def kept_done(children):
    """Job states for the finished Jobs a running cluster keeps as records (its
    bootstrap Job, the role change that promoted its primary): succeeded."""
    return {c["metadata"]["name"]: "succeeded" for c in children
            if c["kind"] == "Job" and c["metadata"]["labels"].get("mysqlhook.dev/purpose") == "bootstrap"}


def annotated(p, **annotations):
    p["metadata"]["annotations"] = annotations
    return p


# ---------------------------------------------------------------- replicas (issue 15)

GTID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def finished_at(pod, at):
    pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = at
    return pod


def replica_scenarios(running, st):
    live = observed(running["children"], kept_done(running["children"]))
    all_ready = related(*pods([True, True, True]))
    # spec.replication reaches the config ConfigMap (maxLagSeconds, rebuildErrant:
    # no pod template change) and the option file (binary-log expiry).
    write("sync", "replication-settings", request(parent(status=st, replication={
        "maxLagSeconds": 30, "rebuildErrant": True, "binlogExpireSeconds": 86400}), live, all_ready))
    # Expiry set twice (the field and spec.config): refused, the running option file kept.
    write("sync", "binlog-expiry-twice", request(parent(status=st, replication={"binlogExpireSeconds": 86400},
                                                        config={"binlog-expire-logs-seconds": "3600"}), live, all_ready))
    # status.servers from the inspect Job's report: db-2 lags 12 s (within 60 s: Ready).
    inspect = job_named(running, "inspect")
    report = {"result": "inspected", "primary": "db-0", "servers": [
        {"name": "db-0", "up": True, "writable": True, "gtid": f"{GTID}:1-1042", "semiSync": True,
         "semiSyncClients": 2},
        {"name": "db-1", "up": True, "writable": False, "source": "db-0", "io": "Yes", "sql": "Yes", "lag": 0,
         "gtid": f"{GTID}:1-1042"},
        {"name": "db-2", "up": True, "writable": False, "source": "db-0", "io": "Yes", "sql": "Yes", "lag": 12,
         "gtid": f"{GTID}:1-1013"}]}
    line = lambda r: json.dumps(r, separators=(",", ":"))
    done = {**kept_done(running["children"]), inspect: "succeeded"}
    inspected_pod = job_pod(inspect, "inspect", line(report))
    write("sync", "servers-inspected", request(parent(status=st), observed(running["children"], done),
                                               related(*pods([True, True, True]), inspected_pod)))
    # db-2's applier stops on an error and it turns not Ready: a new inspection
    # (another signature), the last one kept, and shown, until it has finished.
    write("sync", "servers-replica-stopped", request(parent(status=st), observed(running["children"], done),
                                                     related(*pods([True, True, False]), inspected_pod)))
    # Issue 31.1: the inspection of the current primary finds db-1 writable too (an
    # old primary cut off while db-0 was promoted); its agent fails its readiness.
    # Degraded with reason SecondWritableServer, status.servers[].writable shown.
    second = {**report, "servers": [report["servers"][0],
                                    {"name": "db-1", "up": True, "writable": True, "gtid": f"{GTID}:1-1040"},
                                    report["servers"][2]]}
    write("sync", "servers-second-writer", request(parent(status=st), observed(running["children"], done),
                                                   related(*pods([True, False, True]),
                                                           job_pod(inspect, "inspect", line(second)))))
    # The same report from an inspection run for another primary (before a role
    # change): not a second writer of this one.
    write("sync", "servers-second-writer-other-primary", request(
        parent(status=st), observed(running["children"], done),
        related(*pods([True, False, True]), job_pod(inspect, "inspect", line({**second, "primary": "db-2"})))))
    known_position_scenarios(inspect, done, report, line)
    stopped = response_of("sync", "servers-replica-stopped")
    if stopped is None:
        return
    newer = next(c["metadata"]["name"] for c in stopped["children"] if c["kind"] == "Job"
                 and c["metadata"]["labels"].get("mysqlhook.dev/purpose") == "inspect"
                 and c["metadata"]["name"] != inspect)
    report["servers"][2] = {"name": "db-2", "up": True, "writable": False, "source": "db-0", "io": "Yes",
                            "sql": "No", "error": "Could not execute Write_rows_v1 event on table app.t; "
                            "Duplicate entry '2' for key 'PRIMARY', Error_code: 1062", "gtid": f"{GTID}:1-1020",
                            "errant": "8c1f5a2e-5d3b-11ef-9f00-0242ac120004:1"}
    write("sync", "servers-replica-stopped-inspected", request(
        parent(status=stopped["status"]), observed(stopped["children"], {**done, newer: "succeeded"}),
        related(*pods([True, True, False]), inspected_pod,
                finished_at(job_pod(newer, "inspect", line(report)), "2026-11-29T11:59:40Z"))))


def known_position_scenarios(inspect, done, report, line):
    """Issue 31.3: what the primary is known to have executed reaches the failover
    Job (PRIMARY_GTID), so an old primary back from an older volume is not promoted
    under the quorum exception. servers-inspected's answer remembers db-0's
    position on its config ConfigMap; then db-0 fails, the inspection run for the
    new readiness finds it down (no position), and the failover past the grace
    period still gets the remembered one."""
    inspected = response_of("sync", "servers-inspected")
    if inspected is None:
        return
    down = [server_pod("db-0", 0, False, "2026-11-29T11:59:55Z")] + [server_pod(f"db-{i}", i, True) for i in (1, 2)]
    old_pod = job_pod(inspect, "inspect", line(report))
    write("sync", "failover-known-position-in-grace", request(
        parent(status=inspected["status"]), observed(inspected["children"], done), related(*down, old_pod)))
    in_grace = response_of("sync", "failover-known-position-in-grace")
    if in_grace is None:
        return
    newer = next(c["metadata"]["name"] for c in in_grace["children"] if c["kind"] == "Job"
                 and c["metadata"]["labels"].get("mysqlhook.dev/purpose") == "inspect"
                 and c["metadata"]["name"] != inspect)
    gone = {**report, "servers": [{"name": "db-0", "up": False}] + report["servers"][1:]}
    past = in_grace["status"]
    down[0] = server_pod("db-0", 0, False, "2026-11-29T11:59:00Z")
    write("sync", "failover-known-position", request(
        parent(status=past), observed(in_grace["children"], {**done, newer: "succeeded"}),
        related(*down, old_pod, finished_at(job_pod(newer, "inspect", line(gone)), "2026-11-29T11:59:50Z"))))


def failover_scenarios(running, st, live):
    """Automatic failover and requested switchover, walked from the running cluster.

    Each later state observes the hook's answer to the earlier one: the Job it
    emitted (running, succeeded or failed) and the status it recorded.
    """
    down = "2026-11-29T11:59:00Z"     # past the 10 s grace at NOW
    recent = "2026-11-29T11:59:55Z"   # 5 s ago: within grace
    healthy = pods([True, True, True])

    def with_primary_down(since=down, replicas_ready=(True, True), mysqld="running"):
        return [server_pod("db-0", 0, False, since, mysqld=mysqld)] + [
            server_pod(f"db-{i}", i, r) for i, r in enumerate(replicas_ready, start=1)]

    write("sync", "failover-primary-not-ready-in-grace", request(parent(status=st), live,
                                                                 related(*with_primary_down(recent))))
    # Issue 35.1: its server died 1 s before the pod turned NotReady (killed,
    # crashed): it comes back read-only and cannot recover by itself, so the
    # failover starts without waiting out the grace period. A death well before
    # this outage (55 s, after the bootstrap made it the primary at 11:58:20: it
    # restarted, was reopened and served again) is not this outage's cause.
    died = with_primary_down(recent)
    write("sync", "failover-primary-died", request(parent(status=st), live,
                                                   related(died_at(died[0], "2026-11-29T11:59:54Z"), *died[1:])))
    write("sync", "failover-primary-died-long-before", request(
        parent(status=st), live, related(died_at(died[0], "2026-11-29T11:59:00Z"), *died[1:])))
    write("sync", "failover-primary-missing", request(parent(status=st), live, related(*healthy[1:])))
    missing = response_of("sync", "failover-primary-missing")
    if missing is not None:
        earlier = copy.deepcopy(missing["status"])
        earlier["failover"]["primaryNotReadySince"] = "2026-11-29T11:59:45Z"
        write("sync", "failover-primary-missing-past-grace", request(parent(status=earlier), live,
                                                                     related(*healthy[1:])))
    # Issue 31.2: what a missing primary really looks like: every replica NotReady
    # (its receiver lost the source), their servers running and their agents
    # answering /candidate. The failover starts; the Job examines them.
    if missing is not None:
        lost = [server_pod(f"db-{i}", i, False, down, agent=True) for i in (1, 2)]
        write("sync", "failover-primary-missing-replicas-candidates", request(parent(status=earlier), live,
                                                                              related(*lost)))
        # Their agents say no (a partial seed, errant transactions): nobody to promote.
        refused = [server_pod(f"db-{i}", i, False, down, agent=False) for i in (1, 2)]
        write("sync", "failover-primary-missing-no-candidate", request(parent(status=earlier), live,
                                                                       related(*refused)))
    # The primary's server is down too (crash loop): nobody to promote.
    write("sync", "failover-no-replica-ready", request(parent(status=st), live,
                                                       related(*with_primary_down(replicas_ready=(False, False),
                                                                                  mysqld="waiting"))))
    write("sync", "failover-disabled", request(
        parent(status=st, failover={"enabled": False, "gracePeriodSeconds": 10}), live,
        related(*with_primary_down())))
    write("sync", "failover-past-grace", request(parent(status=st), live, related(*with_primary_down())))
    # Issue 31.8: a scale-up to 4 onto nodes with no room; db-3 was never scheduled
    # and its claim is bound to no volume: it never held data, so it cannot have
    # acknowledged a commit. The primary dies: the failover starts, examining 2 of
    # the 3 replicas (QUORUM 2; before, it waited for db-3 for ever: NoQuorum).
    grown = with_primary_down() + [unschedulable(server_pod("db-3", 3, False))]
    unbound = claim(3)
    unbound["status"] = {"phase": "Pending"}
    unbound["spec"].pop("volumeName")
    write("sync", "failover-never-scheduled-member", request(
        parent(replicas=4, status=st), live, with_claims(related(*grown), *[claim(i) for i in range(3)], unbound)))
    # The same pod with a bound claim (rescheduled with its data): it counts; the
    # Job must examine all 3 replicas (QUORUM 3) and refuses (no-quorum) without it.
    write("sync", "failover-unscheduled-member-with-data", request(
        parent(replicas=4, status=st), live, with_claims(related(*grown), *[claim(i) for i in range(4)])))
    # The same, but the bootstrap Job completed 5 s ago: the first primary has not
    # been Ready since before it was the primary, and that is no outage. The grace
    # period starts at the bootstrap: no failover yet.
    fresh = copy.deepcopy(live)
    for job in fresh["Job.batch/v1"].values():
        if job["metadata"]["labels"].get("mysqlhook.dev/purpose") == "bootstrap":
            job["status"]["completionTime"] = recent
            job["status"]["conditions"][0]["lastTransitionTime"] = recent
    write("sync", "failover-grace-starts-at-bootstrap", request(parent(status=st), fresh,
                                                                related(*with_primary_down())))
    # Its server died 3 s before the bootstrap made it the primary (a restart while
    # the cluster was created): that death is no outage of the primary; the grace
    # period runs from the bootstrap as above.
    before_role = with_primary_down()
    write("sync", "failover-primary-died-before-its-role", request(
        parent(status=st), fresh, related(died_at(before_role[0], "2026-11-29T11:59:52Z"), *before_role[1:])))

    started = response_of("sync", "failover-past-grace")
    if started is None:
        return
    job = job_named(started, "failover")
    s1 = started["status"]
    write("sync", "failover-running", request(parent(status=s1), observed(started["children"]),
                                              related(*with_primary_down(), job_pod(job, "failover"))))
    # A parent from before the status write that recorded this attempt (Metacontroller
    # can send one) while the attempt has already finished: its Job, or only the Job's
    # pod, exists. No second attempt may start; the finished Job is dropped (a running
    # one is kept: hooks/tests/roles_properties.rs checks that).
    done = '{"result":"promoted","from":"db-0","fenced":false,"unreachable":["db-0"],"primary":"db-1","semiSync":true,"replicas":["db-2"],"rebuildNeeded":[],"gtid":"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-1042"}'
    write("sync", "failover-stale-status", request(
        parent(status=st), observed(started["children"], {job: "succeeded"}),
        related(*with_primary_down(), job_pod(job, "failover", done))))
    write("sync", "failover-stale-status-pod-only", request(
        parent(status=st), observed([c for c in started["children"] if c["kind"] != "Job"]),
        related(*with_primary_down(), job_pod(job, "failover", done))))
    lost = copy.deepcopy(s1)
    lost["operation"]["startedAt"] = "2026-11-29T11:54:00Z"
    write("sync", "failover-job-never-appeared", request(
        parent(status=lost), observed([c for c in started["children"] if c["kind"] != "Job"]),
        related(*with_primary_down())))
    promoted = '{"result":"promoted","from":"db-0","fenced":false,"unreachable":["db-0"],"primary":"db-1","semiSync":true,"replicas":["db-2"],"rebuildNeeded":[],"gtid":"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-1042"}'
    write("sync", "failover-succeeded", request(
        parent(status=s1), observed(started["children"], {job: "succeeded"}),
        related(*with_primary_down(), job_pod(job, "failover", promoted))))
    write("sync", "failover-result-not-a-member", request(
        parent(status=s1), observed(started["children"], {job: "succeeded"}),
        related(*with_primary_down(), job_pod(job, "failover", '{"result":"promoted","from":"db-0","primary":"other-1"}'))))
    error = '{"result":"error","from":"db-0","fenced":false,"reason":"no-candidate","message":"no member other than db-0 answers"}'
    write("sync", "failover-failed", request(
        parent(status=s1), observed(started["children"], {job: "failed"}),
        related(*with_primary_down(), job_pod(job, "failover", error, 1))))
    write("sync", "switchover-blocked-by-failover", request(
        annotated(parent(status=s1), **{"mysqlhook.dev/switchover-to": "db-2"}), observed(started["children"]),
        related(*with_primary_down(), job_pod(job, "failover"))))

    failed = response_of("sync", "failover-failed")
    if failed is not None:
        write("sync", "failover-backoff", request(
            parent(status=failed["status"]), observed(failed["children"], {job: "failed"}),
            related(*with_primary_down(), job_pod(job, "failover", error, 1))))
        later = copy.deepcopy(failed["status"])
        later["failover"]["nextAttemptTime"] = "2026-11-29T11:59:58Z"
        write("sync", "failover-retry-after-backoff", request(
            parent(status=later), observed([c for c in failed["children"] if c["kind"] != "Job"]),
            related(*with_primary_down())))

    succeeded = response_of("sync", "failover-succeeded")
    if succeeded is None:
        return
    write("sync", "failover-recorded", request(
        parent(status=succeeded["status"]), observed(succeeded["children"], {job: "succeeded"}),
        related(*with_primary_down(), job_pod(job, "failover", promoted))))
    recorded = response_of("sync", "failover-recorded")
    if recorded is None:
        return
    back = [server_pod("db-0", 0, True, "2026-11-29T11:59:58Z"), *healthy[1:]]
    write("sync", "failover-old-primary-back", request(parent(status=recorded["status"]),
                                                       observed(recorded["children"], {job: "succeeded"}),
                                                       related(*back, job_pod(job, "failover", promoted))))

    # Switchover, requested by annotation.
    def asking(status, target="db-2"):
        return annotated(parent(status=status), **{"mysqlhook.dev/switchover-to": target})

    write("sync", "switchover-requested", request(asking(st), live, related(*healthy)))
    write("sync", "switchover-target-not-ready", request(asking(st), live, related(*pods([True, True, False]))))
    write("sync", "switchover-refused-not-a-member", request(asking(st, "db-5"), live, related(*healthy)))
    write("sync", "switchover-already-primary", request(asking(st, "db-0"), live, related(*healthy)))
    requested = response_of("sync", "switchover-requested")
    if requested is None:
        return
    sjob = job_named(requested, "switchover")
    s2 = requested["status"]
    write("sync", "switchover-running", request(asking(s2), observed(requested["children"]),
                                                related(*healthy, job_pod(sjob, "switchover"))))
    switched = '{"result":"switched","primary":"db-2","from":"db-0","semiSync":true,"replicas":["db-0","db-1"],"unreachable":[],"rebuildNeeded":[],"gtid":"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-2077"}'
    write("sync", "switchover-succeeded", request(
        asking(s2), observed(requested["children"], {sjob: "succeeded"}),
        related(*healthy, job_pod(sjob, "switchover", switched))))
    # Issue 35.1: the Job's pod has ended with its result, the Job controller has
    # not marked the Job Complete yet (about a second later): the role moves now.
    write("sync", "switchover-pod-succeeded", request(
        asking(s2), observed(requested["children"]), related(*healthy, job_pod(sjob, "switchover", switched))))
    # The next sync, the Job still not marked Complete: recorded once, nothing new.
    early = response_of("sync", "switchover-pod-succeeded")
    if early is not None:
        write("sync", "switchover-pod-succeeded-recorded", request(
            asking(early["status"]), observed(early["children"]),
            related(*healthy, job_pod(sjob, "switchover", switched))))
    timeout = '{"result":"error","primary":"db-2","from":"db-0","reason":"catchup-timeout","message":"db-2 did not reach [3e11fa47-71ca-11e1-9e33-c80aa9429562:1-2077] within 60s; db-0 reopened"}'
    write("sync", "switchover-failed", request(
        asking(s2), observed(requested["children"], {sjob: "failed"}),
        related(*healthy, job_pod(sjob, "switchover", timeout, 1))))
    done = response_of("sync", "switchover-succeeded")
    if done is None:
        return
    write("sync", "switchover-recorded", request(
        asking(done["status"]), observed(done["children"], {sjob: "succeeded"}),
        related(*healthy, job_pod(sjob, "switchover", switched))))


OLD_REV, NEW_REV = "db-7d9c8b6f5", "db-5c8d7e9f1"


def rolling(children, job_states=None, update=NEW_REV, current=OLD_REV):
    """Observed children whose StatefulSet reports a new update revision."""
    out = observed(children, job_states)
    sts = out["StatefulSet.apps/v1"]["shop/db"]
    sts["status"]["updateRevision"] = update
    sts["status"]["currentRevision"] = current
    return out


def revision_pods(revs, ready=(True, True, True), since="2026-11-29T11:59:00Z"):
    """Server pods db-0.. on the given revisions (N: new, O: old)."""
    out = []
    for i, (rev, r) in enumerate(zip(revs, ready)):
        p = server_pod(f"db-{i}", i, r, since)
        p["metadata"]["labels"]["controller-revision-hash"] = NEW_REV if rev == "N" else OLD_REV
        out.append(p)
    return out


def monitoring_scenarios(st, live):
    """The mysqld_exporter sidecar: from the start, turned on for a running cluster
    (a new pod template: the rollout walks it in), its Secret kept once observed
    (one made before the Secret held the sidecar's option file keeps the flags it
    was made with), and resources that cannot be honoured."""
    exporter = {"exporter": {"enabled": True}}
    write("sync", "monitoring-new-cluster", request(parent(monitoring=exporter, flavor="mariadb", version="11.4.4")))
    on = {"exporter": {"enabled": True, "image": "registry.example/mysqld-exporter:v0.20.0",
                       "resources": {"requests": {"cpu": "0.02", "memory": "64Mi"}, "limits": {"memory": "0.125Gi"}}}}
    write("sync", "monitoring-enabled", request(parent(status=st, monitoring=on), live,
                                                related(*pods([True, True, True]))))
    # Issue 30.4: the sidecar's image is held to --allowed-images like spec.image.
    evil = {"exporter": {"enabled": True, "image": "evil.example.com/x:1"}}
    write("sync", "exporter-image-not-allowed", request(parent(status=st, monitoring=evil), live,
                                                        related(*pods([True, True, True]))))
    enabled = response_of("sync", "monitoring-enabled")
    if enabled is not None:
        secret = next(c for c in enabled["children"] if c["kind"] == "Secret" and c["metadata"]["name"] == "db-exporter")
        password = "observed-exporter-password"
        cnf = f"[client]\nuser = exporter\npassword = {password}\nsocket = /var/run/mysqld/mysqld.sock\n"
        b64 = lambda text: base64.b64encode(text.encode()).decode()  # noqa: E731
        # As the API server returns it, with a password other than the one derived
        # now; then as a hook from before the option file made it (password only).
        for name, data in (("monitoring-secret-kept", {"password": b64(password), "my.cnf": b64(cnf)}),
                           ("monitoring-secret-without-option-file", {"password": b64(password)})):
            kept = copy.deepcopy(live)
            for key, o in observed([secret])["Secret.v1"].items():
                o["data"] = data
                kept["Secret.v1"][key] = o
            write("sync", name, request(parent(status=enabled["status"], monitoring=on), kept,
                                        related(*pods([True, True, True]))))
    bad = {"exporter": {"enabled": True, "resources": {"requests": {"memory": "256Mi"}, "limits": {"memory": "64Mi"}}}}
    write("sync", "monitoring-invalid-resources", request(parent(status=st, monitoring=bad), live,
                                                          related(*pods([True, True, True]))))


def operator_scenarios(st, live):
    """The operator account (issue 18.5). A new cluster's Secret has the key
    operator-password, so the running chain above uses it. A Secret made before
    the key existed (the hook never updates it) keeps the scripts logging in as
    root over the network: its pods mount only the two keys it has, and once
    they run that template nothing rolls. When every server pod has the operator
    password, rootRemote says `drop`, and Jobs no longer get root's password.
    A user's own Secret is read through
    customize: with the key, the operator account; without it, as before."""
    legacy = copy.deepcopy(live)
    for o in legacy["Secret.v1"].values():
        if o["metadata"]["name"] == "db-credentials":
            o["data"].pop("operator-password", None)
    write("sync", "credentials-without-operator-key", request(parent(status=st), legacy,
                                                                related(*pods([True, True, True]))))
    walked = response_of("sync", "credentials-without-operator-key")
    if walked is not None:
        steady = copy.deepcopy(legacy)
        steady["StatefulSet.apps/v1"] = observed([c for c in walked["children"] if c["kind"] == "StatefulSet"]
                                                 )["StatefulSet.apps/v1"]
        steady["ConfigMap.v1"] = observed([c for c in walked["children"] if c["kind"] == "ConfigMap"])["ConfigMap.v1"]
        write("sync", "credentials-without-operator-key-steady",
              request(parent(status=walked["status"]), steady, related(*pods([True, True, True]))))
    agents = pods([True, True, True])
    for pod in agents:
        pod["spec"]["containers"].append({"name": "agent", "image": "mysql:8.4.3", "env": [
            {"name": "OPERATOR_PASSWORD_FILE", "value": "/etc/mysql-hook-credentials/operator-password"}]})
    write("sync", "operator-account-everywhere", request(parent(status=st), live, related(*agents)))
    # Root local only: a Job (here a requested switchover's) gets no root password.
    write("sync", "operator-account-everywhere-switchover", request(
        annotated(parent(status=st), **{"mysqlhook.dev/switchover-to": "db-2"}), live, related(*agents)))
    own = own_credentials(operator=True)
    write("sync", "own-credentials-operator", request(parent(credentialsSecretName="db-root-credentials"), None,
                                                      with_own_credentials(related(), own)))


def own_credentials(operator=False, opted_in=True):
    """The user's own credentials Secret (spec.credentialsSecretName), opted in by its
    owner (issue 30.3) unless opted_in is False."""
    data = {"root-password": "b3duLXJvb3Q=", "replication-password": "b3duLXJlcGw="}
    if operator:
        data["operator-password"] = "b3duLW9wZXJhdG9y"
    meta = {"name": "db-root-credentials", "namespace": NS, "uid": "30000000-0000-4000-8000-000000000004",
            "resourceVersion": "39003", "creationTimestamp": "2026-11-01T09:00:00Z"}
    if opted_in:
        meta["labels"] = {"mysqlhook.dev/credentials": "true"}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta, "data": data}


def with_own_credentials(rel, secret):
    rel = copy.deepcopy(rel)
    rel.setdefault("Secret.v1", {})[f"{NS}/db-root-credentials"] = secret
    return rel


def tls_file(name):
    with open(os.path.join(ROOT, "tls", name), "rb") as f:
        return base64.b64encode(f.read()).decode()


def tls_secret(cert="db.pem", label=True):
    """A cert-manager style Secret (test-fixtures/tls/make.py wrote the files)."""
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "db-tls", "namespace": NS, "uid": "30000000-0000-4000-8000-000000000003",
                     "resourceVersion": "39002", "creationTimestamp": "2026-11-01T09:00:00Z",
                     "labels": {"mysqlhook.dev/tls": "true"} if label else {}},
        "data": {"ca.crt": tls_file("ca.pem"), "tls.crt": tls_file(cert), "tls.key": tls_file("db.key")},
    }


def with_tls_secret(rel, **kw):
    rel = copy.deepcopy(rel)
    rel.setdefault("Secret.v1", {})[f"{NS}/db-tls"] = tls_secret(**kw)
    return rel


def tls_scenarios(st, live):
    """spec.tls (issue 18.5): refused without an opted-in Secret or with a
    certificate that names none of the servers (nothing changes); accepted, the
    servers roll to serve it (clients do not verify yet); once every server serves
    it, the ConfigMap says `verify` and new Jobs get the CA."""
    tls = {"secretName": "db-tls"}
    ready3 = related(*pods([True, True, True]))
    write("sync", "tls-secret-not-opted-in", request(parent(status=st, tls=tls), live, ready3))
    write("sync", "tls-certificate-wrong-names", request(parent(status=st, tls=tls), live,
                                                          with_tls_secret(ready3, cert="other.pem")))
    write("sync", "tls-serve", request(parent(status=st, tls=tls), live, with_tls_secret(ready3)))
    serve = response_of("sync", "tls-serve")
    if serve is None:
        return
    # The rollout is done: every pod runs the new template (its volumes name the
    # Secret and the option file that serves it).
    template = next(c for c in serve["children"] if c["kind"] == "StatefulSet")["spec"]["template"]
    served = pods([True, True, True])
    for p in served:
        p["spec"]["volumes"] = copy.deepcopy(template["spec"]["volumes"])
    done = observed(serve["children"], kept_done(serve["children"]))
    write("sync", "tls-verify", request(parent(status=serve["status"], tls=tls), done,
                                        with_tls_secret(related(*served))))
    verify = response_of("sync", "tls-verify")
    if verify is None:
        return
    # The certificate loses its label while every server serves it: kept, not verified.
    write("sync", "tls-secret-unlabelled-while-serving", request(
        parent(status=verify["status"], tls=tls), observed(verify["children"], kept_done(verify["children"])),
        related(*served)))
    # A failover while clients verify: the Job gets TLS_MODE and the CA.
    failing = copy.deepcopy(served)
    failing[0]["status"]["conditions"][1].update(status="False", lastTransitionTime="2026-11-29T11:59:00Z")
    failing[0]["status"]["conditions"][2].update(status="False", lastTransitionTime="2026-11-29T11:59:00Z")
    write("sync", "tls-verify-failover", request(
        parent(status=verify["status"], tls=tls), observed(verify["children"], kept_done(verify["children"])),
        with_tls_secret(related(*failing))))


def upgrade_scenarios(running, st, live):
    """An ordered 8.4.3 -> 8.4.5 rollout of a 3-server cluster whose primary is db-0:
    db-2, db-1, a switchover to db-2, then db-0; plus a stuck step, a refused
    downgrade and a config-only change."""
    v2 = dict(version="8.4.5")
    write("sync", "upgrade-requested", request(parent(status=st, **v2), live, related(*pods([True, True, True]))))
    write("sync", "upgrade-refused-downgrade", request(parent(status=st, version="8.0.39"), live,
                                                       related(*pods([True, True, True]))))
    cfg = dict(config={"max_connections": "800"})
    write("sync", "config-change", request(parent(status=st, **cfg), live, related(*pods([True, True, True]))))
    changed = response_of("sync", "config-change")
    if changed is not None:
        write("sync", "config-change-first-step", request(parent(status=changed["status"], **cfg),
                                                          rolling(changed["children"]),
                                                          related(*revision_pods("OOO"))))
    r1 = response_of("sync", "upgrade-requested")
    if r1 is None:
        return
    write("sync", "upgrade-1-release-db-2", request(parent(status=r1["status"], **v2), rolling(r1["children"]),
                                                   related(*revision_pods("OOO"))))
    r2 = response_of("sync", "upgrade-1-release-db-2")
    if r2 is None:
        return
    write("sync", "upgrade-2-db-2-restarting", request(parent(status=r2["status"], **v2), rolling(r2["children"]),
                                                      related(*revision_pods("OON", (True, True, False), "2026-11-29T11:59:58Z"))))
    stuck = copy.deepcopy(r2["status"])
    stuck["rollout"]["stepStartedAt"] = "2026-11-29T11:45:00Z"
    write("sync", "upgrade-stuck", request(parent(status=stuck, **v2), rolling(r2["children"]),
                                           related(*revision_pods("OON", (True, True, False), "2026-11-29T11:46:00Z"))))
    write("sync", "upgrade-3-release-db-1", request(parent(status=r2["status"], **v2), rolling(r2["children"]),
                                                   related(*revision_pods("OON"))))
    r3 = response_of("sync", "upgrade-3-release-db-1")
    if r3 is None:
        return
    write("sync", "upgrade-4-switchover", request(parent(status=r3["status"], **v2), rolling(r3["children"]),
                                                 related(*revision_pods("ONN"))))
    r4 = response_of("sync", "upgrade-4-switchover")
    if r4 is None:
        return
    sjob = job_named(r4, "switchover")
    switched = '{"result":"switched","primary":"db-2","from":"db-0","semiSync":true,"replicas":["db-0","db-1"],"unreachable":[],"rebuildNeeded":[],"gtid":"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-2077"}'
    write("sync", "upgrade-5-switched", request(parent(status=r4["status"], **v2),
                                               rolling(r4["children"], {sjob: "succeeded"}),
                                               related(*revision_pods("ONN"), job_pod(sjob, "switchover", switched))))
    r5 = response_of("sync", "upgrade-5-switched")
    if r5 is None:
        return
    write("sync", "upgrade-6-release-db-0", request(parent(status=r5["status"], **v2),
                                                   rolling(r5["children"], {sjob: "succeeded"}),
                                                   related(*revision_pods("ONN"))))
    r6 = response_of("sync", "upgrade-6-release-db-0")
    if r6 is None:
        return
    # Issue 34.4: every pod carries the new revision but the controller has not made
    # it current: db-0 still starting, then every pod Ready. The partition stays 0.
    write("sync", "upgrade-6b-db-0-starting", request(parent(status=r6["status"], **v2),
                                                     rolling(r6["children"]),
                                                     related(*revision_pods("NNN", (False, True, True), "2026-11-29T11:59:58Z"))))
    write("sync", "upgrade-6c-revision-not-current", request(parent(status=r6["status"], **v2),
                                                            rolling(r6["children"]),
                                                            related(*revision_pods("NNN"))))
    write("sync", "upgrade-7-complete", request(parent(status=r6["status"], **v2),
                                               rolling(r6["children"], update=NEW_REV, current=NEW_REV),
                                               related(*revision_pods("NNN"))))


def scale_down_scenarios():
    """Issue 31.4: a scale-down from 3 to 2 servers, walked from `scale-down` (db-2
    still exists there): once db-2 is gone the proof Job runs; until it succeeds a
    failover examines two replicas (QUORUM=2); then the arithmetic is that of two
    servers, and nothing of the scale-down is left."""
    shrunk = response_of("sync", "scale-down")
    if shrunk is None:
        return
    two = pods([True, True])
    st = shrunk["status"]
    gone = observed(shrunk["children"], kept_done(shrunk["children"]))
    write("sync", "scale-down-proving", request(parent(replicas=2, status=st), gone, related(*two)))
    # The primary fails before the proof: its server runs, so the failover starts,
    # and it must examine two replicas where only one exists.
    down = [server_pod("db-0", 0, False, "2026-11-29T11:59:00Z"), server_pod("db-1", 1, True)]
    write("sync", "scale-down-failover-keeps-quorum", request(parent(replicas=2, status=st), gone, related(*down)))
    proving = response_of("sync", "scale-down-proving")
    if proving is None:
        return
    job = job_named(proving, "scale-down")
    settled = ('{"result":"settled","primary":"db-0","pod":"db-1","gtid":"%s:1-30","waited":2,'
               '"message":"db-1 has executed everything db-0 had committed once the removed servers were gone"}'
               % GTID)
    write("sync", "scale-down-proven", request(
        parent(replicas=2, status=proving["status"]),
        observed(proving["children"], {**kept_done(proving["children"]), job: "succeeded"}),
        related(*two, job_pod(job, "scale-down", settled))))
    behind = ('{"result":"error","reason":"replicas-behind","message":"no remaining replica executed [%s:1-30] '
              'of db-0 within 300s: db-1 is at [%s:1-10]"}' % (GTID, GTID))
    write("sync", "scale-down-proof-failed", request(
        parent(replicas=2, status=proving["status"]),
        observed(proving["children"], {**kept_done(proving["children"]), job: "failed"}),
        related(*two, job_pod(job, "scale-down", behind, exit_code=1))))
    proven = response_of("sync", "scale-down-proven")
    if proven is not None:
        write("sync", "scale-down-settled", request(parent(replicas=2, status=proven["status"]),
                                                    observed(proven["children"], kept_done(proven["children"])),
                                                    related(*two)))


def main():
    new = response_of("sync", "new-cluster")
    primary_ready = response_of("sync", "primary-ready")
    succeeded = response_of("sync", "bootstrap-succeeded")
    running = response_of("sync", "running")

    write("sync", "new-cluster", request(parent()))
    write("sync", "long-name", request(parent(name="orders-" + "x" * 70 + "-eu-west-1-primary-cluster")))
    write("sync", "mariadb-new-cluster", request(parent(flavor="mariadb", version="11.4.4")))
    own = parent(credentialsSecretName="db-root-credentials")
    write("sync", "own-credentials", request(own, None, with_own_credentials(related(), own_credentials())))
    # Issue 30.3: a Secret its owner did not opt in: no server starts with it; a
    # cluster that already runs with it keeps running (and is told).
    unlabelled = with_own_credentials(related(), own_credentials(opted_in=False))
    write("sync", "own-credentials-not-opted-in", request(own, None, unlabelled))
    own_running = response_of("sync", "own-credentials")
    if own_running is not None:
        write("sync", "own-credentials-not-opted-in-running",
              request(parent(credentialsSecretName="db-root-credentials", status=own_running["status"]),
                      observed(own_running["children"]), unlabelled))
    if new is None:
        return
    status = new["status"]
    write("sync", "pods-starting", request(parent(status=status), observed(new["children"]),
                                             related(*pods([False, False, False]))))
    # Issue 36.2: nodes without room; Ready says which pods wait and why.
    write("sync", "pods-unschedulable", request(parent(status=status), observed(new["children"]),
                                                  related(*map(unschedulable, pods([False, False, False])))))
    # Issue 31.7: claims retained from an earlier cluster of this name (older than
    # the MySQL): bootstrap waits until every such server has started.
    retained = [claim(i, created="2026-11-01T09:00:00Z") for i in range(3)]
    starting = [server_pod("db-0", 0, False), server_pod("db-1", 1, False, mysqld="starting"),
                server_pod("db-2", 2, False, mysqld=None)]
    write("sync", "bootstrap-retained-members-starting", request(
        parent(status=status), observed(new["children"]), with_claims(related(*starting), *retained)))
    write("sync", "bootstrap-retained-members-started", request(
        parent(status=status), observed(new["children"]), with_claims(related(*pods([False, False, False])), *retained)))
    write("sync", "primary-ready", request(parent(status=status), observed(new["children"]),
                                             related(*pods([True, False, False]))))
    if primary_ready is None:
        return
    job = next(c["metadata"]["name"] for c in primary_ready["children"] if c["kind"] == "Job")
    write("sync", "bootstrap-running", request(
        parent(status=primary_ready["status"]), observed(primary_ready["children"], {job: "running"}),
        related(*pods([True, True, False]), job_pod(job, "bootstrap"))))
    # bootstrap-running with its Job's pod waiting for a node: only Ready's message differs.
    write("sync", "bootstrap-unschedulable", request(
        parent(status=primary_ready["status"]), observed(primary_ready["children"], {job: "running"}),
        related(*pods([True, True, False]), unschedulable(job_pod(job, "bootstrap")))))
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
    # Lifecycle review 20: spec.restore added to a running cluster that was never
    # restored: nothing is loaded, and SpecAccepted says so by name.
    write("sync", "restore-added-after-init", request(
        parent(status=succeeded["status"], restore={"backup": "nightly"}),
        observed(succeeded["children"], {job: "succeeded"}), related(*pods([True, True, True]))))
    if running is None:
        return
    # The bootstrap Job the running cluster keeps (the record of its first primary).
    live = observed(running["children"], kept_done(running["children"]))
    st = running["status"]
    # Issue 30.8 and "bad input loses nothing": a refused user declaration (a
    # system schema; a name whose Secret could be another cluster's) changes no
    # user, and the generated Secrets applications mount stay as they are.
    write("sync", "users-invalid-secrets-kept", request(
        parent(status=st, users=[{"name": "app", "database": "app"}, {"name": "b_credentials", "database": "mysql"}]),
        live, related(*pods([True, True, True]))))
    older_crd("sync", "users-invalid-secrets-kept", "could be another cluster's")
    write("sync", "replica-not-ready", request(parent(status=st), live, related(*pods([True, True, False]))))
    write("sync", "scale-up", request(parent(replicas=5, status=st), live, related(*pods([True, True, True]))))
    write("sync", "scale-down", request(parent(replicas=2, status=st), live, related(*pods([True, True, True]))))
    scale_down_scenarios()
    write("sync", "scale-down-blocked", request(parent(replicas=2, status=dict(st, primary="db-2")), live,
                                                  related(*pods([True, True, True]))))
    write("sync", "custom-config", request(
        parent(status=st, config={"max_connections": "500", "innodb_buffer_pool_size": "1073741824"}), live,
        related(*pods([True, True, True]))))
    write("sync", "config-refused", request(parent(status=st, config={"gtid_mode": "OFF", "max_connections": "500"}),
                                              live, related(*pods([True, True, True]))))
    # Issue 18.4: spellings the server's option parser reads as read_only,
    # skip_grant_tables and init_file (modifiers, an abbreviation), and options off
    # the allow-list, next to an allowed one.
    write("sync", "config-walkaround-refused", request(parent(status=st, config={
        "skip-disable-read-only": "", "skip-gr": "", "init-f": "/var/lib/mysql/x.sql", "plugin_load_add": "x.so",
        "loose-max-connections": "500"}), live, related(*pods([True, True, True]))))
    # Issue 18.5: the applications in namespaces web and api may connect.
    write("sync", "network-client-namespaces", request(parent(status=st, network={"clientNamespaces": ["web", "api"]}),
                                                         live, related(*pods([True, True, True]))))
    # Issue 17.5: another StorageClass is refused; growth is in storage_scenarios.
    write("sync", "storage-change", request(parent(status=st, storage={"size": "10Gi", "storageClassName": "fast"}),
                                              live, related(*pods([True, True, True]))))
    storage_scenarios(st, live)
    write("sync", "resources-canonical", request(parent(status=st, resources={
        "requests": {"cpu": "0.5", "memory": "1.5Gi"}, "limits": {"memory": "2048Mi"}}), live,
        related(*pods([True, True, True]))))
    write("sync", "single-server", request(parent(replicas=1)))
    replica_scenarios(running, st)
    # Placement and exposure knobs (issue 17.5): a new template, held for the walk.
    write("sync", "placement-and-exposure", request(parent(status=st, pod={
        "nodeSelector": {"pool": "databases"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}],
        "antiAffinity": "Required",
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                       "whenUnsatisfiable": "DoNotSchedule"}],
        "priorityClassName": "databases",
        "imagePullSecrets": [{"name": "registry"}],
        "labels": {"team": "payments", "app.kubernetes.io/instance": "stolen"},
        "annotations": {"cost-center": "42"},
    }, services={"primary": {"type": "LoadBalancer",
                             "annotations": {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}},
                 "replicas": {"type": "NodePort"}}), live, related(*pods([True, True, True]))))
    # Issue 30.6: what spec.pod may not set is left out and reported; the rest passes.
    write("sync", "pod-settings-refused", request(parent(status=st, pod={
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
                        {"operator": "Exists"},
                        {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}],
        "priorityClassName": "system-cluster-critical",
        "annotations": {"container.apparmor.security.beta.kubernetes.io/exporter": "unconfined",
                        "cost-center": "42"},
    }), live, related(*pods([True, True, True]))))
    # Issue 30.6: what the installer's lists (tests/common placement_policy) do not
    # name is left out and reported; what they name passes.
    write("sync", "pod-settings-not-allowed", request(parent(status=st, pod={
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"},
                        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": "batch-high",
        "labels": {"team": "payments", "app": "web"},
        "annotations": {"cost-center": "42", "sidecar.istio.io/inject": "true"},
    }, services={"primary": {"type": "LoadBalancer",
                             "annotations": {"service.beta.kubernetes.io/aws-load-balancer-internal": "true",
                                             "external-dns.alpha.kubernetes.io/hostname": "db.example.com"}}}),
        live, related(*pods([True, True, True]))))
    monitoring_scenarios(st, live)
    operator_scenarios(st, live)
    tls_scenarios(st, live)
    failover_scenarios(running, st, live)
    upgrade_scenarios(running, st, live)

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

    backup_scenarios(running, st, live, deleting)

    reliability_scenarios(st, live)

    safety_scenarios(running, st, live, deleting)

    # Customize.
    write("customize", "cluster", {"controller": CONTROLLER, "parent": parent()})
    write("customize", "tls", {"controller": CONTROLLER, "parent": parent(tls={"secretName": "db-tls"})})
    write("customize", "own-credentials", {"controller": CONTROLLER,
                                           "parent": parent(credentialsSecretName="db-root-credentials")})
    write("customize", "long-name", {"controller": CONTROLLER,
                                     "parent": parent(name="orders-" + "x" * 70 + "-eu-west-1-primary-cluster")})


# ---------------------------------------------------------------- safety (issues 14, 20)

def claim(ordinal, owner=None, request="10Gi", capacity="10Gi", resize_pending=False, created=None):
    """A server volume claim, as the StatefulSet controller creates it; `owner`: the
    StatefulSet that owns it (whenDeleted: Delete), if any; `request` and
    `capacity`: its requested and actual size; `resize_pending`: the volume has
    grown and waits for the kubelet to grow its file system."""
    meta = {"name": f"data-db-{ordinal}", "namespace": NS, "uid": f"30000000-0000-4000-8000-{ordinal:012d}",
            "labels": {"app.kubernetes.io/instance": "db", "app.kubernetes.io/managed-by": "mysql-hook",
                       "app.kubernetes.io/component": "database"}}
    if created:
        meta["creationTimestamp"] = created
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": owner,
                                    "uid": "00000000-0000-4000-8000-000000000009", "controller": True,
                                    "blockOwnerDeletion": True}]
    status = {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": capacity}}
    if resize_pending:
        status["conditions"] = [{"type": "FileSystemResizePending", "status": "True",
                                 "lastTransitionTime": "2026-11-29T11:59:30Z",
                                 "message": "Waiting for user to (re-)start a pod to finish file system resize "
                                            "of volume on node."}]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": request}},
                     "storageClassName": "standard", "volumeMode": "Filesystem",
                     "volumeName": f"pvc-30000000-0000-4000-8000-{ordinal:012d}"},
            "status": status}


def with_claims(rel, *claims):
    rel = copy.deepcopy(rel)
    rel["PersistentVolumeClaim.v1"] = {f"{NS}/{c['metadata']['name']}": c for c in claims}
    return rel


def storage_scenarios(st, live):
    """Issue 17.5: a bigger spec.storage.size grows the claims through the grow Job;
    a smaller one is refused."""
    healthy = related(*pods([True, True, True]))
    small = [claim(i) for i in range(3)]
    # 1. The claims are smaller: the ServiceAccount, Role and RoleBinding first.
    grow = parent(status=st, storage={"size": "20Gi"})
    write("sync", "storage-grow", request(grow, live, with_claims(healthy, *small)))
    first = response_of("sync", "storage-grow")
    if first is None:
        return
    extra = [c for c in first["children"] if c["kind"] in ("ServiceAccount", "Role", "RoleBinding")]
    with_access = copy.deepcopy(live)
    for kind, objects in observed(extra).items():
        with_access[kind].update(objects)
    # 2. They exist: the Job too.
    write("sync", "storage-grow-job", request(grow, with_access, with_claims(healthy, *small)))
    second = response_of("sync", "storage-grow-job")
    if second is None or not any(c["kind"] == "Job" and c["metadata"]["labels"].get("mysqlhook.dev/purpose") == "grow"
                                 for c in second["children"]):
        return
    job = job_named(second, "grow")
    grow_job = [c for c in second["children"] if c["kind"] == "Job" and c["metadata"]["name"] == job]
    # 3. The StorageClass does not allow expansion: the API server refused the patch.
    refusal = ('{"result":"error","reason":"refused","size":"20Gi","message":"data-db-0: the API server refused '
               'to raise 10Gi to 20Gi (403): persistentvolumeclaims \\"data-db-0\\" is forbidden: only dynamically '
               'provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"}')
    refused = copy.deepcopy(with_access)
    refused["Job.batch/v1"].update(observed(grow_job, {job: "failed"})["Job.batch/v1"])
    write("sync", "storage-grow-refused", request(grow, refused, with_claims(
        related(*pods([True, True, True]), job_pod(job, "grow", refusal, 1)), *small)))
    # 4. The requests are raised; db-0's file system waits for the kubelet.
    done_job = copy.deepcopy(with_access)
    done_job["Job.batch/v1"].update(observed(grow_job, {job: "succeeded"})["Job.batch/v1"])
    grown_result = ('{"result":"grown","size":"20Gi","message":"data-db-0: request raised from 10Gi to 20Gi; '
                    'data-db-1: request raised from 10Gi to 20Gi; data-db-2: request raised from 10Gi to 20Gi"}')
    write("sync", "storage-grow-resizing", request(grow, done_job, with_claims(
        related(*pods([True, True, True]), job_pod(job, "grow", grown_result)),
        claim(0, request="20Gi", resize_pending=True), claim(1, request="20Gi"), claim(2, request="20Gi",
                                                                                      capacity="20Gi"))))
    # 5. Every claim has grown: the Job goes, and nothing stands.
    big = [claim(i, request="20Gi", capacity="20Gi") for i in range(3)]
    write("sync", "storage-grow-done", request(grow, done_job, with_claims(healthy, *big)))
    # 6. A scale-up after the growth: the new server's claim is made from the
    # template (10Gi) and grown in turn.
    write("sync", "storage-grow-scale-up", request(
        parent(status=st, replicas=4, storage={"size": "20Gi"}), live,
        with_claims(related(*pods([True, True, True, True])), *big, claim(3))))
    # A smaller size: refused, nothing changes.
    write("sync", "storage-shrink-refused", request(parent(status=st, storage={"size": "5Gi"}), live,
                                                      with_claims(healthy, *small)))


def safety_scenarios(running, st, live, deleting):
    """What must hold whatever the status says, and how a role change starts safely."""
    healthy = pods([True, True, True])
    down = "2026-11-29T11:59:00Z"

    # The status wiped (an object restored without it): after a failover moved the
    # primary to db-1, the ConfigMap's memory and the kept failover Job say so.
    recorded = response_of("sync", "failover-recorded")
    if recorded is not None:
        fjob = job_named(recorded, "failover")
        promoted = '{"result":"promoted","from":"db-0","primary":"db-1","semiSync":true}'
        write("sync", "status-lost-after-failover", request(
            parent(), observed(recorded["children"], {fjob: "succeeded"}),
            related(*healthy, job_pod(fjob, "failover", promoted))))
        # The Job's pod gone too: the ConfigMap alone remembers.
        write("sync", "status-lost-configmap-only", request(
            parent(), observed([c for c in recorded["children"] if c["kind"] != "Job"]), related(*healthy)))

    # Quorum: the primary's server and one replica's are down; one replica is Ready.
    crashed = [server_pod("db-0", 0, False, down, mysqld="waiting"), server_pod("db-1", 1, True),
               server_pod("db-2", 2, False, down, mysqld="waiting")]
    write("sync", "failover-no-quorum", request(parent(status=st), live, related(*crashed)))
    write("sync", "failover-forced", request(
        annotated(parent(status=st), **{"mysqlhook.dev/force-failover": "db-0"}), live, related(*crashed)))
    # Issue 31.2: the annotation forces one failover. Its ConfigMap remembers the use;
    # with the annotation left in place the next outage of db-0 waits for the quorum
    # again, and once the annotation is removed the memory goes too.
    forced = response_of("sync", "failover-forced")
    if forced is not None:
        used = observed([c for c in forced["children"] if c["kind"] != "Job"])
        write("sync", "failover-forced-used", request(
            annotated(parent(status=st), **{"mysqlhook.dev/force-failover": "db-0"}), used, related(*crashed)))
        write("sync", "failover-forced-annotation-removed", request(parent(status=st), used, related(*crashed)))
    # A primary that restarted read-only: not Ready, its server runs; the replicas too.
    restarted = [server_pod("db-0", 0, False, down), server_pod("db-1", 1, True), server_pod("db-2", 2, True)]
    write("sync", "failover-primary-restarted", request(parent(status=st), live, related(*restarted)))

    # A single server that restarted read-only becomes writable again by a Job.
    single = response_of("sync", "single-server")
    if single is not None:
        sp = [server_pod("db-0", 0, True)]
        sreq = request(parent(replicas=1, status=single["status"]), observed(single["children"]), related(*sp))
        write("sync", "single-server-primary-ready", sreq)
        sready = response_of("sync", "single-server-primary-ready")
        if sready is not None and sready.get("children"):
            bjobs = [c for c in sready["children"] if c["kind"] == "Job"]
            if bjobs:
                bname = bjobs[0]["metadata"]["name"]
                write("sync", "single-server-bootstrapped", request(
                    parent(replicas=1, status=sready["status"]), observed(sready["children"], {bname: "succeeded"}),
                    related(*sp, job_pod(bname, "bootstrap", '{"result":"bootstrapped","primary":"db-0","semiSync":false}'))))
                sboot = response_of("sync", "single-server-bootstrapped")
                if sboot is not None:
                    write("sync", "single-server-restarted", request(
                        parent(replicas=1, status=sboot["status"]), observed(sboot["children"], {bname: "succeeded"}),
                        related(server_pod("db-0", 0, False, down))))

    # A drain: the primary's pod is being deleted while its server still runs.
    draining = server_pod("db-0", 0, False, "2026-11-29T11:59:58Z")
    draining["metadata"]["deletionTimestamp"] = "2026-11-29T11:59:58Z"
    draining["metadata"]["deletionGracePeriodSeconds"] = 120
    write("sync", "primary-terminating", request(parent(status=st), live,
                                                  related(draining, *healthy[1:])))
    # Issue 31.8: the drain's switchover failed; the next attempt backs off (each
    # attempt freezes writes while it fences), then starts again.
    drained = response_of("sync", "primary-terminating")
    if drained is not None:
        djob = job_named(drained, "switchover")
        timeout = '{"result":"error","primary":"db-1","from":"db-0","reason":"catchup-timeout","message":"db-1 did not catch up within 60s; db-0 reopened"}'
        still_draining = related(draining, *healthy[1:], job_pod(djob, "switchover", timeout, 1))
        write("sync", "drain-switchover-failed", request(
            parent(status=drained["status"]), observed(drained["children"], {djob: "failed"}),
            still_draining))
        failed_drain = response_of("sync", "drain-switchover-failed")
        if failed_drain is not None:
            write("sync", "drain-switchover-backoff", request(
                parent(status=failed_drain["status"]), observed(failed_drain["children"], {djob: "failed"}),
                still_draining))
            later = copy.deepcopy(failed_drain["status"])
            if later.get("drainSwitchover"):
                later["drainSwitchover"]["nextAttemptTime"] = "2026-11-29T11:59:59Z"
            write("sync", "drain-switchover-retried", request(
                parent(status=later), observed(failed_drain["children"], {djob: "failed"}),
                still_draining))

    # A failover Job that promoted db-1 and then failed (repointing): db-1 is the primary.
    started = response_of("sync", "failover-past-grace")
    if started is not None:
        fjob = job_named(started, "failover")
        half = '{"result":"error","reason":"script-failed","message":"repointing db-2 failed","from":"db-0","promoted":"db-1"}'
        primary_down = [server_pod("db-0", 0, False, down)] + healthy[1:]
        write("sync", "failover-failed-after-promotion", request(
            parent(status=started["status"]), observed(started["children"], {fjob: "failed"}),
            related(*primary_down, job_pod(fjob, "failover", half, 1))))

    # Over retained volumes the bootstrap Job chose the most advanced server, db-2.
    primary_ready = response_of("sync", "primary-ready")
    if primary_ready is not None:
        bjob = job_named(primary_ready, "bootstrap")
        chose = '{"result":"bootstrapped","primary":"db-2","semiSync":true,"replicas":["db-0","db-1"],"rebuildNeeded":[]}'
        write("sync", "bootstrap-chose-most-advanced", request(
            parent(status=primary_ready["status"]), observed(primary_ready["children"], {bjob: "succeeded"}),
            related(*healthy, job_pod(bjob, "bootstrap", chose))))

    # The spec edited again in the middle of a walk: every pod is held at once.
    r3 = response_of("sync", "upgrade-3-release-db-1")
    if r3 is not None:
        write("sync", "upgrade-edited-mid-walk", request(parent(status=r3["status"], version="8.4.6"),
                                                         rolling(r3["children"]), related(*revision_pods("ONN"))))
    # Reverting a started upgrade across a series: db-2 already ran 8.4.5.
    upgrade = response_of("sync", "upgrade-2-db-2-restarting")
    if upgrade is not None:
        ran = revision_pods("OON")
        ran[2]["metadata"]["annotations"] = {"mysqlhook.dev/version": "9.1.0"}
        write("sync", "upgrade-revert-after-new-major", request(parent(status=st), rolling(upgrade["children"]),
                                                                  related(*ran)))

    # Specs the API server would reject.
    write("sync", "invalid-schedule", request(parent(status=st, backup=dict(PVC_BACKUP, schedule="61 * * * *")),
                                              live, related(*healthy)))
    write("sync", "resources-above-limits", request(parent(status=st, resources={
        "requests": {"memory": "4Gi"}, "limits": {"memory": "2Gi"}}), live, related(*healthy)))

    # Deletion with Retain while the StatefulSet still owns a claim (an earlier Delete).
    write("finalize", "retain-claims-owned", request(
        deleting(), live, dict(related(*healthy), **{"PersistentVolumeClaim.v1": {
            f"{NS}/data-db-{i}": claim(i, owner="db" if i == 2 else None) for i in range(3)}}), True))
    # deletionPolicy Backup of a cluster that never finished bootstrapping.
    new = response_of("sync", "new-cluster")
    if new is not None:
        never = parent(status=new["status"], deletionPolicy="Backup", backup=PVC_BACKUP)
        never["metadata"]["deletionTimestamp"] = "2026-11-29T11:59:50Z"
        write("finalize", "backup-never-initialized", request(never, observed(new["children"]),
                                                              related(*pods([False, False, False])), True))


# ---------------------------------------------------------------- backups and restores

BACKUP_CONTROLLER = {
    "apiVersion": "metacontroller.k8s.io/v1alpha1",
    "kind": "CompositeController",
    "metadata": {"name": "mysql-hook-backup", "uid": "0b5e4b6c-2222-4222-8333-944455566677"},
    "spec": {
        "generateSelector": True,
        "parentResource": {"apiVersion": "mysqlhook.dev/v1alpha1", "resource": "mysqlbackups"},
        "childResources": [{"apiVersion": "batch/v1", "resource": "jobs"}],
        "hooks": {
            "sync": {"version": "v2", "webhook": {"url": "http://mysql-hook.mysql-hook/backup/sync"}},
            "customize": {"version": "v2", "webhook": {"url": "http://mysql-hook.mysql-hook/backup/customize"}},
        },
        "resyncPeriodSeconds": 60,
    },
}
BACKUP_UID = "7a2d3b9f-4e5c-4f60-8b12-3c4d5e6f7a81"
PVC_BACKUP = {"schedule": "0 3 * * *", "storage": {"persistentVolumeClaim": {"claimName": "mysql-backups"}}, "keep": 7}
S3_BACKUP = {"schedule": "30 2 * * *", "keep": 14, "storage": {"s3": {
    "endpoint": "https://minio.storage.svc:9000", "bucket": "db-backups", "prefix": "shop/db",
    "credentialsSecret": "backup-s3"}}}


def script_pod(job, labels, results, phase, name_suffix="x7k2p", main="backup", init=None, finished="2026-11-29T11:58:19Z"):
    """A Job pod whose containers ended with `results`: [(container, exit code, message)] (init first)."""
    def status(c, code, msg):
        return {"name": c, "ready": False, "restartCount": 0, "image": "mysql:8.4.3", "imageID": "",
                "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                         "message": msg, "startedAt": "2026-11-29T11:58:01Z", "finishedAt": finished}}
                if code is not None else {"running": {"startedAt": "2026-11-29T11:58:01Z"}}}
    statuses = {c: status(c, code, msg) for c, code, msg in results}
    inits = (init if isinstance(init, list) else [init]) if init else []
    labels = dict(labels, **{"batch.kubernetes.io/job-name": job, "job-name": job})
    st = {"phase": phase}
    if inits:
        st["initContainerStatuses"] = [statuses[c] for c in inits if c in statuses]
    st["containerStatuses"] = [statuses[main]] if main in statuses else []
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{job}-{name_suffix}", "namespace": NS, "uid": "20000000-0000-4000-8000-0000000000%02d" % (len(job) % 90),
                     "resourceVersion": "44100", "labels": labels, "creationTimestamp": "2026-11-29T11:58:00Z",
                     "ownerReferences": job_owner(job)},
        "spec": {"initContainers": [{"name": c, "image": "mysql:8.4.3"} for c in inits],
                 "containers": [{"name": main, "image": "mysql:8.4.3"}], "restartPolicy": "Never"},
        "status": st,
    }


def cluster_job_labels(purpose):
    return {"app.kubernetes.io/name": "mysql", "app.kubernetes.io/instance": "db",
            "app.kubernetes.io/managed-by": "mysql-hook", "app.kubernetes.io/component": "job",
            "mysqlhook.dev/purpose": purpose}


def backed_up(name, source="db-1", location=None, finished="2026-11-29T03:00:42Z"):
    return json.dumps({"result": "backed-up", "source": source, "location": location or f"/backups/db/{name}",
                       "bytes": 73400320, "gtid": "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-4711",
                       "sha256": "9f2c0e7a5b1d4c3e8f6a7b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e",
                       "startedAt": "2026-11-29T03:00:02Z", "finishedAt": finished, "databases": 2, "binlogs": 3},
                      separators=(",", ":"))


def mysql_backup(name="nightly", cluster="db", status=None, verify=False):
    b = {"apiVersion": "mysqlhook.dev/v1alpha1", "kind": "MySQLBackup",
         "metadata": {"name": name, "namespace": NS, "uid": BACKUP_UID, "generation": 1, "resourceVersion": "51000",
                      "creationTimestamp": "2026-11-29T11:59:00Z"},
         "spec": {"cluster": cluster, **({"verify": True} if verify else {})}}
    if status is not None:
        b["status"] = status
    return b


def backup_request(b, jobs=None, mysqls=(), pods=(), secrets=(), config_maps=()):
    rel = {"MySQL.mysqlhook.dev/v1alpha1": {f"{NS}/{m['metadata']['name']}": m for m in mysqls},
           "Pod.v1": {f"{NS}/{p['metadata']['name']}": p for p in pods}}
    if secrets:
        rel["Secret.v1"] = {f"{NS}/{s['metadata']['name']}": s for s in secrets}
    if config_maps:
        rel["ConfigMap.v1"] = {f"{NS}/{c['metadata']['name']}": c for c in config_maps}
    return {"controller": BACKUP_CONTROLLER, "parent": b,
            "children": {"Job.batch/v1": {f"{NS}/{j['metadata']['name']}": j for j in (jobs or [])}},
            "related": rel, "finalizing": False}


def jobs_of(response):
    return [c for c in (response or {}).get("children", []) if c["kind"] == "Job"]


def backup_scenarios(running, st, live, deleting):
    ready3 = related(*pods([True, True, True]))
    # Scheduled backups: the CronJob, only once the cluster is initialized.
    write("sync", "backup-cronjob-pvc", request(parent(status=st, backup=PVC_BACKUP), live, ready3))
    # Issue 30.5: a claim its owner did not opt in is no store (no CronJob).
    write("sync", "backup-pvc-not-opted-in", request(parent(status=st, backup=PVC_BACKUP), live,
                                                     dict(copy.deepcopy(ready3), **{NO_STORE_CLAIM: True})))
    write("sync", "backup-cronjob-s3", request(parent(status=st, backup=S3_BACKUP), live, with_s3_secret(ready3)))
    # Issue 34.8: after spec.storage.size grew (claims 20Gi, the StatefulSet's template
    # still 10Gi) the staging volume is sized from the grown size.
    write("sync", "backup-cronjob-s3-after-growth", request(
        parent(status=st, backup=S3_BACKUP, storage={"size": "20Gi"}), live,
        with_claims(with_s3_secret(ready3), *[claim(i, request="20Gi", capacity="20Gi") for i in range(3)])))
    # Issue 34.11/34.12: the user bounds the backup pods: a deadline for dump,
    # verification and upload, each container's resources, the scratch size.
    bounded = dict(S3_BACKUP, verify=True, timeoutSeconds=43200, workVolumeSize="40Gi",
                   resources={"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}})
    write("sync", "backup-cronjob-s3-bounded", request(parent(status=st, backup=bounded), live, with_s3_secret(ready3)))
    # Issue 18.2: the Secret did not opt in (Metacontroller sends no such Secret), an
    # uploader image off the installer's list, a server image off it.
    write("sync", "backup-s3-credentials-not-opted-in", request(parent(status=st, backup=S3_BACKUP), live, ready3))
    # Issue 30.3: an endpoint the credentials' owner did not list.
    evil_endpoint = copy.deepcopy(S3_BACKUP)
    evil_endpoint["storage"]["s3"]["endpoint"] = "https://evil.example"
    write("sync", "backup-s3-endpoint-not-allowed", request(parent(status=st, backup=evil_endpoint), live,
                                                            with_s3_secret(ready3)))
    write("sync", "backup-s3-service-account", request(parent(status=st, backup=dict(
        s3_by_account(S3_BACKUP), binlogSchedule="*/5 * * * *")), live, with_s3_account(ready3)))
    unlabelled = copy.deepcopy(S3_ACCOUNT)
    del unlabelled["metadata"]["labels"]
    write("sync", "backup-s3-service-account-not-opted-in", request(
        parent(status=st, backup=s3_by_account(S3_BACKUP)), live, with_s3_account(ready3, unlabelled)))
    evil_uploader = copy.deepcopy(S3_BACKUP)
    evil_uploader["storage"]["s3"]["image"] = "evil.example.com/aws-cli:2"
    write("sync", "backup-s3-image-not-allowed", request(parent(status=st, backup=evil_uploader), live,
                                                           with_s3_secret(ready3)))
    write("sync", "image-not-allowed", request(parent(status=st, image="evil.example.com/mysql:8.4.3"), live, ready3))
    write("sync", "backup-not-before-bootstrap", request(parent(backup=PVC_BACKUP)))
    # Issue 18.6: backups signed with a key kept outside the store (an opted-in Secret).
    signed = dict(PVC_BACKUP, signingKey={"name": "backup-signing"})
    write("sync", "backup-signed", request(parent(status=st, backup=signed), live, with_signing_key(ready3)))
    write("sync", "backup-signing-key-not-opted-in", request(parent(status=st, backup=signed), live, ready3))
    # Issue 19.6: every backup restored into a throwaway server before it counts.
    write("sync", "backup-verify", request(parent(status=st, backup=dict(PVC_BACKUP, verify=True)), live, ready3))
    # Issue 19.3: the binary log archive, a CronJob of its own; scheduled backups copy
    # no binary logs then.
    write("sync", "binlog-archive-pvc", request(parent(status=st, backup=dict(PVC_BACKUP, binlogSchedule="*/5 * * * *")),
                                                live, ready3))
    write("sync", "binlog-archive-s3", request(parent(status=st, backup=dict(S3_BACKUP, binlogSchedule="*/5 * * * *")),
                                               live, with_s3_secret(ready3)))
    # Issue 30.2: with a signing key, the archive's retention believes only signed backups.
    write("sync", "binlog-archive-signed", request(parent(status=st, backup=dict(signed, binlogSchedule="*/5 * * * *")),
                                                   live, with_signing_key(ready3)))
    write("sync", "binlog-archive-invalid-schedule", request(
        parent(status=st, backup=dict(PVC_BACKUP, binlogSchedule="*/5 61 * * *")), live, ready3))
    arch = response_of("sync", "binlog-archive-pvc")
    if arch is not None:
        arch_live = observed(arch["children"])
        archived = json.dumps({"result": "archived", "primary": "db-0", "identity": "3e11fa47-71ca-11e1-9e33-c80aa9429562",
                               "archived": ["binlog.000042"], "pruned": 0, "until": "2026-11-29 03:04:58"},
                              separators=(",", ":"))
        ok = script_pod("db-binlog-29932024", cluster_job_labels("binlog"), [("binlog", 0, archived)], "Succeeded",
                        main="binlog", finished="2026-11-29T03:05:01Z")
        err = json.dumps({"result": "error", "reason": "no-primary", "message": "no member is writable"},
                         separators=(",", ":"))
        failed = [script_pod("db-binlog-29932025", cluster_job_labels("binlog"), [("binlog", 1, err)], "Failed",
                             main="binlog", name_suffix=s, finished="2026-11-29T03:10:0%dZ" % i)
                  for i, s in enumerate(["a1b2c", "d3e4f", "g5h6i"])]
        write("sync", "binlog-archive-last-failed", request(
            parent(status=arch["status"], backup=dict(PVC_BACKUP, binlogSchedule="*/5 * * * *")), arch_live,
            related(*pods([True, True, True]), ok, *failed)))
    cron = response_of("sync", "backup-cronjob-pvc")
    if cron is not None:
        cron_live = observed(cron["children"])
        ok = script_pod("db-backup-29932020", cluster_job_labels("backup"), [("backup", 0, backed_up("db-backup-29932020"))],
                        "Succeeded", finished="2026-11-29T03:00:43Z")
        write("sync", "backup-last-succeeded", request(parent(status=cron["status"], backup=PVC_BACKUP), cron_live,
                                                        related(*pods([True, True, True]), ok)))
        # Lifecycle review 14: spec.backup.storage changed (another prefix) after the
        # run; its pod's annotation names where it wrote, and the status says that.
        ok_annotated = copy.deepcopy(ok)
        ok_annotated["metadata"]["annotations"] = {"mysqlhook.dev/store": "pvc://mysql-backups/shop/db"}
        moved = copy.deepcopy(PVC_BACKUP)
        moved["storage"]["persistentVolumeClaim"]["prefix"] = "shop/db-v2"
        write("sync", "backup-last-succeeded-storage-changed", request(
            parent(status=cron["status"], backup=moved), cron_live, related(*pods([True, True, True]), ok_annotated)))
        # A run stopped at its deadline: its pods are gone, the CronJob's status tells.
        deadline_live = copy.deepcopy(cron_live)
        deadline_live["CronJob.batch/v1"]["shop/db-backup"]["status"] = {
            "lastScheduleTime": "2026-11-29T03:00:00Z", "lastSuccessfulTime": "2026-11-28T03:00:44Z"}
        write("sync", "backup-deadline-exceeded", request(parent(status=cron["status"], backup=PVC_BACKUP), deadline_live,
                                                           related(*pods([True, True, True]))))
        done = response_of("sync", "backup-last-succeeded")
        if done is not None:
            err = json.dumps({"result": "error", "reason": "no-source",
                              "message": "no healthy replica and primary 'db-0' does not answer"}, separators=(",", ":"))
            failed = [script_pod("db-backup-29932500", cluster_job_labels("backup"), [("backup", 1, err)], "Failed",
                                 name_suffix=s, finished="2026-11-29T11:0%d:10Z" % i)
                      for i, s in enumerate(["a1b2c", "d3e4f", "g5h6i"])]
            # The succeeded Job's pods are gone (CronJob history); status remembers it.
            write("sync", "backup-last-failed", request(parent(status=done["status"], backup=PVC_BACKUP), cron_live,
                                                         related(*pods([True, True, True]), *failed)))
            write("sync", "backup-retry-pending", request(parent(status=done["status"], backup=PVC_BACKUP), cron_live,
                                                           related(*pods([True, True, True]), failed[0])))

    # Restore into a new cluster.
    nightly_ok = {"phase": "Succeeded", "startTime": "2026-11-28T23:00:00Z", "completionTime": "2026-11-28T23:01:10Z",
                  "name": "nightly-backup-a41c2", "location": "pvc://mysql-backups/old/nightly-backup-a41c2",
                  "storage": {"persistentVolumeClaim": {"claimName": "mysql-backups", "prefix": "old"}},
                  "bytes": 73400320, "source": "old-1", "gtid": "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-4711",
                  "flavor": "mysql"}
    from_backup = {"backup": "nightly"}
    def with_backups(rel, *bs):
        rel = copy.deepcopy(rel)
        rel["MySQLBackup.mysqlhook.dev/v1alpha1"] = {f"{NS}/{b['metadata']['name']}": b for b in bs}
        return rel
    write("sync", "restore-waiting-for-backup", request(parent(restore=from_backup), None, with_backups(related())))
    new_r = response_of("sync", "restore-waiting-for-backup")
    if new_r is not None:
        nightly = mysql_backup(status=nightly_ok)
        new_live = observed(new_r["children"])
        write("sync", "restore-running", request(parent(restore=from_backup, status=new_r["status"]), new_live,
                                                  with_backups(related(*pods([True, True, False])), nightly)))
        rr = response_of("sync", "restore-running")
        if rr is not None:
            restore_jobs = [j["metadata"]["name"] for j in jobs_of(rr)] + ["db-restore-2-" + jobs_of(rr)[0]["metadata"]["name"][-5:]]
            # Restore pods run restore.sh in steps: restore-check and restore-load (init), then restore.
            steps = ["restore-check", "restore-load"]
            checked = json.dumps({"result": "checked", "pod": "db-0", "dump": "dump.sql.gz", "bytes": 318767104,
                                  "binlogs": 0, "marker": ""}, separators=(",", ":"))
            loaded = json.dumps({"result": "loaded", "pod": "db-0", "dump": "dump.sql.gz", "bytes": 318767104,
                                 "seconds": 98}, separators=(",", ":"))
            restored = lambda j, i: script_pod(j, cluster_job_labels("restore"), [("restore-check", 0, checked), ("restore-load", 0, loaded), ("restore", 0, json.dumps(
                {"result": "restored", "pod": f"db-{i}", "from": "/backups/old/nightly-backup-a41c2", "pitr": False,
                 "gtid": "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-4711"}, separators=(",", ":")))], "Succeeded", main="restore", init=steps)
            all_jobs = list(rr["children"]) + [dict(jobs_of(rr)[0], metadata=dict(jobs_of(rr)[0]["metadata"], name=restore_jobs[2]))]
            # Where each server's restore stands: db-0 has loaded and finishes, db-1
            # loads, db-2's pod has not started a container yet.
            write("sync", "restore-progress", request(
                parent(restore=from_backup, status=rr["status"]),
                observed(all_jobs, {j: "running" for j in restore_jobs}),
                with_backups(related(*pods([True, True, True]),
                                     script_pod(restore_jobs[0], cluster_job_labels("restore"), [("restore-check", 0, checked), ("restore-load", 0, loaded), ("restore", None, None)], "Running", main="restore", init=steps),
                                     script_pod(restore_jobs[1], cluster_job_labels("restore"), [("restore-check", 0, checked), ("restore-load", None, None)], "Pending", main="restore", init=steps),
                                     script_pod(restore_jobs[2], cluster_job_labels("restore"), [], "Pending", main="restore", init=steps)),
                             nightly)))
            # Lifecycle review 16: a config edit while restore Jobs run: the new
            # template waits (a restart would kill the loads).
            write("sync", "restore-spec-edited", request(
                parent(restore=from_backup, status=rr["status"], config={"max_connections": "800"}),
                observed(all_jobs, {j: "running" for j in restore_jobs}),
                with_backups(related(*pods([True, True, True]),
                                     script_pod(restore_jobs[0], cluster_job_labels("restore"), [("restore-check", 0, checked), ("restore-load", 0, loaded), ("restore", None, None)], "Running", main="restore", init=steps)),
                             nightly)))
            # Issue 34.3: spec.restore removed in the middle (a manifest re-applied
            # without it): the restore Jobs stay and no bootstrap runs over
            # half-loaded servers.
            write("sync", "restore-spec-removed", request(
                parent(status=rr["status"]),
                observed(all_jobs, {j: "running" for j in restore_jobs}),
                with_backups(related(*pods([True, True, True]),
                                     script_pod(restore_jobs[0], cluster_job_labels("restore"), [("restore-check", 0, checked), ("restore-load", 0, loaded), ("restore", None, None)], "Running", main="restore", init=steps)),
                             nightly)))
            # The MySQLBackup deleted in the middle: the recorded store and name carry on,
            # and the running restore Jobs are not deleted.
            write("sync", "restore-backup-deleted", request(
                parent(restore=from_backup, status=rr["status"]), observed(rr["children"]),
                with_backups(related(*pods([True, True, True]), restored(restore_jobs[0], 0)))))
            forgotten = copy.deepcopy(rr["status"])
            forgotten["restore"].pop("storage", None)
            forgotten["restore"].pop("name", None)
            write("sync", "restore-backup-deleted-unrecorded", request(
                parent(restore=from_backup, status=forgotten), observed(rr["children"]),
                with_backups(related(*pods([True, True, True])))))
            write("sync", "restore-done", request(
                parent(restore=from_backup, status=rr["status"]),
                observed(all_jobs, {j: "succeeded" for j in restore_jobs}),
                with_backups(related(*pods([True, True, True]), *[restored(j, i) for i, j in enumerate(restore_jobs)]), nightly)))
            bad = json.dumps({"result": "error", "reason": "corrupt", "pod": "db-1",
                              "message": "checksum mismatch in /backups/old/nightly-backup-a41c2"}, separators=(",", ":"))
            write("sync", "restore-failed", request(
                parent(restore=from_backup, status=rr["status"]),
                observed(all_jobs, {restore_jobs[0]: "succeeded", restore_jobs[1]: "failed", restore_jobs[2]: "running"}),
                with_backups(related(*pods([True, True, True]), restored(restore_jobs[0], 0),
                                     script_pod(restore_jobs[1], cluster_job_labels("restore"), [("restore-check", 1, bad)], "Failed", main="restore", init=steps)),
                             nightly)))
            rd = response_of("sync", "restore-done")
            if rd is not None:
                # Removed once every server is restored: nothing half-loaded, bootstrap goes on.
                write("sync", "restore-spec-removed-after-done", request(
                    parent(status=rd["status"]),
                    observed(all_jobs, {j: "succeeded" for j in restore_jobs}),
                    with_backups(related(*pods([True, True, True]), *[restored(j, i) for i, j in enumerate(restore_jobs)]), nightly)))
                bj = [j for j in jobs_of(rd) if "-bootstrap-" in j["metadata"]["name"]]
                if bj:
                    boot = bj[0]["metadata"]["name"]
                    write("sync", "restore-bootstrapped", request(
                        parent(restore=from_backup, status=rd["status"]),
                        observed(rd["children"], dict({j: "succeeded" for j in restore_jobs}, **{boot: "succeeded"})),
                        with_backups(related(*pods([True, True, True]), job_pod(boot, "bootstrap",
                                     '{"result":"bootstrapped","primary":"db-0","semiSync":true}')), nightly)))
                    # The same sync with a stale parent: its status from before the last
                    # restore Job succeeded (Metacontroller's cache lags the status write).
                    rp = response_of("sync", "restore-progress")
                    if rp is not None:
                        write("sync", "restore-bootstrapped-stale-status", request(
                            parent(restore=from_backup, status=rp["status"]),
                            observed(rd["children"], dict({j: "succeeded" for j in restore_jobs}, **{boot: "succeeded"})),
                            with_backups(related(*pods([True, True, True]), job_pod(boot, "bootstrap",
                                         '{"result":"bootstrapped","primary":"db-0","semiSync":true}')), nightly)))
    s3_restore = {"storage": {"s3": {"bucket": "db-backups", "prefix": "shop/db", "credentialsSecret": "backup-s3",
                                     "endpoint": "https://minio.storage.svc:9000"}},
                  "name": "db-backup-29932020", "pointInTime": "2026-11-29T09:30:00Z", "binlogsFrom": "db-backup-29932500",
                  "timeoutSeconds": 86400}
    if new_r is not None:
        write("sync", "restore-pitr-s3", request(parent(restore=s3_restore, status=new_r["status"]), observed(new_r["children"]),
                                                  with_s3_secret(related(*pods([True, False, False])))))
        write("sync", "restore-pitr-s3-signed", request(
            parent(restore=dict(s3_restore, signingKey={"name": "backup-signing"}), status=new_r["status"]),
            observed(new_r["children"]), with_signing_key(with_s3_secret(related(*pods([True, False, False]))))))
        # Issue 19.3: no binlogsFrom, so the binary log archive (downloaded with the backup).
        archive_restore = {k: v for k, v in s3_restore.items() if k != "binlogsFrom"}
        write("sync", "restore-pitr-s3-archive", request(
            parent(restore=archive_restore, status=new_r["status"]), observed(new_r["children"]),
            with_s3_secret(related(*pods([True, False, False])))))
        pvc_archive_restore = {"storage": {"persistentVolumeClaim": {"claimName": "mysql-backups"}},
                               "name": "db-backup-29932020", "pointInTime": "2026-11-29T09:30:00Z"}
        write("sync", "restore-pitr-pvc-archive", request(
            parent(restore=pvc_archive_restore, status=new_r["status"]), observed(new_r["children"]),
            related(*pods([True, False, False]))))
        # Lifecycle review 20: the restore pods' containers with the user's resources.
        write("sync", "restore-pitr-s3-resources", request(
            parent(restore=dict(s3_restore, resources={"requests": {"cpu": "2", "memory": "1Gi"}}),
                   status=new_r["status"]),
            observed(new_r["children"]), with_s3_secret(related(*pods([True, False, False])))))
        # Lifecycle review 17: MariaDB before 10.8 cannot replay from a GTID
        # position: refused before any server loads the dump.
        write("sync", "restore-pitr-mariadb-too-old", request(
            parent(restore=pvc_archive_restore, flavor="mariadb", version="10.6.20"), None, related()))
        # Issue 19.7: four clients load the dump; the load step gets a sized work volume.
        write("sync", "restore-parallel", request(
            parent(restore={"storage": {"persistentVolumeClaim": {"claimName": "mysql-backups"}},
                            "name": "db-backup-29932020", "parallel": 4}, status=new_r["status"]),
            observed(new_r["children"]), related(*pods([True, False, False]))))
        write("sync", "restore-pvc-not-opted-in", request(
            parent(restore={"storage": {"persistentVolumeClaim": {"claimName": "mysql-backups"}},
                            "name": "db-backup-29932020"}, status=new_r["status"]),
            observed(new_r["children"]), dict(related(*pods([True, False, False])), **{NO_STORE_CLAIM: True})))
        evil_restore = copy.deepcopy(s3_restore)
        evil_restore["storage"]["s3"]["endpoint"] = "https://evil.example"
        write("sync", "restore-s3-endpoint-not-allowed", request(
            parent(restore=evil_restore, status=new_r["status"]), observed(new_r["children"]),
            with_s3_secret(related(*pods([True, False, False])))))
        write("sync", "restore-s3-credentials-not-opted-in", request(
            parent(restore=s3_restore, status=new_r["status"]), observed(new_r["children"]),
            related(*pods([True, False, False]))))

    # Finalize with deletionPolicy Backup.
    write("finalize", "backup-policy-kept", request(deleting(deletionPolicy="Backup"), live,
                                                    related(*pods([True, True, True])), True))
    write("finalize", "backup-job-emitted", request(deleting(deletionPolicy="Backup", backup=PVC_BACKUP), live,
                                                    related(*pods([True, True, True])), True))
    write("finalize", "backup-s3-job-emitted", request(deleting(deletionPolicy="Backup", backup=S3_BACKUP), live,
                                                       with_s3_secret(related(*pods([True, True, True]))), True))
    write("finalize", "backup-s3-refused", request(deleting(deletionPolicy="Backup", backup=S3_BACKUP), live,
                                                   related(*pods([True, True, True])), True))
    emitted = response_of("finalize", "backup-job-emitted")
    if emitted is not None:
        fj = [j for j in jobs_of(emitted) if "-final-backup-" in j["metadata"]["name"]][0]
        fname = fj["metadata"]["name"]
        with_job = observed(running["children"] + [fj], kept_done(running["children"]))
        def deleting_with(status):
            p = deleting(deletionPolicy="Backup", backup=PVC_BACKUP)
            p["status"] = status
            return p
        write("finalize", "backup-job-running", request(deleting_with(emitted["status"]), with_job,
                                                        related(*pods([True, True, True]), script_pod(fname, cluster_job_labels("final-backup"), [("backup", None, None)], "Running")), True))
        # Issue 34.5: the primary restarted during the final backup and came back
        # read-only: the final backup needs a writable primary, so failover works
        # while deleting (and only then: nothing else starts).
        restarted = [server_pod("db-0", 0, False, "2026-11-29T11:59:00Z"), server_pod("db-1", 1, True), server_pod("db-2", 2, True)]
        write("finalize", "backup-primary-restarted", request(deleting_with(emitted["status"]), with_job,
                                                              related(*restarted, script_pod(fname, cluster_job_labels("final-backup"), [("backup", None, None)], "Running")), True))
        write("finalize", "retain-primary-restarted", request(deleting(), live, related(*restarted), True))
        ok = script_pod(fname, cluster_job_labels("final-backup"), [("backup", 0, backed_up(fname, finished="2026-11-29T11:59:40Z"))], "Succeeded")
        write("finalize", "backup-succeeded", request(deleting_with(emitted["status"]), observed(running["children"] + [fj], {fname: "succeeded", **kept_done(running["children"])}),
                                                      related(*pods([True, True, True]), ok), True))
        err = json.dumps({"result": "error", "reason": "script-failed", "message": "backup: line 61: dump_cmd (exit 2)"}, separators=(",", ":"))
        write("finalize", "backup-failed", request(deleting_with(emitted["status"]), observed(running["children"] + [fj], {fname: "failed", **kept_done(running["children"])}),
                                                   related(*pods([True, True, True]), script_pod(fname, cluster_job_labels("final-backup"), [("backup", 2, err)], "Failed")), True))
        succ = response_of("finalize", "backup-succeeded")
        if succ is not None:
            write("finalize", "backup-done", request(deleting_with(succ["status"]), observed([fj], {fname: "succeeded"}),
                                                     related(ok), True))

    # MySQLBackup.
    backup_cluster = parent(status=st, backup=PVC_BACKUP)
    write("backup-sync", "pending-no-cluster", backup_request(mysql_backup()))
    write("backup-sync", "pending-no-storage", backup_request(mysql_backup(), mysqls=[parent(status=st)], pods=pods([True, True, True])))
    write("backup-sync", "pending-not-initialized", backup_request(mysql_backup(), mysqls=[parent(backup=PVC_BACKUP)]))
    write("backup-sync", "running-from-replica", backup_request(mysql_backup(), mysqls=[backup_cluster],
                                                                 pods=pods([True, False, True])))
    # spec.tls with clients verifying (the cluster's config ConfigMap says so): the Job
    # verifies too, with the CA alone.
    tls_cluster = parent(status=st, backup=PVC_BACKUP, tls={"secretName": "db-tls"})
    verify_cm = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "db-config", "namespace": NS}, "data": {"tls": "verify"}}
    write("backup-sync", "running-tls-verify", backup_request(mysql_backup(), mysqls=[tls_cluster],
                                                               pods=pods([True, True, True]), config_maps=[verify_cm]))
    write("backup-sync", "running-no-replica-ready", backup_request(mysql_backup(), mysqls=[backup_cluster],
                                                                     pods=pods([True, False, False])))
    s3_cluster = parent(status=st, backup=S3_BACKUP)
    write("backup-sync", "running-s3", backup_request(mysql_backup(), mysqls=[s3_cluster], pods=pods([True, True, True]),
                                                      secrets=[S3_SECRET]))
    write("backup-sync", "s3-credentials-not-opted-in", backup_request(mysql_backup(), mysqls=[s3_cluster],
                                                                       pods=pods([True, True, True])))
    account_request = backup_request(mysql_backup(), mysqls=[parent(status=st, backup=s3_by_account(S3_BACKUP))],
                                     pods=pods([True, True, True]))
    account_request["related"]["ServiceAccount.v1"] = {f"{NS}/backup-irsa": copy.deepcopy(S3_ACCOUNT)}
    write("backup-sync", "running-s3-service-account", account_request)
    rb = response_of("backup-sync", "running-from-replica")
    if rb is not None and jobs_of(rb):
        bjob = jobs_of(rb)[0]
        bname = bjob["metadata"]["name"]
        def observed_job(state):
            o = observed([bjob], {bname: state})["Job.batch/v1"]
            for j in o.values():
                j["metadata"]["ownerReferences"][0].update({"kind": "MySQLBackup", "name": "nightly", "uid": BACKUP_UID})
            return list(o.values())
        blabels = {"app.kubernetes.io/name": "mysql", "app.kubernetes.io/managed-by": "mysql-hook",
                   "app.kubernetes.io/component": "backup", "mysqlhook.dev/mysqlbackup": "nightly",
                   "mysqlhook.dev/purpose": "backup"}
        running_b = mysql_backup(status=dict(rb["status"], startTime="2026-11-29T11:57:58Z"))
        write("backup-sync", "running-job-observed", backup_request(running_b, observed_job("running"), [backup_cluster],
                                                                    pods([True, True, True]) + [script_pod(bname, blabels, [("backup", None, None)], "Running")]))
        write("backup-sync", "succeeded", backup_request(running_b, observed_job("succeeded"), [backup_cluster],
                                                         pods([True, True, True]) + [script_pod(bname, blabels, [("backup", 0, backed_up(bname, source="db-2", finished="2026-11-29T11:58:19Z"))], "Succeeded")]))
        # Lifecycle review 14: the cluster's store changed while the backup ran; the
        # Job (OnDelete) wrote to the store it was started with, and so says the status.
        moved = parent(status=st, backup=dict(PVC_BACKUP, storage={"persistentVolumeClaim": {"claimName": "other-backups"}}))
        write("backup-sync", "succeeded-storage-changed", backup_request(running_b, observed_job("succeeded"), [moved],
                                                                         pods([True, True, True]) + [script_pod(bname, blabels, [("backup", 0, backed_up(bname, source="db-2", finished="2026-11-29T11:58:19Z"))], "Succeeded")]))
        err = json.dumps({"result": "error", "reason": "exists", "message": f"/backups/db/{bname} exists but is incomplete (no result.json); remove it first"}, separators=(",", ":"))
        write("backup-sync", "failed", backup_request(running_b, observed_job("failed"), [backup_cluster],
                                                      pods([True, True, True]) + [script_pod(bname, blabels, [("backup", 1, err)], "Failed")]))
        write("backup-sync", "cluster-deleted-during-backup", backup_request(running_b, observed_job("running"), [],
                                                                             [script_pod(bname, blabels, [("backup", None, None)], "Running")]))
        # Issue 19.6: spec.verify. The Job restores the backup into a throwaway
        # server before it counts; the status says it did, or why it failed.
        write("backup-sync", "running-verify", backup_request(mysql_backup(verify=True), mysqls=[backup_cluster],
                                                               pods=pods([True, False, True])))
        rv = response_of("backup-sync", "running-verify")
        if rv is not None and jobs_of(rv):
            vjob = jobs_of(rv)[0]
            vname = vjob["metadata"]["name"]
            vobs = observed([vjob], {vname: "succeeded"})["Job.batch/v1"]
            for j in vobs.values():
                j["metadata"]["ownerReferences"][0].update({"kind": "MySQLBackup", "name": "nightly", "uid": BACKUP_UID})
            verified = json.loads(backed_up(vname, source="db-2", finished="2026-11-29T11:58:19Z"))
            verified.update({"verifiedTables": 12, "verifySeconds": 41, "verified": True})
            running_v = mysql_backup(status=dict(rv["status"], startTime="2026-11-29T11:57:58Z"), verify=True)
            write("backup-sync", "succeeded-verified", backup_request(
                running_v, list(vobs.values()), [backup_cluster],
                pods([True, True, True]) + [script_pod(vname, blabels, [("backup", 0, json.dumps(verified, separators=(",", ":")))], "Succeeded")]))
            for j in vobs.values():
                j["status"] = observed([vjob], {vname: "failed"})["Job.batch/v1"][next(iter(vobs))]["status"]
            verr = json.dumps({"result": "error", "reason": "verify-failed", "message": "the backup did not restore into a throwaway server: the backup does not restore: script-failed: restore: line 112: sql_stdin (exit 1)"}, separators=(",", ":"))
            write("backup-sync", "failed-verification", backup_request(
                running_v, list(vobs.values()), [backup_cluster],
                pods([True, True, True]) + [script_pod(vname, blabels, [("backup", 1, verr)], "Failed")]))
        sb = response_of("backup-sync", "succeeded")
        if sb is not None:
            write("backup-sync", "succeeded-kept", backup_request(mysql_backup(status=sb["status"]), observed_job("succeeded"), [backup_cluster], pods([True, True, True])))
    write("backup-customize", "backup", {"controller": BACKUP_CONTROLLER, "parent": mysql_backup()})
    write("customize", "restore-from-backup", {"controller": CONTROLLER, "parent": parent(restore={"backup": "nightly"})})


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

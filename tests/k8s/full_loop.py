#!/usr/bin/env python3
"""The full loop: a real Metacontroller drives mysql-hook against a real control plane.

Starts, all on loopback with free ports and all torn down on exit whatever happens:

- etcd + kube-apiserver (harness.py),
- kube-controller-manager (StatefulSet, Job, EndpointSlice, garbage collector,
  service account and PV binder controllers) and kube-scheduler,
- kwok, which plays the kubelet: it initialises fake nodes, makes scheduled pods
  Running and Ready with a fake pod IP, and completes Job pods (exit 0 with a
  termination message),
- the hook (``mysql-hook serve --listen 127.0.0.1:<port>``),
- Metacontroller out of cluster (``--kubeconfig``): built by
  ``build-components.sh --full`` from its source tree (``MYSQL_HOOK_METACONTROLLER_SRC``,
  ``../shared/metacontroller`` or ``/work/shared/metacontroller``), or
  ``METACONTROLLER_BIN`` when set (start-up code shared with the real-server loop:
  components.py).

It installs Metacontroller's CRDs (the source tree's
``manifests/metacontroller-crds-v1.yaml``, or ``METACONTROLLER_CRDS``: a file or a
directory of YAML), our CRDs and our two CompositeControllers (``MySQL``, ``MySQLBackup``) with
their hook URLs pointed at the local hook, then walks one cluster through its life
(``SCENARIOS`` below: a list of functions, so later features add their own steps)
and asserts at each step, with a timeout and a message that says what was expected
and what was seen.

    [METACONTROLLER_BIN=/path/to/metacontroller METACONTROLLER_CRDS=/path/to/crds.yaml] \\
    python3 tests/k8s/full_loop.py [--hook-bin target/debug/mysql-hook]
        [--capture-fixtures] [--quiet-seconds 20]

Other knobs: ``MYSQL_HOOK_BIN`` (the hook binary; default: the newest of
target/{debug,release}/mysql-hook), ``MYSQL_HOOK_K8S_LOGS`` (copy every component's
log there on teardown), ``MYSQL_HOOK_K8S_BIN_DIR`` (prebuilt control plane
binaries). Without the kube-controller-manager, kube-scheduler and kwok binaries,
``build-components.sh --full`` builds them first.

``--capture-fixtures`` runs Metacontroller with ``--zap-log-level=6`` (it then logs
every hook request body) and stores one sync request of the Running cluster and one
finalize request as test-fixtures/sync/captured-running/request.json and
test-fixtures/finalize/captured-deleting/request.json.

Exit status 0 only when every step passed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

sys.dont_write_bytecode = True  # no __pycache__ in the work tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import components  # noqa: E402
from components import wait_http  # noqa: E402
from harness import (  # noqa: E402
    REPO, ApiError, Cluster, HarnessError, _die_with_parent, free_ports,
)

NAMESPACE = "demo"
NAME = "db"
REPLICAS = 3
API = "mysqlhook.dev/v1alpha1"
CC_NAME = "mysql-hook"
FINALIZER = f"metacontroller.io/compositecontroller-{CC_NAME}"
BACKUP_CC_NAME = "mysql-hook-backup"
# The backup store: a claim on the fourth (spare) volume, and a MySQLBackup of the cluster.
BACKUP_CLAIM = "backups"
BACKUP_NAME = "before-upgrade"
# What kwok's stage reports as a backup's size.
BACKUP_BYTES = 1048576
# The CompositeController's periodic resync, shortened so that the quiet period sees
# several syncs of a Running cluster (the shipped manifest says 60 s).
RESYNC_PERIOD_SECONDS = 5
NODES = ("kwok-node-0", "kwok-node-1", "kwok-node-2")
POD_CIDR = "10.244.0.0/24"
STORAGE = "1Gi"
# Backups go under <namespace>/<name> of the store unless spec.backup names a prefix.
BACKUP_PREFIX = f"{NAMESPACE}/{NAME}"
DATA_CLAIM = "data"  # the StatefulSet's claim template (hooks/src/model.rs DATA_VOLUME)

T0 = time.monotonic()


def say(msg: str) -> None:
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", flush=True)


class StepFailed(Exception):
    """A scenario step's expectation was not met."""


# ------------------------------------------------------------------ kwok stages
# Our own minimal stages (kwok ships none built in): nodes become Ready with plenty
# of room; pods scheduled to them become Running and Ready with an IP from --cidr;
# a Job's pod exits 0 with a termination message like the Job scripts write (a
# final backup's pod only once the test labels it full-loop/outcome=succeed, or
# fails it with =fail); pods being deleted go away at once.
KWOK_STAGES_TEMPLATE = r"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: node-ready}
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ["True"]
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $now | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
      addresses:
      - address: {{ NodeIP | Quote }}
        type: InternalIP
      - address: {{ NodeName | Quote }}
        type: Hostname
      allocatable: {cpu: "64", memory: 256Gi, pods: "110"}
      capacity: {cpu: "64", memory: 256Gi, pods: "110"}
      nodeInfo:
        architecture: amd64
        operatingSystem: linux
        kubeletVersion: fake
        kubeProxyVersion: fake
        containerRuntimeVersion: fake
        kernelVersion: fake
        osImage: fake
        machineID: ""
        bootID: ""
        systemUUID: ""
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-ready}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: DoesNotExist}
    - {key: '.status.phase', operator: In, values: [Pending]}
    - {key: '.metadata.labels["full-loop/not-ready"]', operator: DoesNotExist}
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ["True"]
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Initialized}
      - {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Ready}
      - {lastTransitionTime: {{ $now | Quote }}, status: "True", type: ContainersReady}
      - {lastTransitionTime: {{ $now | Quote }}, status: "True", type: PodScheduled}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        started: true
        restartCount: 0
        state: {running: {startedAt: {{ $now | Quote }}}}
      {{ end }}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}}
      {{ end }}
      {{ with NodeIPsWith .spec.nodeName }}
      hostIP: {{ index . 0 | Quote }}
      {{ end }}
      {{ with PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
      podIP: {{ index . 0 | Quote }}
      podIPs:
      {{ range . }}
      - ip: {{ . | Quote }}
      {{ end }}
      {{ end }}
      phase: Running
      startTime: {{ $now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: job-pod-complete}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: DoesNotExist}
    - {key: '.status.phase', operator: In, values: [Running]}
    - {key: '.metadata.ownerReferences.[].kind', operator: In, values: [Job]}
    # Final backups end only when the test says how (below).
    - {key: '.metadata.labels["mysqlhook.dev/purpose"]', operator: NotIn, values: [final-backup]}
  next:
    statusTemplate: |
@JOB_POD_ENDS@
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: final-backup-pod-ends-on-request}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: DoesNotExist}
    - {key: '.status.phase', operator: In, values: [Running]}
    - {key: '.metadata.ownerReferences.[].kind', operator: In, values: [Job]}
    - {key: '.metadata.labels["mysqlhook.dev/purpose"]', operator: In, values: [final-backup]}
    - {key: '.metadata.labels["full-loop/outcome"]', operator: In, values: [succeed, fail]}
  next:
    statusTemplate: |
@JOB_POD_ENDS@
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-delete}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: Exists}
  next:
    delete: true
"""


# How a Job pod ends: exit 0 with the result line its script would write, chosen by
# the pod's purpose from its env; or, when the test labels it full-loop/outcome=fail,
# exit 1 with an error line. A backup reads from the first pod in PODS that is not
# PRIMARY, as backup.sh does with healthy replicas (the hook orders PODS).
JOB_POD_ENDS = r"""
{{ $now := Now }}
{{ $stamp := dateInZone "2006-01-02T15:04:05Z07:00" now "UTC" }}
{{ $env := dict }}
{{ range (index .spec.containers 0).env }}{{ $_ := set $env .name (.value | default "") }}{{ end }}
{{ $primary := get $env "PRIMARY" }}
{{ $target := get $env "TARGET" }}
{{ $source := "" }}
{{ range splitList " " (get $env "PODS") }}{{ $n := first (splitList "=" .) }}{{ if and (not $source) (ne $n $primary) }}{{ $source = $n }}{{ end }}{{ end }}
{{ $purpose := index .metadata.labels "mysqlhook.dev/purpose" }}
{{ $msg := printf "{\"result\":\"bootstrapped\",\"primary\":\"%s\"}" $primary }}
{{ if eq $purpose "failover" }}{{ $msg = printf "{\"result\":\"promoted\",\"primary\":\"%s\",\"from\":\"%s\"}" (ternary "db-2" "db-1" (eq $primary "db-1")) $primary }}{{ end }}
{{ if eq $purpose "switchover" }}{{ $msg = printf "{\"result\":\"switched\",\"primary\":\"%s\",\"from\":\"%s\"}" $target $primary }}{{ end }}
{{ if or (eq $purpose "backup") (eq $purpose "final-backup") }}{{ $msg = printf "{\"result\":\"backed-up\",\"source\":\"%s\",\"location\":\"%s/%s\",\"bytes\":%d,\"gtid\":\"%s:1-42\",\"startedAt\":\"%s\",\"finishedAt\":\"%s\",\"databases\":1,\"binlogs\":2}" $source (get $env "BACKUP_DIR") (get $env "BACKUP_NAME") 1048576 .metadata.uid $stamp $stamp }}{{ end }}
{{ $code := 0 }}
{{ if eq (index .metadata.labels "full-loop/outcome" | default "succeed") "fail" }}{{ $code = 1 }}{{ $msg = printf "{\"result\":\"error\",\"source\":\"%s\",\"reason\":\"dump-failed\",\"message\":\"mysqldump exited with 2 (failed by the full loop)\"}" $source }}{{ end }}
conditions:
- {lastTransitionTime: {{ $now | Quote }}, status: "False", type: Ready, reason: PodCompleted}
- {lastTransitionTime: {{ $now | Quote }}, status: "False", type: ContainersReady, reason: PodCompleted}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated:
      exitCode: {{ $code }}
      reason: {{ ternary "Completed" "Error" (eq $code 0) }}
      message: {{ $msg | Quote }}
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
phase: {{ ternary "Succeeded" "Failed" (eq $code 0) }}
"""
KWOK_STAGES = KWOK_STAGES_TEMPLATE.replace(
    "@JOB_POD_ENDS@\n", "".join(f"      {line}\n" if line else "\n" for line in JOB_POD_ENDS.strip("\n").split("\n")))


# ------------------------------------------------------------------ watching


class Watcher(components.Watch):
    """Records the watch events of one collection: (time, type, object)."""

    def __init__(self, k8s: Cluster, path: str, label: str):
        super().__init__(k8s, path, self._record)
        self.name = f"watch {label}"
        self.label = label
        self.events: list[tuple[float, str, dict]] = []
        self.lock = threading.Lock()

    def _record(self, typ: str, obj: dict) -> None:
        with self.lock:
            self.events.append((time.monotonic(), typ, obj))

    def since(self, t: float) -> list[tuple[float, str, dict]]:
        with self.lock:
            return [e for e in self.events if e[0] >= t]

    def seen(self, pred: Callable[[str, dict], bool]) -> list[dict]:
        with self.lock:
            return [o for _, typ, o in self.events if pred(typ, o)]


# ------------------------------------------------------------------ the loop


@dataclass
class Loop:
    """What every scenario step gets: the cluster, the components, shared facts."""

    k8s: Cluster
    hook_url: str
    mc_log: Path
    watchers: dict[str, Watcher] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    timings: list[tuple[str, float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    procs_ok: Callable[[], None] = lambda: None

    def wait(self, what: str, check: Callable[[], Any], timeout: float, interval: float = 0.25,
             detail: Callable[[], str] | None = None) -> Any:
        """Polls check() until it returns something truthy; fails after timeout with
        what was expected and the last thing seen (detail(), or check's exception)."""
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            self.procs_ok()
            try:
                got = check()
                if got:
                    return got
            except (ApiError, KeyError, IndexError, TypeError) as e:
                last = f"{type(e).__name__}: {e}"
            if time.monotonic() > deadline:
                seen = detail() if detail else last
                raise StepFailed(f"timed out after {timeout:.0f}s waiting for {what}" +
                                 (f"\n  last seen: {seen}" if seen else ""))
            time.sleep(interval)

    def mysql(self) -> dict | None:
        return self.k8s.get_or_none(API, "MySQL", NAME, NAMESPACE)

    def hook_metrics(self) -> dict[str, float]:
        return hook_metrics(self.hook_url)

    def hook_calls(self, hook: str) -> int:
        return int(sum(v for k, v in self.hook_metrics().items() if f'hook="{hook}"' in k))


def hook_metrics(hook_url: str) -> dict[str, float]:
    """`mysql_hook_requests_total`-style counters by their label text (bench/scale.py
    reads them too)."""
    with urllib.request.urlopen(f"{hook_url}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or "requests" not in line or "{" not in line:
            continue
        key, _, value = line.rpartition(" ")
        if "request_duration" in key or "in_flight" in key:
            continue
        try:
            out[key] = float(value)
        except ValueError:
            pass
    return out


def owned_by(obj: dict, uid: str) -> bool:
    return any(r.get("uid") == uid and r.get("controller") for r in obj["metadata"].get("ownerReferences") or [])


def condition(obj: dict | None, typ: str) -> dict:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == typ:
            return c
    return {}


def short_status(obj: dict | None) -> str:
    if obj is None:
        return "the MySQL does not exist"
    st = obj.get("status") or {}
    conds = ", ".join(f"{c.get('type')}={c.get('status')}({c.get('reason')})" for c in st.get("conditions") or [])
    return (f"phase={st.get('phase')} primary={st.get('primary')} replicas={st.get('replicas')} "
            f"readyReplicas={st.get('readyReplicas')} conditions=[{conds}]")


# ------------------------------------------------------------------ scenarios
# Each step takes the Loop, asserts, and raises StepFailed with a clear message.
# Later features (failover, backups, upgrades) add their functions to SCENARIOS.

CHILDREN = [
    ("apps/v1", "StatefulSet", NAME),
    ("v1", "Service", f"{NAME}-primary"),
    ("v1", "Service", f"{NAME}-replicas"),
    ("v1", "Service", f"{NAME}-headless"),
    ("v1", "ConfigMap", f"{NAME}-config"),
    ("v1", "Secret", f"{NAME}-credentials"),
    ("policy/v1", "PodDisruptionBudget", NAME),
    ("discovery.k8s.io/v1", "EndpointSlice", f"{NAME}-replicas"),
]


def create_cluster(loop: Loop) -> None:
    """Create a backup claim and a three-server MySQL backing up to it, deletionPolicy Backup."""
    loop.k8s.ensure_namespace(NAMESPACE)
    loop.k8s.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     # opted in as a backup store by its owner (issue 30.5)
                     "metadata": {"name": BACKUP_CLAIM, "namespace": NAMESPACE,
                                  "labels": {"mysqlhook.dev/backup-store": "true"}},
                     "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": STORAGE}}}})
    obj = {
        "apiVersion": API, "kind": "MySQL",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {"replicas": REPLICAS, "version": "8.4.3", "storage": {"size": STORAGE},
                 "deletionPolicy": "Backup",
                 "backup": {"storage": {"persistentVolumeClaim": {"claimName": BACKUP_CLAIM}}}},
    }
    created = loop.k8s.create(obj)
    loop.facts["uid"] = created["metadata"]["uid"]
    loop.facts["created_at"] = time.monotonic()
    say(f"created PersistentVolumeClaim {BACKUP_CLAIM} and MySQL {NAMESPACE}/{NAME} uid {loop.facts['uid']} "
        "(deletionPolicy Backup, backups on the claim, no schedule)")


def children_exist(loop: Loop) -> None:
    """Every child exists, owned (controller ownerReference) by the MySQL."""
    uid = loop.facts["uid"]

    def missing() -> list[str]:
        out = []
        for api, kind, name in CHILDREN:
            o = loop.k8s.get_or_none(api, kind, name, NAMESPACE)
            if o is None:
                out.append(f"{kind} {name}: not found")
            elif not owned_by(o, uid):
                out.append(f"{kind} {name}: ownerReferences {o['metadata'].get('ownerReferences')} "
                           f"do not name the MySQL {uid} as controller")
        return out

    loop.wait("every child to exist with an owner reference to the MySQL", lambda: not missing(),
              timeout=60, detail=lambda: "; ".join(missing()) + f"; MySQL {short_status(loop.mysql())}")
    fin = (loop.mysql() or {}).get("metadata", {}).get("finalizers") or []
    if FINALIZER not in fin:
        raise StepFailed(f"the MySQL lacks Metacontroller's finalizer {FINALIZER}: {fin}")
    say(f"all {len(CHILDREN)} children exist and are owned by the MySQL; finalizer present")


def pod_ready(p: dict | None) -> bool:
    return bool(p) and condition(p, "Ready").get("status") == "True" and bool((p.get("status") or {}).get("podIP"))


def pods_ready(loop: Loop) -> None:
    """kwok makes the three server pods Running and Ready, each with an IP."""
    names = [f"{NAME}-{i}" for i in range(REPLICAS)]

    def state() -> str:
        out = []
        for n in names:
            p = loop.k8s.get_or_none("v1", "Pod", n, NAMESPACE)
            if p is None:
                out.append(f"{n}: absent")
            else:
                st = p.get("status") or {}
                out.append(f"{n}: phase={st.get('phase')} node={p['spec'].get('nodeName')} "
                           f"ready={condition(p, 'Ready').get('status')} ip={st.get('podIP')} "
                           f"scheduled={condition(p, 'PodScheduled').get('message') or condition(p, 'PodScheduled').get('status')}")
        return "; ".join(out)

    loop.wait("pods db-0..2 Running and Ready with an IP",
              lambda: all(pod_ready(loop.k8s.get_or_none("v1", "Pod", n, NAMESPACE)) for n in names),
              timeout=120, detail=state)
    ips = {n: loop.k8s.get("v1", "Pod", n, NAMESPACE)["status"]["podIP"] for n in names}
    if len(set(ips.values())) != len(ips):
        raise StepFailed(f"pods share IPs: {ips}")
    loop.facts["ips"] = ips
    loop.timings.append(("create -> all pods Ready", time.monotonic() - loop.facts["created_at"]))
    say(f"pods Ready: {ips}")


def bootstrap_job_completes(loop: Loop) -> None:
    """The hook emits the bootstrap Job; it runs and completes; Initialized turns True."""
    jobs = loop.watchers["jobs"]

    def bootstrap_jobs() -> list[dict]:
        return jobs.seen(lambda _t, o: o["metadata"]["name"].startswith(f"{NAME}-bootstrap-"))

    seen = loop.wait("the bootstrap Job to be created", bootstrap_jobs, timeout=60,
                     detail=lambda: short_status(loop.mysql()))
    job_name = seen[0]["metadata"]["name"]
    if not owned_by(seen[0], loop.facts["uid"]):
        raise StepFailed(f"Job {job_name} is not owned by the MySQL: {seen[0]['metadata'].get('ownerReferences')}")
    loop.wait(f"Job {job_name} to complete",
              lambda: [o for o in bootstrap_jobs() if condition(o, "Complete").get("status") == "True"],
              timeout=90, detail=lambda: json.dumps((bootstrap_jobs()[-1].get("status") or {})))
    init = loop.wait("condition Initialized=True on the MySQL",
                     lambda: condition(loop.mysql(), "Initialized").get("status") == "True" and loop.mysql(),
                     timeout=60, detail=lambda: short_status(loop.mysql()))
    c = condition(init, "Initialized")
    loop.facts["bootstrap_job"] = job_name
    say(f"bootstrap Job {job_name} completed; Initialized: {c.get('reason')}: {c.get('message')}")


def status_running(loop: Loop) -> None:
    """Status reaches Running: primary db-0, readyReplicas 3, Ready True; -primary selects db-0."""
    primary = f"{NAME}-0"

    def running() -> dict | None:
        m = loop.mysql()
        st = (m or {}).get("status") or {}
        ok = (st.get("phase") == "Running" and st.get("primary") == primary
              and st.get("readyReplicas") == REPLICAS and condition(m, "Ready").get("status") == "True")
        return m if ok else None

    m = loop.wait(f"phase Running, primary {primary}, readyReplicas {REPLICAS}, Ready=True", running,
                  timeout=90, detail=lambda: short_status(loop.mysql()))
    loop.facts["running_at"] = time.monotonic()
    loop.timings.append(("create -> Running", loop.facts["running_at"] - loop.facts["created_at"]))
    st = m["status"]
    if st.get("observedGeneration") != m["metadata"].get("generation"):
        raise StepFailed(f"status.observedGeneration {st.get('observedGeneration')} != "
                         f"metadata.generation {m['metadata'].get('generation')}")
    svc = loop.k8s.get("v1", "Service", f"{NAME}-primary", NAMESPACE)
    sel = svc["spec"].get("selector") or {}
    if sel.get("statefulset.kubernetes.io/pod-name") != primary:
        raise StepFailed(f"Service {NAME}-primary selects {sel}, not pod {primary}")
    pods = loop.k8s.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods",
                            params={"labelSelector": ",".join(f"{k}={v}" for k, v in sorted(sel.items()))})
    selected = sorted(p["metadata"]["name"] for p in pods["items"])
    if selected != [primary]:
        raise StepFailed(f"Service {NAME}-primary selector {sel} matches pods {selected}, want [{primary}]")
    # The endpointslice controller must publish the primary's IP for -primary.
    def primary_slice_ips() -> list[str]:
        lst = loop.k8s.request("GET", f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices",
                               params={"labelSelector": f"kubernetes.io/service-name={NAME}-primary"})
        return sorted(a for s in lst["items"] for e in s.get("endpoints") or [] for a in e.get("addresses") or [])

    want = [loop.facts["ips"][primary]]
    loop.wait(f"the {NAME}-primary Service's EndpointSlice to list {want}", lambda: primary_slice_ips() == want,
              timeout=30, detail=lambda: str(primary_slice_ips()))
    say(f"Running after {loop.timings[-1][1]:.1f}s: {short_status(m)}")
    say(f"{NAME}-primary selects {selected}, endpoints {want}")


def replica_endpoints(loop: Loop) -> None:
    """The hook-written -replicas EndpointSlice lists the two replicas' IPs, not the primary's."""
    ips = loop.facts["ips"]
    want = sorted(ips[f"{NAME}-{i}"] for i in range(1, REPLICAS))

    def got() -> list[str]:
        s = loop.k8s.get("discovery.k8s.io/v1", "EndpointSlice", f"{NAME}-replicas", NAMESPACE)
        return sorted(a for e in s.get("endpoints") or [] for a in e.get("addresses") or [])

    loop.wait(f"EndpointSlice {NAME}-replicas to list {want}", lambda: got() == want, timeout=30,
              detail=lambda: f"{got()} (pod IPs {ips})")
    s = loop.k8s.get("discovery.k8s.io/v1", "EndpointSlice", f"{NAME}-replicas", NAMESPACE)
    svc = loop.k8s.get("v1", "Service", f"{NAME}-replicas", NAMESPACE)
    label = (s["metadata"].get("labels") or {}).get("kubernetes.io/service-name")
    if label != svc["metadata"]["name"]:
        raise StepFailed(f"EndpointSlice {NAME}-replicas has kubernetes.io/service-name={label!r}")
    slice_ports = sorted((p.get("name"), p.get("port")) for p in s.get("ports") or [])
    svc_ports = sorted((p.get("name"), p.get("targetPort")) for p in svc["spec"].get("ports") or [])
    if slice_ports != svc_ports:
        raise StepFailed(f"EndpointSlice ports {slice_ports} do not match the Service's target ports {svc_ports}")
    say(f"{NAME}-replicas endpoints {got()} (primary {ips[f'{NAME}-0']} excluded)")


QUIET_SECONDS = 20.0
IGNORED_METADATA = ("resourceVersion", "managedFields", "generation")


def diff_paths(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON values differ, as `.a.b[2].c: old -> new` lines."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if path == ".metadata" and k in IGNORED_METADATA:
                continue
            out += diff_paths(a.get(k), b.get(k), f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff_paths(x, y, f"{path}[{i}]")
        return out
    if a != b:
        sa, sb = json.dumps(a), json.dumps(b)
        return [f"{path or '.'}: {sa[:300]} -> {sb[:300]}"]
    return []


def no_churn(loop: Loop) -> None:
    """Once Running, nothing is rewritten on every sync: children and the MySQL stay still."""
    uid = loop.facts["uid"]
    # Let the syncs that raced with Running settle (the last kube-controller-manager
    # status writes, the sync answering the Running transition).
    time.sleep(3)
    calls_before = loop.hook_calls("sync")
    start = time.monotonic()
    say(f"watching the children and the MySQL for {QUIET_SECONDS:.0f}s")
    time.sleep(QUIET_SECONDS)
    calls = loop.hook_calls("sync") - calls_before
    churn: list[str] = []
    status_only: list[str] = []
    for label, w in loop.watchers.items():
        with w.lock:
            history = list(w.events)
        last: dict[str, dict] = {}
        for t, typ, obj in history:
            key = obj["metadata"]["name"]
            if t >= start and typ != "LISTED":
                mine = obj["metadata"].get("uid") == uid or owned_by(obj, uid)
                if mine:
                    before = last.get(key)
                    what = f"{obj.get('kind')} {key}: {typ}"
                    if typ != "MODIFIED" or before is None:
                        churn.append(what)
                    else:
                        d = diff_paths(before, obj)
                        spec_like = [x for x in d if not x.startswith(".status")]
                        if obj.get("kind") == "MySQL" or spec_like:
                            churn.append(f"{what} ({len(d)} fields)\n      " + "\n      ".join(d[:12]))
                        elif d:
                            status_only.append(f"{what} status only: " + "; ".join(d[:4]))
            last[key] = obj
    loop.facts["quiet_sync_calls"] = calls
    say(f"{calls} sync calls answered by the hook during the {QUIET_SECONDS:.0f}s quiet period")
    for s in status_only:
        loop.notes.append(f"status-only change during quiet period (not the hook's doing): {s}")
    if calls < 2:
        raise StepFailed(f"only {calls} sync calls in {QUIET_SECONDS:.0f}s: the stillness proves nothing "
                         f"(resyncPeriodSeconds is {RESYNC_PERIOD_SECONDS})")
    if churn:
        raise StepFailed("objects changed while the Running cluster was being resynced "
                         "(an update on every sync):\n    " + "\n    ".join(churn))
    # Self-check: the watches were live, so the stillness is real. Touch a child
    # (an annotation Metacontroller's 3-way merge leaves alone) and see it arrive.
    probe = time.monotonic()
    loop.k8s.request("PATCH", f"/api/v1/namespaces/{NAMESPACE}/services/{NAME}-headless",
                     {"metadata": {"annotations": {"full-loop/probe": str(probe)}}},
                     content_type="application/merge-patch+json")
    loop.wait("the services watch to report the probe annotation",
              lambda: [o for _, typ, o in loop.watchers["services"].since(probe)
                       if (o["metadata"].get("annotations") or {}).get("full-loop/probe") == str(probe)],
              timeout=10)
    say("no child and no MySQL status was rewritten (watches verified live by a probe edit)")


def no_warning_events(loop: Loop) -> None:
    """No Warning event (e.g. Metacontroller's SyncError) was recorded on the MySQL."""
    evs = loop.k8s.request("GET", f"/api/v1/namespaces/{NAMESPACE}/events",
                           params={"fieldSelector": f"involvedObject.name={NAME},type=Warning"})["items"]
    warnings = [f"{e.get('reason')} x{e.get('count', 1)}: {e.get('message')}" for e in evs
                if (e.get("involvedObject") or {}).get("kind") == "MySQL"]
    if warnings:
        raise StepFailed("Warning events on the MySQL:\n    " + "\n    ".join(warnings))
    say("no Warning events on the MySQL")


def role_jobs(loop: Loop, purpose: str, since: float) -> None:
    """Prints every db-<purpose>-* Job created since `since` and what became of it;
    more than one for a single role change is noted (two scripts ran)."""
    created: dict[str, float] = {}
    gone: set[str] = set()
    for t, typ, o in loop.watchers["jobs"].since(since):
        n = o["metadata"]["name"]
        if n.startswith(f"{NAME}-{purpose}-"):
            created.setdefault(n, t - since)
            if typ == "DELETED":
                gone.add(n)
    say(f"{purpose} Jobs: " + ", ".join(f"{n} at {t:.1f}s{' (deleted)' if n in gone else ''}"
                                        for n, t in sorted(created.items(), key=lambda x: x[1])))
    if len(created) > 1:
        loop.notes.append(f"{len(created)} {purpose} Jobs for one role change: {sorted(created)} "
                          f"(deleted: {sorted(gone)})")


UPGRADE_TO = "8.4.4"


def upgrade(loop: Loop) -> None:
    """spec.version 8.4.3 -> 8.4.4: the partition walk rolls every pod with one switchover."""
    m0 = loop.mysql() or {}
    if (m0.get("status") or {}).get("primary") != f"{NAME}-0":
        raise StepFailed(f"the upgrade wants primary {NAME}-0 to start: {short_status(m0)}")
    changes_before = len((m0.get("status") or {}).get("roleChanges") or [])
    t0 = time.monotonic()
    loop.k8s.request("PATCH", f"/apis/{API}/namespaces/{NAMESPACE}/mysqls/{NAME}",
                     {"spec": {"version": UPGRADE_TO}}, content_type="application/merge-patch+json")
    say(f"spec.version -> {UPGRADE_TO}")
    names = [f"{NAME}-{i}" for i in range(REPLICAS)]

    def state() -> tuple[bool, str]:
        m = loop.mysql() or {}
        st = m.get("status") or {}
        sts = loop.k8s.get("apps/v1", "StatefulSet", NAME, NAMESPACE)
        rev = (sts.get("status") or {}).get("updateRevision")
        pods = {n: loop.k8s.get_or_none("v1", "Pod", n, NAMESPACE) for n in names}
        hashes = {n: ((p or {}).get("metadata", {}).get("labels") or {}).get("controller-revision-hash")
                  for n, p in pods.items()}
        prog = condition(m, "Progressing")
        ok = (st.get("version") == UPGRADE_TO and prog.get("status") == "False" and prog.get("reason") == "UpToDate"
              and all(h == rev for h in hashes.values()) and all(pod_ready(p) for p in pods.values())
              and st.get("readyReplicas") == REPLICAS and st.get("observedGeneration") == m["metadata"]["generation"])
        return ok, (f"{short_status(m)} version={st.get('version')} rollout={json.dumps(st.get('rollout'))} "
                    f"updateRevision={rev} hashes={hashes}")

    loop.wait(f"the rollout to {UPGRADE_TO} to complete", lambda: state()[0], timeout=180,
              detail=lambda: state()[1])
    secs = time.monotonic() - t0
    loop.timings.append((f"spec.version {UPGRADE_TO} -> rollout complete", secs))
    m = loop.mysql() or {}
    changes = ((m.get("status") or {}).get("roleChanges") or [])[changes_before:]
    order = []
    for t, typ, o in loop.watchers["pods"].since(t0):
        n = o["metadata"]["name"]
        if n in names and typ in ("DELETED", "ADDED"):
            order.append(f"{t - t0:5.1f}s {typ.lower()} {n}")
    say(f"rollout to {UPGRADE_TO} complete in {secs:.1f}s; {short_status(m)}")
    say("pod updates, in order:\n    " + "\n    ".join(order))
    say(f"role changes during the rollout: {json.dumps(changes)}")
    loop.notes.append("upgrade pod order: " + ", ".join(x.split(None, 1)[1] for x in order))
    role_jobs(loop, "switchover", t0)
    if len(changes) != 1 or changes[0].get("kind") != "Switchover":
        raise StepFailed(f"want exactly one role change (a switchover) during the rollout, got {changes}")
    loop.facts["ips"] = {n: loop.k8s.get("v1", "Pod", n, NAMESPACE)["status"]["podIP"] for n in names}


def kcm(loop: Loop) -> subprocess.Popen:
    return next(proc for name, proc in loop.k8s.procs if name == "kube-controller-manager")


def statefulset_spec(loop: Loop) -> dict:
    return loop.k8s.get("apps/v1", "StatefulSet", NAME, NAMESPACE)["spec"]


def partition_of(spec: dict) -> int | None:
    return ((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition")


def edit_mid_rollout(loop: Loop) -> None:
    """Issue 20.2: a spec edit in the middle of a partition walk restarts the walk from
    "hold every pod" (partition = replicas), so the StatefulSet controller never
    replaces a pod, the primary included, outside the hook's order. The walk is
    caught in the middle by stopping kube-controller-manager (SIGSTOP) as soon as the
    hook lowers the partition; the edit is made while it is stopped."""
    proc = kcm(loop)
    names = [f"{NAME}-{i}" for i in range(REPLICAS)]
    caught: dict[str, Any] = {}
    t0 = time.monotonic()
    for attempt, value in enumerate(("201", "202", "203"), 1):
        loop.wait("no rollout in progress", lambda: partition_of(statefulset_spec(loop)) == REPLICAS
                  and condition(loop.mysql(), "Progressing").get("reason") == "UpToDate", timeout=120,
                  detail=lambda: f"partition {partition_of(statefulset_spec(loop))}; {short_status(loop.mysql())}")
        loop.k8s.request("PATCH", f"/apis/{API}/namespaces/{NAMESPACE}/mysqls/{NAME}",
                         {"spec": {"config": {"max_connections": value}}},
                         content_type="application/merge-patch+json")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            spec = statefulset_spec(loop)
            if (partition_of(spec) or REPLICAS) < REPLICAS:
                proc.send_signal(signal.SIGSTOP)
                break
            time.sleep(0.05)
        else:
            raise StepFailed(f"max_connections={value}: the walk never lowered the partition "
                             f"({short_status(loop.mysql())})")
        try:
            spec = statefulset_spec(loop)
            if (partition_of(spec) or REPLICAS) >= REPLICAS:
                say(f"attempt {attempt}: the walk for max_connections={value} had ended before "
                    "kube-controller-manager stopped; again")
                continue
            caught = {"value": value, "partition": partition_of(spec), "template": json.dumps(spec["template"])}
            say(f"walk for max_connections={value} stopped at partition {caught['partition']} "
                f"(kube-controller-manager SIGSTOPped); {short_status(loop.mysql())}")
            t_edit = time.monotonic()
            loop.k8s.request("PATCH", f"/apis/{API}/namespaces/{NAMESPACE}/mysqls/{NAME}",
                             {"spec": {"config": {"max_connections": "299"}}},
                             content_type="application/merge-patch+json")
            say("edited mid-walk: max_connections=299")
            spec = loop.wait("the hook's StatefulSet with the edited template",
                             lambda: (sp := statefulset_spec(loop)) and json.dumps(sp["template"]) != caught["template"]
                             and sp, timeout=60, detail=lambda: f"partition {partition_of(statefulset_spec(loop))}")
            part = partition_of(spec)
            say(f"{time.monotonic() - t_edit:.1f}s after the edit the StatefulSet has the new template with "
                f"partition {part} (the walk was at {caught['partition']})")
            if part != REPLICAS:
                raise StepFailed(f"a template change in the middle of a walk (partition {caught['partition']}) was "
                                 f"emitted with partition {part}, not {REPLICAS} (hold every pod): the StatefulSet "
                                 f"controller would replace pods outside the hook's order")
        finally:
            proc.send_signal(signal.SIGCONT)
        break
    else:
        raise StepFailed("three walks ended before kube-controller-manager could be stopped in the middle")

    def done() -> bool:
        m = loop.mysql() or {}
        sts = loop.k8s.get("apps/v1", "StatefulSet", NAME, NAMESPACE)
        rev = (sts.get("status") or {}).get("updateRevision")
        pods = [loop.k8s.get_or_none("v1", "Pod", n, NAMESPACE) for n in names]
        return (condition(m, "Progressing").get("reason") == "UpToDate" and partition_of(sts["spec"]) == REPLICAS
                and all(pod_ready(p) and (p or {})["metadata"]["labels"].get("controller-revision-hash") == rev
                        for p in pods))
    loop.wait("the restarted walk to complete", done, timeout=180, detail=lambda: short_status(loop.mysql()))
    # No pod was replaced while the status named it the primary.
    events = loop.watchers["pods"].since(t0)
    history = [(t, (o.get("status") or {}).get("primary")) for t, _, o in loop.watchers["mysqls"].since(0)]
    order, bad = [], []
    for t, typ, o in events:
        n = o["metadata"]["name"]
        if n in names and typ == "DELETED":
            primary = next((p for t2, p in reversed(history) if t2 <= t), None)
            order.append(f"{t - t0:5.1f}s {n}{' (primary)' if primary == n else ''}")
            if primary == n:
                bad.append(n)
    say("pods replaced, in order: " + ", ".join(order))
    loop.notes.append("edit mid-walk: replaced " + ", ".join(order))
    if bad:
        raise StepFailed(f"{bad} replaced while status.primary named it: {order}")
    loop.timings.append(("edit mid-walk -> restarted walk complete", time.monotonic() - t0))
    loop.facts["ips"] = {n: loop.k8s.get("v1", "Pod", n, NAMESPACE)["status"]["podIP"] for n in names}


def mark_not_ready(k8s: Cluster, namespace: str, pod: str) -> None:
    """Turns a kwok pod not Ready for good: a label that kwok's pod-ready stage
    leaves alone, then its Ready condition flipped through the status subresource
    (what a kubelet would write). bench/scale.py uses it too."""
    k8s.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{pod}",
                {"metadata": {"labels": {"full-loop/not-ready": "true"}}},
                content_type="application/merge-patch+json")
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    k8s.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{pod}/status",
                {"status": {"conditions": [
                    {"type": "Ready", "status": "False", "lastTransitionTime": now, "reason": "FullLoop"},
                    {"type": "ContainersReady", "status": "False", "lastTransitionTime": now,
                     "reason": "FullLoop"}]}},
                content_type="application/strategic-merge-patch+json")


def failover(loop: Loop) -> None:
    """The primary turns not Ready: after the grace period a db-failover-* Job promotes a replica."""
    old = ((loop.mysql() or {}).get("status") or {}).get("primary")
    # kwok's failover pod reports db-1 promoted (db-2 when db-1 was the primary).
    new = f"{NAME}-2" if old == f"{NAME}-1" else f"{NAME}-1"
    mark_not_ready(loop.k8s, NAMESPACE, old)
    t0 = time.monotonic()
    af = condition(loop.mysql(), "AutomaticFailover")
    say(f"{old} marked not Ready (AutomaticFailover was {af.get('status')} {af.get('reason')}: {af.get('message')})")
    jobs = loop.watchers["jobs"]

    def failover_jobs() -> list[dict]:
        return jobs.seen(lambda _t, o: o["metadata"]["name"].startswith(f"{NAME}-failover-"))

    seen = loop.wait("a failover Job", failover_jobs, timeout=60, detail=lambda: short_status(loop.mysql()))
    t_job = time.monotonic()
    job_name = seen[0]["metadata"]["name"]
    say(f"Job {job_name} created {t_job - t0:.1f}s after {old} turned not Ready")
    if t_job - t0 < 9:
        raise StepFailed(f"failover Job {job_name} came {t_job - t0:.1f}s after the outage, before the "
                         "default 10 s grace period")

    def selector() -> str | None:
        svc = loop.k8s.get("v1", "Service", f"{NAME}-primary", NAMESPACE)
        return (svc["spec"].get("selector") or {}).get("statefulset.kubernetes.io/pod-name")

    loop.wait(f"Service {NAME}-primary to select {new}", lambda: selector() == new, timeout=60,
              detail=lambda: f"selector {selector()}; {short_status(loop.mysql())}")
    t_svc = time.monotonic()
    loop.timings.append((f"{old} not Ready -> failover Job created", t_job - t0))
    loop.timings.append((f"{old} not Ready -> {NAME}-primary selects {new}", t_svc - t0))
    m = loop.wait(f"status.primary {new}", lambda: (loop.mysql() or {}).get("status", {}).get("primary") == new
                  and loop.mysql(), timeout=30, detail=lambda: short_status(loop.mysql()))
    cm = loop.k8s.get("v1", "ConfigMap", f"{NAME}-config", NAMESPACE)
    if (cm.get("data") or {}).get("primary") != new:
        raise StepFailed(f"ConfigMap {NAME}-config primary is {(cm.get('data') or {}).get('primary')!r}, want {new}")
    ips = loop.facts["ips"]

    def replica_ips() -> list[str]:
        sl = loop.k8s.get("discovery.k8s.io/v1", "EndpointSlice", f"{NAME}-replicas", NAMESPACE)
        return sorted(a for e in sl.get("endpoints") or [] for a in e.get("addresses") or [])

    loop.wait(f"EndpointSlice {NAME}-replicas to exclude {new} ({ips[new]})",
              lambda: ips[new] not in replica_ips(), timeout=30, detail=lambda: str(replica_ips()))
    changes = (m.get("status") or {}).get("roleChanges") or []
    fo = [c for c in changes if c.get("kind") == "Failover" and c.get("from") == old and c.get("to") == new]
    if not fo:
        raise StepFailed(f"status.roleChanges does not record the failover: {changes}")
    say(f"failover done: {NAME}-primary selects {new} {t_svc - t0:.1f}s after {old} turned not Ready; "
        f"ConfigMap primary {new}; {NAME}-replicas {replica_ips()}; roleChanges {json.dumps(changes)}")
    role_jobs(loop, "failover", t0)
    if t_svc - t0 >= 20:
        loop.notes.append(f"failover took {t_svc - t0:.1f}s, over the 20 s target")


# ------------------------------------------------------------------ backups (issue 5)


def mysqlbackup(loop: Loop) -> dict | None:
    return loop.k8s.get_or_none(API, "MySQLBackup", BACKUP_NAME, NAMESPACE)


def backup_status(obj: dict | None) -> str:
    if obj is None:
        return "the MySQLBackup does not exist"
    st = obj.get("status") or {}
    return (f"phase={st.get('phase')} name={st.get('name')} location={st.get('location')} "
            f"bytes={st.get('bytes')} source={st.get('source')} startTime={st.get('startTime')} "
            f"completionTime={st.get('completionTime')} message={st.get('message')!r}")


def job_env(job: dict) -> dict[str, str]:
    """The env of a Job's last container (the one that writes the result line)."""
    c = job["spec"]["template"]["spec"]["containers"][-1]
    return {e["name"]: e.get("value", "") for e in c.get("env") or []}


def rfc3339(t: str | None, what: str) -> float:
    try:
        return datetime.strptime(t or "", "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        raise StepFailed(f"{what} is {t!r}, not a whole-second UTC RFC 3339 time") from None


def termination_messages(loop: Loop, job_name: str) -> list[str]:
    pods = loop.k8s.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods",
                            params={"labelSelector": f"batch.kubernetes.io/job-name={job_name}"})["items"]
    return [((cs.get("state") or {}).get("terminated") or {}).get("message", "")
            for p in pods for cs in (p.get("status") or {}).get("containerStatuses") or []]


def mysqlbackup_succeeds(loop: Loop) -> None:
    """A MySQLBackup of the Running cluster: its Job reads from a Ready replica; phase
    Succeeded with name, location, size, source, GTID and start/completion times."""
    m = loop.mysql() or {}
    primary = (m.get("status") or {}).get("primary")
    names = [f"{NAME}-{i}" for i in range(REPLICAS)]
    ready_replicas = [n for n in names if n != primary
                      and pod_ready(loop.k8s.get_or_none("v1", "Pod", n, NAMESPACE))]
    if not primary or not ready_replicas:
        raise StepFailed(f"the backup step wants a primary and a Ready replica: {short_status(m)}")
    syncs_before = loop.hook_calls("backup_sync")
    wall0 = time.time()
    t0 = time.monotonic()
    created = loop.k8s.create({"apiVersion": API, "kind": "MySQLBackup",
                               "metadata": {"name": BACKUP_NAME, "namespace": NAMESPACE},
                               "spec": {"cluster": NAME}})
    uid = created["metadata"]["uid"]
    say(f"created MySQLBackup {BACKUP_NAME} of {NAME} (primary {primary}, Ready replicas {ready_replicas})")
    prefix = f"{BACKUP_NAME}-backup-"

    def backup_jobs() -> list[dict]:
        return loop.watchers["jobs"].seen(lambda _t, o: o["metadata"]["name"].startswith(prefix))

    seen = loop.wait(f"the MySQLBackup's Job {prefix}*", backup_jobs, timeout=60,
                     detail=lambda: f"{backup_status(mysqlbackup(loop))}; backup_sync calls "
                                    f"{loop.hook_calls('backup_sync') - syncs_before}")
    t_job = time.monotonic()
    job = seen[0]
    job_name = job["metadata"]["name"]
    if not owned_by(job, uid):
        raise StepFailed(f"Job {job_name} is not owned by the MySQLBackup {uid}: "
                         f"{job['metadata'].get('ownerReferences')}")
    labels = job["spec"]["template"]["metadata"].get("labels") or {}
    if labels.get("mysqlhook.dev/purpose") != "backup" or labels.get("mysqlhook.dev/mysqlbackup") != BACKUP_NAME:
        raise StepFailed(f"Job {job_name}'s pod labels {labels} lack mysqlhook.dev/purpose=backup and "
                         f"mysqlhook.dev/mysqlbackup={BACKUP_NAME}")
    env = job_env(job)
    order = [e.split("=", 1)[0] for e in env.get("PODS", "").split()]
    if env.get("PRIMARY") != primary or sorted(order) != names or order[:len(ready_replicas)] != ready_replicas:
        raise StepFailed(f"Job {job_name} has PRIMARY={env.get('PRIMARY')!r} PODS order {order}: want PRIMARY "
                         f"{primary} and the Ready replicas {ready_replicas} first")
    say(f"Job {job_name} created {t_job - t0:.1f}s after the MySQLBackup; PRIMARY={primary}, PODS order {order}, "
        f"BACKUP_DIR={env.get('BACKUP_DIR')}")

    def succeeded() -> dict | None:
        b = mysqlbackup(loop)
        phase = ((b or {}).get("status") or {}).get("phase")
        if phase == "Failed":
            raise StepFailed(f"MySQLBackup {BACKUP_NAME} failed: {backup_status(b)}")
        return b if phase == "Succeeded" else None

    b = loop.wait(f"MySQLBackup {BACKUP_NAME} phase Succeeded", succeeded, timeout=60,
                  detail=lambda: f"{backup_status(mysqlbackup(loop))}; Job "
                                 f"{json.dumps((loop.k8s.get_or_none('batch/v1', 'Job', job_name, NAMESPACE) or {}).get('status'))}")
    secs = time.monotonic() - t0
    loop.timings.append(("MySQLBackup create -> Job created", t_job - t0))
    loop.timings.append(("MySQLBackup create -> Succeeded", secs))
    st = b["status"]
    want_location = f"pvc://{BACKUP_CLAIM}/{BACKUP_PREFIX}/{job_name}"
    problems = []
    for field_, want in (("name", job_name), ("location", want_location), ("bytes", BACKUP_BYTES),
                         ("storage", {"persistentVolumeClaim": {"claimName": BACKUP_CLAIM, "prefix": BACKUP_PREFIX}})):
        if st.get(field_) != want:
            problems.append(f"status.{field_} is {json.dumps(st.get(field_))}, want {json.dumps(want)}")
    if st.get("source") not in ready_replicas:
        problems.append(f"status.source is {st.get('source')!r}, want a Ready replica {ready_replicas} "
                        f"(the primary is {primary})")
    if not st.get("gtid"):
        problems.append("status.gtid is empty")
    if st.get("message"):
        problems.append(f"status.message is {st.get('message')!r} on success")
    start = rfc3339(st.get("startTime"), "status.startTime")
    done = rfc3339(st.get("completionTime"), "status.completionTime")
    if not (wall0 - 1 <= start <= done <= time.time() + 1):
        problems.append(f"times out of order: created at {wall0:.1f}, startTime {st.get('startTime')}, "
                        f"completionTime {st.get('completionTime')}, now {time.time():.1f}")
    if problems:
        raise StepFailed(f"MySQLBackup {BACKUP_NAME} Succeeded, but:\n    " + "\n    ".join(problems))
    msgs = [x for x in termination_messages(loop, job_name) if x]
    phases = []
    for _, typ, o in loop.watchers["mysqlbackups"].since(t0):
        ph = ((o.get("status") or {}).get("phase"), (o.get("status") or {}).get("message"))
        if o["metadata"]["name"] == BACKUP_NAME and ph[0] and (not phases or phases[-1] != ph):
            phases.append(ph)
    say(f"MySQLBackup {BACKUP_NAME} Succeeded {secs:.1f}s after create: {backup_status(b)} gtid={st.get('gtid')} "
        f"flavor={st.get('flavor')}")
    say("its phases: " + " -> ".join(f"{ph}" + (f" ({msg})" if msg else "") for ph, msg in phases))
    say(f"the Job pod's termination message: {msgs}")
    # Finished is final: a later sync keeps the Job (its logs); once the Job is
    # deleted, no sync creates it again.
    n = loop.hook_calls("backup_sync")
    loop.wait("a /backup/sync call after Succeeded", lambda: loop.hook_calls("backup_sync") > n, timeout=30)
    if loop.k8s.get_or_none("batch/v1", "Job", job_name, NAMESPACE) is None:
        raise StepFailed(f"Job {job_name} of the Succeeded MySQLBackup was deleted; it should be kept for its logs")
    t_del = time.monotonic()
    loop.k8s.delete("batch/v1", "Job", job_name, NAMESPACE, wait=True)
    n = loop.hook_calls("backup_sync")
    loop.wait("a /backup/sync call after the Job was deleted", lambda: loop.hook_calls("backup_sync") > n, timeout=30)
    time.sleep(1)  # room for a create, had the answer asked for one
    again = mysqlbackup(loop) or {}
    recreated = [o for _, typ, o in loop.watchers["jobs"].since(t_del)
                 if typ == "ADDED" and o["metadata"]["name"] == job_name]
    if recreated or loop.k8s.get_or_none("batch/v1", "Job", job_name, NAMESPACE) is not None:
        raise StepFailed(f"Job {job_name} of the Succeeded MySQLBackup was created again after it was deleted")
    if (again.get("status") or {}) != {**st, "observedGeneration": (again.get("status") or {}).get("observedGeneration")}:
        raise StepFailed(f"the Succeeded status moved: {json.dumps(st)} -> {json.dumps(again.get('status'))}")
    say(f"{loop.hook_calls('backup_sync') - syncs_before} /backup/sync calls in all; the Job was kept after "
        "Succeeded, and once deleted it was not created again; the status stayed")


def final_backup_ends(loop: Loop, job_name: str, outcome: str) -> str:
    """Waits for a Running pod of `job_name` that kwok holds (no full-loop/outcome
    label yet), labels it so kwok ends it with `outcome` (succeed, fail), and waits
    for it to end. Returns the pod's name."""
    def running() -> list[dict]:
        pods = loop.k8s.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", params={
            "labelSelector": f"batch.kubernetes.io/job-name={job_name},!full-loop/outcome"})["items"]
        return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")]

    pod = loop.wait(f"a Running pod of Job {job_name}", running, timeout=90,
                    detail=lambda: f"Job {json.dumps((loop.k8s.get_or_none('batch/v1', 'Job', job_name, NAMESPACE) or {}).get('status'))}; "
                                   f"MySQL {short_status(loop.mysql())}")[0]["metadata"]["name"]
    loop.k8s.request("PATCH", f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}",
                     {"metadata": {"labels": {"full-loop/outcome": outcome}}},
                     content_type="application/merge-patch+json")
    want = "Succeeded" if outcome == "succeed" else "Failed"
    loop.wait(f"pod {pod} phase {want}",
              lambda: ((loop.k8s.get_or_none("v1", "Pod", pod, NAMESPACE) or {}).get("status") or {}).get("phase") == want,
              timeout=30)
    return pod


# The finalize hook's resyncAfterSeconds while it waits (hooks/src/finalize.rs).
FINALIZE_RESYNC_SECONDS = 5.0


def assert_held(loop: Loop, reason: str, finalize_calls: int = 2,
                min_seconds: float = FINALIZE_RESYNC_SECONDS) -> float:
    """For at least `min_seconds` and `finalize_calls` more finalize calls, the MySQL
    stays: deletionTimestamp set, finalizer held, Deleting reason `reason`, StatefulSet
    and server pods present, status unchanged. Returns how long that was watched."""
    t = time.monotonic()
    # The status is compared from after one finalize call on: the call that follows a
    # change (the deletion, a Job's end) may still be answered from Metacontroller's
    # cache of the parent as it was before that change's status write, and then sets
    # a condition's lastTransitionTime a second time. What must not move is the
    # status once the hold has been answered.
    first = loop.hook_calls("finalize")
    loop.wait(f"a finalize call with the MySQL held ({reason})",
              lambda: loop.hook_calls("finalize") > first, timeout=30)
    n = loop.hook_calls("finalize")
    before = loop.mysql() or {}

    def held() -> bool:
        m = loop.mysql()
        if m is None:
            raise StepFailed(f"the MySQL went away while its final backup was {reason}")
        problems = []
        if not m["metadata"].get("deletionTimestamp"):
            problems.append("no deletionTimestamp")
        if FINALIZER not in (m["metadata"].get("finalizers") or []):
            problems.append(f"finalizer {FINALIZER} gone: {m['metadata'].get('finalizers')}")
        if condition(m, "Deleting").get("reason") != reason:
            problems.append(f"Deleting is {condition(m, 'Deleting')}")
        if loop.k8s.get_or_none("apps/v1", "StatefulSet", NAME, NAMESPACE) is None:
            problems.append("the StatefulSet is gone")
        for i in range(REPLICAS):
            if loop.k8s.get_or_none("v1", "Pod", f"{NAME}-{i}", NAMESPACE) is None:
                problems.append(f"pod {NAME}-{i} is gone")
        if problems:
            raise StepFailed(f"the MySQL is not held as it should be ({reason}): " + "; ".join(problems))
        return loop.hook_calls("finalize") >= n + finalize_calls and time.monotonic() - t >= min_seconds

    loop.wait(f"{finalize_calls} finalize calls and {min_seconds:.0f}s with the MySQL held ({reason})", held,
              timeout=30,
              detail=lambda: f"{loop.hook_calls('finalize') - n} finalize calls")
    # Answering the same thing again writes nothing: no status rewritten per call.
    moved = diff_paths(before.get("status"), (loop.mysql() or {}).get("status"), ".status")
    if moved:
        raise StepFailed(f"the held MySQL's status changed across {finalize_calls} finalize calls with nothing "
                         "else changing:\n    " + "\n    ".join(moved))
    return time.monotonic() - t


def delete_with_final_backup(loop: Loop) -> None:
    """Delete the MySQL (deletionPolicy Backup): it stays while the final backup runs and
    after it has failed; deleting the failed Job retries it; once the retry succeeds the
    StatefulSet and pods go, the volume claims stay, and the MySQL is gone."""
    m0 = loop.mysql() or {}
    primary = (m0.get("status") or {}).get("primary")
    names = [f"{NAME}-{i}" for i in range(REPLICAS)]
    calls_before = loop.hook_calls("finalize")
    t0 = time.monotonic()
    loop.facts["deleted_at"] = t0
    loop.k8s.delete(API, "MySQL", NAME, NAMESPACE, wait=False)
    say(f"deleted the MySQL (deletionPolicy Backup, primary {primary})")
    prefix = f"{NAME}-final-backup-"

    def final_jobs() -> list[dict]:
        return loop.watchers["jobs"].seen(lambda _t, o: o["metadata"]["name"].startswith(prefix))

    seen = loop.wait(f"the final backup Job {prefix}*", final_jobs, timeout=60, detail=lambda: short_status(loop.mysql()))
    t_job = time.monotonic()
    job = seen[0]
    job_name = job["metadata"]["name"]
    if not owned_by(job, loop.facts["uid"]):
        raise StepFailed(f"Job {job_name} is not owned by the MySQL: {job['metadata'].get('ownerReferences')}")
    loop.timings.append(("delete -> final backup Job created", t_job - t0))
    say(f"final backup Job {job_name} created {t_job - t0:.1f}s after delete; kwok holds its pod until told")
    loop.wait("Deleting reason FinalBackupRunning", lambda: condition(loop.mysql(), "Deleting").get("reason")
              == "FinalBackupRunning", timeout=30, detail=lambda: str(condition(loop.mysql(), "Deleting")))
    n = loop.hook_calls("finalize")
    held = assert_held(loop, "FinalBackupRunning")
    d = condition(loop.mysql(), "Deleting")
    say(f"held {held:.1f}s ({loop.hook_calls('finalize') - n} finalize calls) while the final backup runs: Deleting {d.get('reason')}: {d.get('message')}")

    # Failure: every attempt the Job allows fails; the Job fails; the MySQL stays.
    attempts = int(job["spec"].get("backoffLimit", 6)) + 1
    t_fail = time.monotonic()
    for i in range(attempts):
        pod = final_backup_ends(loop, job_name, "fail")
        say(f"attempt {i + 1}/{attempts}: pod {pod} failed at {time.monotonic() - t0:.1f}s "
            f"(MySQL: Deleting {condition(loop.mysql(), 'Deleting').get('reason')})")

    def job_failed() -> bool:
        j = loop.k8s.get("batch/v1", "Job", job_name, NAMESPACE)
        return condition(j, "Failed").get("status") == "True"

    loop.wait(f"Job {job_name} to fail", job_failed, timeout=30,
              detail=lambda: json.dumps(loop.k8s.get("batch/v1", "Job", job_name, NAMESPACE).get("status")))

    def failed_status() -> dict | None:
        m = loop.mysql()
        rec = (((m or {}).get("status") or {}).get("backup") or {}).get("finalBackup") or {}
        return m if condition(m, "Deleting").get("reason") == "FinalBackupFailed" and \
            rec.get("outcome") == "Failed" else None

    m = loop.wait("Deleting reason FinalBackupFailed and status.backup.finalBackup Failed", failed_status,
                  timeout=30, detail=lambda: f"{short_status(loop.mysql())} backup "
                                             f"{json.dumps(((loop.mysql() or {}).get('status') or {}).get('backup'))}")
    loop.timings.append((f"first final backup attempt ended -> FinalBackupFailed ({attempts} pods, "
                         "Job backoff)", time.monotonic() - t_fail))
    rec = m["status"]["backup"]["finalBackup"]
    if rec.get("name") != job_name or "dump-failed" not in (rec.get("message") or ""):
        raise StepFailed(f"status.backup.finalBackup is {json.dumps(rec)}: want name {job_name} and the pod's "
                         "reason dump-failed")
    n = loop.hook_calls("finalize")
    held = assert_held(loop, "FinalBackupFailed")
    d = condition(loop.mysql(), "Deleting")
    say(f"final backup failed; held {held:.1f}s more ({loop.hook_calls('finalize') - n} finalize calls): Deleting {d.get('reason')}: {d.get('message')}; "
        f"finalBackup {json.dumps(rec)}")

    # Retry: delete the failed Job; the hook emits it again; this time it succeeds.
    old_uid = loop.k8s.get("batch/v1", "Job", job_name, NAMESPACE)["metadata"]["uid"]
    t_retry = time.monotonic()
    loop.k8s.delete("batch/v1", "Job", job_name, NAMESPACE, wait=False)
    retried = loop.wait(f"Job {job_name} emitted again", lambda: (lambda j: j if j and j["metadata"]["uid"] != old_uid
                                                                  else None)(
        loop.k8s.get_or_none("batch/v1", "Job", job_name, NAMESPACE)), timeout=60,
        detail=lambda: short_status(loop.mysql()))
    loop.timings.append(("failed final backup Job deleted -> emitted again", time.monotonic() - t_retry))
    say(f"deleted the failed Job; {job_name} emitted again (uid {retried['metadata']['uid']}) "
        f"{time.monotonic() - t_retry:.1f}s later")
    if loop.mysql() is None:
        raise StepFailed("the MySQL went away before the retried final backup succeeded")
    pod = final_backup_ends(loop, job_name, "succeed")
    t_ok = time.monotonic()
    say(f"retried final backup pod {pod} succeeded")

    def sts_state() -> str:
        sts = loop.k8s.get_or_none("apps/v1", "StatefulSet", NAME, NAMESPACE)
        pods = loop.k8s.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
        return (f"StatefulSet {'present' if sts else 'gone'}; pods {[p['metadata']['name'] for p in pods]}; "
                f"MySQL {short_status(loop.mysql())}")

    loop.wait("the MySQL to be gone", lambda: loop.mysql() is None, timeout=120, detail=sts_state)
    t_gone = time.monotonic()
    loop.timings.append(("final backup succeeded -> MySQL gone", t_gone - t_ok))
    loop.timings.append(("delete -> MySQL gone (with the held, failed and retried final backup)", t_gone - t0))
    finalize_calls = loop.hook_calls("finalize") - calls_before
    # The last status the MySQL had records the final backup.
    last = [o for _, typ, o in loop.watchers["mysqls"].since(t0) if o["metadata"]["name"] == NAME
            and typ != "DELETED"][-1]
    rec = ((last.get("status") or {}).get("backup") or {}).get("finalBackup") or {}
    want = {"name": job_name, "outcome": "Succeeded", "location": f"pvc://{BACKUP_CLAIM}/{BACKUP_PREFIX}/{job_name}",
            "bytes": BACKUP_BYTES}
    wrong = {k: rec.get(k) for k, v in want.items() if rec.get(k) != v}
    if wrong or rec.get("source") not in [n for n in names if n != primary] or not rec.get("gtid"):
        raise StepFailed(f"the MySQL's last status.backup.finalBackup is {json.dumps(rec)}: want {json.dumps(want)}, "
                         f"a source other than the primary {primary}, and a GTID")
    if loop.k8s.get_or_none("apps/v1", "StatefulSet", NAME, NAMESPACE) is not None:
        raise StepFailed("the MySQL is gone but its StatefulSet still exists")
    pods = loop.k8s.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods",
                            params={"labelSelector": "statefulset.kubernetes.io/pod-name"})["items"]
    if pods:
        raise StepFailed(f"server pods outlived the MySQL: {[p['metadata']['name'] for p in pods]}")
    pvcs = sorted(p["metadata"]["name"] for p in
                  loop.k8s.request("GET", f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims")["items"])
    data = [p for p in pvcs if p != BACKUP_CLAIM]
    say(f"MySQL gone {t_gone - t_ok:.1f}s after the final backup succeeded ({t_gone - t0:.1f}s after delete), "
        f"after {finalize_calls} finalize calls; last finalBackup {json.dumps(rec)}; StatefulSet gone; "
        f"volume claims kept: {pvcs}")
    if len(data) != REPLICAS:
        raise StepFailed(f"deletionPolicy Backup should keep {REPLICAS} server volume claims (like Retain), "
                         f"found {pvcs}")


# ------------------------------------------------------------------ Retain after Delete (issue 20.1)
KEEP = "keep"


def retain_after_delete_keeps_volumes(loop: Loop) -> None:
    """A second MySQL, `keep`, two servers under deletionPolicy Delete: the StatefulSet
    controller makes the StatefulSet the owner of both volume claims. Scaled to one
    server, the claim of ordinal 1 stays owned (its controller releases claims only of
    pods that exist). Then deletionPolicy Retain and, at once, a delete. The real
    garbage collector of kube-controller-manager deletes whatever the StatefulSet still
    owns when the StatefulSet goes, so the hook must hold the deletion (VolumesStillOwned,
    naming data-keep-1) until no claim is owned; after the documented patch it proceeds,
    and both claims outlive the MySQL."""
    claims = [f"{DATA_CLAIM}-{KEEP}-{i}" for i in range(2)]
    for i in range(2):
        loop.k8s.create({"apiVersion": "v1", "kind": "PersistentVolume",
                         "metadata": {"name": f"pv-{KEEP}-{i}"},
                         "spec": {"capacity": {"storage": STORAGE}, "accessModes": ["ReadWriteOnce"],
                                  "persistentVolumeReclaimPolicy": "Retain",
                                  "hostPath": {"path": f"/tmp/fake-pv-{KEEP}-{i}"}}})
    loop.k8s.create({"apiVersion": API, "kind": "MySQL", "metadata": {"name": KEEP, "namespace": NAMESPACE},
                     "spec": {"replicas": 2, "version": "8.4.3", "storage": {"size": STORAGE},
                              "deletionPolicy": "Delete"}})

    def claim(name: str) -> dict | None:
        return loop.k8s.get_or_none("v1", "PersistentVolumeClaim", name, NAMESPACE)

    def sts_owned(c: dict | None) -> bool:
        return bool(c) and any(r.get("kind") == "StatefulSet" and r.get("name") == KEEP
                               for r in c["metadata"].get("ownerReferences") or [])

    def claims_state() -> str:
        return "; ".join(f"{n}: " + ("absent" if claim(n) is None else
                                    f"owners {[r['kind'] + '/' + r['name'] for r in claim(n)['metadata'].get('ownerReferences') or []]}"
                                    f"{' deleting' if claim(n)['metadata'].get('deletionTimestamp') else ''}")
                         for n in claims)

    t0 = time.monotonic()
    loop.wait("both claims of MySQL keep owned by its StatefulSet (deletionPolicy Delete)",
              lambda: all(sts_owned(claim(n)) for n in claims), timeout=120, detail=claims_state)
    say(f"MySQL {KEEP}: 2 servers under deletionPolicy Delete; {claims_state()}")

    loop.k8s.request("PATCH", f"/apis/{API}/namespaces/{NAMESPACE}/mysqls/{KEEP}", {"spec": {"replicas": 1}},
                     content_type="application/merge-patch+json")

    def scaled() -> bool:
        sts = loop.k8s.get_or_none("apps/v1", "StatefulSet", KEEP, NAMESPACE) or {}
        return ((sts.get("spec") or {}).get("replicas") == 1
                and loop.k8s.get_or_none("v1", "Pod", f"{KEEP}-1", NAMESPACE) is None)
    loop.wait("the StatefulSet keep scaled to 1 and pod keep-1 gone", scaled, timeout=120, detail=claims_state)
    if not sts_owned(claim(claims[1])):
        raise StepFailed(f"after the scale-down {claims[1]} is no longer owned by the StatefulSet ({claims_state()}): "
                         "the scenario no longer reproduces the case it guards")
    say(f"scaled to 1: {claims_state()}")

    loop.k8s.request("PATCH", f"/apis/{API}/namespaces/{NAMESPACE}/mysqls/{KEEP}",
                     {"spec": {"deletionPolicy": "Retain"}}, content_type="application/merge-patch+json")
    loop.k8s.delete(API, "MySQL", KEEP, NAMESPACE, wait=False)
    t_delete = time.monotonic()
    say("set deletionPolicy Retain and deleted the MySQL at once")

    def keep_mysql() -> dict | None:
        return loop.k8s.get_or_none(API, "MySQL", KEEP, NAMESPACE)

    def held_for_owned() -> dict | None:
        m = keep_mysql()
        if m is None:
            raise StepFailed(f"MySQL {KEEP} went away while {claims[1]} was still owned by its StatefulSet; "
                             f"claims: {claims_state()}")
        d = condition(m, "Deleting")
        return d if d.get("reason") == "VolumesStillOwned" else None
    d = loop.wait("the deletion held with Deleting reason VolumesStillOwned", held_for_owned, timeout=60,
                  detail=lambda: f"Deleting {condition(keep_mysql(), 'Deleting')}; {claims_state()}")
    if claims[1] not in d.get("message", "") or claims[0] in d.get("message", ""):
        raise StepFailed(f"VolumesStillOwned should name {claims[1]} only (the StatefulSet controller releases "
                         f"{claims[0]}, whose pod exists): {d.get('message')}")
    # Held: for a while, with both claims and the StatefulSet still there.
    t_held = time.monotonic()
    while time.monotonic() - t_held < FINALIZE_RESYNC_SECONDS * 2:
        held_for_owned()
        if loop.k8s.get_or_none("apps/v1", "StatefulSet", KEEP, NAMESPACE) is None:
            raise StepFailed("the StatefulSet was deleted while a claim was still owned by it")
        time.sleep(0.5)
    say(f"held {time.monotonic() - t_delete:.1f}s after the delete: {d.get('message')}")

    # The remedy the message gives: release the claim by hand.
    loop.k8s.request("PATCH", f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims/{claims[1]}",
                     [{"op": "remove", "path": "/metadata/ownerReferences"}],
                     content_type="application/json-patch+json")
    t_patch = time.monotonic()
    loop.wait(f"MySQL {KEEP} gone after the claim was released", lambda: keep_mysql() is None, timeout=120,
              detail=lambda: f"Deleting {condition(keep_mysql(), 'Deleting')}; {claims_state()}")
    loop.wait("StatefulSet keep gone", lambda: loop.k8s.get_or_none("apps/v1", "StatefulSet", KEEP, NAMESPACE) is None,
              timeout=60)
    t_gone = time.monotonic()
    # Give the garbage collector time to act on anything it would delete.
    time.sleep(10)
    lost = [n for n in claims if claim(n) is None or claim(n)["metadata"].get("deletionTimestamp")]
    if lost:
        raise StepFailed(f"deletionPolicy Retain lost volume claims {lost}: {claims_state()}")
    loop.timings.append(("Retain after Delete: delete -> held (VolumesStillOwned)", t_held - t_delete))
    loop.timings.append(("Retain after Delete: claim released -> MySQL gone", t_gone - t_patch))
    say(f"MySQL {KEEP} gone {t_gone - t_patch:.1f}s after the claim was released; 10 s later both claims are kept: "
        f"{claims_state()} ({time.monotonic() - t0:.0f}s for the scenario)")


# ------------------------------------------------------------------ chaos (issue 9)
# Each scenario records the uid of every child, pod and volume claim, breaks
# something while Metacontroller is syncing, repairs it, and asserts that the cluster
# converges (Running, same primary, a fresh sync answered) with the same uids:
# nothing was deleted or recreated on the way.


def restart_component(loop: Loop, name: str, sig: int, down_seconds: float = 0.0) -> float:
    """Stops the spawned component `name` with `sig`, waits `down_seconds`, starts it
    again with the same argv, appending to the same log (log_tail and
    --capture-fixtures keep working). Returns when it was started again."""
    procs = loop.k8s.procs
    idx = next(i for i, (n, _) in enumerate(procs) if n == name)
    p = procs[idx][1]
    p.send_signal(sig)
    try:
        p.wait(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(timeout=15)
    say(f"{name} stopped by {signal.Signals(sig).name} (exit status {p.returncode})")
    time.sleep(down_seconds)
    assert loop.k8s.tmp is not None
    logf = open(loop.k8s.tmp / f"{name}.log", "ab")
    loop.k8s._logs.append(logf)  # closed by Cluster.stop
    new = subprocess.Popen(p.args, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                           cwd=loop.k8s.tmp, start_new_session=True, preexec_fn=_die_with_parent)
    procs[idx] = (name, new)
    return time.monotonic()


def uid_snapshot(loop: Loop) -> dict[str, str]:
    """`Kind name` -> uid of every child, server pod and volume claim."""
    out = {}
    for api, kind, name in CHILDREN:
        o = loop.k8s.get(api, kind, name, NAMESPACE)
        out[f"{kind} {name}"] = o["metadata"]["uid"]
    for kind, path in (("Pod", "pods"), ("PersistentVolumeClaim", "persistentvolumeclaims")):
        for o in loop.k8s.request("GET", f"/api/v1/namespaces/{NAMESPACE}/{path}")["items"]:
            if kind == "Pod" and not (o["metadata"].get("labels") or {}).get("statefulset.kubernetes.io/pod-name"):
                continue  # Job pods come and go; the server pods must not
            if kind == "PersistentVolumeClaim" and o["metadata"]["name"] == BACKUP_CLAIM:
                continue  # the backup store, not a server's volume
            out[f"{kind} {o['metadata']['name']}"] = o["metadata"]["uid"]
    if sum(k.startswith("Pod ") for k in out) != REPLICAS or \
            sum(k.startswith("PersistentVolumeClaim ") for k in out) != REPLICAS:
        raise StepFailed(f"expected {REPLICAS} server pods and volume claims, found {sorted(out)}")
    return out


def same_uids(loop: Loop, before: dict[str, str], what: str) -> None:
    after = {}
    for key in before:
        kind, name = key.split(" ", 1)
        api = next((a for a, k, n in CHILDREN if k == kind and n == name), "v1")
        o = loop.k8s.get_or_none(api, kind, name, NAMESPACE)
        after[key] = o["metadata"]["uid"] if o else "<gone>"
        if o and o["metadata"].get("deletionTimestamp"):
            after[key] += " (being deleted)"
    moved = [f"{k}: {before[k]} -> {after[k]}" for k in before if before[k] != after[k]]
    deleted = [o for _, typ, o in sum((w.since(loop.facts["chaos_start"]) for w in loop.watchers.values()), [])
               if typ == "DELETED" and o["metadata"].get("uid") in before.values()]
    if moved or deleted:
        raise StepFailed(f"{what}: something was deleted or recreated:\n    " + "\n    ".join(
            moved + [f"watch saw DELETED {o.get('kind')} {o['metadata']['name']}" for o in deleted]))
    say(f"{what}: the same {len(before)} uids (children, server pods, volume claims); no DELETED event")


def converge(loop: Loop, what: str, since: float, syncs_before: int) -> float:
    """Waits for Running with the same primary, readyReplicas, Ready=True, and a sync
    answered after `since`; records and returns the time from `since`."""
    primary = loop.facts["chaos_primary"]

    def ok() -> bool:
        m = loop.mysql()
        st = (m or {}).get("status") or {}
        return (loop.hook_calls("sync") > syncs_before and st.get("phase") == "Running"
                and st.get("primary") == primary and st.get("readyReplicas") == REPLICAS
                and condition(m, "Ready").get("status") == "True")

    loop.wait(f"{what}: a new sync, then Running with primary {primary}", ok, timeout=90,
              detail=lambda: f"{short_status(loop.mysql())}; sync calls {loop.hook_calls('sync')}")
    secs = time.monotonic() - since
    loop.timings.append((f"{what} -> converged", secs))
    say(f"{what}: converged {secs:.1f}s after recovery: {short_status(loop.mysql())}")
    return secs


def chaos_begin(loop: Loop) -> dict[str, str]:
    m = loop.mysql()
    loop.facts["chaos_primary"] = ((m or {}).get("status") or {}).get("primary")
    loop.facts.setdefault("chaos_start", time.monotonic())
    return uid_snapshot(loop)


def warning_count(loop: Loop, reason: str) -> int:
    evs = loop.k8s.request("GET", f"/api/v1/namespaces/{NAMESPACE}/events",
                           params={"fieldSelector": f"involvedObject.name={NAME},type=Warning"})["items"]
    return sum(int(e.get("count") or 1) for e in evs if e.get("reason") == reason
               and (e.get("involvedObject") or {}).get("kind") == "MySQL")


def mc_log_lines(loop: Loop, pattern: str, after_bytes: int) -> list[str]:
    text = loop.mc_log.read_bytes()[after_bytes:].decode(errors="replace")
    return [l for l in text.splitlines() if re.search(pattern, l)]


def chaos_kill_hook(loop: Loop) -> None:
    """SIGKILL the hook right after an edit that triggers a sync; down 5 s; restart; converge."""
    before = chaos_begin(loop)
    log_at = loop.mc_log.stat().st_size
    warnings_before = warning_count(loop, "SyncError")
    loop.k8s.request("PATCH", f"/apis/{API}/namespaces/{NAMESPACE}/mysqls/{NAME}",
                     {"metadata": {"annotations": {"full-loop/chaos": "kill-hook"}}},
                     content_type="application/merge-patch+json")
    hook_port = loop.hook_url.rsplit(":", 1)[1]
    up = restart_component(loop, "mysql-hook", signal.SIGKILL, down_seconds=5)
    wait_http(f"{loop.hook_url}/healthz", "mysql-hook (restarted)", 30, loop.procs_ok)
    refused = mc_log_lines(loop, rf"127\.0\.0\.1:{hook_port}.*(refused|EOF|reset)", log_at)
    say(f"hook restarted on port {hook_port}; Metacontroller logged {len(refused)} connection errors "
        f"and {warning_count(loop, 'SyncError') - warnings_before} SyncError events while it was down" + (f", e.g.\n      {refused[0][:400]}" if refused else ""))
    if not refused:
        loop.notes.append("kill-hook: Metacontroller logged no connection error while the hook was down")
    # The restarted hook's counters start at 0: any sync it answers is a new one.
    converge(loop, "kill hook (SIGKILL, 5 s down)", up, 0)
    same_uids(loop, before, "kill hook")


def chaos_restart_metacontroller(loop: Loop) -> None:
    """SIGTERM Metacontroller, start it again with the same arguments; converge."""
    before = chaos_begin(loop)
    syncs = loop.hook_calls("sync")
    up = restart_component(loop, "metacontroller", signal.SIGTERM, down_seconds=2)
    converge(loop, "restart Metacontroller (SIGTERM)", up, syncs)
    same_uids(loop, before, "restart Metacontroller")


def set_sync_url(loop: Loop, url: str) -> None:
    cc = loop.k8s.get("metacontroller.k8s.io/v1alpha1", "CompositeController", CC_NAME)
    cc["spec"]["hooks"]["sync"]["webhook"]["url"] = url
    loop.k8s.request("PUT", f"/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/{CC_NAME}", cc)


def chaos_misconfigured_sync_url(loop: Loop) -> None:
    """The sync URL points at a 404 path, then a closed port: SyncError events, nothing
    touched; the URL fixed: converge."""
    before = chaos_begin(loop)
    good = f"{loop.hook_url}/sync"
    closed = f"http://127.0.0.1:{free_ports(1)[0]}/sync"
    for bad in (f"{loop.hook_url}/no-such-hook", closed):
        warnings_before = warning_count(loop, "SyncError")
        log_at = loop.mc_log.stat().st_size
        t = time.monotonic()
        set_sync_url(loop, bad)
        loop.k8s.request("PATCH", f"/apis/{API}/namespaces/{NAMESPACE}/mysqls/{NAME}",
                         {"metadata": {"annotations": {"full-loop/chaos": bad}}},
                         content_type="application/merge-patch+json")
        loop.wait(f"a SyncError event with the sync URL {bad}",
                  lambda: warning_count(loop, "SyncError") > warnings_before, timeout=60,
                  detail=lambda: f"SyncError count {warning_count(loop, 'SyncError')}")
        say(f"sync URL {bad}: first SyncError event after {time.monotonic() - t:.1f}s")
        time.sleep(8)  # a resync or two of refusals
        errs = mc_log_lines(loop, r'"level":"error"', log_at)
        say(f"sync URL {bad}: {warning_count(loop, 'SyncError') - warnings_before} SyncError events, "
            f"{len(errs)} error lines in the Metacontroller log" + (f", e.g.\n      {errs[-1][:500]}" if errs else ""))
        same_uids(loop, before, f"sync URL {bad}")
    syncs = loop.hook_calls("sync")
    t = time.monotonic()
    set_sync_url(loop, good)
    converge(loop, "misconfigured sync URL fixed", t, syncs)
    same_uids(loop, before, "sync URL fixed")


def chaos_stray_child(loop: Loop) -> None:
    """A ConfigMap not named like a child but controlled by the MySQL: the hook refuses
    (422), Metacontroller records SyncError and touches nothing; the stray removed: converge."""
    before = chaos_begin(loop)
    warnings_before = warning_count(loop, "SyncError")
    log_at = loop.mc_log.stat().st_size
    stray = f"{NAME}-stray"
    t = time.monotonic()
    loop.k8s.create({"apiVersion": "v1", "kind": "ConfigMap",
                     # The generated selector's label, or Metacontroller releases it.
                     "metadata": {"name": stray, "namespace": NAMESPACE,
                                  "labels": {"controller-uid": loop.facts["uid"]}, "ownerReferences": [{
                         "apiVersion": API, "kind": "MySQL", "name": NAME, "uid": loop.facts["uid"],
                         "controller": True}]},
                     "data": {"full-loop": "a child the hook does not know"}})
    loop.wait("a SyncError event for the stray ConfigMap", lambda: warning_count(loop, "SyncError") > warnings_before,
              timeout=60, detail=lambda: f"SyncError count {warning_count(loop, 'SyncError')}")
    say(f"stray ConfigMap {stray}: first SyncError event after {time.monotonic() - t:.1f}s")
    time.sleep(6)
    refused = mc_log_lines(loop, r"422", log_at)
    say(f"stray ConfigMap: {warning_count(loop, 'SyncError') - warnings_before} SyncError events, "
        f"{len(refused)} log lines with 422" + (f", e.g.\n      {refused[-1][:500]}" if refused else ""))
    if not refused:
        raise StepFailed("no 422 from the hook in the Metacontroller log")
    if loop.k8s.get_or_none("v1", "ConfigMap", stray, NAMESPACE) is None:
        raise StepFailed(f"the stray ConfigMap {stray} was deleted")
    same_uids(loop, before, "stray ConfigMap present")
    syncs = loop.hook_calls("sync")
    t = time.monotonic()
    loop.k8s.delete("v1", "ConfigMap", stray, NAMESPACE, wait=False)
    converge(loop, "stray ConfigMap removed", t, syncs)
    same_uids(loop, before, "stray ConfigMap removed")


SCENARIOS: list[Callable[[Loop], None]] = [
    create_cluster,
    children_exist,
    pods_ready,
    bootstrap_job_completes,
    status_running,
    replica_endpoints,
    no_churn,
    no_warning_events,
    chaos_kill_hook,
    chaos_restart_metacontroller,
    chaos_misconfigured_sync_url,
    chaos_stray_child,
    mysqlbackup_succeeds,
    upgrade,
    edit_mid_rollout,
    failover,
    delete_with_final_backup,
    retain_after_delete_keeps_volumes,
]


# ------------------------------------------------------------------ fixtures


def webhook_requests(log: Path) -> list[tuple[str, dict]]:
    """(url, body) of every hook request Metacontroller logged at --zap-log-level=6."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if "Webhook request" not in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        body = rec.get("body")
        if isinstance(body, str):
            try:
                body = json.loads(body)
            except ValueError:
                continue
        if isinstance(body, dict):
            out.append((str(rec.get("url", "")), body))
    return out


def capture_fixtures(loop: Loop) -> None:
    reqs = webhook_requests(loop.mc_log)
    if not reqs:
        raise StepFailed(f"no 'Webhook request' lines in {loop.mc_log.name}; is --zap-log-level=6 set?")
    running = [b for u, b in reqs if u.endswith("/sync")
               and ((b.get("parent") or {}).get("status") or {}).get("phase") == "Running"]
    finalizing = [b for u, b in reqs if u.endswith("/finalize") and b.get("finalizing") is True
                  and (b.get("children") or {}).get("StatefulSet.apps/v1")]
    if not running:
        raise StepFailed("no sync request of a Running cluster was logged")
    if not finalizing:
        raise StepFailed("no finalize request (finalizing: true, StatefulSet still observed) was logged")
    for body, dest in ((running[-1], "sync/captured-running"), (finalizing[0], "finalize/captured-deleting")):
        text = json.dumps(body, indent=2, sort_keys=False) + "\n"
        if loop.k8s.token in text:
            raise StepFailed(f"the captured {dest} request contains the API token; not writing it")
        d = REPO / "test-fixtures" / dest
        d.mkdir(parents=True, exist_ok=True)
        (d / "request.json").write_text(text)
        say(f"wrote {d.relative_to(REPO)}/request.json ({len(text)} bytes)")


# ------------------------------------------------------------------ components


def hook_binary(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    env = os.environ.get("MYSQL_HOOK_BIN")
    if env:
        return Path(env)
    candidates = [p for p in (REPO / "target/debug/mysql-hook", REPO / "target/release/mysql-hook") if p.exists()]
    if not candidates:
        say("no target/*/mysql-hook yet; running cargo build --bin mysql-hook")
        subprocess.run(["cargo", "build", "--bin", "mysql-hook"], cwd=REPO, check=True)
        return REPO / "target/debug/mysql-hook"
    return max(candidates, key=lambda p: p.stat().st_mtime)


def run(args: argparse.Namespace) -> int:
    hook_bin = hook_binary(args.hook_bin)
    if not os.access(hook_bin, os.X_OK):
        raise HarnessError(f"the hook binary {hook_bin} is not executable")
    # etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and
    # Metacontroller (from its source unless METACONTROLLER_BIN is set).
    bin_dir = components.bin_dir_for(("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
                                      "kwok"), "--full")
    mc = components.metacontroller(bin_dir)
    say(f"control plane binaries: {bin_dir}; hook: {hook_bin}; metacontroller: {mc.bin} ({mc.origin}), "
        f"CRDs {mc.crds}")

    results: list[tuple[str, str, float]] = []
    with Cluster(bin_dir=bin_dir) as k8s:
        tmp = k8s.tmp
        assert tmp is not None
        procs_ok = components.procs_checker(k8s)
        components.start_controllers(k8s, bin_dir)
        (kwok_port,) = free_ports(1)
        kubeconfig = str(k8s.kubeconfig)
        (tmp / "kwok.yaml").write_text(KWOK_STAGES)
        k8s.spawn("kwok", [
            str(bin_dir / "kwok"),
            f"--kubeconfig={kubeconfig}",
            f"--config={tmp / 'kwok.yaml'}",
            "--manage-all-nodes=true",
            f"--cidr={POD_CIDR}",
            "--node-ip=10.240.0.1",
            f"--server-address=127.0.0.1:{kwok_port}",
        ])
        hook_url = components.start_hook(k8s, hook_bin, procs_ok)
        components.install_crds(k8s, mc)

        # Fake nodes (kwok makes them Ready) and volumes for the volume claims.
        for n in NODES:
            k8s.create({"apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n, "type": "kwok"},
                                     "annotations": {"kwok.x-k8s.io/node": "fake"}}})
            # The API server's admission taints a new Node not-ready; the node
            # lifecycle controller (not run here: nothing would heartbeat) would lift it.
            k8s.request("PATCH", f"/api/v1/nodes/{n}", {"spec": {"taints": None}},
                        content_type="application/merge-patch+json")
        for i in range(REPLICAS + 1):
            k8s.create({"apiVersion": "v1", "kind": "PersistentVolume",
                        "metadata": {"name": f"pv-{i}"},
                        "spec": {"capacity": {"storage": STORAGE}, "accessModes": ["ReadWriteOnce"],
                                 "persistentVolumeReclaimPolicy": "Retain",
                                 "hostPath": {"path": f"/tmp/fake-pv-{i}"}}})

        ccs = components.start_metacontroller(k8s, mc, hook_url, procs_ok,
                                              log_level="6" if args.capture_fixtures else "4",
                                              resync_seconds=RESYNC_PERIOD_SECONDS)
        names = [cc["metadata"]["name"] for cc in ccs]
        if names != [CC_NAME, BACKUP_CC_NAME]:
            raise HarnessError(f"metacontroller/ names the CompositeControllers {names}, not {[CC_NAME, BACKUP_CC_NAME]}")
        say(f"all components up: kube-controller-manager, kube-scheduler, kwok, mysql-hook at {hook_url}, "
            f"metacontroller; CompositeControllers {CC_NAME} and {BACKUP_CC_NAME} applied")

        loop = Loop(k8s=k8s, hook_url=hook_url, mc_log=tmp / "metacontroller.log", procs_ok=procs_ok)
        ns = f"/namespaces/{NAMESPACE}"
        for label, path in (("mysqls", f"/apis/{API}{ns}/mysqls"),
                            ("statefulsets", f"/apis/apps/v1{ns}/statefulsets"),
                            ("services", f"/api/v1{ns}/services"),
                            ("configmaps", f"/api/v1{ns}/configmaps"),
                            ("secrets", f"/api/v1{ns}/secrets"),
                            ("pdbs", f"/apis/policy/v1{ns}/poddisruptionbudgets"),
                            ("endpointslices", f"/apis/discovery.k8s.io/v1{ns}/endpointslices"),
                            ("jobs", f"/apis/batch/v1{ns}/jobs"),
                            ("mysqlbackups", f"/apis/{API}{ns}/mysqlbackups"),
                            ("pods", f"/api/v1{ns}/pods")):
            w = Watcher(k8s, path, label)
            loop.watchers[label] = w
            w.start()

        failed = False
        for step in SCENARIOS:
            name = step.__name__
            if failed:
                results.append((name, "SKIP", 0.0))
                continue
            t = time.monotonic()
            say(f"STEP  {name}: {(step.__doc__ or '').strip()}")
            try:
                step(loop)
                results.append((name, "PASS", time.monotonic() - t))
            except (StepFailed, ApiError, HarnessError) as e:
                failed = True
                results.append((name, "FAIL", time.monotonic() - t))
                say(f"FAIL  {name}: {e}")
                for comp in ("metacontroller", "mysql-hook"):
                    tail = "\n".join(l[:400] for l in k8s.log_tail(comp, 400).splitlines()
                                     if re.search(r'"level":"(error|warn)"|\b(ERROR|WARN)\b', l))[-4000:]
                    if tail:
                        say(f"errors/warnings in the {comp} log:\n{tail}")
        if not failed and args.capture_fixtures:
            try:
                capture_fixtures(loop)
            except StepFailed as e:
                failed = True
                say(f"FAIL  capture_fixtures: {e}")
        for w in loop.watchers.values():
            w.stopped.set()

    print("\nfull loop summary:")
    for name, res, secs in results:
        print(f"  {res:4}  {name:26} {secs:6.1f}s")
    for what, secs in loop.timings:
        print(f"  timing: {what}: {secs:.1f}s")
    for n in loop.notes:
        print(f"  note: {n}")
    print(f"full loop: {'FAILED' if failed else 'passed'} in {time.monotonic() - T0:.0f}s", flush=True)
    return 1 if failed else 0


def main() -> int:
    global QUIET_SECONDS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hook-bin", help="the mysql-hook binary (default: $MYSQL_HOOK_BIN or target/*/mysql-hook)")
    ap.add_argument("--capture-fixtures", action="store_true",
                    help="log hook bodies (--zap-log-level=6) and write the captured-* fixtures")
    ap.add_argument("--quiet-seconds", type=float, default=QUIET_SECONDS,
                    help="how long a Running cluster must stay still (default %(default)s)")
    args = ap.parse_args()
    QUIET_SECONDS = args.quiet_seconds
    try:
        reason = components.metacontroller_skip_reason()
    except HarnessError as e:
        reason = None
        print(f"full loop: FAILED to set up: {e}", flush=True)
        return 1
    if reason:
        print(f"full loop skipped: {reason}", flush=True)
        if os.environ.get("MYSQL_HOOK_REQUIRE_FULL_LOOP") == "1":
            print("full loop: FAILED: MYSQL_HOOK_REQUIRE_FULL_LOOP=1 (CI) does not accept a skipped full loop",
                  flush=True)
            return 1
        return 0
    try:
        return run(args)
    except HarnessError as e:
        print(f"full loop: FAILED to set up: {e}", flush=True)
        return 1
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())

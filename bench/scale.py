#!/usr/bin/env python3
"""Scale: N clusters of 3 servers under a real control plane, kwok playing the kubelet.

For each N given, a fresh control plane on loopback (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok, Metacontroller and the hook's release
binary, started by the same code as the full loop: tests/k8s/components.py), with the
shipped 60 s resync. It creates N namespaces with a 3-server `MySQL` each, as fast as
the API server takes them, and measures (issue 36.2):

- time from the first create to every cluster `Running`;
- hook calls per cluster-minute in steady state (from the hook's own
  `mysql_hook_requests_total`), against the 1 the resync asks for;
- CPU (user + system, from /proc) and resident memory of the hook, Metacontroller,
  the API server, etcd and the controller-manager, during creation and in steady state;
- Jobs and pods created per cluster-hour in steady state (watch events);
- a failover in one cluster while the others resync: its primary's pod is marked not
  Ready as the full loop does, and the time until `<name>-primary` selects the new
  primary is reported (run N = 1 for the single-cluster figure).

No database runs: kwok completes the bootstrap and failover Jobs with the result
lines their pods would write (full_loop.py's stages), so this measures the control
loop only. The rig gives kwok one fake node per 100 server pods (110 pods each)
and the controller-manager an API rate of 200 requests per second, so that neither
is what stops the measurement (`--nodes` and `--kcm-qps` change both);
Metacontroller runs with the full loop's flags (5 workers, client QPS 50, burst 100).

    bench/scale.py 1 50 100 200 [--steady 180] [--settle 60] [--timeout 900] [--nodes K] [--kcm-qps Q]

Prints one JSON line per N (`scale: {...}`) and a markdown table at the end. Needs
`cargo build --release --bin mysql-hook` and the components of
`tests/k8s/build-components.sh --full` (built on first use).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "k8s"))
import components  # noqa: E402
import full_loop  # noqa: E402  (its kwok stages: Job pods end with their result lines)
from harness import Cluster, free_ports  # noqa: E402

API = "mysqlhook.dev/v1alpha1"
NAME = "db"  # kwok's failover stage reports db-1 (or db-2) promoted, so every cluster is "db"
REPLICAS = 3
RESYNC_SECONDS = 60  # metacontroller/compositecontroller.yaml
PODS_PER_NODE = 100
KCM_QPS = 200
WATCHED = {"jobs": "/apis/batch/v1/jobs", "pods": "/api/v1/pods"}


def say(msg: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def ns(i: int) -> str:
    return f"scale-{i:03d}"


class Counter:
    """Counts ADDED watch events of one collection (the LISTED items are not counted)."""

    def __init__(self, k8s: Cluster, path: str):
        self.added = 0
        self.lock = threading.Lock()
        self.watch = components.Watch(k8s, path, self._on)
        self.watch.start()

    def _on(self, typ: str, _obj: dict) -> None:
        if typ == "ADDED":
            with self.lock:
                self.added += 1

    def value(self) -> int:
        with self.lock:
            return self.added


def proc_usage(k8s: Cluster) -> dict[str, tuple[float, int]]:
    """CPU seconds (user + system) and resident kB of every spawned component."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for name, p in k8s.procs:
        try:
            stat = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(stat[11]) + int(stat[12])) / tick  # utime, stime (fields 14, 15)
            rss = next(int(line.split()[1]) for line in Path(f"/proc/{p.pid}/status").read_text().splitlines()
                       if line.startswith("VmRSS:"))
            out[name] = (cpu, rss)
        except (OSError, StopIteration, IndexError, ValueError):
            pass
    return out


def hook_calls(hook_url: str) -> dict[str, float]:
    """Requests by hook (every outcome), from the full loop's reading of /metrics."""
    metrics = full_loop.hook_metrics(hook_url)
    calls: dict[str, float] = {}
    for key, value in metrics.items():
        if key.startswith("mysql_hook_requests_total{") and 'hook="' in key:
            hook = key.split('hook="', 1)[1].split('"', 1)[0]
            calls[hook] = calls.get(hook, 0.0) + value
    return calls


def phases(k8s: Cluster) -> dict[str, int]:
    lst = k8s.request("GET", f"/apis/{API}/mysqls")
    out: dict[str, int] = {}
    for m in lst.get("items", []):
        st = m.get("status") or {}
        ph = st.get("phase") or "none"
        if ph == "Running" and st.get("readyReplicas") != REPLICAS:
            ph = "Running-not-ready"
        out[ph] = out.get(ph, 0) + 1
    return out


def failover(k8s: Cluster, namespace: str, timeout: float) -> float | None:
    """Marks the primary's pod not Ready as the full loop does; seconds until the
    primary Service selects another pod, None on timeout."""
    m = k8s.get(API, "MySQL", NAME, namespace)
    old = (m.get("status") or {}).get("primary")
    full_loop.mark_not_ready(k8s, namespace, old)
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        svc = k8s.get("v1", "Service", f"{NAME}-primary", namespace)
        sel = (svc["spec"].get("selector") or {}).get("statefulset.kubernetes.io/pod-name")
        if sel and sel != old:
            return time.monotonic() - t0
        time.sleep(0.2)
    return None


def delta(a: dict[str, tuple[float, int]], b: dict[str, tuple[float, int]], name: str) -> float:
    return b.get(name, (0.0, 0))[0] - a.get(name, (0.0, 0))[0]


def run_one(n: int, args: argparse.Namespace, bin_dir: Path, mc: components.Metacontroller,
            hook_bin: Path) -> dict[str, Any]:
    res: dict[str, Any] = {"clusters": n, "rig": {"nodes": args.nodes or "auto", "kcm_qps": args.kcm_qps or "default"}}
    with Cluster(bin_dir=bin_dir) as k8s:
        tmp = k8s.tmp
        assert tmp is not None
        procs_ok = components.procs_checker(k8s)
        qps = [f"--kube-api-qps={args.kcm_qps}", f"--kube-api-burst={2 * args.kcm_qps}"] if args.kcm_qps else []
        components.start_controllers(k8s, bin_dir, extra_args=qps)
        (kwok_port,) = free_ports(1)
        (tmp / "kwok.yaml").write_text(full_loop.KWOK_STAGES)
        k8s.spawn("kwok", [str(bin_dir / "kwok"), f"--kubeconfig={k8s.kubeconfig}", f"--config={tmp / 'kwok.yaml'}",
                           "--manage-all-nodes=true", "--cidr=10.128.0.0/12", "--node-ip=10.240.0.1",
                           f"--server-address=127.0.0.1:{kwok_port}"])
        hook_url = components.start_hook(k8s, hook_bin, procs_ok)
        components.install_crds(k8s, mc)
        nodes = args.nodes or max(3, math.ceil(n * REPLICAS / PODS_PER_NODE) + 1)
        res["rig"]["nodes"] = nodes
        for i in range(nodes):
            name = f"kwok-node-{i}"
            k8s.create({"apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "type": "kwok"},
                                     "annotations": {"kwok.x-k8s.io/node": "fake"}}})
            k8s.request("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}},
                        content_type="application/merge-patch+json")
        for i in range(n * REPLICAS):
            k8s.create({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-{i}"},
                        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                 "persistentVolumeReclaimPolicy": "Retain",
                                 "hostPath": {"path": f"/tmp/fake-pv-{i}"}}})
        components.start_metacontroller(k8s, mc, hook_url, procs_ok, resync_seconds=RESYNC_SECONDS)
        counters = {k: Counter(k8s, p) for k, p in WATCHED.items()}
        say(f"N={n}: control plane up ({nodes} kwok nodes, {n * REPLICAS} volumes); creating {n} clusters")

        u0, c0 = proc_usage(k8s), hook_calls(hook_url)
        t0 = time.monotonic()
        for i in range(n):
            k8s.ensure_namespace(ns(i))
            k8s.create({"apiVersion": API, "kind": "MySQL", "metadata": {"name": NAME, "namespace": ns(i)},
                        "spec": {"replicas": REPLICAS, "version": "8.4.3", "storage": {"size": "1Gi"}}})
        res["create_calls_s"] = round(time.monotonic() - t0, 1)
        last_say = 0.0
        while True:
            procs_ok()
            ph = phases(k8s)
            el = time.monotonic() - t0
            if ph.get("Running", 0) == n:
                res["all_running_s"] = round(el, 1)
                break
            if el > args.timeout:
                res["all_running_s"] = None
                res["phases_at_timeout"] = ph
                break
            if el - last_say > 30:
                say(f"N={n}: {el:.0f}s {ph}")
                last_say = el
            time.sleep(2)
        u1, c1 = proc_usage(k8s), hook_calls(hook_url)
        res["phases"] = phases(k8s)
        res["creation_hook_calls_per_cluster"] = round((sum(c1.values()) - sum(c0.values())) / n, 2)
        res["creation_cpu_s"] = {k: round(delta(u0, u1, k), 1) for k in u1}
        say(f"N={n}: all Running after {res['all_running_s']}s; settling {args.settle}s")
        time.sleep(args.settle)

        u2, c2 = proc_usage(k8s), hook_calls(hook_url)
        j2, p2 = counters["jobs"].value(), counters["pods"].value()
        time.sleep(args.steady)
        u3, c3 = proc_usage(k8s), hook_calls(hook_url)
        j3, p3 = counters["jobs"].value(), counters["pods"].value()
        minutes = args.steady / 60
        res["steady_calls_per_cluster_minute"] = {
            h: round((c3.get(h, 0) - c2.get(h, 0)) / n / minutes, 2) for h in c3}
        res["steady_cpu_pct"] = {k: round(100 * delta(u2, u3, k) / args.steady, 1) for k in u3}
        res["rss_mb"] = {k: round(v[1] / 1024) for k, v in u3.items()}
        res["steady_jobs_per_cluster_hour"] = round((j3 - j2) / n / (args.steady / 3600), 2)
        res["steady_pods_per_cluster_hour"] = round((p3 - p2) / n / (args.steady / 3600), 2)
        res["phases_steady"] = phases(k8s)

        if res["all_running_s"] is None:
            res["failover_to_new_primary_s"] = "skipped: not every cluster Running"
        else:
            fo = failover(k8s, ns(n // 2), timeout=120)
            res["failover_to_new_primary_s"] = None if fo is None else round(fo, 1)
        say(f"N={n}: scale: {json.dumps(res)}")
        for c in counters.values():
            c.watch.stopped.set()
    print(f"scale: {json.dumps(res)}", flush=True)
    return res


def table(rows: list[dict[str, Any]]) -> str:
    comps = ["mysql-hook", "metacontroller", "kube-apiserver", "etcd", "kube-controller-manager"]
    head = ("| N | all Running s | hook calls/cluster (creation) | sync calls/cluster-min (steady) | "
            + " | ".join(f"{c} CPU % steady" for c in comps) + " | "
            + " | ".join(f"{c} RSS MB" for c in comps) + " | Jobs/cluster-h | pods/cluster-h | failover s |")
    sep = "|" + "---|" * (head.count("|") - 1)
    lines = [head, sep]
    for r in rows:
        cpu, rss = r.get("steady_cpu_pct", {}), r.get("rss_mb", {})
        lines.append(
            f"| {r['clusters']} | {r.get('all_running_s')} | {r.get('creation_hook_calls_per_cluster')} | "
            f"{r.get('steady_calls_per_cluster_minute', {}).get('sync')} | "
            + " | ".join(str(cpu.get(c)) for c in comps) + " | "
            + " | ".join(str(rss.get(c)) for c in comps) + " | "
            f"{r.get('steady_jobs_per_cluster_hour')} | {r.get('steady_pods_per_cluster_hour')} | "
            f"{r.get('failover_to_new_primary_s')} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("clusters", nargs="+", type=int, help="the cluster counts N to run, each on a fresh control plane")
    ap.add_argument("--steady", type=float, default=180, help="steady-state window, seconds (default %(default)s)")
    ap.add_argument("--settle", type=float, default=60,
                    help="wait after all Running before the window, seconds (default %(default)s)")
    ap.add_argument("--timeout", type=float, default=900, help="give up on all Running after this (default %(default)s)")
    ap.add_argument("--nodes", type=int, default=0,
                    help=f"kwok nodes (110 pods each; default: one per {PODS_PER_NODE} server pods, plus one, at least 3)")
    ap.add_argument("--kcm-qps", type=int, default=KCM_QPS,
                    help="kube-controller-manager's API rate (burst twice that; 0: its default, 20) (default %(default)s)")
    ap.add_argument("--hook-bin", default=str(REPO / "target/release/mysql-hook"))
    args = ap.parse_args()
    hook_bin = Path(args.hook_bin)
    if not os.access(hook_bin, os.X_OK):
        print(f"scale: {hook_bin} is not an executable; run cargo build --release --bin mysql-hook", file=sys.stderr)
        return 2
    bin_dir = components.bin_dir_for(("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"),
                                     "--full")
    mc = components.metacontroller(bin_dir)
    rows = [run_one(n, args, bin_dir, mc, hook_bin) for n in args.clusters]
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

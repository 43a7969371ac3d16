"""Start-up code shared by the full loop (kwok) and the real-server loop (real node).

Both run, on top of ``harness.Cluster`` (etcd + kube-apiserver), the same
kube-controller-manager and kube-scheduler, the hook binary and a real
Metacontroller with our CompositeControllers pointed at the local hook. This module
starts those; each loop adds what plays the node (kwok, or ``realnode.RealNode``).

Metacontroller comes from ``METACONTROLLER_BIN`` / ``METACONTROLLER_CRDS`` when set,
else it is built by ``build-components.sh --full`` from its source tree
(``MYSQL_HOOK_METACONTROLLER_SRC``, ``<repo>/../shared/metacontroller`` or
``/work/shared/metacontroller``) and its CRDs are read from that tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable
from urllib.parse import urlsplit

from harness import BUILD_SCRIPT, REPO, Cluster, HarnessError, ensure_binaries, free_ports, load_yaml_docs

# What kube-controller-manager runs for both loops: StatefulSets, Jobs, EndpointSlices
# (the headless Service's pod DNS records and the -primary Service's endpoint), the
# garbage collector, ServiceAccounts with tokens, the PV binder.
CONTROLLERS = (
    "statefulset-controller", "job-controller", "endpointslice-controller",
    "garbage-collector-controller", "serviceaccount-controller", "serviceaccount-token-controller",
    "persistentvolume-binder-controller",
)

CC_MANIFESTS = ("compositecontroller.yaml", "backup-compositecontroller.yaml")


# ------------------------------------------------------------------- binaries


def bin_dir_for(needed: Iterable[str], flag: str) -> Path:
    """The component bin dir, built with `build-components.sh <flag>` when something
    in `needed` is missing or stale (a no-op when the cache is current)."""
    if os.environ.get("MYSQL_HOOK_K8S_BIN_DIR"):
        bin_dir = ensure_binaries()
    else:
        bin_dir = ensure_binaries_flag(flag)
    missing = [b for b in needed if not os.access(bin_dir / b, os.X_OK)]
    if missing:
        raise HarnessError(f"no {', '.join(missing)} in {bin_dir}")
    return bin_dir


def ensure_binaries_flag(flag: str) -> Path:
    """build-components.sh with `flag` (--full or --node); returns the bin dir."""
    if flag == "--full":
        return ensure_binaries(full=True)
    proc = subprocess.run(["bash", str(BUILD_SCRIPT), flag], stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise HarnessError(f"{BUILD_SCRIPT.name} {flag} failed with exit status {proc.returncode}")
    lines = [l for l in proc.stdout.splitlines() if l.strip()]
    if not lines:
        raise HarnessError(f"{BUILD_SCRIPT.name} printed no bin directory")
    return Path(lines[-1].strip())


@dataclass(frozen=True)
class Metacontroller:
    bin: Path
    crds: Path
    origin: str  # where they came from, for the log


def metacontroller_source() -> Path | None:
    """The Metacontroller source tree build-components.sh would build, or None."""
    proc = subprocess.run(["bash", str(BUILD_SCRIPT), "--print-metacontroller-src"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise HarnessError(proc.stderr.strip() or f"{BUILD_SCRIPT.name} --print-metacontroller-src failed")
    out = proc.stdout.strip()
    return Path(out) if out else None


def metacontroller_skip_reason() -> str | None:
    """Why no Metacontroller can be had here (None when one can)."""
    if os.environ.get("METACONTROLLER_BIN") and os.environ.get("METACONTROLLER_CRDS"):
        return None
    if metacontroller_source() is not None:
        return None
    return ("no Metacontroller: neither METACONTROLLER_BIN and METACONTROLLER_CRDS are set nor is its source "
            "at $MYSQL_HOOK_METACONTROLLER_SRC, ../shared/metacontroller or /work/shared/metacontroller")


def metacontroller(bin_dir: Path) -> Metacontroller:
    """The Metacontroller binary and CRDs (the variables override the built ones);
    `bin_dir` must come from a --full (or --node) build."""
    env_bin, env_crds = os.environ.get("METACONTROLLER_BIN"), os.environ.get("METACONTROLLER_CRDS")
    src = None if (env_bin and env_crds) else metacontroller_source()
    if env_bin:
        mc_bin, origin = Path(env_bin), "METACONTROLLER_BIN"
    elif src is not None:
        mc_bin, origin = bin_dir / "metacontroller", f"built from {src}"
    else:
        raise HarnessError(metacontroller_skip_reason() or "no Metacontroller")
    if env_crds:
        crds = Path(env_crds)
    elif src is not None:
        crds = src / "manifests" / "metacontroller-crds-v1.yaml"
    else:
        raise HarnessError("METACONTROLLER_BIN is set but METACONTROLLER_CRDS is not, and there is no "
                           "Metacontroller source to read the CRDs from")
    for p, what in ((mc_bin, "the Metacontroller binary"), (crds, "Metacontroller's CRDs")):
        if not p.exists():
            raise HarnessError(f"{what} {p} does not exist")
    if not os.access(mc_bin, os.X_OK):
        raise HarnessError(f"the Metacontroller binary {mc_bin} is not executable")
    return Metacontroller(mc_bin, crds, origin)


# ------------------------------------------------------------------ processes


def procs_checker(k8s: Cluster) -> Callable[[], None]:
    """A function that raises HarnessError when any spawned component has exited."""
    def procs_ok() -> None:
        for name, p in k8s.procs:
            if p.poll() is not None:
                raise HarnessError(f"{name} exited with status {p.returncode}; last log lines:\n"
                                   f"{k8s.log_tail(name)}")
    return procs_ok


def wait_http(url: str, what: str, timeout: float, procs_ok: Callable[[], None]) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        procs_ok()
        try:
            with urllib.request.urlopen(url, timeout=3) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError) as e:
            last = str(e)
        time.sleep(0.25)
    raise HarnessError(f"{what} not healthy at {url} after {timeout:.0f}s: {last}")


def start_controllers(k8s: Cluster, bin_dir: Path, controllers: Iterable[str] = CONTROLLERS,
                      extra_args: Iterable[str] = ()) -> None:
    """kube-controller-manager (the given controllers, with `extra_args`) and
    kube-scheduler, on loopback."""
    assert k8s.tmp is not None
    kcm_port, sched_port = free_ports(2)
    kubeconfig = str(k8s.kubeconfig)
    k8s.spawn("kube-controller-manager", [
        str(bin_dir / "kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1", f"--secure-port={kcm_port}",
        "--leader-elect=false",
        "--controllers=" + ",".join(controllers),
        f"--service-account-private-key-file={k8s.tmp / 'sa.key'}",
        f"--root-ca-file={k8s.tmp / 'ca.crt'}",
        "--use-service-account-credentials=false",
        "--concurrent-statefulset-syncs=5",
        "--v=1",
        *extra_args,
    ])
    k8s.spawn("kube-scheduler", [
        str(bin_dir / "kube-scheduler"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1", f"--secure-port={sched_port}",
        "--leader-elect=false", "--v=1",
    ])


def start_hook(k8s: Cluster, hook_bin: Path, procs_ok: Callable[[], None],
               extra_args: Iterable[str] = ()) -> str:
    """`mysql-hook [extra_args] serve` on a free loopback port; returns its URL once
    healthy. `extra_args` go before `serve`: options such as --scripts-image are
    top-level options of the binary, not of the subcommand."""
    (port,) = free_ports(1)
    k8s.spawn("mysql-hook", [str(hook_bin), *extra_args, "serve", "--listen", f"127.0.0.1:{port}"])
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/healthz", "mysql-hook", 30, procs_ok)
    return url


def compositecontroller(hook_url: str, manifest: str, resync_seconds: int) -> dict:
    """The CompositeController in metacontroller/<manifest>, its hook URLs pointed at
    the local hook (same paths), resyncing every `resync_seconds`."""
    docs = [d for d in load_yaml_docs(REPO / "metacontroller" / manifest) if d.get("kind") == "CompositeController"]
    if len(docs) != 1:
        raise HarnessError(f"metacontroller/{manifest} should hold one CompositeController")
    cc = docs[0]
    for hook in (cc["spec"].get("hooks") or {}).values():
        hook["webhook"]["url"] = hook_url + urlsplit(hook["webhook"]["url"]).path
    cc["spec"]["resyncPeriodSeconds"] = resync_seconds
    return cc


def crd_docs(path: Path) -> list[dict]:
    files = sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml")) if path.is_dir() else [path]
    docs = [d for f in files for d in load_yaml_docs(f) if d.get("kind") == "CustomResourceDefinition"]
    if not docs:
        raise HarnessError(f"{path} holds no CustomResourceDefinition")
    return docs


def install_crds(k8s: Cluster, mc: Metacontroller) -> None:
    """Metacontroller's CRDs and ours, Established and served."""
    for doc in crd_docs(mc.crds) + load_yaml_docs(REPO / "metacontroller/crd.yaml"):
        k8s.apply(doc)
        k8s.wait_for_crd_established(doc["metadata"]["name"])
    k8s.wait_for_kind("mysqlhook.dev/v1alpha1", "MySQL")
    k8s.wait_for_kind("mysqlhook.dev/v1alpha1", "MySQLBackup")


def start_metacontroller(k8s: Cluster, mc: Metacontroller, hook_url: str, procs_ok: Callable[[], None],
                         log_level: str = "4", resync_seconds: int = 5) -> list[dict]:
    """Metacontroller out of cluster, then our CompositeControllers; returns them."""
    mc_metrics, mc_health = free_ports(2)
    k8s.spawn("metacontroller", [
        str(mc.bin), f"--kubeconfig={k8s.kubeconfig}", "--leader-election=false",
        "--discovery-interval=5s", f"--metrics-address=127.0.0.1:{mc_metrics}",
        f"--health-probe-bind-address=127.0.0.1:{mc_health}", "--pprof-address=0",
        "--client-go-qps=50", "--client-go-burst=100", "--workers=5",
        "--zap-encoder=json", f"--zap-log-level={log_level}",
    ])
    wait_http(f"http://127.0.0.1:{mc_health}/readyz", "metacontroller", 60, procs_ok)
    ccs = [compositecontroller(hook_url, m, resync_seconds) for m in CC_MANIFESTS]
    for cc in ccs:
        k8s.apply(cc)
    return ccs


class Watch(threading.Thread):
    """Streams the watch events of one collection to a callback (type, object):
    the current items first (type LISTED), then a watch from their resourceVersion;
    lists again after an ERROR event (e.g. 410 Gone) and reconnects after a dropped
    stream. Both loops use it: full_loop.py records events, real_servers.py reacts."""

    def __init__(self, k8s: Cluster, path: str, on_event: Callable[[str, dict], None]):
        super().__init__(daemon=True, name=f"watch {path}")
        self.k8s = k8s
        self.path = path
        self.on_event = on_event
        self.stopped = threading.Event()
        self.rv = ""

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                if not self.rv:
                    lst = self.k8s.request("GET", self.path)
                    self.rv = lst["metadata"]["resourceVersion"]
                    for obj in lst.get("items", []):
                        self.on_event("LISTED", obj)
                url = (f"{self.k8s.server}{self.path}?watch=1&allowWatchBookmarks=false"
                       f"&timeoutSeconds=30&resourceVersion={self.rv}")
                req = urllib.request.Request(url)
                req.add_header("Authorization", f"Bearer {self.k8s.token}")
                with urllib.request.urlopen(req, timeout=60, context=self.k8s.ssl_ctx) as r:
                    for line in r:
                        if self.stopped.is_set():
                            return
                        ev = json.loads(line)
                        if ev.get("type") == "ERROR":
                            self.rv = ""
                            break
                        self.rv = ev["object"]["metadata"].get("resourceVersion", self.rv)
                        self.on_event(ev["type"], ev["object"])
            except Exception:  # noqa: BLE001 - reconnect; teardown ends us
                if self.stopped.is_set():
                    return
                time.sleep(0.5)

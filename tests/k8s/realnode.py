"""A real Kubernetes node on this machine, for tests: containerd + kubelet + CoreDNS.

``RealNode`` joins one real Node to a ``harness.Cluster`` (whose kube-controller-manager
and kube-scheduler come from ``components.py``). Pods scheduled to it run for real:
the kubelet (v1.37, built by ``build-components.sh --node``) drives Debian's
containerd 1.6 and runc, each pod in its own network namespace on a bridge and /24
of this run's own (CNI ``bridge`` + ``host-local`` + ``loopback`` from
``containernetworking-plugins``), with images imported from local docker-archive
tars (``images.py``: MariaDB from Debian packages, the hook's image, pause).
CoreDNS runs on the host on the bridge's gateway address and serves
``cluster.local`` from the test API server (its kubernetes plugin), so pod DNS
names such as ``db-0.db-headless.demo.svc`` resolve in pods; the kubelet names it
as ``clusterDNS``. PersistentVolumes are host directories owned by 999:999 with
reclaim policy Retain, so a claim's data outlives its pods.

Everything lives under one temp dir (``/tmp/mysql-hook-node-*``): containerd's
config, root, state, socket and runc root; the kubelet's root dir, pod logs and
certificates; CNI config and IPAM state; the volumes. ``stop()`` (also on
exceptions and signals through the ``with`` block) kills the pods' processes and
containerd's shims, stops the daemons, unmounts everything under that dir (rootfs
overlays, network namespaces, secret tmpfs), deletes the bridge, the kubelet's
cgroup root, the iptables chains the kubelet adds, CNI cache files, restores the
kernel settings the kubelet changes (vm.overcommit_memory, kernel.panic, ...), and
removes the dir. A run that was SIGKILLed leaves its dir with ``owner.pid``; the
next ``RealNode`` cleans such leftovers first (``cleanup_stale``).

Settings that were needed on this VM (see ../shared/REAL-NODE.md): containerd's
``restrict_oom_score_adj = true`` (no CAP_SYS_RESOURCE: a negative oom_score_adj
kills runc's child) and a local ``sandbox_image``; kubelet ``failCgroupV1: false``
(cgroup v1, hybrid), ``cgroupDriver: cgroupfs``, ``failSwapOn: false``,
``enforceNodeAllocatable: []``.

Needs root, ``containerd``, ``runc``, ``ctr``, ``ip``, ``iptables`` and the CNI plugins
in ``/usr/lib/cni`` (``apt-get install containerd runc containernetworking-plugins
iproute2 iptables``); ``missing_prerequisites()`` says what is missing.
"""

from __future__ import annotations

import ctypes
import datetime
import hashlib
import ipaddress
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import urlsplit

import yaml

from harness import Cluster, HarnessError, _die_with_parent, free_ports, log
from images import Image

NODE_PREFIX = "mysql-hook-node-"
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_CACHE = Path("/var/lib/cni/results")
SHIM_SOCKETS = Path("/run/containerd/s")
CGROUP_FS = Path("/sys/fs/cgroup")
CLUSTER_DOMAIN = "cluster.local"
# Kernel settings the kubelet sets at start-up (protectKernelDefaults: false);
# recorded before and put back afterwards.
# With kube-proxy (the install test) also forwarding, which Services to pods need.
KERNEL_TUNABLES = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
                   "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward",
                   "net/ipv4/conf/all/route_localnet")
# The kubelet adds iptables chains and rules (KUBE-FIREWALL jumped to from INPUT and
# OUTPUT, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT, ...). Those with "KUBE-" in them
# that were not there before the run are removed again.
IPTABLES_TABLES = ("filter", "nat", "mangle", "raw")
NAMESPACE = "k8s.io"
# The API server's --service-cluster-ip-range (harness.py).
SERVICE_CIDR = "10.96.0.0/16"


def missing_prerequisites() -> list[str]:
    """What this machine lacks for a real node (empty when nothing)."""
    out = []
    if os.geteuid() != 0:
        out.append("root (containerd, runc, mounts and network namespaces need it)")
    for tool, pkg in (("containerd", "containerd"), ("runc", "runc"), ("ctr", "containerd"),
                      ("ip", "iproute2"), ("iptables", "iptables"), ("mmdebstrap", "mmdebstrap"),
                      ("gcc", "gcc"), ("ldd", "libc-bin")):
        if shutil.which(tool) is None:
            out.append(f"{tool} (apt-get install {pkg})")
    for plugin in ("bridge", "host-local", "loopback"):
        if not os.access(CNI_BIN_DIR / plugin, os.X_OK):
            out.append(f"{CNI_BIN_DIR / plugin} (apt-get install containernetworking-plugins)")
    if not (CGROUP_FS / "memory").is_dir() and not (CGROUP_FS / "cgroup.controllers").exists():
        out.append(f"a cgroup file system at {CGROUP_FS}")
    return out


def _run(*argv: str, check: bool = True, quiet: bool = False) -> subprocess.CompletedProcess:
    p = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and p.returncode != 0:
        raise HarnessError(f"`{' '.join(argv)}` failed ({p.returncode}): {p.stdout.strip()}")
    if not quiet and p.returncode != 0:
        log(f"`{' '.join(argv)}` exited {p.returncode}: {p.stdout.strip()[:300]}")
    return p


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _children() -> dict[int, list[int]]:
    """ppid -> pids, from /proc."""
    out: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(d.name))
    return out


def _descendants(pid: int, children: dict[int, list[int]]) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


_libc = ctypes.CDLL("libc.so.6", use_errno=True)
MNT_DETACH = 2


def _mounts_under(root: Path) -> list[str]:
    """Mount points at or below root, deepest first (from /proc/self/mountinfo)."""
    prefix = str(root).rstrip("/") + "/"
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mp = line.split()[4].replace("\\040", " ")
        if mp == str(root) or mp.startswith(prefix):
            points.append(mp)
    return sorted(set(points), key=lambda p: (-p.count("/"), p))


def _unmount_all(root: Path) -> list[str]:
    """Unmounts (lazily) every mount under root; returns those that stayed."""
    for _ in range(5):
        points = _mounts_under(root)
        if not points:
            return []
        for mp in points:
            if _libc.umount2(mp.encode(), MNT_DETACH) != 0:
                err = ctypes.get_errno()
                if err not in (22, 2):  # EINVAL (not a mount any more), ENOENT
                    log(f"umount {mp}: {os.strerror(err)}")
    return _mounts_under(root)


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name


# ------------------------------------------------------------------- leftovers


def _teardown_dir(d: Path, procs: Iterable[subprocess.Popen] = ()) -> None:
    """Everything that clean-up does for a node dir, live or stale (idempotent)."""
    state = _read_state(d)
    sock = d / "containerd.sock"
    # 1. Every process started from this node (containerd's shims and the pods under
    #    them, and the daemons if still alive): pods first, then shims, then the rest.
    children = _children()
    shims, others = [], []
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        pid = int(pid_dir.name)
        argv = _cmdline(pid)
        if not argv:
            continue
        if "containerd-shim" in Path(argv[0]).name and str(sock) in argv:
            shims.append((pid, argv))
        elif any(str(d) in a for a in argv[1:]) and pid != os.getpid():
            others.append(pid)
    victims = [c for pid, _ in shims for c in _descendants(pid, children)]
    for pid in victims:
        _kill(pid)
    for pid, argv in shims:
        _kill(pid)
        # containerd 1.6 puts shim sockets in /run/containerd/s/<sha256(address/ns/id)>.
        try:
            ns, cid = argv[argv.index("-namespace") + 1], argv[argv.index("-id") + 1]
            h = hashlib.sha256(os.path.join(str(sock), ns, cid).encode()).hexdigest()
            (SHIM_SOCKETS / h).unlink(missing_ok=True)
        except (ValueError, IndexError):
            pass
    for p in procs:
        if p.poll() is None:
            p.kill()
    for pid in others:
        _kill(pid)
    _wait_gone([pid for pid, _ in shims] + victims + others, 15)
    # 2. Mounts under the dir (rootfs overlays, network namespaces, secret tmpfs).
    stuck = _unmount_all(d)
    # 3. The bridge, the CNI cache, the kubelet's cgroups and chains, kernel settings.
    bridge = state.get("bridge")
    if bridge and Path(f"/sys/class/net/{bridge}").exists():
        _run("ip", "link", "delete", bridge, check=False)
    net = state.get("network")
    if net and CNI_CACHE.is_dir():
        for f in CNI_CACHE.glob(f"{net}-*"):
            f.unlink(missing_ok=True)
        # The loopback plugin's cache entries are named by sandbox, not by network.
        for sub in ("state", "root"):
            for sb in (d / "containerd" / sub / "io.containerd.grpc.v1.cri" / "sandboxes").glob("*"):
                (CNI_CACHE / f"cni-loopback-{sb.name}-lo").unlink(missing_ok=True)
    cg = state.get("cgroup_root")
    if cg:
        _remove_cgroups(cg)
    _remove_new_kube_rules(state.get("iptables_before"))
    for name, value in (state.get("sysctls") or {}).items():
        try:
            if _sysctl_path(name).read_text().strip() != value:
                _sysctl_path(name).write_text(value + "\n")
                log(f"restored {name.replace('/', '.')} = {value}")
        except OSError as e:
            log(f"could not restore {name}: {e}")
    # Global directories containerd and the CNI plugins created for this run.
    for g in state.get("created_dirs", []):
        try:
            Path(g).rmdir()
        except OSError:
            pass
    # 4. The dir itself, unless something is still mounted in it.
    if stuck:
        log(f"left {d} in place: still mounted there: {stuck[:5]}")
        return
    shutil.rmtree(d, ignore_errors=True)


def _iptables_rules() -> dict[str, list[str]]:
    """`<tool> -t <table> -S` lines, by "tool table"."""
    out: dict[str, list[str]] = {}
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool) is None:
            continue
        for table in IPTABLES_TABLES:
            p = _run(tool, "-t", table, "-S", check=False, quiet=True)
            if p.returncode == 0:
                out[f"{tool} {table}"] = p.stdout.splitlines()
    return out


def _remove_new_kube_rules(before: dict[str, list[str]] | None) -> None:
    """Deletes the KUBE-* rules and chains that are not in `before` (rules first)."""
    if before is None:
        return
    for key, lines in _iptables_rules().items():
        tool, table = key.split()
        old = set(before.get(key, []))
        new = [l for l in lines if l not in old and "KUBE-" in l]
        chains = [l.split()[1] for l in new if l.startswith("-N ")]
        # Rules in chains that stay (INPUT, POSTROUTING, ...) one by one; the new
        # chains are flushed, all of them before any is deleted (kube-proxy's
        # chains jump to each other).
        for rule in (l for l in new if l.startswith("-A ") and l.split()[1] not in chains):
            _run(tool, "-t", table, "-D", *shlex.split(rule[3:]), check=False)
        for chain in chains:
            _run(tool, "-t", table, "-F", chain, check=False)
        for chain in chains:
            _run(tool, "-t", table, "-X", chain, check=False)
        if new:
            log(f"removed {len(new)} {tool} {table} rules and chains the kubelet and kube-proxy added")


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_gone(pids: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [p for p in pids if _alive(p) and not _zombie(p)]
        if not pids:
            return
        time.sleep(0.1)
    log(f"processes still alive after SIGKILL: {pids}")


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _remove_cgroups(root: str) -> None:
    for hierarchy in CGROUP_FS.iterdir():
        top = hierarchy / root.strip("/")
        if not top.is_dir():
            continue
        dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [top]
        for p in dirs:
            try:
                p.rmdir()
            except OSError as e:
                log(f"rmdir {p}: {e}")


def _read_state(d: Path) -> dict:
    try:
        return json.loads((d / "node-state.json").read_text())
    except (OSError, ValueError):
        return {}


def cleanup_stale() -> None:
    """Cleans what a killed earlier run left (its owner process is gone)."""
    for d in Path(tempfile.gettempdir()).glob(NODE_PREFIX + "*"):
        try:
            pid = int((d / "owner.pid").read_text().strip())
        except (OSError, ValueError):
            pid = 0
        if pid and _alive(pid):
            continue
        log(f"cleaning up {d}, left by a run (pid {pid or '?'}) that is gone")
        _teardown_dir(d)


# ------------------------------------------------------------------ DNS probe


def dns_query(server: str, name: str, timeout: float = 2.0) -> list[str]:
    """A records of `name` from `server` (UDP 53); [] for NXDOMAIN/no answer."""
    qid = random.randrange(65536)
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(q, (server, 53))
        data, _ = s.recvfrom(4096)
    rid, flags, qd, an = struct.unpack(">HHHH", data[:8])
    if rid != qid or flags & 0xF:
        return []
    pos = 12
    for _ in range(qd):
        while data[pos]:
            pos += data[pos] + 1
        pos += 5
    out = []
    for _ in range(an):
        if data[pos] & 0xC0 == 0xC0:
            pos += 2
        else:
            while data[pos]:
                pos += data[pos] + 1
            pos += 1
        typ, _cls, _ttl, rdlen = struct.unpack(">HHIH", data[pos:pos + 10])
        pos += 10
        if typ == 1 and rdlen == 4:
            out.append(socket.inet_ntoa(data[pos:pos + 4]))
        pos += rdlen
    return out


# ------------------------------------------------------------------ the node


class RealNode:
    """One real node (containerd + kubelet + CoreDNS) registered with `k8s`."""

    def __init__(self, k8s: Cluster, bin_dir: Path, images: list[Image], name: str = "realnode-0",
                 volumes: int = 12, volume_size: str = "1Gi", volume_class: str = "",
                 kube_proxy: bool = False):
        self.k8s = k8s
        self.bin_dir = bin_dir
        self.images = images
        self.name = name
        self.volume_count = volumes
        self.volume_size = volume_size
        self.volume_class = volume_class
        # kube-proxy (iptables mode): Services' cluster IPs work in pods, the API
        # server's too (the `kubernetes` Service). Needs the API server listening on
        # the bridge's address (see serve_api_server_to_pods).
        self.kube_proxy = kube_proxy
        self.dir: Path | None = None
        self.procs: dict[str, subprocess.Popen] = {}
        self.argvs: dict[str, list[str]] = {}
        self._logs: list[Any] = []
        self.state: dict[str, Any] = {}
        self.gateway = ""
        self.subnet = ""
        self.timings: list[tuple[str, float]] = []
        self._stopped = True
        self._keeper: threading.Thread | None = None
        self._keeper_stop = threading.Event()

    # ------------------------------------------------------------- lifecycle

    def __enter__(self) -> "RealNode":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _save_state(self) -> None:
        assert self.dir is not None
        (self.dir / "node-state.json").write_text(json.dumps(self.state, indent=1))

    def _timed(self, what: str, t0: float) -> None:
        self.timings.append((what, time.monotonic() - t0))
        log(f"{what}: {time.monotonic() - t0:.1f}s")

    def start(self) -> None:
        missing = missing_prerequisites()
        if missing:
            raise HarnessError("a real node needs: " + "; ".join(missing))
        for b in ("kubelet", "coredns", "pause", *(("kube-proxy",) if self.kube_proxy else ())):
            if not os.access(self.bin_dir / b, os.X_OK):
                raise HarnessError(f"missing {self.bin_dir / b} (build-components.sh --node builds it)")
        self._stopped = False
        cleanup_stale()
        self.dir = Path(tempfile.mkdtemp(prefix=NODE_PREFIX))
        os.chmod(self.dir, 0o755)  # pods' users reach the volumes below it
        (self.dir / "owner.pid").write_text(f"{os.getpid()}\n")
        log(f"real node dir {self.dir}")
        run_id = self.dir.name[len(NODE_PREFIX):].lower()
        self.state = {"network": f"mysql-hook-{run_id}", "sysctls": {}}
        for name in KERNEL_TUNABLES:
            try:
                self.state["sysctls"][name] = _sysctl_path(name).read_text().strip()
            except OSError:
                pass
        self.state["iptables_before"] = _iptables_rules()
        # Deepest first, so that clean-up can remove them again when empty.
        self.state["created_dirs"] = [str(p) for p in (CNI_CACHE, CNI_CACHE.parent, SHIM_SOCKETS,
                                                       SHIM_SOCKETS.parent) if not p.exists()]
        self._save_state()
        t0 = time.monotonic()
        self._network(run_id)
        self._containerd()
        self._timed("containerd up", t0)
        t0 = time.monotonic()
        self._import_images()
        self._timed(f"{len(self.images)} images imported", t0)
        t0 = time.monotonic()
        self._coredns()
        self._kubelet(run_id)
        self._timed(f"CoreDNS up, kubelet registered Node {self.name} Ready", t0)
        if self.kube_proxy:
            t0 = time.monotonic()
            self._kube_proxy()
            self._timed("kube-proxy up, the kubernetes Service's rules in place", t0)
        self._volumes()
        self._keeper = threading.Thread(target=self._keep_logs, daemon=True, name="pod-log-keeper")
        self._keeper.start()

    def _keep_logs(self) -> None:
        """Copies the pods' logs every 2 s into pod-logs-kept/: the kubelet removes a
        pod's logs with the pod, and finished Jobs' pods go soon (Metacontroller
        deletes a finished Job once the hook has recorded it)."""
        assert self.dir is not None
        src, dst = self.dir / "pod-logs", self.dir / "pod-logs-kept"
        sizes: dict[Path, int] = {}
        while not self._keeper_stop.wait(2.0):
            try:
                for f in src.glob("*/*/*.log"):
                    size = f.stat().st_size
                    if sizes.get(f) == size:
                        continue
                    target = dst / f.relative_to(src)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(f, target)
                    sizes[f] = size
            except OSError:
                pass

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.dir is None:
            return
        keep = os.environ.get("MYSQL_HOOK_K8S_LOGS")
        self._keeper_stop.set()
        if self._keeper is not None:
            self._keeper.join(timeout=10)
        # The kubelet first (nothing restarts containers any more), then CoreDNS and
        # the pods, then containerd; _teardown_dir does the rest.
        for name in ("kubelet", "kube-proxy", "coredns"):
            p = self.procs.get(name)
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
        if keep:
            self._copy_logs(Path(keep))
        p = self.procs.get("containerd")
        if p is not None and p.poll() is None:
            # Shims and pods go first so that containerd does not restart anything.
            _teardown_pods_only(self.dir)
            p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in self._logs:
            try:
                f.close()
            except OSError:
                pass
        _teardown_dir(self.dir, self.procs.values())
        log(f"real node {self.name} torn down")

    def _copy_logs(self, dest: Path) -> None:
        assert self.dir is not None
        out = dest / "node"
        out.mkdir(parents=True, exist_ok=True)
        for f in self.dir.glob("*.log"):
            shutil.copy2(f, out / f.name)
        for name in ("pod-logs-kept", "pod-logs"):
            if (self.dir / name).is_dir():
                shutil.copytree(self.dir / name, out / "pods", dirs_exist_ok=True, symlinks=False,
                                ignore_dangling_symlinks=True)
        log(f"node logs copied to {out}")

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        assert self.dir is not None
        logf = open(self.dir / f"{name}.log", "ab")
        self._logs.append(logf)
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                             cwd=self.dir, start_new_session=True, preexec_fn=_die_with_parent)
        self.procs[name] = p
        self.argvs[name] = argv
        return p

    def log_tail(self, name: str, lines: int = 40) -> str:
        if self.dir is None or not (self.dir / f"{name}.log").exists():
            return ""
        return "\n".join((self.dir / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])

    def procs_ok(self) -> None:
        for name, p in self.procs.items():
            if p.poll() is not None:
                raise HarnessError(f"{name} exited with status {p.returncode}; last log lines:\n{self.log_tail(name)}")

    def wait(self, what: str, check: Callable[[], Any], timeout: float, detail: Callable[[], str] = lambda: "",
             interval: float = 0.25) -> Any:
        """Polls `check` until it returns something true (its value), while the node's
        daemons run; on timeout, says what was awaited and the last error."""
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            self.procs_ok()
            try:
                got = check()
                if got:
                    return got
            except Exception as e:  # noqa: BLE001 - reported on timeout
                last = f"{type(e).__name__}: {e}"
            if time.monotonic() > deadline:
                raise HarnessError(f"timed out after {timeout:.0f}s waiting for {what}: {detail() or last}")
            time.sleep(interval)

    # --------------------------------------------------------------- network

    def _network(self, run_id: str) -> None:
        """A bridge and /24 of this run's own; the gateway address is the host's."""
        used = set()
        for line in _run("ip", "-4", "-o", "addr", "show").stdout.splitlines() + \
                _run("ip", "-4", "route", "show", "table", "all").stdout.splitlines():
            for word in line.split():
                try:
                    used.add(ipaddress.ip_network(word, strict=False))
                except ValueError:
                    pass
        rnd = random.Random(os.getpid())
        candidates = [ipaddress.ip_network(f"10.{a}.{b}.0/24") for a in range(200, 250) for b in range(0, 256)]
        rnd.shuffle(candidates)
        net = next((c for c in candidates if not any(c.overlaps(u) for u in used
                                                      if u.prefixlen > 0)), None)
        if net is None:
            raise HarnessError("no free /24 in 10.200.0.0-10.249.255.0 for the pod network")
        self.subnet = str(net)
        self.gateway = str(net.network_address + 1)
        bridge = f"mhk{run_id[:8]}"[:15]
        self.state.update(bridge=bridge, subnet=self.subnet)
        self._save_state()  # before creating it, so that clean-up finds it
        _run("ip", "link", "add", "name", bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{self.gateway}/{net.prefixlen}", "dev", bridge)
        _run("ip", "link", "set", bridge, "up")
        assert self.dir is not None
        confdir = self.dir / "cni" / "net.d"
        confdir.mkdir(parents=True)
        ipam_range = {"subnet": self.subnet, "gateway": self.gateway}
        # With kube-proxy, pods route the Service range through the host (its nat
        # rules); nothing else leaves the /24, so forwarding stays on this machine.
        routes = [{"dst": SERVICE_CIDR, "gw": self.gateway}] if self.kube_proxy else []
        if self.kube_proxy:
            _sysctl_path("net/ipv4/ip_forward").write_text("1\n")
        conflist = {
            "cniVersion": "0.4.0", "name": self.state["network"],
            "plugins": [
                # isGateway false: the bridge already has the gateway address (above),
                # and the plugin would otherwise turn on the host's ip_forward. Pods need
                # only their /24: each other, and CoreDNS on the gateway address.
                {"type": "bridge", "bridge": bridge, "isGateway": False, "ipMasq": False,
                 "ipam": {"type": "host-local", "dataDir": str(self.dir / "cni" / "ipam"),
                          "ranges": [[ipam_range]], "routes": routes}},
                {"type": "loopback"},
            ],
        }
        (confdir / "10-mysql-hook.conflist").write_text(json.dumps(conflist, indent=1))
        log(f"pod network {self.subnet} on bridge {bridge}, gateway (host) {self.gateway}")

    # ------------------------------------------------------------ containerd

    @property
    def containerd_sock(self) -> Path:
        assert self.dir is not None
        return self.dir / "containerd.sock"

    def _containerd(self) -> None:
        assert self.dir is not None
        d = self.dir
        pause = next((i.ref for i in self.images if i.ref.startswith("registry.k8s.io/pause:")), None)
        if pause is None:
            raise HarnessError("no pause image among the images to import")
        cfg = f"""version = 2
root = "{d}/containerd/root"
state = "{d}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{self.containerd_sock}"
[ttrpc]
  address = "{self.containerd_sock}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  # No CAP_SYS_RESOURCE here: a negative oom_score_adj (the pause container's) kills runc's child.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "{d}/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{d}/cni/net.d"
    max_conf_num = 1
"""
        (d / "containerd.toml").write_text(cfg)
        self._spawn("containerd", ["containerd", "--config", str(d / "containerd.toml"), "--log-level", "info"])
        self.wait("containerd's socket", lambda: self.ctr("version", check=False).returncode == 0, 60,
                   lambda: self.log_tail("containerd", 20))

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return _run("ctr", "--address", str(self.containerd_sock), "-n", NAMESPACE, *args, check=check, quiet=True)

    def _import_images(self) -> None:
        for img in self.images:
            t0 = time.monotonic()
            self.ctr("images", "import", "--no-unpack=false", str(img.tar))
            if img.ref not in self.ctr("images", "ls", "-q").stdout.split():
                raise HarnessError(f"after importing {img.tar}, containerd lists no {img.ref}: "
                                   f"{self.ctr('images', 'ls', '-q').stdout.split()}")
            log(f"imported {img.ref} in {time.monotonic() - t0:.1f}s")

    # --------------------------------------------------------------- CoreDNS

    def _coredns(self) -> None:
        assert self.dir is not None
        corefile = f""".:53 {{
    bind {self.gateway}
    errors
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa {{
        kubeconfig {self.k8s.kubeconfig} test
        pods insecure
        ttl 5
    }}
    loadbalance
}}
"""
        (self.dir / "Corefile").write_text(corefile)
        self._spawn("coredns", [str(self.bin_dir / "coredns"), "-conf", str(self.dir / "Corefile")])
        self.wait("CoreDNS to answer kubernetes.default.svc.cluster.local",
                   lambda: dns_query(self.gateway, f"kubernetes.default.svc.{CLUSTER_DOMAIN}", 1.0), 60,
                   lambda: self.log_tail("coredns", 20))

    # --------------------------------------------------------------- kubelet

    def _kubelet(self, run_id: str) -> None:
        assert self.dir is not None
        d = self.dir
        cgroup_root = f"/mysql-hook-{run_id}"
        self.state["cgroup_root"] = cgroup_root
        self._save_state()
        for hierarchy in CGROUP_FS.iterdir():
            if hierarchy.is_dir() and not hierarchy.is_symlink():
                (hierarchy / cgroup_root.strip("/")).mkdir(exist_ok=True)
        cpuset = CGROUP_FS / "cpuset"
        if (cpuset / "cpuset.cpus").exists():
            for f in ("cpuset.cpus", "cpuset.mems"):
                (cpuset / cgroup_root.strip("/") / f).write_text((cpuset / f).read_text())
        (d / "resolv.conf").write_text("")  # the host's search domains stay out of pods
        port, healthz = free_ports(2)
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "failCgroupV1": False,          # this VM has cgroup v1 (hybrid)
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": cgroup_root,      # the run's own hierarchy, removed on teardown
            "failSwapOn": False,
            "enforceNodeAllocatable": [],
            "containerRuntimeEndpoint": f"unix://{self.containerd_sock}",
            # The API server reaches the kubelet (logs, exec) at the Node's InternalIP,
            # the bridge's gateway (a Node IP cannot be loopback).
            "address": self.gateway, "port": port, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": healthz,
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "evictionHard": {},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "clusterDNS": [self.gateway], "clusterDomain": CLUSTER_DOMAIN,
            "resolvConf": str(d / "resolv.conf"),
            "podLogsDir": str(d / "pod-logs"),
            "volumePluginDir": str(d / "volume-plugins"),
            "serializeImagePulls": False,
            "maxPods": 60,
        }
        (d / "kubelet.yaml").write_text(yaml.safe_dump(config))
        self._spawn("kubelet", [
            str(self.bin_dir / "kubelet"),
            f"--kubeconfig={self.k8s.kubeconfig}", f"--config={d / 'kubelet.yaml'}",
            f"--root-dir={d / 'kubelet'}", f"--cert-dir={d / 'kubelet-pki'}",
            f"--hostname-override={self.name}", f"--node-ip={self.gateway}", "--v=1",
        ])

        def ready() -> bool:
            n = self.k8s.get_or_none("v1", "Node", self.name)
            return bool(n) and any(c.get("type") == "Ready" and c.get("status") == "True"
                                   for c in (n.get("status") or {}).get("conditions") or [])
        self.wait(f"Node {self.name} to be Ready", ready, 120, lambda: self.log_tail("kubelet", 20))
        # The API server's admission taints a new Node not-ready; the node lifecycle
        # controller (not run: a single node, no evictions wanted) would lift it.
        self.k8s.request("PATCH", f"/api/v1/nodes/{self.name}", {"spec": {"taints": None}},
                         content_type="application/merge-patch+json")

    # ------------------------------------------------------------ kube-proxy

    def _kube_proxy(self) -> None:
        """kube-proxy in iptables mode, masquerading all Service traffic: a pod
        reaching a Service whose endpoint is on the same bridge gets its answer back
        through the host (no br_netfilter here). Conntrack and localhost node ports
        are left alone, so it changes no kernel setting beyond its own chains."""
        assert self.dir is not None
        # The `kubernetes` Service's endpoint, as the pods reach it: the API server
        # on the bridge's address (the harness runs no endpoint reconciler).
        port = urlsplit(self.k8s.server).port
        try:
            socket.create_connection((self.gateway, port), timeout=5).close()
        except OSError as e:
            raise HarnessError(f"the API server does not listen on {self.gateway}:{port} ({e}): with kube-proxy, "
                               "start the Cluster with extra_apiserver_args=['--bind-address=0.0.0.0']") from e
        self.k8s.apply({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "kubernetes",
                                    "endpointslice.kubernetes.io/managed-by": "mysql-hook-test"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [self.gateway], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        })
        metrics, healthz = free_ports(2)
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(self.k8s.kubeconfig)},
            "hostnameOverride": self.name, "mode": "iptables", "clusterCIDR": self.subnet,
            "iptables": {"masqueradeAll": True, "localhostNodePorts": False,
                         "syncPeriod": "30s", "minSyncPeriod": "0s"},
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                          "tcpCloseWaitTimeout": "0s", "udpTimeout": "0s", "udpStreamTimeout": "0s"},
            "nodePortAddresses": [f"{self.gateway}/32"],
            "metricsBindAddress": f"127.0.0.1:{metrics}", "healthzBindAddress": f"127.0.0.1:{healthz}",
        }
        (self.dir / "kube-proxy.yaml").write_text(yaml.safe_dump(config))
        self._spawn("kube-proxy", [str(self.bin_dir / "kube-proxy"), f"--config={self.dir / 'kube-proxy.yaml'}",
                                   "--v=1"])

        def service_rules() -> bool:
            out = _run("iptables", "-t", "nat", "-S", "KUBE-SERVICES", check=False, quiet=True).stdout
            return "default/kubernetes:https" in out
        self.wait("kube-proxy's rules for default/kubernetes", service_rules, 60,
                   lambda: self.log_tail("kube-proxy", 20))

    # --------------------------------------------------------------- volumes

    def _volumes(self) -> None:
        """PersistentVolumes pv-0..: host directories owned by the mysql user (999),
        reclaim policy Retain (a released volume keeps its data)."""
        assert self.dir is not None
        for i in range(self.volume_count):
            path = self.dir / "pv" / f"pv-{i}"
            path.mkdir(parents=True)
            os.chown(path, 999, 999)
            os.chmod(path, 0o770)
            self.k8s.create({"apiVersion": "v1", "kind": "PersistentVolume",
                             "metadata": {"name": f"pv-{i}", "labels": {"mysql-hook-test/volume": str(i)}},
                             "spec": {"capacity": {"storage": self.volume_size}, "accessModes": ["ReadWriteOnce"],
                                      "persistentVolumeReclaimPolicy": "Retain",
                                      "storageClassName": self.volume_class,
                                      "hostPath": {"path": str(path), "type": "Directory"}}})
        os.chmod(self.dir / "pv", 0o755)

    def volume_path(self, pv_name: str) -> Path:
        assert self.dir is not None
        return self.dir / "pv" / pv_name

    # ----------------------------------------------------------- pods' tools

    def container_pid(self, container_id: str) -> int:
        """Host PID of a container's init process ("containerd://<id>" or "<id>")."""
        assert self.dir is not None
        cid = container_id.split("://", 1)[-1]
        f = self.dir / "containerd" / "state" / "io.containerd.runtime.v2.task" / NAMESPACE / cid / "init.pid"
        return int(f.read_text().strip())

    def logged_containers(self, namespace: str) -> list[tuple[str, str]]:
        """(pod, container) of every container that logged in the namespace, gone pods too."""
        assert self.dir is not None
        found = set()
        for base in ("pod-logs-kept", "pod-logs"):
            for d in (self.dir / base).glob(f"{namespace}_*"):
                pod = d.name[len(namespace) + 1:].rsplit("_", 1)[0]
                for c in d.iterdir():
                    found.add((pod, c.name))
        return sorted(found)

    def _log_lines(self, namespace: str, pod: str, container: str, uid: str = "*") -> Iterator[tuple[str, str]]:
        """(restart number, raw CRI line) of a container's log: every restart, oldest
        first, also of pods that are gone (the kept copies); of the pod with `uid`
        only when given (a pod made again under the same name has another)."""
        assert self.dir is not None
        dirs = {d.name: d for d in (self.dir / "pod-logs-kept").glob(f"{namespace}_{pod}_{uid}")}
        dirs.update({d.name: d for d in (self.dir / "pod-logs").glob(f"{namespace}_{pod}_{uid}")})
        for d in (dirs[k] for k in sorted(dirs)):
            for f in sorted((d / container).glob("*.log"), key=lambda p: int(p.stem) if p.stem.isdigit() else 0):
                for line in f.read_text(errors="replace").splitlines():
                    yield f.stem, line

    def pod_log(self, namespace: str, pod: str, container: str, lines: int = 60) -> str:
        """The last lines of a container's log (all restarts, oldest first; also of
        pods that are gone, from the kept copies)."""
        out: list[str] = []
        for restart, line in self._log_lines(namespace, pod, container):
            # CRI log format: <time> <stream> <F|P> <text>
            parts = line.split(" ", 3)
            out.append(f"[{restart}] {parts[3] if len(parts) == 4 else line}")
        return "\n".join(out[-lines:])

    def pod_log_times(self, namespace: str, pod: str, container: str, uid: str = "*") -> list[tuple[float, str]]:
        """Every line a container logged, with the time the runtime wrote it (Unix
        seconds, from the CRI log's own timestamp), oldest first."""
        out: list[tuple[float, str]] = []
        for _, line in self._log_lines(namespace, pod, container, uid):
            parts = line.split(" ", 3)
            if len(parts) != 4:
                continue
            # 2026-12-07T17:24:14.059588008Z: nanoseconds, which fromisoformat does not take
            stamp = re.sub(r"(\.\d{6})\d*", r"\1", parts[0]).replace("Z", "+00:00")
            try:
                out.append((datetime.datetime.fromisoformat(stamp).timestamp(), parts[3]))
            except ValueError:
                continue
        return sorted(out, key=lambda x: x[0])


def _teardown_pods_only(d: Path) -> None:
    """SIGKILL the pods' processes (containerd and its shims stay)."""
    sock = str(d / "containerd.sock")
    children = _children()
    shims = [pid for ps in children.values() for pid in ps
             if (argv := _cmdline(pid)) and "containerd-shim" in Path(argv[0]).name and sock in argv]
    victims = [c for s in shims for c in _descendants(s, children)]
    for pid in victims:
        _kill(pid)
    _wait_gone(victims, 15)

#!/usr/bin/env python3
"""The install path end to end, as a user runs it (issue 17.7).

A cluster on this machine (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler) with one real node (``realnode.RealNode``: kubelet + containerd,
CoreDNS, and kube-proxy in iptables mode, so Service addresses work in pods, the
API server's too). Then, with the ``kubectl`` built from the same Kubernetes
release:

1. Metacontroller is installed in the cluster from its production manifests
   (``tests/k8s/install/metacontroller.yaml``, its CRDs from
   ``../shared/metacontroller``), in the image built from that source tree.
2. The README's install block runs as written, one bash script in a directory
   holding a copy of ``metacontroller/`` (a user's checkout): the namespace, the
   token, a CA and a serving certificate made with openssl, the two Secrets and
   ``kubectl apply -k metacontroller/``, which serves HTTPS only. The hook runs from
   the image that ``tests/image/build.sh`` builds from the Dockerfile. That the
   ``MySQL`` comes up at all proves Metacontroller reached the hook over HTTPS,
   verified against the Secret's CA: the install has no plain HTTP port.
3. The example ``metacontroller/examples/mysql.yaml`` is applied with one change:
   ``flavor: mariadb`` and the MariaDB version of the local image, since no MySQL 8
   server can run here (the copy is changed, the command is the README's).
4. The ``MySQL`` must reach phase Running with every server ready, on real MariaDB
   pods, and the Pod ``tests/k8s/install/app.yaml`` must connect through
   ``db-primary`` and ``db-replicas`` with the generated application users'
   Secrets only: it writes as ``app``, reads the row back as ``app_ro``, and
   ``app_ro``'s write is refused.

    python3 tests/k8s/install.py

Prints "install: passed" or "install: FAILED ..." (with the pods, events and logs
that say why). Skips like the real-server loop when a real node cannot run here,
unless ``MYSQL_HOOK_REQUIRE_REAL_SERVERS=1`` (CI).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import yaml

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import components  # noqa: E402
import images  # noqa: E402
import realnode  # noqa: E402
from harness import REPO, Cluster, HarnessError, load_versions  # noqa: E402

T0 = time.monotonic()
INSTALL = HERE / "install"
README = REPO / "README.md"
# The line of the README's install block that installs the hook.
APPLY = "kubectl apply -k metacontroller/"


def say(msg: str) -> None:
    print(f"[install {time.monotonic() - T0:6.1f}s] {msg}", flush=True)


def readme_block(heading: str) -> str:
    """The first ```sh block after the README line `heading`."""
    lines = README.read_text().splitlines()
    try:
        start = lines.index(heading)
    except ValueError:
        raise HarnessError(f"README.md has no line {heading!r}") from None
    begin = next((i for i in range(start, len(lines)) if lines[i].strip() == "```sh"), None)
    if begin is None:
        raise HarnessError(f"README.md has no ```sh block after {heading!r}")
    end = next(i for i in range(begin + 1, len(lines)) if lines[i].strip() == "```")
    return "\n".join(lines[begin + 1:end]) + "\n"


def user_script() -> str:
    """What the README tells a user to run."""
    script = readme_block("## Install into a cluster")
    if APPLY not in script.splitlines():
        raise HarnessError(f"the README's install block has no line {APPLY!r}")
    return script


class Install:
    def __init__(self, k8s: Cluster, node: realnode.RealNode, bin_dir: Path, mariadb_ref: str, work: Path):
        self.k8s = k8s
        self.node = node
        self.work = work
        self.mariadb_ref = mariadb_ref
        self.env = dict(os.environ, KUBECONFIG=str(k8s.kubeconfig), PATH=f"{bin_dir}:{os.environ['PATH']}")

    def sh(self, script: str, what: str, timeout: float = 300) -> str:
        say(f"$ {what}")
        p = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=self.work, env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        for line in p.stdout.splitlines():
            print(f"    {line}", flush=True)
        if p.returncode != 0:
            raise HarnessError(f"{what} failed with exit status {p.returncode}")
        return p.stdout

    def wait(self, what: str, check, timeout: float, interval: float = 2.0):
        return self.node.wait(what, check, timeout, interval=interval)

    def pods(self, namespace: str) -> list[dict]:
        return self.k8s.request("GET", f"/api/v1/namespaces/{namespace}/pods").get("items", [])

    def all_ready(self, namespace: str, selector: str, count: int) -> bool:
        items = self.k8s.request("GET", f"/api/v1/namespaces/{namespace}/pods",
                                 params={"labelSelector": selector}).get("items", [])
        ready = [p for p in items if any(c.get("type") == "Ready" and c.get("status") == "True"
                                         for c in (p.get("status") or {}).get("conditions") or [])]
        return len(ready) >= count

    # ------------------------------------------------------------------ steps

    def metacontroller(self, crds: Path) -> None:
        shutil.copy(crds, self.work / "metacontroller-crds-v1.yaml")
        shutil.copy(INSTALL / "metacontroller.yaml", self.work / "metacontroller-production.yaml")
        self.sh("kubectl apply -f metacontroller-crds-v1.yaml\nkubectl apply -f metacontroller-production.yaml",
                "Metacontroller from its production manifests")
        self.wait("Metacontroller's pod to be Ready",
                  lambda: self.all_ready("metacontroller", "app.kubernetes.io/name=metacontroller", 1), 180)
        say("Metacontroller runs in the cluster (namespace metacontroller)")

    def readme(self) -> None:
        self.sh(user_script(), "the README's install commands")
        self.wait("the hook's Deployment to be Ready (2 pods)",
                  lambda: self.all_ready("mysql-hook", "app.kubernetes.io/name=mysql-hook", 2), 180)
        say("the hook's Deployment is Ready")

    def running(self) -> dict:
        def check():
            db = self.k8s.get("mysqlhook.dev/v1alpha1", "MySQL", "db", "default")
            st = db.get("status") or {}
            want = db["spec"]["replicas"]
            if st.get("phase") == "Running" and st.get("readyReplicas") == want and st.get("primary"):
                return db
            return None
        db = self.wait("MySQL db to be Running with every server ready", check, 600, 3)
        self.sh("kubectl get mysqls\nkubectl get pods -o wide\n"
                "kubectl get mysql db -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: "
                "{.message}{\"\\n\"}{end}'", "kubectl get mysqls")
        return db

    def app(self) -> None:
        doc = yaml.safe_load((INSTALL / "app.yaml").read_text())
        doc["spec"]["containers"][0]["image"] = self.mariadb_ref
        (self.work / "app.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        self.sh("kubectl apply -f app.yaml", "an application pod (tests/k8s/install/app.yaml)")

        def done():
            phase = (self.k8s.get("v1", "Pod", "app", "default").get("status") or {}).get("phase")
            return phase if phase in ("Succeeded", "Failed") else None
        phase = self.wait("the application pod to finish", done, 300)
        log = self.node.pod_log("default", "app", "app", 80)
        print("\n".join(f"    {l}" for l in log.splitlines()), flush=True)
        if phase != "Succeeded" or "app: OK" not in log:
            raise HarnessError(f"the application pod ended {phase}")
        say("the application wrote through db-primary and read back through db-replicas with its own users")

    def grow(self) -> None:
        """A bigger spec.storage.size (issue 17.5): the grow Job's pod, with its own
        ServiceAccount token, raises every claim's request through the `kubernetes`
        Service; its RBAC objects go once it has ended. No resizer runs here (the
        volumes are host directories), so the test then plays the storage system:
        it sets each volume's and claim's capacity, and the hook reports Grown and
        drops the Job. The servers must not restart and the primary must not move."""
        db = self.k8s.get("mysqlhook.dev/v1alpha1", "MySQL", "db", "default")
        before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in self.pods("default")
                  if p["metadata"]["name"] in ("db-0", "db-1", "db-2")}
        primary = db["status"]["primary"]
        size = "20Gi"
        claims = [f"data-db-{i}" for i in range(db["spec"]["replicas"])]
        self.sh(f"kubectl patch mysql db --type=merge -p '{{\"spec\":{{\"storage\":{{\"size\":\"{size}\"}}}}}}'",
                f"grow the volumes to {size}")

        def requested() -> bool:
            return all(self.k8s.get("v1", "PersistentVolumeClaim", c, "default")["spec"]["resources"]["requests"]
                       ["storage"] == size for c in claims)
        self.wait(f"every claim's request to be {size}", requested, 180)
        grow_pods = [p for p in self.node.logged_containers("default") if p[0].startswith("db-grow-")]
        if not grow_pods:
            raise HarnessError("the claims grew, but no db-grow-* pod ran")
        for pod, container in grow_pods:
            print(f"    {pod}/{container}: {self.node.pod_log('default', pod, container, 10)}", flush=True)

        def rbac_gone() -> bool:
            return all(self.k8s.get_or_none(v, k, "db-grow", "default") is None for v, k in
                       (("v1", "ServiceAccount"), ("rbac.authorization.k8s.io/v1", "Role"),
                        ("rbac.authorization.k8s.io/v1", "RoleBinding")))
        self.wait("the grow ServiceAccount, Role and RoleBinding to be deleted", rbac_gone, 120)
        say(f"the grow Job raised {', '.join(claims)} to {size}; its ServiceAccount, Role and RoleBinding are gone")
        self.sh("kubectl get mysql db -o jsonpath='{.status.conditions[?(@.type==\"VolumesGrown\")].message}'",
                "VolumesGrown while the storage system has not grown the volumes")
        # The storage system's part: the volumes and the claims' capacity.
        for c in claims:
            pvc = self.k8s.get("v1", "PersistentVolumeClaim", c, "default")
            self.k8s.request("PATCH", f"/api/v1/persistentvolumes/{pvc['spec']['volumeName']}",
                             {"spec": {"capacity": {"storage": size}}},
                             content_type="application/merge-patch+json")
            self.k8s.request("PATCH", f"/api/v1/namespaces/default/persistentvolumeclaims/{c}/status",
                             {"status": {"capacity": {"storage": size}}},
                             content_type="application/merge-patch+json")

        def grown():
            st = self.k8s.get("mysqlhook.dev/v1alpha1", "MySQL", "db", "default").get("status") or {}
            cond = next((c for c in st.get("conditions") or [] if c["type"] == "VolumesGrown"), {})
            jobs = [j["metadata"]["name"] for j in self.k8s.request(
                "GET", "/apis/batch/v1/namespaces/default/jobs").get("items", [])
                if j["metadata"]["name"].startswith("db-grow-")]
            return cond if cond.get("status") == "True" and not jobs else None
        cond = self.wait("VolumesGrown True and the grow Job gone", grown, 120)
        say(f"VolumesGrown {cond['reason']}: {cond['message']}")
        after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in self.pods("default")
                 if p["metadata"]["name"] in before}
        restarts = sum(cs.get("restartCount", 0) for p in self.pods("default") if p["metadata"]["name"] in before
                       for cs in (p.get("status") or {}).get("containerStatuses") or [])
        db = self.k8s.get("mysqlhook.dev/v1alpha1", "MySQL", "db", "default")
        if after != before or restarts or db["status"]["primary"] != primary or db["status"].get("phase") != "Running":
            raise HarnessError(f"growing the volumes disturbed the servers: pods {before} -> {after}, "
                               f"{restarts} restarts, primary {primary} -> {db['status'].get('primary')}, "
                               f"phase {db['status'].get('phase')}")
        say(f"no server restarted, primary still {primary}, phase Running")

    def diagnose(self) -> None:
        """What a user would look at when an install does not come up."""
        try:
            self.sh("kubectl get pods -A -o wide || true\nkubectl get mysqls -o yaml || true\n"
                    "kubectl get events -A --sort-by=.lastTimestamp | tail -40 || true",
                    "diagnostics")
        except Exception as e:  # noqa: BLE001
            say(f"diagnostics failed: {e}")
        for ns, pod, c in [(ns, p, c) for ns in ("metacontroller", "mysql-hook", "default")
                           for p, c in self.node.logged_containers(ns)]:
            print(f"--- log of {ns}/{pod}/{c}\n{self.node.pod_log(ns, pod, c, 25)}", flush=True)


def example(work: Path, version: str) -> None:
    """The README's example, made runnable here: MariaDB of the local image."""
    path = work / "metacontroller" / "examples" / "mysql.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["spec"]["flavor"] = "mariadb"
    doc["spec"]["version"] = version
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    say(f"metacontroller/examples/mysql.yaml (the copy): flavor mariadb, version {version}")


def run(bin_dir: Path, node_images: list, mariadb_ref: str, mc: components.Metacontroller) -> None:
    version = mariadb_ref.rsplit(":", 1)[1]
    # --bind-address=0.0.0.0: pods reach the API server through the `kubernetes`
    # Service, whose endpoint is the bridge's address (realnode.RealNode._kube_proxy).
    with Cluster(bin_dir=bin_dir, extra_apiserver_args=["--bind-address=0.0.0.0",
                                                         "--kubelet-preferred-address-types=InternalIP"]) as k8s:
        components.start_controllers(k8s, bin_dir, components.CONTROLLERS + (
            "root-ca-certificate-publisher-controller", "deployment-controller", "replicaset-controller",
            "persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller",
            "cronjob-controller"))
        with realnode.RealNode(k8s, bin_dir, node_images, volumes=4, volume_size="10Gi",
                               volume_class="standard", kube_proxy=True) as node:
            # The cluster's StorageClass, as a cluster has one; its volumes are the node's.
            k8s.apply({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                       "metadata": {"name": "standard",
                                    "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                       "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "Immediate",
                       "allowVolumeExpansion": True})
            work = Path(tempfile.mkdtemp(prefix="mysql-hook-install-"))
            try:
                shutil.copytree(REPO / "metacontroller", work / "metacontroller")
                example(work, version)
                inst = Install(k8s, node, bin_dir, mariadb_ref, work)
                try:
                    inst.metacontroller(mc.crds)
                    inst.readme()
                    db = inst.running()
                    say(f"MySQL db is Running: primary {db['status']['primary']}, "
                        f"{db['status']['readyReplicas']} servers ready")
                    inst.app()
                    inst.grow()
                except BaseException:
                    inst.diagnose()
                    raise
            finally:
                shutil.rmtree(work, ignore_errors=True)
            for key, secs in node.timings:
                say(f"timing: {key}: {secs:.1f}s")


def hook_image_from_dockerfile() -> images.Image:
    """The hook's image as tests/image/build.sh builds it from the Dockerfile."""
    archive = Path(tempfile.gettempdir()) / f"mysql-hook-install-image-{os.getpid()}.tar"
    p = subprocess.run(["bash", str(REPO / "tests/image/build.sh"), "--archive", str(archive)],
                       stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise HarnessError(f"tests/image/build.sh failed with exit status {p.returncode}")
    ref = p.stdout.split()[0]
    return images.Image(ref, archive)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.parse_args()
    missing = realnode.missing_prerequisites()
    reason = ("a real node needs " + "; ".join(missing)) if missing else components.metacontroller_skip_reason()
    if reason:
        print(f"install skipped: {reason}", flush=True)
        if os.environ.get("MYSQL_HOOK_REQUIRE_REAL_SERVERS") == "1":
            print("install: FAILED: MYSQL_HOOK_REQUIRE_REAL_SERVERS=1 (CI) does not accept a skip", flush=True)
            return 1
        return 0
    hook_img = None
    try:
        t = time.monotonic()
        bin_dir = components.bin_dir_for(("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
                                          "kubelet", "kube-proxy", "kubectl", "coredns", "pause"), "--node")
        mc = components.metacontroller(bin_dir)
        versions = load_versions()
        say(f"components ready in {bin_dir} ({time.monotonic() - t:.0f}s)")
        t = time.monotonic()
        mariadb = images.mariadb_image()
        pause = images.pause_image(bin_dir / "pause", versions.get("PAUSE_VERSION", "3.10"))
        mc_img = images.metacontroller_image(mc.bin, versions["METACONTROLLER_VERSION"])
        hook_img = hook_image_from_dockerfile()
        say(f"images ready ({time.monotonic() - t:.0f}s): {mariadb.ref}, {mc_img.ref}, {hook_img.ref} "
            f"(the Dockerfile's), {pause.ref}")
        run(bin_dir, [pause, mariadb, mc_img, hook_img], mariadb.ref, mc)
    except (HarnessError, images.ImageError, subprocess.TimeoutExpired) as e:
        print(f"install: FAILED: {e}", flush=True)
        return 1
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        print("install: FAILED", flush=True)
        return 1
    finally:
        if hook_img is not None:
            hook_img.tar.unlink(missing_ok=True)
    print(f"install: passed in {time.monotonic() - T0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Volume growth on a real API server (issue 17.5), the `grow` section of conformance.py.

No controller-manager runs, so the volumes are bound by hand: two StorageClasses
(`grow-expandable` with allowVolumeExpansion, `grow-fixed` without), a PV and a
claim bound to it for each server claim (spec.volumeName, claimRef, and
status.phase Bound written through the status subresource). The ServiceAccount,
Role and RoleBinding are the hook's own answer in test-fixtures/sync/storage-grow
(moved to a namespace of their own), and the token is a TokenRequest for that
ServiceAccount, so the Role's resourceNames are what is proven. Then the real
`mysql-hook grow-claims` binary runs on the host against the API server:

- a claim of the expandable class is raised to the target;
- a claim of the fixed class is refused by the API server (the
  PersistentVolumeClaimResize admission plugin), with its message, exit 1 and a
  termination log that says so, and is left as it was;
- a smaller size is refused by the binary itself without a PATCH (the claim's
  resourceVersion does not move; the API server's own refusal would read
  differently);
- a claim outside the Role's resourceNames is forbidden.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from harness import REPO, ApiError, Cluster

NS = "grow-test"
FIXTURE = REPO / "test-fixtures" / "sync" / "storage-grow" / "response.json"


def binary() -> Path | None:
    """The mysql-hook binary: MYSQL_HOOK_BIN (cargo test sets it), else the debug build."""
    if os.environ.get("MYSQL_HOOK_BIN"):
        return Path(os.environ["MYSQL_HOOK_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    p = target / "debug" / "mysql-hook"
    return p if p.exists() else None


def _hook_access_objects() -> list[dict]:
    """The ServiceAccount, Role and RoleBinding the hook emits, in namespace NS."""
    answer = json.loads(FIXTURE.read_text(encoding="utf-8"))
    out = []
    for c in answer["children"]:
        if c["kind"] in ("ServiceAccount", "Role", "RoleBinding"):
            o = copy.deepcopy(c)
            o["metadata"]["namespace"] = NS
            for s in o.get("subjects") or []:
                s["namespace"] = NS
            out.append(o)
    return out


def _bind(k8s: Cluster, claim: str, storage_class: str, size: str = "1Gi") -> None:
    pv_name = f"{NS}-{claim}"
    k8s.create({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv_name},
                "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                         "persistentVolumeReclaimPolicy": "Retain", "storageClassName": storage_class,
                         "hostPath": {"path": f"/tmp/{pv_name}"},
                         "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                      "namespace": NS, "name": claim}}})
    pv = k8s.get("v1", "PersistentVolume", pv_name)
    pv["status"] = {"phase": "Bound"}
    k8s.replace_status(pv)
    k8s.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": claim, "namespace": NS},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                         "volumeName": pv_name, "volumeMode": "Filesystem",
                         "resources": {"requests": {"storage": size}}}}, namespace=NS)
    pvc = k8s.get("v1", "PersistentVolumeClaim", claim, NS)
    pvc["status"] = {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": size}}
    k8s.replace_status(pvc, namespace=NS)


def _request(k8s: Cluster, claim: str) -> tuple[str, str]:
    pvc = k8s.get("v1", "PersistentVolumeClaim", claim, NS)
    return pvc["spec"]["resources"]["requests"]["storage"], pvc["metadata"]["resourceVersion"]


def check_grow(k8s: Cluster, rep: Any) -> None:
    what = "grow-claims"
    exe = binary()
    if exe is None or not exe.exists():
        rep.fail(what, "no mysql-hook binary: run through `cargo test --test k8s_conformance` "
                       "(MYSQL_HOOK_BIN) or build it first")
        return
    try:
        k8s.ensure_namespace(NS)
        for name, expand in (("grow-expandable", True), ("grow-fixed", None)):
            sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                  "provisioner": "example.com/test", "volumeBindingMode": "Immediate"}
            if expand:
                sc["allowVolumeExpansion"] = True
            k8s.create(sc)
        # data-db-0..2 are in the hook's Role; "other" is not.
        _bind(k8s, "data-db-0", "grow-expandable")
        _bind(k8s, "data-db-1", "grow-fixed")
        _bind(k8s, "data-db-2", "grow-expandable")
        _bind(k8s, "other", "grow-expandable")
        objects = _hook_access_objects()
        kinds = sorted(o["kind"] for o in objects)
        if kinds != ["Role", "RoleBinding", "ServiceAccount"]:
            rep.fail(what, f"{FIXTURE.relative_to(REPO)} holds {kinds}, not a ServiceAccount, Role and RoleBinding")
            return
        for o in objects:
            k8s.create(o, namespace=NS)
        account = next(o for o in objects if o["kind"] == "ServiceAccount")["metadata"]["name"]
        token = k8s.request("POST", f"/api/v1/namespaces/{NS}/serviceaccounts/{account}/token",
                            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                             "spec": {"expirationSeconds": 600}})["status"]["token"]
    except ApiError as e:
        rep.fail(what, f"setting up claims, volumes and the hook's Role: {e}")
        return

    with tempfile.TemporaryDirectory(prefix="mysql-hook-grow-") as d:
        token_file = Path(d) / "token"
        token_file.write_text(token)
        log_file = Path(d) / "termination-log"

        def run(size: str, *claims: str) -> tuple[int, str, dict]:
            log_file.write_text("")
            p = subprocess.run([str(exe), "grow-claims", "--server", k8s.server, "--ca-file", str(k8s.ca_file),
                                "--token-file", str(token_file), "--termination-log", str(log_file),
                                "--namespace", NS, "--size", size, *claims],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
            try:
                result = json.loads(log_file.read_text() or "{}")
            except ValueError:
                result = {"unparsable": log_file.read_text()}
            return p.returncode, p.stdout, result

        # 1. Expandable: raised.
        code, out, result = run("2Gi", "data-db-0")
        got, _ = _request(k8s, "data-db-0")
        if code == 0 and got == "2Gi" and result.get("result") == "grown":
            rep.ok(f"{what}: the expandable claim data-db-0 is raised to 2Gi ({out.strip()})")
        else:
            rep.fail(what, f"expandable claim: exit {code}, request {got}, result {result}, output:\n{out}")

        # 2. Not expandable: the API server refuses, with its message.
        before = _request(k8s, "data-db-1")
        code, out, result = run("2Gi", "data-db-1")
        after = _request(k8s, "data-db-1")
        message = str(result.get("message", ""))
        if (code == 1 and after == before and result.get("result") == "error"
                and "must support resize" in out and "must support resize" in message):
            rep.ok(f"{what}: the claim of a StorageClass without expansion is refused by the API server "
                   f"and unchanged ({out.strip()})")
        else:
            rep.fail(what, f"fixed claim: exit {code}, request {before} -> {after}, result {result}, output:\n{out}")

        # 3. A shrink: refused by the binary, nothing sent.
        before = _request(k8s, "data-db-2")
        code, out, result = run("500Mi", "data-db-2")
        after = _request(k8s, "data-db-2")
        if code == 1 and after == before and "refusing to shrink" in out and result.get("result") == "error":
            rep.ok(f"{what}: a smaller size is refused without a PATCH ({out.strip()})")
        else:
            rep.fail(what, f"shrink: exit {code}, request {before} -> {after}, result {result}, output:\n{out}")

        # 4. Outside the Role's resourceNames: forbidden.
        before = _request(k8s, "other")
        code, out, result = run("2Gi", "other")
        after = _request(k8s, "other")
        if code == 1 and after == before and "forbidden" in out and "403" in out:
            rep.ok(f"{what}: a claim outside the Role's resourceNames is forbidden ({out.strip()})")
        else:
            rep.fail(what, f"other claim: exit {code}, request {before} -> {after}, output:\n{out}")

        # 5. All of the hook's claims at once: the refusal of one does not stop the others.
        code, out, result = run("3Gi", "data-db-0", "data-db-1", "data-db-2")
        grown = [_request(k8s, c)[0] for c in ("data-db-0", "data-db-1", "data-db-2")]
        if code == 1 and grown == ["3Gi", "1Gi", "3Gi"]:
            rep.ok(f"{what}: with every claim at once, the expandable ones grow and the refusal is reported")
        else:
            rep.fail(what, f"all claims: exit {code}, requests {grown}, result {result}, output:\n{out}")

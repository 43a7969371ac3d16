#!/usr/bin/env python3
"""The observability components, judged by a real API server with the Prometheus
Operator's own CRDs.

The PodMonitors and the PrometheusRule are custom resources this repository
cannot run the operator for; their CRDs (the operator's published OpenAPI
schemas) still decide whether every field is one the operator knows. This
starts etcd and kube-apiserver with tests/k8s/harness.py (pinned, cached
builds), installs `monitoring.coreos.com_podmonitors.yaml` and
`monitoring.coreos.com_prometheusrules.yaml` from the Go module of
prometheus-operator (PROMETHEUS_OPERATOR_VERSION in versions.env, fetched once
with `go mod download` into ~/.cache/mysql-hook), and dry-runs every object of
metacontroller/components/* with strict field validation. When `kubectl` is on
PATH, `kubectl kustomize metacontroller-monitored/` must render the same
objects on top of metacontroller/.

Prints PASS/FAIL lines and `manifests: N passed, M failed`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "tests" / "k8s"))
from harness import ApiError, Cluster, HarnessError, module_files  # noqa: E402

COMPONENTS = REPO / "metacontroller" / "components"
CRD_FILES = ["monitoring.coreos.com_podmonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"]

results: list[tuple[bool, str]] = []


def check(ok: bool, what: str, detail: str = "") -> None:
    results.append((ok, what))
    print(f"{'PASS' if ok else 'FAIL'} {what}" + (f"\n{detail}" if detail and not ok else ""), flush=True)


def versions() -> dict[str, str]:
    out = {}
    for line in (HERE / "versions.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def operator_crds() -> list[Path]:
    """The operator's CRDs of the pinned release, cached outside the repository."""
    try:
        return module_files("github.com/prometheus-operator/prometheus-operator",
                            versions()["PROMETHEUS_OPERATOR_VERSION"], "example/prometheus-operator-crd", CRD_FILES)
    except HarnessError as e:
        raise SystemExit(f"manifests: {e}") from None


def rendered_components() -> list[dict]:
    """Every object the components add, as kustomize renders them (resources and
    configMapGenerator with disableNameSuffixHash)."""
    objs = []
    for comp in sorted(p for p in COMPONENTS.iterdir() if (p / "kustomization.yaml").exists()):
        k = yaml.safe_load((comp / "kustomization.yaml").read_text())
        check(k.get("kind") == "Component", f"{comp.name}: a kustomize Component")
        for res in k.get("resources", []):
            objs.extend(d for d in yaml.safe_load_all((comp / res).read_text()) if d)
        for gen in k.get("configMapGenerator", []):
            opts = gen.get("options", {})
            objs.append({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": gen["name"], "namespace": gen.get("namespace", "default"),
                                      "labels": opts.get("labels", {})},
                         "data": {Path(f).name: (comp / f).read_text() for f in gen.get("files", [])}})
    return objs


def _secret_of(pod: dict, container: dict, env: str) -> str | None:
    """The Secret the file that the container's `env` names comes from."""
    path = next((e.get("value") for e in container.get("env") or [] if e.get("name") == env), None)
    for m in container.get("volumeMounts") or []:
        if path and path.startswith(m.get("mountPath", "").rstrip("/") + "/"):
            vol = next((v for v in pod.get("volumes") or [] if v.get("name") == m.get("name")), {})
            return (vol.get("secret") or {}).get("secretName")
    return None


def scrape_problems(docs: list[dict]) -> list[str]:
    """Why the hook's PodMonitor would not scrape the hook as it serves, or would hold
    the hook calls' token (empty list: it scrapes with a credential of its own)."""
    find = lambda kind, name: next((d for d in docs if d.get("kind") == kind  # noqa: E731
                                    and d["metadata"]["name"] == name), None)
    dep, pm = find("Deployment", "mysql-hook"), find("PodMonitor", "mysql-hook")
    if dep is None or pm is None:
        return ["no Deployment or PodMonitor named mysql-hook"]
    pod = dep["spec"]["template"]["spec"]
    c = next(c for c in pod["containers"] if c["name"] == "mysql-hook")
    calls, metrics = _secret_of(pod, c, "MYSQL_HOOK_AUTH_TOKEN_FILE"), _secret_of(pod, c, "MYSQL_HOOK_METRICS_TOKEN_FILE")
    cert = _secret_of(pod, c, "MYSQL_HOOK_TLS_CERT_FILE")
    problems = []
    for ep in pm["spec"]["podMetricsEndpoints"]:
        sent = ((ep.get("authorization") or {}).get("credentials") or {}).get("name")
        if metrics is None:
            problems.append("the hook reads no metrics token (MYSQL_HOOK_METRICS_TOKEN_FILE from a Secret): "
                            "/metrics takes the hook calls' token")
        elif sent != metrics:
            problems.append(f"the PodMonitor sends the token of Secret {sent}, the hook expects {metrics} on /metrics")
        if sent == calls:
            problems.append(f"the PodMonitor holds the hook calls' token (Secret {calls}), which calls every hook")
        port = next((p for p in c.get("ports") or [] if p.get("name") == ep.get("port")), None)
        if port is None:
            problems.append(f"the PodMonitor scrapes port {ep.get('port')!r}, which the hook's container does not name")
        if (ep.get("scheme") == "https") != bool(cert):
            problems.append(f"the PodMonitor scrapes with {ep.get('scheme', 'http')}, the hook serves "
                            f"{'HTTPS' if cert else 'HTTP'}")
        ca = (((ep.get("tlsConfig") or {}).get("ca") or {}).get("secret") or {}).get("name")
        if cert and ca != cert:
            problems.append(f"the PodMonitor trusts the CA of Secret {ca}, the hook's certificate comes from {cert}")
    return problems


def main() -> int:
    crds = operator_crds()
    objs = rendered_components()
    with Cluster() as k8s:
        for path in crds:
            crd = yaml.safe_load(path.read_text())
            k8s.create(crd)
            k8s.wait_for_crd_established(crd["metadata"]["name"])
            check(True, f"{crd['metadata']['name']} ({versions()['PROMETHEUS_OPERATOR_VERSION']}) established")
        k8s.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mysql-hook"}})
        for obj in objs:
            what = f"{obj['kind']} {obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
            try:
                k8s.create(obj, dry_run=True, field_validation="Strict")
                check(not k8s.last_warnings, f"{what} accepted (strict dry-run)", "\n".join(k8s.last_warnings))
            except ApiError as e:
                check(False, f"{what} accepted (strict dry-run)", str(e)[:3000])
    if shutil.which("kubectl"):
        out = subprocess.run(["kubectl", "kustomize", str(REPO / "metacontroller-monitored")],
                             capture_output=True, text=True)
        base = subprocess.run(["kubectl", "kustomize", str(REPO / "metacontroller")], capture_output=True, text=True)
        if out.returncode == 0 and base.returncode == 0:
            key = lambda d: (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"])  # noqa: E731
            added = sorted(set(map(key, filter(None, yaml.safe_load_all(out.stdout))))
                           - set(map(key, filter(None, yaml.safe_load_all(base.stdout)))))
            check(added == sorted(map(key, objs)), "kubectl kustomize metacontroller-monitored/ adds exactly the "
                  "components' objects to metacontroller/", f"{added}\nvs\n{sorted(map(key, objs))}")
            problems = scrape_problems([d for d in yaml.safe_load_all(out.stdout) if d])
            check(not problems, "metacontroller-monitored/: Prometheus scrapes the hook over HTTPS with the CA "
                  "of the hook's certificate and a token of its own, not the hook calls' one", "\n".join(problems))
        else:
            check(False, "kubectl kustomize renders metacontroller-monitored/", out.stderr + base.stderr)
    else:
        print("note: kubectl not on PATH; kustomize rendering not checked")
    failed = sum(1 for ok, _ in results if not ok)
    print(f"manifests: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

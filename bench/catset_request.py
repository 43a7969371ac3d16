#!/usr/bin/env python3
"""A sync request for the peer of bench/side-by-side.sh, Metacontroller's CatSet
example, grown to at least `BYTES` bytes of compact JSON. The padding is
structure shaped as Kubernetes objects are: many small objects of one shape, so
the peer parses structure, not one long string, nor thousands of distinct keys:

- `running`: a CatSet of 3 (the values of the example's my-catset.yaml) with its
  3 Pods Running and Ready and their 3 claims observed, the padding the observed
  Pods' container `env` (our running request's size is observed state too; the
  example builds its Pods from the template, never from the observed ones);
- `new`: the same CatSet with nothing observed yet, the padding in the parent's
  `status` (which the example never reads).

Usage: bench/catset_request.py running|new BYTES > request.json
"""
import json
import sys

NAME = "nginx-backend"
TEMPLATE = {
    "metadata": {"labels": {"app": "nginx", "component": "backend"}},
    "spec": {
        "volumes": [{"name": "pod-info", "downwardAPI": {"items": [
            {"path": "pod_name", "fieldRef": {"fieldPath": "metadata.name"}}]}}],
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "nginx", "image": "nginx:1.26.2",
                        "ports": [{"containerPort": 80, "name": "web"}],
                        "volumeMounts": [{"name": "www", "mountPath": "/usr/share/nginx/html"}]}],
    },
}
CLAIM = {"metadata": {"name": "www", "labels": {"app": "nginx", "component": "backend"}},
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}


def pod(i: int, env: list) -> dict:
    name = f"{NAME}-{i}"
    containers = [dict(c, env=env) for c in TEMPLATE["spec"]["containers"]]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"00000000-0000-0000-0000-00000000000{i}",
                     "labels": TEMPLATE["metadata"]["labels"]},
        "spec": dict(TEMPLATE["spec"], hostname=name, subdomain=NAME, containers=containers),
        "status": {"phase": "Running", "podIP": f"10.0.0.{10 + i}",
                   "conditions": [{"type": "Ready", "status": "True"},
                                  {"type": "ContainersReady", "status": "True"}]},
    }


def pad(entries: int) -> list:
    return [{"name": f"PAD_{k:05d}", "value": f"value-{k:06d}"} for k in range(entries)]


def request(running: bool, entries: int) -> dict:
    n = 3 if running else 0
    pods = {f"{NAME}-{i}": pod(i, pad(entries)) for i in range(n)}
    claims = {}
    for i in range(n):
        n = f"www-{NAME}-{i}"
        claims[n] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": n, "namespace": "default", "labels": CLAIM["metadata"]["labels"]},
                     "spec": CLAIM["spec"], "status": {"phase": "Bound"}}
    parent = {"apiVersion": "ctl.enisoc.com/v1", "kind": "CatSet",
              "metadata": {"name": NAME, "namespace": "default", "uid": "00000000-0000-0000-0000-0000000000ca",
                           "generation": 1},
              "spec": {"serviceName": NAME, "replicas": 3, "selector": {"matchLabels": {"app": "nginx"}},
                       "template": TEMPLATE, "volumeClaimTemplates": [CLAIM]}}
    if not running:
        parent["status"] = {"padding": pad(entries)}
    return {"controller": {"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
                           "metadata": {"name": "catset-controller"}},
            "parent": parent,
            "children": {"Pod.v1": pods, "PersistentVolumeClaim.v1": claims},
            "related": {}, "finalizing": False}


def compact(o) -> str:
    return json.dumps(o, separators=(",", ":"))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("running", "new"):
        sys.exit("usage: bench/catset_request.py running|new BYTES")
    running, target = sys.argv[1] == "running", int(sys.argv[2])
    entries = 0
    while len(compact(request(running, entries))) < target:
        entries += 1
    sys.stdout.write(compact(request(running, entries)))


if __name__ == "__main__":
    main()

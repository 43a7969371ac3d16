#!/usr/bin/env python3
"""Conformance of mysql-hook's CRDs and generated children, judged by a real API server.

Starts a throwaway etcd + kube-apiserver (harness.py) and checks:

a. every CustomResourceDefinition in metacontroller/ is accepted (strict field
   validation), becomes Established and is structural;
b. every example in metacontroller/examples/*.yaml is accepted (server-side dry-run
   create, strict field validation); every spec in tests/k8s/invalid/*.yaml is
   rejected by the CRD's validation with HTTP 422 and a message containing each of
   the file's `# expect: <text>` lines;
c. for every golden response in test-fixtures/<hook>/<scenario>/response.json
   (customize answers and error.txt scenarios are skipped):
   - every child is a fresh object (no status/uid/resourceVersion/...), its type is
     in the childResources of request.controller, it is accepted by a server-side
     dry-run create in the parent's namespace with strict field validation (unknown
     fields are errors), and Metacontroller's dynamic apply - merging the emitted
     child into the object as the server stores it - would find no difference
     (otherwise it updates the child on every sync: "1024Mi" stored as "1Gi",
     stringData turned into data, {} or [] dropped, server defaults inside lists
     that Metacontroller replaces wholesale). Differences on a child whose
     updateStrategy is OnDelete are only noted; MYSQL_HOOK_CONFORMANCE_DIFFS=warn
     notes them for every child instead of failing;
   - a scenario with older-crd.txt holds a parent stored under an older CRD: today's
     must refuse it (HTTP 422, the file's text in the message), and its status is
     not checked; otherwise
   - the response's status is accepted by the parent's status subresource and reads
     back exactly as sent (observedGeneration aside): nothing pruned, defaulted or
     normalised, because Metacontroller compares the stored status with the hook's
     answer on every sync;
d. every install overlay (metacontroller/, which serves HTTPS only) as a user
   applies it: rendered with kustomize (built from the Go module proxy, pinned in
   versions.env), Metacontroller's CRDs and the overlay's CRDs and Namespace applied
   for real, then every other object accepted by a server-side dry-run (strict field
   validation); and the wiring checked: every hook URL of every CompositeController
   reaches the hook's Service, a Service port, a container port and the port the
   hook listens on, with the scheme it serves (HTTPS with a CA bundle from the
   Secret the hook's certificate comes from), and carries the bearer token from the
   Secret the hook reads its token file from. Metacontroller's CRDs are found as the
   full loop finds them: METACONTROLLER_CRDS (a file or a directory), else
   manifests/metacontroller-crds-v1.yaml of the Metacontroller source tree at
   $MYSQL_HOOK_METACONTROLLER_SRC, ../shared/metacontroller or
   /work/shared/metacontroller; without them this section fails. Then
   metacontroller/tls-cert-manager/ against cert-manager's own CRDs (its Go module,
   CERT_MANAGER_VERSION in versions.env): every Issuer and Certificate accepted by
   a strict dry-run, and wired to the install: a Certificate writes the Secret the
   hook's certificate comes from, for the host of every hook URL, issued by a CA
   Issuer in the same namespace whose CA is a Certificate with isCA.
e. volume growth (grow_claims.py): the real `mysql-hook grow-claims` binary, with a
   token of the ServiceAccount the hook emits bound to the Role it emits, raises a
   claim of an expandable StorageClass, is refused by the API server for a class
   without expansion, refuses a shrink without a PATCH, and is forbidden a claim
   outside the Role's resourceNames (MYSQL_HOOK_BIN names the binary).
f. schedules (schedules.py): every backup schedule `mysql-hook check-schedules`
   accepts - a fixed list and a few hundred generated from a fixed seed - is
   accepted by the API server in the CronJob the hook emits; the fixed list's
   refusals (day of week 7, out-of-range fields) are refused by both.

Every check prints PASS or FAIL (naming the fixture, the object and the server's
message); the last line is `conformance: N passed, M failed`. Exit status 0 only
when nothing failed.

    python3 tests/k8s/conformance.py [--only crds,examples,invalid,fixtures,overlays,grow,schedules] [-k TEXT]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True  # no __pycache__ in the work tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (  # noqa: E402
    BUILD_SCRIPT, REPO, ApiError, Cluster, HarnessError, iter_yaml_files, load_versions, load_yaml_docs,
    module_files, strip_server_fields,
)
from grow_claims import check_grow  # noqa: E402
from schedules import check_schedules  # noqa: E402

SECTIONS = ("crds", "examples", "invalid", "fixtures", "overlays", "grow", "schedules")
# Fields a child must not carry: Metacontroller wants fresh objects (DESIGN.md §3).
SERVER_OWNED_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp",
                         "managedFields", "deletionTimestamp", "selfLink")
MAX_DIFFS = 12
# MYSQL_HOOK_CONFORMANCE_DIFFS=warn turns "stored differently than emitted" findings for
# children into NOTE lines instead of failures (the status check stays strict).
DIFFS_ADVISORY = os.environ.get("MYSQL_HOOK_CONFORMANCE_DIFFS", "").lower() in ("warn", "note", "advisory")


class Report:
    def __init__(self) -> None:
        self.passed = 0
        self.failures: list[str] = []
        self.notes = 0

    def ok(self, what: str) -> None:
        self.passed += 1
        print(f"PASS  {what}", flush=True)

    def fail(self, what: str, message: str) -> None:
        self.failures.append(what)
        body = "\n".join("        " + line for line in message.rstrip().splitlines())
        print(f"FAIL  {what}\n{body}", flush=True)

    def note(self, what: str, message: str) -> None:
        self.notes += 1
        print(f"NOTE  {what}: {message}", flush=True)

    def skip(self, what: str, why: str) -> None:
        print(f"SKIP  {what}: {why}", flush=True)

    def warnings(self, what: str, warnings: list[str]) -> None:
        for w in warnings:
            self.note(what, f"server warning: {w}")

    def summary(self) -> int:
        if self.failures:
            print("\nfailed checks:")
            for f in self.failures:
                print(f"  - {f}")
        print(f"\nconformance: {self.passed} passed, {len(self.failures)} failed", flush=True)
        return 1 if self.failures else 0


def rel(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(REPO))
    except ValueError:
        return str(p)


def obj_name(obj: dict) -> str:
    md = obj.get("metadata") or {}
    return f"{obj.get('kind', '?')} {md.get('name') or md.get('generateName') or '?'}"


# Set when a CRD was refused, so that the follow-up failures say why.
CRD_FAILED_HINT: list[str] = []


def server_message(e: Exception) -> str:
    if isinstance(e, ApiError):
        return f"HTTP {e.code} {e.reason}: {e.message}"
    if "does not serve kind" in str(e) and CRD_FAILED_HINT:
        return f"{e} (a CustomResourceDefinition was rejected above: {', '.join(CRD_FAILED_HINT)})"
    return str(e)


# ------------------------------------------------------------------- comparison


def _fmt(v: Any) -> str:
    s = json.dumps(v, sort_keys=True)
    return s if len(s) <= 120 else s[:117] + "..."


def diff(sent: Any, stored: Any, path: str, out: list[str], exact: bool) -> None:
    """Differences between what was sent and what the server holds.

    exact=False: every sent value must be held unchanged (additions are fine).
    exact=True: additions are reported too. Types count: 1 != 1.0 != "1" != True."""
    if isinstance(sent, dict) and isinstance(stored, dict):
        for k, v in sent.items():
            p = f"{path}.{k}"
            if k not in stored:
                out.append(f"{p}: sent {_fmt(v)}, the server dropped it")
            else:
                diff(v, stored[k], p, out, exact)
        if exact:
            for k, v in stored.items():
                if k not in sent:
                    out.append(f"{path}.{k}: not sent, the server added {_fmt(v)}")
    elif isinstance(sent, list) and isinstance(stored, list):
        if len(sent) != len(stored):
            out.append(f"{path}: sent {len(sent)} items, the server holds {len(stored)}")
        for i, (a, b) in enumerate(zip(sent, stored)):
            label = f"[{i}]"
            if isinstance(a, dict) and isinstance(a.get("name"), str):
                label = f"[{i}]{{name={a['name']}}}"
            diff(a, b, path + label, out, exact)
    elif type(sent) is not type(stored) or sent != stored:
        out.append(f"{path or '.'}: sent {_fmt(sent)}, the server holds {_fmt(stored)}")


# Metacontroller's dynamic apply (pkg/dynamic/apply and ApplyUpdate in
# pkg/controller/common/manage_children.go), re-stated: on every sync it merges the
# hook's child into the observed object, with the previous answer as "last applied",
# reverts system metadata and .status, and updates the child unless the result
# reflect.DeepEqual()s the observed object. Maps merge key by key; a list merges by
# key only when all its items share one of these keys, otherwise the emitted list
# replaces the stored one wholesale (so it must equal it, server defaults included).
MC_MERGE_KEYS = ("containerPort", "port", "mountPath", "name", "uid", "ip", "path")
MC_SYSTEM_METADATA = ("selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
                      "deletionTimestamp", "deletionGracePeriodSeconds")


class MergeError(Exception):
    pass


def _mc_key(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return json.dumps(v)


def _mc_list_map_key(*lists: list) -> str:
    common: set[str] | None = None
    for lst in lists:
        for item in lst:
            if not isinstance(item, dict):
                return ""
            common = set(item) if common is None else common & set(item)
    for k in MC_MERGE_KEYS:
        if common and k in common:
            return k
    return ""


def mc_merge(path: str, dest: Any, last: Any, desired: Any) -> Any:
    if isinstance(dest, dict):
        if last is not None and not isinstance(last, dict):
            raise MergeError(f"lastApplied{path}: expecting an object")
        if desired is not None and not isinstance(desired, dict):
            raise MergeError(f"{path or '.'}: the hook emits {_fmt(desired)} where the server holds an object")
        return _mc_merge_object(path, dest, last or {}, desired or {})
    if isinstance(dest, list):
        if last is not None and not isinstance(last, list):
            raise MergeError(f"lastApplied{path}: expecting a list")
        if desired is not None and not isinstance(desired, list):
            raise MergeError(f"{path or '.'}: the hook emits {_fmt(desired)} where the server holds a list")
        key = _mc_list_map_key(dest, last or [], desired or [])
        if not key:
            return desired
        dest_map = {_mc_key(i[key]): i for i in dest}
        last_map = {_mc_key(i[key]): i for i in last or []}
        des_map = {_mc_key(i[key]): i for i in desired or []}
        _mc_merge_object(path, dest_map, last_map, des_map)
        out, added = [], set()
        for item in list(dest) + list(desired or []):
            k = _mc_key(item[key])
            if k in dest_map and k not in added:
                out.append(dest_map[k])
                added.add(k)
        return out
    return desired


def _mc_merge_object(path: str, dest: dict, last: dict, desired: dict) -> dict:
    for k in last:
        if k not in desired:
            dest.pop(k, None)
    for k, v in desired.items():
        dest[k] = mc_merge(f"{path}.{k}", dest.get(k), last.get(k), v)
    return dest


def metacontroller_update_diff(desired: dict, stored: dict) -> list[str]:
    """Why Metacontroller would update this child on every sync, or [] if it would not."""
    observed = json.loads(json.dumps(stored))
    try:
        merged = mc_merge("", json.loads(json.dumps(observed)), desired, desired)
    except MergeError as e:
        return [f"Metacontroller cannot merge it: {e}"]
    for k in MC_SYSTEM_METADATA:
        if k in observed.get("metadata", {}):
            merged.setdefault("metadata", {})[k] = observed["metadata"][k]
        else:
            merged.get("metadata", {}).pop(k, None)
    if "status" in observed:
        merged["status"] = observed["status"]
    else:
        merged.pop("status", None)
    out: list[str] = []
    diff(merged, observed, "", out, exact=True)
    return out


def fresh_object_problems(child: dict) -> list[str]:
    problems = []
    if "status" in child:
        problems.append("carries .status (Metacontroller wants fresh objects without status)")
    md = child.get("metadata") or {}
    for k in SERVER_OWNED_METADATA:
        if k in md:
            problems.append(f"carries metadata.{k}, which the server owns")
    if not md.get("name"):
        problems.append("has no metadata.name (Metacontroller identifies children by name)")
    for k in ("apiVersion", "kind"):
        if not child.get(k):
            problems.append(f"has no {k}")
    return problems


# --------------------------------------------------------------------- sections


def check_crds(k8s: Cluster, crd_dir: Path, rep: Report) -> None:
    found = 0
    for path in iter_yaml_files(crd_dir):
        try:
            docs = load_yaml_docs(path)
        except Exception as e:  # noqa: BLE001
            rep.fail(f"crds: {rel(path)}", f"not valid YAML: {e}")
            continue
        for doc in docs:
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            found += 1
            name = (doc.get("metadata") or {}).get("name", "?")
            what = f"crds: {rel(path)}: CustomResourceDefinition {name}"
            try:
                k8s.create(doc)
                rep.warnings(what, k8s.last_warnings)
                crd = k8s.wait_for_crd_established(name)
                for v in crd["spec"].get("versions", []):
                    if v.get("served"):
                        k8s.wait_for_kind(f"{crd['spec']['group']}/{v['name']}", crd["spec"]["names"]["kind"])
            except (ApiError, HarnessError) as e:
                rep.fail(what, server_message(e))
                CRD_FAILED_HINT.append(name)
                continue
            conds = {c["type"]: c for c in crd.get("status", {}).get("conditions", [])}
            bad = [f"{t}={c.get('status')}: {c.get('message')}" for t, c in conds.items()
                   if (t == "NonStructuralSchema" and c.get("status") == "True")
                   or (t in ("Established", "NamesAccepted") and c.get("status") != "True")]
            if bad:
                rep.fail(what, "; ".join(bad))
                CRD_FAILED_HINT.append(name)
            else:
                rep.ok(f"{what} is Established and structural")
    if found == 0:
        rep.fail(f"crds: {rel(crd_dir)}", "no CustomResourceDefinition found in any *.yaml file")


def _dry_run_docs(k8s: Cluster, path: Path) -> list[dict]:
    docs = [d for d in load_yaml_docs(path) if isinstance(d, dict)]
    for d in docs:
        ns = (d.get("metadata") or {}).get("namespace")
        if ns:
            k8s.ensure_namespace(ns)
    return docs


def check_examples(k8s: Cluster, examples_dir: Path, rep: Report) -> None:
    files = sorted(examples_dir.glob("*.yaml")) if examples_dir.is_dir() else []
    if not files:
        rep.note(f"examples: {rel(examples_dir)}", "no example *.yaml files yet; nothing to check")
        return
    for path in files:
        try:
            docs = _dry_run_docs(k8s, path)
        except Exception as e:  # noqa: BLE001
            rep.fail(f"examples: {rel(path)}", f"cannot load: {e}")
            continue
        if not docs:
            rep.fail(f"examples: {rel(path)}", "holds no object")
        for doc in docs:
            what = f"examples: {rel(path)}: {obj_name(doc)}"
            try:
                k8s.create(doc, dry_run=True)
                rep.warnings(what, k8s.last_warnings)
                rep.ok(f"{what} accepted (dry-run)")
            except (ApiError, HarnessError) as e:
                rep.fail(what, server_message(e))


EXPECT_RE = re.compile(r"^\s*#\s*expect:\s*(.+?)\s*$")


def check_invalid(k8s: Cluster, invalid_dir: Path, rep: Report) -> None:
    files = sorted(invalid_dir.glob("*.yaml")) if invalid_dir.is_dir() else []
    if not files:
        rep.fail(f"invalid: {rel(invalid_dir)}", "no invalid specs found")
        return
    for path in files:
        expects = [m.group(1) for line in path.read_text(encoding="utf-8").splitlines()
                   if (m := EXPECT_RE.match(line))]
        base = f"invalid: {rel(path)}"
        if not expects:
            rep.fail(base, "has no '# expect: <substring of the server's message>' line")
            continue
        try:
            docs = _dry_run_docs(k8s, path)
        except Exception as e:  # noqa: BLE001
            rep.fail(base, f"cannot load: {e}")
            continue
        for doc in docs:
            what = f"{base}: {obj_name(doc)}"
            try:
                k8s.create(doc, dry_run=True)
            except ApiError as e:
                missing = [x for x in expects if x not in e.message]
                if e.code != 422:
                    rep.fail(what, f"rejected, but with HTTP {e.code} {e.reason} instead of 422 "
                                   f"(CRD validation): {e.message}")
                elif missing:
                    rep.fail(what, "rejected, but the message lacks "
                             + ", ".join(repr(x) for x in missing) + f": {e.message}")
                else:
                    rep.ok(f"{what} rejected: {e.message}")
                continue
            except HarnessError as e:
                rep.fail(what, server_message(e))
                continue
            rep.fail(what, "ACCEPTED by the API server, but it must be rejected (expected a 422 "
                           "mentioning " + ", ".join(repr(x) for x in expects) + ")")


def check_fixtures(k8s: Cluster, fixtures_dir: Path, rep: Report, name_filter: str | None) -> None:
    scenarios = sorted(p.parent for p in fixtures_dir.glob("*/*/request.json"))
    if not scenarios:
        rep.note(f"fixtures: {rel(fixtures_dir)}", "no <hook>/<scenario>/request.json found; nothing to check")
        return
    for sdir in scenarios:
        fixture = f"{sdir.parent.name}/{sdir.name}"
        if name_filter and name_filter not in fixture:
            continue
        resp_path = sdir / "response.json"
        if not resp_path.exists():
            why = "error.txt scenario (invalid request)" if (sdir / "error.txt").exists() else "no response.json"
            rep.skip(f"fixtures: {fixture}", why)
            continue
        try:
            request = json.loads((sdir / "request.json").read_text(encoding="utf-8"))
            response = json.loads(resp_path.read_text(encoding="utf-8"))
        except ValueError as e:
            rep.fail(f"fixtures: {fixture}", f"cannot parse JSON: {e}")
            continue
        if "relatedResources" in response:
            rep.skip(f"fixtures: {fixture}", "customize response (relatedResources, no children)")
            continue
        parent = request.get("parent") or {}
        ns = (parent.get("metadata") or {}).get("namespace") or "default"
        try:
            k8s.ensure_namespace(ns)
        except (ApiError, HarnessError) as e:
            rep.fail(f"fixtures: {fixture}: Namespace {ns}", server_message(e))
            continue
        children = response.get("children")
        if not isinstance(children, list):
            rep.fail(f"fixtures: {fixture}", "response has no children list")
            children = []
        controller = request.get("controller") if isinstance(request.get("controller"), dict) else None
        for i, child in enumerate(children):
            check_child(k8s, fixture, ns, i, len(children), child, controller, rep)
        older = sdir / "older-crd.txt"
        if older.exists():
            # A parent stored under an older CRD, which today's refuses: the hook must
            # still answer it (and hold what it has); the API server proves the CRD
            # now refuses it, with the file's message. Its status is not checked.
            check_parent_refused(k8s, fixture, parent, older.read_text(encoding="utf-8").strip(), rep)
        elif "status" in response:
            check_parent_status(k8s, fixture, parent, response["status"], rep)


def check_parent_refused(k8s: Cluster, fixture: str, parent: dict, expect: str, rep: Report) -> None:
    what = f"fixtures: {fixture}: {obj_name(parent)} (stored under an older CRD)"
    obj = strip_server_fields(parent)
    ns = obj["metadata"].get("namespace") or "default"
    try:
        k8s.create(obj, namespace=ns)
    except ApiError as e:
        message = server_message(e)
        if e.code == 422 and expect in message:
            rep.ok(f"{what} refused by today's CRD: {expect}")
        else:
            rep.fail(what, f"refused, but not with HTTP 422 and {expect!r}: {message}")
        return
    except HarnessError as e:
        rep.fail(what, server_message(e))
        return
    rep.fail(what, f"accepted, but older-crd.txt says today's CRD refuses it with {expect!r}")
    try:
        k8s.delete(obj.get("apiVersion"), obj.get("kind"), obj["metadata"].get("name"), ns)
    except (ApiError, HarnessError) as e:
        rep.note(what, f"could not delete the parent afterwards: {server_message(e)}")


def update_method(controller: dict | None, api_version: str, resource: str) -> str | None:
    """The childResources updateStrategy.method for a child type (OnDelete when unset),
    or None when the controller does not list that type."""
    if controller is None:
        return "InPlace"  # no controller in the request: judge as strictly as possible
    for cr in (controller.get("spec") or {}).get("childResources") or []:
        if cr.get("apiVersion") == api_version and cr.get("resource") == resource:
            return ((cr.get("updateStrategy") or {}).get("method")) or "OnDelete"
    return None


def check_child(k8s: Cluster, fixture: str, ns: str, i: int, n: int, child: Any,
                controller: dict | None, rep: Report) -> None:
    if not isinstance(child, dict):
        rep.fail(f"fixtures: {fixture}: child {i + 1}/{n}", f"is not an object: {_fmt(child)}")
        return
    what = f"fixtures: {fixture}: {obj_name(child)}"
    problems = fresh_object_problems(child)
    child_ns = (child.get("metadata") or {}).get("namespace")
    if child_ns and child_ns != ns:
        problems.append(f"has namespace {child_ns!r}, but the parent lives in {ns!r}")
    if problems:
        rep.fail(what, "; ".join(problems))
        return
    obj = json.loads(json.dumps(child))
    obj["metadata"]["namespace"] = ns
    try:
        stored = k8s.create(obj, namespace=ns, dry_run=True)
    except (ApiError, HarnessError) as e:
        rep.fail(what, f"rejected by server-side dry-run create: {server_message(e)}")
        return
    warnings = list(k8s.last_warnings)
    rep.warnings(what, warnings)
    resource = k8s.resource_for(obj["apiVersion"], obj["kind"])["name"]
    method = update_method(controller, obj["apiVersion"], resource)
    if method is None:
        rep.fail(what, f"{obj['apiVersion']} {resource} is not in the childResources of the "
                       "CompositeController in request.json, so Metacontroller would refuse it")
        return
    diffs = metacontroller_update_diff(obj, stored)
    if diffs and method == "OnDelete":
        rep.ok(f"{what} accepted (dry-run)")
        rep.note(what, "stored differently from what the hook emits; harmless while its "
                       "updateStrategy is OnDelete: " + "; ".join(diffs[:MAX_DIFFS]))
        return
    if diffs:
        more = f"\n(+{len(diffs) - MAX_DIFFS} more)" if len(diffs) > MAX_DIFFS else ""
        hint = ""
        if any("not sent, the server added" in d for d in diffs):
            hint = ("\n(lists whose items share no merge key - name, port, containerPort, "
                    "mountPath, uid, ip, path - are replaced wholesale by Metacontroller, so "
                    "they must be emitted exactly as the server stores them, defaults included)")
        effect = ("delete and recreate it" if "Recreate" in method else "update it")
        message = ("accepted, but the server stores it differently from what the hook emits, "
                   f"so Metacontroller (updateStrategy {method}) would {effect} on every sync:\n"
                   + "\n".join(diffs[:MAX_DIFFS]) + more + hint)
        if DIFFS_ADVISORY:
            rep.ok(f"{what} accepted (dry-run)")
            rep.note(what, message)
        else:
            rep.fail(what, message)
        return
    rep.ok(f"{what} accepted (dry-run); Metacontroller would see no difference")


def check_parent_status(k8s: Cluster, fixture: str, parent: dict, status: Any, rep: Report) -> None:
    what = f"fixtures: {fixture}: {obj_name(parent)} status"
    if not isinstance(status, dict):
        rep.fail(what, f"response status is not an object: {_fmt(status)}")
        return
    obj = strip_server_fields(parent)
    md = obj["metadata"]
    ns, name = md.get("namespace") or "default", md.get("name")
    md["namespace"] = ns
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not (api_version and kind and name):
        rep.fail(what, "request.parent lacks apiVersion, kind or metadata.name")
        return
    try:
        k8s.delete(api_version, kind, name, ns)  # a leftover of an earlier scenario
        created = k8s.create(obj, namespace=ns)
    except (ApiError, HarnessError) as e:
        rep.fail(what, f"the parent of request.json could not be created (so no status check): "
                       f"{server_message(e)}")
        return
    try:
        body = json.loads(json.dumps(created))
        body["status"] = status
        try:
            k8s.replace_status(body, namespace=ns)
        except (ApiError, HarnessError) as e:
            rep.fail(what, f"status rejected by the status subresource: {server_message(e)}")
            return
        rep.warnings(what, k8s.last_warnings)
        stored = (k8s.get(api_version, kind, name, ns).get("status")) or {}
        sent = {k: v for k, v in status.items() if k != "observedGeneration"}
        held = {k: v for k, v in stored.items() if k != "observedGeneration"}
        diffs: list[str] = []
        diff(sent, held, ".status", diffs, exact=True)
        if diffs:
            more = f"\n(+{len(diffs) - MAX_DIFFS} more)" if len(diffs) > MAX_DIFFS else ""
            rep.fail(what, "accepted, but it does not read back as sent (pruned, defaulted or "
                           "normalised; Metacontroller would rewrite it on every sync):\n"
                     + "\n".join(diffs[:MAX_DIFFS]) + more)
        else:
            rep.ok(f"{what} accepted by the status subresource and read back unchanged")
    finally:
        try:
            k8s.delete(api_version, kind, name, ns)
        except (ApiError, HarnessError) as e:
            rep.note(what, f"could not delete the parent afterwards: {server_message(e)}")


# ---------------------------------------------------------------------- overlays

OVERLAYS = ("metacontroller",)
# The hook's serving certificate from cert-manager, applied before an overlay.
CERT_MANAGER_DIR = "metacontroller/tls-cert-manager"
CERT_MANAGER_CRDS = ["cert-manager.io_issuers.yaml", "cert-manager.io_certificates.yaml"]
HOOK_NAMESPACE = "mysql-hook"
MC_CRDS_IN_TREE = Path("manifests") / "metacontroller-crds-v1.yaml"


def metacontroller_crds() -> tuple[Path | None, str]:
    """Metacontroller's CRD YAML as the full loop finds it: METACONTROLLER_CRDS (a file
    or a directory), else the source tree's manifests; (None, why) when there is none."""
    env = os.environ.get("METACONTROLLER_CRDS")
    if env:
        return (Path(env), "METACONTROLLER_CRDS") if Path(env).exists() else (None, f"METACONTROLLER_CRDS={env} does not exist")
    for src in (os.environ.get("MYSQL_HOOK_METACONTROLLER_SRC"), str(REPO.parent / "shared" / "metacontroller"),
                "/work/shared/metacontroller"):
        if src and (Path(src) / MC_CRDS_IN_TREE).is_file():
            return Path(src) / MC_CRDS_IN_TREE, f"the Metacontroller source tree {src}"
    return None, ("no Metacontroller CRDs: set METACONTROLLER_CRDS (a file or directory of its CRD YAML, "
                  "manifests/production/ of a release) or put its source tree at "
                  "$MYSQL_HOOK_METACONTROLLER_SRC, ../shared/metacontroller or /work/shared/metacontroller")


def kustomize_binary(k8s: Cluster) -> Path:
    """kustomize from the component cache (build-components.sh builds it with etcd and
    kube-apiserver; with MYSQL_HOOK_K8S_BIN_DIR, `--kustomize` builds it alone)."""
    if k8s.bin_dir is not None and os.access(k8s.bin_dir / "kustomize", os.X_OK):
        return k8s.bin_dir / "kustomize"
    proc = subprocess.run(["bash", str(BUILD_SCRIPT), "--kustomize"], stdout=subprocess.PIPE, text=True)
    lines = [l for l in proc.stdout.splitlines() if l.strip()]
    if proc.returncode != 0 or not lines:
        raise HarnessError(f"{BUILD_SCRIPT.name} --kustomize failed (exit status {proc.returncode})")
    return Path(lines[-1].strip()) / "kustomize"


def render(kustomize: Path, overlay: str) -> list[dict]:
    proc = subprocess.run([str(kustomize), "build", overlay], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise HarnessError(f"kustomize build {overlay} failed: {proc.stderr.strip()}")
    import yaml  # the harness already required PyYAML
    return [d for d in yaml.safe_load_all(proc.stdout) if isinstance(d, dict)]


def _find(docs: list[dict], kind: str, name: str) -> dict | None:
    return next((d for d in docs if d.get("kind") == kind and (d.get("metadata") or {}).get("name") == name), None)


def _env(container: dict, name: str) -> str | None:
    return next((e.get("value") for e in container.get("env") or [] if e.get("name") == name), None)


def _secret_of_file(pod: dict, container: dict, path: str | None) -> tuple[str, str] | None:
    """(Secret name, key) a file path in the container comes from, via its volume mounts."""
    if not path:
        return None
    for m in container.get("volumeMounts") or []:
        mount = m.get("mountPath", "").rstrip("/")
        if path.startswith(mount + "/"):
            vol = next((v for v in pod.get("volumes") or [] if v.get("name") == m.get("name")), None)
            if vol and "secret" in vol:
                return vol["secret"].get("secretName"), path[len(mount) + 1:]
    return None


def wiring_problems(docs: list[dict]) -> list[tuple[str, list[str]]]:
    """For each CompositeController hook: why Metacontroller's call would not reach the
    hook as configured (empty list: it would)."""
    from urllib.parse import urlsplit
    out: list[tuple[str, list[str]]] = []
    svc = _find(docs, "Service", "mysql-hook")
    dep = _find(docs, "Deployment", "mysql-hook")
    if svc is None or dep is None:
        return [("install", ["no Service or Deployment named mysql-hook"])]
    ns = (svc.get("metadata") or {}).get("namespace")
    pod = dep["spec"]["template"]["spec"]
    container = next((c for c in pod.get("containers", []) if c.get("name") == "mysql-hook"), {})
    listen = _env(container, "MYSQL_HOOK_LISTEN") or "127.0.0.1:8080"
    listen_port = int(listen.rsplit(":", 1)[1])
    tls = bool(_env(container, "MYSQL_HOOK_TLS_CERT_FILE")) and bool(_env(container, "MYSQL_HOOK_TLS_KEY_FILE"))
    token_from = _secret_of_file(pod, container, _env(container, "MYSQL_HOOK_AUTH_TOKEN_FILE"))
    cert_from = _secret_of_file(pod, container, _env(container, "MYSQL_HOOK_TLS_CERT_FILE"))
    ports = {p.get("name"): p.get("containerPort") for p in container.get("ports") or []}
    ccs = [d for d in docs if d.get("kind") == "CompositeController"]
    names = sorted((c.get("metadata") or {}).get("name") for c in ccs)
    if names != ["mysql-hook", "mysql-hook-backup"]:
        out.append(("CompositeControllers", [f"expected mysql-hook and mysql-hook-backup, found {names}"]))
    for cc in ccs:
        cc_name = cc["metadata"]["name"]
        configs = {e.get("host"): e for e in (cc.get("spec") or {}).get("endpointConfigs") or []}
        for hook, spec in sorted(((cc.get("spec") or {}).get("hooks") or {}).items()):
            problems: list[str] = []
            url = ((spec or {}).get("webhook") or {}).get("url", "")
            u = urlsplit(url)
            host, port = u.hostname or "", u.port or (443 if u.scheme == "https" else 80)
            if host != f"mysql-hook.{ns}.svc":
                problems.append(f"{url}: the host is not the hook's Service mysql-hook.{ns}.svc")
            if u.scheme != "https":
                problems.append(f"{url}: not HTTPS (every sync carries the database passwords)")
            if (u.scheme == "https") != tls:
                problems.append(f"{url}: {u.scheme}, but the hook serves {'HTTPS' if tls else 'plain HTTP'}")
            sport = next((p for p in svc["spec"].get("ports") or [] if p.get("port") == port), None)
            if sport is None:
                problems.append(f"{url}: the Service has no port {port} "
                                f"(it has {[p.get('port') for p in svc['spec'].get('ports') or []]})")
            else:
                target = sport.get("targetPort", port)
                cport = ports.get(target) if isinstance(target, str) else target
                if cport != listen_port:
                    problems.append(f"{url}: Service port {port} leads to container port {target!r} = {cport}, "
                                    f"but the hook listens on {listen_port}")
            conf = configs.get(host) or {}
            auth = ((spec or {}).get("webhook") or {}).get("authorization") or conf.get("authorization") or {}
            ref = auth.get("secretRef") or {}
            if token_from is None:
                problems.append("the hook reads no token file (MYSQL_HOOK_AUTH_TOKEN_FILE from a Secret volume)")
            elif (ref.get("name"), ref.get("key"), ref.get("namespace")) != (*token_from, ns):
                problems.append(f"{url}: sends the token of Secret {ref.get('namespace')}/{ref.get('name')} key "
                                f"{ref.get('key')}, but the hook reads {ns}/{token_from[0]} key {token_from[1]}")
            if u.scheme == "https":
                ca = ((spec or {}).get("webhook") or {}).get("caBundle") or conf.get("caBundle") or {}
                ca_ref = ca.get("secretRef") or {}
                if not ca:
                    problems.append(f"{url}: HTTPS without a caBundle, so Metacontroller cannot verify the hook")
                elif cert_from is not None and ca_ref and (ca_ref.get("name"), ca_ref.get("namespace")) != (cert_from[0], ns):
                    problems.append(f"{url}: trusts the CA of Secret {ca_ref.get('namespace')}/{ca_ref.get('name')}, "
                                    f"but the hook's certificate comes from {ns}/{cert_from[0]}")
            out.append((f"CompositeController {cc_name} {hook} hook {url}", problems))
    for probe in ("readinessProbe", "livenessProbe"):
        get = (container.get(probe) or {}).get("httpGet") or {}
        p = get.get("port")
        problems = []
        if (ports.get(p) if isinstance(p, str) else p) != listen_port:
            problems.append(f"probes port {p!r}, but the hook listens on {listen_port}")
        if (get.get("scheme", "HTTP") == "HTTPS") != tls:
            problems.append(f"probes with {get.get('scheme', 'HTTP')}, but the hook serves {'HTTPS' if tls else 'HTTP'}")
        out.append((f"Deployment mysql-hook {probe}", problems))
    return out


def check_overlays(k8s: Cluster, rep: Report) -> None:
    crds, origin = metacontroller_crds()
    if crds is None:
        rep.fail("overlays: Metacontroller CRDs", origin)
        return
    files = sorted(p for p in crds.rglob("*") if p.suffix in (".yaml", ".yml")) if crds.is_dir() else [crds]
    mc_docs = [d for f in files for d in load_yaml_docs(f) if isinstance(d, dict)
               and d.get("kind") == "CustomResourceDefinition"]
    if not mc_docs:
        rep.fail(f"overlays: {crds}", "holds no CustomResourceDefinition")
        return
    for doc in mc_docs:
        what = f"overlays: Metacontroller CRD {doc['metadata']['name']} (from {origin})"
        try:
            k8s.apply(doc)
            crd = k8s.wait_for_crd_established(doc["metadata"]["name"])
            for v in crd["spec"].get("versions", []):
                if v.get("served"):
                    k8s.wait_for_kind(f"{crd['spec']['group']}/{v['name']}", crd["spec"]["names"]["kind"])
            rep.ok(f"{what} applied and Established")
        except (ApiError, HarnessError) as e:
            rep.fail(what, server_message(e))
    try:
        kustomize = kustomize_binary(k8s)
    except HarnessError as e:
        rep.fail("overlays: kustomize", str(e))
        return
    for overlay in OVERLAYS:
        try:
            docs = render(kustomize, overlay)
        except HarnessError as e:
            rep.fail(f"overlays: {overlay}/", str(e))
            continue
        rep.ok(f"overlays: {overlay}/ rendered by kustomize: {len(docs)} objects")
        for what, problems in wiring_problems(docs):
            if problems:
                rep.fail(f"overlays: {overlay}/: {what}", "; ".join(problems))
            else:
                if what.startswith("Deployment"):
                    rep.ok(f"overlays: {overlay}/: {what} matches the port and scheme the hook serves")
                else:
                    rep.ok(f"overlays: {overlay}/: {what} reaches the hook as it serves, with its token"
                           + (" and CA" if "https://" in what else ""))
        # As `kubectl apply -k` does it: CRDs and Namespaces first (for real: the rest
        # uses them), then every object, here as a server-side dry-run.
        first = [d for d in docs if d.get("kind") in ("CustomResourceDefinition", "Namespace")]
        for doc in first:
            what = f"overlays: {overlay}/: {obj_name(doc)}"
            try:
                k8s.apply(doc)
                if doc["kind"] == "CustomResourceDefinition":
                    crd = k8s.wait_for_crd_established(doc["metadata"]["name"])
                    for v in crd["spec"].get("versions", []):
                        if v.get("served"):
                            k8s.wait_for_kind(f"{crd['spec']['group']}/{v['name']}", crd["spec"]["names"]["kind"])
                rep.warnings(what, k8s.last_warnings)
                rep.ok(f"{what} applied")
            except (ApiError, HarnessError) as e:
                rep.fail(what, server_message(e))
        for doc in docs:
            if doc in first:
                continue
            what = f"overlays: {overlay}/: {obj_name(doc)}"
            md = doc.get("metadata") or {}
            try:
                existing = k8s.get_or_none(doc["apiVersion"], doc["kind"], md.get("name"), md.get("namespace"))
                if existing is None:
                    k8s.create(doc, dry_run=True)
                    how = "dry-run create"
                else:
                    k8s.apply(doc, dry_run=True)
                    how = "dry-run apply over the existing object"
                rep.warnings(what, k8s.last_warnings)
                rep.ok(f"{what} accepted ({how})")
            except (ApiError, HarnessError) as e:
                rep.fail(what, server_message(e))
        check_cert_manager(k8s, rep, kustomize, docs)


def cert_manager_problems(certs: list[dict], install: list[dict]) -> list[str]:
    """Why the Secret cert-manager would write is not the one the install uses (empty
    list: it is)."""
    from urllib.parse import urlsplit
    dep = _find(install, "Deployment", "mysql-hook") or {}
    pod = ((dep.get("spec") or {}).get("template") or {}).get("spec") or {}
    container = next((c for c in pod.get("containers", []) if c.get("name") == "mysql-hook"), {})
    cert_from = _secret_of_file(pod, container, _env(container, "MYSQL_HOOK_TLS_CERT_FILE"))
    if cert_from is None:
        return ["the install's hook reads no certificate from a Secret"]
    ns = (dep.get("metadata") or {}).get("namespace")
    hosts = sorted({urlsplit(((h or {}).get("webhook") or {}).get("url", "")).hostname or ""
                    for cc in install if cc.get("kind") == "CompositeController"
                    for h in ((cc.get("spec") or {}).get("hooks") or {}).values()})
    problems = []
    serving = [c for c in certs if c.get("kind") == "Certificate"
               and (c.get("spec") or {}).get("secretName") == cert_from[0]]
    if len(serving) != 1:
        return [f"no single Certificate writes the Secret {cert_from[0]} the hook's certificate comes from"]
    cert = serving[0]
    if cert["metadata"].get("namespace") != ns:
        problems.append(f"Certificate {cert['metadata']['name']} is in {cert['metadata'].get('namespace')}, "
                        f"the hook in {ns}")
    missing = [h for h in hosts if h not in (cert["spec"].get("dnsNames") or [])]
    if missing:
        problems.append(f"Certificate {cert['metadata']['name']} does not name the hook URLs' hosts {missing}")
    ref = cert["spec"].get("issuerRef") or {}
    issuer = next((i for i in certs if i.get("kind") == ref.get("kind", "Issuer")
                   and i["metadata"]["name"] == ref.get("name") and i["metadata"].get("namespace") == ns), None)
    ca_secret = (((issuer or {}).get("spec") or {}).get("ca") or {}).get("secretName")
    if not ca_secret:
        problems.append(f"Certificate {cert['metadata']['name']} is not issued by a CA Issuer of {ns} "
                        "(cert-manager writes ca.crt, which the caBundle reads, only for a CA Issuer)")
    elif not any(c.get("kind") == "Certificate" and (c.get("spec") or {}).get("secretName") == ca_secret
                 and (c.get("spec") or {}).get("isCA") for c in certs):
        problems.append(f"the CA Issuer's Secret {ca_secret} is written by no Certificate with isCA")
    return problems


def check_cert_manager(k8s: Cluster, rep: Report, kustomize: Path, install: list[dict]) -> None:
    version = load_versions().get("CERT_MANAGER_VERSION", "")
    try:
        crds = module_files("github.com/cert-manager/cert-manager", version, "deploy/crds", CERT_MANAGER_CRDS)
    except HarnessError as e:
        rep.fail(f"overlays: cert-manager {version} CRDs", str(e))
        return
    for path in crds:
        for doc in load_yaml_docs(path):
            what = f"overlays: cert-manager {version} CRD {doc['metadata']['name']}"
            try:
                k8s.apply(doc)
                k8s.wait_for_crd_established(doc["metadata"]["name"])
                k8s.wait_for_kind(f"{doc['spec']['group']}/v1", doc["spec"]["names"]["kind"])
                rep.ok(f"{what} applied and Established")
            except (ApiError, HarnessError) as e:
                rep.fail(what, server_message(e))
    try:
        docs = render(kustomize, CERT_MANAGER_DIR)
    except HarnessError as e:
        rep.fail(f"overlays: {CERT_MANAGER_DIR}/", str(e))
        return
    for doc in docs:
        what = f"overlays: {CERT_MANAGER_DIR}/: {obj_name(doc)}"
        try:
            k8s.create(doc, dry_run=True)
            rep.warnings(what, k8s.last_warnings)
            rep.ok(f"{what} accepted (dry-run create, cert-manager {version}'s schema)")
        except (ApiError, HarnessError) as e:
            rep.fail(what, server_message(e))
    problems = cert_manager_problems(docs, install)
    if problems:
        rep.fail(f"overlays: {CERT_MANAGER_DIR}/: wiring", "; ".join(problems))
    else:
        rep.ok(f"overlays: {CERT_MANAGER_DIR}/ writes the Secret the hook serves from and the CompositeControllers "
               "trust, for the hook URLs' host, signed by its own CA")


# ------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--crd-dir", type=Path, default=REPO / "metacontroller",
                    help="where to look for CustomResourceDefinition YAML (recursively)")
    ap.add_argument("--examples-dir", type=Path, default=REPO / "metacontroller" / "examples")
    ap.add_argument("--invalid-dir", type=Path, default=Path(__file__).resolve().parent / "invalid")
    ap.add_argument("--fixtures-dir", type=Path, default=REPO / "test-fixtures")
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help=f"comma-separated subset of {','.join(SECTIONS)} (crds always run)")
    ap.add_argument("-k", dest="name_filter", help="only fixtures whose <hook>/<scenario> contains this")
    args = ap.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    unknown = only - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections: {', '.join(sorted(unknown))}")

    rep = Report()
    t0 = time.monotonic()
    try:
        with Cluster() as k8s:
            print(f"conformance: API server {k8s.server} is ready "
                  f"({time.monotonic() - t0:.1f}s); checking", flush=True)
            check_crds(k8s, args.crd_dir, rep)  # the others need the CRDs
            if "examples" in only:
                check_examples(k8s, args.examples_dir, rep)
            if "invalid" in only:
                check_invalid(k8s, args.invalid_dir, rep)
            if "fixtures" in only:
                check_fixtures(k8s, args.fixtures_dir, rep, args.name_filter)
            if "overlays" in only:
                check_overlays(k8s, rep)
            if "grow" in only:
                check_grow(k8s, rep)
            if "schedules" in only:
                check_schedules(k8s, rep)
    except KeyboardInterrupt:
        rep.fail("conformance", "interrupted")
    except SystemExit as e:  # SIGTERM/SIGHUP via the harness, or a missing PyYAML
        rep.fail("conformance", f"stopped ({e.code})")
    except HarnessError as e:
        rep.fail("control plane", str(e))
    except Exception:  # noqa: BLE001 - a bug here must still end in a summary
        rep.fail("conformance", "unexpected error:\n" + traceback.format_exc())
    print(f"conformance: finished in {time.monotonic() - t0:.1f}s", flush=True)
    return rep.summary()


if __name__ == "__main__":
    sys.exit(main())

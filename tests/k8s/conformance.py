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
   - the response's status is accepted by the parent's status subresource and reads
     back exactly as sent (observedGeneration aside): nothing pruned, defaulted or
     normalised, because Metacontroller compares the stored status with the hook's
     answer on every sync.

Every check prints PASS or FAIL (naming the fixture, the object and the server's
message); the last line is `conformance: N passed, M failed`. Exit status 0 only
when nothing failed.

    python3 tests/k8s/conformance.py [--only crds,examples,invalid,fixtures] [-k TEXT]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True  # no __pycache__ in the work tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (  # noqa: E402
    REPO, ApiError, Cluster, HarnessError, iter_yaml_files, load_yaml_docs, strip_server_fields,
)

SECTIONS = ("crds", "examples", "invalid", "fixtures")
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
        if "status" in response:
            check_parent_status(k8s, fixture, parent, response["status"], rep)


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

#!/usr/bin/env python3
"""The shipped rules, checked by promtool, and the documents that go with them.

1. `promtool check rules` on the PrometheusRule's groups;
2. `promtool test rules` on rules.test.yaml (every alert fires in at least one
   case there; `description` annotations are dropped for this run, see the
   header of rules.test.yaml);
3. every alert has `severity`, `summary`, `description` and a `runbook_url` to a
   section of docs/runbook.md that exists and has "What it means", "How to
   confirm" and "What to do"; docs/alerts.md lists every alert; every runbook
   section is an alert (no stale ones); docs/metrics.md lists every recording
   rule;
4. the Grafana dashboard is valid JSON, and every panel's queries parse
   (`promtool check rules` on a throwaway group of them).

promtool is Debian's (the `prometheus` package, the same Prometheus that live.py
runs; CI installs it), found on PATH; without one, or with PROMTOOL_BUILD=1, the
pinned upstream build from the Go module proxy (tests/observability/build-promtool.sh,
about 22 minutes cold on 2 cores, cached outside the repo); $PROMTOOL overrides both. Prints one line
per check and `rules: N passed, M failed`; exits non-zero on any failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
from prom import alerts_of, shipped_rules  # noqa: E402

RULE_DIR = REPO / "metacontroller" / "components" / "prometheus-rules"
RUNBOOK = REPO / "docs" / "runbook.md"
ALERTS_DOC = REPO / "docs" / "alerts.md"
DASHBOARD = REPO / "metacontroller" / "components" / "grafana-dashboard" / "mysql-hook.json"
RUNBOOK_BASE = "https://github.com/mysql-hook/mysql-hook/blob/main/docs/runbook.md#"

results: list[tuple[bool, str]] = []


def check(ok: bool, what: str, detail: str = "") -> None:
    results.append((ok, what))
    print(f"{'PASS' if ok else 'FAIL'} {what}" + (f"\n{detail}" if detail and not ok else ""), flush=True)


def promtool() -> str:
    if os.environ.get("PROMTOOL"):
        return os.environ["PROMTOOL"]
    if not os.environ.get("PROMTOOL_BUILD") and shutil.which("promtool"):
        path = shutil.which("promtool")
        version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.splitlines()
        print(f"promtool: {path} ({version[0] if version else 'version unknown'})", flush=True)
        return path
    t0 = time.time()
    out = subprocess.run([str(HERE / "build-promtool.sh")], capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        raise SystemExit("rules: building promtool failed (see above)")
    path = out.stdout.strip().splitlines()[-1]
    if time.time() - t0 > 5:
        print(f"built promtool in {time.time() - t0:.0f}s: {path}", flush=True)
    return path


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    a = heading.strip().lower()
    a = re.sub(r"[^\w\- ]", "", a)
    return a.replace(" ", "-")


def runbook_sections() -> dict[str, str]:
    """`## heading` -> its text, for the level-2 sections of the runbook."""
    text = RUNBOOK.read_text()
    parts = re.split(r"^## +(.+)$", text, flags=re.M)
    return {anchor(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}


def dashboard_exprs() -> list[tuple[str, str]]:
    """(panel title, expr) of every query of the dashboard (panels and annotations)."""
    board = json.loads(DASHBOARD.read_text())
    out = []
    for panel in board["panels"]:
        for t in panel.get("targets", []):
            if t.get("expr"):
                out.append((panel.get("title", "?"), t["expr"]))
    for a in board.get("annotations", {}).get("list", []):
        if a.get("expr"):
            out.append((f"annotation {a.get('name')}", a["expr"]))
    return out


def substitute_variables(expr: str) -> str:
    """Grafana's template variables replaced the way Grafana would for one value."""
    return (expr.replace("$__rate_interval", "1m").replace("$__interval", "1m").replace("$__range", "1h")
            .replace("${namespace}", "shop").replace("$namespace", "shop")
            .replace("${name}", "db").replace("$name", "db"))


def main() -> int:
    tool = promtool()
    rules = shipped_rules()
    work = Path(tempfile.mkdtemp(prefix="mysql-hook-rules-"))
    try:
        (work / "shipped.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
        r = subprocess.run([tool, "check", "rules", str(work / "shipped.yaml")], capture_output=True, text=True)
        check(r.returncode == 0, "promtool check rules (the PrometheusRule's groups)", r.stdout + r.stderr)

        stripped = json.loads(json.dumps(rules))
        for a in alerts_of(stripped):
            a.get("annotations", {}).pop("description", None)
        (work / "rules.yaml").write_text(yaml.safe_dump(stripped, sort_keys=False))
        shutil.copy(RULE_DIR / "rules.test.yaml", work / "rules.test.yaml")
        t0 = time.time()
        r = subprocess.run([tool, "test", "rules", str(work / "rules.test.yaml")], capture_output=True, text=True,
                           cwd=work)
        check(r.returncode == 0, f"promtool test rules (rules.test.yaml, {time.time() - t0:.1f}s)", r.stdout + r.stderr)

        # Every alert is tested firing at least once.
        tests = yaml.safe_load((RULE_DIR / "rules.test.yaml").read_text())
        fired = {t["alertname"] for group in tests["tests"] for t in group.get("alert_rule_test", [])
                 if t.get("exp_alerts")}
        names = [a["alert"] for a in alerts_of(rules)]
        untested = [n for n in names if n not in fired]
        check(not untested, f"every alert ({len(names)}) has a unit test that makes it fire", f"untested: {untested}")

        sections = runbook_sections()
        alerts_doc = ALERTS_DOC.read_text()
        for a in alerts_of(rules):
            name, ann, labels = a["alert"], a.get("annotations", {}), a.get("labels", {})
            problems = []
            if labels.get("severity") not in ("critical", "warning"):
                problems.append(f"severity {labels.get('severity')!r}")
            for key in ("summary", "description", "runbook_url"):
                if not ann.get(key):
                    problems.append(f"no {key}")
            url = ann.get("runbook_url", "")
            section = sections.get(url.removeprefix(RUNBOOK_BASE)) if url.startswith(RUNBOOK_BASE) else None
            if section is None:
                problems.append(f"runbook_url {url!r} names no section of docs/runbook.md")
            else:
                for part in ("What it means", "How to confirm", "What to do"):
                    if part not in section:
                        problems.append(f"its runbook section lacks {part!r}")
            if f"`{name}`" not in alerts_doc:
                problems.append("not listed in docs/alerts.md")
            check(not problems, f"alert {name}: severity, annotations, runbook, docs", "; ".join(problems))
        metrics_doc = (REPO / "docs" / "metrics.md").read_text()
        records = [r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r]
        undocumented = [r for r in records if f"`{r}`" not in metrics_doc]
        check(not undocumented, f"every recording rule ({len(records)}) is listed in docs/metrics.md",
              f"missing: {undocumented}")
        extra = sorted(set(sections) - {anchor(n) for n in names})
        check(not extra, "every runbook section is a shipped alert", f"stale sections: {extra}")

        if DASHBOARD.exists():
            exprs = dashboard_exprs()
            group = {"groups": [{"name": "dashboard", "rules": [
                {"record": f"dashboard:query{i}", "expr": substitute_variables(e)} for i, (_, e) in enumerate(exprs)]}]}
            (work / "dashboard.yaml").write_text(yaml.safe_dump(group, sort_keys=False))
            r = subprocess.run([tool, "check", "rules", str(work / "dashboard.yaml")], capture_output=True, text=True)
            check(r.returncode == 0 and bool(exprs), f"every dashboard query ({len(exprs)}) parses",
                  r.stdout + r.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    failed = sum(1 for ok, _ in results if not ok)
    print(f"rules: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""A real client beside the real-server loop's writer (issue 35.3): sysbench.

With ``real_servers.py --sysbench`` the role-change scenarios (2 failover, 5
switchover, 6 rollout) run two sysbench pods in the cluster's namespace for their
whole length: ``oltp_read_write`` through the ``-primary`` Service and
``oltp_read_only`` through ``-replicas`` (Debian bookworm's sysbench 1.0.20 and its
MariaDB client library, ``images.sysbench_image``), two threads each at a fixed rate
(50 and 100 transactions a second), reporting every second, errors ignored (a failed
statement is counted, the connection made again; a sysbench that exits anyway is
started again by its pod, and the seconds it missed count as seconds without a
transaction). The Services' cluster IPs work through kube-proxy, which the loop
starts with ``--sysbench``.
What they saw is judged by seconds, from the report lines and the times the
container runtime logged them:

- **before**: transactions per second up to the first second that fell below a
  tenth of that baseline (the median of the seconds before it);
- **during**: from that first dip to the last one;
- **after**: from the last dip to the end;
- **longest gap**: the most consecutive seconds without one transaction;
- errors and reconnects, summed over the run.

The loop's own writer stays the judge of lost rows; these figures say what an
application with a connection pool and a mixed load lives through. Not in the
default run (CI's cold budget): the image is one more ``mmdebstrap`` and the load
slows a 2-core machine's role changes.
"""

from __future__ import annotations

import re
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

USER, PASSWORD, SCHEMA = "bench", "bench-pw", "sbtest"
# The scenarios a bench runs beside: a failover, a switchover, a rollout.
SCENARIOS = ("2", "5", "6")
# Transactions a second at most (sysbench --rate): read-write, read-only.
RATE_RW, RATE_RO = 50, 100
# Seconds the load runs on after the scenario ended, before the figures are read.
TAIL = 8
# "[ 12s ] thds: 2 tps: 80.99 qps: 1622.83 (r/w/o: ...) lat (ms,95%): 30.26 err/s: 0.00 reconn/s: 0.00"
REPORT = re.compile(r"\[ *(\d+)s \] thds: \d+ tps: ([\d.]+) .* err/s: ([\d.]+) reconn/s: ([\d.]+)")


@dataclass
class Second:
    at: float        # Unix time the runtime logged the report
    tps: float
    errors: float
    reconnects: float


def parse(lines: list[tuple[float, str]]) -> list[Second]:
    """One Second per wall-clock second from the first report to the last: a second
    without a report (sysbench exited on an error it does not ignore, and the pod's
    loop starts it again) counts as one without a transaction."""
    reports = []
    for at, text in lines:
        m = REPORT.search(text)
        if m:
            reports.append(Second(at, float(m.group(2)), float(m.group(3)), float(m.group(4))))
    if not reports:
        return []
    by_second = {int(r.at): r for r in reports}
    first, last = int(reports[0].at), int(reports[-1].at)
    return [by_second.get(t, Second(float(t), 0.0, 0.0, 0.0)) for t in range(first, last + 1)]


def exits(lines: list[tuple[float, str]]) -> list[str]:
    """What made sysbench exit (its FATAL lines), in order."""
    return [text.strip() for _, text in lines if text.startswith("FATAL:")]


def judge(series: list[Second]) -> dict[str, Any]:
    """The figures of the module docs; `dips` empty when the load never fell."""
    if len(series) < 3:
        return {"seconds": len(series)}
    tps = [s.tps for s in series]
    first = next((i for i in range(3, len(tps)) if tps[i] < 0.1 * statistics.median(tps[:i])), None)
    baseline = statistics.median(tps[: first if first is not None else len(tps)])
    dips = [i for i in range(len(tps)) if first is not None and i >= first and tps[i] < 0.1 * baseline]
    gap = run = 0
    for t in tps:
        run = run + 1 if t == 0 else 0
        gap = max(gap, run)
    out: dict[str, Any] = {
        "seconds": len(series), "before": baseline, "longest_gap": gap,
        "errors": round(sum(s.errors for s in series)), "reconnects": round(sum(s.reconnects for s in series)),
    }
    if dips:
        lo, hi = dips[0], dips[-1]
        out["during"] = statistics.mean(tps[lo:hi + 1])
        out["during_seconds"] = hi - lo + 1
        after = tps[hi + 1:]
        out["after"] = statistics.mean(after) if after else 0.0
    return out


def describe(mode: str, via: str, f: dict[str, Any], fatal: list[str]) -> str:
    died = f"; sysbench exited {len(fatal)} times and was started again (first: {fatal[0]})" if fatal else ""
    if "before" not in f:
        return f"sysbench {mode} via {via}: {f.get('seconds', 0)} report seconds, too few to judge{died}"
    text = f"sysbench {mode} via {via}: {f['before']:.0f} tps before"
    if "during" in f:
        text += (f", {f['during']:.0f} during the {f['during_seconds']} s from the first dip to the last, "
                 f"{f['after']:.0f} after")
    else:
        text += ", never below a tenth of it"
    return text + f"; longest gap {f['longest_gap']} s; {f['errors']} errors, {f['reconnects']} reconnects " \
                  f"in {f['seconds']} s{died}"


def pod(name: str, image: str, host: str, test: str, flavor: str, prepare: bool, rate: int) -> dict:
    """A sysbench pod (its password in its environment: a test account). Started
    again whenever it exits (a lost connection it does not survive); `rate`
    transactions a second at most, so the load leaves a 2-core machine room to
    change roles."""
    opts = (f"--db-driver=mysql --mysql-host={host} --mysql-user={USER} --mysql-password=\"$BENCH_PASSWORD\" "
            f"--mysql-db={SCHEMA} --tables=2 --table-size=5000 --threads=2")
    if flavor == "mysql":
        opts += " --mysql-ssl=on"   # caching_sha2_password over a plain channel needs the server's key
    script = ""
    if prepare:
        script += f"sysbench oltp_read_write {opts} cleanup; sysbench oltp_read_write {opts} prepare || exit 1; "
    script += (f"while :; do sysbench {test} {opts} --time=0 --rate={rate} --report-interval=1 "
               "--mysql-ignore-errors=all run; sleep 0.2; done")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "sysbench"}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "sysbench", "image": image, "imagePullPolicy": "Never",
                                     "command": ["sh", "-c", script],
                                     "env": [{"name": "BENCH_PASSWORD", "value": PASSWORD}]}]}}


class Bench:
    """Two sysbench pods beside one cluster, from `start` to `stop`."""

    def __init__(self, db: Any, image: str, flavor: str, say: Callable[[str], None]):
        self.db, self.image, self.flavor, self.say = db, image, flavor, say
        self.names = (f"{db.name}-bench-rw", f"{db.name}-bench-ro")
        self.uids: dict[str, str] = {}

    def _delete(self) -> None:
        for n in self.names:
            try:
                self.db.k8s.delete("v1", "Pod", n, self.db.namespace)
            except Exception:  # noqa: BLE001 - not there
                pass
        self.db.wait("the sysbench pods gone", lambda: all(self.db.pod(n) is None for n in self.names), 60)

    def _lines(self, name: str) -> list[tuple[float, str]]:
        """This bench's pod's lines (an earlier scenario's pod of the same name is another)."""
        return self.db.node.pod_log_times(self.db.namespace, name, "sysbench", self.uids.get(name, "*"))

    def start(self) -> None:
        self._delete()
        ep = self.db.wait("a ready -primary endpoint", self.db.primary_endpoint, 300, interval=0.5)
        with self.db.connect(ep[1], timeout=30) as c:
            c.query(f"CREATE DATABASE IF NOT EXISTS {SCHEMA}")
            c.query(f"CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'")
            c.query(f"GRANT ALL ON {SCHEMA}.* TO '{USER}'@'%'")
        self.t0 = time.time()
        rw, ro = self.names
        made = self.db.k8s.create(pod(rw, self.image, f"{self.db.name}-primary", "oltp_read_write", self.flavor,
                                      True, RATE_RW), self.db.namespace)
        self.uids[rw] = made["metadata"]["uid"]
        # The read-only load reads the tables the first pod made: once it runs.
        self.db.wait("sysbench oltp_read_write running", lambda: any(
            REPORT.search(t) for _, t in self._lines(rw)), 180, interval=1)
        made = self.db.k8s.create(pod(ro, self.image, f"{self.db.name}-replicas", "oltp_read_only", self.flavor,
                                      False, RATE_RO), self.db.namespace)
        self.uids[ro] = made["metadata"]["uid"]
        self.db.wait("sysbench oltp_read_only running", lambda: any(
            REPORT.search(t) for _, t in self._lines(ro)), 180, interval=1)
        time.sleep(5)   # a baseline before the scenario's fault
        self.say(f"sysbench running beside {self.db.namespace}/{self.db.name}: {rw} (oltp_read_write via "
                 f"{self.db.name}-primary), {ro} (oltp_read_only via {self.db.name}-replicas)")

    def stop(self) -> list[str]:
        """Stops both pods, after a few seconds more (the figures after the role
        change); one line per pod, as `describe` says it."""
        time.sleep(TAIL)
        out = []
        for name, mode, via in ((self.names[0], "oltp_read_write", f"{self.db.name}-primary"),
                                (self.names[1], "oltp_read_only", f"{self.db.name}-replicas")):
            lines = self._lines(name)
            out.append(describe(mode, via, judge(parse(lines)), exits(lines)))
        self._delete()
        return out

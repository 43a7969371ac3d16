#!/usr/bin/env python3
"""The shipped rules and dashboard on a real Prometheus, against real servers.

On loopback: two hook processes (the built binary, bearer token required, as
two replicas of the Deployment), three MariaDB servers set up and bootstrapped
by hooks/scripts exactly as in tests/scripts, the exporter account created by
the primary's agent sidecar, one Debian mysqld_exporter per server logged in through
its socket, and Debian's Prometheus scraping all five every second and
evaluating the rules of metacontroller/components/prometheus-rules.

The hooks are fed the way Metacontroller feeds them: a thread posts the
cluster's current state every second, to one replica or the other. The states
are the golden fixture requests matching what the servers do (their
timestamps moved to the present, so ages mean what the fixtures mean): the
running cluster with a backup schedule, the primary down with a failover Job
running, the failover recorded with db-1 as primary. Two more clusters in other
namespaces are fed a rollout in progress and a failed backup.

Then, with the servers as the judge:
  1. healthy: Running, one writable server, no alert for the cluster;
  2. SIGKILL the primary: MySQLNoWritablePrimary fires (its shipped 30 s);
  3. failover.sh promotes db-1 and only hook replica A hears of it (B keeps
     its stale "Failed" picture): the alert resolves, because the rules follow
     the replica that synced the cluster last;
  4. the old primary restarts with a transaction the new primary lacks; join.sh
     says rebuild-needed: MySQLReplicaNeedsRebuild fires; rebuilding it (empty
     data directory, init.sh, join.sh) resolves it;
  5. a row on db-2 conflicts with one the primary then writes: its SQL thread
     stops and MySQLReplicationStopped fires; fixing the row resolves it;
  6. every rule evaluated without error, every rendered annotation complete,
     and every dashboard query returned data during the run.

`for` of MySQLReplicaNeedsRebuild (5m) and MySQLReplicationStopped (2m) are
shortened to 15s here (promtool's unit tests check the shipped durations);
every other rule runs as shipped. Prints PASS/FAIL lines, the timings and
`live: N passed, M failed`.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "scripts"))
import prom  # noqa: E402
from dbcluster import World  # noqa: E402
from test_scripts import Cluster  # noqa: E402

FIXTURES = REPO / "test-fixtures"
FIXTURE_NOW = datetime.datetime(2026, 11, 29, 12, 0, 0, tzinfo=datetime.timezone.utc)
DASHBOARD = REPO / "metacontroller" / "components" / "grafana-dashboard" / "mysql-hook.json"
TOKEN = "live-test-token"
SHORTENED = {"MySQLReplicaNeedsRebuild": "15s", "MySQLReplicationStopped": "15s"}

results: list[tuple[bool, str]] = []
timings: list[str] = []
T0 = time.time()


def check(ok: bool, what: str, detail: str = "") -> bool:
    results.append((ok, what))
    print(f"{'PASS' if ok else 'FAIL'} {what}" + (f"\n{detail}" if detail and not ok else ""), flush=True)
    return ok


def log(msg: str) -> None:
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


# ------------------------------------------------------------------ the hook

def hook_binary() -> str:
    if os.environ.get("MYSQL_HOOK_BIN"):
        return os.environ["MYSQL_HOOK_BIN"]
    for target in (os.environ.get("CARGO_TARGET_DIR"), str(REPO / "target")):
        if target and Path(target, "debug", "mysql-hook").exists():
            return str(Path(target, "debug", "mysql-hook"))
    raise SystemExit("live: no hook binary: set MYSQL_HOOK_BIN (cargo test sets it)")


class Hook:
    """One hook replica on 127.0.0.1:<free port>."""

    def __init__(self, label: str, workdir: Path):
        self.label = label
        self.port = prom.free_port()
        self.address = f"127.0.0.1:{self.port}"
        token = workdir / "token"
        token.write_text(TOKEN)
        self.log = workdir / f"hook-{label}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [hook_binary(), "serve", "--listen", self.address, "--auth-token-file", str(token)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=prom._die_with_parent)
        prom.wait_http(f"http://{self.address}/readyz", 30, self.proc, self.log)

    def post(self, path: str, body: bytes) -> int:
        req = urllib.request.Request(f"http://{self.address}{path}", data=body, method="POST", headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?Z")


SCHEDULE = re.compile(r'"schedule": "(\d+) (\d+) \* \* \*"')


def request_now(fixture: str, namespace: str | None = None) -> bytes:
    """A fixture request moved in time to the present: every timestamp (also inside
    termination messages) and daily backup schedules move by (now - the
    fixtures' instant) in whole minutes; optionally another namespace."""
    text = (FIXTURES / fixture / "request.json").read_text()
    now = datetime.datetime.now(datetime.timezone.utc).replace(second=0, microsecond=0)
    shift = now - FIXTURE_NOW
    minutes = int(shift.total_seconds()) // 60

    def daily(m: re.Match) -> str:
        at = (int(m.group(2)) * 60 + int(m.group(1)) + minutes) % 1440
        return f'"schedule": "{at % 60} {at // 60} * * *"'

    text = SCHEDULE.sub(daily, text)

    def moved(m: re.Match) -> str:
        t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
        return (t + shift).strftime("%Y-%m-%dT%H:%M:%S") + (m.group(2) or "") + "Z"

    text = TIMESTAMP.sub(moved, text)
    if namespace:
        text = text.replace('"shop/', f'"{namespace}/').replace('"namespace": "shop"', f'"namespace": "{namespace}"') \
            .replace(".shop.svc", f".{namespace}.svc")
    return text.encode()


class Feeder(threading.Thread):
    """Metacontroller's part: every second, each cluster's current state goes to
    one of its hooks (round robin)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.lock = threading.Lock()
        self.states: dict[str, tuple[str, str | None, list[Hook]]] = {}
        self.stop_flag = threading.Event()
        self.errors: list[str] = []
        self.turn = 0

    def set(self, key: str, fixture: str, hooks: list[Hook], namespace: str | None = None) -> None:
        with self.lock:
            self.states[key] = (fixture, namespace, hooks)
        self.tick()   # at once, as a watch event would

    def tick(self) -> None:
        with self.lock:
            states = list(self.states.items())
            self.turn += 1
        for _key, (fixture, namespace, hooks) in states:
            hook = hooks[self.turn % len(hooks)]
            code = hook.post("/sync", request_now(fixture, namespace))
            if code != 200:
                self.errors.append(f"{fixture} -> hook {hook.label}: {code}")

    def run(self) -> None:
        while not self.stop_flag.wait(1.0):
            self.tick()


# ------------------------------------------------------------------ checks

def value(p: prom.Prometheus, expr: str) -> float | None:
    r = p.query(expr)
    return float(r[0]["value"][1]) if r else None


def timed_alert(p: prom.Prometheus, name: str, since: float, timeout: float, /, **labels) -> dict | None:
    try:
        a = p.wait_for_alert(name, "firing", timeout, **labels)
    except AssertionError as e:
        check(False, f"{name} fires", str(e))
        return None
    took = time.time() - since
    timings.append(f"{name} firing {took:.1f}s after the fault")
    check(True, f"{name}{labels} fires ({took:.1f}s after the fault)")
    return a


def timed_resolve(p: prom.Prometheus, name: str, since: float, timeout: float, /, **labels) -> None:
    try:
        p.wait_for_no_alert(name, timeout, **labels)
    except AssertionError as e:
        check(False, f"{name} resolves", str(e))
        return
    took = time.time() - since
    timings.append(f"{name} resolved {took:.1f}s after the repair")
    check(True, f"{name}{labels} resolves ({took:.1f}s after the repair)")


def dashboard_queries() -> list[tuple[str, str, bool]]:
    board = json.loads(DASHBOARD.read_text())
    out = []
    for panel in board["panels"]:
        for t in panel.get("targets", []):
            if t.get("expr"):
                out.append((panel.get("title", "?"), t["expr"], bool(t.get("instant"))))
    for a in board.get("annotations", {}).get("list", []):
        if a.get("expr"):
            out.append((f"annotation {a['name']}", a["expr"], False))
    return out


def substituted(expr: str) -> str:
    """Grafana's variables: every namespace and cluster, a 30 s rate window
    (Prometheus scrapes every second here)."""
    return (expr.replace("$__rate_interval", "30s").replace('"$namespace"', '".+"').replace('"$name"', '".+"'))


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="mysql-hook-live-"))
    world = None
    cluster = None
    hooks: list[Hook] = []
    exporters: list[prom.MysqldExporter] = []
    feeder = Feeder()
    p = None
    try:
        log("starting two hook replicas, three MariaDB servers, three exporters and Prometheus")
        hooks = [Hook("a", workdir), Hook("b", workdir)]
        a, b = hooks
        world = World()
        cluster = Cluster(world, "live")
        cluster.bootstrap()
        db0, db1, db2 = cluster["db-0"], cluster["db-1"], cluster["db-2"]
        primary_file = world.root / "live" / "primary"
        primary_file.write_text("db-0\n")
        exporter_password = "exporter-live-pw"
        r = cluster.run("sidecar", POD_NAME="db-0", PRIMARY_FILE=primary_file, AGENT_ITERATIONS=1, AGENT_INTERVAL=0,
                        EXPORTER_PASSWORD=exporter_password, EXPORTER_SOCKET=db0.sock)
        check('"changed":true' in r.stdout, "the primary's agent created the exporter account", str(r))
        cluster.wait_synced(db0)
        exporters = [prom.MysqldExporter(s.sock, "exporter", exporter_password).start() for s in (db0, db1, db2)]
        # The labels the `monitoring` component's PodMonitors give: the hook keeps
        # its own namespace/name (honor_labels); each exporter gets its pod's.
        targets = [
            prom.Target("mysql-hook", [h.address for h in hooks], honor_labels=True, bearer_token=TOKEN),
            prom.Target("mysql", [(e.address, {"namespace": "shop", "name": "db", "pod": s.name})
                                  for s, e in zip((db0, db1, db2), exporters)]),
        ]
        rules = prom.with_for(prom.shipped_rules(), SHORTENED)
        p = prom.Prometheus(targets, rules=rules, keep_dir=os.environ.get("MYSQL_HOOK_LIVE_LOGS")).start()
        feeder.set("shop/db", "sync/backup-last-succeeded", hooks)
        feeder.set("rollout/db", "sync/upgrade-3-release-db-1", hooks, namespace="rollout")
        feeder.set("backups/db", "sync/backup-last-failed", hooks, namespace="backups")
        feeder.start()
        p.wait_for_targets_up(60)
        check(True, f"Prometheus ({p.binary}) scrapes 2 hooks and 3 exporters, all up")
        start = time.time()

        # 1. healthy
        p.wait_for(lambda: value(p, 'cluster:mysql_hook_cluster_phase:latest{namespace="shop",name="db",phase="Running"}') == 1
                   and value(p, 'cluster:mysql_server_writable:count{namespace="shop",name="db"}') == 1, 60,
                   "the healthy cluster in the recorded series")
        time.sleep(3)
        ours = [x["labels"]["alertname"] for x in p.alerts() if x["labels"].get("namespace") == "shop"]
        check(not ours, "healthy: Running, one writable server, no alert for shop/db", f"alerts: {ours}")

        # 2. the primary dies
        killed = time.time()
        db0.kill()
        feeder.set("shop/db", "sync/failover-running", hooks)
        log("SIGKILLed db-0; the hooks now see the primary down and a failover Job running")
        pending = p.wait_for(lambda: p.alert("MySQLNoWritablePrimary", namespace="shop", name="db"), 30,
                             "MySQLNoWritablePrimary pending")
        check(pending["state"] == "pending", f"MySQLNoWritablePrimary pending {time.time() - killed:.1f}s after the kill"
              " (its for: 30s)")
        fired = timed_alert(p, "MySQLNoWritablePrimary", killed, 90, namespace="shop", name="db")
        if fired:
            check(fired["annotations"]["runbook_url"].endswith("runbook.md#mysqlnowritableprimary"),
                  "its runbook_url names its runbook section")

        # 3. failover; only hook replica A hears of it
        r = cluster.run("failover.sh", PRIMARY="db-0")
        check(r.rc == 0 and r.json.get("primary") == "db-1", f"failover.sh promoted db-1 ({r.seconds:.1f}s)", str(r))
        repaired = time.time()
        # The sync that sees the Job succeed records the role change; the next
        # ones see it in the status.
        feeder.set("shop/db", "sync/failover-succeeded", [a])
        time.sleep(3)
        feeder.set("shop/db", "sync/failover-recorded", [a])
        timed_resolve(p, "MySQLNoWritablePrimary", repaired, 60, namespace="shop", name="db")
        changes = value(p, 'sum(increase(mysql_hook_cluster_role_changes_total{namespace="shop",name="db",'
                        'kind="Failover",reason="PrimaryNotReady"}[1m]))')
        check(changes is not None and round(changes) == 1, "one failover counted (role_changes_total, over both"
              " hook replicas)", f"increase: {changes}")
        stale = value(p, 'mysql_hook_cluster_phase{namespace="shop",name="db",phase="Failed",instance="%s"}' % b.address)
        fresh = value(p, 'cluster:mysql_hook_cluster_freshest:instance{namespace="shop",name="db",instance="%s"}'
                      % a.address)
        check(stale == 1 and fresh == 1, "hook replica B still exports phase Failed; the rules follow A, which synced"
              " shop/db last", f"B phase Failed={stale}, A freshest={fresh}")

        # 4. the old primary comes back diverged
        db0.start()
        db0.query("INSERT INTO hook.t VALUES (424242, 'errant', @@server_id, NOW(6))")   # root bypasses read_only
        primary_file.write_text("db-1\n")
        marker = world.root / "live" / "db-0-rebuild-needed"
        diverged = time.time()
        rj = cluster.run("join.sh", POD_NAME="db-0", PRIMARY_FILE=primary_file, REBUILD_MARKER=marker)
        check(rj.rc == 2 and rj.json.get("result") == "rebuild-needed", "join.sh: db-0 must be rebuilt", str(rj))
        timed_alert(p, "MySQLReplicaNeedsRebuild", diverged, 90, namespace="shop", pod="db-0")
        # The runbook's remedy: an empty data directory, init.sh, and the agent joins it.
        db0.stop()
        shutil.rmtree(db0.datadir)
        db0.initialize(cluster.pods)
        db0.start()
        rebuilt = time.time()
        rj = cluster.run("join.sh", POD_NAME="db-0", PRIMARY_FILE=primary_file, REBUILD_MARKER=marker)
        check(rj.rc == 0 and rj.json.get("result") == "joined", "rebuilt db-0 joined db-1", str(rj))
        timed_resolve(p, "MySQLReplicaNeedsRebuild", rebuilt, 60, namespace="shop", pod="db-0")

        # 5. replication breaks on db-2
        db2.query("SET SESSION sql_log_bin = 0; INSERT INTO hook.t VALUES (9001, 'drift', @@server_id, NOW(6))")
        broke = time.time()
        db1.query("INSERT INTO hook.t VALUES (9001, 'primary', @@server_id, NOW(6))", user="app")
        timed_alert(p, "MySQLReplicationStopped", broke, 90, namespace="shop", pod="db-2")
        err = db2.replica_status().get("Last_SQL_Errno")
        check(err == "1062", f"db-2's SQL thread stopped on a duplicate key (Last_SQL_Errno {err})")
        db2.query("SET SESSION sql_log_bin = 0; DELETE FROM hook.t WHERE n = 9001; START SLAVE SQL_THREAD")
        fixed = time.time()
        timed_resolve(p, "MySQLReplicationStopped", fixed, 60, namespace="shop", pod="db-2")
        cluster.wait_synced(db1)

        # 6. the side clusters, rule health, annotations, dashboard
        backup = p.alert("MySQLBackupFailing", namespace="backups", name="db")
        check(backup is not None and backup["state"] == "firing",
              "MySQLBackupFailing fires for the cluster fed a failed backup (backups/db)", str(backup))
        rollout = value(p, 'cluster:mysql_hook_cluster_rollout_in_progress:latest{namespace="rollout",name="db"}')
        check(rollout == 1, "the cluster fed a rollout shows it in progress (rollout/db)", f"{rollout}")
        bad = p.rule_health()
        check(not bad, "every rule evaluated without error", json.dumps(bad)[:2000])
        rendered = p.api("query_range", query='ALERTS{alertstate="firing"}', start=start, end=time.time(), step=1)
        fired_names = sorted({s["metric"]["alertname"] + "/" + s["metric"].get("namespace", "-") for s in rendered["result"]})
        log(f"alerts that fired during the run: {', '.join(fired_names)}")
        for x in p.alerts():
            text = " ".join(x["annotations"].values())
            check("<no value>" not in text and "error" not in text.lower(),
                  f"annotations of {x['labels']['alertname']} render completely", text)
        empty = []
        queries = dashboard_queries()
        for title, expr, _instant in queries:
            data = p.api("query_range", query=substituted(expr), start=start, end=time.time(), step=2)
            if not any(v[1] not in ("NaN", "+Inf", "-Inf") for s in data["result"] for v in s["values"]):
                empty.append(f"{title}: {expr}")
        check(not empty, f"every dashboard query ({len(queries)}) returned data during the run", "\n".join(empty))
        check(not feeder.errors, "every state the feeder posted was answered 200", "\n".join(feeder.errors[:10]))
    except Exception as e:  # noqa: BLE001 - reported as a failure, then torn down
        import traceback
        check(False, f"live run aborted: {e}", traceback.format_exc())
    finally:
        feeder.stop_flag.set()
        if p is not None:
            p.stop()
        for e in exporters:
            e.stop()
        if cluster is not None:
            cluster.close()
        if world is not None:
            world.close()
        for h in hooks:
            h.stop()
        keep = os.environ.get("MYSQL_HOOK_LIVE_LOGS")
        if keep:
            for f in workdir.glob("*.log"):
                shutil.copy(f, keep)
        shutil.rmtree(workdir, ignore_errors=True)
    for t in timings:
        print(f"timing: {t}")
    failed = sum(1 for ok, _ in results if not ok)
    print(f"live: {len(results) - failed} passed, {failed} failed in {time.time() - T0:.0f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""hooks/scripts against real MariaDB servers on 127.0.0.1.

Each test starts its own three mariadbd servers (db-0, db-1, db-2), each set
up by hooks/scripts/init.sh from an empty data dir with the hook's rendered
MariaDB my.cnf (see dbcluster.py), and runs the scripts the way the hook's
Jobs do: `bash script`, the env contract of hooks/scripts/README.md, one JSON
result line.  Servers are always torn down.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import hashlib
import os
import subprocess
import time

import pytest

from conftest import REPORT
from dbcluster import (APP_PASSWORD, ROOT_PASSWORD, SCRIPTS, SetupError, Server, World, Writer, pods_env,
                       run_script)


# --------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def world():
    try:
        w = World()
    except SetupError as e:
        pytest.fail(f"cannot set up MariaDB servers: {e}")
    REPORT.append("my.cnf: hook's rendered MariaDB my.cnf + added by the harness: "
                  + (", ".join(f"{k} = {v}" for k, v in w.added_options.items()) or "nothing"))
    yield w
    w.close()


class Cluster:
    def __init__(self, world: World, tag: str, n: int = 3):
        self.world = world
        self.tag = tag
        self.world_root_password = ROOT_PASSWORD
        self.probe_seconds: list[float] = []
        self.servers = [world.server(f"db-{i}", tag) for i in range(n)]
        self.pods = pods_env(self.servers)
        # init containers of different pods run concurrently
        with concurrent.futures.ThreadPoolExecutor(len(self.servers)) as ex:
            for r in ex.map(lambda s: s.initialize(self.pods), self.servers):
                assert r.json["created"] is True, r
        # sequentially, from this thread: a server gets SIGKILL when the thread
        # that started it ends (PR_SET_PDEATHSIG, dbcluster._die_with_parent)
        for s in self.servers:
            s.start()

    def __getitem__(self, name: str) -> Server:
        return next(s for s in self.servers if s.name == name)

    def run(self, script: str, **env) -> "ScriptResult":  # noqa: F821
        env.setdefault("PODS", self.pods)
        return run_script(script, self.world, {k: str(v) for k, v in env.items()})

    def bootstrap(self):
        r = self.run("bootstrap.sh", PRIMARY="")
        assert r.rc == 0 and r.json["result"] == "bootstrapped", r
        p = self["db-0"]
        p.query("CREATE DATABASE hook;"
                "CREATE TABLE hook.t (n INT PRIMARY KEY, writer VARCHAR(8), sid INT, ts DATETIME(6));"
                f"CREATE USER 'app'@'%' IDENTIFIED BY '{APP_PASSWORD}';"
                "GRANT SELECT, INSERT, UPDATE, DELETE ON hook.* TO 'app'@'%'")
        return r

    def running(self):
        return [s for s in self.servers if s.running]

    def writable(self):
        return [s.name for s in self.running() if not s.read_only()]

    def source_of(self, s: Server):
        st = s.replica_status()
        if not st.get("Master_Port"):
            return None
        port = int(st["Master_Port"])
        return next((x.name for x in self.servers if x.port == port), f"?{port}")

    def wait_synced(self, primary: Server, timeout: float = 60):
        """Every running replica has executed the primary's binlog position."""
        pos = primary.value("SELECT @@gtid_binlog_pos")
        for s in self.running():
            if s is primary or self.source_of(s) != primary.name:
                continue
            r = s.value(f"SELECT MASTER_GTID_WAIT('{pos}', {int(timeout)})")
            assert r == "0", f"{s.name} did not reach {pos}: {s.replica_status()}"

    def state(self):
        """What 'same end state' compares: who is writable, who follows whom,
        the GTID positions and the data."""
        out = {}
        for s in self.running():
            st = s.replica_status()
            out[s.name] = (
                s.read_only(),
                self.source_of(s),
                st.get("Slave_IO_Running"),
                st.get("Slave_SQL_Running"),
                s.value("SELECT @@gtid_binlog_pos"),
                s.value("SELECT COUNT(*) FROM hook.t") if s.value(
                    "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='hook' AND table_name='t'") == "1" else None,
            )
        return out

    def close(self):
        for s in self.servers:
            s.kill()


@pytest.fixture
def cluster(world, request):
    c = Cluster(world, request.node.name)
    try:
        yield c
    finally:
        c.close()


def rows(s: Server) -> set[int]:
    return {int(r[0]) for r in s.query("SELECT n FROM hook.t")}


def content_hash(s: Server, table: str) -> str:
    data = s.query(f"SELECT * FROM {table} ORDER BY 1")
    return hashlib.sha256(repr(data).encode()).hexdigest()


def kill_primary_mid_stream(c: Cluster, min_acked: int = 60) -> Writer:
    """Writer on db-0; SIGKILL db-0 while INSERTs are in flight."""
    w = Writer(c["db-0"], 1, "w", stop_on_error=True, max_seconds=60)
    w.start()
    deadline = time.time() + 30
    while len(w.acked) < min_acked and time.time() < deadline:
        time.sleep(0.05)
    assert len(w.acked) >= min_acked, "writer made no progress"
    c["db-0"].kill()
    w.join(60)
    return w


# ------------------------------------------------------------------------ tests

def test_init_is_deterministic_and_idempotent(cluster):
    s = cluster["db-2"]
    before = (s.confdir / "server-id.cnf").read_text()
    data_before = sorted(os.listdir(s.datadir))
    # rerun on the running, initialized server: config rewritten identically,
    # data dir untouched
    r = cluster.run("init.sh", **s.init_env(), SERVER_ID_BASE=1)
    assert r.rc == 0 and r.json == {"result": "initialized", "pod": "db-2", "serverId": 3,
                                    "file": str(s.confdir / "server-id.cnf"),
                                    "config": str(s.confdir / "00-mysql-hook.cnf"),
                                    "dataDir": str(s.datadir), "created": False}, r
    assert (s.confdir / "server-id.cnf").read_text() == before
    assert (s.confdir / "00-mysql-hook.cnf").read_text() == s.hook_cnf.read_text()
    assert sorted(os.listdir(s.datadir)) == data_before
    assert s.value("SELECT @@server_id") == "3"
    assert s.value("SELECT @@report_port") == str(s.port)
    r = cluster.run("init.sh", **s.init_env(), SERVER_ID_BASE=101)
    assert r.json["serverId"] == 103
    r = cluster.run("init.sh", **dict(s.init_env(), POD_NAME="nodigits"))
    assert r.rc != 0 and r.json["result"] == "error"
    r = cluster.run("init.sh", **dict(s.init_env(), MY_CNF=str(s.base / "missing.cnf")))
    assert r.rc != 0 and r.json["reason"] == "bad-env", r


def test_init_creates_root_without_gtid_and_survives_crashes(world, request):
    """init.sh on an empty dir: root@'%' logs in over TCP with the password,
    the GTID state is empty, other default accounts are gone; a crash before
    or after the staging directory was marked ready is repaired by a rerun."""
    s = world.server("db-0", request.node.name)
    stage = s.datadir / ".mysql-hook-init"
    try:
        (s.datadir / "lost+found").mkdir(parents=True)   # a fresh ext4 volume is not empty
        # leftovers of an attempt that crashed before `ready`: thrown away
        (stage / "data").mkdir(parents=True)
        (stage / "data" / "junk").write_text("half-initialized")
        r1 = s.initialize()
        assert r1.json["created"] is True and not stage.exists(), r1
        s.start()
        assert s.value("SELECT CURRENT_USER()") == "root@%"
        assert s.value("SELECT @@gtid_binlog_state") == ""
        assert s.value("SELECT @@gtid_binlog_pos") == "" and s.value("SELECT @@gtid_slave_pos") == ""
        assert s.query("SELECT user, host FROM mysql.user WHERE user IN ('root', '') ORDER BY host") == \
            [["root", "%"], ["root", "localhost"]]
        assert s.read_only(), "the hook's my.cnf (read_only=ON) is in effect"
        assert s.value("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = 'test'") == "0"
        accounts = s.query("SELECT user, host, authentication_string FROM mysql.user ORDER BY user, host")
        s.stop()

        # a crash while the entries of a `ready` staging dir were being moved
        moved = sorted(os.listdir(s.datadir))
        (stage / "data").mkdir(parents=True)
        for name in [n for n in moved if not n.startswith(".")][::2] + ["mysql"]:
            if (s.datadir / name).exists():
                os.rename(s.datadir / name, stage / "data" / name)
        (stage / "ready").write_text("")
        r2 = s.initialize()
        assert r2.json["created"] is True and not stage.exists(), r2
        assert sorted(os.listdir(s.datadir)) == moved
        s.start()
        assert s.value("SELECT CURRENT_USER()") == "root@%"
        assert s.query("SELECT user, host, authentication_string FROM mysql.user ORDER BY user, host") == accounts

        # rerun after success: nothing changes
        listing = sorted(os.listdir(s.datadir))
        r3 = s.initialize()
        assert r3.json["created"] is False and sorted(os.listdir(s.datadir)) == listing, r3
        assert s.value("SELECT @@gtid_binlog_state") == ""
        REPORT.append(f"init.sh: new data dir {r1.seconds:.1f}s, completing an interrupted one "
                      f"{r2.seconds:.1f}s, rerun {r3.seconds:.2f}s")
    finally:
        s.kill()


def probe(c: "Cluster", mode: str, pod: str, primary_file, rebuild_marker=None) -> tuple[int, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FLAVOR": "mariadb", "POD_NAME": pod,
           "PODS": c.pods, "PRIMARY_FILE": str(primary_file), "TMPDIR": str(c.world.root),
           "MYSQL_ROOT_PASSWORD": c.world_root_password}
    if rebuild_marker is not None:
        env["REBUILD_MARKER"] = str(rebuild_marker)
    t0 = time.time()
    r = subprocess.run(["bash", str(SCRIPTS / "probe.sh"), mode], env=env, capture_output=True, text=True,
                       timeout=30)
    c.probe_seconds.append(time.time() - t0)
    assert r.stderr == "", r.stderr
    return r.returncode, r.stdout.strip()


def test_probes(world, request):
    c = Cluster(world, request.node.name, n=2)
    try:
        pf = world.root / c.tag / "primary"
        pf.write_text("db-0\n")
        p, rep = c["db-0"], c["db-1"]
        # before bootstrap the recorded primary is read-only and still Ready
        # (the hook waits for Ready pods before it bootstraps)
        assert probe(c, "readiness", "db-0", pf)[0] == 0
        assert probe(c, "liveness", "db-0", pf)[0] == 0
        c.bootstrap()
        assert probe(c, "readiness", "db-0", pf) == (0, "ready: read_only=0 primary=db-0")
        assert probe(c, "readiness", "db-1", pf)[0] == 0, "a read-only replica is Ready"
        assert probe(c, "liveness", "db-1", pf)[0] == 0
        # the recorded primary restarts: it comes back read-only -> NotReady, still alive
        p.kill()
        assert probe(c, "liveness", "db-0", pf)[0] == 1
        assert probe(c, "readiness", "db-0", pf)[0] == 1
        p.start()
        assert p.read_only()
        rc, out = probe(c, "readiness", "db-0", pf)
        assert rc == 1 and "read-only" in out, out
        assert probe(c, "liveness", "db-0", pf)[0] == 0
        assert probe(c, "readiness", "db-1", pf)[0] == 0
        # made writable again (what a failover to the same pod does) -> Ready
        p.query("SET GLOBAL read_only=OFF")
        assert probe(c, "readiness", "db-0", pf)[0] == 0
        # the file names another pod: a read-only db-0 is an ordinary replica
        p.query("SET GLOBAL read_only=ON")
        pf.write_text("db-1\n")
        assert probe(c, "readiness", "db-0", pf)[0] == 0
        # a wrong password: alive, not ready
        c.world_root_password = "wrong"
        assert probe(c, "liveness", "db-0", pf)[0] == 0
        assert probe(c, "readiness", "db-0", pf)[0] == 1
        # no option file left behind in TMPDIR
        assert not list(world.root.glob("probe.*"))
        REPORT.append(f"probe.sh: {len(c.probe_seconds)} runs, max {max(c.probe_seconds) * 1000:.0f} ms, "
                      f"mean {sum(c.probe_seconds) / len(c.probe_seconds) * 1000:.0f} ms")
    finally:
        c.close()


def test_bootstrap(cluster):
    r = cluster.bootstrap()
    assert r.json["primary"] == "db-0"
    assert r.json["semiSync"] is True
    assert sorted(r.json["replicas"]) == ["db-1", "db-2"]
    assert r.json["rebuildNeeded"] == [] and r.json["unreachable"] == []
    p = cluster["db-0"]
    assert cluster.writable() == ["db-0"]
    for name in ("db-1", "db-2"):
        assert cluster[name].replicating_from(p)
        assert cluster[name].value("SELECT @@rpl_semi_sync_slave_enabled") == "1"
    assert p.value("SELECT @@rpl_semi_sync_master_enabled") == "1"
    assert p.value("SELECT @@rpl_semi_sync_master_wait_point") == "AFTER_SYNC"
    assert int(p.value("SELECT @@rpl_semi_sync_master_timeout")) >= 4294967295
    # data written on the primary (by an application account) reaches both
    for i in range(1, 51):
        p.query(f"INSERT INTO hook.t VALUES ({i}, 'b', @@server_id, NOW(6))", user="app")
    cluster.wait_synced(p)
    clients = p.query("SHOW STATUS LIKE 'Rpl_semi_sync_master_clients'")[0][1]
    assert clients == "2"
    for s in cluster.servers:
        assert rows(s) == set(range(1, 51)), s.name
    # replicas refuse application writes
    with pytest.raises(Exception):
        cluster["db-1"].query("INSERT INTO hook.t VALUES (999, 'x', 0, NOW())", user="app")

    # idempotence: a second run changes nothing and says the same
    before = cluster.state()
    r2 = cluster.run("bootstrap.sh", PRIMARY="")
    assert r2.rc == 0 and r2.json == r.json | {"gtid": r2.json["gtid"]}
    assert r2.json["gtid"] == p.value("SELECT @@gtid_binlog_pos")
    assert cluster.state() == before

    # never a second primary: bootstrapping another pod is refused
    r3 = cluster.run("bootstrap.sh", PRIMARY="db-1")
    assert r3.rc != 0 and r3.json["reason"] == "primary-is-replica", r3
    assert cluster.writable() == ["db-0"]
    REPORT.append(f"bootstrap: {r.seconds:.1f}s, rerun {r2.seconds:.1f}s")


def test_bootstrap_single_member_does_not_block(world, request):
    c = Cluster(world, request.node.name, n=1)
    try:
        r = c.run("bootstrap.sh", PRIMARY="")
        assert r.rc == 0 and r.json["result"] == "bootstrapped" and r.json["semiSync"] is False, r
        p = c["db-0"]
        assert p.value("SELECT @@rpl_semi_sync_master_enabled") == "0"
        t0 = time.time()
        p.query("CREATE DATABASE solo; CREATE TABLE solo.x (i INT PRIMARY KEY); INSERT INTO solo.x VALUES (1)")
        assert time.time() - t0 < 5
    finally:
        c.close()


def test_failover_reopens_a_restarted_single_member(world, request):
    """One member: a restarted server comes back read-only (my.cnf) and there is no
    replica to promote; failover.sh makes it writable again, every row kept
    (the real-server loop's scenario 3 found a single server read-only forever)."""
    c = Cluster(world, request.node.name, n=1)
    try:
        r = c.run("bootstrap.sh", PRIMARY="")
        assert r.rc == 0 and r.json["result"] == "bootstrapped", r
        p = c["db-0"]
        p.query("CREATE DATABASE hook; CREATE TABLE hook.t (n INT PRIMARY KEY, writer VARCHAR(8), sid INT, ts DATETIME(6));"
                f"CREATE USER 'app'@'%' IDENTIFIED BY '{APP_PASSWORD}'; GRANT SELECT, INSERT ON hook.* TO 'app'@'%'")
        for i in range(1, 21):
            p.query(f"INSERT INTO hook.t VALUES ({i}, 's', @@server_id, NOW(6))", user="app")
        p.kill()
        p.start()
        assert p.read_only(), "a restarted server is expected to come back read-only"
        r = c.run("failover.sh", PRIMARY="db-0")
        assert r.rc == 0 and r.json["result"] == "promoted" and r.json["primary"] == "db-0", r
        assert r.json["replicas"] == [] and r.json["semiSync"] is False, r
        assert c.writable() == ["db-0"]
        p.query("INSERT INTO hook.t VALUES (21, 's', @@server_id, NOW(6))", user="app")
        assert rows(p) == set(range(1, 22))
        # A rerun (the Job retried) changes nothing.
        r2 = c.run("failover.sh", PRIMARY="db-0")
        assert r2.rc == 0 and r2.json["primary"] == "db-0", r2
        assert c.writable() == ["db-0"]
        # Down: nothing to promote, a clear error.
        p.kill()
        r3 = c.run("failover.sh", PRIMARY="db-0")
        assert r3.rc != 0 and r3.json["reason"] == "no-candidate", r3
    finally:
        c.close()


def test_failover_lossless(cluster):
    cluster.bootstrap()
    w = kill_primary_mid_stream(cluster)
    acked = set(w.acked)
    survivors_rows = {s.name: rows(s) for s in cluster.running()}

    r = cluster.run("failover.sh", PRIMARY="db-0")
    assert r.rc == 0 and r.json["result"] == "promoted", r
    assert r.json["from"] == "db-0"
    new = r.json["primary"]
    assert new in ("db-1", "db-2")
    other = "db-2" if new == "db-1" else "db-1"
    assert cluster.writable() == [new]
    assert r.json["replicas"] == [other]
    np = cluster[new]
    on_new = rows(np)
    lost = acked - on_new
    union_survivors = set().union(*survivors_rows.values())
    REPORT.append(
        f"failover: rows acknowledged={len(acked)} on new primary {new}={len(on_new)} "
        f"lost={len(lost)} (unacknowledged in-flight rows present={len(on_new - acked)}) "
        f"failover.sh {r.seconds:.1f}s")
    assert not lost, f"acknowledged rows lost: {sorted(lost)[:20]}"
    assert union_survivors <= on_new, "a row some survivor had is missing on the new primary"
    # the other replica follows the new primary and gets new writes
    assert cluster[other].replicating_from(np)
    np.query("INSERT INTO hook.t VALUES (1000000, 'after', @@server_id, NOW(6))", user="app")
    cluster.wait_synced(np)
    assert rows(cluster[other]) == rows(np)
    assert np.query("SHOW STATUS LIKE 'Rpl_semi_sync_master_status'")[0][1] == "ON"

    # idempotence
    before = cluster.state()
    r2 = cluster.run("failover.sh", PRIMARY="db-0")
    assert r2.rc == 0 and r2.json["result"] == "promoted" and r2.json["primary"] == new, r2
    assert r2.json["replicas"] == [other]
    assert cluster.state() == before

    # The crashed primary comes back read-only.  If the crash left a binlogged
    # but never acknowledged transaction that no replica received, it differs
    # from the new primary: join.sh must then refuse (rebuild-needed), and that
    # transaction must not be one a client was told had committed.
    old = cluster["db-0"]
    old.start()
    assert old.read_only()
    pf = cluster.world.root / cluster.tag / "primary"
    pf.write_text(new + "\n")
    rj = cluster.run("join.sh", POD_NAME="db-0", PRIMARY_FILE=pf)
    only_old = rows(old) - rows(np)
    if rj.json["result"] == "joined":
        cluster.wait_synced(np)
        assert rows(old) == rows(np)
        outcome = "rejoined"
    else:
        assert rj.rc == 2 and rj.json["result"] == "rebuild-needed", rj
        assert only_old and not (only_old & acked), "an acknowledged row is only on the old primary"
        assert old.replica_status().get("Master_Host", "") == ""
        outcome = f"rebuild-needed (unacknowledged tail {rj.json['errant']}, rows only there: {sorted(only_old)})"
    REPORT.append(f"failover: restarted old primary -> {outcome}")


def test_old_primary_rejoins_read_only(cluster):
    """Crash of the primary after a write stream, with no transaction in
    flight at the moment of the crash: it must come back read-only and rejoin."""
    cluster.bootstrap()
    w = Writer(cluster["db-0"], 1, "w", stop_on_error=True, max_rows=80, max_seconds=60)
    w.start()
    w.join(120)
    assert len(w.acked) == 80
    cluster.wait_synced(cluster["db-0"])
    cluster["db-0"].kill()
    r = cluster.run("failover.sh", PRIMARY="db-0")
    assert r.rc == 0, r
    new = r.json["primary"]
    np = cluster[new]
    old = cluster["db-0"]
    old.start()
    assert old.read_only(), "a restarted old primary must come back read-only"
    assert cluster.writable() == [new]

    pf = cluster.world.root / cluster.tag / "primary"
    # a stale primary file naming the fenced old primary is not followed
    pf.write_text("db-0\n")
    r0 = cluster.run("join.sh", POD_NAME="db-1" if new != "db-1" else "db-2", PRIMARY_FILE=pf)
    assert r0.rc == 75 and r0.json["result"] == "waiting" and r0.json["reason"] == "primary-not-writable", r0

    pf.write_text(new + "\n")
    marker = cluster.world.root / cluster.tag / "db-0-rebuild-needed"
    marker.write_text("left from an earlier diverged state\n")
    r1 = cluster.run("join.sh", POD_NAME="db-0", PRIMARY_FILE=pf, REBUILD_MARKER=marker)
    assert r1.rc == 0 and r1.json["result"] == "joined" and r1.json["primary"] == new, r1
    assert not marker.exists(), "a server that joins is consistent: the marker goes"
    assert old.replicating_from(np) and old.read_only()
    cluster.wait_synced(np)
    assert rows(old) == rows(np)
    assert set(w.acked) <= rows(old)
    # the new primary's own pod and the writable server are left alone
    rp = cluster.run("join.sh", POD_NAME=new, PRIMARY_FILE=pf)
    assert rp.rc == 0 and rp.json["result"] == "is-primary"
    # idempotence, and the agent loop reporting the same
    before = cluster.state()
    r2 = cluster.run("join.sh", POD_NAME="db-0", PRIMARY_FILE=pf)
    assert r2.rc == 0 and r2.json["result"] == "already-replica", r2
    ra = cluster.run("agent.sh", POD_NAME="db-0", PRIMARY_FILE=pf, AGENT_ITERATIONS=2, AGENT_INTERVAL=0)
    assert ra.rc == 0 and ra.json["result"] == "already-replica", ra
    assert cluster.state() == before
    REPORT.append(f"rejoin: old primary db-0 rejoined {new} with {len(rows(old))} rows; join.sh {r1.seconds:.1f}s")


def test_errant_old_primary_is_rebuild_needed(cluster):
    cluster.bootstrap()
    p = cluster["db-0"]
    for i in range(1, 21):
        p.query(f"INSERT INTO hook.t VALUES ({i}, 'e', @@server_id, NOW(6))", user="app")
    cluster.wait_synced(p)
    p.kill()
    r = cluster.run("failover.sh", PRIMARY="db-0")
    assert r.rc == 0, r
    new = r.json["primary"]
    p.start()
    assert p.read_only()
    # an errant transaction: written on the old primary after it lost the role
    # (root bypasses MariaDB's read_only)
    p.query("INSERT INTO hook.t VALUES (424242, 'errant', @@server_id, NOW(6))")
    pf = cluster.world.root / cluster.tag / "primary"
    pf.write_text(new + "\n")
    marker = cluster.world.root / cluster.tag / "db-0-rebuild-needed"
    # Ready as a replica before join.sh has looked at it ...
    assert probe(cluster, "readiness", "db-0", pf, marker)[0] == 0
    r1 = cluster.run("join.sh", POD_NAME="db-0", PRIMARY_FILE=pf, REBUILD_MARKER=marker)
    assert r1.rc == 2 and r1.json["result"] == "rebuild-needed", r1
    assert r1.json["errant"].startswith("0-1-"), r1
    # ... and not once it knows the server diverged: it must serve no reads.
    assert r1.json["errant"] in marker.read_text(), marker.read_text()
    rc, out = probe(cluster, "readiness", "db-0", pf, marker)
    assert rc == 1 and "must be rebuilt" in out and r1.json["errant"] in out, out
    assert probe(cluster, "liveness", "db-0", pf, marker)[0] == 0
    assert probe(cluster, "readiness", new, pf, marker)[0] == 0, "the primary's probe ignores another pod's marker"
    st = p.replica_status()
    assert not st.get("Master_Host"), "an errant server must not be joined"
    assert p.read_only()
    r2 = cluster.run("join.sh", POD_NAME="db-0", PRIMARY_FILE=pf, REBUILD_MARKER=marker)
    assert r2.rc == 2 and r2.json == r1.json
    assert 424242 not in rows(cluster[new])
    assert probe(cluster, "readiness", "db-0", pf, marker)[0] == 1
    REPORT.append(f"errant: db-0 reported rebuild-needed (errant {r1.json['errant']}), not joined")


def test_failover_fences_reachable_primary(cluster):
    """The hook may fail over from a primary that still answers (unhealthy):
    it is fenced read-only first and ends up a replica of the new primary."""
    cluster.bootstrap()
    p = cluster["db-0"]
    for i in range(1, 31):
        p.query(f"INSERT INTO hook.t VALUES ({i}, 'f', @@server_id, NOW(6))", user="app")
    cluster.wait_synced(p)
    r = cluster.run("failover.sh", PRIMARY="db-0")
    assert r.rc == 0 and r.json["result"] == "promoted" and r.json["fenced"] is True, r
    new = r.json["primary"]
    assert cluster.writable() == [new]
    assert sorted(r.json["replicas"]) == [x for x in ("db-0", "db-1", "db-2") if x != new]
    np = cluster[new]
    assert p.replicating_from(np) and p.read_only()
    with pytest.raises(Exception):
        p.query("INSERT INTO hook.t VALUES (99, 'x', 0, NOW())", user="app")
    np.query("INSERT INTO hook.t VALUES (100, 'n', @@server_id, NOW(6))", user="app")
    cluster.wait_synced(np)
    for s in cluster.servers:
        assert rows(s) == set(range(1, 31)) | {100}, s.name


def test_failover_skips_errant_replica(cluster):
    """A replica that wrote its own transaction is not promoted, even when it
    is the most advanced."""
    cluster.bootstrap()
    p = cluster["db-0"]
    for i in range(1, 11):
        p.query(f"INSERT INTO hook.t VALUES ({i}, 'x', @@server_id, NOW(6))", user="app")
    cluster.wait_synced(p)
    p.kill()
    cluster["db-1"].query("INSERT INTO hook.t VALUES (777, 'errant', @@server_id, NOW(6))")  # root bypasses read_only
    r = cluster.run("failover.sh", PRIMARY="db-0")
    assert r.rc == 0 and r.json["primary"] == "db-2", r
    assert r.json["errant"] == ["db-1"]
    assert r.json["rebuildNeeded"] == ["db-1"]
    assert cluster.writable() == ["db-2"]
    assert cluster["db-1"].replica_status().get("Master_Port") in (None, "", str(cluster["db-0"].port))


def test_switchover(cluster):
    cluster.bootstrap()
    # writers against every server at once: only the current primary may accept
    wa = Writer(cluster["db-0"], 1, "a", stop_on_error=False, max_seconds=8)
    wb = Writer(cluster["db-1"], 1_000_000, "b", stop_on_error=False, max_seconds=8)
    wc = Writer(cluster["db-2"], 2_000_000, "c", stop_on_error=False, max_seconds=8)
    for w in (wa, wb, wc):
        w.start()
    time.sleep(2.5)
    r = cluster.run("switchover.sh", PRIMARY="db-0", TARGET="db-1")
    for w in (wa, wb, wc):
        w.join(120)
    assert r.rc == 0 and r.json["result"] == "switched", r
    assert r.json["primary"] == "db-1" and r.json["from"] == "db-0"
    assert sorted(r.json["replicas"]) == ["db-0", "db-2"]
    assert cluster.writable() == ["db-1"]
    np = cluster["db-1"]
    assert cluster["db-0"].replicating_from(np) and cluster["db-2"].replicating_from(np)
    cluster.wait_synced(np)
    on_new = rows(np)
    acked = set(wa.acked) | set(wb.acked) | set(wc.acked)
    lost = acked - on_new
    # which server accepted each row: sid is @@server_id of the server that ran the INSERT
    by_sid = {}
    for n, sid, ts in np.query("SELECT n, sid, ts FROM hook.t"):
        by_sid.setdefault(int(sid), []).append(ts)
    REPORT.append(
        f"switchover: acknowledged by db-0={len(wa.acked)} by db-1={len(wb.acked)} by db-2={len(wc.acked)}; "
        f"rows on new primary={len(on_new)} lost={len(lost)}; "
        f"last write accepted by db-0 {max(by_sid.get(1, ['-']))}, first by db-1 {min(by_sid.get(2, ['-']))}; "
        f"switchover.sh {r.seconds:.1f}s")
    assert not lost
    assert wa.acked and wb.acked, "writers should have succeeded before and after"
    assert not wc.acked, "a replica accepted a write"
    assert set(by_sid) == {1, 2}
    assert max(by_sid[1]) < min(by_sid[2]), "db-0 and db-1 accepted writes at the same time"
    # every row acknowledged by db-0 came before any acknowledged by db-1
    assert all(wb_port == np.port for wb_port in wb.acked_by.values())
    for s in cluster.servers:
        assert rows(s) == on_new, s.name
    # idempotence
    before = cluster.state()
    r2 = cluster.run("switchover.sh", PRIMARY="db-0", TARGET="db-1")
    assert r2.rc == 0 and r2.json["result"] == "switched" and r2.json["primary"] == "db-1", r2
    assert sorted(r2.json["replicas"]) == ["db-0", "db-2"]
    assert cluster.state() == before


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def test_backup_restore_and_point_in_time(cluster, world, request):
    cluster.bootstrap()
    p = cluster["db-0"]
    p.query("CREATE TABLE hook.kv (k VARCHAR(32) PRIMARY KEY, v BLOB, d DECIMAL(12,3), j JSON);"
            "CREATE PROCEDURE hook.count_t() SELECT COUNT(*) FROM hook.t;"
            "CREATE TRIGGER hook.kv_upper BEFORE INSERT ON hook.kv FOR EACH ROW SET NEW.k = UPPER(NEW.k);"
            "CREATE EVENT hook.noop ON SCHEDULE EVERY 1 DAY DISABLE DO SELECT 1;")
    for i in range(1, 201):
        p.query(f"INSERT INTO hook.t VALUES ({i}, 'A', @@server_id, NOW(6))", user="app")
    p.query("INSERT INTO hook.kv VALUES ('a', x'00ff10', 1.5, '{\"x\": [1,2]}'), ('b\\'q', NULL, -3.25, 'null')")
    cluster.wait_synced(p)
    bdir = world.root / cluster.tag / "backups"
    bdir.mkdir(parents=True)

    r = cluster.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME="full-1")
    assert r.rc == 0 and r.json["result"] == "backed-up", r
    assert r.json["source"] in ("db-1", "db-2"), "a healthy replica must be preferred"
    assert r.json["location"] == str(bdir / "full-1")
    assert r.json["bytes"] > 0 and r.json["gtid"].startswith("0-1-")
    man = (bdir / "full-1" / "manifest.json").read_text()
    assert '"sha256"' in man and r.json["gtid"] in man
    assert list((bdir / "full-1" / "binlog").iterdir()), "binary logs copied"
    r_again = cluster.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME="full-1")
    assert r_again.rc == 0 and r_again.line == r.line

    # full restore into a fresh server
    fresh = world.server("db-0", request.node.name + "-restore")
    try:
        (fresh.datadir / "lost+found").mkdir(parents=True)   # a fresh ext4 volume
        fresh.initialize()
        fresh.start()
        renv = {"PODS": f"db-0={fresh.addr}", "POD_NAME": "db-0", "RESTORE_FROM": str(bdir / "full-1")}
        rr = run_script("restore.sh", world, renv)
        assert rr.rc == 0 and rr.json["result"] == "restored" and rr.json["pitr"] is False, rr
        src = cluster[r.json["source"]]
        for table in ("hook.t", "hook.kv"):
            assert fresh.query(f"CHECKSUM TABLE {table}") == src.query(f"CHECKSUM TABLE {table}")
            assert content_hash(fresh, table) == content_hash(src, table)
        assert fresh.value("SELECT COUNT(*) FROM information_schema.routines WHERE routine_schema='hook'") == "1"
        assert fresh.value("SELECT COUNT(*) FROM information_schema.triggers WHERE trigger_schema='hook'") == "1"
        assert fresh.value("SELECT COUNT(*) FROM information_schema.events WHERE event_schema='hook'") == "1"
        assert fresh.value("SELECT @@gtid_binlog_pos") == r.json["gtid"]
        assert fresh.read_only()
        rr2 = run_script("restore.sh", world, renv)
        assert rr2.rc == 0 and rr2.line == rr.line
        REPORT.append(f"backup: {r.json['bytes']} bytes from {r.json['source']} in {r.seconds:.1f}s; "
                      f"restore {rr.seconds:.1f}s, checksums equal")
    finally:
        fresh.kill()

    # point in time: rows B before T, rows C after T, then a second backup
    for i in range(201, 301):
        p.query(f"INSERT INTO hook.t VALUES ({i}, 'B', @@server_id, NOW(6))", user="app")
    now = _utc_now()
    t_until = (now + datetime.timedelta(seconds=1)).replace(microsecond=0)
    time.sleep((t_until - now).total_seconds() + 0.3)
    for i in range(301, 401):
        p.query(f"INSERT INTO hook.t VALUES ({i}, 'C', @@server_id, NOW(6))", user="app")
    cluster.wait_synced(p)
    r2 = cluster.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME="full-2")
    assert r2.rc == 0, r2

    fresh2 = world.server("db-0", request.node.name + "-pitr")
    try:
        fresh2.initialize()
        fresh2.start()
        until = t_until.strftime("%Y-%m-%d %H:%M:%S")
        penv = {"PODS": f"db-0={fresh2.addr}", "POD_NAME": "db-0", "RESTORE_FROM": str(bdir / "full-1"),
                "RESTORE_BINLOGS_FROM": str(bdir / "full-2"), "RESTORE_UNTIL": until}
        pr = run_script("restore.sh", world, penv)
        assert pr.rc == 0 and pr.json["result"] == "restored" and pr.json["pitr"] is True, pr
        got = rows(fresh2)
        REPORT.append(f"point-in-time: until {until} UTC -> {len(got)} rows "
                      f"(A+B expected 300; C after the time present: {len(got & set(range(301, 401)))}) "
                      f"restore {pr.seconds:.1f}s")
        assert got == set(range(1, 301)), f"{len(got)} rows, max {max(got) if got else None}"
        assert content_hash(fresh2, "hook.kv") == content_hash(p, "hook.kv")
        # the restored server continues the source's GTID history
        assert fresh2.value("SELECT @@gtid_binlog_pos").startswith("0-1-")
        pr2 = run_script("restore.sh", world, penv)
        assert pr2.rc == 0 and pr2.line == pr.line
        assert rows(fresh2) == got
        # a server with data of its own is refused
        other = dict(penv, RESTORE_FROM=str(bdir / "full-2"))
        pr3 = run_script("restore.sh", world, other)
        assert pr3.rc != 0 and pr3.json["reason"] == "target-not-empty", pr3
    finally:
        fresh2.kill()

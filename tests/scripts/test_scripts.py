"""hooks/scripts against real MariaDB servers on 127.0.0.1.

Each test starts its own three mariadbd servers (db-0, db-1, db-2), each set
up by hooks/scripts/init.sh from an empty data dir with the hook's rendered
MariaDB my.cnf (see dbcluster.py), and runs the scripts the way the hook's
Jobs do: `bash script`, the env contract of hooks/scripts/README.md, one JSON
result line.  Servers are always torn down.
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import os
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import REPORT
from dbcluster import (AGENT, OPERATOR_PASSWORD, REPL_PASSWORD, ROOT_PASSWORD, SCRIPTS, Cluster, Writer, argv_leaks,
                       content_hash, free_port, kill_primary_mid_stream, probe, read_argv_log, rows, run_script,
                       wait_for)


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
    """init.sh on an empty dir: root is root@'localhost' only (the socket), the
    operator account mysqlhook@'%' logs in over TCP with its password, the GTID
    state is empty, other default accounts are gone; a crash before or after
    the staging directory was marked ready is repaired by a rerun."""
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
        assert s.value("SELECT CURRENT_USER()") == "mysqlhook@%"
        assert s.value("SELECT @@gtid_binlog_state") == ""
        assert s.value("SELECT @@gtid_binlog_pos") == "" and s.value("SELECT @@gtid_slave_pos") == ""
        assert s.query("SELECT user, host FROM mysql.user WHERE user IN ('root', '', 'mysqlhook') ORDER BY user") == \
            [["mysqlhook", "%"], ["root", "localhost"]]
        assert "WITH GRANT OPTION" in s.value("SHOW GRANTS FOR CURRENT_USER()")
        # root over TCP is refused: it has no network account
        root_tcp = subprocess.run(["mariadb", f"--defaults-extra-file={world.cnf_root}", "--protocol=TCP",
                                   "-h", "127.0.0.1", "-P", str(s.port), "-N", "-B", "-e", "SELECT 1"],
                                  capture_output=True, text=True, timeout=30)
        assert root_tcp.returncode != 0 and "ERROR 1045" in root_tcp.stderr, root_tcp
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
        assert s.value("SELECT CURRENT_USER()") == "mysqlhook@%"
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


def test_probes(world, request):
    c = Cluster(world, request.node.name, n=2)
    try:
        pf = world.root / c.tag / "primary"
        pf.write_text("db-0\n")
        p = c["db-0"]
        # before bootstrap the recorded primary is read-only and still Ready
        # (the hook waits for Ready pods before it bootstraps)
        assert probe(c, "readiness", "db-0", pf)[0] == 0
        assert probe(c, "liveness", "db-0", pf)[0] == 0
        c.bootstrap()
        assert probe(c, "readiness", "db-0", pf) == (0, "ready: db-0 is the primary (writable)")
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
        # the replica's receiver lost its source: NotReady (with the error)
        # until it has reconnected (MASTER_CONNECT_RETRY 5 s)
        wait_for(lambda: probe(c, "readiness", "db-1", pf)[0] == 0, timeout=30, interval=0.5,
                 what="db-1 Ready again once reconnected")
        # made writable again (what a failover to the same pod does) -> Ready
        p.query("SET GLOBAL read_only=OFF")
        assert probe(c, "readiness", "db-0", pf)[0] == 0
        # the file names another pod: a writable db-0 that replicates from
        # nobody is a primary the file does not name yet (a stale file): Ready
        pf.write_text("db-1\n")
        rc, out = probe(c, "readiness", "db-0", pf)
        assert rc == 0 and "writable and replicates from nobody" in out, out
        # read-only and not replicating: not a primary, not a working replica
        p.query("SET GLOBAL read_only=ON")
        rc, out = probe(c, "readiness", "db-0", pf)
        assert rc == 1 and "does not replicate" in out, out
        # a wrong password: alive, not ready
        c.world_root_password = "wrong"
        assert probe(c, "liveness", "db-0", pf)[0] == 0
        assert probe(c, "readiness", "db-0", pf)[0] == 1
        # no option file left behind in TMPDIR
        assert not list(world.root.glob("probe.*"))
        REPORT.append(f"probe (agent): {len(c.probe_seconds)} runs, max {max(c.probe_seconds) * 1000:.0f} ms, "
                      f"mean {sum(c.probe_seconds) / len(c.probe_seconds) * 1000:.0f} ms")
    finally:
        c.close()


@pytest.mark.all_servers
def test_a_server_that_missed_the_bootstrap_is_not_ready(cluster):
    """Readiness rule 6 (agent/src/probe.rs): an empty server that missed the
    bootstrap has no repl account, and its mounted `initialized` file can still
    say false for up to a minute (the kubelet's refresh). It used to be Ready then,
    in `-replicas` and counted as a member before it held any data. Now the probe
    asks the recorded primary: a writable server that replicates from nobody means
    the cluster is bootstrapped, so the empty server is NotReady until it joins."""
    pf = cluster.world.root / cluster.tag / "primary"
    pf.write_text("db-0\n")
    # before the bootstrap nobody is writable: every server that answers is
    # Ready (the bootstrap and restores wait for that)
    rc, out = probe(cluster, "readiness", "db-2", pf)
    assert rc == 0 and "not bootstrapped yet" in out, out
    cluster.bootstrap()
    cluster.add("db-3")   # empty, not joined; PODS names it, no INITIALIZED_FILE
    rc, out = probe(cluster, "readiness", "db-3", pf)
    assert rc == 1 and "does not replicate" in out, out
    # the same through the sidecar's /readyz (what the kubelet asks), which
    # remembers it: the cluster stays bootstrapped for the life of the pod
    sidecar = sidecar_probes(cluster, "db-3", pf)
    try:
        code, body = sidecar.get("/readyz")
        assert code == 503 and "does not replicate" in body, (code, body)
        # the file names a server that does not serve as the primary any more
        # (read-only: a fenced old primary, a stale file): the sidecar knows
        # better; the exec probe, which remembers nothing, judges on local
        # knowledge, as before this change
        p = cluster["db-0"]
        p.query("SET GLOBAL super_read_only=ON" if cluster.world.kind.mysql else "SET GLOBAL read_only=ON")
        code, body = sidecar.get("/readyz")
        assert code == 503 and "does not replicate" in body, (code, body)
    finally:
        sidecar.stop()
    rc, out = probe(cluster, "readiness", "db-3", pf)
    assert rc == 0 and "not bootstrapped yet" in out, out
    # a primary that does not answer costs the probe at most its 1 s connect
    # timeout (the kubelet gives it 5 s)
    p.kill()
    t0 = time.time()
    rc, out = probe(cluster, "readiness", "db-3", pf)
    took = time.time() - t0
    assert rc == 0 and "not bootstrapped yet" in out, out
    REPORT.append(f"probe of a server that missed the bootstrap: NotReady while the primary serves; "
                  f"{took:.2f}s with the primary down")


class SidecarProbes:
    """`mysql-hook-agent sidecar` answering probes on a port of its own; its
    loop's steps (join.sh) find no scripts, so it changes nothing on the server."""

    def __init__(self, proc: subprocess.Popen, port: int):
        self.proc, self.port = proc, port

    def get(self, path: str) -> tuple[int, str]:
        def answer():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, e.read().decode()
            except OSError:
                return None
        got = wait_for(answer, timeout=30, interval=0.2, what=f"the sidecar answering {path}")
        return got

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


def sidecar_probes(c: Cluster, pod: str, primary_file) -> SidecarProbes:
    port = free_port()
    empty = c.world.root / c.tag / "no-scripts"
    empty.mkdir(parents=True, exist_ok=True)
    env = {**c.world.argv_env("sidecar"), **c.world.credential_env(), "FLAVOR": c.world.kind.flavor,
           "POD_NAME": pod, "PODS": c.pods, "PRIMARY_FILE": str(primary_file), "SERVER_SOCKET": str(c[pod].sock),
           "TMPDIR": str(c.world.root), "TERMINATION_LOG": "/dev/null", "SCRIPTS_DIR": str(empty),
           "AGENT_LISTEN": f"127.0.0.1:{port}", "AGENT_INTERVAL": "3600", "FENCE_INTERVAL": "3600"}
    proc = subprocess.Popen([str(AGENT), "sidecar"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return SidecarProbes(proc, port)


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
    assert r2.rc == 0 and r2.json == r.json | {"gtid": r2.json["gtid"]}, r2
    assert r2.json["gtid"] == p.value("SELECT @@gtid_binlog_pos")
    assert cluster.state() == before

    # never a second primary: PRIMARY is only a hint, the running primary is kept
    r3 = cluster.run("bootstrap.sh", PRIMARY="db-1")
    assert r3.rc == 0 and r3.json["primary"] == "db-0", r3
    assert cluster.state() == before
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
    ra = cluster.run("sidecar", POD_NAME="db-0", PRIMARY_FILE=pf, AGENT_ITERATIONS=2, AGENT_INTERVAL=0)
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
    # not Ready before join.sh has looked at it: it replicates from nobody ...
    rc, out = probe(cluster, "readiness", "db-0", pf, marker)
    assert rc == 1 and "does not replicate" in out, out
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
    """The hook may fail over from a primary that still answers (unhealthy, or
    restarted read-only): it is fenced first (read-only, clients cut off); it
    holds everything, so it is promoted again in place (no needless move) and
    the replicas follow it."""
    cluster.bootstrap()
    p = cluster["db-0"]
    for i in range(1, 31):
        p.query(f"INSERT INTO hook.t VALUES ({i}, 'f', @@server_id, NOW(6))", user="app")
    cluster.wait_synced(p)
    r = cluster.run("failover.sh", PRIMARY="db-0")
    assert r.rc == 0 and r.json["result"] == "promoted" and r.json["fenced"] is True, r
    assert r.json["primary"] == "db-0" == r.json["promoted"], r
    assert cluster.writable() == ["db-0"]
    assert sorted(r.json["replicas"]) == ["db-1", "db-2"]
    for name in ("db-1", "db-2"):
        assert cluster[name].replicating_from(p) and cluster[name].read_only()
        with pytest.raises(Exception):
            cluster[name].query("INSERT INTO hook.t VALUES (99, 'x', 0, NOW())", user="app")
    p.query("INSERT INTO hook.t VALUES (100, 'n', @@server_id, NOW(6))", user="app")
    cluster.wait_synced(p)
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
    # They run until db-1 has taken writes after the switchover, not for a fixed
    # time, which a loaded machine can use up before db-1 opens.
    wa = Writer(cluster["db-0"], 1, "a", stop_on_error=False, max_seconds=180)
    wb = Writer(cluster["db-1"], 1_000_000, "b", stop_on_error=False, max_seconds=180)
    wc = Writer(cluster["db-2"], 2_000_000, "c", stop_on_error=False, max_seconds=180)
    for w in (wa, wb, wc):
        w.start()
    try:
        wait_for(lambda: wa.acked and wc.errors, 30, what="db-0 taking writes and db-2 refusing them")
        r = cluster.run("switchover.sh", PRIMARY="db-0", TARGET="db-1")
        if r.rc == 0:
            wait_for(lambda: len(wb.acked) >= 3, 30, what="writes acknowledged by db-1 after the switchover")
    finally:
        for w in (wa, wb, wc):
            w.stop()
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
        f"switchover.sh {r.seconds:.1f}s, writes refused for {r.json.get('frozenMs')} ms")
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
        other = {k: v for k, v in penv.items() if k not in ("RESTORE_BINLOGS_FROM", "RESTORE_UNTIL")}
        other["RESTORE_FROM"] = str(bdir / "full-2")
        pr3 = run_script("restore.sh", world, other)
        assert pr3.rc != 0 and pr3.json["reason"] == "target-not-empty", pr3
    finally:
        fresh2.kill()


def test_no_password_on_any_command_line(world, request):
    """Issue 18.3: no password ever reaches a command line (/proc/<pid>/cmdline,
    `ps`, process-exec audit logs); issue 18.7: nor the environment of a
    program a script starts (/proc/<pid>/environ).  Every program the scripts execute is
    reached through recording wrappers (dbcluster.make_argv_wrappers); this
    scenario runs every script along the paths that handle passwords: init.sh
    creating root accounts, bootstrap creating the repl account and pointing
    replicas at the primary (MASTER_PASSWORD), switchover and failover
    repointing, join/agent, probes, backup and a point-in-time restore
    (dump load and binlog replay)."""
    before = world.argv_files()
    c = Cluster(world, request.node.name, n=3)
    fresh = None
    try:
        c.bootstrap()
        p = c["db-0"]
        for i in range(1, 11):
            p.query(f"INSERT INTO hook.t VALUES ({i}, 'a', @@server_id, NOW(6))", user="app")
        c.wait_synced(p)
        pf = world.root / c.tag / "primary"
        pf.write_text("db-0\n")
        assert probe(c, "readiness", "db-0", pf)[0] == 0
        assert probe(c, "liveness", "db-1", pf)[0] == 0
        r = c.run("switchover.sh", PRIMARY="db-0", TARGET="db-1")
        assert r.rc == 0 and r.json["primary"] == "db-1", r
        r = c.run("failover.sh", PRIMARY="db-1")
        assert r.rc == 0 and r.json["result"] == "promoted", r
        new = r.json["primary"]
        pf.write_text(new + "\n")
        other = next(n for n in ("db-0", "db-1", "db-2") if n != new)
        r = c.run("join.sh", POD_NAME=other, PRIMARY_FILE=pf)
        assert r.rc == 0 and r.json["result"] in ("joined", "already-replica"), r
        r = c.run("sidecar", POD_NAME=other, PRIMARY_FILE=pf, AGENT_ITERATIONS=1, AGENT_INTERVAL=0)
        assert r.rc == 0, r
        # Passwords given in the environment (not as pods do) stay in the script:
        # none of the programs it starts inherits them.
        env_before = world.argv_files()
        r = c.run("join.sh", POD_NAME=other, PRIMARY_FILE=pf, MYSQL_ROOT_PASSWORD_FILE="", REPLICATION_PASSWORD_FILE="",
                  OPERATOR_PASSWORD_FILE="", MYSQL_ROOT_PASSWORD=ROOT_PASSWORD, REPLICATION_PASSWORD=REPL_PASSWORD,
                  OPERATOR_PASSWORD=OPERATOR_PASSWORD)
        assert r.rc == 0 and r.json["result"] == "already-replica", r
        env_mode = read_argv_log(world.argv_log, only=world.argv_files() - env_before)
        inherited = [argv[0] for _, argv, env in env_mode if argv[0].startswith("mariadb")
                     and any(p in kv for p in (ROOT_PASSWORD, REPL_PASSWORD, OPERATOR_PASSWORD) for kv in env)]
        assert len(env_mode) > 3 and not inherited, f"client programs inherited the passwords: {inherited}"
        bdir = world.root / c.tag / "backups"
        bdir.mkdir(parents=True)
        r = c.run("backup.sh", PRIMARY=new, BACKUP_DIR=bdir, BACKUP_NAME="b1")
        assert r.rc == 0, r
        for i in range(11, 21):
            c[new].query(f"INSERT INTO hook.t VALUES ({i}, 'b', @@server_id, NOW(6))", user="app")
        c.wait_synced(c[new])
        # binlogsUntil is a whole second and restoring up to it excludes that second:
        # let the clock leave the second of the inserts first (else, now and then,
        # b2 reads the same second and rows 11-20 are rightly left out).
        time.sleep(1.1)
        r = c.run("backup.sh", PRIMARY=new, BACKUP_DIR=bdir, BACKUP_NAME="b2")
        assert r.rc == 0, r
        fresh = world.server("db-0", request.node.name + "-restore")
        fresh.initialize()
        fresh.start()
        until = r.json["binlogsUntil"]   # as far as b2's binary logs are proven to reach
        r = run_script("restore.sh", world, {"PODS": f"db-0={fresh.addr}", "POD_NAME": "db-0",
                                             "RESTORE_FROM": str(bdir / "b1"),
                                             "RESTORE_BINLOGS_FROM": str(bdir / "b2"), "RESTORE_UNTIL": until})
        assert r.rc == 0 and r.json["pitr"] is True, r
        assert rows(fresh) == set(range(1, 21))
    finally:
        c.close()
        if fresh:
            fresh.kill()
    records = read_argv_log(world.argv_log, only=world.argv_files() - before)
    tags = {t for t, _, _ in records}
    # (the agent's probe starts no program: nothing of it to record)
    scripts = {"init.sh", "bootstrap.sh", "switchover.sh", "failover.sh", "join.sh", "sidecar",
               "backup.sh", "restore.sh"}
    assert scripts <= tags, f"no command line recorded for {sorted(scripts - tags)}"
    clients = [argv for _, argv, _ in records if argv[0] in ("mariadb", "mariadb-dump", "mariadb-binlog",
                                                             "mariadb-admin", "mariadbd", "mariadb-install-db")]
    leaks = argv_leaks(records, [ROOT_PASSWORD, REPL_PASSWORD, OPERATOR_PASSWORD])
    REPORT.append(f"command lines and environments: {len(records)} execs recorded through {world.wrapped} wrappers, "
                  f"{len(clients)} of them MariaDB programs; holding a password: {len(leaks)}")
    assert len(clients) > 50
    assert not leaks, "\n".join(leaks[:20])


# Issue 18.6: a store is not trusted.  Lines a tampered dump or binary log could
# carry that the client would execute itself, not send to the server.
CLIENT_COMMANDS = [
    "\\! touch {m}/bang",
    "system touch {m}/system",
    "\\. {m}/sourced.sql",
    "source {m}/sourced.sql",
    "\\T {m}/tee",
    "tee {m}/tee2",
]


def _client_command_lines(markers) -> str:
    (markers / "sourced.sql").write_text(f"\\! touch {markers}/via-source\n")
    return "".join(line.format(m=markers) + "\n" for line in CLIENT_COMMANDS)


def _markers_created(markers) -> list[str]:
    return sorted(p.name for p in markers.iterdir() if p.name != "sourced.sql")


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_replay_pipe_runs_no_client_command(world, request, flavor):
    """sql_stdin, the pipe every dump load and binlog replay goes through,
    must hand everything to the server: client commands (\\!, system, source,
    tee) in the stream are not executed by the client, for both flavors.  The
    MySQL branch runs MariaDB's client under the name `mysql` (both clients
    document --binary-mode the same way), against a real server."""
    s = world.server("db-0", request.node.name)
    try:
        s.initialize()
        s.start()
        markers = world.root / request.node.name / "markers"
        markers.mkdir()
        shim = world.root / request.node.name / "shim"
        shim.mkdir()
        # `mysql` is MariaDB's client, minus the MySQL-only option common.sh
        # writes into the client option file (get-server-public-key).
        (shim / "mysql").write_text(
            "#!/bin/bash\nargs=()\nfor a in \"$@\"; do\n  case $a in\n"
            "    --defaults-extra-file=*) f=$(mktemp); grep -v '^get-server-public-key' \"${a#*=}\" > \"$f\"\n"
            "      args+=(\"--defaults-extra-file=$f\") ;;\n"
            "    *) args+=(\"$a\") ;;\n  esac\ndone\nexec mariadb \"${args[@]}\"\n")
        (shim / "mysql").chmod(0o755)
        term = world.root / request.node.name / "term"
        # first line too: `system` is a command there even without --named-commands
        stream = _client_command_lines(markers) + "SELECT 1;\n" + _client_command_lines(markers)
        env = {**world.argv_env("sql_stdin"), "FLAVOR": flavor, "PODS": f"db-0={s.addr}", "HOME": str(world.root),
               "TMPDIR": str(world.root), **world.credential_env(), "TERMINATION_LOG": str(term)}
        env["PATH"] = f"{shim}:{env['PATH']}"
        r = subprocess.run(["bash", "-c", f'. "{SCRIPTS}/common.sh"; sql_stdin db-0; RESULT_DONE=1'], input=stream,
                           env=env, capture_output=True, text=True, timeout=60)
        created = _markers_created(markers)
        REPORT.append(f"client commands through sql_stdin ({flavor}): exit {r.returncode}, executed: {created or 'none'}")
        assert created == [], f"{flavor}: the client executed {created}; stderr: {r.stderr[-2000:]}"
        # refused, by the client (an unknown command in binary mode, a disabled
        # one in the sandbox) or by the server (a syntax error), after connecting
        assert r.returncode == 1 and "ERROR" in r.stderr and "connect" not in r.stderr, r.stderr[-2000:]
    finally:
        s.kill()


def test_restore_of_a_tampered_backup_runs_no_client_command(world, request):
    """A backup whose dump.sql was altered in the store (its SHA256SUMS
    recomputed: the store holds both) carries client commands; restore.sh
    must not run them (it fails: the server rejects them as SQL)."""
    c = Cluster(world, request.node.name, n=1)
    fresh = None
    try:
        r = c.run("bootstrap.sh", PRIMARY="")
        assert r.rc == 0, r
        c["db-0"].query("CREATE DATABASE hook; CREATE TABLE hook.t (n INT PRIMARY KEY); INSERT INTO hook.t VALUES (1)")
        bdir = world.root / c.tag / "backups"
        bdir.mkdir(parents=True)
        r = c.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME="b1")
        assert r.rc == 0, r
        markers = world.root / c.tag / "markers"
        markers.mkdir()
        dump = bdir / "b1" / "dump.sql.gz"
        lines = gzip.decompress(dump.read_bytes()).decode().splitlines(keepends=True)
        evil = _client_command_lines(markers)
        dump.write_bytes(gzip.compress(("".join(lines[:5]) + evil + "".join(lines[5:]) + evil).encode()))
        sums = subprocess.run(["sha256sum", "dump.sql.gz"], cwd=bdir / "b1", capture_output=True, text=True,
                              check=True)
        others = [ln for ln in (bdir / "b1" / "SHA256SUMS").read_text().splitlines()
                  if not ln.endswith(" dump.sql.gz")]
        (bdir / "b1" / "SHA256SUMS").write_text(sums.stdout + "".join(ln + "\n" for ln in others))
        fresh = world.server("db-0", request.node.name + "-restore")
        fresh.initialize()
        fresh.start()
        rr = run_script("restore.sh", world, {"PODS": f"db-0={fresh.addr}", "POD_NAME": "db-0",
                                              "RESTORE_FROM": str(bdir / "b1")})
        created = _markers_created(markers)
        REPORT.append(f"tampered backup: restore.sh exit {rr.rc} ({rr.json.get('reason')}), client commands executed: "
                      f"{created or 'none'}")
        assert created == [], f"restore.sh executed {created}"
        assert rr.rc != 0, rr
    finally:
        c.close()
        if fresh:
            fresh.kill()


def test_replication_user_can_only_replicate(cluster):
    """Issue 18.5: the account replicas log in with holds REPLICATION SLAVE and
    nothing else: its password (in every pod) reads no data and administers
    nothing.  Replication and semi-sync acknowledgements work with it."""
    cluster.bootstrap()
    p = cluster["db-0"]
    grants = [g[0] for g in p.query("SHOW GRANTS FOR 'repl'@'%'")]
    REPORT.append(f"repl grants: {[g.split(' IDENTIFIED')[0] for g in grants]}")
    assert len(grants) == 1 and grants[0].startswith("GRANT REPLICATION SLAVE ON *.* TO `repl`@`%`"), grants
    p.query("INSERT INTO hook.t VALUES (1, 'r', @@server_id, NOW(6))", user="app")
    cluster.wait_synced(p)
    # the insert was acknowledged by a replica logged in as repl (semi-sync)
    assert int(p.query("SHOW STATUS LIKE 'Rpl_semi_sync_master_yes_tx'")[0][1]) >= 1
    for s in cluster.servers:
        assert rows(s) == {1}, s.name
    cnf = cluster.world.root / cluster.tag / "repl.cnf"
    from dbcluster import REPL_PASSWORD, client_cnf
    client_cnf(cnf, "repl", REPL_PASSWORD)
    base = ["mariadb", f"--defaults-extra-file={cnf}", "--protocol=TCP", "-h", "127.0.0.1", "-P", str(p.port), "-N", "-B"]
    for q in ("SELECT COUNT(*) FROM hook.t", "SELECT COUNT(*) FROM mysql.user", "SET GLOBAL read_only=OFF",
              "CREATE DATABASE x", "SHOW SLAVE STATUS", "SHOW BINLOG EVENTS", "FLUSH LOGS"):
        r = subprocess.run(base + ["-e", q], capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and "denied" in r.stderr.lower(), f"repl may run {q!r}: {r.stdout}{r.stderr}"


def test_signed_backups_restore_only_when_the_signature_holds(world, request):
    """Issue 18.6: a backup signed with a key kept outside the store (HMAC-SHA256
    over SHA256SUMS, which covers dump.sql, the binary logs and manifest.json)
    restores only when the signature verifies under the restore's key: an altered
    file with its checksum recomputed, a missing signature or another key are
    refused before anything is loaded."""
    import hmac as hmac_mod
    c = Cluster(world, request.node.name, n=1)
    fresh = None
    try:
        assert c.run("bootstrap.sh", PRIMARY="").rc == 0
        c["db-0"].query("CREATE DATABASE hook; CREATE TABLE hook.t (n INT PRIMARY KEY); INSERT INTO hook.t VALUES (7)")
        base = world.root / c.tag
        key = base / "signing-key"
        key.write_bytes(os.urandom(32) + b"\n")   # any bytes, a trailing newline included
        other = base / "other-key"
        other.write_bytes(os.urandom(32))
        bdir = base / "backups"
        bdir.mkdir()
        r = c.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME="b1", BACKUP_SIGNING_KEY_FILE=key)
        assert r.rc == 0, r
        b1 = bdir / "b1"
        sums = (b1 / "SHA256SUMS").read_bytes()
        assert b"manifest.json" in sums, "the manifest is covered by the checksums"
        want = hmac_mod.new(key.read_bytes(), sums, hashlib.sha256).hexdigest()
        assert (b1 / "SIGNATURE").read_text() == f"hmac-sha256 {want}\n"

        fresh = world.server("db-0", request.node.name + "-restore")
        fresh.initialize()
        fresh.start()
        env = {"PODS": f"db-0={fresh.addr}", "POD_NAME": "db-0", "RESTORE_FROM": str(b1)}

        def restore(**extra):
            return run_script("restore.sh", world, {**env, **{k: str(v) for k, v in extra.items()}})

        outcomes = {}
        # another key, then no signature, then an altered dump with its checksum recomputed
        r = restore(RESTORE_VERIFY_KEY_FILE=other)
        outcomes["other key"] = (r.rc, r.json.get("reason"))
        sig = (b1 / "SIGNATURE").read_bytes()
        (b1 / "SIGNATURE").unlink()
        r = restore(RESTORE_VERIFY_KEY_FILE=key)
        outcomes["no signature"] = (r.rc, r.json.get("reason"))
        (b1 / "SIGNATURE").write_bytes(sig)
        dump = b1 / "dump.sql.gz"
        packed = dump.read_bytes()
        original = gzip.decompress(packed)
        assert b"(7)" in original
        dump.write_bytes(gzip.compress(original.replace(b"(7)", b"(666)")))
        fixed = subprocess.run(["sha256sum", "dump.sql.gz"], cwd=b1, capture_output=True, text=True,
                               check=True).stdout
        (b1 / "SHA256SUMS").write_text(fixed + "".join(
            ln + "\n" for ln in sums.decode().splitlines() if not ln.endswith(" dump.sql.gz")))
        r = restore(RESTORE_VERIFY_KEY_FILE=key)
        outcomes["altered"] = (r.rc, r.json.get("reason"))
        REPORT.append(f"signed backup: refused restores {outcomes}")
        for what, (rc, reason) in outcomes.items():
            assert rc != 0 and reason == "bad-signature", f"{what}: {rc} {reason}"
        assert fresh.value("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name='hook'") == "0", \
            "nothing may be loaded before the signature is checked"
        # the genuine backup restores
        dump.write_bytes(packed)
        (b1 / "SHA256SUMS").write_bytes(sums)
        r = restore(RESTORE_VERIFY_KEY_FILE=key)
        assert r.rc == 0 and r.json["result"] == "restored", r
        assert fresh.value("SELECT n FROM hook.t") == "7"
    finally:
        c.close()
        if fresh:
            fresh.kill()

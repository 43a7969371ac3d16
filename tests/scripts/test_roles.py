"""Role changes (failover, switchover, bootstrap, drain) against real servers:
the promise that a commit that returned OK is never lost, that there
are never two writable servers, and that the cluster comes back writable by
itself (issue 14).  Fixtures in conftest.py, harness in dbcluster.py.

All of them run on MariaDB 10.11; those marked all_servers also on MySQL 9.7 and
MariaDB 11.8 (issue 33).  One of the others fails on MySQL 9.7 when run there with
MYSQL_HOOK_ALL_TESTS=1: test_bootstrap_over_diverged_data_refuses makes a
foreign GTID with MariaDB's session server_id.  test_relay_log_survey_that_fails_refuses
is about MariaDB's relay log survey (MySQL reports its received set itself)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPORT
from dbcluster import AGENT, Session, probe, rows, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))
from minimysql import Connection  # noqa: E402


def processlist(s, user=None):
    q = "SELECT ID, USER, COMMAND, STATE, INFO FROM information_schema.PROCESSLIST"
    return [r for r in s.query(q) if user is None or r[1] == user]


def fill(s, first, last, label="r"):
    for i in range(first, last + 1):
        s.query(f"INSERT INTO hook.t VALUES ({i}, '{label}', @@server_id, NOW(6))", user="app")


def _stop(c, thread: str) -> str:
    """Stops one replication thread (MySQL 8.4 removed the SLAVE spellings)."""
    return f"STOP {'REPLICA' if c.world.kind.mysql else 'SLAVE'} {thread}"


def _errant_write(c, s, q: str):
    """A write of a server's own past read-only, as a person with root could make."""
    if c.world.kind.mysql:
        s.query(f"SET GLOBAL super_read_only = OFF; {q}; SET GLOBAL super_read_only = ON")
    else:
        s.query(q)


def assert_one_writable_and_following(c, r):
    """Exactly the promoted server is writable; every other running member
    that was repointed is a read-only replica of it."""
    new = r.json["primary"]
    assert c.writable() == [new], (c.writable(), r)
    for name in r.json.get("replicas", []):
        s = c[name]
        assert s.read_only(), name
        assert wait_for(lambda: s.replicating_from(c[new]), 30, what=f"{name} replicating"), name
    return c[new]


# ------------------------------------------------------------------ 1. fencing

@pytest.mark.all_servers
def test_failover_fences_primary_behind_long_statement(cluster):
    """The old primary answers, but a long statement holds the lock that
    SET GLOBAL read_only needs.  Failover must not leave it writable: it kills
    the client connections and fences it (or fails with fence-failed and
    promotes nothing)."""
    c = cluster
    c.bootstrap()
    p = c["db-0"]
    fill(p, 1, 10)
    c.wait_synced(p)
    # would write n=1 after 600 s; until then it holds the statement's locks
    s = Session(p, "app")
    s.send("UPDATE hook.t SET writer = IF(SLEEP(600) = 0, 'late', 'x') WHERE n = 1; SELECT 'late-ok';")
    wait_for(lambda: any("SLEEP" in (r[4] or "") for r in processlist(p, "app")), what="long statement")
    t0 = time.time()
    r = c.run("failover.sh", PRIMARY="db-0")
    took = time.time() - t0
    try:
        if r.rc != 0:
            assert r.json["reason"] == "fence-failed" and "db-0" in r.json["message"], r
            assert "promoted" not in r.json and c.writable() == ["db-0"], "nothing promoted"
            outcome = "fence-failed"
        else:
            new = assert_one_writable_and_following(c, r).name
            assert r.json["fenced"] is True, r
            assert not any("SLEEP" in (x[4] or "") for x in processlist(p)), "the long statement was killed"
            outcome = f"promoted {new}"
        assert wait_for(lambda: not s.alive, 10, what="client disconnected"), "client connection killed"
        assert "late-ok" not in s.out
        for srv in c.running():
            assert srv.value("SELECT writer FROM hook.t WHERE n = 1") == "r", srv.name
        REPORT.append(f"fence: old primary behind a 600 s statement -> {outcome} in {took:.1f}s")
    finally:
        s.close()


@pytest.mark.all_servers
def test_failover_fence_failed_promotes_nothing(cluster):
    """When the old primary answers and cannot be fenced (here: a single
    attempt, FENCE_ATTEMPTS=1, blocked by a long statement), failover fails
    with fence-failed naming it and promotes nothing: the replicas are left
    as they were (still replicating from it), no second writable server."""
    c = cluster
    c.bootstrap()
    p = c["db-0"]
    fill(p, 1, 5)
    c.wait_synced(p)
    s = Session(p, "app")
    s.send("UPDATE hook.t SET writer = IF(SLEEP(600) = 0, 'late', 'x') WHERE n = 1;")
    wait_for(lambda: any("SLEEP" in (r[4] or "") for r in processlist(p, "app")), what="long statement")
    try:
        r = c.run("failover.sh", PRIMARY="db-0", FENCE_ATTEMPTS=1)
        assert r.rc == 1 and r.json["reason"] == "fence-failed", r
        assert "db-0" in r.json["message"] and "promoted" not in r.json, r
        assert c.writable() == ["db-0"]
        for name in ("db-1", "db-2"):
            assert c[name].replicating_from(p), f"{name} was touched"
    finally:
        s.close()


class _Commit(threading.Thread):
    """One autocommit statement on its own connection of the real-server loop's
    client (tests/k8s/minimysql.py), in the background: `ok` is True only when
    the server sent the statement's OK packet."""

    def __init__(self, srv, sql: str, user: str = "app"):
        super().__init__(daemon=True)
        from dbcluster import APP_PASSWORD
        self.host, port = srv.addr.split(":")
        self.port, self.sql, self.user, self.password = int(port), sql, user, APP_PASSWORD
        self.ok, self.error = False, ""
        self.start()

    def run(self):
        try:
            with Connection(self.host, self.port, self.user, self.password, timeout=300) as conn:
                conn.query(self.sql)
                self.ok = True
        except Exception as e:  # noqa: BLE001 - any failure is "not acknowledged"
            self.error = repr(e)


@pytest.mark.all_servers
def test_failover_blocked_commit_never_completes_beside_new_primary(cluster):
    """Both receivers are cut off: a commit on the primary waits for a
    semi-sync acknowledgement that never comes, and blocks SET read_only.
    After failover that commit must not be acknowledged unless it is on the
    new primary, and there must never be a second writable server.  On MySQL
    neither read-only nor KILL gets past that wait: the failover shuts the old
    primary down (FENCE_SHUTDOWN), which then restarts read-only, as its pod's
    container would; before that the failover failed fence-failed and the
    cluster stayed without a writable primary."""
    c = cluster
    c.bootstrap()
    p = c["db-0"]
    fill(p, 1, 10)
    c.wait_synced(p)
    for n in ("db-1", "db-2"):
        c[n].query(_stop(c, "IO_THREAD"))
    # Judged by the OK packet of the INSERT itself (the loop's client): a marker
    # SELECT after it cannot run on a server that was shut down, so it proved
    # nothing about an OK given at the shutdown.
    s = _Commit(p, "INSERT INTO hook.t VALUES (500, 'blocked', @@server_id, NOW(6))")
    wait_for(lambda: any("semi-sync" in (r[3] or "") for r in processlist(p, "app")), what="commit waiting for ACK")
    r = c.run("failover.sh", PRIMARY="db-0")
    try:
        assert r.rc == 0 and r.json["result"] == "promoted", r
        shut_down = "db-0 shut down" in r.stderr
        if shut_down:
            # the kubelet restarts a container whose mysqld exited
            assert wait_for(lambda: not p.running, 60, what="db-0's mysqld exits"), "db-0 still runs"
            p.start()
            assert p.read_only(), "a shut-down old primary restarts read-only"
        new = assert_one_writable_and_following(c, r)
        # watch for a while: the old primary must stay read-only, the commit
        # must never be acknowledged while missing on the new primary
        deadline = time.time() + 5
        while time.time() < deadline:
            assert c.writable() == [new.name], c.writable()
            if s.ok:
                assert 500 in rows(new), "a commit acknowledged on the old primary is not on the new one"
            time.sleep(0.2)
        s.join(30)
        acked = s.ok
        REPORT.append(f"fence: commit blocked on semi-sync -> promoted {new.name}, "
                      f"blocked commit acknowledged={acked}, on new primary={500 in rows(new)}, "
                      f"db-0 {'promoted again in place' if new.name == 'db-0' else 'read-only=' + str(p.read_only())}"
                      f"{', shut down by the fence and restarted' if shut_down else ''}, "
                      f"rebuildNeeded={r.json.get('rebuildNeeded')}")
    finally:
        s.join(30)


# ------------------------------------------------------------------- 2. quorum

@pytest.mark.all_servers
def test_failover_without_quorum_promotes_nothing(cluster):
    """3 servers, QUORUM=2 (both replicas must be examined): with one replica
    down an acknowledged commit may sit only there, so nothing is promoted
    unless a human forces it."""
    c = cluster
    c.bootstrap()
    p = c["db-0"]
    fill(p, 1, 20)
    c.wait_synced(p)
    c["db-2"].kill()
    p.kill()
    r = c.run("failover.sh", PRIMARY="db-0", QUORUM=2)
    assert r.rc == 1 and r.json["result"] == "error" and r.json["reason"] == "no-quorum", r
    assert "1 of 2 replicas answer; 2 needed" in r.json["message"], r
    assert "promoted" not in r.json
    assert c.writable() == [], "nothing promoted without quorum"
    assert c["db-1"].replica_status().get("Master_Port") == str(p.port), "db-1 left as it was"
    rf = c.run("failover.sh", PRIMARY="db-0", QUORUM=2, FORCE=1)
    assert rf.rc == 0 and rf.json["result"] == "promoted" and rf.json["primary"] == "db-1", rf
    assert rf.json["promoted"] == "db-1"
    assert c.writable() == ["db-1"]
    assert rows(c["db-1"]) == set(range(1, 21))
    REPORT.append(f"quorum: QUORUM=2 with 1 of 2 replicas -> no-quorum ({r.json['message']}); FORCE=1 -> promoted db-1")


# --------------------------------------------- 4. a restarted primary comes back

@pytest.mark.all_servers
def test_failover_single_server_restart_becomes_writable(world, request):
    """A one-server cluster: the primary restarts read-only; failover.sh
    (PODS one member, QUORUM=0) makes it writable again, nothing lost."""
    from dbcluster import Cluster
    c = Cluster(world, request.node.name, n=1)
    try:
        r0 = c.run("bootstrap.sh", PRIMARY="")
        assert r0.rc == 0, r0
        p = c["db-0"]
        p.query("CREATE DATABASE solo; CREATE TABLE solo.x (i INT PRIMARY KEY)")
        for i in range(1, 51):
            p.query(f"INSERT INTO solo.x VALUES ({i})")
        p.kill()
        p.start()
        assert p.read_only()
        r = c.run("failover.sh", PRIMARY="db-0", QUORUM=0)
        assert r.rc == 0 and r.json["result"] == "promoted", r
        assert r.json["primary"] == "db-0" == r.json["from"] and r.json["promoted"] == "db-0", r
        assert r.json["semiSync"] is False and r.json["replicas"] == []
        assert not p.read_only()
        semisync = "rpl_semi_sync_source_enabled" if c.world.kind.mysql else "rpl_semi_sync_master_enabled"
        assert p.value(f"SELECT @@{semisync}") == "0"
        t0 = time.time()
        p.query("INSERT INTO solo.x VALUES (51)")
        assert time.time() - t0 < 5, "a one-member primary must not wait for an acknowledgement"
        assert p.value("SELECT COUNT(*) FROM solo.x") == "51"
        # rerun: the same end state
        r2 = c.run("failover.sh", PRIMARY="db-0", QUORUM=0)
        assert r2.rc == 0 and r2.json["primary"] == "db-0" and not p.read_only(), r2
        REPORT.append(f"restart: single server came back read-only -> failover.sh made it writable in {r.seconds:.1f}s")
    finally:
        c.close()


@pytest.mark.all_servers
def test_failover_restarted_primary_is_repromoted(cluster):
    """3 servers: the primary restarts (read-only).  It holds everything, so
    failover re-promotes it (no move) and the replicas keep following it;
    also when a replica is down and QUORUM cannot be met (the primary's own
    set contains every examined member's received set)."""
    from dbcluster import kill_primary_mid_stream
    c = cluster
    c.bootstrap()
    w = kill_primary_mid_stream(c)
    acked = set(w.acked)
    p = c["db-0"]
    p.start()
    assert p.read_only()
    r = c.run("failover.sh", PRIMARY="db-0")
    assert r.rc == 0 and r.json["result"] == "promoted", r
    assert r.json["primary"] == "db-0" == r.json["from"] == r.json["promoted"], r
    assert sorted(r.json["replicas"]) == ["db-1", "db-2"], r
    assert_one_writable_and_following(c, r)
    assert acked <= rows(p), "acknowledged rows lost"
    fill(p, 100001, 100010, "after")
    c.wait_synced(p)
    for s in c.servers:
        assert rows(s) == rows(p), s.name

    # a replica down, QUORUM=2 unreachable, the primary restarts again
    c["db-2"].kill()
    p.kill()
    p.start()
    r2 = c.run("failover.sh", PRIMARY="db-0", QUORUM=2)
    assert r2.rc == 0 and r2.json["primary"] == "db-0", r2
    assert r2.json["unreachable"] == ["db-2"] and r2.json["replicas"] == ["db-1"], r2
    assert c.writable() == ["db-0"]
    fill(p, 100011, 100012, "after")
    c.wait_synced(p)
    assert rows(c["db-1"]) == rows(p)
    REPORT.append(f"restart: 3-server primary restarted read-only -> re-promoted in place ({r.seconds:.1f}s), "
                  f"{len(acked)} acknowledged rows kept; again with db-2 down and QUORUM=2 -> re-promoted")


def _primary_with_older_copy(c):
    """Bootstraps 3 servers, writes rows 1-10 and takes a copy of db-0's data
    dir while it is stopped (an older volume to bring it back from later); db-0
    is then the writable primary again. Returns db-0 and the copy's path."""
    c.bootstrap()
    p = c["db-0"]
    fill(p, 1, 10)
    c.wait_synced(p)
    p.stop()
    old_copy = p.base / "data-older"
    shutil.copytree(p.datadir, old_copy, symlinks=True)
    p.start()
    r0 = c.run("failover.sh", PRIMARY="db-0")
    assert r0.rc == 0 and r0.json["primary"] == "db-0", r0
    return p, old_copy


@pytest.mark.all_servers
def test_failover_old_primary_alone_refuses(cluster):
    """3 servers: the primary comes back from an older copy of its volume
    while both replicas are down.  No replica answers, so nothing shows that
    it holds every acknowledged commit: nothing is promoted (issue 31.3;
    before, the quorum exception was vacuous with no member examined and
    promoted it, losing rows 11-20).  Once the replicas are back the cluster
    is writable again with every row."""
    c = cluster
    p, old_copy = _primary_with_older_copy(c)
    fill(p, 11, 20)
    c.wait_synced(p)
    for name in ("db-1", "db-2"):
        c[name].kill()
    p.kill()
    shutil.rmtree(p.datadir)
    old_copy.rename(p.datadir)
    p.start()
    assert rows(p) == set(range(1, 11)), "db-0 is back from the older copy"
    r = c.run("failover.sh", PRIMARY="db-0", QUORUM=2)
    assert r.rc == 1 and r.json["reason"] == "no-quorum" and "promoted" not in r.json, r
    assert "0 of 2 replicas answer" in r.json["message"] and "no replica to compare it with" in r.json["message"], r
    assert c.writable() == [], "nothing promoted"
    for name in ("db-1", "db-2"):
        c[name].start()
    r2 = c.run("failover.sh", PRIMARY="db-0", QUORUM=2)
    assert r2.rc == 0 and r2.json["result"] == "promoted" and r2.json["primary"] in ("db-1", "db-2"), r2
    new = c[r2.json["primary"]]
    assert c.writable() == [new.name]
    assert rows(new) == set(range(1, 21)), "acknowledged rows 11-20 kept"
    REPORT.append(f"alone: old primary back from an older volume, both replicas down -> no-quorum ({r.json['message'][:60]}...); "
                  f"replicas back -> promoted {new.name} with all 20 rows")


@pytest.mark.all_servers
def test_failover_old_primary_lacking_its_known_position_refuses(cluster):
    """3 servers: db-1's receiver is stopped, so db-2 alone acknowledges rows
    11-20; then every server dies, db-0 comes back from an older copy of its
    volume (rows 1-10) beside the lagging db-1, db-2 stays down.  db-0 holds all
    db-1 has, so the quorum exception alone promoted it and lost rows 11-20
    (before issue 31.3).  With the position the hook last saw executed on db-0
    (PRIMARY_GTID) nothing is promoted; once db-2 is back the cluster is
    writable again with every row."""
    c = cluster
    p, old_copy = _primary_with_older_copy(c)
    c["db-1"].query(_stop(c, "IO_THREAD"))
    fill(p, 11, 20, "acked")        # each returned OK: acknowledged by db-2 alone
    known = p.gtid_position()       # what an inspection reports as db-0's gtid
    assert known
    for name in ("db-2", "db-1"):
        c[name].kill()
    p.kill()
    shutil.rmtree(p.datadir)
    old_copy.rename(p.datadir)
    p.start()
    c["db-1"].start()
    assert rows(p) == set(range(1, 11)) and rows(c["db-1"]) == set(range(1, 11))
    r = c.run("failover.sh", PRIMARY="db-0", QUORUM=2, PRIMARY_GTID=known)
    assert r.rc == 1 and r.json["reason"] == "no-quorum" and "promoted" not in r.json, r
    assert "lacks transactions the hook saw executed on it" in r.json["message"], r
    assert c.writable() == [], "nothing promoted"
    bad = c.run("failover.sh", PRIMARY="db-0", QUORUM=2, PRIMARY_GTID="0-1-$(id)")
    assert bad.rc == 1 and bad.json["reason"] == "bad-env", bad
    c["db-2"].start()
    r2 = c.run("failover.sh", PRIMARY="db-0", QUORUM=2, PRIMARY_GTID=known)
    assert r2.rc == 0 and r2.json["result"] == "promoted" and r2.json["primary"] == "db-2", r2
    assert c.writable() == ["db-2"]
    assert rows(c["db-2"]) == set(range(1, 21)), "acknowledged rows 11-20 kept"
    REPORT.append(f"known position: db-0 back from an older volume beside a lagging db-1, db-2 down: "
                  f"PRIMARY_GTID=[{known[:40]}] -> no-quorum; db-2 back -> promoted db-2 with all 20 rows")


# ---------------------------------------------------- 3. relay_log_recovery

def _acked_only_in_relay_log(c, first=11, last=40):
    """db-1 acknowledges commits it does not apply (applier stopped); db-2
    receives nothing (receiver stopped): rows first..last are acknowledged to
    the client and exist only on db-0 and in db-1's relay log."""
    c.bootstrap()
    p = c["db-0"]
    fill(p, 1, first - 1)
    c.wait_synced(p)
    c["db-1"].query(_stop(c, "SQL_THREAD"))
    c["db-2"].query(_stop(c, "IO_THREAD"))
    fill(p, first, last, "acked")   # each returned OK: acknowledged by db-1
    assert rows(c["db-1"]) == set(range(1, first)), "db-1 has not applied them"
    return set(range(1, last + 1))


def _relay_log_chained_failure(world, request, recovery: str):
    from dbcluster import Cluster
    c = Cluster(world, request.node.name, extra_cnf=f"relay_log_recovery = {recovery}\n")
    try:
        acked = _acked_only_in_relay_log(c)
        c["db-1"].kill()      # the acknowledging replica crashes and restarts ...
        c["db-1"].start()
        c["db-0"].kill()      # ... then the primary dies
        r = c.run("failover.sh", PRIMARY="db-0")
        assert r.rc == 0 and r.json["result"] == "promoted", r
        new = c[r.json["primary"]]
        lost = acked - rows(new)
        return r, new, lost
    finally:
        c.close()


@pytest.mark.all_servers
def test_relay_log_recovery_off_keeps_acknowledged_commits(world, request):
    """relay_log_recovery=OFF (what the hook renders): a replica that
    acknowledged commits it had not applied restarts, then the primary dies;
    failover promotes it and applies its relay log: nothing lost."""
    r, new, lost = _relay_log_chained_failure(world, request, "OFF")
    REPORT.append(f"relay_log_recovery=OFF: restarted replica held 30 acknowledged rows in its relay log -> "
                  f"promoted {new.name}, lost {len(lost)}")
    assert new.name == "db-1", r
    assert not lost, f"acknowledged rows lost: {sorted(lost)}"


@pytest.mark.all_servers
def test_relay_log_recovery_on_loses_acknowledged_commits(world, request):
    """The same chained failure with relay_log_recovery=ON: the restarted
    replica throws its relay log away, the acknowledged rows are lost.  This
    test documents why the hook must render OFF; it asserts the loss."""
    r, new, lost = _relay_log_chained_failure(world, request, "ON")
    REPORT.append(f"relay_log_recovery=ON: same chained failure -> promoted {new.name}, "
                  f"lost {len(lost)} of 30 acknowledged rows")
    assert lost == set(range(11, 41)), f"expected the 30 acknowledged rows to be lost, lost {sorted(lost)}"


MANY = 150_000   # single-row statements in one transaction: ~450,000 relay log events


def test_relay_log_survey_that_fails_refuses(world, request):
    """Issue 31.5: the survey of a restarted replica reads its relay log with
    SHOW RELAYLOG EVENTS under QUERY_TIMEOUT.  A read that timed out was
    counted as "file missing": the received set came out short, the replica
    was promoted and its unapplied, acknowledged relay log discarded.  Now a
    read that fails (timed out, killed) fails the survey: the replica counts as
    not examined and the failover refuses (no-quorum), losing nothing."""
    from dbcluster import Cluster
    c = Cluster(world, request.node.name, extra_cnf="relay_log_recovery = OFF\n")
    try:
        c.bootstrap()
        p = c["db-0"]
        fill(p, 1, 10)
        c.wait_synced(p)
        c["db-1"].query(_stop(c, "SQL_THREAD"))
        c["db-2"].query(_stop(c, "IO_THREAD"))
        # One acknowledged transaction of MANY statements: db-1 holds it only in its relay log.
        p.query("DELIMITER //\nCREATE PROCEDURE hook.many(a INT, b INT) BEGIN DECLARE i INT DEFAULT a; START TRANSACTION; "
                "WHILE i <= b DO INSERT INTO hook.t VALUES (i, 'acked', @@server_id, NOW(6)); SET i = i + 1; "
                "END WHILE; COMMIT; END //", timeout=120)
        p.query(f"CALL hook.many(11, {MANY + 10})", timeout=300)
        acked = set(range(1, MANY + 11))
        assert rows(c["db-1"]) == set(range(1, 11)), "db-1 has not applied them"
        c["db-1"].kill()
        c["db-1"].start()
        p.kill()
        start = time.monotonic()
        r = c.run("failover.sh", PRIMARY="db-0", QUERY_TIMEOUT="0.3")
        took = time.monotonic() - start
        assert r.rc == 1 and r.json["reason"] == "no-quorum" and "promoted" not in r.json, r
        assert "db-1: reading its relay log relay-bin." in r.stderr and "did not finish" in r.stderr, r
        assert c.writable() == []
        # With time enough to read it, the same failover promotes db-1 and keeps everything.
        r2 = c.run("failover.sh", PRIMARY="db-0")
        assert r2.rc == 0 and r2.json["primary"] == "db-1", r2
        lost = acked - rows(c["db-1"])
        REPORT.append(f"relay log survey: {MANY} unapplied acknowledged statements, QUERY_TIMEOUT=0.3 -> "
                      f"no-quorum in {took:.1f}s; then QUERY_TIMEOUT=60 -> promoted db-1 in {r2.seconds:.1f}s, "
                      f"lost {len(lost)}")
        assert not lost, f"{len(lost)} acknowledged rows lost"
    finally:
        c.close()


@pytest.mark.all_servers
def test_join_applies_relay_log_before_repointing(world, request):
    """After the restart the agent's join.sh runs while the primary is alive
    but its replication account cannot log in (a credential rotation): a
    CHANGE MASTER would drop the relay log and refetch nothing.  join.sh must
    apply the relay log first; then the primary dies and failover loses
    nothing."""
    from dbcluster import Cluster
    c = Cluster(world, request.node.name, extra_cnf="relay_log_recovery = OFF\n")
    try:
        acked = _acked_only_in_relay_log(c)
        p = c["db-0"]
        c["db-1"].kill()
        c["db-1"].start()
        p.query("SET SESSION sql_log_bin = 0; ALTER USER 'repl'@'%' ACCOUNT LOCK")
        pf = c.world.root / c.tag / "primary"
        pf.write_text("db-0\n")
        rj = c.run("join.sh", POD_NAME="db-1", PRIMARY_FILE=pf, JOIN_WAIT=3)
        assert rj.json["result"] in ("error", "joined", "waiting"), rj
        after_join = rows(c["db-1"])
        p.kill()
        r = c.run("failover.sh", PRIMARY="db-0")
        assert r.rc == 0 and r.json["primary"] == "db-1", r
        lost = acked - rows(c["db-1"])
        REPORT.append(f"join.sh on a restarted replica (receiver cannot log in): {len(after_join)} rows applied "
                      f"after join ({rj.json.get('result')}/{rj.json.get('reason', '')}), lost after failover {len(lost)}")
        assert not lost, f"acknowledged rows lost: {sorted(lost)}"
    finally:
        c.close()


# -------------------------------------------- 5. half-finished role changes

def _run_bg(c, script, **env):
    """Run a script in a thread; returns (thread, box) with box['r'] set at the end."""
    import threading
    box = {}

    def go():
        box["r"] = c.run(script, **env)
    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, box


def _block_applier(c, name: str, n: int = 5):
    """A client session on replica `name` holds row n locked; the next update
    of that row from the primary (acknowledged: the receiver still runs)
    stalls the replica's applier until `_release`.  MySQL refuses a locking
    read under super_read_only, so there the session holds a table read lock."""
    s = Session(c[name])
    if c.world.kind.mysql:
        s.send(f"LOCK TABLES hook.t READ; SELECT n FROM hook.t WHERE n = {n};")
    else:
        s.send(f"BEGIN; SELECT n FROM hook.t WHERE n = {n} FOR UPDATE;")
    assert s.wait_output(str(n)), s.err
    c["db-0"].query(f"UPDATE hook.t SET writer = 'u' WHERE n = {n}", user="app")
    return s


def _release(c, lock: Session):
    lock.send("UNLOCK TABLES;" if c.world.kind.mysql else "COMMIT;")


def _gtid_wait(c) -> str:
    """The function a script waits in for a replica's applier (sql_wait_executed)."""
    return "WAIT_FOR_EXECUTED_GTID_SET" if c.world.kind.mysql else "MASTER_GTID_WAIT"


def _waiting_in(s, text: str) -> bool:
    return any(text in (r[4] or "") for r in processlist(s))


@pytest.mark.all_servers
def test_failover_repoint_failure_after_promotion(cluster):
    """A member freezes between the promotion and its repointing: the Job
    still succeeds, names the promoted pod and lists the member in
    repointFailed; the agent's join.sh finishes the job once it is back."""
    c = cluster
    c.bootstrap()
    fill(c["db-0"], 1, 10)
    c.wait_synced(c["db-0"])
    lock = _block_applier(c, "db-1")
    c["db-0"].kill()
    t, box = _run_bg(c, "failover.sh", PRIMARY="db-0", CONNECT_TIMEOUT=2)
    try:
        wait_for(lambda: _waiting_in(c["db-1"], _gtid_wait(c)), 60, what="failover waiting for db-1's applier")
        c["db-2"].freeze()
        _release(c, lock)
        t.join(120)
        r = box["r"]
        assert r.rc == 0 and r.json["result"] == "promoted", r
        assert r.json["promoted"] == r.json["primary"] == "db-1", r
        assert r.json["repointFailed"] == ["db-2"] and r.json["replicas"] == [], r
        assert "db-2" in r.stderr and "repoint" in r.stderr
    finally:
        c["db-2"].thaw()
        lock.close()
    assert c.writable() == ["db-1"]
    pf = c.world.root / c.tag / "primary"
    pf.write_text("db-1\n")
    rj = c.run("join.sh", POD_NAME="db-2", PRIMARY_FILE=pf)
    assert rj.rc == 0 and rj.json["result"] == "joined", rj
    assert c["db-2"].replicating_from(c["db-1"])
    REPORT.append(f"half-finished failover: db-2 froze before its repoint -> promoted db-1, repointFailed {r.json['repointFailed']}, "
                  f"rc {r.rc}; join.sh then joined db-2")


@pytest.mark.all_servers
def test_switchover_repoint_failure_after_promotion(cluster):
    """The same for switchover: TARGET is promoted, a member that stops
    answering before its repointing is listed in repointFailed, the Job
    succeeds and names the promoted pod."""
    c = cluster
    c.bootstrap()
    fill(c["db-0"], 1, 10)
    c.wait_synced(c["db-0"])
    lock = _block_applier(c, "db-1")
    t, box = _run_bg(c, "switchover.sh", PRIMARY="db-0", TARGET="db-1", CONNECT_TIMEOUT=2, SWITCHOVER_WAIT=60)
    try:
        wait_for(lambda: _waiting_in(c["db-1"], _gtid_wait(c)), 60, what="switchover waiting for db-1")
        c["db-2"].freeze()
        _release(c, lock)
        t.join(120)
        r = box["r"]
        assert r.rc == 0 and r.json["result"] == "switched", r
        assert r.json["promoted"] == r.json["primary"] == "db-1", r
        assert r.json["repointFailed"] == ["db-2"] and r.json["replicas"] == ["db-0"], r
    finally:
        c["db-2"].thaw()
        lock.close()
    assert c.writable() == ["db-1"]
    REPORT.append(f"half-finished switchover: db-2 froze before its repoint -> switched to db-1, "
                  f"repointFailed {r.json['repointFailed']}, rc {r.rc}")


# ------------------------------------------------ 6. switchover without a freeze

class ReadOnlyPoller:
    """Samples read_only of some servers (a new connection per sample: the
    fence kills client connections) and records when each changed."""

    def __init__(self, servers, interval=0.02):
        import threading
        self.servers = servers
        self.interval = interval
        self.samples: list[tuple[float, dict]] = []
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop_flag.is_set():
            snap = {}
            for s in self.servers:
                try:
                    snap[s.name] = s.read_only()
                except Exception:  # noqa: BLE001 - a refused sample is no information
                    snap[s.name] = None
            self.samples.append((time.time(), snap))
            time.sleep(self.interval)

    def stop(self):
        self.stop_flag.set()
        self.thread.join(30)

    def first(self, name, value, after=0.0):
        return next((t for t, snap in self.samples if t >= after and snap.get(name) is value), None)

    def ever(self, name, value, until=None):
        return any(snap.get(name) is value for t, snap in self.samples if until is None or t <= until)


@pytest.mark.all_servers
def test_switchover_catches_up_before_fencing(cluster):
    """TARGET lags (its applier is held by a row lock) while a client writes:
    the primary stays writable during the catch-up, is made read-only only
    when TARGET has (nearly) caught up; the write freeze is reported."""
    from dbcluster import Writer
    c = cluster
    c.bootstrap()
    fill(c["db-0"], 1, 10)
    c.wait_synced(c["db-0"])
    lock = _block_applier(c, "db-1")
    # The writers run until the switchover is over and db-1 has taken a write, not
    # for a fixed time: on a loaded machine a fixed 12 s ended before db-1 opened.
    wa = Writer(c["db-0"], 1000, "a", stop_on_error=False, max_seconds=180)
    wb = Writer(c["db-1"], 5_000_000, "b", stop_on_error=False, max_seconds=180)
    poll = ReadOnlyPoller([c["db-0"], c["db-1"]])
    wa.start()
    wb.start()
    t0 = time.time()
    t, box = _run_bg(c, "switchover.sh", PRIMARY="db-0", TARGET="db-1", SWITCHOVER_WAIT=60)
    try:
        wait_for(lambda: _waiting_in(c["db-1"], _gtid_wait(c)), 30, what="switchover waiting for db-1")
        acked_before = len(wa.acked)
        time.sleep(3)   # TARGET cannot catch up meanwhile
        writable_during_wait = not poll.ever("db-0", True)
        acked_during_wait = len(wa.acked) - acked_before
        t_release = time.time()
        _release(c, lock)
        t.join(120)
        r = box["r"]
        if r.rc == 0:
            wait_for(lambda: wb.acked, 30, what="a write acknowledged by db-1 after the switchover")
    finally:
        lock.close()
        wa.stop()
        wb.stop()
        poll.stop()
    assert r.rc == 0 and r.json["result"] == "switched" and r.json["primary"] == "db-1", r
    assert writable_during_wait, "the primary was made read-only while TARGET was still catching up"
    assert acked_during_wait > 0, "writes must go on during the catch-up"
    ro_at = poll.first("db-0", True, after=t0)
    open_at = poll.first("db-1", False, after=t0)
    assert ro_at and open_at and ro_at >= t_release - 0.1, (ro_at, t_release)
    freeze = open_at - ro_at
    np = c["db-1"]
    c.wait_synced(np)
    acked = set(wa.acked) | set(wb.acked)
    lost = acked - rows(np)
    by_sid = {}
    for n, sid, ts in np.query("SELECT n, sid, ts FROM hook.t WHERE n >= 1000"):
        by_sid.setdefault(int(sid), []).append(ts)
    assert not lost, sorted(lost)[:20]
    assert max(by_sid[1]) < min(by_sid[2]), "db-0 and db-1 accepted writes at the same time"
    REPORT.append(f"switchover catch-up first: primary writable during a 3 s catch-up ({acked_during_wait} writes "
                  f"acknowledged meanwhile); write freeze (db-0 read-only -> db-1 writable) {freeze * 1000:.0f} ms "
                  f"(sampling {poll.interval * 1000:.0f} ms; script's frozenMs {r.json.get('frozenMs')}); last write on db-0 {max(by_sid[1])}, first on db-1 "
                  f"{min(by_sid[2])}; lost {len(lost)}")
    # The freeze is reported, not asserted: it is a speed figure (0.2 s alone, 6-9 s
    # with five suites and the real node on two cores in CI), and a timed assertion
    # failed CI on it. What must hold is above: writes during the catch-up, the
    # fence only after it, no overlap of the two writers, nothing lost.


@pytest.mark.all_servers
def test_switchover_catchup_timeout_never_fences(cluster):
    """TARGET cannot catch up within SWITCHOVER_WAIT: catchup-timeout, and
    the primary was never made read-only."""
    c = cluster
    c.bootstrap()
    fill(c["db-0"], 1, 10)
    c.wait_synced(c["db-0"])
    lock = _block_applier(c, "db-1")
    poll = ReadOnlyPoller([c["db-0"]])
    try:
        r = c.run("switchover.sh", PRIMARY="db-0", TARGET="db-1", SWITCHOVER_WAIT=3)
    finally:
        poll.stop()
        _release(c, lock)
        lock.close()
    assert r.rc == 1 and r.json["reason"] == "catchup-timeout", r
    assert "promoted" not in r.json
    assert not poll.ever("db-0", True), "the primary was made read-only"
    assert c.writable() == ["db-0"]
    fill(c["db-0"], 11, 12)
    REPORT.append(f"switchover catch-up timeout: catchup-timeout after {r.seconds:.1f}s, primary never read-only "
                  f"({len(poll.samples)} samples)")


# ------------------------------------------- 7. bootstrap over retained data

def _restart_all(c):
    """Every server stopped and started again: what recreating the cluster
    over its retained volumes does (each comes back read-only, replication
    threads stopped, replica configuration kept)."""
    for s in c.servers:
        s.stop()
    for s in c.servers:
        s.start()
    assert c.writable() == []


@pytest.mark.all_servers
def test_bootstrap_over_retained_data_takes_the_most_advanced(cluster):
    """A failover moved the primary to db-2 and more rows were written while
    db-0 was down; the cluster is recreated over its volumes and bootstrap
    runs with the hint PRIMARY=db-0: db-2 must become primary, no row lost;
    db-0, which also wrote a transaction of its own meanwhile, is reported
    rebuildNeeded, not joined."""
    c = cluster
    c.bootstrap()
    fill(c["db-0"], 1, 20)
    c.wait_synced(c["db-0"])
    c["db-0"].kill()
    c["db-1"].kill()
    r = c.run("failover.sh", PRIMARY="db-0", FORCE=1)
    assert r.rc == 0 and r.json["primary"] == "db-2", r
    c["db-1"].start()
    pf = c.world.root / c.tag / "primary"
    pf.write_text("db-2\n")
    rj = c.run("join.sh", POD_NAME="db-1", PRIMARY_FILE=pf)
    assert rj.rc == 0 and rj.json["result"] == "joined", rj
    fill(c["db-2"], 21, 40)
    c.wait_synced(c["db-2"])
    c["db-0"].start()
    _restart_all(c)
    # db-0 writes on its own while read-only (root bypasses MariaDB's read_only;
    # MySQL's super_read_only stops everyone, so it is lifted for the write)
    _errant_write(c, c["db-0"], "INSERT INTO hook.t VALUES (9000, 'errant', @@server_id, NOW(6))")
    rb = c.run("bootstrap.sh", PRIMARY="db-0", BOOTSTRAP_WAIT=20)
    assert rb.rc == 0 and rb.json["result"] == "bootstrapped", rb
    assert rb.json["primary"] == "db-2", rb
    assert rb.json["promoted"] == "db-2", rb
    assert rb.json["rebuildNeeded"] == ["db-0"] and rb.json["replicas"] == ["db-1"], rb
    assert c.writable() == ["db-2"]
    assert rows(c["db-2"]) == set(range(1, 41)), "no row lost"
    assert c["db-1"].replicating_from(c["db-2"])
    assert c["db-0"].read_only() and not c["db-0"].replica_status().get("Master_Host")  \
        or not c["db-0"].replicating_from(c["db-2"])
    # rerun: the same answer, nothing changes
    before = c.state()
    rb2 = c.run("bootstrap.sh", PRIMARY="db-0", BOOTSTRAP_WAIT=20)
    assert rb2.rc == 0 and rb2.json["primary"] == "db-2" and rb2.json["rebuildNeeded"] == ["db-0"], rb2
    assert c.state() == before

    # again over the volumes, the hint now a former replica as advanced as
    # db-2: the hint wins the tie; its stale replica configuration is reset
    _restart_all(c)
    rb3 = c.run("bootstrap.sh", PRIMARY="db-1", BOOTSTRAP_WAIT=20)
    assert rb3.rc == 0 and rb3.json["primary"] == "db-1", rb3
    assert c.writable() == ["db-1"] and not c["db-1"].replica_status().get("Master_Host")
    assert c["db-2"].replicating_from(c["db-1"])
    fill(c["db-1"], 41, 42)
    c.wait_synced(c["db-1"])
    assert rows(c["db-2"]) == set(range(1, 43))
    REPORT.append(f"bootstrap over retained volumes, hint db-0: chose {rb.json['primary']} (40 rows kept), "
                  f"rebuildNeeded {rb.json['rebuildNeeded']}; hint db-1 tied with db-2 -> db-1, stale replica "
                  f"configuration reset")


def test_bootstrap_over_diverged_data_refuses(cluster):
    """No member contains every other's transactions: diverged, listing
    the sets, nothing made writable (a human decides)."""
    c = cluster
    c.bootstrap()
    fill(c["db-0"], 1, 10)
    c.wait_synced(c["db-0"])
    _restart_all(c)
    # transactions of two former primaries (server_id 8 and 9), each on one member
    c["db-1"].query("SET SESSION server_id = 9; INSERT INTO hook.t VALUES (901, 'x', 9, NOW(6))")
    c["db-2"].query("SET SESSION server_id = 8; INSERT INTO hook.t VALUES (801, 'y', 8, NOW(6))")
    rb = c.run("bootstrap.sh", PRIMARY="db-0", BOOTSTRAP_WAIT=20)
    assert rb.rc == 1 and rb.json["reason"] == "diverged", rb
    assert "db-1=" in rb.json["message"] and "db-2=" in rb.json["message"], rb
    assert "promoted" not in rb.json
    assert c.writable() == []
    REPORT.append(f"bootstrap over diverged volumes: {rb.json['message'][:160]}")


@pytest.mark.all_servers
def test_bootstrap_waits_for_every_member_when_data_exists(cluster):
    c = cluster
    c.bootstrap()
    fill(c["db-0"], 1, 5)
    c.wait_synced(c["db-0"])
    _restart_all(c)
    c["db-2"].kill()
    rb = c.run("bootstrap.sh", PRIMARY="db-0", BOOTSTRAP_WAIT=3)
    assert rb.rc == 1 and rb.json["reason"] == "members-unreachable" and "db-2" in rb.json["message"], rb
    assert c.writable() == []


# ------------------------------------------------------------------ 8. drain

def prestop(c, pod: str, primary_file, **env):
    """Run the agent's prestop as the kubelet runs a preStop exec hook (no
    termination log of its own); returns (exit code, JSON line, stderr, seconds)."""
    import json
    import os
    import subprocess
    from dbcluster import AGENT, OPERATOR_PASSWORD, ROOT_PASSWORD
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FLAVOR": c.world.kind.flavor, "POD_NAME": pod,
            "PODS": c.pods, "PRIMARY_FILE": str(primary_file), "TMPDIR": str(c.world.root),
            "MYSQL_ROOT_PASSWORD": ROOT_PASSWORD, "OPERATOR_PASSWORD": OPERATOR_PASSWORD,
            "TERMINATION_LOG": str(c.world.root / "must-not-be-written")}
    full.update({k: str(v) for k, v in env.items()})
    t0 = time.time()
    p = subprocess.run([str(AGENT), "prestop"], env=full, capture_output=True, text=True, timeout=300)
    lines = [x for x in p.stdout.splitlines() if x.strip()]
    assert not (c.world.root / "must-not-be-written").exists()
    return p.returncode, json.loads(lines[-1]) if lines else {}, p.stderr, time.time() - t0


@pytest.mark.all_servers
def test_prestop_waits_for_the_switchover(cluster):
    """The primary's preStop hook holds the container until the hook's
    switchover has moved the primary away, then lets it stop; other pods and
    a hook that waits in vain never block (and never fail)."""
    import threading
    c = cluster
    c.bootstrap()
    pf = c.world.root / c.tag / "primary"
    pf.write_text("db-0\n")
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", prestop(c, "db-0", pf, PRESTOP_WAIT=60)), daemon=True)
    t.start()
    time.sleep(3)
    assert t.is_alive(), f"prestop of the primary returned before any switchover: {box}"
    rs = c.run("switchover.sh", PRIMARY="db-0", TARGET="db-1")
    t_switched = time.time()
    assert rs.rc == 0 and rs.json["result"] == "switched", rs
    t.join(30)
    assert not t.is_alive()
    rc, line, err, secs = box["r"]
    after = time.time() - t_switched
    assert rc == 0 and line["result"] == "handed-over" and line["newPrimary"] == "db-1", (line, err)
    assert after < 3, f"prestop returned {after:.1f}s after the switchover"
    # the file is stale (still db-0): db-1 is writable, so it is the primary and waits;
    # with no switchover coming it gives up at PRESTOP_WAIT (2 s), exit 0
    rc1, l1, _, s1 = prestop(c, "db-1", pf, PRESTOP_WAIT=2)
    assert rc1 == 0 and l1["result"] == "timeout" and 2 <= s1 < 8, (l1, s1)
    # a replica: at once
    rc2, l2, _, s2 = prestop(c, "db-2", pf)
    assert rc2 == 0 and l2["result"] == "not-primary" and s2 < 3, (l2, s2)
    # one member: at once
    rc3, l3, _, _ = prestop(c, "db-0", pf, PODS=f"db-0={c['db-0'].addr}")
    assert rc3 == 0 and l3["result"] == "single-member", l3
    # broken env: still exit 0
    rc4, l4, _, _ = prestop(c, "nope", pf)
    assert rc4 == 0 and l4["result"] == "error" and l4["reason"] == "bad-env", l4
    # the server is down: nothing to hand over
    c["db-2"].kill()
    rc5, l5, _, _ = prestop(c, "db-2", pf)
    assert rc5 == 0 and l5["result"] == "self-unreachable", l5
    REPORT.append(f"prestop: primary held {secs:.1f}s, returned {after:.2f}s after the switchover "
                  f"(switchover.sh {rs.seconds:.1f}s, frozenMs {rs.json.get('frozenMs')}); timeout case {s1:.1f}s; "
                  f"replica {s2:.2f}s")


def failover_past_a_cut_primary(c):
    """Bootstrap (db-0, epoch 0), rows 1-10, then a failover of epoch 1 that
    cannot reach db-0 (a cut network: PODS maps it to a closed port), so db-0
    stays writable beside the server it promoted, which it returns."""
    c.bootstrap()
    p = c["db-0"]
    fill(p, 1, 10)
    c.wait_synced(p)
    cut = " ".join(f"{s.name}=127.0.0.1:9" if s.name == "db-0" else f"{s.name}={s.addr}" for s in c.servers)
    r = c.run("failover.sh", PRIMARY="db-0", PODS=cut, EPOCH=1)
    assert r.rc == 0 and r.json["result"] == "promoted", r
    new = r.json["primary"]
    assert new != "db-0" and sorted(c.writable()) == sorted(["db-0", new]), "db-0 was not reachable: still writable"
    return c[new]


# ------------------------------------------------------------------ 31.8: receivers

@pytest.mark.all_servers
def test_failover_counts_only_stopped_receivers(cluster):
    """Issue 31.8 (review finding 10): a failover stops every member's receiver
    before it reads what each holds, so that nothing arrives after the read. The
    script ignored the statement's errors (`|| true`) and read the member anyway:
    one whose receiver went on running counted towards the quorum while the old
    primary, cut off from the Job but not from it, kept sending it commits.  Here
    db-2 refuses the stop (the operator account may not stop its receiver there),
    the Job cannot reach db-0, and QUORUM is 2: before the fix the failover
    promoted, db-2 still replicating from db-0; now db-2 is not examined and the
    failover refuses (no-quorum); with QUORUM 1 it goes on without db-2."""
    c = cluster
    c.bootstrap()
    p, lame = c["db-0"], c["db-2"]
    fill(p, 1, 10)
    c.wait_synced(p)
    revoke = "SET sql_log_bin = 0; REVOKE SUPER, {} ON *.* FROM 'mysqlhook'@'%'"
    if c.world.kind.mysql:   # a replica is super_read_only; read_only stays on
        lame.query("SET GLOBAL super_read_only = 0; " + revoke.format("REPLICATION_SLAVE_ADMIN")
                   + "; SET GLOBAL super_read_only = 1")
    else:
        lame.query(revoke.format("REPLICATION SLAVE ADMIN"))
    cut = " ".join(f"{s.name}=127.0.0.1:9" if s.name == "db-0" else f"{s.name}={s.addr}" for s in c.servers)
    r = c.run("failover.sh", PRIMARY="db-0", PODS=cut, EPOCH=1, QUORUM=2)
    assert r.rc != 0 and r.json.get("reason") == "no-quorum", r
    assert "db-2" in r.json.get("unreachable", []), r
    assert "db-2 is not examined: receiver-running" in r.stderr, r
    assert c.writable() == ["db-0"], c.writable()
    assert lame.replicating_from(p), "db-2's receiver still runs: it must not have counted"
    r = c.run("failover.sh", PRIMARY="db-0", PODS=cut, EPOCH=2, QUORUM=1)
    assert r.rc == 0 and r.json["result"] == "promoted" and r.json["primary"] == "db-1", r
    REPORT.append(f"receivers ({c.world.kind.name}): a member whose receiver could not be stopped was not "
                  f"examined (no-quorum at QUORUM 2, promoted without it at 1, {r.seconds:.1f}s)")


# ------------------------------------------------------------------ 31.8: events

def gtid_subset(c, a: str, b: str) -> bool:
    """The agent's GTID arithmetic: every transaction of `a` is in `b`."""
    return subprocess.run([str(AGENT), "gtid", "subset", a, b], env={"FLAVOR": c.world.kind.flavor},
                          capture_output=True).returncode == 0



@pytest.mark.all_servers
def test_events_follow_the_primary(cluster):
    """Issue 31.8: a replica's copy of an event is disabled there by the server
    (MariaDB SLAVESIDE_DISABLED, MySQL REPLICA_SIDE_DISABLED), and nothing enabled it
    after a promotion: an application's events stopped for good at the first role
    change.  On MariaDB the demoted old primary kept its events enabled, and one
    defined by an account that passes read_only (root here) went on writing there:
    errant transactions.  The agent sidecar's round enables the new primary's and
    (MariaDB) disables the read-only server's, without the binary log, as the
    event's own definer."""
    c = cluster
    c.bootstrap()
    p = c["db-0"]
    for s in c.servers:
        s.query("SET GLOBAL event_scheduler = ON")
    p.query("CREATE TABLE hook.ticks (id INT AUTO_INCREMENT PRIMARY KEY, sid INT);"
            "CREATE DEFINER = 'root'@'localhost' EVENT hook.tick ON SCHEDULE EVERY 1 SECOND "
            "DO INSERT INTO hook.ticks (sid) VALUES (@@server_id)")
    c.wait_synced(p)

    def event(s):
        return s.query("SELECT status, definer FROM information_schema.events WHERE event_name = 'tick'")[0]

    assert event(c["db-1"])[0] in ("SLAVESIDE_DISABLED", "REPLICA_SIDE_DISABLED"), event(c["db-1"])
    r = c.run("switchover.sh", PRIMARY="db-0", TARGET="db-1")
    assert r.rc == 0 and r.json["primary"] == "db-1", r
    new = c["db-1"]
    d = c.world.root / c.tag / "events"
    d.mkdir()
    pf = d / "primary"
    pf.write_text("db-1\n")
    for name in ("db-1", "db-0"):
        a = c.run("sidecar", POD_NAME=name, PRIMARY_FILE=pf, SERVER_SOCKET=c[name].sock,
                  AGENT_ITERATIONS=1, AGENT_INTERVAL=0)
        assert a.rc == 0, a
    assert event(new) == ["ENABLED", "root@localhost"], event(new)
    sid = new.value("SELECT @@server_id")
    wait_for(lambda: new.value(f"SELECT COUNT(*) FROM hook.ticks WHERE sid = {sid}") not in ("0", None), 10,
             what="the event to run on the new primary")
    if not c.world.kind.mysql:
        assert event(p)[0] == "SLAVESIDE_DISABLED", event(p)
    time.sleep(2)
    c.wait_synced(new)
    # the old primary wrote nothing of its own after the role change
    assert gtid_subset(c, p.gtid_position(), new.gtid_position()), (p.gtid_position(), new.gtid_position())
    REPORT.append(f"events ({c.world.kind.name}): enabled on the new primary by its agent's round "
                  f"({event(new)[0]}, definer {event(new)[1]}), the old primary's "
                  f"{event(p)[0]}, no errant transaction")


# ------------------------------------------------------------------ 31.1: epochs

def mounted_record(c, name: str, primary: str = "db-0", epoch: int = 0):
    """The config ConfigMap's `primary` and `epoch` as a pod mounts them: two
    files (PRIMARY_FILE, EPOCH_FILE) the test rewrites as the kubelet would."""
    d = c.world.root / c.tag / name
    d.mkdir()
    pf, ef = d / "primary", d / "epoch"
    pf.write_text(f"{primary}\n")
    ef.write_text(f"{epoch}\n")
    return pf, ef


@pytest.mark.all_servers
def test_an_unreachable_old_primary_fences_itself_on_a_newer_epoch(cluster):
    """Issue 31.1: a failover that cannot reach the old primary promotes (semi-sync
    holds what it acknowledged), but the old primary stays writable.  Once it learns
    of the newer epoch (the mounted config: primary and epoch), its own agent fences
    it; until then its readiness fails, and a newly promoted primary is never fenced
    by a file that still names its predecessor."""
    c = cluster
    p = c["db-0"]
    new = failover_past_a_cut_primary(c).name
    # The new primary's agent, while its mounted file still names db-0 of epoch 0: untouched.
    pf, ef = mounted_record(c, "epochs")
    a = c.run("sidecar", POD_NAME=new, PRIMARY_FILE=pf, EPOCH_FILE=ef, SERVER_SOCKET=c[new].sock,
              AGENT_ITERATIONS=1, AGENT_INTERVAL=0)
    assert not c[new].read_only() and "fenced-self" not in a.stdout, a
    # The file moves on (the hook recorded the failover): db-0 is an old primary.
    pf.write_text(new + "\n")
    ef.write_text("1\n")
    rc, out = probe(c, "readiness", "db-0", pf, EPOCH_FILE=ef)
    assert rc == 1 and "an old primary" in out, out
    t0 = time.time()
    a = c.run("sidecar", POD_NAME="db-0", PRIMARY_FILE=pf, EPOCH_FILE=ef, SERVER_SOCKET=p.sock,
              AGENT_ITERATIONS=2, AGENT_INTERVAL=0)
    fenced_s = time.time() - t0
    assert '"result":"fenced-self"' in a.stdout, a
    assert c.writable() == [new], c.writable()
    # and, read-only now, it rejoined the new primary as a replica (its second round)
    wait_for(lambda: p.replicating_from(c[new]), 30, what="db-0 replicating from the new primary")
    fill(c[new], 11, 20)
    c.wait_synced(c[new])
    assert rows(p) == set(range(1, 21))
    REPORT.append(f"epochs: an unreachable old primary fenced itself by its agent in {fenced_s:.1f}s "
                  f"(one agent round) once the file named {new} of epoch 1, then rejoined it")


@pytest.mark.all_servers
def test_a_newer_epoch_reaches_the_old_primary_before_its_mounted_record(cluster):
    """Issue 32.5: the mounted record (config `primary`, `epoch`) reaches a pod up
    to a minute after the hook wrote it. An old primary whose record still names
    it, and which is read-only, asks the other members: one that is writable,
    replicates from nobody and carries a newer epoch is the newer decision. Its
    readiness and its agent's join follow that one at once, never an older one."""
    c = cluster
    c.bootstrap()   # db-0, epoch 0
    p = c["db-0"]
    fill(p, 1, 10)
    c.wait_synced(p)
    pf, ef = mounted_record(c, "record")
    # A switchover to db-1 (epoch 1) repoints db-0; its record still says db-0 of 0.
    r = c.run("switchover.sh", PRIMARY="db-0", TARGET="db-1", EPOCH=1)
    assert r.rc == 0 and r.json["result"] == "switched", r
    assert p.replicating_from(c["db-1"])
    rc, out = probe(c, "readiness", "db-0", pf, EPOCH_FILE=ef)
    assert rc == 0 and "replicates from" in out, out
    # An epoch not newer than the record's is no decision: a record of epoch 1
    # naming db-0 is not overruled by db-1 of epoch 1.
    ef.write_text("1\n")
    rc, out = probe(c, "readiness", "db-0", pf, EPOCH_FILE=ef)
    assert rc == 1 and "recorded primary but read-only" in out, out
    ef.write_text("0\n")
    # A failover to db-2 (epoch 2) while db-1, the primary, is down: db-1 comes back
    # read-only and replicating from nobody, its record naming it (epoch 1).
    q = c["db-1"]
    fill(q, 11, 20)
    c.wait_synced(q)
    q.kill()
    r = c.run("failover.sh", PRIMARY="db-1", EPOCH=2)
    assert r.rc == 0 and r.json["result"] == "promoted", r
    new = c[r.json["primary"]]
    q.start()
    assert q.read_only() and not q.replicating_from(new)
    pf.write_text("db-1\n")
    ef.write_text("1\n")
    rc, out = probe(c, "readiness", "db-1", pf, EPOCH_FILE=ef)
    assert rc == 1, out
    # its agent's round follows the newer primary: joined, then Ready
    t0 = time.time()
    a = c.run("sidecar", POD_NAME="db-1", PRIMARY_FILE=pf, EPOCH_FILE=ef, SERVER_SOCKET=q.sock,
              AGENT_ITERATIONS=1, AGENT_INTERVAL=0)
    joined_s = time.time() - t0
    assert '"result":"joined"' in a.stdout or '"result":"already-replica"' in a.stdout, a
    wait_for(lambda: q.replicating_from(new), 30, what=f"db-1 replicating from {new.name}")
    rc, out = probe(c, "readiness", "db-1", pf, EPOCH_FILE=ef)
    assert rc == 0 and "replicates from" in out, out
    # A replica the failover could not repoint: still connecting to a primary
    # that is gone (a closed port here); its record names db-1 of epoch 1. Its
    # agent follows the newer primary too (join.sh applies what it received first).
    other = next(s for s in c.servers if s.name not in ("db-1", new.name))
    if c.world.kind.mysql:
        other.query("STOP REPLICA; CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT=9; START REPLICA")
    else:
        other.query("STOP SLAVE; CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=9; START SLAVE")
    rc, out = probe(c, "readiness", other.name, pf, EPOCH_FILE=ef)
    assert rc == 1, out
    a = c.run("sidecar", POD_NAME=other.name, PRIMARY_FILE=pf, EPOCH_FILE=ef, SERVER_SOCKET=other.sock,
              AGENT_ITERATIONS=1, AGENT_INTERVAL=0)
    assert '"result":"joined"' in a.stdout, a
    wait_for(lambda: other.replicating_from(new), 30, what=f"{other.name} replicating from {new.name}")
    fill(new, 21, 30)
    c.wait_synced(new)
    assert rows(q) == rows(other) == set(range(1, 31))
    REPORT.append(f"epochs: an old primary whose record was stale followed the newer primary {new.name} "
                  f"(epoch 2) in one agent round ({joined_s:.1f}s), and was Ready after a switchover at once; "
                  f"so did a replica a failover had not repointed")


class Forwarder:
    """A Service as kube-proxy makes one: one address, every new connection
    forwarded to the server it currently leads to (`to`), which can change;
    connections already made stay where they are."""

    def __init__(self, port: int):
        import socket
        self.to = port
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.port = self.lsock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        import socket
        while True:
            try:
                a, _ = self.lsock.accept()
            except OSError:
                return
            try:
                b = socket.create_connection(("127.0.0.1", self.to), timeout=5)
            except OSError:
                a.close()
                continue
            for x, y in ((a, b), (b, a)):
                threading.Thread(target=self._pipe, args=(x, y), daemon=True).start()

    @staticmethod
    def _pipe(x, y):
        try:
            while data := x.recv(65536):
                y.sendall(data)
        except OSError:
            pass
        for sock in (x, y):
            try:
                sock.close()
            except OSError:
                pass

    def close(self):
        self.lsock.close()


def _client(srv, label: str) -> tuple[Session, str]:
    """A client session kept open on `srv`, and its connection id there."""
    session = Session(srv, force=True)
    session.send(f"SELECT CONCAT('{label}-', CONNECTION_ID()) AS id;")
    assert session.wait_output(f"{label}-", 10), session.err
    cid = next(line for line in session.out if line.startswith(f"{label}-")).split("-")[-1]
    return session, cid


def _connected(srv, cid: str) -> bool:
    """Whether connection `cid` is still open on `srv`. The question is a client
    session too: one the agent's release kills is asked again."""
    for _ in range(3):
        try:
            return srv.query(f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {int(cid)}") == [["1"]]
        except subprocess.CalledProcessError:
            time.sleep(0.2)
    raise AssertionError(f"{srv.name} does not answer")


@pytest.mark.all_servers
@pytest.mark.parametrize("record", ["stale", "refreshed"])
def test_stranded_clients_released(cluster, record):
    """Issue 35.1: a switchover fences the old primary (its client sessions
    killed), and the clients reconnect at once through the `-primary` Service,
    which leads to the old primary until the hook has recorded the new one. A
    client that keeps its connection (sysbench, most pools) then stays on a
    read-only server for good: no transaction for the rest of the real-server
    `--sysbench` run. The old primary's agent asks the Service (PRIMARY_SERVICE,
    here a forwarder standing in for kube-proxy) which server it leads to; once
    that is another, it kills the client sessions once, and leaves alone those
    opened later (through `-replicas`) and every replica's.  Whether or not the
    mounted record already names the new primary (`refreshed`: the real-server
    run's scenario 5, where the kubelet's refresh came first and a check of the
    record alone did nothing).  Before the fix the stranded session was still
    there 10 s after the Service moved."""
    c = cluster
    c.bootstrap()
    p, new, other = c["db-0"], c["db-1"], c["db-2"]
    fill(p, 1, 10)
    c.wait_synced(p)
    pf, ef = mounted_record(c, "stranded")
    service = Forwarder(p.port)
    agents = [c.spawn("sidecar", POD_NAME=s.name, PRIMARY_FILE=pf, EPOCH_FILE=ef, SERVER_SOCKET=s.sock,
                      PRIMARY_SERVICE=f"127.0.0.1:{service.port}", AGENT_INTERVAL=600)
              for s in (p, other)]
    sessions = []
    try:
        time.sleep(2)   # the agents' first rounds: db-0 is the writable primary
        r = c.run("switchover.sh", PRIMARY="db-0", TARGET="db-1", EPOCH=1)
        assert r.rc == 0 and r.json["result"] == "switched", r
        assert p.read_only() and p.replicating_from(new)
        if record == "refreshed":
            pf.write_text("db-1\n")
            ef.write_text("1\n")
        # a client that reconnected through the Service, which the hook has not
        # moved yet, and one of a replica
        stranded, stranded_id = _client(p, "stranded")
        replica_client, replica_id = _client(other, "replica")
        sessions += [stranded, replica_client]
        time.sleep(3)   # three rounds: the Service still leads to db-0, nothing to do
        assert _connected(p, stranded_id) and _connected(other, replica_id)
        service.to = new.port   # the hook recorded db-1, kube-proxy followed
        t0 = time.time()
        wait_for(lambda: not _connected(p, stranded_id), 10,
                 what="the stranded session killed once the Service moved")
        released_s = time.time() - t0
        # sessions opened after the move (a -replicas client) are left alone, and
        # so is every replica's
        later, later_id = _client(p, "later")
        sessions.append(later)
        time.sleep(3)
        assert _connected(p, later_id) and _connected(other, replica_id)
    finally:
        for a in agents:
            a.terminate()
        outs = [a.communicate(timeout=30)[0] for a in agents]
        for session in sessions:
            session.close()
        service.close()
    assert outs[0].count('"result":"released-clients"') == 1 and '"primary":"db-1"' in outs[0], outs[0]
    assert "released-clients" not in outs[1], outs[1]
    assert c.writable() == ["db-1"] and p.replicating_from(new)
    REPORT.append(f"stranded clients ({c.world.kind.name}, record {record}): the old primary's agent killed the "
                  f"client session left on it {released_s:.1f}s after the Service moved, once")


@pytest.mark.all_servers
def test_a_writable_old_primary_learns_a_newer_epoch_from_the_servers(cluster):
    """Issue 32.5, the writable side (31.1's cut network): after a failover that
    could not reach it, the old primary is still writable and its mounted record
    still names it (the kubelet refreshes it up to a minute late; cut off with its
    node, not at all). Its agent asks the other members while it is writable: one
    that serves as the primary of a newer epoch fences it at once, and it rejoins
    that one. The newer primary, asking the same question, finds nothing newer
    and is never fenced by the older writable server."""
    c = cluster
    p = c["db-0"]
    new = failover_past_a_cut_primary(c)
    # Every agent's record is the one from before the failover: db-0 of epoch 0.
    pf, ef = mounted_record(c, "stale")
    # Readiness asks the members too: the old primary is never Ready beside the
    # newer one, whatever its record says (before: "db-0 is the primary
    # (writable)"); the newer one is, its record naming db-0 of epoch 0.
    rc, out = probe(c, "readiness", "db-0", pf, EPOCH_FILE=ef)
    assert rc == 1 and f"{new.name} serves as the primary of epoch 1" in out, out
    rc, out = probe(c, "readiness", new.name, pf, EPOCH_FILE=ef)
    assert rc == 0, out
    # The new primary's agent sees the older writable db-0: nothing newer, untouched.
    a = c.run("sidecar", POD_NAME=new.name, PRIMARY_FILE=pf, EPOCH_FILE=ef, SERVER_SOCKET=new.sock,
              AGENT_ITERATIONS=1, AGENT_INTERVAL=0)
    assert not new.read_only() and "fenced-self" not in a.stdout, a
    # The old primary's agent, the network healed, its record unchanged: fenced in
    # its first round, rejoined in its second.
    t0 = time.time()
    a = c.run("sidecar", POD_NAME="db-0", PRIMARY_FILE=pf, EPOCH_FILE=ef, SERVER_SOCKET=p.sock,
              AGENT_ITERATIONS=2, AGENT_INTERVAL=0)
    fenced_s = time.time() - t0
    assert '"result":"fenced-self"' in a.stdout and new.name in a.stdout, a
    assert c.writable() == [new.name], c.writable()
    wait_for(lambda: p.replicating_from(new), 30, what=f"db-0 replicating from {new.name}")
    rc, out = probe(c, "readiness", "db-0", pf, EPOCH_FILE=ef)
    assert rc == 0 and "replicates from" in out, out
    fill(new, 11, 20)
    c.wait_synced(new)
    assert rows(p) == set(range(1, 21))
    REPORT.append(f"epochs: a writable old primary whose record still named it learned {new.name} (epoch 1) "
                  f"from the servers, fenced itself and rejoined in two agent rounds ({fenced_s:.1f}s)")


@pytest.mark.all_servers
def test_a_replica_never_follows_an_older_writable_primary(cluster):
    """Real-server scenario 15 (CI on 948e6e2): a failover that could not reach
    db-0 repointed the third server to the new primary, whose commits it
    acknowledges; its mounted record still named db-0 (epoch 0). The network
    healed and, in the second before db-0's agent fenced it, the replica's agent
    ran join.sh on that record: db-0 answered writable, replicating from nobody,
    so the replica's transactions from the new primary were "errant" and
    (rebuildErrant) it was wiped and seeded from db-0 -- the acknowledgements
    it held gone, and the new primary left with no replica. A replica that
    streams from another member than its record names asks the servers: the
    newer epoch's primary is followed, an older writable one never."""
    c = cluster
    p = c["db-0"]
    new = failover_past_a_cut_primary(c)
    other = next(s for s in c.servers if s.name not in ("db-0", new.name))
    assert other.replicating_from(new)
    fill(new, 11, 20)
    c.wait_synced(new)
    # the commit db-0 wrote as the cut began: never acknowledged (semi-sync off
    # here, so the test's own client is answered)
    semisync = "rpl_semi_sync_source_enabled" if c.world.kind.mysql else "rpl_semi_sync_master_enabled"
    p.query(f"SET GLOBAL {semisync}=OFF")
    fill(p, 100, 100)
    pf, ef = mounted_record(c, "stale")
    a = c.run("sidecar", POD_NAME=other.name, PRIMARY_FILE=pf, EPOCH_FILE=ef, SERVER_SOCKET=other.sock,
              REBUILD_ERRANT="true", AGENT_ITERATIONS=1, AGENT_INTERVAL=0)
    assert '"result":"already-replica"' in a.stdout and f'"primary":"{new.name}"' in a.stdout, a
    assert other.replicating_from(new) and rows(other) == set(range(1, 21))
    assert sorted(c.writable()) == sorted(["db-0", new.name]), "nobody fenced db-0 here: its own agent does"
    assert rows(p) == set(range(1, 11)) | {100}


@pytest.mark.all_servers
def test_no_role_change_adopts_an_old_primary_left_writable(cluster):
    """Issue 31.1: a failover that could not reach db-0 left it writable, and the
    new primary has taken writes since.  A later role change that finds db-0
    writable and replicating from nobody must not take it for a promotion of its
    own ("adopt" it with no survey, quorum or containment check): that made a
    server lacking every write since the cut the primary again.  A server is
    adopted only when it carries the Job's own epoch (an earlier run of the same
    Job opened it); any other writable member is fenced and examined like every
    other.  Before the fix the switchover adopted db-0 (`rebuildNeeded` the
    others) and the failover adopted it too, losing rows 11 to 20."""
    c = cluster
    c.bootstrap()
    fill(c["db-0"], 1, 10)
    c.wait_synced(c["db-0"])
    cut = " ".join(f"{s.name}=127.0.0.1:9" if s.name == "db-0" else f"{s.name}={s.addr}" for s in c.servers)
    r = c.run("failover.sh", PRIMARY="db-0", PODS=cut, EPOCH=1)
    assert r.rc == 0 and r.json["result"] == "promoted", r
    new = r.json["primary"]
    other = next(s.name for s in c.servers if s.name not in ("db-0", new))
    assert sorted(c.writable()) == sorted(["db-0", new]), "db-0 was not reachable: still writable"
    fill(c[new], 11, 20)
    c.wait_synced(c[new])
    assert rows(c[other]) == set(range(1, 21))

    # The network heals, before db-0's agent has fenced it.  A switchover to it:
    # refused, and the primary was never fenced (writes go on).
    r = c.run("switchover.sh", PRIMARY=new, TARGET="db-0", EPOCH=2)
    assert r.rc != 0 and r.json["result"] == "error" and "promoted" not in r.json, r
    assert r.json["reason"] == "target-not-replicating", r
    assert c.writable() == [new], ("the stale writer is fenced, the primary untouched", c.writable())

    # The same again, and then the new primary dies: the failover examines db-0
    # like any member and promotes the one holding every write.
    c["db-0"].query("SET GLOBAL read_only = OFF")
    dead = " ".join(f"{s.name}=127.0.0.1:9" if s.name == new else f"{s.name}={s.addr}" for s in c.servers)
    r = c.run("failover.sh", PRIMARY=new, PODS=dead, EPOCH=2)
    assert r.rc == 0 and r.json["result"] == "promoted", r
    assert r.json["primary"] == other, ("db-0 lacks rows 11-20: not the choice", r)
    assert c["db-0"].read_only(), "db-0 was fenced"
    assert rows(c[other]) == set(range(1, 21)), "no acknowledged row lost"

    # A rerun of that same Job (epoch 2) finds its own promotion and adopts it:
    # no second fence, no write freeze.
    before = c[other].gtid_position()
    r2 = c.run("failover.sh", PRIMARY=new, PODS=dead, EPOCH=2)
    assert r2.rc == 0 and r2.json["primary"] == other and not c[other].read_only(), r2
    assert "adopting" in r2.stderr, r2
    assert c[other].gtid_position() == before
    REPORT.append(f"adopt: a writable old primary left by a cut failover was refused as a switchover target "
                  f"and examined, not adopted, by the next failover ({other} promoted with rows 1-20); "
                  "a rerun of the same epoch's Job adopted its own promotion")


# ------------------------------------------------------------ 9. scale-down

def _acked_only_by_the_leaving_replica(c):
    """3 servers; db-1's receiver is stopped, so db-2 alone acknowledges rows
    11..30; then a scale-down to 2 removes db-2.  Returns every acknowledged row."""
    c.bootstrap()
    p = c["db-0"]
    fill(p, 1, 10)
    c.wait_synced(p)
    c["db-1"].query(_stop(c, "IO_THREAD"))
    fill(p, 11, 30, "acked")        # each returned OK: acknowledged by db-2 alone
    c["db-2"].kill()                # the StatefulSet removes db-2
    assert rows(c["db-1"]) == set(range(1, 11)), "db-1 has not received them"
    return set(range(1, 31))


def _kept(c) -> str:
    """PODS after the scale-down to two servers."""
    return " ".join(f"{s.name}={s.addr}" for s in c.servers if s.name != "db-2")


@pytest.mark.all_servers
def test_scale_down_unproven_keeps_the_old_quorum(cluster):
    """Issue 31.4, the failure: the hook gave a failover after a scale-down from
    3 to 2 servers QUORUM=1 at once.  Rows only the removed replica acknowledged
    are then lost when the primary dies before the remaining replica has them;
    with the old QUORUM (2), which the hook now keeps until `scale-down` has
    proven it safe, the failover refuses instead."""
    c = cluster
    acked = _acked_only_by_the_leaving_replica(c)
    c["db-0"].kill()
    r = c.run("failover.sh", PRIMARY="db-0", PODS=_kept(c), QUORUM=2)
    assert r.rc == 1 and r.json["reason"] == "no-quorum" and "promoted" not in r.json, r
    assert c.writable() == []
    # What the hook passed before the fix: db-1 is promoted without rows 11..30.
    r1 = c.run("failover.sh", PRIMARY="db-0", PODS=_kept(c), QUORUM=1)
    assert r1.rc == 0 and r1.json["primary"] == "db-1", r1
    lost = acked - rows(c["db-1"])
    assert lost == set(range(11, 31)), lost
    REPORT.append(f"scale-down: 3 -> 2 servers, primary dead before the proof: QUORUM=2 (kept) -> no-quorum; "
                  f"QUORUM=1 (before issue 31.4) -> promoted db-1 and lost {len(lost)} acknowledged rows")


@pytest.mark.all_servers
def test_scale_down_proven_by_a_remaining_replica(cluster):
    """Issue 31.4, the fix: `scale-down` succeeds only once a remaining replica has
    executed the primary's set read after the removed server was gone; from then
    on QUORUM=1 keeps every acknowledged row through a failover."""
    c = cluster
    acked = _acked_only_by_the_leaving_replica(c)
    r = c.run("scale-down", PRIMARY="db-0", PODS=_kept(c), SCALE_DOWN_WAIT=2)
    assert r.rc == 1 and r.json["reason"] == "replicas-behind", r
    assert "db-1 is at [" in r.json["message"], r
    r = c.run("scale-down", PRIMARY="db-0", PODS=_kept(c), SCALE_DOWN_WAIT="soon")
    assert r.rc == 1 and r.json["reason"] == "bad-env", r
    # db-1's agent starts its receiver again (here: by hand)
    start = f"START {'REPLICA' if c.world.kind.mysql else 'SLAVE'} IO_THREAD"
    c["db-1"].query(start)
    settled = c.run("scale-down", PRIMARY="db-0", PODS=_kept(c), SCALE_DOWN_WAIT=60)
    assert settled.rc == 0 and settled.json["result"] == "settled" and settled.json["pod"] == "db-1", settled
    assert settled.json["primary"] == "db-0" and settled.json["gtid"], settled
    assert acked <= rows(c["db-1"])
    c["db-0"].kill()
    rf = c.run("failover.sh", PRIMARY="db-0", PODS=_kept(c), QUORUM=1)
    assert rf.rc == 0 and rf.json["primary"] == "db-1", rf
    assert acked <= rows(c["db-1"]), "an acknowledged row was lost"
    # A primary that a role change made read-only proves nothing.
    r = c.run("scale-down", PRIMARY="db-0", PODS=_kept(c))
    assert r.rc == 1 and r.json["reason"] == "primary-unreachable", r
    REPORT.append(f"scale-down: proven in {settled.seconds:.1f}s once db-1 received rows 11-30 that only the removed "
                  "db-2 acknowledged; the failover with QUORUM=1 then kept all 30")


@pytest.mark.all_servers
def test_a_stopping_primary_acks_no_commit_no_replica_has(cluster):
    """Scenario 8 on MySQL 9.7.4 (see docs/guarantees.md): a commit waiting for an
    acknowledgement no replica can give, the primary then stopped (SIGTERM), and a
    shutdown ends the wait and commits: its client got OK (2 of 2 runs on MySQL
    9.7.4).  The preStop hook now fences a server still writable when it returns
    (client sessions killed, the server shut down by the agent), so the waiting
    client's connection drops instead.  Judged by the INSERT's own OK packet."""
    c = cluster
    c.bootstrap()
    p = c["db-0"]
    fill(p, 1, 10)
    c.wait_synced(p)
    c["db-1"].freeze()
    c["db-2"].stop()
    t = _Commit(p, "INSERT INTO hook.t VALUES (500, 'blocked', @@server_id, NOW(6))")
    try:
        wait_for(lambda: any("semi-sync" in (r[3] or "") for r in processlist(p, "app")),
                 what="commit waiting for ACK")
        pf = c.world.root / c.tag / "primary"
        pf.write_text("db-0\n")
        rc, out, err, secs = prestop(c, "db-0", pf, PRESTOP_WAIT=2)
        assert rc == 0 and out.get("fenced") is True, (out, err)
        p.stop()   # the kubelet's SIGTERM once the hook returned (mysqld may be gone already)
        t.join(30)
        assert not t.ok, f"a commit no replica has was acknowledged at shutdown ({out})"
        p.start()
        assert p.read_only(), "it restarts read-only"
        REPORT.append(f"stopping primary ({c.world.kind.name}): preStop fenced it "
                      f"({out.get('message', '').split('fenced before the stop: ')[-1]}); the waiting commit: {t.error}")
    finally:
        c["db-1"].thaw()

"""Role changes (failover, switchover, bootstrap, drain) against real MariaDB
servers: the promise that a commit that returned OK is never lost, that there
are never two writable servers, and that the cluster comes back writable by
itself (issue 14).  Fixtures in conftest.py, harness in dbcluster.py."""

from __future__ import annotations

import time

from conftest import REPORT
from dbcluster import Session, rows, wait_for


def processlist(s, user=None):
    q = "SELECT ID, USER, COMMAND, STATE, INFO FROM information_schema.PROCESSLIST"
    return [r for r in s.query(q) if user is None or r[1] == user]


def fill(s, first, last, label="r"):
    for i in range(first, last + 1):
        s.query(f"INSERT INTO hook.t VALUES ({i}, '{label}', @@server_id, NOW(6))", user="app")


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
            assert c.writable() == [], "nothing promoted, the old primary not writable"
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


def test_failover_blocked_commit_never_completes_beside_new_primary(cluster):
    """Both receivers are cut off: a commit on the primary waits for a
    semi-sync acknowledgement that never comes, and blocks SET read_only.
    After failover that commit must not be acknowledged unless it is on the
    new primary, and there must never be a second writable server."""
    c = cluster
    c.bootstrap()
    p = c["db-0"]
    fill(p, 1, 10)
    c.wait_synced(p)
    for n in ("db-1", "db-2"):
        c[n].query("STOP SLAVE IO_THREAD")
    s = Session(p, "app")
    s.send("INSERT INTO hook.t VALUES (500, 'blocked', @@server_id, NOW(6)); SELECT 'acked-500';")
    wait_for(lambda: any("semi-sync" in (r[3] or "") for r in processlist(p, "app")), what="commit waiting for ACK")
    r = c.run("failover.sh", PRIMARY="db-0")
    try:
        assert r.rc == 0 and r.json["result"] == "promoted", r
        new = assert_one_writable_and_following(c, r)
        # watch for a while: the old primary must stay read-only, the commit
        # must never be acknowledged while missing on the new primary
        deadline = time.time() + 5
        while time.time() < deadline:
            assert c.writable() == [new.name], c.writable()
            if "acked-500" in s.out:
                assert 500 in rows(new), "a commit acknowledged on the old primary is not on the new one"
            time.sleep(0.2)
        acked = "acked-500" in s.out
        REPORT.append(f"fence: commit blocked on semi-sync -> promoted {new.name}, "
                      f"blocked commit acknowledged={acked}, on new primary={500 in rows(new)}, "
                      f"old primary read-only={c['db-0'].read_only()}, rebuildNeeded={r.json.get('rebuildNeeded')}")
    finally:
        s.close()

"""Replicas that can always be added, replaced and trusted (issue 15), against
real MariaDB servers: seeding a new or emptied server from a donor (seed.sh,
through join.sh as the agent runs it), readiness that follows replication
(probe.sh), errant replicas rebuilt when opted in, and scaling under a write
stream.  See dbcluster.py for how servers are set up."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import REPORT
from dbcluster import APP_PASSWORD, Cluster, Writer, probe, rows, wait_for


def pod_dir(c: Cluster, name: str) -> Path:
    """A pod's own /tmp (the emptyDir its containers share) and its view of
    the config ConfigMap."""
    d = c.world.root / c.tag / f"pod-{name}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def primary_file(c: Cluster, primary: str = "db-0") -> Path:
    f = c.world.root / c.tag / "primary"
    f.write_text(primary + "\n")
    return f


def join(c: Cluster, name: str, primary: str = "db-0", **env):
    """join.sh as the pod's agent runs it."""
    d = pod_dir(c, name)
    env.setdefault("PRIMARY_FILE", str(primary_file(c, primary)))
    return c.run("join.sh", POD_NAME=name, SEED_MARKER=str(d / "seeding"), REBUILD_MARKER=str(d / "rebuild"),
                 TMPDIR=str(d), **env)


def fill(s, schema: str, mb: int):
    """About `mb` MB of InnoDB rows (1 KB each, a secondary index) in
    schema.t, written through the binary log like application writes."""
    rows_ = max(1, mb * 1024)
    s.query(f"CREATE DATABASE IF NOT EXISTS {schema};"
            f"CREATE TABLE {schema}.t (id INT PRIMARY KEY, k INT, pad VARCHAR(1000), KEY(k)) ENGINE=InnoDB")
    step = 50000
    for lo in range(0, rows_, step):
        hi = min(rows_, lo + step)
        s.query(f"INSERT INTO {schema}.t SELECT seq, seq % 1000, REPEAT(MD5(seq), 30) "
                f"FROM {schema}.seq_{lo + 1}_to_{hi}", timeout=3600)


def purge_binlogs(p):
    """PURGE BINARY LOGS up to the current file: the primary no longer has the
    history since the cluster began."""
    p.query("FLUSH BINARY LOGS")
    current = p.query("SHOW MASTER STATUS")[0][0]

    def purged():
        # a file stays while a binlog checkpoint or a reader still needs it
        p.query(f"PURGE BINARY LOGS TO '{current}'")
        return p.query("SHOW BINARY LOGS")[0][0] == current
    wait_for(purged, timeout=30, interval=0.5, what=f"binary logs before {current} purged")


def same_data(a, b, tables=("hook.t",)):
    for t in tables:
        qa = a.query(f"CHECKSUM TABLE {t}")[0][1]
        qb = b.query(f"CHECKSUM TABLE {t}")[0][1]
        assert qa == qb, f"{t}: {a.name} {qa} != {b.name} {qb}"


def test_seed_new_replica_after_purge(cluster):
    """Scale-up after PURGE BINARY LOGS: the new server copies a donor replica
    and replicates from the donor's position; nothing is missing or doubled,
    accounts created after bootstrap included."""
    c = cluster
    c.bootstrap()
    p = c["db-0"]
    for i in range(1, 51):
        p.query(f"INSERT INTO hook.t VALUES ({i}, 'a', @@server_id, NOW(6))", user="app")
    p.query("CREATE USER 'reader'@'%' IDENTIFIED BY 'rpw'; GRANT SELECT ON hook.* TO 'reader'@'%'")
    c.wait_synced(p)
    purge_binlogs(p)

    new = c.add("db-3")
    r = join(c, "db-3")
    assert r.rc == 0 and r.json["result"] == "joined" and r.json["seededFrom"] == "db-1", r
    for i in range(51, 101):
        p.query(f"INSERT INTO hook.t VALUES ({i}, 'b', @@server_id, NOW(6))", user="app")
    c.wait_synced(p)
    assert new.replicating_from(p)
    assert rows(new) == set(range(1, 101))
    same_data(p, new)
    # accounts came along (and replication of account statements goes on)
    p.query("ALTER USER 'reader'@'%' IDENTIFIED BY 'rpw2'")
    c.wait_synced(p)
    out = subprocess.run(["mariadb", "--no-defaults", "--protocol=TCP", "-h", "127.0.0.1", "-P", str(new.port),
                          "-ureader", "-prpw2", "-N", "-B", "-e", "SELECT COUNT(*) FROM hook.t"],
                         capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "100", out
    # the copy's GTID history is the donor's: nothing of its own
    assert new.value("SELECT @@gtid_binlog_state") == p.value("SELECT @@gtid_binlog_state")
    assert not (pod_dir(c, "db-3") / "seeding").exists()
    # a rerun is a no-op
    r2 = join(c, "db-3")
    assert r2.rc == 0 and r2.json["result"] == "already-replica", r2
    REPORT.append(f"seed (scale-up after PURGE BINARY LOGS, tiny data): join.sh {r.seconds:.1f}s")


def test_seed_replaces_a_deleted_volume(cluster):
    """A replica whose volume was deleted comes back empty and is seeded; with
    the binary logs purged it could not catch up otherwise."""
    c = cluster
    c.bootstrap()
    p = c["db-0"]
    for i in range(1, 31):
        p.query(f"INSERT INTO hook.t VALUES ({i}, 'a', @@server_id, NOW(6))", user="app")
    c.wait_synced(p)
    purge_binlogs(p)
    c.wipe("db-2")
    assert c["db-2"].value("SELECT @@gtid_binlog_state") == ""
    r = join(c, "db-2")
    assert r.rc == 0 and r.json["result"] == "joined" and r.json["seededFrom"] == "db-1", r
    p.query("INSERT INTO hook.t VALUES (31, 'b', @@server_id, NOW(6))", user="app")
    c.wait_synced(p)
    assert rows(c["db-2"]) == set(range(1, 32))


def test_readiness_follows_replication(cluster):
    """A replica is Ready only while both threads run without error and its
    lag is within MAX_LAG_FILE; the reason is in the probe's line.  The agent's
    `candidate` probe stays up through what only concerns reads."""
    c = cluster
    c.bootstrap()
    p, r1 = c["db-0"], c["db-1"]
    pf = primary_file(c)
    d = pod_dir(c, "db-1")
    init = d / "initialized"
    init.write_text("true\n")
    lagf = d / "max-lag-seconds"
    lagf.write_text("60\n")
    env = dict(SEED_MARKER=d / "seeding", INITIALIZED_FILE=init, MAX_LAG_FILE=lagf)

    rc, out = probe(c, "readiness", "db-1", pf, d / "rebuild", **env)
    assert rc == 0 and out.startswith("ready: db-1 replicates from 127.0.0.1, lag 0s"), out

    # the applier stops on an error: NotReady, the error is shown
    r1.query("SET GLOBAL read_only=OFF; SET sql_log_bin=0; INSERT INTO hook.t VALUES (7, 'x', 0, NOW()); "
             "SET GLOBAL read_only=ON")
    p.query("INSERT INTO hook.t VALUES (7, 'y', @@server_id, NOW(6))", user="app")
    wait_for(lambda: r1.replica_status().get("Slave_SQL_Running") == "No", timeout=30, what="applier error")
    rc, out = probe(c, "readiness", "db-1", pf, d / "rebuild", **env)
    assert rc == 1 and "applier error 1062" in out and "Duplicate entry" in out, out
    assert probe(c, "candidate", "db-1", pf, d / "rebuild", **env) == (0, "candidate")
    r1.query("SET sql_log_bin=0; DELETE FROM hook.t WHERE n = 7; START SLAVE")
    wait_for(lambda: probe(c, "readiness", "db-1", pf, d / "rebuild", **env)[0] == 0, timeout=30,
             what="db-1 Ready after the error is gone")

    # behind by more than the limit: NotReady with the lag
    r1.query("STOP SLAVE; CHANGE MASTER TO MASTER_DELAY=30; START SLAVE")
    lagf.write_text("2\n")
    p.query("INSERT INTO hook.t VALUES (8, 'z', @@server_id, NOW(6))", user="app")
    out = wait_for(lambda: (lambda r: r[1] if r[0] == 1 else None)(
        probe(c, "readiness", "db-1", pf, d / "rebuild", **env)), timeout=30, interval=0.5, what="lag over 2 s")
    assert "lags" in out and "(at most 2s)" in out, out
    lagf.write_text("60\n")
    assert probe(c, "readiness", "db-1", pf, d / "rebuild", **env)[0] == 0
    r1.query("STOP SLAVE; CHANGE MASTER TO MASTER_DELAY=0; START SLAVE")

    # the primary dies: replicas turn NotReady (receiver error), candidates stay
    p.kill()
    out = wait_for(lambda: (lambda r: r[1] if r[0] == 1 else None)(
        probe(c, "readiness", "db-1", pf, d / "rebuild", **env)), timeout=30, interval=0.5, what="receiver error")
    assert "receiver" in out, out
    assert probe(c, "candidate", "db-1", pf, d / "rebuild", **env) == (0, "candidate")
    p.start()

    # seeding: not Ready, not a candidate, the donor and start time shown
    (d / "seeding").write_text("db-2 2026-11-30T10:00:00Z\n")
    rc, out = probe(c, "readiness", "db-1", pf, d / "rebuild", **env)
    assert rc == 1 and out == "not ready: db-1 is being seeded from db-2 since 2026-11-30T10:00:00Z (copying its data)"
    rc, out = probe(c, "candidate", "db-1", pf, d / "rebuild", **env)
    assert rc == 1 and "being seeded" in out
    (d / "seeding").unlink()
    # rebuild marker: not a candidate either
    (d / "rebuild").write_text("transactions db-0 lacks: 0-2-1\n")
    assert probe(c, "candidate", "db-1", pf, d / "rebuild", **env)[0] == 1
    (d / "rebuild").unlink()

    # a new, empty server of a bootstrapped cluster is not Ready before its
    # agent has seeded and joined it (it has no `repl` account of its own yet);
    # the same server before bootstrap (no initialized file) is
    new = c.add("db-3")
    rc, out = probe(c, "readiness", "db-3", pf, **env)
    assert rc == 1 and "does not replicate" in out, out
    rc, out = probe(c, "readiness", "db-3", pf)
    assert rc == 0 and "not bootstrapped yet" in out, out
    assert new.value("SELECT COUNT(*) FROM mysql.user WHERE user='repl'") == "0"


def test_stale_replica_behind_purge_is_copied_again(cluster):
    """A replica that was down while the primary purged the binary logs it
    needs (IO error 1236) holds nothing the primary lacks: it is copied again
    from a donor, not left broken."""
    c = cluster
    c.bootstrap()
    p, r2 = c["db-0"], c["db-2"]
    for i in range(1, 11):
        p.query(f"INSERT INTO hook.t VALUES ({i}, 'a', @@server_id, NOW(6))", user="app")
    c.wait_synced(p)
    r2.stop()
    for i in range(11, 21):
        p.query(f"INSERT INTO hook.t VALUES ({i}, 'b', @@server_id, NOW(6))", user="app")
    purge_binlogs(p)
    r2.start()
    r = join(c, "db-2")
    assert r.rc == 0 and r.json["result"] == "joined" and r.json["seededFrom"] == "db-1", r
    assert "no longer has the binary logs" in r.stderr
    c.wait_synced(p)
    assert rows(r2) == set(range(1, 21))


def test_errant_rebuild_opt_in_never_most_advanced(cluster):
    """An old primary back with a transaction of its own (errant).  Without
    the opt-in: rebuild-needed, NotReady (unchanged).  With it: still never
    rebuilt while it holds everything the primary has (it could be the most
    advanced server); rebuilt through seed.sh once the primary has moved past
    it, and joined with the primary's data."""
    c = cluster
    c.bootstrap()
    p = c["db-0"]
    for i in range(1, 21):
        p.query(f"INSERT INTO hook.t VALUES ({i}, 'e', @@server_id, NOW(6))", user="app")
    c.wait_synced(p)
    p.kill()
    r = c.run("failover.sh", PRIMARY="db-0")
    assert r.rc == 0, r
    new = r.json["primary"]
    p.start()
    p.query("INSERT INTO hook.t VALUES (424242, 'errant', @@server_id, NOW(6))")
    d = pod_dir(c, "db-0")
    optin = d / "rebuild-errant"

    # default: rebuild-needed, nothing touched
    r0 = join(c, "db-0", primary=new)
    assert r0.rc == 2 and r0.json["result"] == "rebuild-needed", r0
    optin.write_text("true\n")
    # opted in, but db-0 holds every transaction of the primary and more
    r1 = join(c, "db-0", primary=new, REBUILD_ERRANT_FILE=optin)
    assert r1.rc == 2 and r1.json["result"] == "rebuild-needed", r1
    assert "could be the most advanced" in r1.json["message"], r1
    assert 424242 in rows(p)
    # the primary moves on: db-0's extra transaction is on a branch the cluster left
    np = c[new]
    np.query("INSERT INTO hook.t VALUES (21, 'n', @@server_id, NOW(6))", user="app")
    r2 = join(c, "db-0", primary=new, REBUILD_ERRANT_FILE=optin)
    assert r2.rc == 0 and r2.json["result"] == "joined", r2
    assert r2.json["rebuilt"].startswith("0-1-") and r2.json["seededFrom"] != "db-0", r2
    c.wait_synced(np)
    assert rows(p) == set(range(1, 22))
    assert not (d / "rebuild").exists()
    assert p.value("SELECT @@gtid_binlog_state") == np.value("SELECT @@gtid_binlog_state")
    # Issue 31.8: the errant transaction, on no other member, was kept before the
    # wipe: db-0's binary logs, linked aside, still hold it.
    kept = list((Path(p.datadir) / ".mysql-hook-quarantine").iterdir())
    assert len(kept) == 1 and kept[0].name.endswith("-db-0"), kept
    errant = r2.json["rebuilt"]
    assert f"errant transactions: {errant}" in (kept[0] / "ERRANT").read_text()
    logs = sorted(f for f in kept[0].iterdir() if f.name != "ERRANT")
    dump = subprocess.run([c.world.kind.binlog, *map(str, logs)], capture_output=True, text=True)
    assert f"GTID {errant}" in dump.stdout, dump.stderr[-500:]
    REPORT.append(f"errant rebuild: refused while db-0 could be the most advanced; rebuilt from "
                  f"{r2.json['seededFrom']} once {new} moved on ({r2.seconds:.1f}s)")


def test_seed_restored_cluster(cluster, world):
    """A restored cluster's binary logs do not hold the restored data (restore.sh
    loads with the binary log off): a server added later must be seeded."""
    src = cluster
    src.bootstrap()
    p = src["db-0"]
    for i in range(1, 101):
        p.query(f"INSERT INTO hook.t VALUES ({i}, 'r', @@server_id, NOW(6))", user="app")
    src.wait_synced(p)
    bdir = world.root / src.tag / "backups"
    bdir.mkdir(parents=True)
    rb = src.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME="b1")
    assert rb.rc == 0, rb
    c = Cluster(world, "restored", n=2)
    try:
        for s in c.servers:
            rr = c.run("restore.sh", POD_NAME=s.name, RESTORE_FROM=bdir / "b1")
            assert rr.rc == 0 and rr.json["result"] == "restored", rr
        rboot = c.run("bootstrap.sh", PRIMARY="")
        assert rboot.rc == 0 and rboot.json["replicas"] == ["db-1"], rboot
        np = c["db-0"]
        np.query("INSERT INTO hook.t VALUES (101, 'n', @@server_id, NOW(6))")
        new = c.add("db-2")
        r = join(c, "db-2")
        assert r.rc == 0 and r.json["result"] == "joined" and r.json["seededFrom"] == "db-1", r
        np.query("INSERT INTO hook.t VALUES (102, 'n', @@server_id, NOW(6))")
        c.wait_synced(np)
        assert rows(new) == set(range(1, 103))
        same_data(np, new)
    finally:
        c.close()


def probe_env(c: Cluster, name: str) -> dict:
    d = pod_dir(c, name)
    init = d / "initialized"
    init.write_text("true\n")
    return dict(SEED_MARKER=d / "seeding", INITIALIZED_FILE=init)


SEED_MB = int(os.environ.get("SEED_MB", "100"))


def test_seed_figures_under_writes(cluster):
    """Seed a new replica holding SEED_MB MB (default 100; SEED_MB=1024 for the
    1 GB figure) while the primary takes a write stream: it is never Ready
    while it copies, and once joined it holds every acknowledged row and the
    donor's data exactly."""
    c = cluster
    c.bootstrap()
    p = c["db-0"]
    t0 = time.time()
    # the bulk, the same on every server (written with the binary log off:
    # how the data got there does not change what a copy costs)
    threads = [threading.Thread(target=fill_local, args=(s, SEED_MB)) for s in c.servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    fill_s = time.time() - t0
    c["db-1"].query("ANALYZE LOCAL TABLE bulk.t")   # LOCAL: not binlogged (an errant GTID otherwise)
    size = int(c["db-1"].value("SELECT ROUND(SUM(data_length + index_length) / 1048576) "
                               "FROM information_schema.tables WHERE table_schema = 'bulk'"))
    w = Writer(p, 1, "w", stop_on_error=True, max_seconds=3600)
    w.start()
    wait_for(lambda: len(w.acked) >= 20, timeout=60, what="writes flowing")
    new = c.add("db-3")
    pf = primary_file(c)
    env = probe_env(c, "db-3")
    seen: list[str] = []
    done = threading.Event()

    def watch():
        while not done.is_set():
            rc, out = probe(c, "readiness", "db-3", pf, **env)
            assert rc == 1 or "replicates from" in out, out
            seen.append(out)
            crc, _ = probe(c, "candidate", "db-3", pf, **env)
            # seeding before and after the candidate probe: it was seeding then
            if "being seeded" in out and "being seeded" in probe(c, "readiness", "db-3", pf, **env)[1]:
                assert crc == 1
            time.sleep(0.5)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    r = join(c, "db-3")
    done.set()
    watcher.join(30)
    donor = r.json.get("seededFrom")
    assert r.rc == 0 and r.json["result"] == "joined" and donor in ("db-1", "db-2"), r
    assert any(f"is being seeded from {donor}" in s for s in seen), seen[:5]
    # Ready once it has caught up with what the primary took during the copy
    # (at once for 100 MB; a 1 GB copy under writes leaves a backlog).
    t_joined = time.time()
    last: list[str] = []

    def ready():
        rc, out = probe(c, "readiness", "db-3", pf, **env)
        last[:] = [out]
        return rc == 0
    wait_for(ready, timeout=600, interval=0.5, what=f"db-3 Ready ({last})")
    ready_s = time.time() - t_joined
    time.sleep(1)
    w.stop()
    assert w.errors == 0
    c.wait_synced(p)
    assert set(w.acked) <= rows(new)
    assert rows(new) == rows(p)
    same_data(p, new, ("hook.t", "bulk.t"))
    seed_s = float(r.stderr.split(f"seeded db-3 from {donor} in ")[1].split(" s")[0])
    REPORT.append(f"seed figures: {size} MB of InnoDB tables (SEED_MB={SEED_MB}) copied to a new replica from "
                  f"{donor} in {seed_s:.0f} s (join.sh {r.seconds:.1f} s, {size / max(r.seconds, 0.1):.1f} MB/s) under "
                  f"a write stream of {len(w.acked)} acknowledged rows, 0 lost; Ready {ready_s:.1f} s after join.sh; "
                  f"bulk load {fill_s:.0f} s")


def fill_local(s, mb: int):
    """`mb` MB of rows in bulk.t, written on this server only (binary log off)."""
    s.query("SET sql_log_bin=0; CREATE DATABASE IF NOT EXISTS bulk;"
            "CREATE TABLE bulk.t (id INT PRIMARY KEY, k INT, pad VARCHAR(1000), KEY(k)) ENGINE=InnoDB")
    total, step = mb * 1024, 50000
    for lo in range(0, total, step):
        hi = min(total, lo + step)
        s.query(f"SET sql_log_bin=0; INSERT INTO bulk.t SELECT seq, seq % 1000, REPEAT(MD5(seq), 30) "
                f"FROM bulk.seq_{lo + 1}_to_{hi}", timeout=3600)


def test_interrupted_seed_starts_again(cluster):
    """The recipient crashes in the middle of the copy: it comes back marked
    seeding (never joined with half the data), and the next join.sh copies
    again from the start."""
    c = cluster
    c.bootstrap()
    threads = [threading.Thread(target=fill_local, args=(s, 60)) for s in c.servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    p = c["db-0"]
    p.query("INSERT INTO hook.t VALUES (1, 'x', @@server_id, NOW(6))", user="app")
    new = c.add("db-3")
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("r", join(c, "db-3")))
    t.start()
    wait_for(lambda: new.value("SELECT COUNT(*) FROM information_schema.tables "
                               "WHERE table_schema = 'bulk' AND table_name = 't'") == "1",
             timeout=120, interval=0.2, what="the copy under way")
    time.sleep(1)
    new.kill()
    t.join(300)
    r1 = result["r"]
    assert r1.rc == 75 and r1.json["reason"] == "seeding-failed", r1
    new.start()
    assert new.value("SELECT COUNT(*) FROM _mysqlhook.seeding") == "1"
    # a role change script never makes it a replica meanwhile
    rb = c.run("bootstrap.sh", PRIMARY="")
    assert rb.rc == 0 and "db-3" not in rb.json["replicas"], rb
    r2 = join(c, "db-3")
    assert r2.rc == 0 and r2.json["result"] == "joined", r2
    c.wait_synced(p)
    same_data(c["db-1"], new, ("hook.t", "bulk.t"))
    assert new.value("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '_mysqlhook' "
                     "AND table_name = 'seeding'") == "0"


def test_seed_from_the_primary_under_writes(world, request):
    """Two servers, one of them new: the primary is the only donor, and it
    takes writes while it is copied; its own GTID entry moves during the dump
    and the copy still lands exactly at the dump's position."""
    c = Cluster(world, "primdonor", n=1)
    try:
        rb = c.run("bootstrap.sh", PRIMARY="")
        assert rb.rc == 0, rb
        p = c["db-0"]
        p.query("CREATE DATABASE hook; CREATE TABLE hook.t (n INT PRIMARY KEY, writer VARCHAR(8), sid INT, "
                f"ts DATETIME(6)); CREATE USER 'app'@'%' IDENTIFIED BY '{APP_PASSWORD}';"
                "GRANT SELECT, INSERT, UPDATE, DELETE ON hook.* TO 'app'@'%'")
        fill_local(p, 30)
        w = Writer(p, 1, "w", stop_on_error=True, max_seconds=600)
        w.start()
        wait_for(lambda: len(w.acked) >= 20, timeout=60, what="writes flowing")
        new = c.add("db-1")
        r = join(c, "db-1")
        assert r.rc == 0 and r.json["seededFrom"] == "db-0", r
        time.sleep(1)
        w.stop()
        assert w.errors == 0
        c.wait_synced(p)
        assert rows(new) == rows(p) and set(w.acked) <= rows(new)
        same_data(p, new, ("hook.t", "bulk.t"))
        REPORT.append(f"seed from the primary under writes: {len(w.acked)} rows acknowledged, 0 lost, "
                      f"join.sh {r.seconds:.1f}s")
    finally:
        c.close()


def test_seed_while_the_primary_waits_for_an_acknowledgement(world, request):
    """The primary's only replica is gone and a commit waits in its binary log
    for an acknowledgement (semi-sync AFTER_SYNC, no timeout): it is in
    gtid_binlog_state, not yet in the engine, so a dump's snapshot position is
    below the state read before the dump. The new replica is seeded at that
    position anyway (the waiting commit then reaches it by replication and is
    acknowledged); refusing it as "donor-changed" left the cluster with no
    replica that could ever acknowledge (real-server scenario 15). MariaDB's
    logical seed only: MySQL seeds by CLONE, a physical copy that carries the
    donor's own GTID state."""
    c = Cluster(world, "pendack", n=1)
    try:
        assert c.run("bootstrap.sh", PRIMARY="").rc == 0
        p = c["db-0"]
        p.query("CREATE DATABASE hook; CREATE TABLE hook.t (n INT PRIMARY KEY, writer VARCHAR(8), sid INT, "
                "ts DATETIME(6))")
        c.add("db-1")
        assert join(c, "db-1").json["result"] == "joined"
        assert join(c, "db-0").json["semiSync"] is True
        p.query("INSERT INTO hook.t VALUES (1, 'a', 1, NOW())")
        c.remove("db-1")
        before = p.value("SELECT @@global.gtid_binlog_state")
        waiting: dict[str, object] = {}

        def commit():
            try:
                p.query("INSERT INTO hook.t VALUES (2, 'a', 1, NOW())", timeout=300)
                waiting["ok"] = True
            except Exception as e:  # noqa: BLE001 -- reported by the assertion below
                waiting["error"] = e
        t = threading.Thread(target=commit, daemon=True)
        t.start()
        wait_for(lambda: p.value("SELECT @@global.gtid_binlog_state") != before, timeout=30,
                 what="the commit written to the binary log, waiting for an acknowledgement")
        assert p.value("SELECT COUNT(*) FROM hook.t") == "1" and t.is_alive(), "the commit must still wait"
        new = c.add("db-2")
        r = join(c, "db-2")
        assert r.rc == 0 and r.json["result"] == "joined", r.json.get("message")
        assert r.json["seededFrom"] == "db-0", r.json
        t.join(timeout=60)
        assert waiting.get("ok") is True, waiting
        c.wait_synced(p)
        assert new.value("SELECT GROUP_CONCAT(n ORDER BY n) FROM hook.t") == "1,2"
        assert new.value("SELECT @@global.gtid_slave_pos") == p.value("SELECT @@global.gtid_binlog_pos")
    finally:
        c.close()


def test_primary_semisync_follows_membership(world, request):
    """Scaling 1 -> 2 -> 1: the primary's agent turns its semi-sync source on
    once the new replica is connected (not before: that would stop every write
    while it is seeded) and off when it is the only member again (else every
    commit would wait forever)."""
    c = Cluster(world, "semisync", n=1)
    try:
        assert c.run("bootstrap.sh", PRIMARY="").rc == 0
        p = c["db-0"]
        p.query("CREATE DATABASE hook; CREATE TABLE hook.t (n INT PRIMARY KEY, writer VARCHAR(8), sid INT, ts DATETIME(6))")
        assert p.value("SELECT @@rpl_semi_sync_master_enabled") == "0"
        c.add("db-1")
        # before the replica is connected: stays off, writes go on
        r0 = join(c, "db-0")
        assert r0.rc == 0 and r0.json == {"result": "is-primary", "pod": "db-0", "primary": "db-0",
                                           "semiSync": False}, r0
        p.query("INSERT INTO hook.t VALUES (1, 'a', 1, NOW())")
        assert join(c, "db-1").json["result"] == "joined"
        r1 = join(c, "db-0")
        assert r1.json["semiSync"] is True, r1
        assert p.value("SELECT @@rpl_semi_sync_master_enabled") == "1"
        assert p.value("SELECT @@rpl_semi_sync_master_wait_point") == "AFTER_SYNC"
        p.query("INSERT INTO hook.t VALUES (2, 'a', 1, NOW())")
        assert p.value("SELECT VARIABLE_VALUE FROM information_schema.global_status "
                       "WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_YES_TX'") != "0"
        # scale down to one: the replica leaves, the agent turns semi-sync off
        c.remove("db-1")
        r2 = join(c, "db-0")
        assert r2.json["semiSync"] is False, r2
        t0 = time.time()
        p.query("INSERT INTO hook.t VALUES (3, 'a', 1, NOW())", timeout=10)
        assert time.time() - t0 < 5
    finally:
        c.close()


@pytest.mark.all_servers
def test_inspect_reports_every_server(cluster):
    """The agent's inspect: one line with what each member says about itself (the
    hook's status.servers), changing nothing; an unreachable, a lagging with
    an error, a seeding (MariaDB's mark) and an errant server each show as such."""
    import json as _json
    c = cluster
    mysql = c.world.kind.mysql
    c.bootstrap()
    p = c["db-0"]
    p.query("INSERT INTO hook.t VALUES (1, 'a', @@server_id, NOW(6))", user="app")
    c.wait_synced(p)
    before = c.state()
    r = c.run("inspect", PRIMARY="db-0")
    assert r.rc == 0 and r.json["result"] == "inspected" and r.json["primary"] == "db-0", r
    s = {x["name"]: x for x in r.json["servers"]}
    assert s["db-0"]["writable"] is True and s["db-0"]["semiSync"] is True and s["db-0"]["semiSyncClients"] == 2
    assert "source" not in s["db-0"] and s["db-0"]["gtid"] == p.gtid_position()[:120]
    for n in ("db-1", "db-2"):
        assert s[n]["writable"] is False and s[n]["source"] == "db-0", s[n]
        assert (s[n]["io"], s[n]["sql"], s[n]["lag"]) == ("Yes", "Yes", 0), s[n]
        assert s[n]["gtid"] == p.gtid_position()[:120] and "errant" not in s[n]
    assert c.state() == before, "inspect changes nothing"
    # an applier error on db-1, db-2 down, a new db-3 (seeding mark on MariaDB)
    r1 = c["db-1"]
    own = "SET sql_log_bin=0; INSERT INTO hook.t VALUES (2, 'x', 0, NOW())"
    if mysql:
        r1.query(f"SET GLOBAL super_read_only=OFF; {own}; SET GLOBAL super_read_only=ON")
    else:
        r1.query(f"SET GLOBAL read_only=OFF; {own}; SET GLOBAL read_only=ON")
    p.query("INSERT INTO hook.t VALUES (2, 'y', @@server_id, NOW(6))", user="app")
    wait_for(lambda: r1.replica_status().get("Slave_SQL_Running") == "No", timeout=30, what="applier error")
    c["db-2"].kill()
    new = c.add("db-3")
    if not mysql:
        new.query("SET sql_log_bin=0; CREATE DATABASE _mysqlhook; CREATE TABLE _mysqlhook.seeding (id INT PRIMARY KEY)")
    # and an errant transaction on db-3 (its own server id, or its server_uuid)
    if mysql:
        new.query("SET GLOBAL super_read_only=OFF; CREATE DATABASE own; SET GLOBAL super_read_only=ON")
        errant = f"{new.value('SELECT @@server_uuid')}:1"
    else:
        new.query("CREATE DATABASE own")
        errant = "0-4-1"
    r = c.run("inspect", PRIMARY="db-0")
    s = {x["name"]: x for x in r.json["servers"]}
    assert r.rc == 0 and list(s) == ["db-0", "db-1", "db-2", "db-3"], r
    assert s["db-1"]["sql"] == "No" and "Duplicate entry" in s["db-1"]["error"] and "lag" not in s["db-1"], s
    assert s["db-2"] == {"name": "db-2", "up": False}
    assert s["db-3"].get("seeding", False) is (not mysql), s
    assert s["db-3"]["errant"] == errant and "source" not in s["db-3"], s
    assert len(r.line) < 4000
    _json.loads(r.line)


def test_binary_logs_expire(cluster):
    """The hook's my.cnf sets binary-log expiry (spec.replication.binlogExpireSeconds,
    7 days by default): a real server takes it (MariaDB's own default never expires)."""
    c = cluster
    c.bootstrap()
    for s in c.servers:
        assert int(s.value("SELECT @@binlog_expire_logs_seconds")) == 604800, s

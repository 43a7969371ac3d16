"""Replicas that can always be added, replaced and trusted (issue 15), against
real MariaDB servers: seeding a new or emptied server from a donor (seed.sh,
through join.sh as the agent runs it), readiness that follows replication
(probe.sh), errant replicas rebuilt when opted in, and scaling under a write
stream.  See dbcluster.py for how servers are set up."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import REPORT
from dbcluster import APP_PASSWORD, SCRIPTS, Cluster, Writer, probe, rows, run_script, wait_for


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


def test_stale_replica_behind_purged_binlogs_is_copied_again(cluster):
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

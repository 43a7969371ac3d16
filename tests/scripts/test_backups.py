"""Backups that restore what was acknowledged (issue 19), against real MariaDB
servers: the source of a backup is proven caught up with the current primary,
a point-in-time restore proves the binary logs continuous and the point
inside them or refuses before loading anything, accounts survive.
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import REPORT
from dbcluster import APP_PASSWORD, SCRIPTS, Cluster, Server, World, free_port, rows, run_script, wait_for


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def fresh(world: World, tag: str) -> Server:
    """An empty server as a new cluster's pod has it, started."""
    s = world.server("db-0", tag)
    s.initialize()
    s.start()
    return s


def restore(world: World, target: Server, backup: Path, **env) -> "object":
    e = {"PODS": f"db-0={target.addr}", "POD_NAME": "db-0", "RESTORE_FROM": str(backup)}
    e.update({k: str(v) for k, v in env.items()})
    return run_script("restore.sh", world, e)


def is_empty(s: Server) -> bool:
    return s.value("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name='hook'") == "0"


def insert(p: Server, lo: int, hi: int, tag: str):
    for i in range(lo, hi):
        p.query(f"INSERT INTO hook.t VALUES ({i}, '{tag}', @@server_id, NOW(6))", user="app")


def next_second(pause: float = 0.3) -> datetime.datetime:
    """Sleep into the next whole second (+pause); returns that second."""
    now = utc_now()
    t = (now + datetime.timedelta(seconds=1)).replace(microsecond=0)
    time.sleep((t - now).total_seconds() + pause)
    return t


def fmt(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S")


def backup(c: Cluster, bdir: Path, name: str, **env):
    r = c.run("backup.sh", BACKUP_DIR=bdir, BACKUP_NAME=name, **env)
    assert r.rc == 0 and r.json["result"] == "backed-up", r
    # issue 19.6: the recorded checksum is that of SHA256SUMS, which lists every file's
    sums = Path(bdir) / name / "SHA256SUMS"
    assert r.json["sha256"] == hashlib.sha256(sums.read_bytes()).hexdigest(), r
    listed = {ln.split()[1] for ln in sums.read_text().splitlines()}
    written = {str(f.relative_to(sums.parent)) for f in sums.parent.rglob("*") if f.is_file()}
    assert written - listed == {"SHA256SUMS", "result.json"} | ({"SIGNATURE"} & written), (written, listed)
    return r


def purge_all_but_current(s: Server):
    """FLUSH, then PURGE up to the new file.  Right after the FLUSH MariaDB
    sometimes keeps the old file without an error or a warning (seen here:
    the test then restored successfully from a file it meant to be gone; the
    binlog checkpoint not having moved yet is the likely cause), so PURGE is
    retried until only the new file is left."""
    s.query("FLUSH BINARY LOGS")
    last = s.query("SHOW BINARY LOGS")[-1][0]
    deadline = time.time() + 30
    while True:
        s.query(f"PURGE BINARY LOGS TO '{last}'")
        left = [r[0] for r in s.query("SHOW BINARY LOGS")]
        if left == [last]:
            return
        assert time.time() < deadline, f"{s.name}: PURGE BINARY LOGS TO {last} leaves {left}"
        time.sleep(0.2)


def bdir_of(c: Cluster) -> Path:
    d = c.world.root / c.tag / "backups"
    d.mkdir(parents=True, exist_ok=True)
    return d


# ------------------------------------------------------------ 19.1, 19.10

def test_pitr_refuses_binlogs_that_do_not_reach_back_to_the_dump(cluster, world, request):
    """The later backup's binary logs were purged past the earlier dump: the
    transactions in between are in no file.  The restore fails naming that
    range, before anything is loaded (it used to replay what it found and
    report success)."""
    cluster.bootstrap()
    p = cluster["db-0"]
    insert(p, 1, 51, "A")
    cluster.wait_synced(p)
    bdir = bdir_of(cluster)
    r1 = backup(cluster, bdir, "full-1", PRIMARY="db-0")
    insert(p, 51, 101, "B")             # only in the purged binary logs
    cluster.wait_synced(p)
    for s in cluster.servers:           # expiry ran everywhere
        purge_all_but_current(s)
    insert(p, 101, 151, "C")
    t = next_second()
    cluster.wait_synced(p)
    backup(cluster, bdir, "full-2", PRIMARY="db-0")
    target = fresh(world, request.node.name + "-restore")
    try:
        rr = restore(world, target, bdir / "full-1", RESTORE_BINLOGS_FROM=bdir / "full-2", RESTORE_UNTIL=fmt(t))
        assert rr.rc != 0 and rr.json["reason"] == "binlog-gap", rr
        msg = rr.json["message"]
        assert r1.json["gtid"] in msg and "missing" in msg, msg
        assert is_empty(target), "nothing may be loaded before continuity is proven"
        REPORT.append(f"pitr gap: refused before loading: {msg[:160]}")
    finally:
        target.kill()


def test_pitr_refuses_a_point_outside_the_backups(cluster, world, request):
    """A point after what the binary logs hold (binlog-gap, naming the range)
    or before the dump (before-backup, naming the dump's time) is refused
    before loading; a point inside is restored exactly."""
    cluster.bootstrap()
    p = cluster["db-0"]
    insert(p, 1, 21, "A")
    cluster.wait_synced(p)
    bdir = bdir_of(cluster)
    t_before = next_second()
    insert(p, 21, 41, "B")
    cluster.wait_synced(p)
    r1 = backup(cluster, bdir, "b1", PRIMARY="db-0")
    t_inside = next_second()
    insert(p, 41, 61, "C")
    cluster.wait_synced(p)
    r2 = backup(cluster, bdir, "b2", PRIMARY="db-0")
    t_after = next_second(1.2)
    target = fresh(world, request.node.name + "-restore")
    try:
        after = restore(world, target, bdir / "b1", RESTORE_BINLOGS_FROM=bdir / "b2", RESTORE_UNTIL=fmt(t_after))
        assert after.rc != 0 and after.json["reason"] == "binlog-gap", after
        assert fmt(t_after) in after.json["message"] and r2.json["binlogsUntil"] in after.json["message"], after
        before = restore(world, target, bdir / "b1", RESTORE_UNTIL=fmt(t_before))
        assert before.rc != 0 and before.json["reason"] == "before-backup", before
        assert is_empty(target)
        ok = restore(world, target, bdir / "b1", RESTORE_BINLOGS_FROM=bdir / "b2", RESTORE_UNTIL=fmt(t_inside))
        assert ok.rc == 0 and ok.json["pitr"] is True, ok
        assert rows(target) == set(range(1, 41))
        REPORT.append(f"pitr bounds: b1 serves [{r1.json['pitrFrom']}, {r1.json['binlogsUntil']}], "
                      f"b2 binlogs until {r2.json['binlogsUntil']}: after -> {after.json['reason']}, "
                      f"before -> {before.json['reason']}, inside -> {len(rows(target))} rows")
    finally:
        target.kill()


class StampedWriter(threading.Thread):
    """Inserts numbered rows, one client per INSERT, recording when each was
    sent and when it was acknowledged (OK returned)."""

    def __init__(self, target: Server, start: int, seconds: float):
        super().__init__(daemon=True)
        self.target, self.n, self.seconds = target, start, seconds
        self.sent: dict[int, datetime.datetime] = {}
        self.acked: dict[int, datetime.datetime] = {}
        self.stop_flag = threading.Event()

    def run(self):
        end = time.time() + self.seconds
        while not self.stop_flag.is_set() and time.time() < end:
            n = self.n
            self.n += 1
            self.sent[n] = utc_now()
            r = subprocess.run(self.target.client_args("app") + [
                "-e", f"INSERT INTO hook.t VALUES ({n}, 'w', @@server_id, NOW(6))"], capture_output=True)
            if r.returncode == 0:
                self.acked[n] = utc_now()


def test_pitr_at_a_chosen_second_under_a_write_stream(cluster, world, request):
    """Done-when of issue 19: a backup, a stream of acknowledged writes, a
    second backup, and a restore of the first to a chosen second: every row
    acknowledged before that second is there, no row sent at or after it."""
    cluster.bootstrap()
    p = cluster["db-0"]
    insert(p, 1, 11, "A")
    cluster.wait_synced(p)
    bdir = bdir_of(cluster)
    backup(cluster, bdir, "base", PRIMARY="db-0")
    w = StampedWriter(p, 1000, 12)
    w.start()
    time.sleep(5)
    chosen = next_second(0)
    w.join(30)
    cluster.wait_synced(p)
    backup(cluster, bdir, "later", PRIMARY="db-0")
    target = fresh(world, request.node.name + "-restore")
    try:
        # As the restore Job runs it: one container per step (issue 19.7).
        pitr = {"RESTORE_BINLOGS_FROM": bdir / "later", "RESTORE_UNTIL": fmt(chosen)}
        early = restore(world, target, bdir / "base", RESTORE_STEP="finish", **pitr)
        assert early.rc != 0 and early.json["reason"] == "not-loaded", early
        check = restore(world, target, bdir / "base", RESTORE_STEP="check", **pitr)
        assert check.rc == 0 and check.json["result"] == "checked", check
        assert check.json["bytes"] > 0 and check.json["binlogs"] >= 1, check.json
        assert is_empty(target), "the check step wrote"
        load = restore(world, target, bdir / "base", RESTORE_STEP="load", **pitr)
        assert load.rc == 0 and load.json["result"] == "loaded", load
        # A replay cut short is never continued: finish refuses, the next load starts over.
        target.query("UPDATE _mysqlhook.restore SET phase='replaying' WHERE id=1")
        cut = restore(world, target, bdir / "base", RESTORE_STEP="finish", **pitr)
        assert cut.rc != 0 and cut.json["reason"] == "not-loaded", cut
        again = restore(world, target, bdir / "base", RESTORE_STEP="load", **pitr)
        assert again.rc == 0 and again.json["result"] == "loaded", again
        rr = restore(world, target, bdir / "base", RESTORE_STEP="finish", **pitr)
        assert rr.rc == 0 and rr.json["pitr"] is True, rr
        REPORT.append(f"restore in steps: check {check.seconds:.1f}s ({check.json['bytes']} bytes of dump, "
                      f"{check.json['binlogs']} binary log files), load {load.seconds:.1f}s, finish {rr.seconds:.1f}s")
        got = rows(target)
        acked_before = {n for n, t in w.acked.items() if t < chosen}
        sent_after = {n for n, t in w.sent.items() if t >= chosen}
        lost = acked_before - got
        extra = got & sent_after
        REPORT.append(f"pitr under writes: chosen {fmt(chosen)} UTC; {len(acked_before)} rows acknowledged before, "
                      f"{len(lost)} lost; {len(sent_after)} sent after, {len(extra)} restored; restore {rr.seconds:.1f}s")
        assert len(acked_before) > 20 and len(sent_after) > 20, (len(acked_before), len(sent_after))
        assert not lost, sorted(lost)[:20]
        assert not extra, sorted(extra)[:20]
    finally:
        target.kill()


# ------------------------------------------------------------ 19.9

def demote(c: Cluster, old: str, new: str):
    """A role change done by hand: `new` becomes the writable primary, the
    others replicate from it, `old` is left read-only and not replicating."""
    o, n = c[old], c[new]
    c.wait_synced(o)
    o.query("SET GLOBAL read_only=ON; SET GLOBAL rpl_semi_sync_master_enabled=OFF")
    n.query("STOP SLAVE; RESET SLAVE ALL; SET GLOBAL rpl_semi_sync_master_enabled=ON; SET GLOBAL read_only=OFF")
    o.query("STOP SLAVE; RESET SLAVE ALL")
    for s in c.servers:
        if s.name in (old, new):
            continue
        s.query(f"STOP SLAVE; CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={n.port}, "
                "MASTER_USE_GTID=slave_pos; START SLAVE")
        wait_for(lambda: s.replicating_from(n), what=f"{s.name} replicating from {new}")


def test_backup_follows_the_current_primary_not_a_stale_one(cluster, world, request):
    """The Job was created with PRIMARY=db-0; db-1 took over since and
    acknowledged more writes, and db-0 holds an errant transaction.  The
    backup reads from a replica of db-1 and holds db-1's writes, never db-0's
    (it used to fall back to the stale, diverged db-0)."""
    cluster.bootstrap()
    insert(cluster["db-0"], 1, 11, "A")
    demote(cluster, "db-0", "db-1")
    insert(cluster["db-1"], 11, 21, "B")
    cluster["db-0"].query("INSERT INTO hook.t VALUES (9999, 'errant', @@server_id, NOW(6))")
    cluster.wait_synced(cluster["db-1"])
    bdir = bdir_of(cluster)
    r = backup(cluster, bdir, "b", PRIMARY="db-0")
    assert r.json["primary"] == "db-1" and r.json["source"] == "db-2", r
    target = fresh(world, request.node.name + "-restore")
    try:
        rr = restore(world, target, bdir / "b")
        assert rr.rc == 0, rr
        assert rows(target) == set(range(1, 21))
    finally:
        target.kill()
    # Only the diverged old primary besides the new primary, which is gone:
    # no writable member, so no backup.
    cluster["db-1"].kill()
    cluster["db-2"].kill()
    r2 = cluster.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME="stale")
    assert r2.rc != 0 and r2.json["reason"] == "no-primary", r2
    assert not (bdir / "stale").exists()
    REPORT.append(f"stale PRIMARY: backup read {r.json['source']} of primary {r.json['primary']}; "
                  f"with no writable member: {r2.json['reason']}")


def test_backup_refuses_errant_and_lagging_sources(cluster):
    """A replica with a transaction of its own is never the source; a source
    that cannot catch up with the primary fails the backup."""
    cluster.bootstrap()
    p = cluster["db-0"]
    insert(p, 1, 11, "A")
    cluster.wait_synced(p)
    cluster["db-1"].query("INSERT INTO hook.t VALUES (777, 'errant', @@server_id, NOW(6))")
    bdir = bdir_of(cluster)
    r = backup(cluster, bdir, "b1", PRIMARY="db-0")
    assert r.json["source"] == "db-2", r
    # db-2 now applies 30 s behind (SQL thread delayed; lag stays under the
    # 60 s limit at first), and is the only replica left to choose from.
    d2 = cluster["db-2"]
    d2.query("STOP SLAVE; CHANGE MASTER TO MASTER_DELAY=30; START SLAVE")
    wait_for(lambda: d2.replicating_from(p), what="db-2 replicating")
    insert(p, 11, 21, "B")
    r2 = cluster.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME="b2",
                     PODS=f"db-2={d2.addr} db-0={p.addr}", BACKUP_CATCHUP_TIMEOUT=3)
    assert r2.rc != 0 and r2.json["reason"] == "source-behind", r2
    assert not (bdir / "b2").exists()
    d2.query("STOP SLAVE; CHANGE MASTER TO MASTER_DELAY=0; START SLAVE")
    REPORT.append(f"sources: errant db-1 skipped (read {r.json['source']}); delayed db-2: {r2.json['reason']}")


# ------------------------------------------------------------ 19.2

@pytest.mark.all_servers
def test_accounts_survive_backup_and_restore(cluster, world, request):
    """Application users, roles and grants come back after a restore; root's
    and the replication account's do not travel.  On both flavors: the agent's
    `catalog` writes accounts.sql (issue 34.6), and the flavors differ in roles."""
    cluster.bootstrap()
    p = cluster["db-0"]
    default_role = "TO" if world.kind.mysql else "FOR"
    p.query("CREATE ROLE reader; GRANT SELECT ON hook.* TO reader;"
            "CREATE USER 'report'@'10.%' IDENTIFIED BY 'rep''pw'; GRANT reader TO 'report'@'10.%';"
            f"SET DEFAULT ROLE reader {default_role} 'report'@'10.%';"
            "GRANT PROCESS ON *.* TO 'report'@'10.%';"
            "CREATE USER 'we`ird'@'%' IDENTIFIED BY 'x'; GRANT INSERT ON hook.t TO 'we`ird'@'%' WITH GRANT OPTION;"
            # a backslash in a name: the client's batch output doubled it (another account)
            "CREATE USER 'back\\\\slash'@'%' IDENTIFIED BY 'b'; GRANT SELECT ON hook.t TO 'back\\\\slash'@'%'")
    insert(p, 1, 6, "A")
    cluster.wait_synced(p)
    bdir = bdir_of(cluster)
    r = backup(cluster, bdir, "b", PRIMARY="db-0")
    assert r.json["accounts"] == 5, r   # app, report, we`ird, back\slash, reader
    text = (bdir / "b" / "accounts.sql").read_text()
    assert "`root`" not in text and "`repl`" not in text, text
    target = fresh(world, request.node.name + "-restore")
    try:
        rr = restore(world, target, bdir / "b")
        assert rr.rc == 0, rr

        def grants(s: Server, acct: str) -> list[str]:
            return sorted(x[0] for x in s.query(f"SHOW GRANTS FOR {acct}"))

        for acct in ("'app'@'%'", "'report'@'10.%'", "reader", "'we`ird'@'%'", "'back\\\\slash'@'%'"):
            assert grants(target, acct) == grants(p, acct), acct
        # the application logs in with its own password
        assert target.value("SELECT COUNT(*) FROM hook.t", user="app") == "5"
        # root is the new cluster's own (init.sh), not the backup's
        assert target.value("SELECT COUNT(*) FROM mysql.user WHERE user='repl'") == "0"
        rr2 = restore(world, target, bdir / "b")
        assert rr2.rc == 0 and rr2.line == rr.line
        REPORT.append(f"accounts: {r.json['accounts']} accounts restored with equal grants; app logs in "
                      f"({APP_PASSWORD!r} unchanged)")
    finally:
        target.kill()


# ------------------------------------------------------------ 19.4

def test_dumps_are_gzipped_and_uncompressed_backups_still_restore(cluster, world, request):
    """The default backup writes dump.sql.gz (listed in SHA256SUMS, manifest
    `compression: gzip`), smaller than the same dump uncompressed; a backup
    written without compression (BACKUP_COMPRESSION=none, or by an older
    mysql-hook) restores as before; any other setting is refused."""
    cluster.bootstrap()
    p = cluster["db-0"]
    insert(p, 1, 400, "A")
    cluster.wait_synced(p)
    bdir = bdir_of(cluster)
    gz = backup(cluster, bdir, "gz", PRIMARY="db-0")
    plain = backup(cluster, bdir, "plain", PRIMARY="db-0", BACKUP_COMPRESSION="none")
    assert (bdir / "gz" / "dump.sql.gz").is_file() and not (bdir / "gz" / "dump.sql").exists()
    assert (bdir / "plain" / "dump.sql").is_file() and not (bdir / "plain" / "dump.sql.gz").exists()
    manifest = (bdir / "gz" / "manifest.json").read_text()
    assert '"compression":"gzip"' in manifest, manifest
    packed, raw = (bdir / "gz" / "dump.sql.gz").stat().st_size, (bdir / "plain" / "dump.sql").stat().st_size
    assert packed * 2 < raw, (packed, raw)
    assert gz.json["gtid"] == plain.json["gtid"]
    for name in ("gz", "plain"):
        target = fresh(world, f"gz-restore-{name}")
        try:
            rr = restore(world, target, bdir / name)
            assert rr.rc == 0 and rr.json["backupGtid"] == gz.json["gtid"], rr
            assert target.value("SELECT COUNT(*) FROM hook.t") == "399"
        finally:
            target.kill()
    bad = cluster.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME="bad", BACKUP_COMPRESSION="zstd")
    assert bad.rc != 0 and bad.json["reason"] == "bad-env", bad
    # A server without application schemas: the position alone, compressed too.
    empty = Cluster(world, "gz-empty", n=1)
    try:
        assert empty.run("bootstrap.sh", PRIMARY="").rc == 0
        e = backup(empty, bdir, "empty", PRIMARY="db-0")
        assert e.json["databases"] == 0 and (bdir / "empty" / "dump.sql.gz").is_file(), e
        target = fresh(world, "gz-empty-restore")
        try:
            rr = restore(world, target, bdir / "empty")
            assert rr.rc == 0 and rr.json["backupGtid"] == e.json["gtid"], rr
        finally:
            target.kill()
    finally:
        empty.close()
    REPORT.append(f"compression: dump {raw} bytes, gzip -1 {packed} bytes; both restore to the same rows")


# ------------------------------------------------------------------- 19.7

def schema_fingerprint(s: Server) -> dict:
    """What a restore must reproduce: every table's rows (CHECKSUM TABLE) and
    every routine, trigger, view and event definition of shop and crm."""
    out: dict = {}
    for schema, table in s.query("SELECT table_schema, table_name FROM information_schema.tables "
                                 "WHERE table_schema IN ('shop','crm') AND table_type='BASE TABLE' ORDER BY 1, 2"):
        out[f"{schema}.{table}"] = s.query(f"CHECKSUM TABLE `{schema}`.`{table}` EXTENDED")[0][1]
    for q in ("SELECT routine_schema, routine_name, routine_definition FROM information_schema.routines "
              "WHERE routine_schema IN ('shop','crm') ORDER BY 1, 2",
              "SELECT trigger_schema, trigger_name, action_statement FROM information_schema.triggers "
              "WHERE trigger_schema IN ('shop','crm') ORDER BY 1, 2",
              "SELECT table_schema, table_name, view_definition FROM information_schema.views "
              "WHERE table_schema IN ('shop','crm') ORDER BY 1, 2",
              "SELECT event_schema, event_name, event_definition FROM information_schema.events "
              "WHERE event_schema IN ('shop','crm') ORDER BY 1, 2"):
        for row in s.query(q):
            out[".".join(row[:2])] = row[2]
    return out


def test_a_parallel_load_restores_what_one_client_restores(cluster, world, request):
    """Issue 19.7: RESTORE_PARALLEL clients load the tables of each database at
    once and restore exactly what one client restores: rows of every table,
    foreign keys across tables and databases, a trigger that must not fire
    during the load, a view, an event, and a procedure whose body holds the
    very lines the dump is cut at (in a string across lines): the body is not
    cut. A value that is not 1-16 is refused."""
    cluster.bootstrap()
    p = cluster["db-0"]
    body_text = "x\n-- Table structure for table `fake`\n-- Current Database: `fake`\nDELIMITER ;;\ny"
    p.query("CREATE DATABASE shop; CREATE DATABASE crm;"
            "CREATE TABLE crm.customer (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL);"
            "CREATE TABLE shop.orders (id INT PRIMARY KEY, customer INT NOT NULL, pad VARCHAR(200) NOT NULL,"
            " FOREIGN KEY (customer) REFERENCES crm.customer (id));"
            "CREATE TABLE shop.lines (id INT PRIMARY KEY, ord INT NOT NULL, FOREIGN KEY (ord) REFERENCES shop.orders (id));"
            "CREATE TABLE shop.audit (id INT AUTO_INCREMENT PRIMARY KEY, ord INT NOT NULL);"
            "CREATE TABLE shop.empty (id INT PRIMARY KEY);"
            "CREATE TRIGGER shop.orders_audit AFTER INSERT ON shop.orders FOR EACH ROW INSERT INTO shop.audit (ord) VALUES (NEW.id);"
            "CREATE VIEW shop.big_orders AS SELECT id FROM shop.orders WHERE id > 100;"
            "CREATE EVENT shop.nightly ON SCHEDULE EVERY 1 DAY DISABLE DO DELETE FROM shop.audit WHERE id < 0;"
            "INSERT INTO crm.customer WITH RECURSIVE a(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM a WHERE i < 500) SELECT i, CONCAT('c', i) FROM a;"
            "INSERT INTO shop.orders WITH RECURSIVE a(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM a WHERE i < 999),"
            " b(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM b WHERE j < 39)"
            " SELECT j * 1000 + i, 1 + (i % 500), REPEAT('o', 150) FROM a, b;"
            "INSERT INTO shop.lines SELECT id, id FROM shop.orders;")
    # a procedure body with the cut lines inside a string that spans lines
    p.query("CREATE PROCEDURE shop.tricky() SELECT '" + body_text + "' AS t")
    cluster.wait_synced(p)
    source = schema_fingerprint(p)
    assert source["shop.audit"] != source["shop.orders"] and len(source) >= 9, source
    bdir = bdir_of(cluster)
    backup(cluster, bdir, "rich", PRIMARY="db-0")
    # A body whose string holds `DELIMITER ;` on a line of its own: the cut
    # cannot be trusted, so one client loads it (and restores it whole).
    p.query("CREATE PROCEDURE crm.trickier() SELECT 'a\nDELIMITER ;\n-- Table structure for table `x`\nb' AS t")
    cluster.wait_synced(p)
    richer = schema_fingerprint(p)
    backup(cluster, bdir, "richer", PRIMARY="db-0")
    took = {}
    for name, clients, used, want in (("rich", 1, 1, source), ("rich", 3, 3, source), ("richer", 3, 1, richer)):
        target = fresh(world, f"parallel-{name}-{clients}")
        try:
            t = time.monotonic()
            rr = restore(world, target, bdir / name, RESTORE_PARALLEL=clients)
            took[name, clients] = time.monotonic() - t
            assert rr.rc == 0 and rr.json["result"] == "restored" and rr.json["clients"] == used, rr
            fp = schema_fingerprint(target)
            diff = {k for k in want.keys() | fp.keys() if want.get(k) != fp.get(k)}
            assert not diff, (name, clients, sorted(diff))
            tricky = target.query("SHOW CREATE PROCEDURE shop.tricky")[0][2]
            assert "-- Table structure for table `fake`" in tricky and "DELIMITER ;;" in tricky, tricky
        finally:
            target.kill()
    bad = restore(world, fresh(world, "parallel-bad"), bdir / "rich", RESTORE_PARALLEL=17)
    assert bad.rc != 0 and bad.json["reason"] == "bad-env", bad
    REPORT.append(f"parallel load: {len(source)} tables and definitions in 2 databases equal to the source's with 1 "
                  f"client ({took['rich', 1]:.1f}s) and 3 ({took['rich', 3]:.1f}s), bodies holding the cut lines "
                  f"intact; a body holding `DELIMITER ;` loaded by one client ({took['richer', 3]:.1f}s)")


def test_the_load_may_use_the_whole_restore_deadline_and_no_more(cluster, world, request):
    """The dump's load is bounded by the restore's deadline
    (RESTORE_DEADLINE_SECONDS, the Job's activeDeadlineSeconds from
    spec.restore.timeoutSeconds), not by a fixed limit of its own: with a
    deadline shorter than the load the restore fails and says so; with room it
    loads; a deadline that is not a number of seconds is refused."""
    cluster.bootstrap()
    p = cluster["db-0"]
    p.query("CREATE TABLE hook.big (n INT PRIMARY KEY, pad VARCHAR(255) NOT NULL)")
    # 400000 rows of 200 bytes: 1000 x 400 (the rendered my.cnf keeps recursion at 1000).
    p.query("INSERT INTO hook.big WITH RECURSIVE a(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM a WHERE i < 999), "
            "b(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM b WHERE j < 399) "
            "SELECT j * 1000 + i + 1, REPEAT('x', 200) FROM a, b")
    cluster.wait_synced(p)
    bdir = bdir_of(cluster)
    backup(cluster, bdir, "big", PRIMARY="db-0")
    target = fresh(world, "deadline-short")
    try:
        t = time.monotonic()
        short = restore(world, target, bdir / "big", RESTORE_DEADLINE_SECONDS=1)
        took = time.monotonic() - t
        assert short.rc != 0 and short.json.get("result") != "restored", short
    finally:
        target.kill()
    target = fresh(world, "deadline-room")
    try:
        t = time.monotonic()
        ok = restore(world, target, bdir / "big", RESTORE_DEADLINE_SECONDS=600)
        loaded = time.monotonic() - t
        assert ok.rc == 0 and ok.json["result"] == "restored", ok
        assert target.value("SELECT COUNT(*) FROM hook.big") == "400000"
    finally:
        target.kill()
    assert loaded > 2, f"the load took {loaded:.1f}s: too fast to show a 1 s deadline cutting it"
    bad = restore(world, fresh(world, "deadline-bad"), bdir / "big", RESTORE_DEADLINE_SECONDS="6h")
    assert bad.rc != 0 and bad.json["reason"] == "bad-env", bad
    REPORT.append(f"restore deadline: 1 s cut the load ({short.json.get('reason')}, {took:.1f}s); "
                  f"600 s let it load 400000 rows in {loaded:.1f}s")


# ------------------------------------------------------------------- 19.6

def test_verified_backup_restores_first(cluster, world, request):
    """BACKUP_VERIFY=true: backup.sh restores the finished backup into a
    throwaway server in its own pod (verify.sh: init.sh, a local mariadbd,
    restore.sh) before the backup is renamed into place; the result says
    verified with the tables found. A backup that does not restore (a dump the
    server refuses, checksums made to match) fails verify-failed and is never
    renamed into place, so retention removes nothing; the throwaway server and
    its directory are gone either way; a bad BACKUP_VERIFY is refused."""
    cluster.bootstrap()
    p = cluster["db-0"]
    insert(p, 1, 300, "V")
    p.query("CREATE TABLE hook.other (n INT PRIMARY KEY)")
    cluster.wait_synced(p)
    bdir = bdir_of(cluster)
    vdir = Path(tempfile.mkdtemp(prefix="v-")) / "v"   # short: a socket path must fit in 107 bytes
    port = str(free_port())   # the pods' 3399 may be taken on a shared test host
    owner = "MySQL test/db uid-1"
    old = backup(cluster, bdir, "old", PRIMARY="db-0", BACKUP_OWNER=owner)
    ok = backup(cluster, bdir, "checked", PRIMARY="db-0", BACKUP_VERIFY="true", VERIFY_DIR=vdir, VERIFY_PORT=port,
                BACKUP_OWNER=owner)
    assert ok.json.get("verified") is True and ok.json["verifiedTables"] == 2, ok
    assert not vdir.exists(), "the throwaway server's directory is left behind"
    assert not [l for l in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
                if str(vdir) in l], "the throwaway server still runs"
    # The same verification on a backup whose dump the server refuses: the
    # checksums are made to match, so only loading it can tell.
    bad = bdir / "bad-src"
    subprocess.run(["cp", "-a", str(bdir / "checked"), str(bad)], check=True)
    (bad / "dump.sql.gz").write_bytes(gzip.compress(b"CREATE TABLE no_such_db.t (n INT);\n"))
    sums = "".join(f"{hashlib.sha256((bad / f).read_bytes()).hexdigest()}  {f}\n"
                   for f in [ln.split()[1] for ln in (bad / "SHA256SUMS").read_text().splitlines()])
    (bad / "SHA256SUMS").write_text(sums)
    proc = subprocess.run(["bash", str(SCRIPTS / "verify.sh"), str(bad)],
                          env={**world.argv_env("verify.sh"), "HOME": str(world.root), "TMPDIR": str(world.root),
                               "FLAVOR": "mariadb", **world.credential_env(),
                               "TERMINATION_LOG": "/dev/null", "VERIFY_DIR": str(vdir), "VERIFY_PORT": port},
                          capture_output=True, text=True, timeout=300)
    line = proc.stdout.strip().splitlines()[-1]
    assert proc.returncode != 0 and '"reason":"verify-failed"' in line and "does not restore" in line, proc
    assert not vdir.exists()
    # Issue 34.11: the check compares the position the restored server reports,
    # not the dump's header parsed twice. A restore that loads the data but not
    # the position (sql_set_restored_position made a no-op, in a copy of the
    # installed scripts) fails verification.
    mutant = Path(tempfile.mkdtemp(prefix="mut-")) / "scripts"
    shutil.copytree(SCRIPTS, mutant)
    needle = "sql_set_restored_position() {\n"
    text = (mutant / "common.sh").read_text()
    assert text.count(needle) == 1, "sql_set_restored_position() not found in common.sh"
    (mutant / "common.sh").write_text(text.replace(needle, needle + "  return 0\n"))
    proc = subprocess.run(["bash", str(mutant / "verify.sh"), str(bdir / "checked")],
                          env={**world.argv_env("verify.sh"), "HOME": str(world.root), "TMPDIR": str(world.root),
                               "FLAVOR": "mariadb", **world.credential_env(),
                               "TERMINATION_LOG": "/dev/null", "VERIFY_DIR": str(vdir), "VERIFY_PORT": port},
                          capture_output=True, text=True, timeout=300)
    line = proc.stdout.strip().splitlines()[-1]
    assert proc.returncode != 0 and "restored server's position" in line, proc
    shutil.rmtree(mutant.parent)
    assert not vdir.exists()
    # Through backup.sh: a verification that fails leaves no backup and prunes nothing.
    refused = cluster.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME="refused", BACKUP_VERIFY="true",
                          VERIFY_DIR=vdir, SERVER_BIN="false", KEEP="1", RETENTION_OWNER=owner, BACKUP_OWNER=owner)
    assert refused.rc != 0 and refused.json["reason"] == "verify-failed", refused
    assert not (bdir / "refused").exists() and (bdir / "old").exists() and (bdir / "checked").exists()
    badenv = cluster.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME="x", BACKUP_VERIFY="yes")
    assert badenv.rc != 0 and badenv.json["reason"] == "bad-env", badenv
    REPORT.append(f"verification: {ok.json['verifiedTables']} tables restored into a throwaway server in "
                  f"{ok.json['verifySeconds']}s; a dump the server refuses fails verify-failed, nothing pruned "
                  f"(old backup {old.json['location']} kept)")

# ------------------------------------------------------------ 19.3

def test_binlog_archive(cluster, world, request):
    """Issue 19.3: binlog.sh archives each closed binary log once (closing the current one
    when it holds transactions), after a failover the new primary's own
    sequence, and a restore from the archive reaches the last run; retention
    keeps what the oldest kept backup needs."""
    cluster.bootstrap()
    p = cluster["db-0"]
    root = bdir_of(cluster)
    adir = root / "binlog"
    owner = "scheduled ns/db uid-1"
    insert(p, 1, 21, "A")
    cluster.wait_synced(p)
    backup(cluster, root, "base", PRIMARY="db-0", BACKUP_OWNER=owner)

    def archive(**env):
        r = cluster.run("binlog.sh", PRIMARY="db-0", ARCHIVE_DIR=adir, **env)
        assert r.rc == 0 and r.json["result"] == "archived", r
        return r

    a1 = archive()
    assert a1.json["archived"], a1
    a2 = archive()
    assert a2.json["archived"] == [], "nothing new: nothing archived twice"
    insert(p, 21, 41, "B")
    t1 = next_second()
    insert(p, 41, 61, "C")
    a3 = archive()
    assert len(a3.json["archived"]) == 1, a3
    # failover by hand: db-1 takes over, and the archive follows it
    demote(cluster, "db-0", "db-1")
    insert(cluster["db-1"], 61, 81, "D")
    t2 = next_second()
    insert(cluster["db-1"], 81, 101, "E")
    a4 = archive()
    assert a4.json["primary"] == "db-1" and a4.json["identity"] != a3.json["identity"], a4
    targets = []
    try:
        for until, want in ((t1, range(1, 41)), (t2, range(1, 81))):
            tgt = fresh(world, f"arch-{len(targets)}")
            targets.append(tgt)
            rr = restore(world, tgt, root / "base", RESTORE_ARCHIVE=adir, RESTORE_UNTIL=fmt(until))
            assert rr.rc == 0 and rr.json["pitr"] is True, rr
            assert rows(tgt) == set(want), (fmt(until), len(rows(tgt)))
            tgt.kill()
        # after the last run: not archived yet, refused naming the range
        tgt = fresh(world, "arch-late")
        targets.append(tgt)
        time.sleep(1)
        late = restore(world, tgt, root / "base", RESTORE_ARCHIVE=adir, RESTORE_UNTIL=fmt(next_second()))
        assert late.rc != 0 and late.json["reason"] == "binlog-gap" and a4.json["until"] in late.json["message"], late
    finally:
        for t in targets:
            t.kill()
    # retention: a newer backup is the oldest kept one; older archived files go
    cluster.wait_synced(cluster["db-1"])
    nb = backup(cluster, root, "newer", PRIMARY="db-1", BACKUP_OWNER=owner, BACKUP_BINLOGS="archive")
    assert nb.json["binlogs"] == 0 and not (root / "newer" / "binlog").exists(), "the archive holds them"
    shutil.rmtree(root / "base")
    insert(cluster["db-1"], 101, 111, "F")
    a5 = archive(RETENTION_OWNER=owner)
    assert a5.json["pruned"] > 0, a5
    tgt = fresh(world, "arch-pruned")
    try:
        t4 = next_second()
        a6 = archive(RETENTION_OWNER=owner)
        # without the archive the backup alone cannot reach t4, and says so
        no = restore(world, tgt, root / "newer", RESTORE_UNTIL=fmt(t4))
        assert no.rc != 0 and no.json["reason"] == "binlog-gap", no
        assert is_empty(tgt)
        rr = restore(world, tgt, root / "newer", RESTORE_ARCHIVE=adir, RESTORE_UNTIL=fmt(t4))
        assert rr.rc == 0 and rr.json["archive"] == a4.json["identity"], rr
        assert rows(tgt) == set(range(1, 111))
        left = sorted(str(f.relative_to(adir)) for f in adir.rglob("*") if f.is_file())
        assert not any(f.endswith(".gz") and f.startswith(a3.json["identity"] + "/") for f in left), left
    finally:
        tgt.kill()
    REPORT.append(f"binlog archive: runs archived {[len(a.json['archived']) for a in (a1, a2, a3, a4, a5, a6)]} "
                  f"files; run took {a3.seconds:.1f}s; failover followed ({a3.json['identity']} -> "
                  f"{a4.json['identity']}); pruned {a5.json['pruned']} after the oldest backup moved; "
                  f"recovery point = the CronJob interval + {max(a.seconds for a in (a3, a4, a5)):.1f}s")


def test_retention_keeps_earlier_incarnations(cluster, world, request):
    """Issue 34.2: retention counted only the current cluster uid's scheduled
    backups.  An earlier incarnation of the same name (deleted and created again,
    same prefix) keeps its scheduled backups in the store, and those hold no binary
    logs (the archive does): the first archive run after the new incarnation's
    first backup deleted the archived sequence they need, so a point-in-time
    restore of them failed binlog-gap for good.  Every scheduled backup of the
    prefix counts now.  MariaDB only: the role change is done by hand with its
    statements (`demote`); the retention is the same shell on both flavors."""
    cluster.bootstrap()
    p = cluster["db-0"]
    root = bdir_of(cluster)
    adir = root / "binlog"
    earlier, now = "scheduled ns/db uid-1", "scheduled ns/db uid-2"
    insert(p, 1, 11, "A")
    cluster.wait_synced(p)
    backup(cluster, root, "earlier", PRIMARY="db-0", BACKUP_OWNER=earlier, BACKUP_BINLOGS="archive")
    insert(p, 11, 21, "B")
    t1 = next_second()
    insert(p, 21, 31, "C")

    def archive(primary, **env):
        r = cluster.run("binlog.sh", PRIMARY=primary, ARCHIVE_DIR=adir, **env)
        assert r.rc == 0 and r.json["result"] == "archived", r
        return r

    a1 = archive("db-0")
    # the role moves (the earlier incarnation's archive is an older sequence now),
    # and the new incarnation takes its first scheduled backup
    demote(cluster, "db-0", "db-1")
    insert(cluster["db-1"], 31, 41, "D")
    cluster.wait_synced(cluster["db-1"])
    backup(cluster, root, "first", PRIMARY="db-1", BACKUP_OWNER=now, BACKUP_BINLOGS="archive")
    a2 = archive("db-1", RETENTION_OWNER=now)
    assert a2.json["identity"] != a1.json["identity"], a2
    assert a2.json["pruned"] == 0, a2
    tgt = fresh(world, "incarnation")
    try:
        rr = restore(world, tgt, root / "earlier", RESTORE_ARCHIVE=adir, RESTORE_UNTIL=fmt(t1))
        assert rr.rc == 0 and rr.json["pitr"] is True, rr
        assert rows(tgt) == set(range(1, 21))
    finally:
        tgt.kill()
    REPORT.append(f"archive retention: the earlier incarnation's scheduled backup still restores to {fmt(t1)} "
                  f"from its archived sequence {a1.json['identity']} after the new one's run "
                  f"(pruned {a2.json['pruned']})")


@pytest.mark.all_servers
def test_archive_start_states_after_a_role_change_are_the_servers(cluster, world, request):
    """Issue 34.12: after a role change a binary log begins with the GTIDs of two
    sources, which MySQL prints with a newline after the comma.  Read through the
    batch client that newline became the two characters `\\n`, the text did not
    parse, and the archive Job failed on every run (before the strict parser of
    issue 30.2: it flushed a new file on every run and retention stopped
    pruning).  The agent reads the header over the protocol: every `.start` is the
    server's own start state of its file, and an idle second run neither archives
    nor closes anything."""
    cluster.bootstrap()
    root = bdir_of(cluster)
    adir = root / "binlog"
    insert(cluster["db-0"], 1, 6, "A")
    cluster.wait_synced(cluster["db-0"])
    sw = cluster.run("switchover.sh", PRIMARY="db-0", TARGET="db-1")
    assert sw.rc == 0 and sw.json["result"] == "switched", sw
    p = cluster["db-1"]
    insert(p, 6, 11, "B")
    p.query("FLUSH BINARY LOGS")
    insert(p, 11, 16, "C")

    def archive():
        r = cluster.run("binlog.sh", PRIMARY="db-1", ARCHIVE_DIR=adir)
        assert r.rc == 0 and r.json["result"] == "archived" and r.json["primary"] == "db-1", r
        return r

    first = archive()
    assert first.json["archived"], first
    files = [r[0] for r in p.query("SHOW BINARY LOGS")]
    second = archive()
    assert second.json["archived"] == [], second
    assert [r[0] for r in p.query("SHOW BINARY LOGS")] == files, "an idle run closes no file"
    header = "Previous_gtids" if world.kind.mysql else "Gtid_list"
    multi = 0
    for f in first.json["archived"]:
        stored = (adir / first.json["identity"] / f"{f}.start").read_text()
        info = next(r[5] for r in p.query(f"SHOW BINLOG EVENTS IN '{f}' LIMIT 4") if r[2] == header)
        server = info.strip("[]").replace("\\n", "").replace("\n", "").replace(" ", "")
        assert sorted(x for x in stored.split(",") if x) == sorted(x for x in server.split(",") if x), (f, stored, info)
        multi += "," in stored
    assert multi, "a file after the role change starts with two sources"
    REPORT.append(f"archive start states ({world.kind.name}): {len(first.json['archived'])} files archived "
                  f"after a switchover, {multi} starting with two sources; an idle rerun closed nothing")


@pytest.mark.all_servers
def test_the_dump_position_is_the_tools_not_the_users(cluster, world, request):
    """Issue 34.12: a backup records the position its dump tool wrote.  The script
    took the first `gtid_slave_pos='…'` in the first 400 lines, and mariadb-dump
    writes its own at the end, after the users' routines, whose bodies it copies
    verbatim: a procedure that mentions the position made every backup fail
    `no-gtid`, and one that carries a position ahead of the data made it the
    backup's (a point-in-time restore would skip what lies between).  The agent
    reads only the tool's own statement."""
    cluster.bootstrap()
    p = cluster["db-0"]
    insert(p, 1, 6, "A")
    if world.kind.mysql:
        ahead = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-999"
        planted = f"SET @@GLOBAL.GTID_PURGED='{ahead}';"
        here = "SELECT @@global.gtid_executed"
    else:
        ahead = "0-1-999"
        planted = f"-- SET GLOBAL gtid_slave_pos='{ahead}';"
        here = "SELECT @@global.gtid_binlog_pos"
    p.query("CREATE DATABASE aaa")
    # More dump than a pipe holds: the agent stopped reading at MySQL's header, and
    # the decompressor feeding it died of SIGPIPE (a backup on the real node failed)
    p.query("CREATE TABLE aaa.big (i INT PRIMARY KEY, b VARCHAR(200))")
    for k in range(4):
        p.query("INSERT INTO aaa.big VALUES " + ",".join(
            f"({k * 700 + i}, '{os.urandom(64).hex()}')" for i in range(700)))
    p.query("CREATE PROCEDURE aaa.mentions() SET @x = 'gtid_slave_pos=''0-1-1'''")
    p.query(f'CREATE PROCEDURE aaa.plants() SET @x = "\n{planted}\n"')
    cluster.wait_synced(p)
    want = sorted(x for x in p.value(here).replace("\n", "").split(",") if x)
    r = backup(cluster, bdir_of(cluster), "planted", PRIMARY="db-0")
    assert sorted(x for x in r.json["gtid"].split(",") if x) == want, (r.json["gtid"], want)
    assert ahead not in r.json["gtid"]
    REPORT.append(f"dump position ({world.kind.name}): the dump tool's {r.json['gtid']!r}, not the one a "
                  "procedure carried")


@pytest.mark.all_servers
def test_an_archive_backlog_takes_several_runs(cluster, world, request):
    """Issue 34.12: an S3 archive run stages every closed file before it pushes
    any, so a backlog larger than its staging volume was evicted in every run and
    never archived.  With ARCHIVE_MAX_BYTES (the hook sets half the staging
    volume) a run archives files in order up to that budget, one at least; the
    rest go to the next runs, and `.until` moves only when a run got everything."""
    cluster.bootstrap()
    p = cluster["db-0"]
    adir = bdir_of(cluster) / "binlog"
    for i in range(3):
        insert(p, 10 * i + 1, 10 * i + 11, "A")
        p.query("FLUSH BINARY LOGS")
    insert(p, 31, 41, "B")
    runs = []
    while True:
        r = cluster.run("binlog.sh", PRIMARY="db-0", ARCHIVE_DIR=adir, ARCHIVE_MAX_BYTES=1)
        assert r.rc == 0 and r.json["result"] == "archived", r
        runs.append(r)
        if "until" in r.json:
            break
        assert len(r.json["archived"]) == 1 and r.json["left"] > 0, r
        assert not (adir / f"{r.json['identity']}.until").exists(), "no run got everything yet"
        assert len(runs) < 10, runs
    ident = runs[0].json["identity"]
    got = [f for r in runs for f in r.json["archived"]]
    assert got == sorted(got) and len(got) == len(set(got)) >= 4, got
    assert len(runs) == len(got), f"one file per run: {[r.json['archived'] for r in runs]}"
    assert (adir / f"{ident}.until").exists()
    left = [r.json.get("left", 0) for r in runs]
    bad = cluster.run("binlog.sh", PRIMARY="db-0", ARCHIVE_DIR=adir, ARCHIVE_MAX_BYTES="1e9")
    assert bad.rc != 0 and bad.json["reason"] == "bad-env", bad
    REPORT.append(f"archive budget ({world.kind.name}): a backlog of {len(got)} files archived one per run "
                  f"(left {left}), .until written by the last run only")


@pytest.mark.all_servers
def test_a_committed_backup_is_reported_again_only_to_its_owner(cluster, world, request):
    """Issue 34.12: a retried attempt of a backup Job reports the backup an earlier
    attempt committed instead of dumping anew.  Job names of a recreated
    `MySQLBackup` or same-name cluster can repeat (a 20-bit hash of the uid), and
    backup.sh reported whatever result.json it found: an earlier incarnation's
    backup became the new one's.  Now only its own owner's is reported."""
    cluster.bootstrap()
    bdir = bdir_of(cluster)
    mine = "final ns/db uid-1"
    first = backup(cluster, bdir, "final", PRIMARY="db-0", BACKUP_OWNER=mine)

    def again(owner):
        return cluster.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME="final", BACKUP_OWNER=owner)

    same = again(mine)
    assert same.rc == 0 and same.line == first.line, same
    other = again("final ns/db uid-2")
    assert other.rc != 0 and other.json["reason"] == "exists" and "uid-1" in other.json["message"], other
    (bdir / "final" / "OWNER").unlink()
    nobody = again(mine)
    assert nobody.rc != 0 and nobody.json["reason"] == "exists", nobody
    REPORT.append(f"re-report ({world.kind.name}): the same owner got the committed result again; another owner, "
                  "and a folder without OWNER, were refused `exists`")


# ------------------------------------------------------------ 34.6

def pausing_dump(world: World, d: Path) -> str:
    """A PATH whose dump tool, on its first call only, says it started (d/started)
    and waits for d/go before it runs: the test changes the servers in between, as
    clients may while a backup runs.  The real tool then takes its snapshot."""
    real = shutil.which(world.kind.dump, path=world.script_path())
    (d / "bin").mkdir(parents=True, exist_ok=True)
    w = d / "bin" / world.kind.dump
    w.write_text(f"""#!/bin/bash
if [ ! -e {d}/paused ]; then
  : > {d}/paused; : > {d}/started
  for _ in $(seq 1200); do [ -e {d}/go ] && break; sleep 0.1; done
fi
exec {real} "$@"
""")
    w.chmod(0o755)
    return f"{d / 'bin'}{os.pathsep}{world.script_path()}"


@pytest.mark.all_servers
def test_what_the_dump_window_creates_is_in_the_backup_or_it_fails(cluster, world, request):
    """Issue 34.6: the schema list was read before the dump's snapshot and the
    accounts after it.  A database created in between was silently missing from the
    backup (a restore lacked it), and an account created during the dump was both in
    accounts.sql and after the dump's position (every point-in-time replay of its
    CREATE USER failed).  Now the agent reads schemas and accounts before and after
    the dump: changed, the attempt fails `catalog-changed` and the Job's next attempt
    (same name) takes it all again."""
    cluster.bootstrap()
    p = cluster["db-0"]
    insert(p, 1, 6, "A")
    cluster.wait_synced(p)
    d = world.root / f"{cluster.tag}-pause"
    path = pausing_dump(world, d)

    def client():
        wait_for(lambda: (d / "started").exists(), 120, what="the dump to start")
        p.query("CREATE DATABASE late; CREATE TABLE late.t (i INT PRIMARY KEY); INSERT INTO late.t VALUES (7);"
                "CREATE USER 'u2'@'%' IDENTIFIED BY 'pw2'")
        cluster.wait_synced(p)
        (d / "go").write_text("")

    t = threading.Thread(target=client, daemon=True)
    t.start()
    bdir = bdir_of(cluster)
    first = cluster.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME="b", PATH=path)
    t.join(150)
    assert (d / "go").exists(), "the dump never started"
    assert first.rc != 0 and first.json["reason"] == "catalog-changed", first
    assert "late" in first.json["message"] and "accounts" in first.json["message"], first
    assert not (bdir / "b").exists()
    # the Job's next attempt: nothing changes during its dump
    second = backup(cluster, bdir, "b", PRIMARY="db-0", PATH=path)
    assert second.json["databases"] == 2, second
    assert json.loads((bdir / "b" / "manifest.json").read_text())["databases"] == ["hook", "late"]
    assert "`u2`@`%`" in (bdir / "b" / "accounts.sql").read_text()
    target = fresh(world, request.node.name[:40] + "-r")
    try:
        rr = restore(world, target, bdir / "b")
        assert rr.rc == 0, rr
        assert target.value("SELECT i FROM late.t") == "7"
        assert target.value("SELECT COUNT(*) FROM mysql.user WHERE user = 'u2'") == "1"
    finally:
        target.kill()
    REPORT.append(f"dump window ({world.kind.name}): a database and an account created during the dump failed "
                  f"the attempt ({first.json['message']!r}); the next attempt carried both")


# ------------------------------------------------------------ 30.2

def reseal(d: Path):
    """Recompute a backup folder's SHA256SUMS, as anyone who can write the store
    can: checksums prove nothing about who wrote the files."""
    listed = [ln.split()[1] for ln in (d / "SHA256SUMS").read_text().splitlines()]
    (d / "SHA256SUMS").write_text("".join(f"{hashlib.sha256((d / f).read_bytes()).hexdigest()}  {f}\n"
                                          for f in listed))


def payload(mark: Path) -> str:
    """A value that runs a command wherever bash evaluates it as arithmetic."""
    return f"BASH_VERSINFO[$(touch${{IFS}}{mark})0]"


def test_store_values_never_run_as_code(cluster, world, request):
    """Issue 30.2: numbers and GTID texts from a backup's POSITIONS and its dump
    header once reached bash arithmetic in restore.sh, which ran a planted
    command in the restore Job pod.  Every such value is refused (`corrupt`)
    before anything is loaded, and nothing runs."""
    cluster.bootstrap()
    p = cluster["db-0"]
    root = bdir_of(cluster)
    insert(p, 1, 11, "A")
    cluster.wait_synced(p)
    backup(cluster, root, "good", PRIMARY="db-0", BACKUP_COMPRESSION="none")
    import shutil
    until = fmt(next_second())
    tgt = fresh(world, "poison")
    try:
        cases = []
        for key in ("pitr-from", "binlogs-until", "dump-gtid", "binlogs-gtid"):
            cases.append(("POSITIONS " + key, key))
        cases.append(("dump header", None))
        for i, (what, key) in enumerate(cases):
            d = root / f"poison-{i}"
            shutil.copytree(root / "good", d)
            mark = world.root / f"PWNED-{i}"
            if key:
                lines = (d / "POSITIONS").read_text().splitlines()
                (d / "POSITIONS").write_text("".join(
                    (f"{key} {payload(mark)}" if ln.split(" ", 1)[0] == key else ln) + "\n" for ln in lines))
            else:
                dump = (d / "dump.sql").read_text()
                g = p.value("SELECT @@gtid_binlog_pos")
                assert f"gtid_slave_pos='{g}'" in dump
                (d / "dump.sql").write_text(dump.replace(f"gtid_slave_pos='{g}'",
                                                         f"gtid_slave_pos='0-1-{payload(mark)}'"))
            reseal(d)
            r = restore(world, tgt, d, RESTORE_STEP="check", RESTORE_UNTIL=until)
            assert not mark.exists(), f"{what}: the planted command ran"
            assert r.rc != 0 and r.json["reason"] == "corrupt", (what, r)
        assert is_empty(tgt)
    finally:
        tgt.kill()
    REPORT.append(f"restore.sh: {len(cases)} planted values (POSITIONS keys, dump header) refused as corrupt; "
                  "no command ran")


def test_archive_store_values_never_run_as_code(cluster, world, request):
    """Issue 30.2: the archive Job read the backups' POSITIONS (of folders whose
    OWNER, a public string, it matches) and the archive's .start files into bash
    arithmetic.  A planted value is refused and nothing runs; with the cluster's
    signing key, an unsigned folder does not count at all."""
    cluster.bootstrap()
    p = cluster["db-0"]
    root = bdir_of(cluster)
    adir = root / "_binlog"
    owner = "scheduled ns/db uid-1"
    insert(p, 1, 11, "A")
    cluster.wait_synced(p)
    backup(cluster, root, "base", PRIMARY="db-0", BACKUP_OWNER=owner)
    insert(p, 11, 21, "B")
    first = cluster.run("binlog.sh", PRIMARY="db-0", ARCHIVE_DIR=adir, RETENTION_OWNER=owner)
    assert first.rc == 0, first
    # A planted backup folder of the same OWNER.
    mark = world.root / "PWNED-positions"
    planted = root / "x"
    planted.mkdir()
    (planted / "OWNER").write_text(owner + "\n")
    (planted / "result.json").write_text('{"result":"backed-up"}\n')
    (planted / "POSITIONS").write_text(f"dump-gtid 0-1-1\npitr-from {payload(mark)}\n"
                                       "binlogs-until 1\nbinlogs-gtid 0-1-1\n")
    r = cluster.run("binlog.sh", PRIMARY="db-0", ARCHIVE_DIR=adir, RETENTION_OWNER=owner)
    assert not mark.exists(), "a planted POSITIONS ran a command in the archive Job"
    assert r.rc != 0 and r.json["reason"] == "corrupt", r
    # With the signing key, the unsigned folder is not even read.
    key = world.root / "signing-key"
    key.write_text("k3y")
    r = cluster.run("binlog.sh", PRIMARY="db-0", ARCHIVE_DIR=adir, RETENTION_OWNER=owner,
                    ARCHIVE_VERIFY_KEY_FILE=key)
    assert not mark.exists() and r.rc == 0 and r.json["result"] == "archived", r
    assert "not signed by the cluster's key" in r.stderr
    import shutil
    shutil.rmtree(planted)
    # A planted .start in the archive.
    insert(p, 21, 31, "C")
    assert cluster.run("binlog.sh", PRIMARY="db-0", ARCHIVE_DIR=adir).rc == 0
    ident = next(d for d in adir.iterdir() if d.is_dir())
    starts = sorted(ident.glob("*.start"))
    assert len(starts) >= 2, starts
    mark2 = world.root / "PWNED-start"
    starts[1].write_text(payload(mark2))
    r = cluster.run("binlog.sh", PRIMARY="db-0", ARCHIVE_DIR=adir, RETENTION_OWNER=owner)
    assert not mark2.exists(), "a planted .start ran a command in the archive Job"
    assert r.rc != 0 and r.json["reason"] == "corrupt", r

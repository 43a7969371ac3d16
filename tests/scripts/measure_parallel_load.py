#!/usr/bin/env python3
"""Single-threaded against parallel load of a logical dump at about 1 GB
(issue 19.7): does loading several tables at once pay on this machine, and what
would it give on a larger one?  Not part of the test suite (it takes minutes);
docs/performance.md has the figures it printed.

    python3 tests/scripts/measure_parallel_load.py [--mib 1024] [--tables 4] [--restore-sh]

The data: the orders-like rows of measure_compression.py, spread over TABLES
tables of equal size.  Each table is dumped on its own with the options
backup.sh uses (mariadb-dump --single-transaction --hex-blob, extended
inserts), then loaded into a fresh server the way restore.sh loads (the binary
log off for the session): by one client, the tables one after the other (what
restore.sh does today with one dump), then by 2 and by TABLES clients at once,
each a fresh server.  The server has the same settings each time.

With --restore-sh it measures what a restore Job does instead: backup.sh
takes one gzip'd dump of the tables, then restore.sh loads it into a fresh
server with RESTORE_PARALLEL 1, 2 and TABLES (spec.restore.parallel; above 1
the dump is first cut into pieces, which the time includes).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dbcluster import Cluster, Server, World, run_script  # noqa: E402

CNF = "innodb_buffer_pool_size = 512M\n"


def load(target: Server, dump: Path) -> None:
    """One client loads one table's dump, without the binary log (as restore.sh)."""
    with open(dump, "rb") as f:
        proc = subprocess.Popen(target.client_args() + ["--init-command=SET SESSION sql_log_bin=0", "shop"],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert proc.stdin is not None
        while chunk := f.read(1 << 20):
            proc.stdin.write(chunk)
        proc.stdin.close()
        err = proc.stderr.read() if proc.stderr else b""
        if proc.wait() != 0:
            raise RuntimeError(f"loading {dump.name} failed: {err[-2000:]!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=1024, help="total dump size to reach, MiB (default 1024)")
    ap.add_argument("--tables", type=int, default=4, help="tables the data is spread over (default 4)")
    ap.add_argument("--restore-sh", action="store_true", help="backup.sh once, then restore.sh with 1, 2, TABLES clients")
    args = ap.parse_args()
    w = World()
    try:
        c = Cluster(w, "measure", n=1, extra_cnf=CNF)
        p = c["db-0"]
        c.run("bootstrap.sh", PRIMARY="")
        p.query("CREATE DATABASE shop")
        columns = ("id BIGINT AUTO_INCREMENT PRIMARY KEY, customer INT, amount DECIMAL(10,2), placed DATETIME, "
                   "status VARCHAR(12), ref CHAR(32), note VARCHAR(80)")
        # About 137 bytes of dump per row (measure_compression.py): double, then top up.
        want = args.mib * 2**20 // 137 // args.tables
        t0 = time.time()
        for i in range(args.tables):
            t = f"shop.orders_{i}"
            p.query(f"CREATE TABLE {t} ({columns})")
            p.query(f"INSERT INTO {t} (customer, amount, placed, status, ref, note) "
                    "SELECT seq % 9973, (seq * 37 % 100000) / 100, '2026-01-01' + INTERVAL seq MINUTE, "
                    "ELT(1 + seq % 4, 'placed', 'paid', 'shipped', 'returned'), MD5(seq), "
                    "CONCAT('deliver to door ', seq % 211, ', ring twice; gift wrap: ', IF(seq % 3, 'no', 'yes')) "
                    "FROM shop.seq_1_to_100000")
            insert = (f"INSERT INTO {t} (customer, amount, placed, status, ref, note) "
                      f"SELECT customer + 1, amount, placed + INTERVAL 1 DAY, status, MD5(ref), note FROM {t}")
            have = 100_000
            while have * 2 <= want:
                p.query(insert, timeout=3600)
                have *= 2
            if want > have:
                p.query(f"{insert} LIMIT {want - have}", timeout=3600)
        rows = sum(int(p.value(f"SELECT COUNT(*) FROM shop.orders_{i}") or 0) for i in range(args.tables))
        print(f"data: {rows} rows in {args.tables} tables, made in {time.time() - t0:.0f}s", flush=True)
        if args.restore_sh:
            restore_sh(w, c, rows, args.tables)
            return
        ddir = w.root / "dumps"
        ddir.mkdir()
        dumps = []
        t = time.time()
        for i in range(args.tables):
            out = ddir / f"orders_{i}.sql"
            with open(out, "wb") as f:
                conn = [a for a in p.client_args()[1:] if a not in ("-N", "-B") and not a.startswith("--connect-timeout")]
                subprocess.run(["mariadb-dump", *conn, "--single-transaction", "--hex-blob",
                                "shop", f"orders_{i}"], stdout=f, check=True, timeout=3600)
            dumps.append(out)
        total = sum(d.stat().st_size for d in dumps) / 2**20
        print(f"dump: {total:.1f} MiB in {args.tables} files, {time.time() - t:.1f}s", flush=True)
        results = {}
        for clients in sorted({1, 2, args.tables}):
            target = w.server("db-0", f"load-{clients}")
            target.initialize()
            target.set_extra_cnf(CNF)
            target.start()
            target.query("CREATE DATABASE shop")
            t = time.time()
            with ThreadPoolExecutor(max_workers=clients) as pool:
                list(pool.map(lambda d: load(target, d), dumps))
            took = time.time() - t
            got = sum(int(target.value(f"SELECT COUNT(*) FROM shop.orders_{i}") or 0) for i in range(args.tables))
            assert got == rows, (got, rows)
            results[clients] = took
            print(f"load with {clients} client(s): {took:.1f}s ({total / took:.1f} MiB/s), {got} rows", flush=True)
            target.kill()
        one = results[1]
        for clients, took in sorted(results.items()):
            print(f"speed-up with {clients} client(s): {one / took:.2f}x", flush=True)
    finally:
        w.close()


def restore_sh(w: World, c: Cluster, rows: int, tables: int) -> None:
    """backup.sh, then restore.sh with 1, 2 and `tables` clients."""
    bdir = w.root / "backups"
    bdir.mkdir()
    t = time.time()
    r = c.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME="b")
    assert r.rc == 0, r
    dump = bdir / "b" / "dump.sql.gz"
    print(f"backup.sh: {dump.stat().st_size / 2**20:.1f} MiB gzip'd, {time.time() - t:.1f}s", flush=True)
    results = {}
    for clients in sorted({1, 2, tables}):
        target = w.server("db-0", f"restore-{clients}")
        target.initialize()
        target.set_extra_cnf(CNF)
        target.start()
        t = time.time()
        rr = run_script("restore.sh", w, {"PODS": f"db-0={target.addr}", "POD_NAME": "db-0",
                                          "RESTORE_FROM": str(bdir / "b"), "RESTORE_PARALLEL": str(clients),
                                          "RESTORE_WORK_DIR": str(w.root)}, timeout=7200)
        took = time.time() - t
        assert rr.rc == 0 and rr.json["clients"] == clients, rr
        got = sum(int(target.value(f"SELECT COUNT(*) FROM shop.orders_{i}") or 0) for i in range(tables))
        assert got == rows, (got, rows)
        results[clients] = took
        print(f"restore.sh with RESTORE_PARALLEL={clients}: {took:.1f}s, {got} rows", flush=True)
        target.kill()
    for clients, took in sorted(results.items()):
        print(f"speed-up with {clients} client(s): {results[1] / took:.2f}x", flush=True)


if __name__ == "__main__":
    main()

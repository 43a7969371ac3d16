#!/usr/bin/env python3
"""Backup compression at about 1 GB (issue 19.4): size and time of backup.sh
with BACKUP_COMPRESSION=none and gzip (the default), and of restore.sh from each,
on a real MariaDB server.  Not part of the test suite (it takes minutes);
docs/performance.md has the figures it printed.

    python3 tests/scripts/measure_compression.py [--mib 1024]

The data: one InnoDB table of orders-like rows (integers, a timestamp, a status
word, a 32-hex-digit reference and a short free-text note), doubled with
INSERT ... SELECT until the dump reaches the size asked for.  Real application
data compresses better or worse than this; the ratio is the figure to adapt.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dbcluster import Cluster, World, run_script  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=1024, help="dump size to reach, MiB (default 1024)")
    args = ap.parse_args()
    w = World()
    try:
        c = Cluster(w, "measure", n=1, extra_cnf="innodb_buffer_pool_size = 512M\n")
        p = c["db-0"]
        c.run("bootstrap.sh", PRIMARY="")
        p.query("CREATE DATABASE shop; CREATE TABLE shop.orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
                "customer INT, amount DECIMAL(10,2), placed DATETIME, status VARCHAR(12), ref CHAR(32), "
                "note VARCHAR(80))")
        p.query("INSERT INTO shop.orders (customer, amount, placed, status, ref, note) "
                "SELECT seq % 9973, (seq * 37 % 100000) / 100, '2026-01-01' + INTERVAL seq MINUTE, "
                "ELT(1 + seq % 4, 'placed', 'paid', 'shipped', 'returned'), MD5(seq), "
                "CONCAT('deliver to door ', seq % 211, ', ring twice; gift wrap: ', IF(seq % 3, 'no', 'yes')) "
                "FROM shop.seq_1_to_100000")
        # About 137 bytes of dump per row (measured at 1.6 M rows): double, then top up.
        want = args.mib * 2**20 // 137
        t0 = time.time()
        insert = ("INSERT INTO shop.orders (customer, amount, placed, status, ref, note) "
                  "SELECT customer + 1, amount, placed + INTERVAL 1 DAY, status, MD5(ref), note FROM shop.orders")
        have = 100_000
        while have * 2 <= want:
            p.query(insert, timeout=3600)
            have *= 2
        if want > have:
            p.query(f"{insert} LIMIT {want - have}", timeout=3600)
        rows = p.value("SELECT COUNT(*) FROM shop.orders")
        print(f"data: {rows} rows, loaded in {time.time() - t0:.0f}s", flush=True)
        bdir = w.root / "backups"
        bdir.mkdir()
        for mode in ("none", "gzip"):
            t = time.time()
            r = c.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME=mode, BACKUP_COMPRESSION=mode)
            took = time.time() - t
            assert r.rc == 0, r
            dump = bdir / mode / ("dump.sql.gz" if mode == "gzip" else "dump.sql")
            print(f"backup {mode}: dump {dump.stat().st_size / 2**20:.1f} MiB, backup.sh {took:.1f}s", flush=True)
        for mode in ("none", "gzip"):
            target = w.server("db-0", f"restore-{mode}")
            target.initialize()
            target.start()
            t = time.time()
            rr = run_script("restore.sh", w, {"PODS": f"db-0={target.addr}", "POD_NAME": "db-0",
                                              "RESTORE_FROM": str(bdir / mode)}, timeout=7200)
            took = time.time() - t
            assert rr.rc == 0, rr
            print(f"restore {mode}: restore.sh {took:.1f}s, {target.value('SELECT COUNT(*) FROM shop.orders')} rows",
                  flush=True)
            target.kill()
    finally:
        w.close()


if __name__ == "__main__":
    main()

"""users.sh against real servers (issue 17.4): applications connect with their
own accounts, never root; the accounts are made exactly as declared,
idempotently, replicate to the replicas, and only the script's own accounts are
ever dropped."""

from __future__ import annotations

import subprocess

import pytest

from conftest import REPORT
from dbcluster import Cluster


def passwords(c: Cluster, **pw: str):
    d = c.world.root / c.tag / "users"
    d.mkdir(parents=True, exist_ok=True)
    for name, value in pw.items():
        (d / name).write_text(value + "\n")
    return d


def login(c: Cluster, pod: str, user: str, password: str, sql: str) -> list[list[str]]:
    """Connect as an application would: the account and its password, over TCP."""
    cnf = c.world.root / c.tag / f"client-{user}.cnf"
    cnf.write_text(f'[client]\nuser={user}\npassword="{password}"\n')
    cnf.chmod(0o600)
    r = subprocess.run(["mariadb", f"--defaults-extra-file={cnf}", "--protocol=TCP", "-h", "127.0.0.1",
                        "-P", str(c[pod].port), "--connect-timeout=5", "-N", "-B", "-e", sql],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise subprocess.CalledProcessError(r.returncode, sql, r.stdout, r.stderr)
    return [line.split("\t") for line in r.stdout.splitlines()]


def test_users_are_made_as_declared(cluster):
    c = cluster
    c.bootstrap()
    d = passwords(c, shopper="app-pw-1", shop_ro="ro-pw-1")
    r = c.run("users.sh", PRIMARY="db-0", USERS="shopper:shop:rw shop_ro:shop:ro", USERS_DIR=d)
    assert r.rc == 0 and r.json["result"] == "users-applied", r
    assert r.json["users"] == ["shopper", "shop_ro"] and r.json["dropped"] == []

    # The read-write user owns its database; the read-only one reads it on a replica.
    login(c, "db-0", "shopper", "app-pw-1", "CREATE TABLE shop.t (n INT PRIMARY KEY); INSERT INTO shop.t VALUES (1)")
    c.wait_synced(c["db-0"])
    assert login(c, "db-1", "shop_ro", "ro-pw-1", "SELECT n FROM shop.t") == [["1"]]
    with pytest.raises(Exception):
        login(c, "db-0", "shop_ro", "ro-pw-1", "INSERT INTO shop.t VALUES (2)")
    with pytest.raises(Exception):
        login(c, "db-0", "shopper", "app-pw-1", "SELECT COUNT(*) FROM mysql.user")
    # read_only stops the application account on a replica (no READ ONLY ADMIN).
    with pytest.raises(Exception):
        login(c, "db-1", "shopper", "app-pw-1", "INSERT INTO shop.t VALUES (3)")

    # Rerun: nothing changes.  Rotate a password and drop a user: only the
    # script's own accounts go.
    c["db-0"].query("CREATE USER 'someone'@'%' IDENTIFIED BY 'x'")
    again = c.run("users.sh", PRIMARY="db-0", USERS="shopper:shop:rw shop_ro:shop:ro", USERS_DIR=d)
    assert again.rc == 0 and again.json["dropped"] == [], again
    d = passwords(c, shopper="app-pw-2")
    rotated = c.run("users.sh", PRIMARY="db-0", USERS="shopper:shop:rw", USERS_DIR=d)
    assert rotated.rc == 0 and rotated.json["dropped"] == ["shop_ro"], rotated
    assert login(c, "db-0", "shopper", "app-pw-2", "SELECT n FROM shop.t") == [["1"]]
    with pytest.raises(Exception):
        login(c, "db-0", "shopper", "app-pw-1", "SELECT 1")
    users = {row[0] for row in c["db-0"].query("SELECT user FROM mysql.user")}
    assert "shop_ro" not in users and "someone" in users and "root" in users and "repl" in users
    c.wait_synced(c["db-0"])
    assert "shop_ro" not in {row[0] for row in c["db-2"].query("SELECT user FROM mysql.user")}
    REPORT.append(f"users.sh: created 2 users in {r.seconds:.1f}s, rerun {again.seconds:.1f}s, "
                  f"rotated and dropped in {rotated.seconds:.1f}s; other accounts untouched")


def test_users_refuses_a_replica_as_primary(cluster):
    c = cluster
    c.bootstrap()
    d = passwords(c, shopper="pw")
    r = c.run("users.sh", PRIMARY="db-1", USERS="shopper:shop:rw", USERS_DIR=d)
    assert r.rc != 0 and r.json["reason"] == "not-primary", r
    assert "shopper" not in {row[0] for row in c["db-1"].query("SELECT user FROM mysql.user")}


def test_users_refuses_names_it_did_not_check(cluster):
    c = cluster
    c.bootstrap()
    d = passwords(c, **{"x": "pw"})
    r = c.run("users.sh", PRIMARY="db-0", USERS="x';DROP:shop:rw", USERS_DIR=d)
    assert r.rc != 0 and r.json["reason"] == "bad-env", r

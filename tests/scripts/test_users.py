"""users.sh against real servers (issue 17.4): applications connect with their
own accounts, never root; the accounts are made exactly as declared,
idempotently, replicate to the replicas, and only the script's own accounts are
ever dropped."""

from __future__ import annotations

import subprocess

import pytest

from conftest import REPORT
from dbcluster import Cluster

# The agent's `users` command: proven on every server.
pytestmark = pytest.mark.all_servers


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
    r = subprocess.run([c.world.kind.client, f"--defaults-extra-file={cnf}", "--protocol=TCP", "-h", "127.0.0.1",
                        "-P", str(c[pod].port), "--connect-timeout=5", "-N", "-B", "-e", sql],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise subprocess.CalledProcessError(r.returncode, sql, r.stdout, r.stderr)
    return [line.split("\t") for line in r.stdout.splitlines()]


def test_users_are_made_as_declared(cluster):
    c = cluster
    c.bootstrap()
    d = passwords(c, shopper="app-pw-1", shop_ro="ro-pw-1")
    r = c.run("users", PRIMARY="db-0", USERS="shopper:shop:rw shop_ro:shop:ro", USERS_DIR=d)
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
    again = c.run("users", PRIMARY="db-0", USERS="shopper:shop:rw shop_ro:shop:ro", USERS_DIR=d)
    assert again.rc == 0 and again.json["dropped"] == [], again
    d = passwords(c, shopper="app-pw-2")
    rotated = c.run("users", PRIMARY="db-0", USERS="shopper:shop:rw", USERS_DIR=d)
    assert rotated.rc == 0 and rotated.json["dropped"] == ["shop_ro"], rotated
    assert login(c, "db-0", "shopper", "app-pw-2", "SELECT n FROM shop.t") == [["1"]]
    with pytest.raises(Exception):
        login(c, "db-0", "shopper", "app-pw-1", "SELECT 1")
    users = {row[0] for row in c["db-0"].query("SELECT user FROM mysql.user")}
    assert "shop_ro" not in users and "someone" in users and "root" in users and "repl" in users
    c.wait_synced(c["db-0"])
    assert "shop_ro" not in {row[0] for row in c["db-2"].query("SELECT user FROM mysql.user")}
    REPORT.append(f"users: created 2 users in {r.seconds:.1f}s, rerun {again.seconds:.1f}s, "
                  f"rotated and dropped in {rotated.seconds:.1f}s; other accounts untouched")


def test_users_refuses_a_replica_as_primary(cluster):
    c = cluster
    c.bootstrap()
    d = passwords(c, shopper="pw")
    r = c.run("users", PRIMARY="db-1", USERS="shopper:shop:rw", USERS_DIR=d)
    assert r.rc != 0 and r.json["reason"] == "not-primary", r
    assert "shopper" not in {row[0] for row in c["db-1"].query("SELECT user FROM mysql.user")}


def test_users_refuses_names_it_did_not_check(cluster):
    c = cluster
    c.bootstrap()
    d = passwords(c, **{"x": "pw"})
    r = c.run("users", PRIMARY="db-0", USERS="x';DROP:shop:rw", USERS_DIR=d)
    assert r.rc != 0 and r.json["reason"] == "bad-env", r


# Database names that, were they GRANT patterns (`_` and `%` are wildcards in
# `GRANT ... ON db.*`), would match a system schema: mysql, sys, _mysqlhook,
# performance_schema, information_schema.
WILDCARD_SPELLINGS = ["my_ql", "_____", "m____", "mysq_", "_ysql", "s_s", "___", "sy_",
                      "_mysqlhoo_", "__________", "performance_schem_", "information_schem_"]

# What an application account must never do, each a statement that needs a
# privilege on a system schema.
SYSTEM_ACCESS = [
    "SELECT COUNT(*) FROM mysql.user",
    "SELECT COUNT(*) FROM _mysqlhook.users",
    "INSERT INTO _mysqlhook.users (name) VALUES ('x')",
    "SELECT COUNT(*) FROM sys.sys_config",
    "SELECT COUNT(*) FROM performance_schema.threads",
    "CREATE TABLE mysql.x (n INT)",
]
# The same, in the flavor's own spelling.
SYSTEM_ACCESS_FLAVOR = {
    "mariadb": ["SELECT COUNT(*) FROM mysql.global_priv",
                "SET PASSWORD FOR 'mysqlhook'@'%' = PASSWORD('pwned')",
                "UPDATE mysql.global_priv SET priv = '{}' WHERE user = 'repl'"],
    "mysql": ["SET PASSWORD FOR 'mysqlhook'@'%' = 'pwned'",
              "UPDATE mysql.user SET authentication_string = '' WHERE user = 'repl'",
              "SELECT COUNT(*) FROM mysql.slave_master_info",
              "INSERT INTO mysql.global_grants VALUES ('u0', '%', 'SYSTEM_USER', 'N')"],
}


def test_a_database_name_is_not_a_pattern(cluster):
    """Issue 30.1: `database: my_ql` once granted the `mysql` schema, and the
    account reset the operator's password.  Every spelling that would match a
    system schema as a pattern gets its own database only."""
    c = cluster
    c.bootstrap()
    users = {f"u{i}": db for i, db in enumerate(WILDCARD_SPELLINGS)}
    d = passwords(c, **{u: f"pw-{u}" for u in users})
    declared = " ".join(f"{u}:{db}:{'rw' if i % 2 == 0 else 'ro'}" for i, (u, db) in enumerate(users.items()))
    r = c.run("users", PRIMARY="db-0", USERS=declared, USERS_DIR=d)
    assert r.rc == 0 and r.json["result"] == "users-applied", r
    allowed = []
    for u, db in users.items():
        # Its own database exists and is its own.
        assert login(c, "db-0", u, f"pw-{u}", f"SELECT COUNT(*) FROM information_schema.schemata "
                     f"WHERE schema_name = '{db}'") == [["1"]], (u, db)
        for q in SYSTEM_ACCESS + SYSTEM_ACCESS_FLAVOR[c.world.kind.flavor]:
            try:
                login(c, "db-0", u, f"pw-{u}", q)
                allowed.append(f"{u} ({db}): {q}: succeeded")
            except subprocess.CalledProcessError as e:
                # Refused for want of a privilege, not for any other reason
                # (a missing table would make the check hollow).
                if "denied" not in e.stderr:
                    allowed.append(f"{u} ({db}): {q}: not an access error: {e.stderr.strip()}")
    assert not allowed, "application accounts reached system schemas:\n" + "\n".join(allowed)
    # The operator account still logs in with its own password.
    assert c["db-0"].value("SELECT CURRENT_USER()") == "mysqlhook@%"
    REPORT.append(f"users: {len(users)} wildcard spellings x {len(SYSTEM_ACCESS + SYSTEM_ACCESS_FLAVOR[c.world.kind.flavor])} system-schema "
                  "statements: every one refused")


def test_a_system_schema_in_another_case_is_refused(world):
    """Issue 30.1: where names are case-insensitive (lower_case_table_names=1),
    `MySQL` is `mysql`.  users.sh refuses it before touching the server, and
    the hook and the CRD refuse it before that."""
    # MySQL fixes lower_case_table_names when the data directory is initialized
    # (a server started with another value refuses to start): there the refusal
    # is checked on a server of the default setting.
    mysql = world.kind.mysql
    c = Cluster(world, "lctn", extra_cnf="" if mysql else "lower_case_table_names = 1\n")
    try:
        c.bootstrap()
        assert mysql or c["db-0"].value("SELECT @@lower_case_table_names") == "1"
        for db in ("MySQL", "SYS", "Performance_Schema", "_MySQLHook", "INFORMATION_SCHEMA"):
            d = passwords(c, spy="pw-spy")
            r = c.run("users", PRIMARY="db-0", USERS=f"spy:{db}:ro", USERS_DIR=d)
            assert r.rc != 0 and r.json["reason"] == "bad-env" and "system schema" in r.json["message"], r
            assert "spy" not in {row[0] for row in c["db-0"].query("SELECT user FROM mysql.user")}
    finally:
        c.close()


def test_no_file_is_readable_through_sql(cluster):
    """Issue 30.3: a restore loads a store's SQL as the operator account, which
    holds every privilege; without secure_file_priv, LOAD_FILE() read the mounted
    password files (MariaDB's default leaves it unset).  The hook's option file
    confines file access: MySQL to nothing (NULL), MariaDB to an empty directory of
    the pod's own."""
    c = cluster
    c.bootstrap()
    p = c["db-0"]
    secret = c.world.operator_password_file
    assert p.value(f"SELECT LOAD_FILE('{secret}') IS NULL") == "1", "the operator password file is readable"
    assert p.value("SELECT LOAD_FILE('/etc/passwd') IS NULL") == "1"
    with pytest.raises(subprocess.CalledProcessError) as e:
        p.query(f"SELECT 'x' INTO OUTFILE '{c.world.root}/{c.tag}/leak.txt'")
    assert "secure-file-priv" in e.value.stderr or "secure_file_priv" in e.value.stderr, e.value.stderr
    REPORT.append(f"secure_file_priv: {p.value('SELECT @@secure_file_priv')}; LOAD_FILE of the password file "
                  "and INTO OUTFILE refused")

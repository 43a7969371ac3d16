"""The operator account (issue 18.5) against real MariaDB servers: a cluster
made before it (root@'%', no mysqlhook) moves to it without a moment in which
the scripts cannot reach a server, and ends with root local only.

- A legacy cluster's servers know only root@'%'.  Scripts given the operator
  password fall back to root on a server that refuses mysqlhook (ER 1045), so
  a failover or switchover Job of the new template still works there.
- The primary's agent, with the operator password, creates mysqlhook@'%' on
  the primary; it replicates; root@'%' stays while rootRemote says `keep`.
- Once rootRemote says `drop`, the agent drops root's network accounts, on the
  primary, and that replicates too: root logs in through the socket only, every
  script works as mysqlhook, and nothing was written on a replica directly.
- A changed operator password is set again; a replica's agent changes nothing.
The session's `world` (conftest.py) checks every command line of it for passwords.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import REPORT
from dbcluster import OPERATOR_PASSWORD, ROOT_PASSWORD, Cluster, client_cnf, free_port, wait_for


def tcp_login(world, server, user: str, password: str) -> subprocess.CompletedProcess:
    cnf = client_cnf(world.root / f"login-{user}.cnf", user, password)
    return subprocess.run(["mariadb", f"--defaults-extra-file={cnf}", "--protocol=TCP", "-h", "127.0.0.1",
                           "-P", str(server.port), "--connect-timeout=5", "-N", "-B", "-e", "SELECT CURRENT_USER()"],
                          capture_output=True, text=True, timeout=30)


def socket_root(world, server) -> subprocess.CompletedProcess:
    return subprocess.run(["mariadb", f"--defaults-extra-file={world.cnf_root}", "--protocol=SOCKET",
                           f"--socket={server.sock}", "-N", "-B", "-e", "SELECT CURRENT_USER()"],
                          capture_output=True, text=True, timeout=30)


def accounts(server) -> list[list[str]]:
    return server.query("SELECT user, host FROM mysql.user WHERE user IN ('root', 'mysqlhook') ORDER BY user, host")


def test_a_legacy_cluster_moves_to_the_operator_account(world, request):
    c = Cluster(world, request.node.name, legacy=True)
    try:
        c.bootstrap()
        primary, replica = c["db-0"], c["db-1"]
        pf = world.root / c.tag / "primary"
        pf.write_text("db-0\n")
        remote = world.root / c.tag / "rootRemote"
        remote.write_text("keep\n")
        op = {"OPERATOR_PASSWORD_FILE": world.operator_password_file}
        assert accounts(primary) == [["root", "%"], ["root", "localhost"]]

        # A script of the new template on servers that do not know mysqlhook yet:
        # it falls back to root and works.
        r = c.run("join.sh", POD_NAME="db-2", PRIMARY_FILE=pf, **op)
        assert r.rc == 0 and r.json["result"] in ("joined", "already-replica"), r

        def agent(pod, **env):
            return c.run("sidecar", POD_NAME=pod, PRIMARY_FILE=pf, AGENT_ITERATIONS=1, AGENT_INTERVAL=0,
                         ROOT_REMOTE_FILE=remote, SERVER_SOCKET=c[pod].sock, **env)

        # A replica's agent leaves the account to the primary.
        gtid = primary.value("SELECT @@gtid_binlog_pos")
        r = agent("db-1", **op)
        assert r.rc == 0 and "operator-user" not in r.stdout, r
        assert tcp_login(world, replica, "mysqlhook", OPERATOR_PASSWORD).returncode != 0

        # The primary's agent creates it; root@'%' stays (keep).
        r = agent("db-0", **op)
        assert r.rc == 0 and '"result":"operator-user"' in r.stdout and '"changed":true' in r.stdout, r
        c.wait_synced(primary)
        for s in c.servers:
            assert accounts(s) == [["mysqlhook", "%"], ["root", "%"], ["root", "localhost"]], s.name
            assert tcp_login(world, s, "mysqlhook", OPERATOR_PASSWORD).stdout.strip() == "mysqlhook@%"
            assert tcp_login(world, s, "root", ROOT_PASSWORD).returncode == 0
        # A steady primary writes nothing.
        before = primary.value("SELECT @@gtid_binlog_pos")
        r = agent("db-0", **op)
        assert r.rc == 0 and '"changed":true' not in r.stdout, r
        assert primary.value("SELECT @@gtid_binlog_pos") == before

        # drop: root is local only, everywhere, through replication.
        remote.write_text("drop\n")
        r = agent("db-0", **op)
        assert r.rc == 0 and '"changed":true' in r.stdout, r
        for s in c.servers:
            s.legacy = False   # the harness logs in as mysqlhook from here on
        c.wait_synced(primary)
        for s in c.servers:
            assert accounts(s) == [["mysqlhook", "%"], ["root", "localhost"]], s.name
            denied = tcp_login(world, s, "root", ROOT_PASSWORD)
            assert denied.returncode != 0 and "ERROR 1045" in denied.stderr, denied
            assert socket_root(world, s).stdout.strip() == "root@localhost"
        # Nothing was written on a replica directly: every GTID is the primary's.
        for s in (c["db-1"], c["db-2"]):
            assert s.value("SELECT @@gtid_binlog_pos") == primary.value("SELECT @@gtid_binlog_pos")
        assert primary.value("SELECT @@gtid_binlog_pos") != gtid

        # The Jobs of a cluster whose root is local only get no root password
        # (the hook's rootRemote: drop): a switchover and back, and a verified
        # backup (its throwaway server makes a root of its own), as mysqlhook alone.
        c.legacy = False
        no_root = {"MYSQL_ROOT_PASSWORD_FILE": ""}
        r = c.run("switchover.sh", PRIMARY="db-0", TARGET="db-1", **no_root)
        assert r.rc == 0 and r.json["result"] == "switched", r
        r = c.run("switchover.sh", PRIMARY="db-1", TARGET="db-0", **no_root)
        assert r.rc == 0 and r.json["result"] == "switched", r
        bdir = world.root / c.tag / "backups"
        bdir.mkdir()
        vdir = Path(tempfile.mkdtemp(prefix="v-")) / "v"   # short: a socket path must fit in 107 bytes
        r = c.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME="b", BACKUP_VERIFY="true",
                  VERIFY_DIR=vdir, VERIFY_PORT=free_port(), **no_root)
        assert r.rc == 0 and r.json["result"] == "backed-up" and r.json.get("verified") is True, r
        # Without either password a script says so.
        r = c.run("switchover.sh", PRIMARY="db-0", TARGET="db-1", OPERATOR_PASSWORD_FILE="", **no_root)
        assert r.rc != 0 and "MYSQL_ROOT_PASSWORD" in r.stdout + r.stderr, r

        # A changed operator password is set again by the primary's agent.
        new_pw = world.root / c.tag / "operator-password-2"
        new_pw.write_text("n3w 'op\"pw")
        r = agent("db-0", MYSQL_ROOT_PASSWORD_FILE=world.root_password_file, OPERATOR_PASSWORD_FILE=new_pw)
        assert r.rc == 0 and '"changed":true' in r.stdout, r
        assert tcp_login(world, primary, "mysqlhook", "n3w 'op\"pw").returncode == 0
        r = agent("db-0", **op)
        assert r.rc == 0 and '"changed":true' in r.stdout, r
        REPORT.append("operator account: a legacy cluster moved to mysqlhook@'%' with root local only; "
                      "scripts fell back to root until then; switchovers and a verified backup ran as mysqlhook "
                      "alone, without root's password")
    finally:
        c.close()


@pytest.mark.all_servers
def test_the_agent_falls_back_to_root_where_the_operator_is_unknown(world, request):
    """A server without mysqlhook@'%' (made before the account, or a volume kept
    from before it): the agent logs in as root instead while root's password is
    given.  MySQL answers a login for an account it does not have with a switch
    to `sha256_password` (against account enumeration), which the agent's client
    cannot speak: that counted as unreachable, not refused, so the agent never
    tried root (seen on the real node with MySQL 9.7: a replica on a volume kept
    from before a scale-down stayed NotReady, its relay log drain 'unreachable')."""
    c = Cluster(world, request.node.name, legacy=True)
    try:
        c.bootstrap()
        op = {"OPERATOR_PASSWORD_FILE": world.operator_password_file}
        r = c.run("inspect", PRIMARY="db-0", **op)
        assert r.rc == 0 and [s.get("up") for s in r.json["servers"]] == [True, True, True], r
        r = c.run("drain", DRAIN_POD="db-1", DRAIN_SECONDS="5", **op)
        assert r.rc == 0 and r.json["result"] == "drained", r
        REPORT.append(f"operator account unknown ({world.kind.name}): the agent logged in as root instead")
    finally:
        c.close()


def operator_login(c, server, password: str) -> bool:
    """The operator logs in over TCP with `password` (the server's own client)."""
    cnf = client_cnf(c.world.root / c.tag / "login-op.cnf", "mysqlhook", password)
    return subprocess.run([c.world.kind.client, f"--defaults-extra-file={cnf}", "--protocol=TCP", "-h", "127.0.0.1",
                           "-P", str(server.port), "--connect-timeout=5", "-N", "-B", "-e", "SELECT 1"],
                          capture_output=True, text=True, timeout=30).returncode == 0


@pytest.mark.all_servers
def test_the_agent_sets_the_operator_account_only_on_the_writable_primary(cluster):
    """`mysql-hook-agent operator-user` (issue 32, ported from operator-user.sh):
    on the writable primary it sets mysqlhook@'%' again when the mounted password
    changed, the change replicates, a steady primary writes nothing, and with
    rootRemote `drop` root's network accounts go (a host name read from the server
    is quoted).  A replica, or a primary fenced before the command runs, is left
    alone: `waiting` (exit 75) and no transaction written there (issue 31.6: the
    check and the writes share one session, checked again before each write)."""
    c = cluster
    c.bootstrap()
    primary, replica = c["db-0"], c["db-1"]
    d = c.world.root / c.tag / "operator"
    d.mkdir()
    remote = d / "rootRemote"
    remote.write_text("keep\n")
    rotated = d / "operator-password"
    rotated.write_text("n3w 'op\"pw\\")
    new_pw = rotated.read_text()

    def agent(pod, password_file=rotated):
        return c.run("operator-user", POD_NAME=pod, SERVER_SOCKET=c[pod].sock, ROOT_REMOTE_FILE=remote,
                     OPERATOR_PASSWORD_FILE=password_file)

    # A replica is never written to directly.
    before = replica.gtid_position()
    r = agent("db-1")
    assert r.rc == 75 and r.json["result"] == "waiting" and r.json["reason"] == "self-read-only", r
    assert replica.gtid_position() == before and not operator_login(c, replica, new_pw)

    # A primary fenced before the command: the same.
    primary.query("SET GLOBAL read_only = ON")
    before = primary.gtid_position()
    r = agent("db-0")
    assert r.rc == 75 and r.json["reason"] == "self-read-only", r
    assert primary.gtid_position() == before
    primary.query("SET GLOBAL read_only = OFF")

    # The writable primary: set, and it replicates.
    r = agent("db-0")
    assert r.rc == 0 and r.json["result"] == "operator-user" and r.json["changed"] is True, r
    assert operator_login(c, primary, new_pw)
    assert wait_for(lambda: operator_login(c, replica, new_pw), 30, what="the new password on the replica")
    # Back to the harness's password; then a steady primary writes nothing.
    r = agent("db-0", c.world.operator_password_file)
    assert r.rc == 0 and r.json["changed"] is True, r
    before = primary.gtid_position()
    r = agent("db-0", c.world.operator_password_file)
    assert r.rc == 0 and r.json["changed"] is False, r
    assert primary.gtid_position() == before

    # rootRemote drop: root's network accounts go, on the primary, by replication.
    primary.query("CREATE USER 'root'@'ho''st' IDENTIFIED BY 'x'")
    c.wait_synced(primary)
    remote.write_text("drop\n")
    r = agent("db-0", c.world.operator_password_file)
    assert r.rc == 0 and r.json["changed"] is True, r
    c.wait_synced(primary)
    for s in c.servers:
        hosts = [h for (h,) in s.query("SELECT host FROM mysql.user WHERE user = 'root' ORDER BY host")]
        assert hosts == ["localhost"], (s.name, hosts)
    assert replica.gtid_position() == primary.gtid_position()
    REPORT.append(f"operator-user ({c.world.kind.name}): the agent set mysqlhook@'%' on the primary only "
                  "(a replica and a fenced primary: waiting, nothing written), replicated, dropped root's "
                  "network accounts; a steady primary wrote nothing")

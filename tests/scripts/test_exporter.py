"""The mysqld_exporter account against real MariaDB servers: agent.sh creates
it on the primary through mysql-hook-agent exporter-user, it replicates, it holds only what
the exporter needs, a changed password is set again, nothing happens on a
read-only server; and Debian's mysqld_exporter logged in as it through a
server's socket reports what the alerts read.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPORT
from dbcluster import SetupError, World
from test_scripts import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "observability"))
import prom  # noqa: E402

# Quotes, a backslash, '#', '$' and a space: the SQL quoting of the agent's exporter-user.
AWKWARD = "ex'p\\o rt#$\"1"


@pytest.fixture(scope="module")
def world():
    try:
        w = World()
    except SetupError as e:
        pytest.fail(f"cannot set up MariaDB servers: {e}")
    yield w
    w.close()


def exporter_login(server, password: str, q: str = "SELECT 1") -> subprocess.CompletedProcess:
    """`q` as exporter@localhost through the server's socket."""
    cnf = server.base / "exporter.cnf"
    pw = password.replace("\\", "\\\\").replace('"', '\\"')
    cnf.write_text(f'[client]\nuser=exporter\npassword="{pw}"\n')
    cnf.chmod(0o600)
    return subprocess.run(["mariadb", f"--defaults-extra-file={cnf}", "--protocol=SOCKET", f"--socket={server.sock}",
                           "-N", "-B", "-e", q], capture_output=True, text=True, timeout=30)


def test_exporter_account(world, request):
    c = Cluster(world, request.node.name)
    try:
        c.bootstrap()
        primary, replica = c["db-0"], c["db-1"]
        pf = world.root / c.tag / "primary"
        pf.write_text("db-0\n")

        def agent(pod, password):
            s = c[pod]
            return c.run("sidecar", POD_NAME=pod, PRIMARY_FILE=pf, AGENT_ITERATIONS=1, AGENT_INTERVAL=0,
                         EXPORTER_PASSWORD=password, EXPORTER_SOCKET=s.sock, SERVER_SOCKET=s.sock)

        # A replica's agent leaves the account to the primary.
        r = agent("db-1", AWKWARD)
        assert r.rc == 0 and "exporter-user" not in r.stdout, r
        assert exporter_login(replica, AWKWARD).returncode != 0

        gtid_before = primary.value("SELECT @@gtid_binlog_pos")
        r = agent("db-0", AWKWARD)
        lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
        # the round: events (issue 31.8), join.sh (is-primary), then the exporter's account
        assert [ln for ln in lines if '"result":"is-primary"' in ln], r
        assert lines[-1].startswith('{"result":"exporter-user"') and '"changed":true' in lines[-1], r
        assert exporter_login(primary, AWKWARD).returncode == 0
        # Through the binary log, like the repl account.
        c.wait_synced(primary)
        assert exporter_login(replica, AWKWARD).returncode == 0, "the account did not replicate"
        created = primary.value("SELECT @@gtid_binlog_pos")
        assert created != gtid_before

        # Steady: the next round writes nothing.
        r = agent("db-0", AWKWARD)
        assert r.rc == 0 and '"changed":false' in r.stdout, r
        assert primary.value("SELECT @@gtid_binlog_pos") == created

        # Least privilege: status, variables and replica status yes; data and writes no.
        for q in ("SHOW GLOBAL STATUS LIKE 'Uptime'", "SHOW GLOBAL VARIABLES LIKE 'read_only'"):
            assert exporter_login(primary, AWKWARD, q).returncode == 0, q
        st = exporter_login(replica, AWKWARD, "SHOW SLAVE STATUS")
        assert st.returncode == 0 and st.stdout.strip(), st
        for q in ("SELECT * FROM hook.t", "SELECT * FROM mysql.user", "CREATE DATABASE x",
                  "INSERT INTO hook.t VALUES (1, 'x', 1, NOW())"):
            denied = exporter_login(primary, AWKWARD, q)
            assert denied.returncode != 0 and "denied" in denied.stderr, (q, denied)
        grants = primary.query("SHOW GRANTS FOR 'exporter'@'localhost'")
        assert all("ALL PRIVILEGES" not in g[0] and "hook" not in g[0] for g in grants), grants
        assert primary.value("SELECT max_user_connections FROM mysql.user WHERE user = 'exporter'") == "3"
        # Local only: no account for other hosts.
        assert primary.query("SELECT host FROM mysql.user WHERE user = 'exporter'") == [["localhost"]]

        # The Secret changed (sidecar turned off and on again): set again.
        r = agent("db-0", "second-password")
        assert '"changed":true' in r.stdout, r
        assert exporter_login(primary, "second-password").returncode == 0
        assert exporter_login(primary, AWKWARD).returncode != 0
        c.wait_synced(primary)
        assert exporter_login(replica, "second-password").returncode == 0

        # Never on a read-only server (it would be a transaction the primary lacks).
        before = replica.value("SELECT @@gtid_binlog_pos")
        r = c.run("exporter-user", POD_NAME="db-1", EXPORTER_PASSWORD="third", EXPORTER_SOCKET=replica.sock)
        assert r.rc == 75 and r.json["result"] == "waiting" and r.json["reason"] == "self-read-only", r
        assert replica.value("SELECT @@gtid_binlog_pos") == before

        # Debian's mysqld_exporter, logged in as the account through the socket.
        with prom.MysqldExporter(primary.sock, "exporter", "second-password") as ep, \
                prom.MysqldExporter(replica.sock, "exporter", "second-password") as er:
            p, s = ep.scrape(), er.scrape()
        assert p["mysql_up"] == 1 and s["mysql_up"] == 1, (p.get("mysql_up"), s.get("mysql_up"))
        assert p["mysql_global_variables_read_only"] == 0 and s["mysql_global_variables_read_only"] == 1
        assert p["mysql_global_status_rpl_semi_sync_master_status"] == 1
        assert p["mysql_global_status_rpl_semi_sync_master_clients"] == 2
        io = [v for k, v in s.items() if k.startswith("mysql_slave_status_slave_io_running{")]
        sql = [v for k, v in s.items() if k.startswith("mysql_slave_status_slave_sql_running{")]
        lag = [v for k, v in s.items() if k.startswith("mysql_slave_status_seconds_behind_master{")]
        assert io == [1] and sql == [1] and lag == [0], (io, sql, lag)
        assert not any(k.startswith("mysql_slave_status_") for k in p), "the primary replicates from nobody"
        REPORT.append("exporter: account created on the primary by the agent sidecar, replicated, least privilege, "
                      "reset on a new password; mysqld_exporter up on primary and replica")
    finally:
        c.close()

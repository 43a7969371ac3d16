"""The real-server loop's judge logs in with its own client (tests/k8s/minimysql.py):
it must work against every server the loop runs, MySQL's default authentication
included, or the loop on MySQL judges nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))
from minimysql import Connection, MySQLError  # noqa: E402


@pytest.mark.all_servers
def test_the_judges_client_logs_in_and_reads_errors(cluster):
    c = cluster
    c.bootstrap()
    p = c["db-0"]
    p.query("CREATE USER 'judge'@'%' IDENTIFIED BY 'judge-pw'; GRANT SELECT, INSERT ON *.* TO 'judge'@'%'")
    plugin = p.value("SELECT plugin FROM mysql.user WHERE user = 'judge'")
    host, port = p.addr.split(":")
    # The first login of an account is a full authentication (caching_sha2_password:
    # the password over TLS), the second a fast one from the server's cache.
    for _ in range(2):
        with Connection(host, int(port), "judge", "judge-pw", timeout=10) as conn:
            assert conn.scalar("SELECT CURRENT_USER()") == "judge@%"
    with pytest.raises(MySQLError) as e:
        Connection(host, int(port), "judge", "wrong", timeout=10)
    assert e.value.code == 1045, e.value
    # A replica refuses the account's writes with 1290, which the judge relies on.
    r = c["db-1"]
    c.wait_synced(p)
    rhost, rport = r.addr.split(":")
    with Connection(rhost, int(rport), "judge", "judge-pw", timeout=10) as conn:
        with pytest.raises(MySQLError) as e:
            conn.query("CREATE DATABASE judge_was_here")
        assert e.value.code == 1290, e.value
    print(f"the judge's client logged in with {plugin}")

"""TLS with server verification (TLS_MODE / TLS_MODE_FILE = verify, TLS_CA):
every client connection of the scripts and every replication channel, against
real MariaDB servers.  The certificates are made here with openssl: two
throwaway CAs, and for each a server certificate naming the address the
scripts connect to (pod_host: 127.0.0.1; also DNS:localhost)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPORT
from dbcluster import SCRIPTS, Cluster, rows, wait_for


# ------------------------------------------------------------ certificates

def _openssl(*args: str, cwd: Path):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _make_ca(d: Path, name: str) -> dict[str, Path]:
    """A CA and a server certificate it signs, valid for 127.0.0.1 and localhost."""
    d.mkdir(parents=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name} test CA",
             "-keyout", "ca.key", "-out", "ca.crt", cwd=d)
    return {"ca": d / "ca.crt", **_server_cert(d, "server", "IP:127.0.0.1, DNS:localhost")}


def _server_cert(d: Path, name: str, san: str) -> dict[str, Path]:
    """A server certificate for the names SAN, signed by the CA in D."""
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
    (d / f"{name}.ext").write_text(f"subjectAltName = {san}\n"
                                   "basicConstraints = CA:FALSE\nkeyUsage = digitalSignature, keyEncipherment\n"
                                   "extendedKeyUsage = serverAuth\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=d)
    return {"cert": d / f"{name}.crt", "key": d / f"{name}.key"}


@pytest.fixture(scope="module")
def certs(world):
    """`good`: TLS_CA and its server certificate; `other`: an unrelated CA's;
    `wrong-name`: signed by TLS_CA for a name the scripts do not connect to."""
    base = world.root / "tls"
    good = _make_ca(base / "good", "good")
    wrong = {"ca": good["ca"], **_server_cert(base / "good", "elsewhere", "DNS:db-9.elsewhere.example")}
    return {"good": good, "other": _make_ca(base / "other", "other"), "wrong-name": wrong}


def server_tls_cnf(c: dict[str, Path]) -> str:
    return f"ssl_ca = {c['ca']}\nssl_cert = {c['cert']}\nssl_key = {c['key']}\n"


def tls_status(s) -> tuple[str, str, str]:
    st = s.replica_status()
    return st.get("Master_SSL_Allowed"), st.get("Master_SSL_Verify_Server_Cert"), st.get("Master_SSL_CA_File")


def ssl_accepts(s) -> int:
    """The server's count of completed TLS handshakes, read over a connection
    without TLS (reading it does not count).  (Connections cannot be compared
    with it: it also counts the server's own replication and semi-sync
    threads.)"""
    out = subprocess.run(s.client_args() + ["--skip-ssl", "-e", "SHOW GLOBAL STATUS LIKE 'Ssl_finished_accepts'"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    return int(out.split()[1])


def common(c: Cluster, body: str, **env) -> subprocess.CompletedProcess:
    """Source common.sh as the scripts do (the passwords as files, the
    recording wrappers on PATH) and run BODY."""
    w = c.world
    full = {**w.argv_env("common.sh (test_tls)"), "HOME": str(w.root), "TMPDIR": str(w.root),
            "FLAVOR": "mariadb", "PODS": c.pods, "TERMINATION_LOG": "/dev/null",
            **w.credential_env()}
    full.update({k: str(v) for k, v in env.items()})
    script = f'. "{SCRIPTS}/common.sh"\nRESULT_DONE=1\n{body}\n'
    return subprocess.run(["bash"], input=script, env=full, capture_output=True, text=True, timeout=120)


# What the client tools do with the option file common.sh writes: a session's
# TLS cipher (the client), the accounts dump (mariadb-dump), a binary log
# copied from the server (mariadb-binlog --read-from-remote-server).
CLIENT_TOOLS = r'''
set +e
printf 'cipher=%s\n' "$(sql db-0 "SHOW SESSION STATUS LIKE 'Ssl_cipher'" | { IFS=$'\t' read -r _ v; printf '%s' "$v"; })"
n=$(mdb_dump_users db-0 | { c=0; while IFS= read -r l; do [[ $l == *"CREATE USER"* ]] && c=$((c + 1)); done; echo $c; })
printf 'dump_users=%s\n' "$n"
f=$(sql_binlog_files db-0); f=${f%%$'\t'*}; d=$(mktemp -d "$TMPDIR/tlsbinlog.XXXXXX")
if [ -n "$f" ] && binlog_fetch db-0 "$d/" "$f" >/dev/null 2>&1 && [ -s "$d/$f" ]; then echo binlog=ok; else echo binlog=failed; fi
rm -rf "$d"
'''


def tool_results(r: subprocess.CompletedProcess) -> dict[str, str]:
    return dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)


# ------------------------------------------------------------ 1. a new cluster, verify

def test_bootstrap_with_tls_verify(world, request, certs):
    """bootstrap.sh with TLS_MODE=verify: every replica's channel uses TLS and
    verifies the primary's certificate against TLS_CA, rows replicate, and the
    scripts' own sessions (client, dump, binlog) are TLS through the same
    option file."""
    good = certs["good"]
    c = Cluster(world, request.node.name, extra_cnf=server_tls_cnf(good))
    try:
        before = {s.name: ssl_accepts(s) for s in c.servers}
        r = c.run("bootstrap.sh", PRIMARY="", TLS_MODE="verify", TLS_CA=good["ca"])
        # bootstrap.sh's sessions (and, on the primary, the replicas'
        # receivers) were TLS sessions
        for s in c.servers:
            assert ssl_accepts(s) > before[s.name], f"{s.name}: no TLS session during bootstrap.sh"
        assert r.rc == 0 and r.json["result"] == "bootstrapped", r
        assert r.json["primary"] == "db-0" and sorted(r.json["replicas"]) == ["db-1", "db-2"], r
        p = c["db-0"]
        assert tls_status(p) == (None, None, None), "the primary replicates from nobody"
        for name in ("db-1", "db-2"):
            s = c[name]
            assert s.replicating_from(p), s.replica_status()
            assert tls_status(s) == ("Yes", "Yes", str(good["ca"])), s.replica_status()
        # a row written on the primary arrives over the verified channels
        p.query("CREATE DATABASE tlsdb; CREATE TABLE tlsdb.t (i INT PRIMARY KEY); INSERT INTO tlsdb.t VALUES (1)")
        c.wait_synced(p)
        for name in ("db-1", "db-2"):
            assert c[name].value("SELECT COUNT(*) FROM tlsdb.t") == "1"
        # the client tools, through the option file common.sh writes in verify mode
        t = common(c, CLIENT_TOOLS, TLS_MODE="verify", TLS_CA=good["ca"])
        res = tool_results(t)
        assert res.get("cipher"), t
        assert int(res.get("dump_users", "0")) > 0 and res.get("binlog") == "ok", t
        # rerun: the channels match the mode, nothing is made again
        r2 = c.run("bootstrap.sh", PRIMARY="", TLS_MODE="verify", TLS_CA=good["ca"])
        assert r2.rc == 0 and sorted(r2.json["replicas"]) == ["db-1", "db-2"], r2
        assert "making" not in r2.stderr and "TLS mode" not in r2.stderr, r2
        rj = c.run("join.sh", POD_NAME="db-1", PRIMARY="db-0", TLS_MODE="verify", TLS_CA=good["ca"])
        assert rj.rc == 0 and rj.json["result"] == "already-replica", rj
        REPORT.append(f"tls: bootstrap with TLS_MODE=verify in {r.seconds:.1f}s; replicas' channels SSL+verified, "
                      f"session cipher {res['cipher']}")
    finally:
        c.close()


# ------------------------------------------------------------ 2. a certificate that does not verify

@pytest.mark.parametrize("bad", ["other", "wrong-name"])
def test_verify_refuses_a_server_it_cannot_verify(world, request, certs, bad):
    """The servers' certificate is signed by a CA other than TLS_CA, or by
    TLS_CA for another name: in verify mode no script connects (a clear error
    result, the reason in the log) and nothing on the servers changes; the
    client tools refuse too, while the same tools without TLS_MODE connect
    (the servers do answer)."""
    c = Cluster(world, request.node.name, extra_cnf=server_tls_cnf(certs[bad]))
    try:
        good_ca = certs["good"]["ca"]
        before = {s.name: (s.read_only(), s.replica_status()) for s in c.servers}
        r = c.run("bootstrap.sh", PRIMARY="", TLS_MODE="verify", TLS_CA=good_ca, BOOTSTRAP_WAIT=3, MEMBER_WAIT=3)
        assert r.rc != 0 and r.json["result"] == "error", r
        assert r.json["reason"] == "primary-unreachable" and "promoted" not in r.json, r
        assert "no verified TLS connection" in r.stderr and str(good_ca) in r.stderr, r
        for s in c.servers:
            assert (s.read_only(), s.replica_status()) == before[s.name] == (True, {}), s.name
            assert s.value("SELECT COUNT(*) FROM mysql.user WHERE user = 'repl'") == "0"
        # join.sh (a pod's agent) in verify mode: waits, touches nothing
        pf = c.world.root / c.tag / "primary"
        pf.write_text("db-0\n")
        rj = c.run("join.sh", POD_NAME="db-1", PRIMARY_FILE=pf, TLS_MODE="verify", TLS_CA=good_ca)
        assert rj.rc == 75 and rj.json["result"] == "waiting" and rj.json["reason"] == "self-unreachable", rj
        assert c["db-1"].replica_status() == {} and c["db-1"].read_only()
        # client, dump and binlog tools
        t = common(c, CLIENT_TOOLS, TLS_MODE="verify", TLS_CA=good_ca)
        assert tool_results(t) == {"cipher": "", "dump_users": "0", "binlog": "failed"}, t
        off = tool_results(common(c, CLIENT_TOOLS))
        assert int(off["dump_users"]) >= 0 and off["binlog"] == "ok", off
        REPORT.append(f"tls: certificate {bad} -> bootstrap {r.json['reason']}, join "
                      f"{rj.json['reason']}, nothing changed")
    finally:
        c.close()


# ------------------------------------------------------------ 3. the mode changes under a running cluster

def test_join_remakes_the_channel_when_the_mode_changes(world, request, certs):
    """A cluster made without TLS; the pods' mode file turns to `verify`:
    join.sh makes the replica's channel again with TLS and verification (the
    mismatch logged once, in words) and it still replicates; the file emptied
    (it wins over TLS_MODE in the environment): made again without TLS."""
    good = certs["good"]
    c = Cluster(world, request.node.name, extra_cnf=server_tls_cnf(good))
    try:
        c.bootstrap()
        p, s = c["db-0"], c["db-1"]
        assert tls_status(s)[:2] == ("No", "No"), s.replica_status()
        pf = c.world.root / c.tag / "primary"
        pf.write_text("db-0\n")
        mf = c.world.root / c.tag / "tls-mode"
        mf.write_text("  verify \n")
        env = dict(POD_NAME="db-1", PRIMARY_FILE=pf, TLS_MODE_FILE=mf, TLS_CA=good["ca"])
        r = c.run("join.sh", **env)
        assert r.rc == 0 and r.json["result"] == "joined", r
        assert r.stderr.count("its replication has to be set up again") == 1, r.stderr
        assert "without TLS but the TLS mode is verify" in r.stderr, r.stderr
        assert tls_status(s) == ("Yes", "Yes", str(good["ca"])) and s.replicating_from(p), s.replica_status()
        p.query("INSERT INTO hook.t (n, writer) VALUES (1, 'tls')", user="app")
        c.wait_synced(p)
        assert rows(s) == {1}
        r2 = c.run("join.sh", **env)
        assert r2.rc == 0 and r2.json["result"] == "already-replica", r2
        # db-2 was left alone: still without TLS
        assert tls_status(c["db-2"])[:2] == ("No", "No")
        # off again: the empty file wins over TLS_MODE=verify
        mf.write_text("\n")
        r3 = c.run("join.sh", **env, TLS_MODE="verify")
        assert r3.rc == 0 and r3.json["result"] == "joined", r3
        assert "over TLS, certificate checked against" in r3.stderr and "TLS mode is off" in r3.stderr, r3.stderr
        assert tls_status(s)[:2] == ("No", "No") and s.replicating_from(p), s.replica_status()
        p.query("INSERT INTO hook.t (n, writer) VALUES (2, 'tls')", user="app")
        c.wait_synced(p)
        assert rows(s) == {1, 2}
        REPORT.append(f"tls: mode file verify -> join.sh re-made db-1's channel in {r.seconds:.1f}s; "
                      f"emptied -> re-made without TLS in {r3.seconds:.1f}s")
    finally:
        c.close()


def test_failover_repoints_members_whose_channel_has_the_old_mode(world, request, certs):
    """repoint_member: a restarted primary is promoted again in place by
    failover.sh in verify mode; the replicas already follow it, but without
    TLS, so they are made again with TLS and verification."""
    good = certs["good"]
    c = Cluster(world, request.node.name, extra_cnf=server_tls_cnf(good))
    try:
        c.bootstrap()
        p = c["db-0"]
        p.query("INSERT INTO hook.t (n, writer) VALUES (1, 'tls')", user="app")
        c.wait_synced(p)
        p.kill()
        p.start()
        assert p.read_only()
        r = c.run("failover.sh", PRIMARY="db-0", TLS_MODE="verify", TLS_CA=good["ca"])
        assert r.rc == 0 and r.json["result"] == "promoted" and r.json["primary"] == "db-0", r
        assert sorted(r.json["replicas"]) == ["db-1", "db-2"] and r.json["repointFailed"] == [], r
        for name in ("db-1", "db-2"):
            s = c[name]
            wait_for(lambda: s.replicating_from(p), 30, what=f"{name} replicating")
            assert tls_status(s) == ("Yes", "Yes", str(good["ca"])), s.replica_status()
        p.query("INSERT INTO hook.t (n, writer) VALUES (2, 'tls')", user="app")
        c.wait_synced(p)
        assert rows(c["db-1"]) == rows(c["db-2"]) == {1, 2}
    finally:
        c.close()


# ------------------------------------------------------------ 4. bad settings

@pytest.mark.parametrize("setting", ["env", "file", "ca"])
def test_bad_tls_settings_are_bad_env(world, setting):
    """TLS_MODE=bogus, a mode file saying bogus, or verify without a readable
    TLS_CA: bad-env before anything connects."""
    from dbcluster import run_script
    env = {"PODS": "db-0=127.0.0.1:9", "PRIMARY": "db-0", "POD_NAME": "db-0"}
    if setting == "env":
        env["TLS_MODE"] = "bogus"
    elif setting == "file":
        f = world.root / "tls-mode-bogus"
        f.write_text("bogus\n")
        env.update(TLS_MODE_FILE=str(f), TLS_MODE="verify")
    else:
        env.update(TLS_MODE="verify", TLS_CA=str(world.root / "no-such-ca.crt"))
    for script in ("bootstrap.sh", "join.sh"):
        r = run_script(script, world, env, timeout=30)
        assert r.rc == 1 and r.json["result"] == "error" and r.json["reason"] == "bad-env", r
        assert ("bogus" if setting != "ca" else "no-such-ca.crt") in r.json["message"], r


# ------------------------------------------------------------ both flavors, no server

@pytest.mark.parametrize("flavor", ["mysql", "mariadb"])
def test_option_file_and_channel_statement(flavor, tmp_path):
    """What common.sh writes for each flavor: the client option file and the
    channel's TLS options, on and off."""
    ca = tmp_path / "ca dir" / 'c"a.crt'
    ca.parent.mkdir()
    ca.write_text("x")
    body = 'cat "$CNF"; echo "--"; repl_tls_sql "${CUR_CA:-}"'
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FLAVOR": flavor, "PODS": "db-0=127.0.0.1:9",
            "MYSQL_ROOT_PASSWORD": "x", "TERMINATION_LOG": "/dev/null", "TMPDIR": str(tmp_path)}
    script = f'. "{SCRIPTS}/common.sh"\nRESULT_DONE=1\n{body}\n'

    def run(**env):
        r = subprocess.run(["bash"], input=script, env={**base, **env}, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r
        cnf, _, stmt = r.stdout.partition("--\n")
        return cnf.splitlines(), stmt

    cnf, stmt = run(TLS_MODE="verify", TLS_CA=str(ca))
    quoted = '"' + str(ca).replace('"', '\\"') + '"'
    sql_ca = "'" + str(ca) + "'"
    if flavor == "mariadb":
        assert cnf[-2:] == [f"ssl-ca={quoted}", "ssl-verify-server-cert"], cnf
        assert stmt == f", MASTER_SSL=1, MASTER_SSL_CA={sql_ca}, MASTER_SSL_VERIFY_SERVER_CERT=1"
    else:
        assert cnf[-2:] == ["ssl-mode=VERIFY_IDENTITY", f"ssl-ca={quoted}"], cnf
        assert stmt == f", SOURCE_SSL=1, SOURCE_SSL_CA={sql_ca}, SOURCE_SSL_VERIFY_SERVER_CERT=1"
    cnf, stmt = run()
    assert not any("ssl" in line for line in cnf), cnf
    # off: the server's defaults (MariaDB 11.3+ makes channels TLS by default) ...
    assert stmt == ""
    # ... except for a channel verify made (its CA is TLS_CA): turned off explicitly
    prefix = "MASTER" if flavor == "mariadb" else "SOURCE"
    _, stmt = run(CUR_CA="/etc/mysql/tls/ca.crt")
    assert stmt == f", {prefix}_SSL=0, {prefix}_SSL_CA='', {prefix}_SSL_VERIFY_SERVER_CERT=0"
    # the file wins over the environment, whitespace around the value ignored
    f = tmp_path / "mode"
    f.write_text(" verify\n")
    assert json.dumps(run(TLS_MODE_FILE=str(f), TLS_CA=str(ca))[1]).count("SSL=1") == 1

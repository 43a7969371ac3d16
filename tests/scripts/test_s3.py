"""Backups in a real S3 server (issue 19.3, 19.5, 19.8, 19.12): MinIO on loopback,
the AWS CLI v2 the Jobs run, hooks/scripts/s3.sh as the uploader and
downloader containers run it, backup.sh / restore.sh against real MariaDB
servers in between, on a staging directory like the Jobs' emptyDir."""

from __future__ import annotations

import base64
import gzip
import hashlib
import hmac
import json
import os
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import REPORT
from dbcluster import free_port, rows, run_script
from objstore import ObjectStore, run_s3
from test_tls import _make_ca, _server_cert
from test_backups import demote, fmt, fresh, insert, next_second


def staging(c, name: str) -> Path:
    d = c.world.root / c.tag / name
    d.mkdir(parents=True)
    return d


def test_s3_write_then_commit_retry_and_restore(cluster, world, store, request):
    """A backup is uploaded data first and result.json (the commit marker)
    last; a retried pod finds it committed before dumping and reports the same
    result; an uncommitted folder of an earlier attempt is replaced; a restore
    downloads only committed backups."""
    cluster.bootstrap()
    p = cluster["db-0"]
    insert(p, 1, 31, "A")
    cluster.wait_synced(p)
    store.make_bucket("bk-commit")
    env = store.env("bk-commit", "shop/db")
    # an earlier attempt died mid-upload: files, no result.json
    store.put("bk-commit", "shop/db/db-backup-1/dump.sql", "-- half a dump")
    st = staging(cluster, "staging-1")
    c = run_s3(store, "check", {**env, "BACKUP_NAME": "db-backup-1"}, st)
    assert c.rc == 0, c
    assert not (st / "db-backup-1").exists(), "an uncommitted backup is not reported"
    r = cluster.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=st, BACKUP_NAME="db-backup-1",
                    BACKUP_OWNER="scheduled shop/db uid-1")
    assert r.rc == 0, r
    u = run_s3(store, "upload", {**env, "BACKUP_NAME": "db-backup-1"}, st)
    assert u.rc == 0 and u.line == r.line and u.term.strip() == r.line, u
    keys = store.keys("bk-commit", "shop/db/db-backup-1/")
    assert "shop/db/db-backup-1/result.json" in keys and "shop/db/db-backup-1/dump.sql.gz" in keys, keys
    # the half dump of the earlier attempt is gone, the committed one is whole
    assert "shop/db/db-backup-1/dump.sql" not in keys, keys
    got = st / "downloaded-dump.sql.gz"
    store.aws_run("s3", "cp", "s3://bk-commit/shop/db/db-backup-1/dump.sql.gz", str(got))
    assert "CREATE TABLE" in gzip.decompress(got.read_bytes()).decode()
    # a retried pod of the same Job: committed already, nothing dumped again
    st2 = staging(cluster, "staging-2")
    c2 = run_s3(store, "check", {**env, "BACKUP_NAME": "db-backup-1"}, st2)
    assert c2.rc == 0 and (st2 / "db-backup-1" / "result.json").exists(), c2
    r2 = cluster.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=st2, BACKUP_NAME="db-backup-1",
                     BACKUP_OWNER="scheduled shop/db uid-1")
    assert r2.rc == 0 and r2.line == r.line and not (st2 / "db-backup-1" / "dump.sql.gz").exists(), r2
    # issue 34.12: a same-name successor's Job finds it committed by another owner
    other = cluster.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=st2, BACKUP_NAME="db-backup-1",
                        BACKUP_OWNER="scheduled shop/db uid-2")
    assert other.rc != 0 and other.json["reason"] == "exists" and "uid-1" in other.json["message"], other
    u2 = run_s3(store, "upload", {**env, "BACKUP_NAME": "db-backup-1"}, st2)
    assert u2.rc == 0 and u2.line == r.line, u2
    # restore: download, then restore.sh
    target = fresh(world, request.node.name + "-restore")
    try:
        st3 = staging(cluster, "staging-3")
        d = run_s3(store, "download", {**env, "BACKUP_NAME": "db-backup-1"}, st3)
        assert d.rc == 0, d
        rr = run_script("restore.sh", world, {"PODS": f"db-0={target.addr}", "POD_NAME": "db-0",
                                              "RESTORE_FROM": str(st3 / "db-backup-1")})
        assert rr.rc == 0, rr
        assert rows(target) == set(range(1, 31))
        # an uncommitted backup is never downloaded
        store.put("bk-commit", "shop/db/half/dump.sql", "-- half")
        d2 = run_s3(store, "download", {**env, "BACKUP_NAME": "half"}, staging(cluster, "staging-4"))
        assert d2.rc != 0 and d2.json["reason"] == "not-committed", d2
    finally:
        target.kill()
    REPORT.append(f"s3: {len(keys)} objects committed with result.json last; retried pod reported the same "
                  f"result without dumping; restore from MinIO {rr.seconds:.1f}s")


def test_s3_wrong_key_and_missing_bucket_fail_clearly(cluster, store):
    """A wrong secret key or a bucket that does not exist fails before
    anything is dumped, naming the cause; an upload with a wrong key commits
    nothing."""
    cluster.bootstrap()
    store.make_bucket("bk-keys")
    st = staging(cluster, "staging")
    bad = store.env("bk-keys", "p", secret="not-the-secret")
    c = run_s3(store, "check", {**bad, "BACKUP_NAME": "b"}, st)
    assert c.rc != 0 and c.json["reason"] == "store-unusable" and c.term.strip() == c.line, c
    assert "403" in c.json["message"] or "Forbidden" in c.json["message"] or "Signature" in c.json["message"], c
    unknown = store.env("bk-keys", "p", access="nobody", secret="x")
    c2 = run_s3(store, "check", {**unknown, "BACKUP_NAME": "b"}, st)
    assert c2.rc != 0 and c2.json["reason"] == "store-unusable", c2
    missing = store.env("no-such-bucket", "p")
    c3 = run_s3(store, "check", {**missing, "BACKUP_NAME": "b"}, st)
    assert c3.rc != 0 and c3.json["reason"] == "store-unusable" and "no-such-bucket" in c3.json["message"], c3
    # the dump went through (a Job whose check passed), the upload's key is wrong
    r = cluster.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=st, BACKUP_NAME="b")
    assert r.rc == 0, r
    u = run_s3(store, "upload", {**bad, "BACKUP_NAME": "b"}, st)
    assert u.rc != 0 and u.json["result"] == "error", u
    assert store.keys("bk-keys") == [], "nothing may be written, let alone committed"
    REPORT.append(f"s3 failures: wrong key -> {c.json['message'][:90]}; unknown key -> {c2.json['message'][:60]}; "
                  f"missing bucket -> {c3.json['message'][:70]}")


def test_s3_credentials_from_the_default_chain(cluster, store, world):
    """Without keys in the environment the CLI's default chain is used (here
    a shared credentials file; in a pod a web identity token or instance
    credentials)."""
    store.make_bucket("bk-chain")
    st = staging(cluster, "staging")
    env = store.env("bk-chain", "p", access=None)
    creds = store.home / "credentials"
    creds.write_text("[default]\naws_access_key_id = hook-test-admin\naws_secret_access_key = hook-test-secret-key\n")
    c = run_s3(store, "check", {**env, "BACKUP_NAME": "b", "AWS_SHARED_CREDENTIALS_FILE": str(creds)}, st)
    assert c.rc == 0, c
    c2 = run_s3(store, "check", {**env, "BACKUP_NAME": "b"}, st)
    assert c2.rc != 0 and c2.json["reason"] == "store-unusable", c2
    creds.unlink()


def _jwt_hs256(claims: dict, kid: str, key: str) -> str:
    def b64(b: bytes) -> str:
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
    body = b64(json.dumps(claims).encode())
    sig = hmac.new(key.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(sig)}"


class _OidcDiscovery:
    """The discovery document (and an empty key set) of an OpenID provider, which
    MinIO reads at startup; the tokens are signed with the client secret (HS256),
    which MinIO accepts for its client ID."""

    def __init__(self):
        port = free_port()
        self.issuer = f"http://127.0.0.1:{port}"
        docs = {"/.well-known/openid-configuration": {
                    "issuer": self.issuer, "jwks_uri": f"{self.issuer}/jwks",
                    "authorization_endpoint": f"{self.issuer}/auth", "token_endpoint": f"{self.issuer}/token",
                    "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
                    "id_token_signing_alg_values_supported": ["RS256", "HS256"]},
                "/jwks": {"keys": []}}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                doc = docs.get(self.path.split("?")[0])
                body = json.dumps(doc if doc is not None else {}).encode()
                self.send_response(200 if doc is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_s3_web_identity_token_exchanged_at_sts_then_used(world):
    """s3.serviceAccountName (issue 19.5): the pod has no keys, only what a workload
    identity webhook injects (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE). The CLI the
    Jobs run exchanges the token at STS (AssumeRoleWithWebIdentity) and uses the
    temporary credentials: here STS is MinIO's own, with an OpenID provider
    configured, reached as sts.us-east-1.amazonaws.com (the name the CLI calls)
    through the mount namespace's /etc/hosts and TLS from a test CA. A token the
    provider did not sign is refused, and s3.sh says so."""
    if os.geteuid() != 0:
        pytest.skip("needs root: a mount namespace for /etc/hosts and port 443 for STS")
    d = world.root / "web-identity"
    pki = d / "pki"
    ca = _make_ca(pki, "sts")["ca"]
    leaf = _server_cert(pki, "sts", "DNS:sts.us-east-1.amazonaws.com, IP:127.0.0.2")
    certs = d / "certs"
    certs.mkdir()
    shutil.copy(leaf["cert"], certs / "public.crt")
    shutil.copy(leaf["key"], certs / "private.key")
    oidc = _OidcDiscovery()
    client_id, client_secret = "sts.amazonaws.com", "hook-test-oidc-client-secret"
    store = ObjectStore(d, address="127.0.0.2", port=443, tls=(certs, ca), extra_env={
        "MINIO_IDENTITY_OPENID_CONFIG_URL": f"{oidc.issuer}/.well-known/openid-configuration",
        "MINIO_IDENTITY_OPENID_CLIENT_ID": client_id,
        "MINIO_IDENTITY_OPENID_CLIENT_SECRET": client_secret,
        "MINIO_IDENTITY_OPENID_CLAIM_NAME": "policy"})
    try:
        store.make_bucket("bk-irsa")
        hosts = d / "hosts"
        hosts.write_text("127.0.0.1 localhost\n127.0.0.2 sts.us-east-1.amazonaws.com\n")
        now = int(time.time())
        claims = {"iss": oidc.issuer, "sub": "system:serviceaccount:shop:backup-irsa", "aud": client_id,
                  "iat": now, "exp": now + 3600, "policy": "readwrite"}
        token = d / "token"
        token.write_text(_jwt_hs256(claims, client_id, client_secret))
        env = {**store.env("bk-irsa", "shop/db", access=None), "BACKUP_NAME": "b1",
               "AWS_ROLE_ARN": "arn:aws:iam::111122223333:role/db-backups",
               "AWS_WEB_IDENTITY_TOKEN_FILE": str(token)}
        st = d / "staging"
        st.mkdir()
        c = run_s3(store, "check", env, st, hosts=hosts)
        assert c.rc == 0, c
        (st / "b1").mkdir()
        (st / "b1" / "OWNER").write_text("scheduled shop/db uid-1\n")
        (st / "b1" / "result.json").write_text('{"result":"backed-up","name":"b1"}\n')
        u = run_s3(store, "upload", env, st, hosts=hosts)
        assert u.rc == 0 and u.json["result"] == "backed-up", u
        keys = store.keys("bk-irsa", "shop/db/")
        assert keys == ["shop/db/b1/OWNER", "shop/db/b1/result.json"], keys
        # the same request without the webhook's variables has no credentials at all
        bare = {k: v for k, v in env.items() if not k.startswith("AWS_ROLE") and k != "AWS_WEB_IDENTITY_TOKEN_FILE"}
        n = run_s3(store, "check", bare, st, hosts=hosts)
        assert n.rc != 0 and n.json["reason"] == "store-unusable", n
        # a token the provider did not sign, in a fresh pod (the CLI caches the
        # temporary credentials under $HOME, which a pod starts without)
        token.write_text(_jwt_hs256(claims, client_id, "another-secret"))
        home = d / "fresh-home"
        home.mkdir()
        bad = run_s3(store, "check", {**env, "HOME": str(home)}, st, hosts=hosts)
        assert bad.rc != 0 and bad.json["reason"] == "store-unusable", bad
        assert "AssumeRoleWithWebIdentity" in bad.json["message"], bad
    finally:
        store.close()
        oidc.close()
    REPORT.append(f"s3 web identity: the CLI exchanged the pod's token at STS (MinIO's, OpenID) and uploaded "
                  f"{len(keys)} objects with the temporary credentials; without the token: "
                  f"{n.json['message'][:80]}; a forged token: {bad.json['message'][:120]}")


def test_s3_retention_prunes_only_its_own_complete_backups(store, world):
    """Retention keeps the newest KEEP committed backups of its own OWNER; a
    MySQLBackup named like a scheduled one, another cluster's backups on the
    same prefix and uncommitted folders are never touched."""
    store.make_bucket("bk-prune")
    mine = "scheduled prod/db uid-1"

    def backup(name: str, owner: str, committed: bool = True):
        store.put("bk-prune", f"db/{name}/OWNER", owner + "\n")
        store.put("bk-prune", f"db/{name}/dump.sql", "--")
        if committed:
            store.put("bk-prune", f"db/{name}/result.json", '{"result":"backed-up"}\n')

    import time
    for i in range(1, 5):
        backup(f"db-backup-{i}", mine)
        time.sleep(1.1)   # commit times differ
    backup("db-backup-5", "mysqlbackup prod/db-backup-5 uid-9")
    backup("db-backup-6", "scheduled dev/db uid-2")
    backup("db-backup-7", mine, committed=False)
    st = world.root / "prune-staging"
    st.mkdir()
    r = run_s3(store, "prune", {**store.env("bk-prune", "db"), "KEEP": "2", "RETENTION_OWNER": mine}, st)
    assert r.rc == 0, r
    left = sorted({k.split("/")[1] for k in store.keys("bk-prune", "db/")})
    assert left == ["db-backup-3", "db-backup-4", "db-backup-5", "db-backup-6", "db-backup-7"], left
    REPORT.append(f"s3 retention KEEP=2: left {left}")


def test_pvc_retention_prunes_only_its_own_complete_backups(cluster):
    """The same rule on a mounted store: backup.sh prunes after success."""
    cluster.bootstrap()
    bdir = cluster.world.root / cluster.tag / "pvc"
    bdir.mkdir(parents=True)
    mine = "scheduled prod/db uid-1"
    import os
    for i, owner in enumerate([mine, mine, "mysqlbackup prod/db-backup-3 uid-9", "scheduled dev/db uid-2"], 1):
        d = bdir / f"db-backup-{i}"
        d.mkdir()
        (d / "OWNER").write_text(owner + "\n")
        (d / "result.json").write_text("{}\n")
        os.utime(d / "result.json", (1000 + i, 1000 + i))
    (bdir / "db-backup-0").mkdir()               # uncommitted, mine
    (bdir / "db-backup-0" / "OWNER").write_text(mine + "\n")
    (bdir / ".db-backup-9.partial").mkdir()      # an attempt of mine that died
    (bdir / ".db-backup-9.partial" / "OWNER").write_text(mine + "\n")
    r = cluster.run("backup.sh", PRIMARY="db-0", BACKUP_DIR=bdir, BACKUP_NAME="db-backup-10",
                    BACKUP_OWNER=mine, RETENTION_OWNER=mine, KEEP=2)
    assert r.rc == 0, r
    left = sorted(os.listdir(bdir))
    assert left == ["db-backup-0", "db-backup-10", "db-backup-2", "db-backup-3", "db-backup-4"], left
    shutil.rmtree(bdir)


def test_s3_binlog_archive_each_file_once_and_pitr_from_it(cluster, world, store):
    """Issue 19.3 on S3: archive-pull, binlog.sh, archive-push upload each
    closed binary log once (sidecars after data); a backup taken with
    BACKUP_BINLOGS=archive holds none; a point-in-time restore downloads the
    archive (ARCHIVE=true) and reaches the last run; retention deletes the
    files the oldest kept backup no longer needs, in the bucket."""
    cluster.bootstrap()
    p = cluster["db-0"]
    insert(p, 1, 21, "A")
    cluster.wait_synced(p)
    store.make_bucket("bk-arch")
    env = store.env("bk-arch", "shop/db")
    owner = "scheduled shop/db uid-1"

    def backup(name: str):
        st = staging(cluster, name)
        r = cluster.run("backup.sh", PRIMARY="db-1", BACKUP_DIR=st, BACKUP_NAME=name, BACKUP_OWNER=owner,
                        BACKUP_BINLOGS="archive")
        assert r.rc == 0 and r.json["binlogs"] == 0, r
        u = run_s3(store, "upload", {**env, "BACKUP_NAME": name}, st)
        assert u.rc == 0, u

    runs = []

    def archive(**extra):
        st = staging(cluster, f"arch-{len(runs)}")
        pull = run_s3(store, "archive-pull", env, st)
        assert pull.rc == 0, pull
        a = st / "_binlog"
        r = cluster.run("binlog.sh", PRIMARY="db-0", ARCHIVE_DIR=a, ARCHIVE_REMOTE="1", BACKUP_ROOT=st,
                        **extra)
        assert r.rc == 0, r
        push = run_s3(store, "archive-push", env, st)
        assert push.rc == 0 and push.line == r.line, push
        runs.append(r)
        return r

    backup("b1")
    a1 = archive()
    a2 = archive()
    assert a1.json["archived"] and a2.json["archived"] == [], (a1, a2)
    ident = a1.json["identity"]
    keys = store.keys("bk-arch", "shop/db/_binlog/")
    assert f"shop/db/_binlog/{ident}.until" in keys and all(
        f"shop/db/_binlog/{ident}/{f}.gz" in keys and f"shop/db/_binlog/{ident}/{f}.start" in keys
        for f in a1.json["archived"]), keys
    insert(p, 21, 41, "B")
    t1 = next_second()
    insert(p, 41, 61, "C")
    a3 = archive()
    assert len(a3.json["archived"]) == 1, a3
    target = fresh(world, "s3-arch-restore")
    try:
        st = staging(cluster, "restore")
        d = run_s3(store, "download", {**env, "BACKUP_NAME": "b1", "ARCHIVE": "true"}, st)
        assert d.rc == 0 and (st / "_binlog" / ident).is_dir(), d
        rr = run_script("restore.sh", world, {"PODS": f"db-0={target.addr}", "POD_NAME": "db-0",
                                              "RESTORE_FROM": str(st / "b1"), "RESTORE_ARCHIVE": str(st / "_binlog"),
                                              "RESTORE_UNTIL": fmt(t1)})
        assert rr.rc == 0 and rr.json["archive"] == ident, rr
        assert rows(target) == set(range(1, 41))
    finally:
        target.kill()
    # a failover: db-1's own sequence is archived under its identity
    demote(cluster, "db-0", "db-1")
    insert(cluster["db-1"], 61, 71, "D")
    a4 = archive()
    assert a4.json["primary"] == "db-1" and a4.json["identity"] != ident, a4
    # retention: a newer backup (from db-1); b1 goes; db-0's whole sequence ends
    # before it and goes, data and sidecars, from the bucket
    cluster.wait_synced(cluster["db-1"])
    time.sleep(1.1)
    backup("b2")
    store.aws_run("s3", "rm", "--recursive", "s3://bk-arch/shop/db/b1/")
    insert(cluster["db-1"], 71, 81, "E")
    a5 = archive(RETENTION_OWNER=owner)
    assert a5.json["pruned"] > 0, a5
    left = store.keys("bk-arch", "shop/db/_binlog/")
    assert not any(k.startswith(f"shop/db/_binlog/{ident}") for k in left), left
    assert any(k.startswith(f"shop/db/_binlog/{a4.json['identity']}/") for k in left), left
    REPORT.append(f"s3 binlog archive: runs archived {[len(r.json['archived']) for r in runs]} files; "
                  f"PITR from the archive in MinIO restored 40 rows at {fmt(t1)}; after a failover "
                  f"retention let {a5.json['pruned']} go, the old primary's sequence whole")

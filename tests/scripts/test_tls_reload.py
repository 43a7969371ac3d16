"""`mysql-hook-agent tls-reload` (ported from tls-reload.sh, issue 32) and the
agent round that runs it (spec.tls): a renewed certificate is loaded by the
running server, without a restart and without a binary-log event; a broken one
is refused and the server keeps serving the one it had.  Real servers, every
flavor; throwaway CAs made with openssl (test_tls.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from dbcluster import AGENT, SCRIPTS, Cluster
from test_tls import _make_ca

# The agent's command: proven on every server.
pytestmark = pytest.mark.all_servers


def verified(s, ca: Path) -> bool:
    """A client connection that verifies the server's certificate against CA works."""
    verify = ["--ssl-mode=VERIFY_CA"] if s.world.kind.mysql else ["--ssl-verify-server-cert"]
    r = subprocess.run(s.client_args() + [f"--ssl-ca={ca}", *verify, "-e",
                                          "SHOW SESSION STATUS LIKE 'Ssl_cipher'"],
                       capture_output=True, text=True, timeout=30)
    return r.returncode == 0 and len(r.stdout.split()) == 2


def install(live: Path, c: dict[str, Path]) -> None:
    """What the kubelet does when the Secret changes: new files in place."""
    for src, dst in ((c["ca"], "ca.crt"), (c["cert"], "tls.crt"), (c["key"], "tls.key")):
        shutil.copyfile(src, live / dst)


def run(world, s, script: str, **env) -> subprocess.CompletedProcess:
    full = {**world.argv_env(script), "HOME": str(world.root), "TMPDIR": str(world.root), "FLAVOR": world.kind.flavor,
            **world.credential_env(), "SERVER_SOCKET": str(s.sock), "SCRIPTS_DIR": str(SCRIPTS),
            "AGENT_LISTEN": "127.0.0.1:0"}
    full.update({k: str(v) for k, v in env.items()})
    argv = ["bash", str(SCRIPTS / script)] if script.endswith(".sh") else [str(AGENT), script]
    return subprocess.run(argv, env=full, capture_output=True, text=True, timeout=120)


def test_a_renewed_certificate_is_loaded_without_a_restart(world, request):
    base = world.root / "tls-reload" / request.node.name
    first, renewed = _make_ca(base / "first", "first"), _make_ca(base / "renewed", "renewed")
    live = base / "live"
    live.mkdir()
    install(live, first)
    c = Cluster(world, request.node.name, n=1,
                extra_cnf=f"ssl_ca = {live}/ca.crt\nssl_cert = {live}/tls.crt\nssl_key = {live}/tls.key\n")
    try:
        s = c["db-0"]
        pid = s.proc.pid
        assert verified(s, first["ca"]) and not verified(s, renewed["ca"])
        gtid = s.gtid_position()

        # The files change; the server still presents what it read at start.
        install(live, renewed)
        assert not verified(s, renewed["ca"]), "the server loaded the new files by itself"

        # The agent's round: join.sh (no primary recorded: it waits), then, the
        # TLS files never loaded by this agent, tls-reload once; the second
        # round sees the same files and does not reload again.
        mode = base / "tls-mode"
        mode.write_text("verify\n")
        a = run(world, s, "sidecar", AGENT_ITERATIONS=2, AGENT_INTERVAL=0, TLS_MODE_FILE=mode,
                TLS_CA=live / "ca.crt", PODS=c.pods, POD_NAME="db-0", PRIMARY_FILE=base / "no-primary",
                TERMINATION_LOG="/dev/null")
        reloads = [ln for ln in a.stdout.splitlines() if "tls-reload" in ln or '"reloaded"' in ln]
        assert reloads == ['{"result":"reloaded"}'], f"{a.stdout}\n{a.stderr[-2000:]}"
        assert verified(s, renewed["ca"]) and not verified(s, first["ca"])
        assert s.proc.pid == pid and s.running, "the server was restarted"
        # FLUSH LOCAL SSL, ALTER INSTANCE RELOAD TLS: nothing in the binary log
        # (on a replica it would be errant).
        assert s.gtid_position() == gtid

        # A broken renewal: refused, the server keeps the certificate it serves.
        (live / "tls.crt").write_text("-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n")
        r = run(world, s, "tls-reload", PODS=c.pods, POD_NAME="db-0")
        assert r.returncode == 1 and json.loads(r.stdout.splitlines()[-1])["reason"] == "reload-failed", r
        assert verified(s, renewed["ca"]), "a failed reload left the server without its certificate"
        assert s.gtid_position() == gtid
    finally:
        c.close()

"""A real S3 server on 127.0.0.1 for the backup tests: MinIO, built once from
the Go module proxy at a pinned version into ~/.cache/mysql-hook, and the
client the backup Jobs run, the AWS CLI v2 (Debian's `awscli` package is the
upstream 2.9.19 release; the Jobs' default image is amazon/aws-cli:2.9.19).
Both are installed when missing (we are root in CI) and the run fails, never
skips, when they cannot be had."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from dbcluster import SCRIPTS, SetupError, _die_with_parent, free_port

MINIO_MODULE = "github.com/minio/minio"
# The newest version the Go module proxy serves for the module (2026-02-12).
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"
CACHE = Path(os.environ.get("MYSQL_HOOK_CACHE", Path.home() / ".cache" / "mysql-hook"))
AWS_CLI_VERSION = "2.9.19"
ACCESS_KEY = "hook-test-admin"
SECRET_KEY = "hook-test-secret-key"


def minio_binary() -> Path:
    """MinIO, built once into the cache. The suites run in shards at the same
    time (tests/real_servers.rs), so the build holds a lock: one shard builds,
    the others wait for it and find the binary."""
    out = CACHE / f"minio-{MINIO_VERSION}"
    exe = out / "minio"
    if exe.exists():
        return exe
    if not shutil.which("go"):
        raise SetupError("go is needed to build MinIO (the S3 server the tests run)")
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if exe.exists():
            return exe
        env = dict(os.environ, GOBIN=str(out), CGO_ENABLED="0")
        r = subprocess.run(["go", "install", "-trimpath", "-ldflags=-s", f"{MINIO_MODULE}@{MINIO_VERSION}"],
                           env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=3000)
    if r.returncode != 0 or not exe.exists():
        raise SetupError("building MinIO failed:\n" + r.stderr[-3000:])
    return exe


def aws_cli() -> Path:
    """The AWS CLI v2 (Debian's package), installed when missing."""
    exe = Path("/usr/bin/aws")
    if not exe.exists():
        if os.geteuid() != 0:
            raise SetupError("the AWS CLI v2 is missing: apt-get install -y --no-install-recommends awscli")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        cmd = ["apt-get", "install", "-y", "--no-install-recommends", "awscli"]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            subprocess.run(["apt-get", "update"], env=env, capture_output=True, text=True)
            r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0 or not exe.exists():
            raise SetupError("apt-get install awscli failed:\n" + r.stderr[-2000:])
    v = subprocess.run([str(exe), "--version"], capture_output=True, text=True).stdout
    if not v.startswith(f"aws-cli/{AWS_CLI_VERSION} "):
        raise SetupError(f"expected aws-cli/{AWS_CLI_VERSION}, got {v!r}")
    return exe


class ObjectStore:
    """One MinIO server with its own data directory, on loopback."""

    def __init__(self, root: Path, address: str = "127.0.0.1", port: int | None = None,
                 tls: tuple[Path, Path] | None = None, extra_env: dict[str, str] | None = None):
        """TLS: (a MinIO certs directory with public.crt and private.key, the CA
        that signed it); extra_env: more MinIO settings (an OpenID provider)."""
        self.exe = minio_binary()
        self.aws = aws_cli()
        self.dir = root / "minio"
        self.dir.mkdir(parents=True)
        self.bin = root / "aws-bin"   # `aws` on PATH is the CLI v2, whatever else is installed
        self.bin.mkdir()
        (self.bin / "aws").symlink_to(self.aws)
        self.port = port or free_port()
        self.ca = tls[1] if tls else None
        self.endpoint = f"{'https' if tls else 'http'}://{address}:{self.port}"
        env = dict(os.environ, MINIO_ROOT_USER=ACCESS_KEY, MINIO_ROOT_PASSWORD=SECRET_KEY,
                   MINIO_BROWSER="off", MINIO_UPDATE="off", **(extra_env or {}))
        self.log = open(root / "minio.log", "wb")
        certs = ["--certs-dir", str(tls[0])] if tls else []
        self.proc = subprocess.Popen([str(self.exe), "server", "--quiet", "--address", f"{address}:{self.port}",
                                      *certs, str(self.dir / "data")], env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent)
        ctx = ssl.create_default_context(cafile=str(self.ca)) if self.ca else None
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/minio/health/ready", timeout=2, context=ctx)
                break
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    raise SetupError("MinIO did not start:\n" + (root / "minio.log").read_text()[-2000:])
                time.sleep(0.2)
        self.home = root / "aws-home"
        self.home.mkdir()

    def env(self, bucket: str, prefix: str, access=ACCESS_KEY, secret=SECRET_KEY) -> dict[str, str]:
        """What the uploader container gets: the bucket's coordinates and the
        credentials Secret's keys as environment variables."""
        e = {"PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(self.home),
             "S3_BUCKET": bucket, "S3_PREFIX": prefix, "S3_ENDPOINT": self.endpoint, "AWS_DEFAULT_REGION": "us-east-1",
             "AWS_EC2_METADATA_DISABLED": "true", "TMPDIR": str(self.home)}
        if access is not None:
            e.update(AWS_ACCESS_KEY_ID=access, AWS_SECRET_ACCESS_KEY=secret)
        if self.ca:
            e["AWS_CA_BUNDLE"] = str(self.ca)
        return e

    def aws_run(self, *args: str, bucket: str = "x", **kw) -> subprocess.CompletedProcess:
        e = self.env(bucket, "")
        return subprocess.run(["aws", "--endpoint-url", self.endpoint, *args], env=e, capture_output=True,
                              text=True, timeout=120, **kw)

    def make_bucket(self, bucket: str):
        r = self.aws_run("s3api", "create-bucket", "--bucket", bucket)
        assert r.returncode == 0, r.stderr

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        r = self.aws_run("s3api", "list-objects-v2", "--bucket", bucket, "--prefix", prefix, "--output", "json")
        assert r.returncode == 0, r.stderr
        return sorted(o["Key"] for o in (json.loads(r.stdout or "{}").get("Contents") or []))

    def put(self, bucket: str, key: str, body: str):
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write(body)
        try:
            r = self.aws_run("s3", "cp", "--only-show-errors", f.name, f"s3://{bucket}/{key}")
            assert r.returncode == 0, r.stderr
        finally:
            os.unlink(f.name)

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


class S3Result:
    def __init__(self, proc: subprocess.CompletedProcess, term: str):
        self.rc = proc.returncode
        self.stdout, self.stderr = proc.stdout, proc.stderr
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        self.line = lines[-1] if lines else ""
        self.term = term
        try:
            self.json = json.loads(self.line)
        except ValueError:
            self.json = {}

    def __repr__(self):
        return f"rc={self.rc} line={self.line}\n--- stderr ---\n{self.stderr[-3000:]}"


def run_s3(store: ObjectStore, command: str, env: dict[str, str], staging: Path,
           hosts: Path | None = None) -> S3Result:
    """hooks/scripts/s3.sh as the uploader container runs it: `sh`, env only.
    With `hosts`, in a mount namespace of its own whose /etc/hosts is that file
    (names the container would resolve elsewhere, such as AWS's STS, pointed at
    a server of the test)."""
    fd, term = tempfile.mkstemp(prefix="term-s3-", dir=store.home)
    os.close(fd)
    full = {**env, "STAGING": str(staging), "TERMINATION_LOG": term}
    cmd = ["sh", str(SCRIPTS / "s3.sh"), command]
    if hosts is not None:
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts), *cmd]
    proc = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=600)
    text = Path(term).read_text()
    os.unlink(term)
    return S3Result(proc, text)


if __name__ == "__main__":
    # `python3 tests/scripts/objstore.py`: build MinIO now (tests/real_servers.rs
    # starts it beside the first shards, so no shard waits for it long).
    try:
        print(minio_binary())
    except SetupError as e:
        sys.exit(f"objstore: {e}")

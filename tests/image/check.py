#!/usr/bin/env python3
"""Builds the hook's image from the repository's Dockerfile and runs it.

`tests/image/build.sh` builds the real Dockerfile with buildah against local
stand-ins for its two base images (see there). Then, from the built image:

* its configuration: user 65532:65532, entrypoint /usr/local/bin/mysql-hook, command
  `serve`, MYSQL_HOOK_LISTEN=0.0.0.0:8080, port 8080; no shell, no package manager;
* `mysql-hook --version` prints this crate's version;
* `mysql-hook install-scripts DIR` writes every script of hooks/scripts/, byte for
  byte, mode 0555, into a mounted directory (what every server and Job pod's first
  init container does);
* the image's own command (`serve` on 0.0.0.0:8080) refuses to start without a
  bearer token file;
* `serve` with a token file answers /healthz and /readyz, refuses a hook call
  without the token (401), answers test-fixtures/sync/new-cluster with 200 and the
  children, and exits 0 on SIGTERM (`podman stop`).

Everything runs inside a container (podman, the image's own root file system, user
65532, read-only root, all capabilities dropped, no new privileges, host network on
loopback); where podman cannot run a container here it runs the image's binary from
the extracted image with chroot instead and says so.

Where buildah cannot build here (not installed, not root, no overlay file system) it
prints "container image skipped: <reason>" and exits 0, unless
MYSQL_HOOK_REQUIRE_IMAGE=1 (what .ci/run sets): then a skip is a failure.

    python3 tests/image/check.py
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BUILD = HERE / "build.sh"
# podman's default ulimits (nofile and nproc 1048576) cannot be set without
# CAP_SYS_RESOURCE, which this VM does not give even to root.
ULIMITS = ["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]
RESTRICTED = ["--user", "65532:65532", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]


class CheckFailed(Exception):
    pass


def say(msg: str) -> None:
    print(msg, flush=True)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def crate_version() -> str:
    for line in (REPO / "Cargo.toml").read_text().splitlines():
        if line.startswith("version = "):
            return line.split('"')[1]
    raise CheckFailed("no version in Cargo.toml")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method: str, url: str, body: bytes | None = None, token: str | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, method=method)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Runner:
    """Runs the image's binary: in a podman container, or chrooted into the image."""

    def __init__(self, store: list[str], image: str):
        self.store = store
        self.image = image
        self.podman = shutil.which("podman") is not None
        self.mount: str | None = None
        self.ctr: str | None = None
        self.how = ""

    def start(self) -> None:
        if self.podman:
            probe = run(["podman", *self.store, "run", "--rm", "--pull=never", *ULIMITS, *RESTRICTED,
                         "--network", "host", self.image, "--version"])
            if probe.returncode == 0:
                self.how = "in a podman container (user 65532, read-only root, no capabilities, host network)"
                return
            say(f"note: podman cannot run a container here ({probe.stderr.strip().splitlines()[-1:]}); "
                "running the image's binary chrooted into the extracted image instead")
            self.podman = False
        out = run(["buildah", *self.store, "from", "--pull=never", self.image])
        if out.returncode != 0:
            raise CheckFailed(f"buildah from {self.image}: {out.stderr}")
        self.ctr = out.stdout.strip()
        self.mount = run(["buildah", *self.store, "mount", self.ctr]).stdout.strip()
        self.how = f"chrooted into the extracted image ({self.mount}) as user 65532"

    def stop(self) -> None:
        if self.ctr:
            run(["buildah", *self.store, "umount", self.ctr])
            run(["buildah", *self.store, "rm", self.ctr])

    def rootfs(self) -> str:
        """The image's files (a mounted working container, made on first use)."""
        if self.mount is None:
            out = run(["buildah", *self.store, "from", "--pull=never", self.image])
            if out.returncode != 0:
                raise CheckFailed(f"buildah from {self.image}: {out.stderr}")
            self.ctr = out.stdout.strip()
            self.mount = run(["buildah", *self.store, "mount", self.ctr]).stdout.strip()
        return self.mount

    def command(self, args: list[str] | None, env: dict[str, str], mounts: dict[str, str],
                name: str | None = None, detach: bool = False) -> list[str]:
        """The command line running the image with `args` (None: its own entrypoint
        and command), `env` and `mounts` (host dir -> container dir, read-write)."""
        if self.podman:
            cmd = ["podman", *self.store, "run", "--pull=never", *ULIMITS, *RESTRICTED, "--network", "host"]
            cmd += ["-d"] if detach else ["--rm"]
            if name:
                cmd += ["--name", name]
            for k, v in env.items():
                cmd += ["-e", f"{k}={v}"]
            for host, ctr in mounts.items():
                cmd += ["-v", f"{host}:{ctr}"]
            return cmd + [self.image] + (args or [])
        # chroot: bind the mounts into the image's root first.
        root = self.rootfs()
        for host, ctr in mounts.items():
            target = Path(root + ctr)
            target.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", "--bind", host, str(target)], check=True)
        envs = ["env", "-i", "MYSQL_HOOK_LISTEN=0.0.0.0:8080", *(f"{k}={v}" for k, v in env.items())]
        return ["chroot", "--userspec=65532:65532", root, *envs, "/usr/local/bin/mysql-hook", *(args or ["serve"])]


def check_config(store: list[str], image: str, rep: list[str]) -> None:
    out = run(["buildah", *store, "inspect", "--type", "image", image])
    if out.returncode != 0:
        raise CheckFailed(f"buildah inspect {image}: {out.stderr}")
    cfg = json.loads(out.stdout)["OCIv1"]["config"]
    want = {
        "User": "65532:65532",
        "Entrypoint": ["/usr/local/bin/mysql-hook"],
        "Cmd": ["serve"],
    }
    for k, v in want.items():
        if cfg.get(k) != v:
            raise CheckFailed(f"image config {k} is {cfg.get(k)!r}, expected {v!r}")
    if "MYSQL_HOOK_LISTEN=0.0.0.0:8080" not in (cfg.get("Env") or []):
        raise CheckFailed(f"image env lacks MYSQL_HOOK_LISTEN=0.0.0.0:8080: {cfg.get('Env')}")
    if "8080/tcp" not in (cfg.get("ExposedPorts") or {}):
        raise CheckFailed(f"image exposes {cfg.get('ExposedPorts')}, not 8080/tcp")
    rep.append("PASS  image config: user 65532:65532, entrypoint /usr/local/bin/mysql-hook, cmd serve, "
               "MYSQL_HOOK_LISTEN=0.0.0.0:8080, port 8080")


def check_files(runner: Runner, rep: list[str]) -> None:
    root = Path(runner.rootfs())
    binary = root / "usr/local/bin/mysql-hook"
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise CheckFailed("no executable /usr/local/bin/mysql-hook in the image")
    present = [p for p in ("bin/sh", "usr/bin/sh", "bin/bash", "usr/bin/apt", "usr/bin/dpkg") if (root / p).exists()]
    if present:
        raise CheckFailed(f"the runtime image has {present}: a shell or package manager the distroless base has not")
    size = binary.stat().st_size
    agent = root / "usr/local/bin/mysql-hook-agent"
    if not (agent.is_file() and os.access(agent, os.X_OK)):
        raise CheckFailed("no executable /usr/local/bin/mysql-hook-agent in the image")
    if elf_interpreter(agent.read_bytes()):
        raise CheckFailed("/usr/local/bin/mysql-hook-agent is dynamically linked: it must run in any server image")
    rep.append(f"PASS  image files: /usr/local/bin/mysql-hook ({size / 1e6:.1f} MB), the agent "
               f"/usr/local/bin/mysql-hook-agent ({agent.stat().st_size / 1e6:.1f} MB, static), no shell, "
               "no package manager")


def elf_interpreter(data: bytes) -> bool:
    """Whether a 64-bit little-endian ELF file names a dynamic loader (PT_INTERP)."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise CheckFailed("not a 64-bit ELF file")
    phoff = int.from_bytes(data[0x20:0x28], "little")
    phentsize = int.from_bytes(data[0x36:0x38], "little")
    phnum = int.from_bytes(data[0x38:0x3a], "little")
    return any(int.from_bytes(data[phoff + i * phentsize:phoff + i * phentsize + 4], "little") == 3
               for i in range(phnum))


def main() -> int:
    t0 = time.monotonic()
    required = os.environ.get("MYSQL_HOOK_REQUIRE_IMAGE") == "1"
    probe = run(["bash", str(BUILD), "--check-builder"])
    if probe.returncode != 0:
        why = (probe.stdout.strip() or probe.stderr.strip() or f"exit status {probe.returncode}").splitlines()[-1]
        say(f"container image skipped: {why}")
        if required:
            say("FAIL  MYSQL_HOOK_REQUIRE_IMAGE=1: the image check must run here")
            return 1
        return 0
    store = run(["bash", str(BUILD), "--print-store-args"]).stdout.split()

    build = subprocess.run(["bash", str(BUILD)], stdout=subprocess.PIPE, text=True)
    if build.returncode != 0:
        say(f"FAIL  tests/image/build.sh failed (exit status {build.returncode}); its log is above")
        return 1
    image = build.stdout.split()[0]
    build_s = time.monotonic() - t0
    rep: list[str] = [f"PASS  built {image} from the Dockerfile with buildah in {build_s:.0f}s"]
    runner = Runner(store, image)
    tmp = Path(tempfile.mkdtemp(prefix="mysql-hook-image-check-"))
    name = f"mysql-hook-image-check-{os.getpid()}"
    try:
        check_config(store, image, rep)
        check_files(runner, rep)
        runner.start()
        rep.append(f"note: the binary runs {runner.how}")

        version = run(runner.command(["--version"], {}, {}))
        want = f"mysql-hook {crate_version()}"
        if version.returncode != 0 or version.stdout.strip() != want:
            raise CheckFailed(f"--version: exit {version.returncode}, {version.stdout!r} {version.stderr!r}; expected {want!r}")
        rep.append(f"PASS  --version: {want}")

        scripts = tmp / "scripts"
        scripts.mkdir()
        os.chown(scripts, 65532, 65532)
        out = run(runner.command(["install-scripts", "/opt/mysql-hook"], {}, {str(scripts): "/opt/mysql-hook"}))
        if out.returncode != 0:
            raise CheckFailed(f"install-scripts: exit {out.returncode}: {out.stderr}")
        shipped = sorted(p.name for p in (REPO / "hooks/scripts").glob("*.sh"))
        written = sorted(p.name for p in scripts.iterdir())
        if written != sorted(shipped + ["mysql-hook-agent"]):
            raise CheckFailed(f"install-scripts wrote {written}, expected {shipped} and mysql-hook-agent")
        image_agent = Path(runner.rootfs()) / "usr/local/bin/mysql-hook-agent"
        if (scripts / "mysql-hook-agent").read_bytes() != image_agent.read_bytes():
            raise CheckFailed("install-scripts: mysql-hook-agent differs from the image's /usr/local/bin/mysql-hook-agent")
        if (scripts / "mysql-hook-agent").stat().st_mode & 0o777 != 0o555:
            raise CheckFailed("install-scripts: mysql-hook-agent is not mode 0555")
        for n in shipped:
            if (scripts / n).read_bytes() != (REPO / "hooks/scripts" / n).read_bytes():
                raise CheckFailed(f"install-scripts: {n} differs from hooks/scripts/{n}")
            if (scripts / n).stat().st_mode & 0o777 != 0o555:
                raise CheckFailed(f"install-scripts: {n} has mode {(scripts / n).stat().st_mode & 0o777:o}")
        rep.append(f"PASS  install-scripts: {len(shipped)} scripts, byte for byte, and the agent, mode 0555")

        out = run(runner.command(None, {}, {}), timeout=30)
        if out.returncode == 0 or "without --auth-token-file" not in out.stderr:
            raise CheckFailed(f"the image's own command started on 0.0.0.0:8080 without a token "
                              f"(exit {out.returncode}): {out.stderr[-400:]}")
        rep.append("PASS  the image's command (serve on 0.0.0.0:8080) refuses to start without a token file")

        auth = tmp / "auth"
        auth.mkdir()
        token = os.urandom(16).hex()
        (auth / "token").write_text(token + "\n")
        os.chown(auth, 65532, 65532)
        os.chown(auth / "token", 65532, 65532)
        port = free_port()
        env = {"MYSQL_HOOK_LISTEN": f"127.0.0.1:{port}", "MYSQL_HOOK_AUTH_TOKEN_FILE": "/var/run/mysql-hook/auth/token",
               "MYSQL_HOOK_SHUTDOWN_DELAY_SECONDS": "0", "MYSQL_HOOK_SHUTDOWN_TIMEOUT_SECONDS": "5"}
        cmd = runner.command(None, env, {str(auth): "/var/run/mysql-hook/auth"}, name=name, detach=True)
        log = open(tmp / "serve.log", "w")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE if runner.podman else log, stderr=log, text=True)
        if runner.podman:
            proc.wait(timeout=60)
            if proc.returncode != 0:
                raise CheckFailed(f"podman run -d failed: {(tmp / 'serve.log').read_text()}")
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                status, body = http("GET", f"{base}/healthz")
                if status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                logs = run(["podman", *store, "logs", name]).stderr if runner.podman else (tmp / "serve.log").read_text()
                raise CheckFailed(f"/healthz did not answer within 30 s; log:\n{logs[-2000:]}")
            time.sleep(0.2)
        if body.strip() != b"ok":
            raise CheckFailed(f"/healthz answered {body!r}")
        status, _ = http("GET", f"{base}/readyz")
        if status != 200:
            raise CheckFailed(f"/readyz answered {status}")
        request = (REPO / "test-fixtures/sync/new-cluster/request.json").read_bytes()
        status, body = http("POST", f"{base}/sync", request)
        if status != 401:
            raise CheckFailed(f"/sync without the token answered {status}, expected 401")
        status, body = http("POST", f"{base}/sync", request, token=token)
        children = json.loads(body).get("children") if status == 200 else None
        if not children:
            raise CheckFailed(f"/sync with the token answered {status}: {body[:300]!r}")
        rep.append(f"PASS  serve: /healthz and /readyz 200, /sync 401 without the token, 200 with it "
                   f"({len(children)} children for sync/new-cluster)")

        t = time.monotonic()
        if runner.podman:
            run(["podman", *store, "stop", "-t", "15", name], timeout=60)
            code = run(["podman", *store, "inspect", name, "--format", "{{.State.ExitCode}}"]).stdout.strip()
        else:
            proc.terminate()
            code = str(proc.wait(timeout=30))
        if code != "0":
            raise CheckFailed(f"serve exited {code} on SIGTERM, expected 0")
        rep.append(f"PASS  serve exits 0 on SIGTERM ({time.monotonic() - t:.1f}s)")
    except (CheckFailed, subprocess.TimeoutExpired, OSError) as e:
        rep.append(f"FAIL  {e}")
    finally:
        if runner.podman:
            run(["podman", *store, "rm", "-f", name])
        elif runner.mount:
            for d in ("/opt/mysql-hook", "/var/run/mysql-hook/auth"):
                subprocess.run(["umount", runner.mount + d], stderr=subprocess.DEVNULL)
        runner.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    for line in rep:
        say(line)
    failed = any(line.startswith("FAIL") for line in rep)
    say(f"container image: {'FAILED' if failed else 'passed'} in {time.monotonic() - t0:.0f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""A throwaway Kubernetes control plane on loopback, for tests.

Starts a real etcd and kube-apiserver (built from pinned upstream sources by
``build-components.sh`` beside this file) in a fresh temporary directory with its
own certificates, on free loopback ports, and tears all of it down again on exit,
on exceptions and on SIGINT/SIGTERM/SIGHUP. The API is spoken over HTTPS with
urllib and the generated CA: no kubectl, no client library.

Use it as a context manager::

    from harness import Cluster
    with Cluster() as k8s:
        k8s.apply(crd)
        k8s.wait_for_crd_established("mysqls.mysqlhook.dev")
        k8s.create(obj, namespace="demo", dry_run=True)

or run it directly to get a control plane to poke at by hand::

    python3 tests/k8s/harness.py      # prints a kubeconfig path, Ctrl-C stops it

Only the Python standard library and PyYAML are used. Environment knobs:

* ``MYSQL_HOOK_CACHE``       where build-components.sh keeps binaries
* ``MYSQL_HOOK_K8S_BIN_DIR`` use binaries from this directory, skip the build
* ``MYSQL_HOOK_K8S_LOGS``    copy etcd/kube-apiserver logs into this directory on
                             teardown (the temp dir itself is always removed)
"""

from __future__ import annotations

import atexit
import base64
import copy
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterable, Iterator

try:
    import yaml
except ImportError:  # pragma: no cover - depends on the machine
    sys.stderr.write(
        "tests/k8s: PyYAML is required (import yaml failed). Install it with\n"
        "    apt-get install python3-yaml    or    python3 -m pip install PyYAML\n"
    )
    raise SystemExit(2)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BUILD_SCRIPT = HERE / "build-components.sh"

ADMIN_TOKEN_USER = "mysql-hook-test-admin"
FIELD_MANAGER = "mysql-hook-tests"


def log(msg: str) -> None:
    sys.stderr.write(f"harness: {msg}\n")
    sys.stderr.flush()


# --------------------------------------------------------------------------- errors


class HarnessError(Exception):
    """The control plane could not be built, started or reached."""


class ApiError(Exception):
    """A non-2xx answer of the API server, with its Status message."""

    def __init__(self, method: str, path: str, code: int, body: Any, raw: str):
        self.method = method
        self.path = path
        self.code = code
        self.body = body if isinstance(body, dict) else {}
        self.raw = raw
        self.reason = self.body.get("reason", "")
        self.message = self.body.get("message") or raw.strip() or f"HTTP {code}"
        super().__init__(f"HTTP {code} {self.reason} from {method} {path}: {self.message}")


# ------------------------------------------------------------------------ utilities


def load_versions() -> dict[str, str]:
    """The KEY=VALUE pins of versions.env."""
    out: dict[str, str] = {}
    for line in (HERE / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip().strip("'\"")
    return out


def module_files(module: str, version: str, subdir: str, files: list[str]) -> list[Path]:
    """`files` of `subdir` in the Go module `module@version`, fetched once from the Go
    module proxy (`go mod download`, into a throwaway module cache) and kept under
    $MYSQL_HOOK_CACHE (default ~/.cache/mysql-hook), outside the repository. Used for
    the CRDs of operators whose objects we ship but cannot run (cert-manager, the
    Prometheus Operator): the API server judges our objects by their schemas."""
    cache = Path(os.environ.get("MYSQL_HOOK_CACHE", Path.home() / ".cache" / "mysql-hook")) / \
        f"{module.rsplit('/', 1)[-1]}-{version}"
    if all((cache / f).exists() for f in files):
        return [cache / f for f in files]
    if not shutil.which("go"):
        raise HarnessError(f"the Go toolchain is needed to fetch {module}@{version} from the Go module proxy")
    modcache = Path(tempfile.mkdtemp(prefix="mysql-hook-gomod-"))
    try:
        env = dict(os.environ, GOMODCACHE=str(modcache), GOFLAGS="-modcacherw", GOTOOLCHAIN="local", GOWORK="off")
        out = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"],
                             env=env, capture_output=True, text=True, timeout=600, cwd=modcache)
        if out.returncode != 0:
            raise HarnessError(f"go mod download {module}@{version} failed:\n{out.stdout}{out.stderr}")
        src = Path(json.loads(out.stdout)["Dir"]) / subdir
        cache.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copy(src / f, cache / f)
    finally:
        shutil.rmtree(modcache, ignore_errors=True)
    return [cache / f for f in files]


def ensure_binaries(full: bool = False) -> Path:
    """Runs build-components.sh (a no-op when the cache is current); returns the bin dir."""
    override = os.environ.get("MYSQL_HOOK_K8S_BIN_DIR")
    if override:
        return Path(override)
    if shutil.which("go") is None:
        raise HarnessError(
            "the Go toolchain ('go') is not on PATH: tests/k8s builds etcd and "
            "kube-apiserver from the Go module proxy and needs Go >= 1.26 "
            "(or set MYSQL_HOOK_K8S_BIN_DIR to prebuilt binaries)"
        )
    cmd = ["bash", str(BUILD_SCRIPT)] + (["--full"] if full else [])
    t0 = time.monotonic()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)  # stderr streams through
    if proc.returncode != 0:
        raise HarnessError(f"{BUILD_SCRIPT.name} failed with exit status {proc.returncode}")
    lines = [l for l in proc.stdout.splitlines() if l.strip()]
    if not lines:
        raise HarnessError(f"{BUILD_SCRIPT.name} printed no bin directory")
    bin_dir = Path(lines[-1].strip())
    log(f"binaries ready in {bin_dir} ({time.monotonic() - t0:.1f}s)")
    return bin_dir


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (the OS picks them: bind to port 0)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def load_yaml_docs(path: Path) -> list[dict]:
    """Every non-empty YAML document of a file (a file may hold several)."""
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise HarnessError(f"openssl {' '.join(args)} failed:\n{proc.stdout}")


def make_certs(d: Path) -> None:
    """CA, serving cert for 127.0.0.1/localhost, service-account signing key."""
    if shutil.which("openssl") is None:
        raise HarnessError("the openssl command line tool is needed to make test certificates")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "2",
             "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=mysql-hook-test-ca",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-sha256", "-keyout", "apiserver.key",
             "-out", "apiserver.csr", "-subj", "/CN=kube-apiserver", cwd=d)
    (d / "apiserver.ext").write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n"
        # 10.96.0.1: the `kubernetes` Service, how pods reach it (the install test).
        "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,"
        "DNS:kubernetes.default,DNS:kubernetes.default.svc\n"
    )
    _openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-sha256", "-days", "2", "-extfile", "apiserver.ext",
             "-out", "apiserver.crt", cwd=d)
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
             "-out", "sa.key", cwd=d)
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)
    for key in ("ca.key", "apiserver.key", "sa.key"):
        os.chmod(d / key, 0o600)


def _die_with_parent() -> None:
    """preexec_fn: the child gets SIGKILL when this process dies (even by SIGKILL)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort on non-glibc systems
        pass


TEMP_PREFIX = "mysql-hook-k8s-"


def _remove_stale_temp_dirs() -> None:
    """Removes temp dirs left behind by harness processes that were SIGKILLed (their
    etcd/kube-apiserver died with them through PR_SET_PDEATHSIG)."""
    for d in Path(tempfile.gettempdir()).glob(TEMP_PREFIX + "*"):
        try:
            pid = int((d / "owner.pid").read_text().strip())
        except (OSError, ValueError):
            continue
        try:
            os.kill(pid, 0)
            continue  # the owner is alive
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(d, ignore_errors=True)
        log(f"removed stale {d} (its harness process {pid} is gone)")


class _Terminated(SystemExit):
    """Raised from our SIGTERM/SIGHUP handler so that `with` blocks unwind."""


# -------------------------------------------------------------------------- cluster


class Cluster:
    """etcd + kube-apiserver on loopback, plus a small JSON/HTTPS client."""

    def __init__(self, bin_dir: Path | None = None, full_build: bool = False,
                 ready_timeout: float = 180.0, extra_apiserver_args: Iterable[str] = ()):
        self.bin_dir = bin_dir
        self.full_build = full_build
        self.ready_timeout = ready_timeout
        self.extra_apiserver_args = list(extra_apiserver_args)
        self.tmp: Path | None = None
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self._logs: list[Any] = []
        self.token = base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("=")
        self.server = ""
        self.etcd_url = ""
        self.ssl_ctx: ssl.SSLContext | None = None
        self._discovery: dict[str, dict[str, dict]] = {}
        self._stopped = True
        self._old_handlers: dict[int, Any] = {}
        self.last_warnings: list[str] = []

    # ----------------------------------------------------------------- lifecycle

    def __enter__(self) -> "Cluster":
        self._install_signal_handlers()
        try:
            self.start()
        except BaseException:
            self.stop()
            self._restore_signal_handlers()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.stop()
        finally:
            self._restore_signal_handlers()

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def handler(signum: int, _frame: Any) -> None:
            log(f"received signal {signal.Signals(signum).name}; tearing down")
            raise _Terminated(128 + signum)

        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, handler)
        # SIGINT normally raises KeyboardInterrupt already; respect it being ignored.
        if signal.getsignal(signal.SIGINT) == signal.SIG_DFL:
            self._old_handlers[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)

    def _restore_signal_handlers(self) -> None:
        for sig, old in self._old_handlers.items():
            try:
                signal.signal(sig, old)
            except (ValueError, TypeError):
                pass
        self._old_handlers.clear()

    def start(self) -> None:
        self._stopped = False
        atexit.register(self.stop)
        if self.bin_dir is None:
            self.bin_dir = ensure_binaries(full=self.full_build)
        for b in ("etcd", "kube-apiserver"):
            if not os.access(self.bin_dir / b, os.X_OK):
                raise HarnessError(f"missing binary {self.bin_dir / b}")

        _remove_stale_temp_dirs()
        self.tmp = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        (self.tmp / "owner.pid").write_text(f"{os.getpid()}\n")
        log(f"temp dir {self.tmp}")
        make_certs(self.tmp)
        self.ssl_ctx = ssl.create_default_context(cafile=str(self.tmp / "ca.crt"))

        (self.tmp / "tokens.csv").write_text(
            f'{self.token},{ADMIN_TOKEN_USER},{ADMIN_TOKEN_USER},"system:masters"\n')
        os.chmod(self.tmp / "tokens.csv", 0o600)

        etcd_client, etcd_peer, api_port = free_ports(3)
        self.etcd_url = f"http://127.0.0.1:{etcd_client}"
        self.server = f"https://127.0.0.1:{api_port}"

        self._spawn("etcd", [
            str(self.bin_dir / "etcd"),
            "--name=default",
            f"--data-dir={self.tmp / 'etcd'}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=default=http://127.0.0.1:{etcd_peer}",
            "--initial-cluster-state=new",
            "--unsafe-no-fsync",            # throwaway data: speed over durability
            "--quota-backend-bytes=2147483648",
            "--log-level=warn",
        ])
        self._wait_http(f"{self.etcd_url}/health", "etcd", timeout=60, context=None)

        self._spawn("kube-apiserver", [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--tls-cert-file={self.tmp / 'apiserver.crt'}",
            f"--tls-private-key-file={self.tmp / 'apiserver.key'}",
            f"--client-ca-file={self.tmp / 'ca.crt'}",
            f"--token-auth-file={self.tmp / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--anonymous-auth=false",
            f"--service-account-key-file={self.tmp / 'sa.pub'}",
            f"--service-account-signing-key-file={self.tmp / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.96.0.0/16",
            # The lease reconciler refuses a loopback advertise address; nothing here
            # needs the default/kubernetes Service endpoints.
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true",
            "--profiling=false",
            f"--cert-dir={self.tmp / 'apiserver-certs'}",
            "--v=1",
            *self.extra_apiserver_args,
        ])
        self._wait_http(f"{self.server}/readyz", "kube-apiserver", timeout=self.ready_timeout,
                        context=self.ssl_ctx, token=self.token)
        self._write_kubeconfig()
        log(f"kube-apiserver ready at {self.server}")

    def stop(self) -> None:
        """Kills every process and removes the temp dir. Safe to call repeatedly."""
        if self._stopped:
            return
        self._stopped = True
        # kube-apiserver first, then etcd.
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    log(f"{name} did not stop on SIGTERM; killing it")
                    p.kill()
                    p.wait(timeout=15)
        self.procs.clear()
        for f in self._logs:
            try:
                f.close()
            except OSError:
                pass
        self._logs.clear()
        if self.tmp is not None:
            keep = os.environ.get("MYSQL_HOOK_K8S_LOGS")
            if keep:
                dest = Path(keep)
                dest.mkdir(parents=True, exist_ok=True)
                for lf in self.tmp.glob("*.log"):
                    shutil.copy(lf, dest / lf.name)
            shutil.rmtree(self.tmp, ignore_errors=True)
            log(f"removed {self.tmp}")
            self.tmp = None
        try:
            atexit.unregister(self.stop)
        except Exception:  # noqa: BLE001
            pass

    def spawn(self, name: str, argv: list[str]) -> None:
        """Starts another component (controller-manager, Metacontroller, ...) that is
        stopped with the cluster, before the API server (reverse start order). Its
        output goes to <tmp>/<name>.log (see log_tail and MYSQL_HOOK_K8S_LOGS)."""
        self._spawn(name, argv)

    def _spawn(self, name: str, argv: list[str]) -> None:
        assert self.tmp is not None
        logf = open(self.tmp / f"{name}.log", "wb")
        self._logs.append(logf)
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                             cwd=self.tmp, start_new_session=True, preexec_fn=_die_with_parent)
        self.procs.append((name, p))

    def log_tail(self, name: str, lines: int = 40) -> str:
        if self.tmp is None or not (self.tmp / f"{name}.log").exists():
            return ""
        text = (self.tmp / f"{name}.log").read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def _wait_http(self, url: str, name: str, timeout: float, context: ssl.SSLContext | None,
                   token: str | None = None) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for pname, p in self.procs:
                if p.poll() is not None:
                    raise HarnessError(f"{pname} exited with status {p.returncode}; last log lines:\n"
                                       f"{self.log_tail(pname)}")
            req = urllib.request.Request(url)
            if token:
                req.add_header("Authorization", f"Bearer {token}")
            try:
                with urllib.request.urlopen(req, timeout=5, context=context) as r:
                    if r.status == 200:
                        return
            except urllib.error.HTTPError as e:
                last = f"HTTP {e.code}: {e.read()[:2000].decode(errors='replace')}"
            except (urllib.error.URLError, OSError) as e:
                last = str(e)
            time.sleep(0.25)
        raise HarnessError(f"{name} not ready at {url} after {timeout:.0f}s ({last}); last log lines:\n"
                           f"{self.log_tail(name)}")

    def _write_kubeconfig(self) -> None:
        assert self.tmp is not None
        ca = base64.b64encode((self.tmp / "ca.crt").read_bytes()).decode()
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.server,
                                                      "certificate-authority-data": ca}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
        }
        p = self.tmp / "kubeconfig"
        p.write_text(yaml.safe_dump(cfg))
        os.chmod(p, 0o600)

    @property
    def kubeconfig(self) -> Path:
        """A kubeconfig (admin token) for other processes, e.g. Metacontroller."""
        assert self.tmp is not None
        return self.tmp / "kubeconfig"

    @property
    def ca_file(self) -> Path:
        assert self.tmp is not None
        return self.tmp / "ca.crt"

    # ------------------------------------------------------------------ HTTP core

    def request(self, method: str, path: str, body: Any = None, params: dict | None = None,
                content_type: str = "application/json", timeout: float = 60) -> Any:
        """One API call; returns the decoded JSON body or raises ApiError."""
        url = self.server + path
        if params:
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(
                {k: v for k, v in params.items() if v is not None})
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            data = data.encode() if isinstance(data, str) else data
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.ssl_ctx) as r:
                self.last_warnings = _warnings(r.headers)
                raw = r.read()
                return json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            self.last_warnings = _warnings(e.headers)
            raw = e.read().decode(errors="replace")
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None
            raise ApiError(method, path, e.code, parsed, raw) from None

    # ------------------------------------------------------------------ discovery

    def _group_version_resources(self, api_version: str, refresh: bool = False) -> dict[str, dict]:
        if refresh or api_version not in self._discovery:
            path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            try:
                lst = self.request("GET", path)
            except ApiError as e:
                if e.code == 404:
                    return {}
                raise
            self._discovery[api_version] = {
                r["kind"]: r for r in lst.get("resources", []) if "/" not in r["name"]}
        return self._discovery[api_version]

    def resource_for(self, api_version: str, kind: str) -> dict:
        """The APIResource (name, namespaced, verbs) of apiVersion/kind via discovery."""
        res = self._group_version_resources(api_version).get(kind)
        if res is None:  # maybe a CRD that was just installed
            res = self._group_version_resources(api_version, refresh=True).get(kind)
        if res is None:
            raise HarnessError(f"the API server does not serve kind {kind} in {api_version}")
        return res

    def path_for(self, api_version: str, kind: str, namespace: str | None = None,
                 name: str | None = None, subresource: str | None = None) -> str:
        res = self.resource_for(api_version, kind)
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        if res.get("namespaced"):
            if not namespace:
                raise HarnessError(f"{kind} is namespaced; a namespace is needed")
            base += f"/namespaces/{urllib.parse.quote(namespace)}"
        base += f"/{res['name']}"
        if name:
            base += f"/{urllib.parse.quote(name)}"
            if subresource:
                base += f"/{subresource}"
        return base

    def _obj_path(self, obj: dict, namespace: str | None, with_name: bool,
                  subresource: str | None = None) -> str:
        md = obj.get("metadata") or {}
        ns = namespace or md.get("namespace")
        res = self.resource_for(obj["apiVersion"], obj["kind"])
        if res.get("namespaced") and not ns:
            ns = "default"
        return self.path_for(obj["apiVersion"], obj["kind"], ns if res.get("namespaced") else None,
                             md.get("name") if with_name else None, subresource)

    # ------------------------------------------------------------------ verbs

    @staticmethod
    def _params(dry_run: bool, field_validation: str | None, **extra: Any) -> dict:
        p: dict[str, Any] = dict(extra)
        if dry_run:
            p["dryRun"] = "All"
        if field_validation:
            p["fieldValidation"] = field_validation
        return p

    def create(self, obj: dict, namespace: str | None = None, dry_run: bool = False,
               field_validation: str | None = "Strict") -> dict:
        """POST; with dry_run=True the server validates, defaults and admits but stores nothing.

        field_validation="Strict" makes unknown or duplicate fields an error instead of
        silently dropping them; pass None for the server default (Warn)."""
        return self.request("POST", self._obj_path(obj, namespace, with_name=False), obj,
                            params=self._params(dry_run, field_validation))

    def apply(self, obj: dict, namespace: str | None = None, dry_run: bool = False,
              field_validation: str | None = "Strict", force: bool = True) -> dict:
        """Server-side apply (like `kubectl apply --server-side --force-conflicts`)."""
        return self.request("PATCH", self._obj_path(obj, namespace, with_name=True), obj,
                            params=self._params(dry_run, field_validation, fieldManager=FIELD_MANAGER,
                                                force="true" if force else None),
                            content_type="application/apply-patch+yaml")

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict:
        return self.request("GET", self.path_for(api_version, kind, namespace, name))

    def get_or_none(self, api_version: str, kind: str, name: str,
                    namespace: str | None = None) -> dict | None:
        try:
            return self.get(api_version, kind, name, namespace)
        except ApiError as e:
            if e.code == 404:
                return None
            raise

    def replace(self, obj: dict, namespace: str | None = None, dry_run: bool = False,
                field_validation: str | None = "Strict") -> dict:
        return self.request("PUT", self._obj_path(obj, namespace, with_name=True), obj,
                            params=self._params(dry_run, field_validation))

    def replace_status(self, obj: dict, namespace: str | None = None, dry_run: bool = False,
                       field_validation: str | None = "Strict") -> dict:
        """PUT the status subresource (obj needs metadata.resourceVersion for safety)."""
        return self.request("PUT", self._obj_path(obj, namespace, with_name=True, subresource="status"),
                            obj, params=self._params(dry_run, field_validation))

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None,
               wait: bool = True, timeout: float = 60) -> None:
        try:
            self.request("DELETE", self.path_for(api_version, kind, namespace, name),
                         {"kind": "DeleteOptions", "apiVersion": "v1",
                          "propagationPolicy": "Background"})
        except ApiError as e:
            if e.code != 404:
                raise
            return
        if wait:
            deadline = time.monotonic() + timeout
            while self.get_or_none(api_version, kind, name, namespace) is not None:
                if time.monotonic() > deadline:
                    raise HarnessError(f"{kind} {namespace}/{name} still exists {timeout:.0f}s after delete")
                time.sleep(0.1)

    def ensure_namespace(self, name: str) -> None:
        if self.get_or_none("v1", "Namespace", name) is None:
            try:
                self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            except ApiError as e:
                if e.code != 409:
                    raise

    def wait_for_crd_established(self, name: str, timeout: float = 60) -> dict:
        """Waits until the CRD's Established condition is True; returns the CRD.

        Raises HarnessError at once if it reports NonStructuralSchema (or names not
        accepted), with the server's message."""
        deadline = time.monotonic() + timeout
        crd: dict = {}
        while time.monotonic() < deadline:
            crd = self.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
            conds = {c.get("type"): c for c in (crd.get("status") or {}).get("conditions") or []}
            ns = conds.get("NonStructuralSchema")
            if ns and ns.get("status") == "True":
                raise HarnessError(f"CRD {name} has a non-structural schema: {ns.get('message')}")
            na = conds.get("NamesAccepted")
            if na and na.get("status") == "False":
                raise HarnessError(f"CRD {name} names not accepted: {na.get('message')}")
            est = conds.get("Established")
            if est and est.get("status") == "True":
                # Served resources show up in discovery a little later.
                group = crd["spec"]["group"]
                for v in crd["spec"].get("versions", []):
                    if v.get("served"):
                        self._discovery.pop(f"{group}/{v['name']}", None)
                return crd
            time.sleep(0.1)
        raise HarnessError(f"CRD {name} not Established after {timeout:.0f}s; conditions: "
                           f"{json.dumps((crd.get('status') or {}).get('conditions'))}")

    def wait_for_kind(self, api_version: str, kind: str, timeout: float = 30) -> dict:
        """Waits until discovery serves apiVersion/kind (CRDs take a moment)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.resource_for(api_version, kind)
            except HarnessError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def _warnings(headers: Any) -> list[str]:
    out: list[str] = []
    if headers is None:
        return out
    for w in headers.get_all("Warning") or []:
        # RFC 7234 form: 299 - "text"
        parts = w.split(" ", 2)
        text = parts[2] if len(parts) == 3 else w
        out.append(text.strip().strip('"'))
    return out


def strip_server_fields(obj: dict) -> dict:
    """A copy fit for create: no uid, resourceVersion, timestamps, status, finalizers..."""
    o = copy.deepcopy(obj)
    o.pop("status", None)
    md = o.setdefault("metadata", {})
    for k in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation",
              "finalizers", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink",
              "ownerReferences"):
        md.pop(k, None)
    return o


def iter_yaml_files(root: Path) -> Iterator[Path]:
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in (".yaml", ".yml"):
            yield p


def main() -> int:
    import argparse
    ap = argparse.ArgumentParser(description="Run a throwaway etcd + kube-apiserver until Ctrl-C.")
    ap.add_argument("--full", action="store_true", help="also build controller-manager, scheduler, kwok")
    args = ap.parse_args()
    with Cluster(full_build=args.full) as k8s:
        print(f"server:     {k8s.server}")
        print(f"kubeconfig: {k8s.kubeconfig}")
        print(f"token:      {k8s.token}")
        print(f"try: curl --cacert {k8s.ca_file} -H 'Authorization: Bearer {k8s.token}' {k8s.server}/version")
        print("Ctrl-C stops and removes everything.", flush=True)
        try:
            while all(p.poll() is None for _, p in k8s.procs):
                time.sleep(1)
            log("a component exited; stopping")
            return 1
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main())

"""A real Prometheus (and mysqld_exporters) on loopback, for tests.

Stdlib only (PyYAML for the rule files).  Reusable by any test that has targets
to scrape and rules to evaluate:

    from prom import Prometheus, Target, shipped_rules
    with Prometheus([Target("mysql-hook", "127.0.0.1:8080", honor_labels=True)],
                    rules=shipped_rules()) as p:
        p.wait_for_alert("MySQLNoWritablePrimary", state="firing", timeout=120)

Prometheus is Debian's `prometheus` package (`/usr/bin/prometheus`, or
$PROMETHEUS_BIN); mysqld_exporter is Debian's `prometheus-mysqld-exporter`
($MYSQLD_EXPORTER_BIN).  When missing and running as root, they are installed
with apt-get, as tests/scripts does for mariadb-server.  Every process gets
SIGKILL when the test process dies, and its files live in a temporary
directory removed on stop().
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
RULES = REPO / "metacontroller" / "components" / "prometheus-rules" / "prometheusrule.yaml"


class SetupError(RuntimeError):
    pass


def _die_with_parent():
    """preexec_fn: SIGKILL when the test process dies (PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except Exception:  # noqa: BLE001 - best effort; stop() still kills
        pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_debian_binary(name: str, package: str, env_var: str) -> str:
    """The path of a Debian-packaged binary, installed with apt-get when missing
    and we are root."""
    given = os.environ.get(env_var)
    if given:
        return given
    found = shutil.which(name)
    if found:
        return found
    if os.geteuid() != 0:
        raise SetupError(f"{name} not found and not root: apt-get install -y --no-install-recommends {package}"
                         f" (or set {env_var})")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, text=True)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0 or not shutil.which(name):
        raise SetupError(f"apt-get install {package} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return shutil.which(name)


def prometheus_binary() -> str:
    return ensure_debian_binary("prometheus", "prometheus", "PROMETHEUS_BIN")


def mysqld_exporter_binary() -> str:
    return ensure_debian_binary("prometheus-mysqld-exporter", "prometheus-mysqld-exporter", "MYSQLD_EXPORTER_BIN")


def wait_http(url: str, timeout: float, proc: subprocess.Popen | None = None, log: Path | None = None) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log else ""
            raise SetupError(f"{proc.args[0]} exited {proc.returncode} before {url} answered:\n{tail}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SetupError(f"{url} did not answer within {timeout}s")


# ------------------------------------------------------------------ rules

def shipped_groups() -> list[dict]:
    """The `spec.groups` of the shipped PrometheusRule: a Prometheus rule file's groups."""
    doc = yaml.safe_load(RULES.read_text())
    return doc["spec"]["groups"]


def shipped_rules() -> dict:
    return {"groups": shipped_groups()}


def alerts_of(rules: dict) -> list[dict]:
    return [r for g in rules["groups"] for r in g["rules"] if "alert" in r]


def with_for(rules: dict, durations: dict[str, str]) -> dict:
    """A copy of `rules` with the `for` of the named alerts replaced (tests that
    cannot wait the shipped duration say so by calling this)."""
    out = json.loads(json.dumps(rules))
    for r in alerts_of(out):
        if r["alert"] in durations:
            r["for"] = durations[r["alert"]]
    return out


# ------------------------------------------------------------------ processes

@dataclass
class Target:
    """One scrape job with static targets: addresses sharing `labels`, or
    (address, labels) pairs, each with its own."""
    job: str
    addresses: list[str] | str | list[tuple[str, dict[str, str]]]
    labels: dict[str, str] = field(default_factory=dict)
    honor_labels: bool = False
    bearer_token: str | None = None
    metrics_path: str = "/metrics"
    scheme: str = "http"

    def config(self, token_dir: Path) -> dict:
        addrs = [self.addresses] if isinstance(self.addresses, str) else list(self.addresses)
        if addrs and isinstance(addrs[0], tuple):
            static = [{"targets": [addr], "labels": {**self.labels, **labels}} for addr, labels in addrs]
        else:
            static = [{"targets": addrs, "labels": dict(self.labels)}]
        job = {
            "job_name": self.job,
            "honor_labels": self.honor_labels,
            "metrics_path": self.metrics_path,
            "scheme": self.scheme,
            "static_configs": static,
        }
        if self.bearer_token is not None:
            path = token_dir / f"{self.job}.token"
            path.write_text(self.bearer_token)
            path.chmod(0o600)
            job["authorization"] = {"type": "Bearer", "credentials_file": str(path)}
        return job


class Prometheus:
    """Debian's Prometheus on 127.0.0.1:<free port> with the given scrape targets
    and rules (a rule-file dict, e.g. shipped_rules()), scraping and evaluating
    every `interval`."""

    def __init__(self, targets: list[Target], rules: dict | None = None, interval: str = "1s",
                 keep_dir: str | None = None):
        self.binary = prometheus_binary()
        self.targets = targets
        self.rules = rules
        self.interval = interval
        self.dir = Path(tempfile.mkdtemp(prefix="mysql-hook-prometheus-"))
        self.keep_dir = keep_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = self.dir / "prometheus.log"

    def __enter__(self) -> "Prometheus":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "Prometheus":
        config = {
            "global": {"scrape_interval": self.interval, "evaluation_interval": self.interval,
                       "scrape_timeout": self.interval},
            "scrape_configs": [t.config(self.dir) for t in self.targets],
        }
        if self.rules is not None:
            (self.dir / "rules.yaml").write_text(yaml.safe_dump(self.rules, sort_keys=False))
            config["rule_files"] = [str(self.dir / "rules.yaml")]
        (self.dir / "prometheus.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        args = [self.binary, f"--config.file={self.dir / 'prometheus.yaml'}",
                f"--storage.tsdb.path={self.dir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1d", "--web.enable-lifecycle"]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=_die_with_parent)
        wait_http(f"{self.url}/-/ready", 60, self.proc, self.log)
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.keep_dir:
            # the kept-logs directory may not exist yet (scenario 11 stops its
            # Prometheus before the harness writes its own logs there)
            Path(self.keep_dir).mkdir(parents=True, exist_ok=True)
            shutil.copy(self.log, Path(self.keep_dir) / "prometheus.log")
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- HTTP API ---------------------------------------------------------
    def api(self, path: str, **params) -> dict | list:
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        if body.get("status") != "success":
            raise RuntimeError(f"{path}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        """Instant query: [{"metric": {...}, "value": [t, "v"]}, ...]."""
        data = self.api("query", query=expr)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return data["result"]

    def alerts(self) -> list[dict]:
        return self.api("alerts")["alerts"]

    def alert(self, alertname: str, /, **labels) -> dict | None:
        """The active (pending or firing) alert with these labels, if any."""
        for a in self.alerts():
            if a["labels"].get("alertname") == alertname and all(a["labels"].get(k) == v for k, v in labels.items()):
                return a
        return None

    def targets_health(self) -> dict[str, str]:
        return {t["scrapeUrl"]: t["health"] for t in self.api("targets")["activeTargets"]}

    def rule_health(self) -> list[dict]:
        """Every rule whose last evaluation failed."""
        return [r for g in self.api("rules")["groups"] for r in g["rules"] if r.get("health") not in ("ok", "unknown")]

    def wait_for(self, check, timeout: float, what: str, poll: float = 0.5):
        """Polls `check()` until it returns something truthy; returns it."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            last = check()
            if last:
                return last
            time.sleep(poll)
        raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")

    def wait_for_alert(self, alertname: str, state: str = "firing", timeout: float = 120, /, **labels) -> dict:
        return self.wait_for(lambda: (a := self.alert(alertname, **labels)) is not None and a["state"] == state and a,
                             timeout, f"{alertname}{labels} {state}")

    def wait_for_no_alert(self, alertname: str, timeout: float = 120, /, **labels) -> None:
        self.wait_for(lambda: self.alert(alertname, **labels) is None, timeout, f"{alertname}{labels} resolved")

    def wait_for_targets_up(self, timeout: float = 60) -> None:
        self.wait_for(lambda: all(h == "up" for h in self.targets_health().values()) and self.targets_health(),
                      timeout, "every target up")


class MysqldExporter:
    """Debian's prometheus-mysqld-exporter logged in through a server's socket,
    on 127.0.0.1:<free port>, with an option file of the form the hook puts in the
    sidecar's Secret (`[client]` user, password, socket; `--config.my-cnf`)."""

    def __init__(self, socket_path: str | Path, user: str, password: str):
        self.binary = mysqld_exporter_binary()
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.dir = Path(tempfile.mkdtemp(prefix="mysql-hook-exporter-"))
        self.log = self.dir / "exporter.log"
        self.cnf = self.dir / "my.cnf"
        self.cnf.write_text(f"[client]\nuser = {user}\npassword = {password}\nsocket = {socket_path}\n")
        self.cnf.chmod(0o600)
        self.env = {k: v for k, v in os.environ.items() if k != "DATA_SOURCE_NAME"}
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "MysqldExporter":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "MysqldExporter":
        args = [self.binary, f"--web.listen-address={self.address}", f"--config.my-cnf={self.cnf}"]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=_die_with_parent)
        wait_http(f"http://{self.address}/metrics", 30, self.proc, self.log)
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def scrape(self) -> dict[str, float]:
        """`name{labels}` -> value of one scrape."""
        with urllib.request.urlopen(f"http://{self.address}/metrics", timeout=10) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                try:
                    out[key] = float(value)
                except ValueError:
                    pass
        return out

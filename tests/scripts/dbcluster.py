"""Throwaway MariaDB servers on 127.0.0.1 for testing hooks/scripts.

Stdlib only.  Each server is set up the way a pod of the hook's StatefulSet
is: hooks/scripts/init.sh copies the hook's rendered my.cnf into the server's
conf.d, writes the per-pod server-id.cnf and initializes the empty data dir
(root@'localhost' with the root password and the operator account
mysqlhook@'%' with OPERATOR_PASSWORD, no GTID; a Cluster(legacy=True) gets
root@'%' instead, as clusters made before the operator account have).  The my.cnf
is the one the hook renders for MariaDB, read from the committed golden
fixture (HOOK_CNF_FIXTURE, ConfigMap `db-config-<hash>`, key `my.cnf`), plus

- options the scripts need that the rendered file lacks (NEEDED_OPTIONS; the
  ones actually added are in World.added_options and printed in the summary),
- test-local plumbing: datadir, socket, port, pid file, bind address
  127.0.0.1, tmpdir (each pod has its own /tmp), error log, small InnoDB
  buffers.

The server is started with --defaults-file=server.cnf, which only includes the
server's conf.d (as the images' /etc/mysql/my.cnf includes /etc/mysql/conf.d).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
def _installed_scripts() -> Path:
    """The scripts as pods get them: `mysql-hook install-scripts DIR` (the first
    init container of every pod) when MYSQL_HOOK_BIN names the binary, as
    tests/real_servers.rs does; otherwise hooks/scripts itself."""
    binary = os.environ.get("MYSQL_HOOK_BIN")
    if not binary:
        return REPO / "hooks" / "scripts"
    out = Path(tempfile.mkdtemp(prefix="mysql-hook-scripts-"))
    atexit.register(shutil.rmtree, out, True)
    subprocess.run([binary, "install-scripts", str(out)], check=True, timeout=30)
    return out


SCRIPTS = _installed_scripts()
# The agent as pods get it: installed beside the scripts (mysql-hook
# install-scripts), or the one cargo built.
AGENT = SCRIPTS / "mysql-hook-agent"
if not AGENT.exists():
    AGENT = Path(os.environ.get("MYSQL_HOOK_AGENT_BIN") or REPO / "target" / "debug" / "mysql-hook-agent")
# The option file the hook renders, per flavor (golden fixtures).
HOOK_CNF_FIXTURES = {
    "mariadb": REPO / "test-fixtures" / "sync" / "mariadb-new-cluster" / "response.json",
    "mysql": REPO / "test-fixtures" / "sync" / "new-cluster" / "response.json",
}
HOOK_CNF_FIXTURE = HOOK_CNF_FIXTURES["mariadb"]


class ServerKind:
    """Which server the suite runs against (MYSQL_HOOK_SERVER):

    - `mariadb` (default): Debian bookworm's MariaDB 10.11, installed on this host;
    - `mysql-9.7`: Oracle's MySQL 9.7 LTS from Debian sid, and `mariadb-11.8`:
      MariaDB 11.8 LTS from trixie. Neither may be installed on this bookworm host,
      so their programs run from the root file system of the real node's image of
      that server (tests/k8s/images.py, cached) through small wrappers: each enters
      a private mount namespace, binds /tmp (and the test's own directory), /dev
      and /proc into the root file system at the same paths, and chroots. Scripts, sockets,
      data directories and ports are then the same as for a host server.
    """

    def __init__(self, name: str):
        self.name = name
        if name == "mariadb":
            self.flavor, self.root = "mariadb", None
        elif name in ("mysql-9.7", "mariadb-11.8"):
            self.flavor = "mysql" if name.startswith("mysql") else "mariadb"
            sys.path.insert(0, str(REPO / "tests" / "k8s"))
            import images  # noqa: PLC0415 - the real node's image module
            try:
                self.root = images.server_rootfs(name)
            except images.ImageError as e:
                raise SetupError(f"cannot build the {name} image: {e}") from e
        else:
            raise SetupError(f"MYSQL_HOOK_SERVER={name!r}: one of mariadb, mariadb-11.8, mysql-9.7")
        mysql = self.flavor == "mysql"
        self.server = "mysqld" if mysql else "mariadbd"
        self.client = "mysql" if mysql else "mariadb"
        self.dump = "mysqldump" if mysql else "mariadb-dump"
        self.binlog = "mysqlbinlog" if mysql else "mariadb-binlog"

    @property
    def mysql(self) -> bool:
        return self.flavor == "mysql"

    def make_wrappers(self, bin_dir: Path, world_root: Path) -> None:
        """One wrapper per server program of the root file system (see the class)."""
        if self.root is None:
            return
        bin_dir.mkdir(parents=True, exist_ok=True)
        if not str(world_root).startswith("/tmp/"):
            (self.root / str(world_root).lstrip("/")).mkdir(parents=True, exist_ok=True)
        (self.root / "etc/hosts").touch()
        enter = bin_dir / ".enter"
        enter.write_text(_CHROOT_ENTER)
        for sub in ("usr/bin", "usr/sbin"):
            for prog in sorted((self.root / sub).iterdir()):
                if not re.match(r"^(mysql|mariadb|my_|mysqld|mariadbd|innochecksum|resolve)", prog.name):
                    continue
                w = bin_dir / prog.name
                w.write_text(_CHROOT_WRAPPER.format(enter=enter, root=self.root, world=world_root,
                                                    prog=f"/{sub}/{prog.name}"))
                w.chmod(0o755)


_CHROOT_ENTER = """#!/bin/sh
# tests/scripts: enter ROOT WORLD PROG ARGS... (see ServerKind)
r=$1 w=$2; shift 2
mount --bind /tmp "$r/tmp" && mount --rbind /dev "$r/dev" && mount --bind /proc "$r/proc" || exit 127
case $w in /tmp/*) ;; *) mount --bind "$w" "$r$w" || exit 127 ;; esac
# as the kubelet gives a pod its /etc/hosts (mariadb-install-db looks up localhost)
mount --bind /etc/hosts "$r/etc/hosts" || exit 127
d=$PWD; case $d in "$w"*) ;; *) d=/ ;; esac
exec chroot "$r" /bin/sh -c 'cd "$1" 2>/dev/null || cd /; shift; exec "$@"' sh "$d" "$@"
"""
_CHROOT_WRAPPER = """#!/bin/sh
exec unshare --mount --propagation private /bin/sh {enter} {root} {world} {prog} "$@"
"""

SERVER_KIND_NAME = os.environ.get("MYSQL_HOOK_SERVER", "mariadb")

# What the scripts rely on (hooks/scripts/README.md, "Replication rules"), MariaDB
# spelling.  Only the options the rendered my.cnf does not set are appended.
NEEDED_OPTIONS = {
    "log_bin": "binlog",
    "binlog_format": "ROW",
    "log_slave_updates": "ON",
    "gtid_strict_mode": "ON",
    "gtid_domain_id": "0",
    "sync_binlog": "1",
    "innodb_flush_log_at_trx_commit": "1",
    "read_only": "ON",
    "relay_log_recovery": "OFF",
    "skip_slave_start": "ON",
    "slave_net_timeout": "10",
    "rpl_semi_sync_slave_enabled": "ON",
    "rpl_semi_sync_master_wait_point": "AFTER_SYNC",
    "rpl_semi_sync_master_timeout": "4294967295",
    "rpl_semi_sync_master_wait_no_slave": "ON",
    "skip_name_resolve": "ON",
}
# The same for MySQL (the hook's rendered file should set them all).
NEEDED_OPTIONS_MYSQL = {
    "log_bin": "binlog",
    "gtid_mode": "ON",
    "enforce_gtid_consistency": "ON",
    "log_replica_updates": "ON",
    "sync_binlog": "1",
    "innodb_flush_log_at_trx_commit": "1",
    "read_only": "ON",
    "super_read_only": "ON",
    "relay_log_recovery": "OFF",
    "skip_replica_start": "ON",
    "replica_net_timeout": "10",
    "skip_name_resolve": "ON",
}

# Deliberately awkward passwords: quotes, backslash, spaces, '#', '$'.
ROOT_PASSWORD = "r00t 'pw\" #$\\x"
REPL_PASSWORD = "re'pl\\ pw#1$"
APP_PASSWORD = "app-pw"
OPERATOR_PASSWORD = "op'er \"ator#$\\1"


def hook_mariadb_cnf(flavor: str = "mariadb") -> str:
    """The my.cnf the hook renders for a cluster of `flavor` (golden fixture)."""
    fixture = HOOK_CNF_FIXTURES[flavor]
    resp = json.loads(fixture.read_text())
    # The option file lives in the content-addressed ConfigMap db-config-<hash>.
    for child in resp["children"]:
        if child.get("kind") == "ConfigMap" and "my.cnf" in child.get("data", {}):
            return child["data"]["my.cnf"]
    raise SetupError(f"no ConfigMap with my.cnf in {fixture}")


def cnf_options(text: str) -> dict[str, str]:
    """[mysqld] options of an option file; '-' and '_' are the same."""
    out, section = {}, None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        m = re.fullmatch(r"\[(.+)\]", line)
        if m:
            section = m.group(1).strip()
            continue
        if section in ("mysqld", "server", "mariadb", "mariadbd"):
            k, _, v = line.partition("=")
            out[k.strip().replace("-", "_")] = v.strip()
    return out


class SetupError(RuntimeError):
    pass


# ------------------------------------------------------------ argv recording
# Every program a script executes is reached through PATH.  The harness puts a
# directory in front of PATH that holds, for every executable name found on
# PATH, a small wrapper that records its command line (the one any
# `ps`, /proc/<pid>/cmdline or process-exec audit log would show) and its
# environment (/proc/<pid>/environ: exec keeps the pid, so the wrapper's is the
# program's) and execs the real program.  Builtins (printf, read, echo) exec
# nothing and are not recorded: they never reach a command line.

_WRAPPER = """#!/bin/bash
if [ -n "${ARGV_LOG_DIR:-}" ]; then
  mapfile -t -d '' __envs < /proc/$$/environ
  printf '%s\\0' "${ARGV_LOG_TAG:-}" "$#" {name} "$@" "${#__envs[@]}" "${__envs[@]}" \\
    > "$ARGV_LOG_DIR/$$-$RANDOM$RANDOM" 2>/dev/null
fi
exec {real} "$@"
"""


def make_argv_wrappers(wrap_dir: Path, path: str) -> int:
    """One recording wrapper per executable name on PATH (the first one found
    wins, as for the shell); returns how many."""
    wrap_dir.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    for d in path.split(os.pathsep):
        if not d or not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            real = os.path.join(d, name)
            if name in seen or not re.fullmatch(r"[A-Za-z0-9._+-]+", name):
                continue
            if not (os.path.isfile(real) and os.access(real, os.X_OK)):
                continue
            seen.add(name)
            w = wrap_dir / name
            w.write_text(_WRAPPER.replace("{name}", name).replace("{real}", real))
            w.chmod(0o755)
    return len(seen)


def read_argv_log(log_dir: Path, only: set[str] | None = None) -> list[tuple[str, list[str], list[str]]]:
    """(tag, argv, environment) of every recorded exec; `only`: file names to read."""
    out = []
    for f in sorted(log_dir.iterdir()):
        if only is not None and f.name not in only:
            continue
        parts = f.read_bytes().decode("utf-8", "surrogateescape").split("\0")
        tag, n = parts[0], int(parts[1])
        m = int(parts[3 + n])
        out.append((tag, parts[2:3 + n], parts[4 + n:4 + n + m]))
    return out


def secret_forms(secret: str) -> set[str]:
    """The spellings a password takes in the scripts: as is, as a SQL string
    literal's body (sql_quote), as an option-file value."""
    return {secret,
            secret.replace("\\", "\\\\").replace("'", "''"),
            secret.replace("\\", "\\\\").replace('"', '\\"')}


# Tag suffix of script runs that get the passwords in their environment.
ENV_MODE_TAG = " (passwords in env)"

# Statements that carry a password, whatever the password is.
SECRET_SQL = ("IDENTIFIED BY", "MASTER_PASSWORD", "SOURCE_PASSWORD", "PASSWORD(")


def argv_leaks(records: list[tuple[str, list[str], list[str]]], secrets: list[str]) -> list[str]:
    """Human-readable descriptions of every recorded command line that holds
    a secret or a password-carrying statement, and of every environment that
    holds a secret."""
    needles = set().union(*(secret_forms(s) for s in secrets)) | set(SECRET_SQL)
    bad = []
    for tag, argv, env in records:
        line = " ".join(argv)
        hits = sorted(n for n in needles if n and n.upper() in line.upper())
        if hits:
            bad.append(f"{tag}: {argv[0]} holds {hits!r}: {line[:300]!r}")
        # A script run with the passwords in its environment (not as pods run
        # it) has them in its own process and in what runs before common.sh is
        # sourced; ENV_MODE_TAG runs are checked separately.
        for kv in env if ENV_MODE_TAG not in tag else []:
            if any(s in kv for s in secrets):
                bad.append(f"{tag}: {argv[0]} has a password in its environment: {kv.split('=', 1)[0]}")
    return bad


def _die_with_parent():
    """preexec_fn: the server gets SIGKILL when the test process dies, so a
    killed test run leaves no mariadbd behind (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except Exception:  # noqa: BLE001 - best effort, teardown still kills
        pass


def find_mariadbd() -> str | None:
    for cand in (shutil.which("mariadbd"), "/usr/sbin/mariadbd", shutil.which("mysqld"), "/usr/sbin/mysqld"):
        if cand and os.path.exists(cand):
            return cand
    return None


def ensure_mariadb() -> str:
    """Return the mariadbd path, installing Debian's packages if we are root."""
    exe = find_mariadbd()
    if exe and shutil.which("mariadb") and shutil.which("mariadb-install-db"):
        return exe
    if os.geteuid() != 0:
        raise SetupError(
            "MariaDB server not found (mariadbd, mariadb, mariadb-install-db) and not root: "
            "install it with `apt-get install -y --no-install-recommends mariadb-server mariadb-client`"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "--no-install-recommends", "mariadb-server", "mariadb-client"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, text=True)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SetupError("apt-get install mariadb-server failed:\n" + r.stdout[-2000:] + r.stderr[-2000:])
    exe = find_mariadbd()
    if not exe:
        raise SetupError("mariadbd still missing after apt-get install")
    return exe


_PORTS_GIVEN: set[int] = set()   # handed out in this run, not yet bound


def free_port() -> int:
    """A free port below the ephemeral range: a port from the ephemeral range
    can be taken by any outgoing connection (our own clients included) between
    this call and the server's bind, seconds later once init.sh ran."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(200):
        port = random.randrange(10000, max(low, 10001))
        if port in _PORTS_GIVEN:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            _PORTS_GIVEN.add(port)
            return port
    raise SetupError("no free TCP port below the ephemeral range")


def secret_file(path: Path, value: str) -> Path:
    path.write_text(value)
    path.chmod(0o600)
    return path


def client_cnf(path: Path, user: str, password: str) -> Path:
    pw = password.replace("\\", "\\\\").replace('"', '\\"')
    path.write_text(f'[client]\nuser={user}\npassword="{pw}"\n')
    path.chmod(0o600)
    return path


class Server:
    def __init__(self, world: "World", name: str, tag: str = ""):
        self.world = world
        self.name = name
        self.base = world.root / tag / name if tag else world.root / name
        self.datadir = self.base / "data"
        self.confdir = self.base / "conf.d"
        self.sock = self.base / "mysqld.sock"
        self.cnf = self.base / "server.cnf"
        self.hook_cnf = self.base / "my.cnf"
        self.tmpdir = self.base / "tmp"   # a pod's private /tmp (servers clean #sql* files there)
        self.errlog = self.base / "error.log"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        # Made without the operator account (root@'%'): the harness logs in as root.
        self.legacy = False

    # -- lifecycle -------------------------------------------------------
    def create(self):
        """Empty data dir and conf.d; the option files init.sh and the server read."""
        self.base.mkdir(parents=True)
        os.chmod(self.base.parent, 0o755)
        self.confdir.mkdir()
        self.tmpdir.mkdir()
        self.hook_cnf.write_text(
            self.world.hook_cnf_text
            + "\n# tests/scripts: test-local plumbing\n[mysqld]\n"
            f"datadir = {self.datadir}\n"
            f"socket = {self.sock}\n"
            f"port = {self.port}\n"
            "bind_address = 127.0.0.1\n"
            f"tmpdir = {self.tmpdir}\n"
            f"pid_file = {self.base / 'mysqld.pid'}\n"
            f"log_error = {self.errlog}\n"
            "innodb_buffer_pool_size = 64M\n"
            + ("innodb_redo_log_capacity = 16M\n"
               # X Protocol would listen on 33060 in every server; import/export
               # files only in the server's own directory
               "mysqlx = OFF\n"
               if self.world.kind.mysql else "innodb_log_file_size = 16M\n")
            + "performance_schema = OFF\n"
        )
        self.cnf.write_text(f"!includedir {self.confdir}\n")

    def init_env(self) -> dict[str, str]:
        """Env of the init container, for hooks/scripts/init.sh."""
        return {"POD_NAME": self.name, "CONF_DIR": str(self.confdir), "DATA_DIR": str(self.datadir),
                "TMPDIR": str(self.tmpdir),
                "MY_CNF": str(self.hook_cnf), "SERVER_DEFAULTS_FILE": str(self.cnf)}

    def initialize(self, pods: str = "", **env) -> "ScriptResult":
        """Run init.sh as the init container would (the server must be stopped
        for a first initialization)."""
        r = run_script("init.sh", self.world, {"PODS": pods, **self.init_env(), **env})
        if r.rc != 0 or r.json.get("result") != "initialized":
            raise SetupError(f"{self.name}: init.sh failed: {r}\n{self.tail_log()}")
        return r

    def start(self, timeout: float = 180):
        """Start the server and wait until it answers. The wait is generous: in
        CI five suites and a real node share two cores, and a first start of
        MySQL 9.7 after its initialization is slow; no test measures it."""
        assert self.proc is None or self.proc.poll() is not None
        args = [self.world.kind.server, f"--defaults-file={self.cnf}"]
        if os.geteuid() == 0:
            args.append("--user=root")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=_die_with_parent)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SetupError(f"{self.name}: {self.world.kind.server} exited {self.proc.returncode}:\n"
                                 + self.tail_log())
            try:
                self.query("SELECT 1")
                return
            except subprocess.CalledProcessError as e:
                # "ERROR 1045", not "1045": a port such as 11045 in "Can't
                # connect to ... 127.0.0.1:11045" failed a slow start as a refusal.
                if "ERROR 1045" in (e.stderr or ""):
                    raise SetupError(f"{self.name}: {e.stderr}") from e
                time.sleep(0.2)
        raise SetupError(f"{self.name}: not ready after {timeout}s\n" + self.tail_log())

    def kill(self):
        """SIGKILL: a crash, nothing flushed beyond what is durable."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)   # a frozen server must die too
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)

    def freeze(self):
        """SIGSTOP: the server hangs (a frozen node); connects time out."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)

    def thaw(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def set_extra_cnf(self, text: str):
        """Test-only server options, read after the hook's file (conf.d is read
        in name order): takes effect at the next start."""
        (self.confdir / "99-test.cnf").write_text("[mysqld]\n" + text)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail_log(self, n: int = 40) -> str:
        try:
            return "\n".join(self.errlog.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no error log)"

    # -- SQL -------------------------------------------------------------
    def client_args(self, user: str = "root") -> list[str]:
        admin = self.world.cnf_root if self.legacy else self.world.cnf_admin
        cnf = admin if user == "root" else self.world.cnf_app
        return [self.world.kind.client, f"--defaults-extra-file={cnf}", "--protocol=TCP", "-h", "127.0.0.1",
                "-P", str(self.port), "--connect-timeout=5", "-N", "-B"]

    def query(self, q: str, user: str = "root", timeout: float = 60) -> list[list[str]]:
        r = subprocess.run(self.client_args(user) + ["-e", q], capture_output=True, text=True, timeout=timeout,
                           errors="surrogateescape")
        if r.returncode != 0:
            raise subprocess.CalledProcessError(r.returncode, q, r.stdout, r.stderr)
        return [line.split("\t") for line in r.stdout.splitlines()]

    def value(self, q: str, user: str = "root"):
        rows = self.query(q, user)
        return rows[0][0] if rows else None

    def socket_query(self, q: str) -> str:
        """Over the unix socket as root without password (only before setup)."""
        r = subprocess.run([self.world.kind.client, "--no-defaults", "-uroot", f"--socket={self.sock}", "-N", "-B",
                            "-e", q],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise SetupError(f"{self.name}: {q}: {r.stderr}")
        return r.stdout

    def read_only(self) -> bool:
        return self.value("SELECT @@global.read_only") == "1"

    def replica_status(self) -> dict[str, str]:
        """SHOW SLAVE STATUS (MariaDB) or SHOW REPLICA STATUS (MySQL), with
        MariaDB's field names for both (Source_* -> Master_*, Replica_* -> Slave_*)."""
        args = [a for a in self.client_args() if a != "-N"]
        stmt = "SHOW REPLICA STATUS" if self.world.kind.mysql else "SHOW SLAVE STATUS"
        out = subprocess.run(args + ["-E", "-e", stmt], capture_output=True,
                             text=True, timeout=30, check=True).stdout
        st = {}
        for line in out.splitlines():
            if ":" in line and not line.startswith("*"):
                k, _, v = line.partition(":")
                k = k.strip().replace("Source", "Master").replace("Replica", "Slave")
                st[k] = v.strip()
        return st

    def gtid_position(self) -> str:
        """What the server has executed: @@gtid_executed (MySQL, one line) or
        @@gtid_binlog_pos (MariaDB)."""
        if self.world.kind.mysql:
            return (self.value("SELECT @@global.gtid_executed") or "").replace("\\n", "").replace("\n", "")
        return self.value("SELECT @@gtid_binlog_pos") or ""

    def wait_gtid(self, pos: str, timeout: float) -> bool:
        """Until this server has executed `pos` (at most `timeout` s)."""
        if self.world.kind.mysql:
            q = f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{pos}', {int(timeout)})"
        else:
            q = f"SELECT MASTER_GTID_WAIT('{pos}', {int(timeout)})"
        return self.value(q) == "0"

    def replicating_from(self, other: "Server") -> bool:
        st = self.replica_status()
        return (st.get("Master_Port") == str(other.port) and st.get("Slave_IO_Running") == "Yes"
                and st.get("Slave_SQL_Running") == "Yes")

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


class World:
    """A temp directory with any number of servers."""

    def __init__(self):
        self.kind = ServerKind(SERVER_KIND_NAME)
        if self.kind.root is None:
            ensure_mariadb()
        # The hook's secure_file_priv for MariaDB is the pod's empty directory
        # /var/lib/mysql-files (MySQL's is NULL): the servers get the same, empty.
        files = Path("/var/lib/mysql-files") if self.kind.root is None else self.kind.root / "var/lib/mysql-files"
        files.mkdir(parents=True, exist_ok=True)
        self.root = Path(tempfile.mkdtemp(prefix="hookdb-"))
        os.chmod(self.root, 0o755)
        # The harness's own administrative login over TCP: the operator account
        # (root is local only); cnf_root for servers made without it (legacy).
        self.cnf_admin = client_cnf(self.root / "operator.cnf", "mysqlhook", OPERATOR_PASSWORD)
        self.cnf_root = client_cnf(self.root / "root.cnf", "root", ROOT_PASSWORD)
        # The credentials Secret as pods mount it: one file per key.
        self.root_password_file = secret_file(self.root / "root-password", ROOT_PASSWORD)
        self.repl_password_file = secret_file(self.root / "replication-password", REPL_PASSWORD)
        self.operator_password_file = secret_file(self.root / "operator-password", OPERATOR_PASSWORD)
        self.cnf_app = client_cnf(self.root / "app.cnf", "app", APP_PASSWORD)
        self.servers: list[Server] = []
        # A server from a root file system: its programs come first on PATH, for
        # the scripts and for the harness itself.
        if self.kind.root is not None:
            kind_bin = self.root / "server-bin"
            self.kind.make_wrappers(kind_bin, self.root)
            os.environ["PATH"] = f"{kind_bin}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
        # every exec of every script goes through a recording wrapper
        self.argv_log = self.root / "argv-log"
        self.argv_log.mkdir()
        self.wrap_dir = self.root / "argv-wrappers"
        self.wrapped = make_argv_wrappers(self.wrap_dir, os.environ.get("PATH", "/usr/bin:/bin"))
        rendered = hook_mariadb_cnf(self.kind.flavor)
        have = cnf_options(rendered)
        needed = NEEDED_OPTIONS_MYSQL if self.kind.mysql else NEEDED_OPTIONS
        self.added_options = {k: v for k, v in needed.items() if k not in have}
        self.hook_cnf_text = rendered
        if self.added_options:
            self.hook_cnf_text += (
                "\n# tests/scripts: options the scripts need that the hook's my.cnf lacks\n[mysqld]\n"
                + "".join(f"{k} = {v}\n" for k, v in self.added_options.items()))

    def script_path(self) -> str:
        """PATH for the scripts: the recording wrappers first."""
        return f"{self.wrap_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"

    def argv_env(self, tag: str) -> dict[str, str]:
        return {"PATH": self.script_path(), "ARGV_LOG_DIR": str(self.argv_log), "ARGV_LOG_TAG": tag}

    def credential_env(self) -> dict[str, str]:
        """The credentials Secret's keys as pods get them: files."""
        return {"MYSQL_ROOT_PASSWORD_FILE": str(self.root_password_file),
                "REPLICATION_PASSWORD_FILE": str(self.repl_password_file),
                "OPERATOR_PASSWORD_FILE": str(self.operator_password_file)}

    def argv_files(self) -> set[str]:
        return {f.name for f in self.argv_log.iterdir()}

    def server(self, name: str, tag: str = "") -> Server:
        s = Server(self, name, tag)
        s.create()
        self.servers.append(s)
        return s

    def close(self):
        for s in self.servers:
            try:
                s.kill()
            except Exception:  # noqa: BLE001 - best effort teardown
                pass
        shutil.rmtree(self.root, ignore_errors=True)


def pods_env(servers: list[Server]) -> str:
    return " ".join(f"{s.name}={s.addr}" for s in servers)


class ScriptResult:
    def __init__(self, proc: subprocess.CompletedProcess, term_log: Path, seconds: float):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.seconds = seconds
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        self.line = lines[-1] if lines else ""
        self.term = term_log.read_text() if term_log.exists() else ""
        try:
            self.json = json.loads(self.line)
        except ValueError:
            self.json = {}

    def __repr__(self):
        return f"rc={self.rc} json={self.line}\n--- stderr ---\n{self.stderr[-4000:]}"


def run_script(name: str, world: World, env: dict[str, str], timeout: float = 300) -> ScriptResult:
    """Run hooks/scripts/<name> the way a Job would: bash, env only, one JSON line.
    A name without `.sh` is a command of the agent (`mysql-hook-agent <name>`),
    which Jobs run the same way."""
    term = Path(tempfile.mkstemp(prefix=f"term-{name}-", dir=world.root)[1])
    term.write_text("")
    full = script_env(name, world, env, term)
    t0 = time.time()
    proc = subprocess.run(script_argv(name), env=full, capture_output=True, text=True, timeout=timeout)
    res = ScriptResult(proc, term, time.time() - t0)
    term.unlink(missing_ok=True)
    # the termination message must be the same single line as stdout's last one
    assert res.term.strip() == res.line, f"termination log differs from stdout: {res.term!r} vs {res.line!r}"
    assert len(res.line.encode()) < 4096
    return res


def script_argv(name: str) -> list[str]:
    """A script through bash, an agent command through the agent binary."""
    return ["bash", str(SCRIPTS / name)] if name.endswith(".sh") else [str(AGENT), name]


def script_env(name: str, world: World, env: dict[str, str], term: Path) -> dict[str, str]:
    """The environment a script or agent command runs with, as in a pod."""
    tag = name + (ENV_MODE_TAG if env.get("MYSQL_ROOT_PASSWORD") else "")
    full = {
        **world.argv_env(tag),
        "HOME": str(world.root),
        "TMPDIR": str(world.root),
        "FLAVOR": world.kind.flavor,
        # as pods get them: files of the credentials Secret, never the environment
        **world.credential_env(),
        "TERMINATION_LOG": str(term),
        # the sidecar: the scripts it runs, and its probe port (any free one)
        "SCRIPTS_DIR": str(SCRIPTS),
        "AGENT_LISTEN": "127.0.0.1:0",
        # the scripts call the agent for what was ported (common.sh `fence`); in
        # a pod it is installed beside them
        "AGENT_BIN": str(AGENT),
    }
    full.update(env)
    return full


class Writer(threading.Thread):
    """Inserts numbered rows, autocommit, one client process per INSERT; a row
    counts as acknowledged only when its INSERT returned OK (exit status 0)."""

    def __init__(self, target: Server | callable, start: int, label: str = "w", stop_on_error: bool = True,
                 max_rows: int = 100000, max_seconds: float = 60):
        super().__init__(daemon=True)
        self.target = target
        self.n = start
        self.label = label
        self.stop_on_error = stop_on_error
        self.max_rows = max_rows
        self.max_seconds = max_seconds
        self.acked: list[int] = []
        self.acked_by: dict[int, int] = {}   # n -> port of the server that said OK
        self.errors = 0
        self.stop_flag = threading.Event()

    def run(self):
        t_end = time.time() + self.max_seconds
        while not self.stop_flag.is_set() and time.time() < t_end and len(self.acked) < self.max_rows:
            srv = self.target() if callable(self.target) else self.target
            n = self.n
            q = (f"INSERT INTO hook.t (n, writer, sid, ts) VALUES ({n}, '{self.label}', @@server_id, NOW(6))")
            try:
                r = subprocess.run(srv.client_args("app") + ["-e", q], capture_output=True, text=True, timeout=120)
                ok = r.returncode == 0
            except subprocess.TimeoutExpired:
                ok = False
            if ok:
                self.acked.append(n)
                self.acked_by[n] = srv.port
                self.n += 1
            else:
                self.errors += 1
                self.n += 1   # never reuse a number that may have been committed
                if self.stop_on_error:
                    return
                time.sleep(0.01)

    def stop(self):
        self.stop_flag.set()
        self.join(180)


class Session:
    """One client connection kept open (a `mariadb` process fed through stdin):
    holds locks, runs statements that block.  Without `force` the client stops
    at the first error, so a marker SELECT after a write is printed only when
    the write returned OK."""

    def __init__(self, srv: Server, user: str = "root", force: bool = False):
        args = srv.client_args(user) + ["-n"] + (["--force"] if force else [])
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        self.out: list[str] = []
        self.err: list[str] = []
        for f, acc in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._read, args=(f, acc), daemon=True).start()

    @staticmethod
    def _read(f, acc):
        for line in f:
            acc.append(line.rstrip("\n"))

    def send(self, sql: str):
        self.proc.stdin.write(sql + "\n")
        self.proc.stdin.flush()

    def wait_output(self, text: str, timeout: float = 30) -> bool:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(text in line for line in self.out):
                return True
            if self.proc.poll() is not None:
                time.sleep(0.1)
                return any(text in line for line in self.out)
            time.sleep(0.05)
        return False

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def wait_for(cond, timeout: float = 30, interval: float = 0.05, what: str = "condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Cluster:
    def __init__(self, world: World, tag: str, n: int = 3, extra_cnf: str = "", legacy: bool = False):
        """legacy: the servers are made as before the operator account (root@'%',
        no mysqlhook), and the scripts run without OPERATOR_PASSWORD unless a
        test passes it."""
        self.world = world
        self.tag = tag
        self.legacy = legacy
        self.world_root_password = ROOT_PASSWORD
        self.probe_seconds: list[float] = []
        self.servers = [world.server(f"db-{i}", tag) for i in range(n)]
        for s in self.servers:
            s.legacy = legacy
        self.pods = pods_env(self.servers)
        init_env = {"OPERATOR_PASSWORD_FILE": ""} if legacy else {}
        # init containers of different pods run concurrently
        with concurrent.futures.ThreadPoolExecutor(len(self.servers)) as ex:
            for r in ex.map(lambda s: s.initialize(self.pods, **init_env), self.servers):
                assert r.json["created"] is True, r
        # sequentially, from this thread: a server gets SIGKILL when the thread
        # that started it ends (PR_SET_PDEATHSIG, dbcluster._die_with_parent)
        for s in self.servers:
            if extra_cnf:
                s.set_extra_cnf(extra_cnf)
            s.start()

    def __getitem__(self, name: str) -> Server:
        return next(s for s in self.servers if s.name == name)

    def add(self, name: str) -> Server:
        """A new member (a scale-up): an empty server set up by init.sh and
        started; PODS names it from now on."""
        s = self.world.server(name, self.tag)
        self.servers.append(s)
        self.pods = pods_env(self.servers)
        s.initialize(self.pods)
        s.start()
        return s

    def remove(self, name: str):
        """A member leaves (a scale-down): stopped, out of PODS."""
        s = self[name]
        s.stop()
        self.servers.remove(s)
        self.pods = pods_env(self.servers)

    def wipe(self, name: str):
        """The member's volume is deleted: stopped, data dir emptied, set up
        again by init.sh (a new, empty server under the same name) and started."""
        s = self[name]
        s.kill()
        shutil.rmtree(s.datadir)
        s.initialize(self.pods)
        s.start()

    def run(self, script: str, **env) -> "ScriptResult":  # noqa: F821
        env.setdefault("PODS", self.pods)
        if self.legacy:
            env.setdefault("OPERATOR_PASSWORD_FILE", "")
        return run_script(script, self.world, {k: str(v) for k, v in env.items()})

    def spawn(self, command: str, **env) -> subprocess.Popen:
        """An agent command (the sidecar) left running, its output in a pipe:
        the caller stops it (terminate) and reads what it printed."""
        env.setdefault("PODS", self.pods)
        term = Path(tempfile.mkstemp(prefix=f"term-{command}-", dir=self.world.root)[1])
        full = script_env(command, self.world, {k: str(v) for k, v in env.items()}, term)
        return subprocess.Popen(script_argv(command), env=full, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def bootstrap(self):
        """The bootstrap Job's script, then the harness's schema and account on
        db-0, and every replica has applied them before this returns: a test that
        reads a replica's position next compares it with nothing still in flight
        (the operator-user test read 0-1-7 and then 0-1-8 from a replica still
        applying these under load, 1 run in 25)."""
        r = self.run("bootstrap.sh", PRIMARY="")
        assert r.rc == 0 and r.json["result"] == "bootstrapped", r
        p = self["db-0"]
        p.query("CREATE DATABASE hook;"
                "CREATE TABLE hook.t (n INT PRIMARY KEY, writer VARCHAR(8), sid INT, ts DATETIME(6));"
                f"CREATE USER 'app'@'%' IDENTIFIED BY '{APP_PASSWORD}';"
                "GRANT SELECT, INSERT, UPDATE, DELETE ON hook.* TO 'app'@'%'")
        self.wait_synced(p)
        return r

    def running(self):
        return [s for s in self.servers if s.running]

    def writable(self):
        return [s.name for s in self.running() if not s.read_only()]

    def source_of(self, s: Server):
        st = s.replica_status()
        if not st.get("Master_Port"):
            return None
        port = int(st["Master_Port"])
        return next((x.name for x in self.servers if x.port == port), f"?{port}")

    def wait_synced(self, primary: Server, timeout: float = 60):
        """Every running replica has executed the primary's binlog position."""
        pos = primary.gtid_position()
        for s in self.running():
            if s is primary or self.source_of(s) != primary.name:
                continue
            assert s.wait_gtid(pos, timeout), f"{s.name} did not reach {pos}: {s.replica_status()}"

    def state(self):
        """What 'same end state' compares: who is writable, who follows whom,
        the GTID positions and the data."""
        out = {}
        for s in self.running():
            st = s.replica_status()
            out[s.name] = (
                s.read_only(),
                self.source_of(s),
                st.get("Slave_IO_Running"),
                st.get("Slave_SQL_Running"),
                s.gtid_position(),
                s.value("SELECT COUNT(*) FROM hook.t") if s.value(
                    "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='hook' AND table_name='t'") == "1" else None,
            )
        return out

    def close(self):
        for s in self.servers:
            s.kill()



def rows(s: Server) -> set[int]:
    return {int(r[0]) for r in s.query("SELECT n FROM hook.t")}


def content_hash(s: Server, table: str) -> str:
    data = s.query(f"SELECT * FROM {table} ORDER BY 1")
    return hashlib.sha256(repr(data).encode()).hexdigest()


def kill_primary_mid_stream(c: Cluster, min_acked: int = 60) -> Writer:
    """Writer on db-0; SIGKILL db-0 while INSERTs are in flight."""
    w = Writer(c["db-0"], 1, "w", stop_on_error=True, max_seconds=60)
    w.start()
    deadline = time.time() + 30
    while len(w.acked) < min_acked and time.time() < deadline:
        time.sleep(0.05)
    assert len(w.acked) >= min_acked, "writer made no progress"
    c["db-0"].kill()
    w.join(60)
    return w



def probe(c: "Cluster", mode: str, pod: str, primary_file, rebuild_marker=None, **extra) -> tuple[int, str]:
    pw_file = c.world.root / c.tag / "probe-root-password"
    pw_file.parent.mkdir(parents=True, exist_ok=True)
    pw_file.write_text(c.world_root_password)
    # root through the server's own socket, as in a pod
    env = {**c.world.argv_env("probe"), "FLAVOR": c.world.kind.flavor, "POD_NAME": pod,
           "PODS": c.pods, "PRIMARY_FILE": str(primary_file), "TMPDIR": str(c.world.root),
           "MYSQL_ROOT_PASSWORD_FILE": str(pw_file), "SERVER_SOCKET": str(c[pod].sock)}
    if not c.legacy:
        env.update(OPERATOR_PASSWORD_FILE=str(c.world.operator_password_file))
    if rebuild_marker is not None:
        env["REBUILD_MARKER"] = str(rebuild_marker)
    env.update({k: str(v) for k, v in extra.items()})
    t0 = time.time()
    r = subprocess.run([str(AGENT), "probe", mode], env=env, capture_output=True, text=True, timeout=30)
    c.probe_seconds.append(time.time() - t0)
    assert r.stderr == "", r.stderr
    return r.returncode, r.stdout.strip()



#!/usr/bin/env python3
"""Container images for the real node, built on this machine (no registry is reachable).

Three images, each written as a docker-archive tar (``manifest.json``, a config JSON
whose ``rootfs.diff_ids`` hold the layers' sha256, the layer tars) that
``ctr -n k8s.io images import`` loads into the test's containerd, tagged with
exactly the references our pod templates name:

* ``docker.io/library/mariadb:<version>``: Debian bookworm's MariaDB packages in a
  ``mmdebstrap --variant=minbase`` root file system, against this machine's Debian
  mirror list (``/etc/apt/sources.list.d/debian.sources``), made to behave like the
  official ``mariadb`` image where our pods depend on it (see ``MARIADB_CUSTOMIZE``
  and "How the real node's images differ" in docs/testing.md).
* the hook's image (default ``localhost/mysql-hook:test``): the cargo-built
  ``mysql-hook`` binary at ``/usr/local/bin/mysql-hook`` plus the shared libraries it
  links (copied from this Debian host, as ``gcr.io/distroless/cc-debian12`` ships
  them), user 65532 like the published image.
* ``localhost/mysqld-exporter:<version>-debian``: Debian's
  ``prometheus-mysqld-exporter`` binary (installed on this host) and the libraries
  it links, user 65534, as the ``spec.monitoring.exporter.image`` of the real-server
  loop's monitoring scenario; upstream's image holds the same program, newer.
* ``ghcr.io/metacontroller/metacontroller:<METACONTROLLER_VERSION>``: the static
  ``metacontroller`` binary built from ``../shared/metacontroller``, for the install
  test (``tests/k8s/install.py``), which runs Metacontroller in the cluster.
* ``registry.k8s.io/pause:<PAUSE_VERSION>``: the ``pause`` binary that
  ``build-components.sh --node`` compiles from Kubernetes' own ``pause.c``.

Every tar is cached in ``${MYSQL_HOOK_CACHE:-~/.cache/mysql-hook}/images/`` under a
name holding a hash of its recipe (for MariaDB: this module's recipe text and the
mirror list; for the others: the binary's content), so a warm run builds nothing.

    python3 tests/k8s/images.py mariadb          # build (or find) the MariaDB image
    python3 tests/k8s/images.py mariadb --release-only   # ... of bookworm's release suite
    python3 tests/k8s/images.py server mysql-9.7    # MySQL 9.7 (sid) or mariadb-11.8 (trixie)
    python3 tests/k8s/images.py rootfs mysql-9.7    # ... unpacked, for the host's chroot tests
    python3 tests/k8s/images.py hook BIN [REF]   # the hook's image from a binary
    python3 tests/k8s/images.py pause BIN        # the pause image
    python3 tests/k8s/images.py exporter         # Debian's mysqld_exporter as an image
    python3 tests/k8s/images.py sysbench         # Debian's sysbench (the loop's --sysbench client)
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("MYSQL_HOOK_CACHE") or Path.home() / ".cache/mysql-hook") / "images"
DEBIAN_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
HOOK_IMAGE = "localhost/mysql-hook:test"
# Bump when anything below changes what an image holds.
IMAGE_RECIPE = "2"


def log(msg: str) -> None:
    sys.stderr.write(f"images: {msg}\n")
    sys.stderr.flush()


class ImageError(Exception):
    """An image could not be built."""


@dataclass(frozen=True)
class Image:
    ref: str      # the fully qualified reference the image is tagged with
    tar: Path     # its docker-archive tar
    note: str = ""  # e.g. the MariaDB package version


# ----------------------------------------------------------------------- archives


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_docker_archive(out: Path, ref: str, layers: list[Path], config: dict) -> None:
    """A docker-archive tar (what `docker save` writes) of the given layer tars."""
    diff_ids = [_sha256_file(l) for l in layers]
    cfg = dict(config)
    cfg.setdefault("architecture", "amd64")
    cfg.setdefault("os", "linux")
    cfg["created"] = "1970-01-01T00:00:00Z"
    cfg["rootfs"] = {"type": "layers", "diff_ids": [f"sha256:{d}" for d in diff_ids]}
    cfg_bytes = json.dumps(cfg, sort_keys=True).encode()
    cfg_name = hashlib.sha256(cfg_bytes).hexdigest() + ".json"
    manifest = [{"Config": cfg_name, "RepoTags": [ref], "Layers": [f"{d}/layer.tar" for d in diff_ids]}]
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as t:
        def add_bytes(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            t.addfile(info, io.BytesIO(data))
        for d, layer in zip(diff_ids, layers):
            t.add(layer, arcname=f"{d}/layer.tar", recursive=False)
        add_bytes(cfg_name, cfg_bytes)
        add_bytes("manifest.json", json.dumps(manifest).encode())
    os.replace(tmp, out)


class _Layer:
    """A layer tar written file by file (owner root unless told otherwise)."""

    def __init__(self, path: Path):
        self.tar = tarfile.open(path, "w", format=tarfile.PAX_FORMAT)
        self.dirs: set[str] = set()

    def _parents(self, name: str) -> None:
        parts = name.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            self.dir("/".join(parts[:i]))

    def dir(self, name: str, mode: int = 0o755, owner: int = 0) -> None:
        if name in self.dirs:
            return
        self._parents(name)
        self.dirs.add(name)
        info = tarfile.TarInfo(name)
        info.type = tarfile.DIRTYPE
        info.mode = mode
        info.uid = info.gid = owner
        self.tar.addfile(info)

    def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self._parents(name)
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = mode
        self.tar.addfile(info, io.BytesIO(data))

    def symlink(self, name: str, target: str) -> None:
        self._parents(name)
        info = tarfile.TarInfo(name)
        info.type = tarfile.SYMTYPE
        info.linkname = target
        self.tar.addfile(info)

    def close(self) -> None:
        self.tar.close()


def _cached(name: str) -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    return CACHE / name


class _Lock:
    """Serialises builds of one image between processes."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> "_Lock":
        CACHE.mkdir(parents=True, exist_ok=True)
        self.f = open(self.path, "w")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


# ------------------------------------------------------------------------ mariadb

# Runs before the packages are installed: the official image's mysql user and group
# (uid/gid 999), so that mariadb-server's postinst (adduser --system mysql) reuses them.
MARIADB_ESSENTIAL = (
    # passwd (useradd) is not installed yet at this stage: write the entries directly
    # (base-passwd made the files; passwd's postinst later creates the shadow entries).
    'echo "mysql:x:999:" >> "$1/etc/group" && '
    'echo "mysql:x:999:999:MySQL Server:/var/lib/mysql:/usr/sbin/nologin" >> "$1/etc/passwd"'
)
# Runs after the packages are installed: what the official image's Dockerfile does
# to the packages' defaults (github.com/MariaDB/mariadb-docker, 10.11/Dockerfile):
# comment out bind-address/log/user so our my.cnf in /etc/mysql/conf.d is not
# overridden by /etc/mysql/mariadb.conf.d (read after it), skip-name-resolve and
# no host cache, an empty /var/lib/mysql (Debian's postinst initializes one; the
# official image has none), /run/mysqld owned by mysql, mode 1777.
MARIADB_CUSTOMIZE = r"""set -e
find "$1/etc/mysql/" -name '*.cnf' -print0 | xargs -0 grep -lZE '^(bind-address|log|user\s)' |
  xargs -r -0 sed -Ei 's/^(bind-address|log|user\s)/#&/'
printf '[mariadb]\nhost-cache-size=0\nskip-name-resolve\n' > "$1/etc/mysql/mariadb.conf.d/05-skipcache.cnf"
rm -rf "$1/var/lib/mysql"
mkdir -p "$1/var/lib/mysql"
chown 999:999 "$1/var/lib/mysql"
chroot "$1" dpkg-query -W -f='${Version}' mariadb-server > "$1/.server-package-version"
rm -rf "$1/var/cache/apt/"* "$1/var/lib/apt/lists/"* "$1/var/log/"*.log
test "$(chroot "$1" id -u mysql):$(chroot "$1" id -g mysql)" = 999:999
"""

MARIADB_PACKAGES = ["mariadb-server", "mariadb-client", "mariadb-backup", "procps", "tzdata"]
MMDEBSTRAP_ARGS = [
    "--variant=minbase", "--mode=root", "--format=tar",
    "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/doc/*",
    "--dpkgopt=path-include=/usr/share/doc/*/copyright", "--dpkgopt=path-exclude=/usr/share/locale/*",
    "--dpkgopt=path-exclude=/usr/share/info/*",
    "--aptopt=Acquire::Languages \"none\"",
]


def _main_suite_only(sources: str) -> str:
    """The first deb822 stanza of `sources` with only the release suite (bookworm):
    no -updates, no -security, so its MariaDB is the release's, usually older."""
    stanza = sources.strip().split("\n\n")[0]
    out = []
    for line in stanza.splitlines():
        if line.startswith("Suites:"):
            line = "Suites: bookworm"
        out.append(line)
    return "\n".join(out) + "\n"


def _archive_sources(suite: str) -> str:
    """A deb822 source of Debian's archive for `suite` (trixie, sid): the servers the
    host's bookworm does not ship. Never installed on the host, only into an image."""
    return ("Types: deb\nURIs: http://deb.debian.org/debian\n"
            f"Suites: {suite}\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")


# MySQL from sid: mysql-server-core creates no user (the full mysql-server package's
# maintainer scripts would), so the official image's mysql user (999) is written
# directly, as for MariaDB.
MYSQL_ESSENTIAL = MARIADB_ESSENTIAL
# What the official `mysql` image (Oracle Linux, docker-library/mysql) provides that
# our pods rely on: /etc/my.cnf with the data directory, the socket, a
# secure-file-priv directory (without one that exists mysqld 9.x does not start) and
# `!includedir /etc/mysql/conf.d/`, where init.sh writes our option files; an empty
# /var/lib/mysql; /var/run/mysqld (mysql, 1777); /var/lib/mysql-files (mysql, 0700).
# `host-cache-size=0`, as the official 8.4 and 9.x images write it: `skip-host-cache`,
# which an earlier stand-in copied from the 8.0 image, was removed in MySQL 8.3, and
# 9.7.4 refuses to start with it (the first pod of the real-server loop on MySQL
# failed in init.sh's `--initialize-insecure`: "unknown option '--skip-host-cache'").
MYSQL_CUSTOMIZE = r"""set -e
cat > "$1/etc/my.cnf" <<'CNF'
[mysqld]
host-cache-size=0
skip-name-resolve
datadir=/var/lib/mysql
socket=/var/run/mysqld/mysqld.sock
secure-file-priv=/var/lib/mysql-files
pid-file=/var/run/mysqld/mysqld.pid
[client]
socket=/var/run/mysqld/mysqld.sock
!includedir /etc/mysql/conf.d/
CNF
mkdir -p "$1/etc/mysql/conf.d" "$1/var/lib/mysql" "$1/var/lib/mysql-files"
chown 999:999 "$1/var/lib/mysql" "$1/var/lib/mysql-files"
chmod 0700 "$1/var/lib/mysql-files"
chroot "$1" dpkg-query -W -f='${Version}' mysql-server-core > "$1/.server-package-version"
rm -rf "$1/var/cache/apt/"* "$1/var/lib/apt/lists/"* "$1/var/log/"*.log
test "$(chroot "$1" id -u mysql):$(chroot "$1" id -g mysql)" = 999:999
"""
MYSQL_PACKAGES = ["mysql-server-core", "mysql-client-core", "procps", "tzdata", "ca-certificates"]


@dataclass(frozen=True)
class ServerRecipe:
    """How one server image is made: a Debian suite's packages in a minbase root
    file system, made to behave like the official image of its flavor."""
    name: str           # cache stem and command-line name
    flavor: str         # mysql or mariadb: the repository the image is tagged under
    suite: str
    packages: tuple[str, ...]
    essential: str
    customize: str
    version_package: str
    sources: str = ""   # empty: this machine's own mirror list (bookworm)
    expired_release: bool = False   # sid's Release file in the archive has expired


SERVERS = {
    # Bookworm's MariaDB 10.11 from this machine's mirrors (-updates, -security).
    "mariadb": ServerRecipe("mariadb", "mariadb", "bookworm", tuple(MARIADB_PACKAGES), MARIADB_ESSENTIAL,
                            MARIADB_CUSTOMIZE, "mariadb-server"),
    # MariaDB 11.8 LTS, trixie's.
    "mariadb-11.8": ServerRecipe("mariadb-11.8", "mariadb", "trixie", tuple(MARIADB_PACKAGES), MARIADB_ESSENTIAL,
                                 MARIADB_CUSTOMIZE, "mariadb-server", _archive_sources("trixie")),
    # Oracle's MySQL 9.7 LTS, sid's (source package mysql-9.7).
    "mysql-9.7": ServerRecipe("mysql-9.7", "mysql", "sid", tuple(MYSQL_PACKAGES), MYSQL_ESSENTIAL,
                              MYSQL_CUSTOMIZE, "mysql-server-core", _archive_sources("sid"), expired_release=True),
}


def _mmdebstrap(work: Path, name: str, suite: str, sources: str, packages: tuple[str, ...] | list[str],
                customize: str, extra: list[str], version_file: str) -> tuple[Path, str]:
    """`mmdebstrap` of `packages` from `suite` (deb822 `sources`) into work/rootfs.tar
    with MMDEBSTRAP_ARGS, `extra` and the `customize` hook, which writes the package
    version into `version_file` at the root; returns the tar and that version."""
    rootfs = work / "rootfs.tar"
    (work / "debian.sources").write_text(sources)
    cmd = ["mmdebstrap", *MMDEBSTRAP_ARGS, *extra, "--include=" + ",".join(packages),
           "--customize-hook=" + customize, suite, str(rootfs), str(work / "debian.sources")]
    log(f"building the {name} image: mmdebstrap --include={','.join(packages)} {suite}")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise ImageError(f"mmdebstrap failed ({proc.returncode}):\n{proc.stdout[-4000:]}")
    with tarfile.open(rootfs) as t:
        member = next((m for m in t if m.name.removeprefix("./") == version_file), None)
        if member is None:
            raise ImageError(f"the {name} rootfs has no {version_file} (customize hook failed?)")
        pkg = t.extractfile(member).read().decode().strip()  # type: ignore[union-attr]
    return rootfs, pkg


def _server_recipe_key(r: ServerRecipe, sources: str) -> str:
    text = json.dumps({"recipe": IMAGE_RECIPE, "name": r.name, "suite": r.suite, "packages": r.packages,
                       "args": MMDEBSTRAP_ARGS, "essential": r.essential, "customize": r.customize,
                       "sources": sources, "expired": r.expired_release}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _upstream_version(pkg_version: str) -> str:
    """1:10.11.19-0+deb12u1 -> 10.11.19."""
    m = re.fullmatch(r"(?:\d+:)?(\d+\.\d+\.\d+)[-+~].*", pkg_version)
    if not m:
        raise ImageError(f"cannot read an upstream version from the package version {pkg_version!r}")
    return m.group(1)


def mariadb_image(release_only: bool = False) -> Image:
    """The MariaDB 10.11 image (built on first use, then cached by recipe hash).

    From every suite of this machine's Debian mirror list (bookworm, -updates,
    -security: the newest MariaDB), or with `release_only` from the release suite
    alone (the MariaDB bookworm shipped with; the version rollout's other version)."""
    if not DEBIAN_SOURCES.exists():
        raise ImageError(f"no {DEBIAN_SOURCES}: the MariaDB image is built against this machine's Debian mirror")
    sources = DEBIAN_SOURCES.read_text()
    if release_only:
        sources = _main_suite_only(sources)
    return _server_image(SERVERS["mariadb"], sources)


def server_image(name: str) -> Image:
    """The server image `name` of SERVERS (mariadb, mariadb-11.8, mysql-9.7)."""
    r = SERVERS.get(name)
    if r is None:
        raise ImageError(f"no server image {name!r}; one of {', '.join(SERVERS)}")
    if r.sources:
        return _server_image(r, r.sources)
    return mariadb_image()


def _server_image(r: ServerRecipe, sources: str) -> Image:
    key = _server_recipe_key(r, sources)
    stem = r.name
    out = _cached(f"{stem}-{key}.tar")
    meta = _cached(f"{stem}-{key}.json")
    with _Lock(_cached(f"{stem}.lock")):
        if out.exists() and meta.exists():
            m = json.loads(meta.read_text())
            return Image(m["ref"], out, m["package"])
        if shutil.which("mmdebstrap") is None:
            raise ImageError(f"mmdebstrap is not installed (apt-get install mmdebstrap); it builds the {r.name} image")
        t0 = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix="mysql-hook-image-", dir=CACHE))
        try:
            extra = ["--aptopt=Acquire::Check-Valid-Until \"false\""] if r.expired_release else []
            rootfs, pkg = _mmdebstrap(work, r.name, r.suite, sources, r.packages, r.customize,
                                      [*extra, "--essential-hook=" + r.essential], ".server-package-version")
            version = _upstream_version(pkg)
            ref = f"docker.io/library/{r.flavor}:{version}"
            server = "mysqld" if r.flavor == "mysql" else "mariadbd"
            config = {"config": {
                "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
                        f"{r.flavor.upper()}_VERSION={pkg}"],
                "Cmd": [server], "ExposedPorts": {"3306/tcp": {}},
                "Volumes": {"/var/lib/mysql": {}},
                "Labels": {"dev.mysqlhook.test.recipe": key,
                           "dev.mysqlhook.test.note": f"local stand-in for the official {r.flavor} image"},
            }}
            # mmdebstrap leaves /run empty (a tmpfs while it runs): a second layer
            # holds the official images' /run/mysqld (mysql, 1777).
            run_layer = work / "run-layer.tar"
            layer = _Layer(run_layer)
            layer.dir("run", 0o755)
            layer.dir("run/mysqld", 0o1777, owner=999)
            layer.close()
            write_docker_archive(out, ref, [rootfs, run_layer], config)
            meta.write_text(json.dumps({"ref": ref, "package": pkg}))
            log(f"{r.name} image {ref} (package {pkg}) built in {time.monotonic() - t0:.0f}s: {out} "
                f"({out.stat().st_size >> 20} MiB)")
            return Image(ref, out, pkg)
        finally:
            shutil.rmtree(work, ignore_errors=True)


def server_rootfs(name: str) -> Path:
    """The root file system of the server image `name`, unpacked into a directory
    next to its tar (once): the script and agent tests run the server's own
    programs in it with chroot, never installing a trixie or sid package on the
    host. Returns the directory."""
    img = server_image(name)
    root = img.tar.with_suffix(".rootfs")
    with _Lock(_cached(f"{img.tar.stem}.rootfs.lock")):
        if (root / ".unpacked").exists():
            return root
        shutil.rmtree(root, ignore_errors=True)
        tmp = root.with_name(root.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with tarfile.open(img.tar) as outer:
            manifest = json.loads(outer.extractfile("manifest.json").read())  # type: ignore[union-attr]
            for layer_name in manifest[0]["Layers"]:
                with tarfile.open(fileobj=outer.extractfile(layer_name)) as layer:  # type: ignore[arg-type]
                    layer.extractall(tmp, filter="fully_trusted")
        (tmp / ".unpacked").write_text(img.ref + "\n")
        os.replace(tmp, root)
        return root


# --------------------------------------------------------------------------- hook


def _linked_libraries(binary: Path) -> list[Path]:
    """The shared libraries (and the dynamic loader) a binary needs, by ldd."""
    proc = subprocess.run(["ldd", str(binary)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0 and "not a dynamic executable" in proc.stdout:
        return []
    libs: list[Path] = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        m = re.match(r"\S+ => (/\S+) \(0x", line) or re.match(r"(/\S+) \(0x", line)
        if m:
            libs.append(Path(m.group(1)))
        elif "not found" in line:
            raise ImageError(f"{binary}: {line}")
    return libs


PASSWD = ("root:x:0:0:root:/root:/sbin/nologin\n"
          "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
          "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")
GROUP = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"


def _binary_layer(layer_path: Path, binary: Path, dest: str, extras: tuple[tuple[Path, str], ...] = ()) -> None:
    """One layer: `binary` (debug info stripped) at `dest`, the shared libraries it
    links (copied from this Debian host, as distroless images ship them), /tmp and
    the users root, nobody and nonroot; and each static binary of `extras` at its
    destination."""
    stripped = layer_path.with_name(Path(dest).name)
    shutil.copy2(binary, stripped)
    subprocess.run(["strip", "--strip-debug", str(stripped)], check=False)
    layer = _Layer(layer_path)
    for extra, extra_dest in extras:
        copy = layer_path.with_name(Path(extra_dest).name)
        shutil.copy2(extra, copy)
        subprocess.run(["strip", "--strip-debug", str(copy)], check=False)
        layer.file(extra_dest.lstrip("/"), copy.read_bytes(), 0o755)
    layer.dir("tmp", 0o1777)
    layer.dir("home/nonroot", 0o700)
    layer.file("etc/passwd", PASSWD.encode())
    layer.file("etc/group", GROUP.encode())
    for lib in _linked_libraries(stripped):
        real = lib.resolve()
        layer.file(real.as_posix().lstrip("/"), real.read_bytes(), 0o755)
        if real != lib:
            layer.symlink(lib.as_posix().lstrip("/"), real.as_posix())
    # Debian's /lib64 is where the loader is looked up; it is a directory here.
    layer.file(dest.lstrip("/"), stripped.read_bytes(), 0o755)
    layer.close()


def _binary_image(binary: Path, ref: str, stem: str, dest: str, config: dict, keep_one: bool,
                  extras: tuple[tuple[Path, str], ...] = ()) -> Image:
    """An image of one binary (see _binary_layer), cached by recipe, reference and
    the binaries' content; `keep_one` drops older tars of the same stem."""
    digest = _sha256_file(binary) + "".join(" " + _sha256_file(e) for e, _ in extras)
    key = hashlib.sha256(f"{IMAGE_RECIPE} {ref} {digest}".encode()).hexdigest()[:16]
    out = _cached(f"{stem}-{key}.tar")
    with _Lock(_cached(f"{stem}.lock")):
        if out.exists():
            return Image(ref, out)
        if keep_one:
            for old in CACHE.glob(f"{stem}-*.tar"):
                old.unlink(missing_ok=True)
        t0 = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix="mysql-hook-image-", dir=CACHE))
        try:
            layer_path = work / "layer.tar"
            _binary_layer(layer_path, binary, dest, extras)
            config = json.loads(json.dumps(config))
            config["config"].setdefault("Labels", {})["dev.mysqlhook.test.binary-sha256"] = digest
            write_docker_archive(out, ref, [layer_path], config)
            log(f"image {ref} built in {time.monotonic() - t0:.1f}s from {binary} ({out.stat().st_size >> 20} MiB)")
            return Image(ref, out)
        finally:
            shutil.rmtree(work, ignore_errors=True)


PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


AGENT_TARGET = "x86_64-unknown-linux-musl"


def static_agent() -> Path:
    """The agent built static (musl), as the Dockerfile builds it: it runs in the
    server images, whatever their C library. `MYSQL_HOOK_AGENT_STATIC` names a
    ready one; otherwise cargo builds it (incrementally) into the target dir."""
    given = os.environ.get("MYSQL_HOOK_AGENT_STATIC")
    if given:
        return Path(given)
    repo = HERE.parent.parent
    log(f"building the static agent: cargo build -p mysql-hook-agent --target {AGENT_TARGET}")
    proc = subprocess.run(["cargo", "build", "--locked", "--quiet", "-p", "mysql-hook-agent", "--target", AGENT_TARGET],
                          cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise ImageError(f"building the static agent failed (rustup target add {AGENT_TARGET}?):\n"
                         f"{proc.stdout[-3000:]}")
    target = Path(os.environ.get("CARGO_TARGET_DIR") or repo / "target")
    return target / AGENT_TARGET / "debug" / "mysql-hook-agent"


def hook_image(binary: Path, ref: str = HOOK_IMAGE, agent: Path | None = None) -> Image:
    """The hook's image: `binary` as /usr/local/bin/mysql-hook and the static agent
    as /usr/local/bin/mysql-hook-agent (beside it, where install-scripts finds it),
    user 65532."""
    config = {"config": {
        "Env": [PATH_ENV, "MYSQL_HOOK_LISTEN=0.0.0.0:8080"],
        "Entrypoint": ["/usr/local/bin/mysql-hook"], "Cmd": ["serve"], "User": "65532:65532",
        "ExposedPorts": {"8080/tcp": {}},
    }}
    agent = agent or static_agent()
    return _binary_image(binary, ref, "mysql-hook", "/usr/local/bin/mysql-hook", config, keep_one=True,
                         extras=((agent, "/usr/local/bin/mysql-hook-agent"),))


def metacontroller_image(binary: Path, version: str) -> Image:
    """ghcr.io/metacontroller/metacontroller:<version> from the static binary that
    build-components.sh builds from ../shared/metacontroller: /usr/bin/metacontroller,
    user 65532, as upstream's image. Upstream's is Alpine with ca-certificates; this
    one has no shell and no CA bundle (in cluster, Metacontroller trusts the API
    server through its ServiceAccount's ca.crt, and our hooks' CA comes from
    endpointConfigs)."""
    config = {"config": {
        "Env": [PATH_ENV], "Cmd": ["/usr/bin/metacontroller"], "User": "65532:65532",
    }}
    return _binary_image(binary, f"ghcr.io/metacontroller/metacontroller:{version}", "metacontroller",
                         "/usr/bin/metacontroller", config, keep_one=True)


EXPORTER_BINARY = Path("/usr/bin/prometheus-mysqld-exporter")


def exporter_image(binary: Path = EXPORTER_BINARY) -> Image:
    """Debian's mysqld_exporter as /bin/mysqld_exporter, the entrypoint and user
    (65534) of upstream's quay.io/prometheus/mysqld-exporter, tagged
    localhost/mysqld-exporter:<its version>-debian."""
    if not binary.exists():
        raise ImageError(f"no {binary}: apt-get install prometheus-mysqld-exporter (the exporter image holds it)")
    out = subprocess.run([str(binary), "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    m = re.search(r"version (\d+\.\d+\.\d+)", out.stdout)
    if not m:
        raise ImageError(f"{binary} --version says no version: {out.stdout[:200]!r}")
    config = {"config": {
        "Env": [PATH_ENV], "Entrypoint": ["/bin/mysqld_exporter"], "User": "65534:65534",
        "ExposedPorts": {"9104/tcp": {}},
    }}
    ref = f"localhost/mysqld-exporter:{m.group(1)}-debian"
    return _binary_image(binary, ref, "mysqld-exporter", "/bin/mysqld_exporter", config, keep_one=True)


# -------------------------------------------------------------------------- sysbench

SYSBENCH_CUSTOMIZE = r"""set -e
chroot "$1" dpkg-query -W -f='${Version}' sysbench > "$1/.sysbench-package-version"
rm -rf "$1/var/cache/apt/"* "$1/var/lib/apt/lists/"* "$1/var/log/"*.log
"""


def sysbench_image() -> Image:
    """Debian bookworm's sysbench (its MariaDB client library, its Lua OLTP tests)
    in a minbase root file system, tagged localhost/sysbench:<version>: the real
    client the loop runs beside its writer with --sysbench (issue 35.3)."""
    if not DEBIAN_SOURCES.exists():
        raise ImageError(f"no {DEBIAN_SOURCES}: the sysbench image is built against this machine's Debian mirror")
    sources = DEBIAN_SOURCES.read_text()
    key = hashlib.sha256(json.dumps({"recipe": IMAGE_RECIPE, "args": MMDEBSTRAP_ARGS, "customize": SYSBENCH_CUSTOMIZE,
                                     "sources": sources}, sort_keys=True).encode()).hexdigest()[:16]
    out, meta = _cached(f"sysbench-{key}.tar"), _cached(f"sysbench-{key}.json")
    with _Lock(_cached("sysbench.lock")):
        if out.exists() and meta.exists():
            m = json.loads(meta.read_text())
            return Image(m["ref"], out, m["package"])
        if shutil.which("mmdebstrap") is None:
            raise ImageError("mmdebstrap is not installed (apt-get install mmdebstrap); it builds the sysbench image")
        t0 = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix="mysql-hook-image-", dir=CACHE))
        try:
            rootfs, pkg = _mmdebstrap(work, "sysbench", "bookworm", sources, ("sysbench", "ca-certificates"),
                                      SYSBENCH_CUSTOMIZE, [], ".sysbench-package-version")
            ref = f"localhost/sysbench:{_upstream_version(pkg)}"
            config = {"config": {"Env": [PATH_ENV], "Cmd": ["sysbench", "--version"]}}
            write_docker_archive(out, ref, [rootfs], config)
            meta.write_text(json.dumps({"ref": ref, "package": pkg}))
            log(f"sysbench image {ref} (package {pkg}) built in {time.monotonic() - t0:.0f}s: {out}")
            return Image(ref, out, pkg)
        finally:
            shutil.rmtree(work, ignore_errors=True)


# -------------------------------------------------------------------------- pause


def pause_image(binary: Path, version: str) -> Image:
    """registry.k8s.io/pause:<version> holding the statically linked `binary` as /pause."""
    ref = f"registry.k8s.io/pause:{version}"
    digest = _sha256_file(binary)
    key = hashlib.sha256(f"{IMAGE_RECIPE} {ref} {digest}".encode()).hexdigest()[:16]
    out = _cached(f"pause-{key}.tar")
    with _Lock(_cached("pause.lock")):
        if out.exists():
            return Image(ref, out)
        work = Path(tempfile.mkdtemp(prefix="mysql-hook-image-", dir=CACHE))
        try:
            layer_path = work / "layer.tar"
            layer = _Layer(layer_path)
            layer.file("pause", binary.read_bytes(), 0o755)
            layer.close()
            config = {"config": {"Entrypoint": ["/pause"], "User": "65535:65535"}}
            write_docker_archive(out, ref, [layer_path], config)
            log(f"pause image {ref} built from {binary}")
            return Image(ref, out)
        finally:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    try:
        if argv[0] == "mariadb":
            img = mariadb_image(release_only="--release-only" in argv[1:])
        elif argv[0] == "server" and len(argv) == 2:
            img = server_image(argv[1])
        elif argv[0] == "rootfs" and len(argv) == 2:
            print(server_rootfs(argv[1]))
            return 0
        elif argv[0] == "hook" and len(argv) >= 2:
            img = hook_image(Path(argv[1]), *(argv[2:3] or [HOOK_IMAGE]))
        elif argv[0] == "sysbench":
            img = sysbench_image()
        elif argv[0] == "exporter":
            img = exporter_image(*(Path(a) for a in argv[1:2]))
        elif argv[0] == "pause" and len(argv) == 2:
            img = pause_image(Path(argv[1]), os.environ.get("PAUSE_VERSION", "3.10"))
        else:
            print(__doc__)
            return 2
    except ImageError as e:
        log(f"ERROR: {e}")
        return 1
    print(f"{img.ref} {img.tar} {img.note}".strip())
    return 0


if __name__ == "__main__":
    sys.dont_write_bytecode = True
    sys.exit(main(sys.argv[1:]))

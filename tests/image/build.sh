#!/usr/bin/env bash
# Builds the hook's image from the repository's own Dockerfile with buildah (a real
# OCI builder; no Docker engine needed) against local stand-ins for the Dockerfile's
# two base images, which cannot be pulled here (no registry is reachable):
#
#   rust:1.95-bookworm      Debian bookworm (mmdebstrap minbase + gcc, libc6-dev, make,
#                           ca-certificates) plus this machine's Rust toolchain
#                           (rustc, cargo, rustdoc and the standard library)
#   gcr.io/distroless/cc-debian12:nonroot
#                           Debian bookworm's base-files, netbase, tzdata, libc6,
#                           libgcc-s1, libgomp1, libstdc++6, libssl3, unpacked without
#                           maintainer scripts (no shell, no package manager), the
#                           host's CA bundle, passwd/group with root, nobody and
#                           nonroot (65532), /home/nonroot, /tmp
#
# Both are tagged with exactly the references of the FROM lines, in a private image
# store, and the build never pulls (--pull=never). How they differ from the published
# images: docs/testing.md, "The container image".
#
#   tests/image/build.sh [--tag REF] [--archive FILE] [--no-cache]
#   tests/image/build.sh --print-store-args   # the buildah/podman storage options
#   tests/image/build.sh --check-builder      # exit 0 if buildah can build here, else
#                                             # print why not (one line) and exit 3
#
# stdout: the image reference (REF, default ghcr.io/mysql-hook/mysql-hook:<version>),
# then, with --archive, the archive's path. --archive FILE also writes the image as a
# docker-archive (what `docker save` writes; `ctr -n k8s.io images import FILE` and
# `podman load -i FILE` read it), tagged REF. Everything else goes to stderr.
#
# The store and the stand-ins are cached under ${MYSQL_HOOK_CACHE:-~/.cache/mysql-hook}/oci
# (MYSQL_HOOK_IMAGE_STORE overrides the store); a stand-in is rebuilt only when its
# recipe (this script's stand-in section, the toolchain version, the APT sources)
# changes. The build itself uses buildah's layer cache and the Dockerfile's cache
# mounts (crate registry, target directory; kept in ~/.cache/mysql-hook/oci/tmp), so a
# rebuild after a source change compiles only our crates. About 2 GB in all;
# `buildah $(tests/image/build.sh --print-store-args) rm -a`, then
# `rm -rf ~/.cache/mysql-hook/oci` frees it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "${here}/../.." && pwd)

log() { printf 'image: %s\n' "$*" >&2; }
die() { printf 'image: ERROR: %s\n' "$*" >&2; exit 1; }
now() { date +%s; }

cache_root=${MYSQL_HOOK_CACHE:-${HOME}/.cache/mysql-hook}
oci_dir="${cache_root}/oci"
store=${MYSQL_HOOK_IMAGE_STORE:-${oci_dir}/storage}
runroot="${XDG_RUNTIME_DIR:-/run}/mysql-hook-oci"
store_args=(--root "${store}" --runroot "${runroot}" --storage-driver overlay)
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "${repo}/Cargo.toml" | head -n1)
tag="ghcr.io/mysql-hook/mysql-hook:${version}"
archive=""
no_cache=()

usage() { sed -n '2,/^[^#]/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; }

# Why buildah cannot build images here (empty when it can).
builder_problem() {
  command -v buildah >/dev/null 2>&1 || { echo "buildah is not installed (apt-get install buildah podman)"; return; }
  command -v mmdebstrap >/dev/null 2>&1 || { echo "mmdebstrap is not installed (apt-get install mmdebstrap); it makes the base image stand-ins"; return; }
  [[ $(id -u) == 0 ]] || { echo "not root: the stand-ins and the build use buildah as root (rootless buildah needs subuid ranges, not set up here)"; return; }
  grep -qw overlay /proc/filesystems 2>/dev/null || modprobe overlay 2>/dev/null || true
  grep -qw overlay /proc/filesystems 2>/dev/null || { echo "the kernel offers no overlay file system (buildah's storage driver)"; return; }
  if ! out=$(buildah "${store_args[@]}" info 2>&1 >/dev/null); then
    echo "buildah cannot open its store ${store}: $(printf '%s' "${out}" | tail -n1)"
    return
  fi
}

while (($#)); do
  case "$1" in
    --tag) tag=${2:?--tag needs a reference}; shift 2 ;;
    --archive) archive=${2:?--archive needs a file}; shift 2 ;;
    --no-cache) no_cache=(--no-cache); shift ;;
    --print-store-args) printf '%s\n' "${store_args[@]}"; exit 0 ;;
    --check-builder)
      mkdir -p "${store}" "${runroot}" 2>/dev/null || true
      why=$(builder_problem)
      if [[ -n ${why} ]]; then echo "${why}"; exit 3; fi
      exit 0 ;;
    -h|--help) usage; exit 0 ;;
    *) usage; die "unknown argument: $1" ;;
  esac
done

mkdir -p "${oci_dir}" "${store}" "${runroot}"
why=$(builder_problem)
[[ -z ${why} ]] || die "${why}"

# One build at a time per cache (the image test and a real-node loop may start
# together).
exec 9>"${oci_dir}/.lock"
if ! flock -n 9; then
  log "another build is using ${oci_dir}; waiting for it"
  flock 9
fi

# buildah keeps cache mounts (the crate registry and target directory of the
# Dockerfile) under $TMPDIR/buildah-cache: keep them with the store.
mkdir -p "${oci_dir}/tmp"
b() { TMPDIR="${oci_dir}/tmp" buildah "${store_args[@]}" "$@"; }
# Leftovers of an interrupted or failed earlier build (dangling images, replaced
# stand-ins) go first.
b rmi --prune >/dev/null 2>&1 || true

# ------------------------------------------------------------------ the FROM lines
mapfile -t froms < <(sed -n 's/^FROM[[:space:]]\{1,\}\([^[:space:]]\{1,\}\).*$/\1/p' "${repo}/Dockerfile")
((${#froms[@]} == 2)) || die "expected two FROM lines in ${repo}/Dockerfile, found ${#froms[@]}: ${froms[*]}"
build_base=${froms[0]}
runtime_base=${froms[1]}
[[ ${build_base} == rust:*-bookworm ]] || die "the build stage's base is ${build_base}; this script makes stand-ins for rust:<version>-bookworm"
[[ ${runtime_base} == gcr.io/distroless/cc-debian12:* ]] || die "the runtime base is ${runtime_base}; this script makes a stand-in for gcr.io/distroless/cc-debian12"
# Short names resolve to docker.io/library/... (what docker does).
build_base_ref="docker.io/library/${build_base}"

# ------------------------------------------------------------------ stand-ins
sources=/etc/apt/sources.list.d/debian.sources
[[ -f ${sources} ]] || die "no ${sources}: the stand-ins are bootstrapped from this machine's Debian mirror list"
sysroot=$(rustc --print sysroot) || die "no Rust toolchain (rustc) on this machine"
rust_version=$(rustc --version | awk '{print $2}')
want_rust=${build_base#rust:}
want_rust=${want_rust%-bookworm}
[[ ${rust_version} == "${want_rust}" || ${rust_version} == "${want_rust}".* ]] ||
  die "the Dockerfile builds with ${build_base}, but this machine's rustc is ${rust_version}: install that toolchain (rustup toolchain install ${want_rust}) and make it the default"
[[ -d ${sysroot}/lib/rustlib/x86_64-unknown-linux-musl ]] ||
  die "the Dockerfile builds the agent for x86_64-unknown-linux-musl, which this machine's toolchain lacks: rustup target add x86_64-unknown-linux-musl"

# The recipe of each stand-in: this section of the script, the toolchain, the sources.
recipe_of() { # name
  {
    sed -n '/^# --- stand-in recipes ---$/,/^# --- end of stand-in recipes ---$/p' "${BASH_SOURCE[0]}"
    echo "$1"
    cat "${sources}"
    # the toolchain, and the targets installed (the agent is built for musl)
    if [[ $1 == build ]]; then rustc -vV; ls "${sysroot}/lib/rustlib"; fi
  } | sha256sum | cut -c1-16
}
label=io.mysql-hook.stand-in-recipe
current_recipe() { # ref
  b inspect --type image --format "{{index .OCIv1.Config.Labels \"${label}\"}}" "$1" 2>/dev/null || true
}

# --- stand-in recipes ---
# The build stage: bookworm minbase plus what our build needs (a C compiler and make
# for jemalloc and ring, CA certificates for crates.io), and the host's toolchain laid
# out like the official image's (/usr/local/cargo/bin on PATH, CARGO_HOME=/usr/local/cargo).
# The certificate authorities this machine adds (/usr/local/share/ca-certificates,
# e.g. a TLS-intercepting egress proxy's) are trusted too, as a builder behind such a
# proxy must do, or `cargo build` cannot reach crates.io.
make_build_base() { # tmpdir
  local tar="$1/build-base.tar"
  log "making ${build_base_ref}: mmdebstrap bookworm minbase + gcc, libc6-dev, make, ca-certificates; Rust ${rust_version} from ${sysroot}"
  mmdebstrap --quiet --variant=minbase --include=ca-certificates,gcc,libc6-dev,make \
    --customize-hook="mkdir -p \"\$1/usr/local/rustup/toolchains/${rust_version}/bin\" \"\$1/usr/local/cargo/bin\"" \
    --customize-hook="cp -a '${sysroot}/bin/cargo' '${sysroot}/bin/rustc' '${sysroot}/bin/rustdoc' \"\$1/usr/local/rustup/toolchains/${rust_version}/bin/\"" \
    --customize-hook="cp -a '${sysroot}/lib' \"\$1/usr/local/rustup/toolchains/${rust_version}/\"" \
    --customize-hook="cd \"\$1/usr/local/rustup/toolchains/${rust_version}/lib/rustlib\" && rm -rf components manifest-* rust-installer-version multirust-* && rm -rf \"\$1/var/lib/apt/lists\"/*" \
    --customize-hook="for t in cargo rustc rustdoc; do ln -s ../../rustup/toolchains/${rust_version}/bin/\$t \"\$1/usr/local/cargo/bin/\$t\"; done" \
    --customize-hook='for c in /usr/local/share/ca-certificates/*.crt; do [ -f "$c" ] && cp "$c" "$1/usr/local/share/ca-certificates/"; done; chroot "$1" update-ca-certificates >/dev/null' \
    bookworm "${tar}" "${sources}"
  local ctr
  ctr=$(b from --pull=never scratch)
  b add --quiet "${ctr}" "${tar}" / >/dev/null
  b config --env PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env RUSTUP_HOME=/usr/local/rustup --env CARGO_HOME=/usr/local/cargo --env "RUST_VERSION=${rust_version}" \
    --cmd bash --label "${label}=$(recipe_of build)" "${ctr}"
  b commit --quiet --rm "${ctr}" "${build_base_ref}" >/dev/null
  rm -f "${tar}"
}

# The runtime stage: what distroless cc-debian12 ships (glibc, libgcc, libgomp,
# libstdc++, libssl3, base-files, netbase, tzdata, a CA bundle, passwd/group with
# nonroot 65532), unpacked without maintainer scripts: no shell, no dpkg, no apt.
make_runtime_base() { # tmpdir
  local tar="$1/runtime-base.tar"
  log "making ${runtime_base}: bookworm base-files, netbase, tzdata, libc6, libgcc-s1, libgomp1, libstdc++6, libssl3 (unpacked only)"
  mmdebstrap --quiet --variant=extract \
    --include=base-files,netbase,tzdata,libc6,libgcc-s1,libgomp1,libstdc++6,libssl3 \
    --customize-hook='rm -rf "$1"/etc/apt "$1"/var/lib/apt "$1"/var/cache/apt "$1"/etc/debconf.conf "$1"/etc/dpkg "$1"/var/lib/dpkg "$1"/var/log/* "$1"/usr/share/doc "$1"/usr/share/man "$1"/usr/share/info "$1"/usr/share/lintian' \
    --customize-hook='mkdir -p "$1/etc/ssl/certs" && cp /etc/ssl/certs/ca-certificates.crt "$1/etc/ssl/certs/"' \
    --customize-hook='printf "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n" >"$1/etc/passwd"' \
    --customize-hook='printf "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n" >"$1/etc/group"' \
    --customize-hook='printf "hosts: files dns\n" >"$1/etc/nsswitch.conf"' \
    --customize-hook='mkdir -p "$1/root" "$1/home/nonroot" "$1/tmp" && chmod 700 "$1/root" && chown 65532:65532 "$1/home/nonroot" && chmod 700 "$1/home/nonroot" && chmod 1777 "$1/tmp"' \
    bookworm "${tar}" "${sources}"
  local ctr
  ctr=$(b from --pull=never scratch)
  b add --quiet "${ctr}" "${tar}" / >/dev/null
  b config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --user 65532 --workingdir /home/nonroot --label "${label}=$(recipe_of runtime)" "${ctr}"
  b commit --quiet --rm "${ctr}" "${runtime_base}" >/dev/null
  rm -f "${tar}"
}
# --- end of stand-in recipes ---

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mysql-hook-image.XXXXXX")
trap 'rm -rf "${tmp}"' EXIT

t0=$(now)
for stage in build runtime; do
  if [[ ${stage} == build ]]; then ref=${build_base_ref}; else ref=${runtime_base}; fi
  want=$(recipe_of "${stage}")
  if [[ $(current_recipe "${ref}") == "${want}" ]]; then
    log "stand-in ${ref} is up to date (recipe ${want})"
  else
    s=$(now)
    "make_${stage}_base" "${tmp}"
    log "stand-in ${ref} made in $(( $(now) - s ))s"
  fi
done

# ------------------------------------------------------------------ the build
s=$(now)
log "building ${repo}/Dockerfile as ${tag} (buildah build --layers --pull=never${no_cache:+ --no-cache})"
# --network host: the build stage fetches crates from crates.io, without needing a
# CNI network set up for buildah on this machine.
b build --layers --force-rm --pull=never --network host "${no_cache[@]}" \
  --file "${repo}/Dockerfile" --tag "${tag}" "${repo}" >&2
log "image ${tag} built in $(( $(now) - s ))s"

if [[ -n ${archive} ]]; then
  mkdir -p "$(dirname "${archive}")"
  rm -f "${archive}"
  b push --quiet "${tag}" "docker-archive:${archive}:${tag}" >&2
  log "wrote ${archive} ($(du -h "${archive}" | cut -f1))"
fi
# Dangling layers of earlier builds of the tag: keep the store from growing.
b rmi --prune >/dev/null 2>&1 || true
log "done in $(( $(now) - t0 ))s"
echo "${tag}"
[[ -z ${archive} ]] || echo "${archive}"

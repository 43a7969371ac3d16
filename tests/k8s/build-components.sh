#!/usr/bin/env bash
# Builds the pinned upstream Kubernetes components used by tests/k8s/ from the Go
# module proxy into a cache outside the repository:
#
#   ${MYSQL_HOOK_CACHE:-$HOME/.cache/mysql-hook}/k8s-<K8S_VERSION>/bin/
#
#   build-components.sh            etcd + kube-apiserver (what CI needs)
#   build-components.sh --full     also kube-controller-manager, kube-scheduler, kwok
#                                  and Metacontroller (when its source is found)
#   build-components.sh --node     --full, plus what a real node needs: kubelet,
#                                  kube-proxy, CoreDNS and the pause binary, and
#                                  kubectl (the install test runs the README's commands)
#   build-components.sh --kustomize   only kustomize (also part of the others)
#   build-components.sh --print-bin-dir   print the bin dir and exit (builds nothing)
#   build-components.sh --print-metacontroller-src   print the Metacontroller source
#                                  directory that would be used ("" if none) and exit
#
# Versions are pinned in versions.env beside this script. A binary is rebuilt only
# when its stamp file (<bin>/<name>.stamp) does not match the pinned version and
# build recipe, so a warm rerun costs nothing. All logging goes to stderr; the only
# line on stdout is the bin directory, so callers can do
#   bin_dir=$(tests/k8s/build-components.sh)
#
# Metacontroller has no module the Go proxy can serve (its module path is
# `metacontroller`); it is built from a source tree: $MYSQL_HOOK_METACONTROLLER_SRC,
# else <repo>/../shared/metacontroller, else /work/shared/metacontroller. Its stamp
# holds a hash of that tree's go.mod, go.sum and pkg/, so an edited tree rebuilds.
#
# k8s.io/kubernetes cannot be built with `go install pkg@version`: its go.mod replaces
# its staging modules (k8s.io/api, k8s.io/apiserver, ...) with ./staging/src paths
# that are not part of the module zip. We therefore generate a throwaway main module
# that requires k8s.io/kubernetes and replaces every staging module it names with the
# published module of the same release (k8s.io/api => k8s.io/api v0.37.x), and build
# there. etcd's server module has relative replaces as well, so it gets the same
# treatment (its sibling modules are published at the same version).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "${here}/versions.env"

usage() { sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; }
log() { printf 'build-components: %s\n' "$*" >&2; }
die() { printf 'build-components: ERROR: %s\n' "$*" >&2; exit 1; }

full=0
node=0
print_only=0
print_mc_src=0
kustomize_only=0
for arg in "$@"; do
  case "${arg}" in
    --kustomize) kustomize_only=1 ;;
    --full) full=1 ;;
    --node) full=1; node=1 ;;
    --print-bin-dir) print_only=1 ;;
    --print-metacontroller-src) print_mc_src=1 ;;
    -h|--help) usage; exit 0 ;;
    *) usage; die "unknown argument: ${arg}" ;;
  esac
done

cache_root=${MYSQL_HOOK_CACHE:-${HOME}/.cache/mysql-hook}
base="${cache_root}/k8s-${K8S_VERSION}"
bin_dir="${base}/bin"
build_dir="${base}/build"

# The Metacontroller source tree (see the header); empty when there is none.
metacontroller_src() {
  local d
  for d in "${MYSQL_HOOK_METACONTROLLER_SRC:-}" "${here}/../../../shared/metacontroller" /work/shared/metacontroller; do
    if [[ -n "${d}" && -f "${d}/go.mod" && -d "${d}/pkg/cmd/metacontroller" ]]; then
      (cd "${d}" && pwd)
      return 0
    fi
  done
  if [[ -n "${MYSQL_HOOK_METACONTROLLER_SRC:-}" ]]; then
    die "MYSQL_HOOK_METACONTROLLER_SRC=${MYSQL_HOOK_METACONTROLLER_SRC} holds no Metacontroller source (go.mod, pkg/cmd/metacontroller)"
  fi
}

if [[ ${print_only} == 1 ]]; then
  echo "${bin_dir}"
  exit 0
fi
if [[ ${print_mc_src} == 1 ]]; then
  metacontroller_src
  exit 0
fi

command -v go >/dev/null 2>&1 || die "the Go toolchain ('go') is not on PATH; it is needed to build etcd and kube-apiserver ${K8S_VERSION} from the Go module proxy (install Go >= 1.26)"

# A predictable Go environment, whatever the caller has set.
export GOTOOLCHAIN=local   # never download another toolchain; fail clearly instead
export GOWORK=off          # a go.work somewhere above must not capture our modules
export GO111MODULE=on
export CGO_ENABLED=0       # static binaries, as upstream releases them
export GOFLAGS="-trimpath -buildvcs=false"
unset GOOS GOARCH GOBIN || true

mkdir -p "${bin_dir}" "${build_dir}"

# Serialise concurrent runs (e.g. two test processes starting at once).
exec 9>"${base}/.lock"
if ! flock -n 9; then
  log "another build-components.sh is running on this cache; waiting for it"
  flock 9
fi

goos_arch=$(go env GOOS)/$(go env GOARCH)
stamp_for() { # name version
  printf '%s %s recipe=%s %s\n' "$1" "$2" "${BUILD_RECIPE}" "${goos_arch}"
}
up_to_date() { # name version
  [[ -x "${bin_dir}/$1" && -f "${bin_dir}/$1.stamp" ]] &&
    [[ "$(cat "${bin_dir}/$1.stamp")" == "$(stamp_for "$1" "$2")" ]]
}
install_bin() { # tmpfile name version
  mv -f "$1" "${bin_dir}/$2"
  stamp_for "$2" "$3" >"${bin_dir}/$2.stamp"
}
now() { date +%s; }

# Prints the path of a module's own go.mod file from the module cache (downloads it).
gomod_of() { # module@version
  (cd "${build_dir}" && go mod download -json "$1") |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p'
}

# ---------------------------------------------------------------------------- etcd
build_etcd() {
  local dir="${build_dir}/etcd-${ETCD_VERSION}" t0
  t0=$(now)
  log "building etcd ${ETCD_VERSION} (go.etcd.io/etcd/server/v3) in ${dir}"
  rm -rf "${dir}"
  mkdir -p "${dir}"
  printf 'module mysqlhook.local/etcd-build\n\ngo 1.26\n' >"${dir}/go.mod"
  (cd "${dir}" && go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}")
  log "etcd: modules resolved after $(( $(now) - t0 ))s; compiling"
  (cd "${dir}" && go build -tags "grpcnotrace" \
      -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD_VERSION}" \
      -o "${dir}/etcd.tmp" go.etcd.io/etcd/server/v3)
  install_bin "${dir}/etcd.tmp" etcd "${ETCD_VERSION}"
  log "etcd ${ETCD_VERSION} built in $(( $(now) - t0 ))s"
}

# ----------------------------------------------------------------------- kustomize
# What `kubectl apply -k` users render the install manifests with (the tests render
# metacontroller/ and its overlays with it, tests/k8s/conformance.py and
# tests/scripts_image.rs).
build_kustomize() {
  local dir="${build_dir}/kustomize-${KUSTOMIZE_VERSION}" t0
  t0=$(now)
  log "building kustomize ${KUSTOMIZE_VERSION} (sigs.k8s.io/kustomize/kustomize/v5) in ${dir}"
  rm -rf "${dir}"
  mkdir -p "${dir}"
  printf 'module mysqlhook.local/kustomize-build\n\ngo 1.26\n' >"${dir}/go.mod"
  (cd "${dir}" && go get "sigs.k8s.io/kustomize/kustomize/v5@${KUSTOMIZE_VERSION}")
  (cd "${dir}" && go build -ldflags "-s -w -X sigs.k8s.io/kustomize/api/provenance.version=${KUSTOMIZE_VERSION}" \
      -o "${dir}/kustomize.tmp" sigs.k8s.io/kustomize/kustomize/v5)
  install_bin "${dir}/kustomize.tmp" kustomize "${KUSTOMIZE_VERSION}"
  log "kustomize ${KUSTOMIZE_VERSION} built in $(( $(now) - t0 ))s"
}

ensure_kustomize() {
  if up_to_date kustomize "${KUSTOMIZE_VERSION}"; then
    log "kustomize ${KUSTOMIZE_VERSION} is up to date"
  else
    build_kustomize
  fi
}

# ---------------------------------------------------------------------- kubernetes
build_kubernetes() { # component names (cmd/<name>)
  local dir="${build_dir}/kubernetes" t0 upstream_mod go_line major minor ldflags
  local -a pkgs=()
  t0=$(now)
  log "building $* from k8s.io/kubernetes@${K8S_VERSION} in ${dir}"
  rm -rf "${dir}"
  mkdir -p "${dir}/out"

  upstream_mod=$(gomod_of "k8s.io/kubernetes@${K8S_VERSION}")
  [[ -f "${upstream_mod}" ]] || die "could not download the go.mod of k8s.io/kubernetes@${K8S_VERSION}"
  go_line=$(grep -m1 -E '^go [0-9]' "${upstream_mod}") || die "no go directive in ${upstream_mod}"

  {
    echo "// Generated by tests/k8s/build-components.sh; throwaway, do not edit."
    echo "module mysqlhook.local/kubernetes-build"
    echo
    echo "${go_line}"
    grep -E '^godebug ' "${upstream_mod}" || true
    echo
    echo "require k8s.io/kubernetes ${K8S_VERSION}"
    echo
    echo "replace ("
    # Every staging replace of upstream (k8s.io/x => ./staging/src/k8s.io/x) becomes
    # a replace with the published module of the same release.
    sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._/-]*\)[[:space:]]*=>[[:space:]]*\./staging/src/.*$#\1#p' "${upstream_mod}" |
      while read -r m; do printf '\t%s => %s %s\n' "${m}" "${m}" "${K8S_STAGING_VERSION}"; done
    echo ")"
  } >"${dir}/go.mod"
  grep -q "k8s.io/apiserver => k8s.io/apiserver ${K8S_STAGING_VERSION}" "${dir}/go.mod" ||
    die "found no staging replaces in ${upstream_mod}; has the layout of k8s.io/kubernetes changed?"
  log "kubernetes: $(grep -c ' => ' "${dir}/go.mod") staging replaces generated from upstream go.mod"

  for c in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/${c}"); done
  (cd "${dir}" && go get "${pkgs[@]/%/@${K8S_VERSION}}")
  log "kubernetes: modules resolved after $(( $(now) - t0 ))s; compiling"

  major=${K8S_VERSION#v}; major=${major%%.*}
  minor=${K8S_VERSION#v"${major}".}; minor=${minor%%.*}
  ldflags="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X ${p}.gitVersion=${K8S_VERSION} -X ${p}.gitMajor=${major} -X ${p}.gitMinor=${minor}"
    ldflags+=" -X ${p}.gitTreeState=clean -X ${p}.buildDate=1970-01-01T00:00:00Z"
  done
  # Same tags as upstream's hack/lib/golang.sh.
  (cd "${dir}" && go build -tags "selinux,notest,grpcnotrace" -ldflags "${ldflags}" -o "${dir}/out/" "${pkgs[@]}")
  for c in "$@"; do
    install_bin "${dir}/out/${c}" "${c}" "${K8S_VERSION}"
  done
  log "$* ${K8S_VERSION} built in $(( $(now) - t0 ))s"
}

# ---------------------------------------------------------------------------- kwok
build_kwok() {
  local dir="${build_dir}/kwok-${KWOK_VERSION}" t0
  t0=$(now)
  log "building kwok ${KWOK_VERSION} (sigs.k8s.io/kwok/cmd/kwok) in ${dir}"
  rm -rf "${dir}"
  mkdir -p "${dir}"
  printf 'module mysqlhook.local/kwok-build\n\ngo 1.26\n' >"${dir}/go.mod"
  (cd "${dir}" && go get "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}")
  (cd "${dir}" && go build -ldflags "-s -w" -o "${dir}/kwok.tmp" sigs.k8s.io/kwok/cmd/kwok)
  install_bin "${dir}/kwok.tmp" kwok "${KWOK_VERSION}"
  log "kwok ${KWOK_VERSION} built in $(( $(now) - t0 ))s"
}

# ------------------------------------------------------------------ metacontroller
# A hash of what the binary is built from: go.mod, go.sum and every file under pkg/.
metacontroller_tree_hash() { # src
  (cd "$1" && { printf '%s\n' go.mod go.sum; find pkg -type f; } | LC_ALL=C sort |
     while read -r f; do printf '%s %s\n' "$(sha256sum <"${f}" | cut -c1-64)" "${f}"; done |
     sha256sum | cut -c1-16)
}

build_metacontroller() { # src tree-hash
  local src=$1 dir="${build_dir}/metacontroller" t0
  t0=$(now)
  log "building metacontroller from ${src} (tree ${2}) into ${dir}"
  rm -rf "${dir}"
  mkdir -p "${dir}"
  # Built in the source tree itself (its module path, `metacontroller`, is not
  # fetchable); -mod=readonly: a tree whose go.sum is incomplete fails, never edited.
  (cd "${src}" && go build -mod=readonly -ldflags "-s -w -X main.version=${METACONTROLLER_VERSION}-src.${2}" \
      -o "${dir}/metacontroller.tmp" ./pkg/cmd/metacontroller)
  install_bin "${dir}/metacontroller.tmp" metacontroller "${METACONTROLLER_VERSION}-src.${2}"
  log "metacontroller built in $(( $(now) - t0 ))s"
}

# --------------------------------------------------------------------------- coredns
build_coredns() {
  local dir="${build_dir}/coredns-${COREDNS_VERSION}" t0
  t0=$(now)
  log "building coredns ${COREDNS_VERSION} (github.com/coredns/coredns, default plugins) in ${dir}"
  rm -rf "${dir}"
  mkdir -p "${dir}"
  printf 'module mysqlhook.local/coredns-build\n\ngo 1.26\n' >"${dir}/go.mod"
  (cd "${dir}" && go get "github.com/coredns/coredns@${COREDNS_VERSION}")
  log "coredns: modules resolved after $(( $(now) - t0 ))s; compiling"
  (cd "${dir}" && go build -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=${COREDNS_VERSION}" \
      -o "${dir}/coredns.tmp" github.com/coredns/coredns)
  install_bin "${dir}/coredns.tmp" coredns "${COREDNS_VERSION}"
  log "coredns ${COREDNS_VERSION} built in $(( $(now) - t0 ))s"
}

# ----------------------------------------------------------------------------- pause
# The sandbox ("pause") process: Kubernetes' own build/pause/linux/pause.c from the
# k8s.io/kubernetes module source, compiled statically as upstream's Makefile does.
build_pause() {
  local dir="${build_dir}/pause" t0 src
  t0=$(now)
  command -v gcc >/dev/null 2>&1 || die "gcc is needed to compile the pause binary (apt-get install gcc libc6-dev)"
  src=$(cd "${build_dir}" && go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" |
          sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [[ -f "${src}/build/pause/linux/pause.c" ]] || die "no build/pause/linux/pause.c in k8s.io/kubernetes@${K8S_VERSION} (${src})"
  rm -rf "${dir}"
  mkdir -p "${dir}"
  gcc -static -O2 -Wall -Werror -DVERSION="${PAUSE_VERSION}-mysql-hook" \
      -o "${dir}/pause.tmp" "${src}/build/pause/linux/pause.c"
  strip "${dir}/pause.tmp" 2>/dev/null || true
  install_bin "${dir}/pause.tmp" pause "${K8S_VERSION}/${PAUSE_VERSION}"
  log "pause ${PAUSE_VERSION} compiled in $(( $(now) - t0 ))s"
}

# ---------------------------------------------------------------------------- main
start=$(now)
if [[ ${kustomize_only} == 1 ]]; then
  ensure_kustomize
  echo "${bin_dir}"
  exit 0
fi
k8s_components=(kube-apiserver)
[[ ${full} == 1 ]] && k8s_components+=(kube-controller-manager kube-scheduler)
[[ ${node} == 1 ]] && k8s_components+=(kubelet kube-proxy kubectl)

if up_to_date etcd "${ETCD_VERSION}"; then
  log "etcd ${ETCD_VERSION} is up to date"
else
  build_etcd
fi
ensure_kustomize

missing=()
for c in "${k8s_components[@]}"; do
  if up_to_date "${c}" "${K8S_VERSION}"; then
    log "${c} ${K8S_VERSION} is up to date"
  else
    missing+=("${c}")
  fi
done
# One go build for all missing Kubernetes components: shared packages compile once.
[[ ${#missing[@]} -gt 0 ]] && build_kubernetes "${missing[@]}"

if [[ ${full} == 1 ]]; then
  if up_to_date kwok "${KWOK_VERSION}"; then
    log "kwok ${KWOK_VERSION} is up to date"
  else
    build_kwok
  fi
  mc_src=$(metacontroller_src)
  if [[ -n "${mc_src}" ]]; then
    mc_hash=$(metacontroller_tree_hash "${mc_src}")
    if up_to_date metacontroller "${METACONTROLLER_VERSION}-src.${mc_hash}"; then
      log "metacontroller (${mc_src}, tree ${mc_hash}) is up to date"
    else
      build_metacontroller "${mc_src}" "${mc_hash}"
    fi
  else
    log "no Metacontroller source found (MYSQL_HOOK_METACONTROLLER_SRC, ../shared/metacontroller, /work/shared/metacontroller); not building it"
  fi
fi

if [[ ${node} == 1 ]]; then
  if up_to_date coredns "${COREDNS_VERSION}"; then
    log "coredns ${COREDNS_VERSION} is up to date"
  else
    build_coredns
  fi
  if up_to_date pause "${K8S_VERSION}/${PAUSE_VERSION}"; then
    log "pause ${PAUSE_VERSION} is up to date"
  else
    build_pause
  fi
fi

log "done in $(( $(now) - start ))s; binaries in ${bin_dir}"
echo "${bin_dir}"

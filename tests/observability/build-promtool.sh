#!/usr/bin/env bash
# Builds the pinned promtool from the Go module proxy into a cache outside the
# repository and prints its path (the only line on stdout):
#
#   ${MYSQL_HOOK_CACHE:-$HOME/.cache/mysql-hook}/promtool-<version>/promtool
#
# The version is pinned in versions.env beside this script. A warm rerun checks a
# stamp file and builds nothing. `go install pkg@version` works for this module (its
# go.mod has no replace directives), so no throwaway main module is needed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "${here}/versions.env"
log() { printf 'build-promtool: %s\n' "$*" >&2; }
die() { printf 'build-promtool: ERROR: %s\n' "$*" >&2; exit 1; }

cache_root=${MYSQL_HOOK_CACHE:-${HOME}/.cache/mysql-hook}
dir="${cache_root}/promtool-${PROMETHEUS_MODULE_VERSION}"
bin="${dir}/promtool"
mkdir -p "${dir}"
export GOTOOLCHAIN=local GOWORK=off GO111MODULE=on CGO_ENABLED=0
export GOFLAGS="-trimpath -buildvcs=false"
unset GOOS GOARCH || true
command -v go >/dev/null 2>&1 || die "the Go toolchain ('go') is not on PATH; it builds promtool ${PROMETHEUS_MODULE_VERSION} from the Go module proxy (install Go >= 1.26)"
stamp="promtool ${PROMETHEUS_MODULE_VERSION} recipe=${PROMTOOL_RECIPE} $(go env GOOS)/$(go env GOARCH)"

exec 9>"${dir}/.lock"
flock 9
if [[ -x "${bin}" && -f "${bin}.stamp" && "$(cat "${bin}.stamp")" == "${stamp}" ]]; then
  echo "${bin}"
  exit 0
fi
log "building promtool ${PROMETHEUS_MODULE_VERSION} (module github.com/prometheus/prometheus) into ${dir}"
start=$(date +%s)
GOBIN="${dir}" go install "github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_MODULE_VERSION}" >&2 ||
  die "go install github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_MODULE_VERSION} failed"
printf '%s\n' "${stamp}" > "${bin}.stamp"
log "built in $(( $(date +%s) - start ))s"
echo "${bin}"

#!/bin/bash
# init.sh -- init container, once per pod start.  Writes the per-pod server
# options (server_id, report_host/port) into ${CONF_DIR:-/etc/mysql/conf.d}.
# server_id = SERVER_ID_BASE (default 1) + ordinal of POD_NAME.  Idempotent: the
# file is rewritten atomically with the same content on every start.
# Needs no server and no credentials.
set -eEu -o pipefail
SCRIPT_NAME=init
TERMINATION_LOG=${TERMINATION_LOG:-/dev/termination-log}
CONF_DIR=${CONF_DIR:-/etc/mysql/conf.d}
SERVER_ID_BASE=${SERVER_ID_BASE:-1}

emit() { printf '%s\n' "$1"; { printf '%s\n' "$1" > "$TERMINATION_LOG"; } 2>/dev/null || true; }
die() { emit "{\"result\":\"error\",\"reason\":\"$1\",\"message\":\"$2\"}"; exit 1; }

[ -n "${POD_NAME:-}" ] || die bad-env "POD_NAME is required"
ord=${POD_NAME##*-}
[[ $ord =~ ^[0-9]+$ ]] || die bad-env "POD_NAME has no ordinal suffix"
[[ $SERVER_ID_BASE =~ ^[0-9]+$ ]] || die bad-env "SERVER_ID_BASE is not a number"
server_id=$(( SERVER_ID_BASE + 10#$ord ))
(( server_id >= 1 && server_id <= 4294967295 )) || die bad-env "server_id out of range"

# report_host/port: this pod's own entry in PODS if present, else the pod name.
report_host=$POD_NAME report_port=""
for e in ${PODS:-}; do
  if [ "${e%%=*}" = "$POD_NAME" ]; then
    a=${e#*=}; report_port=${a##*:}; report_host=${a%:*}; report_host=${report_host#[}; report_host=${report_host%]}
  fi
done

mkdir -p "$CONF_DIR"
tmp=$(mktemp "$CONF_DIR/.server-id.XXXXXX")
{
  printf '# written by init.sh for %s; do not edit\n[mysqld]\n' "$POD_NAME"
  printf 'server_id = %s\n' "$server_id"
  printf 'report_host = %s\n' "$report_host"
  [ -n "$report_port" ] && printf 'report_port = %s\n' "$report_port"
} > "$tmp"
chmod 644 "$tmp"
mv -f "$tmp" "$CONF_DIR/server-id.cnf"
emit "{\"result\":\"initialized\",\"pod\":\"$POD_NAME\",\"serverId\":$server_id,\"file\":\"$CONF_DIR/server-id.cnf\"}"

#!/bin/bash
# init.sh -- init container, every pod start.  The StatefulSet runs the server
# binary itself (mysqld / mariadbd), not the image's docker-entrypoint, so this
# script does what the entrypoint would have done, in a form that suits
# read-only replicas:
#
#  1. copies the hook's my.cnf (MY_CNF, default: next to this script) to
#     $CONF_DIR/00-mysql-hook.cnf, atomically;
#  2. writes the per-pod options (server_id, report_host/port) to
#     $CONF_DIR/server-id.cnf, atomically.  server_id = SERVER_ID_BASE
#     (default 1) + ordinal of POD_NAME;
#  3. when $DATA_DIR holds no data directory yet (no `mysql` system schema
#     directory), initializes one and creates root@'localhost' and root@'%'
#     with MYSQL_ROOT_PASSWORD.  Nothing of this is written to the binary log:
#     a fresh member has an EMPTY GTID state, so no member carries a
#     transaction of its own that the others lack (errant).
#
# Step 3 runs in a staging directory on the same volume
# ($DATA_DIR/.mysql-hook-init/data): initialize (MySQL 8.4 `mysqld
# --initialize-insecure`, RM 2.9.1 "Initializing the Data Directory"; MariaDB
# `mariadb-install-db --auth-root-authentication-method=normal`), start a
# temporary server on it (no networking, private socket in $TMPDIR, binary log
# off, read_only/super_read_only off), create the root accounts, shut it down
# cleanly, mark the staging directory `ready`, then rename its entries into
# $DATA_DIR one by one (same filesystem: each rename is atomic).  A crash at
# any line is repaired by rerunning: an unmarked staging directory is thrown
# away and redone, a marked one has its remaining entries moved.  A data
# directory that already has `mysql/` is never touched (rerun = no-op).
#
# Writes only to $CONF_DIR, $DATA_DIR and $TMPDIR (read-only root filesystem).
set -eEu -o pipefail
SCRIPT_NAME=init
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TERMINATION_LOG=${TERMINATION_LOG:-/dev/termination-log}
CONF_DIR=${CONF_DIR:-/etc/mysql/conf.d}
DATA_DIR=${DATA_DIR:-/var/lib/mysql}
MY_CNF=${MY_CNF:-$HERE/my.cnf}
SERVER_ID_BASE=${SERVER_ID_BASE:-1}
# Optional: option file the server tools read instead of the image's default
# ones (the tests use it; in a pod the image's /etc/mysql/my.cnf or /etc/my.cnf
# already includes $CONF_DIR).
SERVER_DEFAULTS_FILE=${SERVER_DEFAULTS_FILE:-}
INIT_WAIT=${INIT_WAIT:-300}   # seconds for the temporary server to start/stop

log() { printf '%s %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$SCRIPT_NAME" "$*" >&2; }
json_esc() {
  local s=$1
  s=${s//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\n'/\\n}; s=${s//$'\t'/\\t}; s=${s//[[:cntrl:]]/}
  printf '%s' "$s"
}
DONE=0
emit() {
  DONE=1
  printf '%s\n' "$1"
  { printf '%s\n' "$1" > "$TERMINATION_LOG"; } 2>/dev/null || true
}
die() { emit "{\"result\":\"error\",\"reason\":\"$1\",\"message\":\"$(json_esc "$2")\"}"; exit 1; }

TMP_SERVER_PID="" TMP_WORK=""
LAST_ERR=""
trap 'LAST_ERR="line $LINENO: $BASH_COMMAND (exit $?)"' ERR
on_exit() {
  local code=$?
  if [ -n "$TMP_SERVER_PID" ] && kill -0 "$TMP_SERVER_PID" 2>/dev/null; then
    kill -TERM "$TMP_SERVER_PID" 2>/dev/null || true
    wait "$TMP_SERVER_PID" 2>/dev/null || true
  fi
  [ -n "$TMP_WORK" ] && rm -rf "$TMP_WORK"
  if [ "$DONE" = 0 ]; then
    emit "{\"result\":\"error\",\"reason\":\"script-failed\",\"message\":\"$(json_esc "init: ${LAST_ERR:-exit $code}")\"}"
    exit $(( code == 0 ? 1 : code ))
  fi
}
trap on_exit EXIT

# ---------------------------------------------------------------- env

[ -n "${POD_NAME:-}" ] || die bad-env "POD_NAME is required"
ord=${POD_NAME##*-}
[[ $ord =~ ^[0-9]+$ ]] || die bad-env "POD_NAME has no ordinal suffix"
[[ $SERVER_ID_BASE =~ ^[0-9]+$ ]] || die bad-env "SERVER_ID_BASE is not a number"
server_id=$(( SERVER_ID_BASE + 10#$ord ))
(( server_id >= 1 && server_id <= 4294967295 )) || die bad-env "server_id out of range"
case "${FLAVOR:-}" in
  mysql)   SERVER_BIN=${SERVER_BIN:-mysqld}   CLIENT=mysql ;;
  mariadb) SERVER_BIN=${SERVER_BIN:-mariadbd} CLIENT=mariadb ;;
  *) die bad-env "FLAVOR must be mysql or mariadb" ;;
esac
[ -r "$MY_CNF" ] || die bad-env "MY_CNF $MY_CNF is not readable"
# The root password: from MYSQL_ROOT_PASSWORD_FILE when set (pods mount the
# credentials Secret as a file), else the environment; exact bytes, never
# exported to the programs started below (see load_secret in common.sh).
if [ -n "${MYSQL_ROOT_PASSWORD_FILE:-}" ]; then
  [ -r "$MYSQL_ROOT_PASSWORD_FILE" ] || die bad-env "MYSQL_ROOT_PASSWORD_FILE is not readable"
  IFS= read -r -d '' MYSQL_ROOT_PASSWORD < "$MYSQL_ROOT_PASSWORD_FILE" || true
fi
export -n MYSQL_ROOT_PASSWORD 2>/dev/null || true
# The operator account's password (issue 18.5), the same way; optional: without
# it the new server gets root@'%' as before.
if [ -n "${OPERATOR_PASSWORD_FILE:-}" ]; then
  [ -r "$OPERATOR_PASSWORD_FILE" ] || die bad-env "OPERATOR_PASSWORD_FILE is not readable"
  IFS= read -r -d '' OPERATOR_PASSWORD < "$OPERATOR_PASSWORD_FILE" || true
fi
export -n OPERATOR_PASSWORD 2>/dev/null || true

# report_host/port: this pod's own entry in PODS (or PODS_FILE, or POD_HOST) if
# present, else the pod name.
report_host=$POD_NAME report_port=""
members=${PODS:-}
if [ -n "${PODS_FILE:-}" ] && [ -r "$PODS_FILE" ]; then members=$(<"$PODS_FILE"); fi
[ -n "${POD_HOST:-}" ] && members="$members $POD_NAME=$POD_HOST"
for e in $members; do
  if [ "${e%%=*}" = "$POD_NAME" ]; then
    a=${e#*=}; report_port=${a##*:}; report_host=${a%:*}; report_host=${report_host#[}; report_host=${report_host%]}
  fi
done

# ---------------------------------------------------------------- configuration

# write_file DEST: stdin -> DEST, atomically (temp file in the same dir + rename)
write_file() {
  local tmp
  tmp=$(mktemp "$CONF_DIR/.${1##*/}.XXXXXX")
  cat > "$tmp"
  chmod 644 "$tmp"
  mv -f "$tmp" "$1"
}
mkdir -p "$CONF_DIR"
HOOK_CNF=$CONF_DIR/00-mysql-hook.cnf
write_file "$HOOK_CNF" < "$MY_CNF"
{
  printf '# written by init.sh for %s; do not edit\n[mysqld]\n' "$POD_NAME"
  printf 'server_id = %s\n' "$server_id"
  printf 'report_host = %s\n' "$report_host"
  if [ -n "$report_port" ]; then printf 'report_port = %s\n' "$report_port"; fi
} | write_file "$CONF_DIR/server-id.cnf"

# ---------------------------------------------------------------- data directory

STAGE=$DATA_DIR/.mysql-hook-init
DEFAULTS=()
if [ -n "$SERVER_DEFAULTS_FILE" ]; then DEFAULTS=(--defaults-file="$SERVER_DEFAULTS_FILE"); fi
AS_ROOT=()
if [ "$(id -u)" = 0 ]; then AS_ROOT=(--user=root); fi   # tests only; pods run as 999

sql_quote() { local s=$1; s=${s//\\/\\\\}; s=${s//\'/\'\'}; printf "'%s'" "$s"; }

# Move the entries of a completed staging directory into $DATA_DIR.
# `mv -T` never moves into an existing directory of the same name: a clash
# fails instead of nesting.
finish_stage() {
  local e
  shopt -s nullglob dotglob
  for e in "$STAGE/data"/*; do
    mv -T -f "$e" "$DATA_DIR/${e##*/}"
  done
  shopt -u nullglob dotglob
  sync -f "$DATA_DIR" 2>/dev/null || sync
  rm -rf "$STAGE"
}

# Start a temporary server on the staging directory, reachable only through a
# private socket: no TCP, no binary log (nothing gets a GTID), writable.
start_temp_server() {
  local sock=$1 pidf=$2 end
  local -a extra=(--read-only=OFF)
  if [ "$FLAVOR" = mysql ]; then
    # super_read_only (RM 7.1.8) would refuse even root's account changes;
    # X Plugin off: it would listen on its own port/socket (RM 22.5.6.2).
    extra+=(--super-read-only=OFF --mysqlx=OFF --skip-replica-start)
  else
    extra+=(--skip-slave-start)
  fi
  "$SERVER_BIN" "${DEFAULTS[@]}" "${AS_ROOT[@]}" --datadir="$STAGE/data" --socket="$sock" \
    --pid-file="$pidf" --skip-networking --skip-log-bin "${extra[@]}" >&2 &
  TMP_SERVER_PID=$!
  end=$((SECONDS + INIT_WAIT))
  until "$CLIENT" --no-defaults --protocol=SOCKET --socket="$sock" -uroot -N -B -e "SELECT 1" >/dev/null 2>&1; do
    kill -0 "$TMP_SERVER_PID" 2>/dev/null || { wait "$TMP_SERVER_PID" || true; TMP_SERVER_PID=""; return 1; }
    (( SECONDS < end )) || return 1
    sleep 0.2
  done
}

# The accounts the scripts and probes use: root@'localhost' (the socket, for
# the probes and the agent in the server's own pod) with MYSQL_ROOT_PASSWORD,
# and for the network either the operator account mysqlhook@'%' with
# OPERATOR_PASSWORD (issue 18.5: root is local only) or, without that password,
# root@'%' as before.  Other accounts that mariadb-install-db makes
# (root@<hostname>, root@127.0.0.1, root@::1, anonymous ''@...) are dropped, as
# the images' entrypoints do.
# The operator account holds every privilege WITH GRANT OPTION: the scripts copy
# a donor's accounts into a new replica (seeds) and restore application accounts
# with their grants, and a grantor must hold what it grants.
# MySQL: CREATE USER / ALTER USER / GRANT / DROP USER (RM 15.7.1).
# sql_log_bin=0 on top of --skip-log-bin: never a GTID for these statements.
root_accounts_sql() {
  local pw=$1 others=$2 opw=${3:-} u h q
  q="SET SESSION sql_log_bin=0;"
  while IFS=$'\t' read -r u h; do
    [ -n "$u$h" ] || continue
    q+="DROP USER $(sql_quote "$u")@$(sql_quote "$h");"
  done <<< "$others"
  q+="CREATE USER IF NOT EXISTS 'root'@'localhost' IDENTIFIED BY $pw;"
  q+="ALTER USER 'root'@'localhost' IDENTIFIED BY $pw;"
  if [ -n "$opw" ]; then
    q+="DROP USER IF EXISTS 'root'@'%';"
    q+="CREATE USER IF NOT EXISTS 'mysqlhook'@'%' IDENTIFIED BY $opw;"
    q+="ALTER USER 'mysqlhook'@'%' IDENTIFIED BY $opw;"
    q+="GRANT ALL PRIVILEGES ON *.* TO 'mysqlhook'@'%' WITH GRANT OPTION;"
  else
    q+="CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY $pw;"
    q+="ALTER USER 'root'@'%' IDENTIFIED BY $pw;"
    q+="GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;"
  fi
  printf '%s' "$q"
}

initialize_data_dir() {
  local pw sock pidf others opw=""
  pw=$(sql_quote "${MYSQL_ROOT_PASSWORD:?}")
  [ -z "${OPERATOR_PASSWORD:-}" ] || opw=$(sql_quote "$OPERATOR_PASSWORD")
  rm -rf "$STAGE"
  mkdir -p -m 750 "$STAGE/data"
  log "initializing a new data directory in $STAGE/data"
  case $FLAVOR in
    mysql)
      # RM 2.9.1.1: --initialize-insecure leaves root@localhost without password
      "$SERVER_BIN" "${DEFAULTS[@]}" "${AS_ROOT[@]}" --initialize-insecure --datadir="$STAGE/data" \
        --skip-log-bin --read-only=OFF --super-read-only=OFF >&2 ;;
    mariadb)
      # unknown options (--skip-log-bin) are passed on to mariadbd --bootstrap
      mariadb-install-db "${DEFAULTS[@]}" "${AS_ROOT[@]}" --datadir="$STAGE/data" \
        --auth-root-authentication-method=normal --skip-test-db --skip-log-bin >&2 ;;
  esac
  TMP_WORK=$(mktemp -d "${TMPDIR:-/tmp}/mysql-hook-init.XXXXXX")
  # a unix socket path has at most 107 bytes; fall back to /tmp for long TMPDIRs
  if (( ${#TMP_WORK} > 90 )); then rmdir "$TMP_WORK"; TMP_WORK=$(mktemp -d /tmp/mysql-hook-init.XXXXXX); fi
  sock=$TMP_WORK/mysqld.sock pidf=$TMP_WORK/mysqld.pid
  start_temp_server "$sock" "$pidf" || die init-failed "temporary server did not start"
  others=$("$CLIENT" --no-defaults --protocol=SOCKET --socket="$sock" -uroot -N -B -e \
    "SELECT user, host FROM mysql.user WHERE (user = 'root' AND host NOT IN ('localhost', '%')) OR user = ''")
  # on stdin, not with -e: the statements carry the password (see sql() in common.sh)
  root_accounts_sql "$pw" "$others" "$opw" | "$CLIENT" --no-defaults --protocol=SOCKET --socket="$sock" -uroot -N -B \
    || die init-failed "creating the root accounts failed"
  # clean shutdown (SIGTERM = normal shutdown for both servers)
  kill -TERM "$TMP_SERVER_PID"
  if ! wait "$TMP_SERVER_PID"; then TMP_SERVER_PID=""; die init-failed "temporary server did not shut down cleanly"; fi
  TMP_SERVER_PID=""
  sync -f "$STAGE/data" 2>/dev/null || sync
  : > "$STAGE/ready"
  finish_stage
}

created=false
mkdir -p "$DATA_DIR"
if [ -e "$STAGE/ready" ]; then
  log "completing an interrupted initialization"
  finish_stage
  created=true
elif [ -d "$DATA_DIR/mysql" ]; then
  rm -rf "$STAGE"    # leftovers of an attempt that never got as far as `ready`
else
  initialize_data_dir
  created=true
fi

emit "{\"result\":\"initialized\",\"pod\":\"$POD_NAME\",\"serverId\":$server_id,\"file\":\"$CONF_DIR/server-id.cnf\",\"config\":\"$HOOK_CNF\",\"dataDir\":\"$(json_esc "$DATA_DIR")\",\"created\":$created}"

# shellcheck shell=bash
# common.sh -- sourced by every script in this directory (bash only).
#
# Everything that differs between the two flavors lives here, one function per
# operation, with the MySQL 8.4 and the MariaDB statement side by side, so the
# two cannot drift apart.  The other scripts contain no SQL dialect of their own.
#
# MySQL statements are traced to the MySQL 8.4 Reference Manual
# (https://dev.mysql.com/doc/refman/8.4/en/<page>.html); "RM 15.4.2.2" below
# means section 15.4.2.2 of that manual.  The MySQL branch cannot be executed in
# this repository's CI (Debian ships no MySQL 8 server); the MariaDB branch is
# exercised by tests/scripts against real mariadbd servers.
#
# TLS (opt-in): TLS_MODE (environment) or TLS_MODE_FILE (its first line; wins
# when readable) = `verify` makes every client connection over TCP and every
# replication channel use TLS and verify the server's certificate against the
# CA bundle TLS_CA [/etc/mysql/tls/ca.crt]; empty = off.  See "TLS" below.
#
# Tools needed: bash, gzip (backups), coreutils (timeout, date, sha256sum, stat, mktemp, head,
# sort, sleep, cat, mv, rm, mkdir; csplit for a parallel restore) and the client programs of the flavor.  No
# sed/awk/grep/python/jq: parsing is done with bash builtins.

set -eEu -o pipefail
shopt -s extglob inherit_errexit

SCRIPTS_DIR=${SCRIPTS_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
TERMINATION_LOG=${TERMINATION_LOG:-/dev/termination-log}
CONNECT_TIMEOUT=${CONNECT_TIMEOUT:-5}     # seconds, TCP connect to a server
QUERY_TIMEOUT=${QUERY_TIMEOUT:-60}        # seconds, cap for one client call
WAIT_TIMEOUT=${WAIT_TIMEOUT:-300}         # seconds, replication catch-up waits
REPL_USER=repl
# Semi-sync "never fall back to async": the largest timeout both servers accept
# (MySQL rpl_semi_sync_source_timeout max is 4294967295 ms, ~49 days).
SEMISYNC_TIMEOUT_MS=${SEMISYNC_TIMEOUT_MS:-4294967295}
SERVER_ID_BASE=${SERVER_ID_BASE:-1}
# MySQL: acknowledgements a commit waits for (the hook sets it from the number
# of servers); MariaDB always waits for exactly one.
SEMISYNC_ACKS=${SEMISYNC_ACKS:-1}
# The epoch a promotion records on the server it makes writable (issue 31.1):
# the role-change Job's number, 0 for the bootstrap (the hook sets it).
EPOCH=${EPOCH:-0}

case "${FLAVOR:-}" in
  mysql)   CLIENT=mysql   DUMP=mysqldump    BINLOG=mysqlbinlog    ADMIN=mysqladmin ;;
  mariadb) CLIENT=mariadb DUMP=mariadb-dump BINLOG=mariadb-binlog ADMIN=mariadb-admin ;;
  *) echo "FLAVOR must be 'mysql' or 'mariadb' (got '${FLAVOR:-}')" >&2
     printf '{"result":"error","reason":"bad-env","message":"FLAVOR must be mysql or mariadb"}\n' \
       | tee "$TERMINATION_LOG" 2>/dev/null || true
     exit 1 ;;
esac
export ADMIN  # (mysqladmin / mariadb-admin: not needed by the scripts today)

# ---------------------------------------------------------------- logging / result

log() { printf '%s %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" "${SCRIPT_NAME:-script}" "$*" >&2; }

# JSON string escaping with bash only.
json_esc() {
  local s=$1
  s=${s//\\/\\\\}; s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}; s=${s//$'\r'/\\r}; s=${s//$'\t'/\\t}
  s=${s//[[:cntrl:]]/}
  printf '%s' "$s"
}
R_FIELDS=()
r_str() { R_FIELDS+=("\"$1\":\"$(json_esc "$2")\""); }   # string value
r_raw() { R_FIELDS+=("\"$1\":$2"); }                        # number / true / false
r_arr() {                                                   # array of strings
  local k=$1 out="" x; shift
  for x in "$@"; do out+="${out:+,}\"$(json_esc "$x")\""; done
  R_FIELDS+=("\"$k\":[$out]")
}
RESULT_DONE=0
# finish RESULT EXIT_CODE: print ONE line of JSON to stdout and the termination log.
# result_line RESULT: the JSON line finish would print (without printing it).
result_line() {
  local result=$1 line f trunc=0
  local -a fields=("${R_FIELDS[@]}")
  while :; do
    line="{\"result\":\"$(json_esc "$result")\""
    for f in "${fields[@]}"; do line+=",$f"; done
    (( trunc )) && line+=',"truncated":true'
    line+="}"
    (( ${#line} < 4000 )) && break
    # too long for a termination message: drop the last field, never
    # "promoted" nor "reason" (the hook acts on them)
    local i=$(( ${#fields[@]} - 1 ))
    while (( i >= 0 )) && [[ ${fields[i]} == '"promoted":'* || ${fields[i]} == '"reason":'* ]]; do i=$((i - 1)); done
    (( i >= 0 )) || break
    fields=("${fields[@]:0:i}" "${fields[@]:i+1}"); trunc=1
  done
  printf '%s' "$line"
}
# emit_line LINE CODE: print a prepared result line and exit.
emit_line() {
  RESULT_DONE=1
  printf '%s\n' "$1"
  if [ -n "$TERMINATION_LOG" ]; then
    { printf '%s\n' "$1" > "$TERMINATION_LOG"; } 2>/dev/null || log "cannot write $TERMINATION_LOG"
  fi
  exit "${2:-0}"
}
finish() {
  emit_line "$(result_line "$1")" "${2:-0}"
}
# fail REASON MESSAGE [EXIT_CODE]: error result (keeps fields already collected).
fail() {
  r_str reason "$1"; r_str message "${2:-}"
  finish error "${3:-1}"
}
# promoted POD: this run made POD writable (or adopted an earlier run's
# promotion).  From here on every result line, success or error, carries
# "promoted":"POD" so that the hook follows the promotion whatever fails later.
PROMOTED=""
promoted() {
  PROMOTED=$1
  r_str promoted "$1"
}
LAST_ERR=""
trap 'LAST_ERR="line $LINENO: $BASH_COMMAND (exit $?)"' ERR
on_exit() {
  local code=$?
  [ -n "${CNF:-}" ] && rm -f "$CNF"
  [ -n "${CNF_ROOT:-}" ] && rm -f "$CNF_ROOT"
  if [ "$RESULT_DONE" = 0 ]; then
    RESULT_DONE=1
    R_FIELDS=()
    [ -z "$PROMOTED" ] || r_str promoted "$PROMOTED"
    r_str reason script-failed
    r_str message "${SCRIPT_NAME:-script}: ${LAST_ERR:-exit $code}"
    finish error "$(( code == 0 ? 1 : code ))"
  fi
}
trap on_exit EXIT

# ---------------------------------------------------------------- pods / env

# PODS="db-0=host:port db-1=host:port ...", in ordinal order.  Jobs get it in
# their environment (the membership of their moment); server pods read it from
# PODS_FILE (the config ConfigMap's `pods`, which follows scaling without a
# restart) and know their own address from POD_HOST, so a new pod whose kubelet
# has not yet seen the new file still finds itself.
POD_NAMES=()
declare -A POD_ADDR=()
parse_pods() {
  local e list=${PODS:-}
  if [ -n "${PODS_FILE:-}" ] && [ -r "$PODS_FILE" ]; then list=$(<"$PODS_FILE"); fi
  for e in $list; do
    [[ $e == *=*:* ]] || fail bad-env "PODS entry '$e' is not name=host:port"
    POD_NAMES+=("${e%%=*}")
    POD_ADDR[${e%%=*}]=${e#*=}
  done
  if [ -n "${POD_NAME:-}" ] && [ -n "${POD_HOST:-}" ] && [ -z "${POD_ADDR[$POD_NAME]+x}" ]; then
    POD_NAMES+=("$POD_NAME")
    POD_ADDR[$POD_NAME]=$POD_HOST
  fi
  (( ${#POD_NAMES[@]} > 0 )) || fail bad-env "PODS is empty"
}
parse_pods
[[ $SEMISYNC_ACKS =~ ^[1-9][0-9]*$ ]] || fail bad-env "SEMISYNC_ACKS '$SEMISYNC_ACKS' must be a positive number"
[[ $EPOCH =~ ^[0-9]{1,18}$ ]] || fail bad-env "EPOCH '$EPOCH' must be a number"
# recorded_primary: the primary the hook recorded, the first line of
# $PRIMARY_FILE (the ConfigMap key that follows role changes) without
# whitespace, else $PRIMARY ("" when neither says).  the probes, which do not
# source this file, has its own first_line.
recorded_primary() {
  local v=""
  if [ -n "${PRIMARY_FILE:-}" ] && [ -r "$PRIMARY_FILE" ]; then IFS= read -r v < "$PRIMARY_FILE" || true; fi
  v=${v//[[:space:]]/}
  printf '%s' "${v:-${PRIMARY:-}}"
}
is_member() { [[ -n "${1:-}" && -n "${POD_ADDR[$1]+x}" ]]; }
# is_member_of X LIST...: X is one of LIST.  Pure.
is_member_of() { local x=$1 y; shift; for y in "$@"; do [ "$x" = "$y" ] && return 0; done; return 1; }
pod_host() { local a=${POD_ADDR[$1]}; a=${a%:*}; a=${a#[}; printf '%s' "${a%]}"; }
pod_port() { local a=${POD_ADDR[$1]}; printf '%s' "${a##*:}"; }
# ordinal of a StatefulSet pod name: the digits after the last '-'
pod_ordinal() {
  local n=${1##*-}
  [[ $n =~ ^[0-9]+$ ]] || return 1
  printf '%d' "$((10#$n))"
}

# SQL string literal (standard SQL quoting plus backslash escaping)
sql_quote() { local s=$1; s=${s//\\/\\\\}; s=${s//\'/\'\'}; printf "'%s'" "$s"; }

# load_secret VAR: VAR's value from the file named by ${VAR}_FILE when that is
# set (pods mount the credentials Secret as files: an environment is inherited
# by every process and readable in /proc/<pid>/environ), else from the
# environment.  Exact bytes, trailing newlines included.  Never exported: the
# programs the scripts run do not get it in their environment.
load_secret() {
  local var=$1 file_var=${1}_FILE
  if [ -n "${!file_var:-}" ]; then
    [ -r "${!file_var}" ] || fail bad-env "$file_var: ${!file_var} is not readable"
    IFS= read -r -d '' "$var" < "${!file_var}" || true
  fi
  export -n "$var"
}
load_secret MYSQL_ROOT_PASSWORD
load_secret REPLICATION_PASSWORD
# The operator account (issue 18.5): OPERATOR_USER@'%' with OPERATOR_PASSWORD
# (the credentials Secret's key operator-password) is the only account the
# scripts use over the network; root is root@'localhost', the socket of each
# server's own pod (init.sh, the agent's probes and operator-user).  Without
# OPERATOR_PASSWORD (a Secret made before the key existed) the scripts log in as
# root over TCP, as they always did.
OPERATOR_USER=mysqlhook
load_secret OPERATOR_PASSWORD

# ---------------------------------------------------------------- TLS
# Opt-in TLS with server verification for every TCP connection the scripts
# make (client tools through the option file below) and for replication
# (sql_make_replica).  Connections over the local socket need none.
#   TLS_MODE       `verify` = on; empty or unset = off; anything else: bad-env.
#                  Jobs get it in their environment.
#   TLS_MODE_FILE  server pods: a file (a ConfigMap key, which changes without
#                  a restart) whose first line, without whitespace, is the
#                  mode; when set and readable it wins over TLS_MODE.
#   TLS_CA         the CA bundle the servers' certificates are checked against
#                  [/etc/mysql/tls/ca.crt]; the same path exists in every
#                  server's own filesystem (MASTER_SSL_CA / SOURCE_SSL_CA).
# The mode is read once per run: a channel made under the other mode is made
# again by whoever finds it (replicating_from says it does not match).
TLS_CA=${TLS_CA:-/etc/mysql/tls/ca.crt}
# tls_mode: the mode as configured (file first, then environment).
tls_mode() {
  local v=${TLS_MODE:-}
  if [ -n "${TLS_MODE_FILE:-}" ] && [ -r "$TLS_MODE_FILE" ]; then
    v=""; IFS= read -r v < "$TLS_MODE_FILE" || true
  fi
  printf '%s' "${v//[[:space:]]/}"
}
TLS_VERIFY=0
case $(tls_mode) in
  verify) TLS_VERIFY=1 ;;
  "") ;;
  *) fail bad-env "TLS mode '$(tls_mode)' (TLS_MODE or TLS_MODE_FILE) must be 'verify' or empty" ;;
esac
if (( TLS_VERIFY )) && ! [ -r "$TLS_CA" ]; then
  fail bad-env "TLS_CA $TLS_CA is not readable (TLS mode verify needs the CA bundle)"
fi

# Credentials go into a private option file, never onto the command line.
CNF=$(mktemp "${TMPDIR:-/tmp}/hookcnf.XXXXXX")
chmod 600 "$CNF"
# cnf_value VALUE: an option-file value in double quotes (backslash and double
# quote escaped).  Pure.
cnf_value() { local v=$1; v=${v//\\/\\\\}; v=${v//\"/\\\"}; printf '"%s"' "$v"; }
write_cnf() {  # write_cnf USER PASSWORD
  {
    printf '[client]\nuser=%s\npassword=%s\n' "$1" "$(cnf_value "$2")"
    # MySQL 8.4 default auth is caching_sha2_password; over a non-TLS connection
    # the client must be allowed to fetch the server's RSA key
    # (RM 6.5.1 mysql client options, --get-server-public-key).
    if [ "$FLAVOR" = mysql ]; then printf 'get-server-public-key=1\n'; fi
    # TLS mode verify: every client tool (client, dump, binlog) reads this
    # group, so none connects without TLS nor to a server whose certificate
    # TLS_CA did not sign or that does not name the host connected to.
    # MySQL: --ssl-mode=VERIFY_IDENTITY, --ssl-ca (RM page
    #   connection-options.html, "Command Options for Encrypted Connections").
    # MariaDB: --ssl-ca (implies --ssl), --ssl-verify-server-cert (MariaDB KB:
    #   mariadb client options; Secure Connections Overview).
    if (( TLS_VERIFY )); then
      case $FLAVOR in
        mysql)   printf 'ssl-mode=VERIFY_IDENTITY\nssl-ca=%s\n' "$(cnf_value "$TLS_CA")" ;;
        mariadb) printf 'ssl-ca=%s\nssl-verify-server-cert\n' "$(cnf_value "$TLS_CA")" ;;
      esac
    fi
  } > "$CNF"
}
# Root's password is required without the operator account; with it, a Job of
# a cluster whose root is local only no longer gets it (the hook's
# rootRemote: drop).
[ -n "${OPERATOR_PASSWORD:-}" ] || : "${MYSQL_ROOT_PASSWORD:?MYSQL_ROOT_PASSWORD is required}"
# CNF_ROOT: root's option file, only while a cluster moves to the operator
# account (sql() falls back to it when a server does not know OPERATOR_USER
# yet: the account reaches each server through replication; the agent's
# operator-user).
CNF_ROOT=""
if [ -n "${OPERATOR_PASSWORD:-}" ]; then
  if [ -n "${MYSQL_ROOT_PASSWORD:-}" ]; then
    CNF_ROOT=$(mktemp "${TMPDIR:-/tmp}/hookcnf.XXXXXX"); chmod 600 "$CNF_ROOT"
    tmp_cnf=$CNF; CNF=$CNF_ROOT
    write_cnf root "$MYSQL_ROOT_PASSWORD"
    CNF=$tmp_cnf; unset tmp_cnf
  fi
  write_cnf "$OPERATOR_USER" "$OPERATOR_PASSWORD"
else
  write_cnf root "$MYSQL_ROOT_PASSWORD"
fi

# sql POD STATEMENTS: run on POD as root, tab separated rows on stdout, no header.
# SQL_TIMEOUT overrides the client-side cap for long waits.
# The statements go to the client on stdin, never as `-e` on its command line:
# some carry passwords (IDENTIFIED BY, MASTER_PASSWORD / SOURCE_PASSWORD), and a
# command line is readable by every process in /proc/<pid>/cmdline and lands in
# process-exec audit logs.  printf is a builtin: nothing is executed with the
# statements in its arguments (tests/scripts records every command line).
sql() {
  local pod=$1 q=$2 fmt=-N err rc=0
  [ -n "${SQL_VERTICAL:-}" ] && fmt=-E
  if [ -z "$CNF_ROOT" ]; then sql_as "$CNF" "$pod" "$q" "$fmt"; return; fi
  # Moving to the operator account: a server that refuses OPERATOR_USER (ER
  # 1045, nothing ran) is asked again as root, until root@'%' is dropped.
  err=$(mktemp "${TMPDIR:-/tmp}/sqlerr.XXXXXX")
  sql_as "$CNF" "$pod" "$q" "$fmt" 2>"$err" || rc=$?
  if (( rc != 0 )) && grep -q "ERROR 1045 .*'$OPERATOR_USER'@" "$err"; then
    rm -f "$err"
    sql_as "$CNF_ROOT" "$pod" "$q" "$fmt"
    return
  fi
  cat "$err" >&2; rm -f "$err"
  return $rc
}
# sql_as OPTION_FILE POD STATEMENTS FORMAT: one client call (see sql).
sql_as() {
  printf '%s\n' "$3" | timeout "${SQL_TIMEOUT:-$QUERY_TIMEOUT}" "$CLIENT" --defaults-extra-file="$1" \
    --protocol=TCP -h "$(pod_host "$2")" -P "$(pod_port "$2")" \
    --connect-timeout="$CONNECT_TIMEOUT" "$4" -B
}
reachable() {
  local e
  e=$(SQL_TIMEOUT=$((CONNECT_TIMEOUT + 5)) sql "$1" "SELECT 1" 2>&1 >/dev/null) && return 0
  tls_refused_log "$1" "$e"
  return 1
}
# tls_refused_log POD ERROR: in TLS mode verify, a connection refused over TLS
# (a certificate TLS_CA did not sign, or that does not name the host) looks
# like any unreachable server in the result line; say why in the log, once
# per POD and run.
declare -A TLS_REFUSED_LOGGED=()
tls_refused_log() {
  (( TLS_VERIFY )) && [ -z "${TLS_REFUSED_LOGGED[$1]+x}" ] || return 0
  case $2 in
    *SSL*|*TLS*|*[Cc]ertificate*)
      TLS_REFUSED_LOGGED[$1]=1
      log "$1: no verified TLS connection (TLS mode verify, CA $TLS_CA): ${2##*$'\n'}" ;;
  esac
  return 0
}
# wait_reachable POD SECONDS
wait_reachable() {
  local end=$((SECONDS + $2))
  until reachable "$1"; do
    (( SECONDS < end )) || return 1
    sleep 1
  done
}

# ================================================================ flavor SQL
# One function per operation; each runs its statement(s) on the POD given.

# read_only as the hook means it: 1 = no application writes, 0 = writable.
# MySQL: read_only (RM 7.1.8, sysvar_read_only). MariaDB: read_only.
sql_is_read_only() { sql "$1" "SELECT @@global.read_only"; }

# Fence: no client may write any more.
# MySQL: super_read_only=ON also stops SUPER/CONNECTION_ADMIN accounts and
#   implies read_only=ON (RM 7.1.8, sysvar_super_read_only).
# MariaDB: read_only=ON; accounts holding READ_ONLY ADMIN (SUPER before 11.0,
#   and any ALL PRIVILEGES account such as root) still bypass it, so
#   application accounts must not hold those privileges.
# Setting read_only waits for commits in progress; lock_wait_timeout bounds it.
sql_set_read_only() {
  case $FLAVOR in
    mysql)   sql "$1" "SET SESSION lock_wait_timeout=10; SET GLOBAL super_read_only=ON" ;;
    mariadb) sql "$1" "SET SESSION lock_wait_timeout=10; SET GLOBAL read_only=ON" ;;
  esac
}
# One attempt at read-only with a bounded wait for the locks it needs (the
# global read lock and the commit lock: a running statement or a commit that
# waits for a semi-sync acknowledgement blocks it until lock_wait_timeout).
# sql_try_read_only POD SECONDS
# MySQL: lock_wait_timeout (RM 7.1.8, sysvar_lock_wait_timeout), super_read_only.
sql_try_read_only() {
  local t=$2
  case $FLAVOR in
    mysql)   SQL_TIMEOUT=$((t + CONNECT_TIMEOUT + 5)) sql "$1" "SET SESSION lock_wait_timeout=$t; SET GLOBAL super_read_only=ON" ;;
    mariadb) SQL_TIMEOUT=$((t + CONNECT_TIMEOUT + 5)) sql "$1" "SET SESSION lock_wait_timeout=$t; SET GLOBAL read_only=ON" ;;
  esac
}
# 1 when no client can write: MySQL super_read_only (it implies read_only);
# MariaDB read_only (see the fencing caveat in README.md).
sql_is_fenced() {
  case $FLAVOR in
    mysql)   sql "$1" "SELECT @@global.super_read_only" ;;
    mariadb) sql "$1" "SELECT @@global.read_only" ;;
  esac
}
# tsv_fields LINE: the tab separated fields of LINE into the array TSV, empty
# fields kept (read with IFS=tab would merge adjacent tabs).  Pure.
tsv_fields() {
  local line=$1
  TSV=()
  while [[ $line == *$'\t'* ]]; do TSV+=("${line%%$'\t'*}"); line=${line#*$'\t'}; done
  TSV+=("$line")
}
# fence POD: make POD read-only (MySQL super_read_only) so that no client
# commit can succeed there any more, and cut off its clients: the agent's
# `fence` (agent/src/fence.rs, ported from here): read_only with a
# lock_wait_timeout of FENCE_LOCK_WAIT [2] s, blocked (a long statement, a held
# lock, a commit waiting for a semi-sync acknowledgement): the client sessions
# killed and again, FENCE_ATTEMPTS [4] times in all; once read-only, the client
# sessions killed once more and read-only verified.  With FENCE_SHUTDOWN=1
# (failover.sh) a server that a commit waiting for an acknowledgement that
# cannot come keeps writable (MySQL: KILL does not end that wait) is shut down
# instead: it stops answering and restarts read-only.
# A commit killed while it waited for its acknowledgement was never
# acknowledged to its client; it may stay in POD's binary log (an unacknowledged
# tail: POD is then reported rebuildNeeded if another server is promoted).
# Returns 0 when fenced (or shut down).
FENCE_LOCK_WAIT=${FENCE_LOCK_WAIT:-2}
AGENT_BIN=${AGENT_BIN:-$(dirname "${BASH_SOURCE[0]}")/mysql-hook-agent}
# agent_value WHAT OUT_VAR COMMAND [NAME=VALUE ...]: runs `mysql-hook-agent
# COMMAND` (stdin passed on) with the environment given and OUT_VAR naming a
# fresh file, into which the agent writes one value; prints that value when the
# command succeeded, logs its report line ("WHAT: ...") and returns 1 otherwise.
# The value comes from the file, never from parsing the report.
agent_value() {
  local what=$1 var=$2 cmd=$3 out tmp rc=0
  shift 3
  tmp=$(mktemp "${TMPDIR:-/tmp}/agent.XXXXXX")
  out=$(env "$@" "$var=$tmp" TERMINATION_LOG=/dev/null "$AGENT_BIN" "$cmd") || rc=$?
  if (( rc == 0 )); then cat "$tmp"; rm -f "$tmp"; return 0; fi
  rm -f "$tmp"
  log "$what: ${out:-the agent did not answer}"
  return 1
}
# catalog POD DIR [SINCE]: POD's application schemas and the statements that
# recreate its accounts, written into DIR by the agent's `catalog`
# (agent/src/catalog.rs, ported from here).  With SINCE (an earlier catalog's
# DIR) it returns 75 when they differ from that one, and says what changed in
# DIR/changes.
catalog() {
  local out rc=0
  out=$(CATALOG_POD=$1 CATALOG_OUT=$2 CATALOG_SINCE=${3:-} TERMINATION_LOG=/dev/null "$AGENT_BIN" catalog) || rc=$?
  log "catalog of $1: ${out:-the agent did not answer}"
  return $rc
}
fence() {
  local out
  if out=$(FENCE_POD=$1 FENCE_SHUTDOWN=${FENCE_SHUTDOWN:-0} TERMINATION_LOG=/dev/null "$AGENT_BIN" fence); then
    log "fence $1: $out"
    return 0
  fi
  log "fence $1: ${out:-the agent did not answer}"
  return 1
}

# Allow the administrative (root) session to write while applications still
# cannot: MySQL super_read_only=OFF, read_only stays ON (RM 7.1.8).
# MariaDB: root already bypasses read_only; nothing to do.
sql_set_admin_writable() {
  case $FLAVOR in
    mysql)   sql "$1" "SET GLOBAL super_read_only=OFF" ;;
    mariadb) : ;;
  esac
}
# Open for application writes.  Only bootstrap/failover/switchover call this.
sql_set_writable() {
  case $FLAVOR in
    mysql)   sql "$1" "SET GLOBAL super_read_only=OFF; SET GLOBAL read_only=OFF" ;;
    mariadb) sql "$1" "SET GLOBAL read_only=OFF" ;;
  esac
}

# Identity used as the origin part of this server's own GTIDs.
# MySQL: server_uuid (RM 19.1.6, replication-options.html#sysvar_server_uuid).
# MariaDB: server_id (domain-server_id-seq GTIDs).
sql_server_identity() {
  case $FLAVOR in
    mysql)   sql "$1" "SELECT @@global.server_uuid" ;;
    mariadb) sql "$1" "SELECT @@global.server_id" ;;
  esac
}

# Every transaction this server has executed (and binlogged).
# MySQL: gtid_executed, a GTID set (RM 19.1.6.5, sysvar_gtid_executed).
# MariaDB: gtid_binlog_state, the last GTID per (domain, server_id) pair in the
#   binary log (with log_slave_updates this includes replicated transactions).
sql_gtid_executed() {
  case $FLAVOR in
    mysql)   sql "$1" "SELECT REPLACE(@@global.gtid_executed, '\n', '')" ;;
    mariadb) sql "$1" "SELECT @@global.gtid_binlog_state" ;;
  esac
}
# The position to report / to wait for (what a replica must have executed to
# be as far as this server).  MySQL: gtid_executed.  MariaDB: gtid_binlog_pos
# (last GTID per domain in the binary log).
sql_gtid_position() {
  case $FLAVOR in
    mysql)   sql "$1" "SELECT REPLACE(@@global.gtid_executed, '\n', '')" ;;
    mariadb) sql "$1" "SELECT @@global.gtid_binlog_pos" ;;
  esac
}

# sql_gtid_received POD: what POD executed plus what it received and has not
# applied yet (in its relay log): what it would hold once it applied its relay
# log.  The agent's `received` (agent/src/relay.rs, ported from here: MySQL's
# RECEIVED_TRANSACTION_SET; MariaDB's relay log read when the server does not
# know what it received, after a restart).  Returns 1 when it cannot say (the
# relay log could not be read to its end within QUERY_TIMEOUT: a short answer
# would promote the wrong server, issue 31.5).
sql_gtid_received() {
  agent_value "what $1 received" RECEIVED_OUT received RECEIVED_POD="$1"
}

# sql_drain_relay_log POD SECONDS: POD applies everything it has received
# (its receiver must be stopped: nothing new arrives) without losing any of
# it; 0 when done within SECONDS, 1 otherwise (the applier keeps running).
# The agent's `drain` (agent/src/relay.rs, ported from here; MariaDB applies a
# restarted replica's relay log by file position, which its GTID mode would
# have deleted).
sql_drain_relay_log() {
  local out
  if out=$(DRAIN_POD=$1 DRAIN_SECONDS=$2 TERMINATION_LOG=/dev/null "$AGENT_BIN" drain); then
    log "drain $1: $out"
    return 0
  fi
  log "drain $1: ${out:-the agent did not answer}"
  return 1
}

# Wait until POD has executed GTIDS; prints nothing, returns 0 when reached.
# MySQL: WAIT_FOR_EXECUTED_GTID_SET(set, timeout) -> 0 reached, 1 timeout
#   (RM 14.18.2).
# MariaDB: MASTER_GTID_WAIT(pos, timeout) -> 0 reached, -1 timeout; it waits
#   for the replica SQL thread (gtid_slave_pos); a state is reduced to its
#   position (per domain the highest seq_no) first.
sql_wait_executed() {
  local pod=$1 gtids=$2 t=${3:-$WAIT_TIMEOUT} r
  [ -n "$gtids" ] || return 0
  case $FLAVOR in
    mysql)   r=$(SQL_TIMEOUT=$((t + 30)) sql "$pod" "SELECT WAIT_FOR_EXECUTED_GTID_SET($(sql_quote "$gtids"), $t)") ;;
    mariadb) r=$(SQL_TIMEOUT=$((t + 30)) sql "$pod" "SELECT MASTER_GTID_WAIT($(sql_quote "$(mdb_pos_max "$gtids" "")"), $t)") ;;
  esac
  [ "$r" = 0 ]
}

# --- GTID texts ----------------------------------------------------------------
# Every comparison of GTID texts is the agent's `gtid` (agent/src/gtid_calc.rs,
# ported from the bash here; the same strict parsers and algebra as the hook's,
# protocol/src/gtid): MySQL GTID sets, MariaDB GTID lists.  A text that does not
# parse is never compared: the script ends with `corrupt` (issue 30.2).  The
# optional POD argument some callers pass is ignored: no comparison needs a
# server.
# gtid_calc OP ARGS...: exit 0 holds (text ops print the text), 1 does not.
gtid_calc() {
  local rc=0
  "$AGENT_BIN" gtid "$@" || rc=$?
  (( rc < 2 )) || fail corrupt "a GTID text that does not parse (gtid $1; the log says which)"
  return $rc
}
# gtid_subset A B: every transaction of A is in B (MySQL GTID_SUBSET; MariaDB:
#   every (domain, server_id, seq) of A is in B with a seq at least as high).
gtid_subset() { gtid_calc subset "$1" "$2"; }
# gtid_contains A B: A holds every transaction of B (executed+received sets).
#   MariaDB compares per server_id as well as per domain: two histories of the
#   same length written by different primaries are not the same.
gtid_contains() { gtid_calc contains "$1" "$2"; }
# gtid_ge A B: as a position, A is at least as far as B.
gtid_ge() { gtid_calc ge "$1" "$2"; }
# gtid_within START POS: a binary log that began at START can continue a dump
#   taken at POS.
gtid_within() { gtid_calc within "$1" "$2"; }
# gtid_subtract A B: the part of A that B lacks, as text (for reports).
gtid_subtract() { gtid_calc subtract "$1" "$2"; }
# gtid_union SET...: one text (canonical).
gtid_union() { gtid_calc union "$@"; }
# gtid_own_errant SET OTHERS IDENTITY: SET holds a transaction that originated
#   on IDENTITY (server_uuid; MariaDB server_id) and that OTHERS lacks.
gtid_own_errant() { gtid_calc own-errant "$1" "$2" "$3"; }
# mdb_pos_max LIST...: MariaDB, per domain the GTID with the highest seq_no.
mdb_pos_max() { gtid_calc position "$@"; }

# --- values read from stores, files and servers (issue 30.2) ------------------
# bash evaluates a variable's text inside (( )), $(( )) and array subscripts as
# an expression, and `BASH_VERSINFO[$(cmd)0]` there runs cmd.  So no value read
# from a backup store, a file or a server reaches them before one of these has
# accepted its whole text: numbers are decimal digits; GTID texts never reach
# bash arithmetic at all (see gtid_calc).  Anything else is refused by the
# reader as `corrupt`.
UINT_RE='^[0-9]{1,18}$'
uint_ok() { [[ $1 =~ $UINT_RE ]]; }
# gtid_text_ok TEXT: TEXT is a GTID set (MySQL) or GTID list (MariaDB), or empty.
gtid_text_ok() { "$AGENT_BIN" gtid ok "$1" 2>/dev/null; }

# split_errant BASE MEMBER...: with EXEC[m] (executed set) and IDENT[m]
# (server identity) of each MEMBER, sets ERRANT (members holding a transaction
# they originated themselves that neither BASE -- e.g. the old primary's
# executed set, "-" when there is none -- nor any other member has) and
# NONERRANT (the others), both in the order given.  The agent's `gtid errant`
# decides; a sole member without BASE is never errant.
split_errant() {
  local base=$1 p out args=(); shift
  for p in "$@"; do args+=("$p" "${IDENT[$p]}" "${EXEC[$p]}"); done
  out=$("$AGENT_BIN" gtid errant "$base" "${args[@]}") || fail corrupt "the members' GTID sets do not parse (the log says which)"
  ERRANT=() NONERRANT=()
  [ -z "$out" ] || mapfile -t ERRANT <<< "$out"
  for p in "$@"; do is_member_of "$p" "${ERRANT[@]}" || NONERRANT+=("$p"); done
}
# choose_most_advanced NAME...: the first NAME (callers list the preferred
# first) whose set CAND_SET[NAME] contains every other NAME's; returns 1 when
# none does (diverged).  The agent's `gtid choose` decides.
declare -A CAND_SET=()
choose_most_advanced() {
  local p args=()
  for p in "$@"; do args+=("$p" "${CAND_SET[$p]}"); done
  gtid_calc choose "${args[@]}"
}

# --- replica status ----------------------------------------------------------
# sql_replica_status POD: sets RS_CONFIGURED (0/1), RS_HOST, RS_PORT, RS_IO
# (Yes/No/Connecting), RS_SQL, RS_LAG, RS_ERR,
# RS_IO_ERRNO / RS_SQL_ERRNO (0: none),
# RS_SSL / RS_SSL_VERIFY (Yes/No: the channel uses TLS / verifies the source's
# certificate; MySQL may say Ignored), RS_SSL_CA (its CA file).
# MySQL: SHOW REPLICA STATUS (RM 15.7.7.35), Source_*/Replica_* field names.
# MariaDB: SHOW SLAVE STATUS, Master_*/Slave_* field names.
sql_replica_status() {
  local out line k v
  case $FLAVOR in
    mysql)   out=$(SQL_VERTICAL=1 sql "$1" 'SHOW REPLICA STATUS') ;;
    mariadb) out=$(SQL_VERTICAL=1 sql "$1" 'SHOW SLAVE STATUS') ;;
  esac
  RS_CONFIGURED=0 RS_HOST="" RS_PORT="" RS_IO="" RS_SQL="" RS_LAG="" RS_ERR=""
  RS_IO_ERRNO=0 RS_SQL_ERRNO=0
  RS_SSL="" RS_SSL_VERIFY="" RS_SSL_CA=""
  while IFS= read -r line; do
    [[ $line =~ ^[[:space:]]*([A-Za-z_]+):[[:space:]]?(.*)$ ]] || continue
    k=${BASH_REMATCH[1]} v=${BASH_REMATCH[2]}
    case $k in
      Source_Host|Master_Host) RS_HOST=$v; [ -n "$v" ] && RS_CONFIGURED=1 ;;
      Source_Port|Master_Port) RS_PORT=$v ;;
      Replica_IO_Running|Slave_IO_Running) RS_IO=$v ;;
      Replica_SQL_Running|Slave_SQL_Running) RS_SQL=$v ;;
      Seconds_Behind_Source|Seconds_Behind_Master) RS_LAG=$v ;;
      Source_SSL_Allowed|Master_SSL_Allowed) RS_SSL=$v ;;
      Source_SSL_Verify_Server_Cert|Master_SSL_Verify_Server_Cert) RS_SSL_VERIFY=$v ;;
      Source_SSL_CA_File|Master_SSL_CA_File) RS_SSL_CA=$v ;;
      Last_IO_Error|Last_SQL_Error) [ -n "$v" ] && RS_ERR+="${RS_ERR:+; }$v" ;;
      Last_IO_Errno) RS_IO_ERRNO=${v:-0} ;;
      Last_SQL_Errno) RS_SQL_ERRNO=${v:-0} ;;
    esac
  done <<< "$out"
  return 0
}
# replicating_from POD SRC: POD is configured to replicate from SRC, both
# threads run, and the channel's TLS is what the TLS mode asks for (a channel
# made before the mode changed is not "replicating": callers make it again).
replicating_from() { streaming_from "$1" "$2" && replica_tls_ok "$1"; }
# streaming_from POD SRC: POD is configured to replicate from SRC and both
# threads run, whatever the channel's TLS (for callers to which it does not
# matter: switchover.sh's target stops replicating when it is promoted).
streaming_from() {
  sql_replica_status "$1"
  [ "$RS_CONFIGURED" = 1 ] && [ "$RS_HOST" = "$(pod_host "$2")" ] &&
    [ "$RS_PORT" = "$(pod_port "$2")" ] && [ "$RS_IO" = Yes ] && [ "$RS_SQL" = Yes ]
}
# replica_tls_ok POD: the channel read by sql_replica_status (RS_SSL,
# RS_SSL_VERIFY, RS_SSL_CA) matches the TLS mode: verify -> TLS on, the
# source's certificate verified against TLS_CA; off -> not the channel verify
# made (its CA is not TLS_CA).  Off does not demand TLS off: a channel keeps
# what the server's defaults gave it (MariaDB 11.3+ makes new channels TLS
# by default); only one made in verify mode, which would fail against
# servers that no longer serve the certificate, is made again.  A mismatch
# is logged once per POD and run (callers poll).
declare -A TLS_MISMATCH_LOGGED=()
replica_tls_ok() {
  if (( TLS_VERIFY )); then
    [ "$RS_SSL" = Yes ] && [ "$RS_SSL_VERIFY" = Yes ] && [ "$RS_SSL_CA" = "$TLS_CA" ] && return 0
  else
    [ "$RS_SSL_CA" != "$TLS_CA" ] && return 0
  fi
  if [ -z "${TLS_MISMATCH_LOGGED[$1]+x}" ]; then
    TLS_MISMATCH_LOGGED[$1]=1
    local want="off (no TLS)"
    (( TLS_VERIFY )) && want="verify (TLS, certificate checked against $TLS_CA)"
    log "$1 replicates from $RS_HOST:$RS_PORT $(tls_words) but the TLS mode is $want: its replication has to be set up again"
  fi
  return 1
}
# tls_words: the channel read by sql_replica_status, in plain words.
tls_words() {
  if [ "$RS_SSL" != Yes ]; then printf 'without TLS'
  elif [ "$RS_SSL_VERIFY" != Yes ]; then printf 'over TLS without checking the certificate'
  else printf 'over TLS, certificate checked against %s' "${RS_SSL_CA:-the default CAs}"; fi
}

# Stop receiving (the applier keeps applying what was already received).
# MySQL: STOP REPLICA IO_THREAD (RM 15.4.2.5). MariaDB: STOP SLAVE IO_THREAD.
# A server that is not a replica answers with an error we ignore.
sql_stop_io_thread() {
  case $FLAVOR in
    mysql)   sql "$1" "STOP REPLICA IO_THREAD" 2>/dev/null || true ;;
    mariadb) sql "$1" "STOP SLAVE IO_THREAD" 2>/dev/null || true ;;
  esac
}
# Ensure the applier runs (it may have been stopped by an earlier attempt).
# MySQL: START REPLICA SQL_THREAD (RM 15.4.2.4). MariaDB: START SLAVE SQL_THREAD.
sql_start_sql_thread() {
  case $FLAVOR in
    mysql)   sql "$1" "START REPLICA SQL_THREAD" 2>/dev/null || true ;;
    mariadb) sql "$1" "START SLAVE SQL_THREAD" 2>/dev/null || true ;;
  esac
}
# Stop replication and forget the source entirely (promotion).
# MySQL: STOP REPLICA (RM 15.4.2.5); RESET REPLICA ALL (RM 15.4.2.3).
# MariaDB: STOP SLAVE; RESET SLAVE ALL (gtid_slave_pos is kept).
sql_reset_replica_all() {
  case $FLAVOR in
    mysql)   sql "$1" "STOP REPLICA; RESET REPLICA ALL" ;;
    mariadb) sql "$1" "STOP SLAVE; RESET SLAVE ALL" ;;
  esac
}

# Make POD a (semi-sync) replica of SRC_POD, GTID auto-positioned.  POD is
# made read-only first (verified; returns 1 otherwise): a replica is never
# writable.  Returns non-zero on any failure (callers decide).
# MySQL: STOP REPLICA (RM 15.4.2.5);
#   CHANGE REPLICATION SOURCE TO SOURCE_HOST, SOURCE_PORT, SOURCE_USER,
#   SOURCE_PASSWORD, SOURCE_AUTO_POSITION=1, GET_SOURCE_PUBLIC_KEY=1
#   (RM 15.4.2.2); rpl_semi_sync_replica_enabled=ON (RM 19.1.6.3) before the
#   receiver starts; START REPLICA (RM 15.4.2.4).
# MariaDB: STOP SLAVE; gtid_slave_pos := per domain max(gtid_binlog_pos,
#   gtid_slave_pos) so that transactions this server wrote itself (as a former
#   primary, already checked not to be errant) are not fetched again;
#   CHANGE MASTER TO ... MASTER_USE_GTID=slave_pos; rpl_semi_sync_slave_enabled=ON;
#   START SLAVE.
# TLS: the channel's TLS options as the mode says (repl_tls_sql).
sql_make_replica() {
  local pod=$1 src=$2 h p pw
  h=$(sql_quote "$(pod_host "$src")"); p=$(pod_port "$src")
  pw=$(sql_quote "${REPLICATION_PASSWORD:?REPLICATION_PASSWORD is required}")
  # a server being seeded holds a partial copy: replicating into it would
  # replay history over half-loaded tables; its agent joins it when done
  if sql_is_seeding "$pod"; then log "$pod: being seeded; not made a replica"; return 1; fi
  # never a writable replica: read-only first, and verified
  sql_try_read_only "$pod" "$FENCE_LOCK_WAIT" || { log "$pod: cannot be made read-only"; return 1; }
  [ "$(sql_is_fenced "$pod")" = 1 ] || { log "$pod: still writable"; return 1; }
  sql_disable_semisync_source "$pod" || return 1
  # the channel's CA now (in a subshell: the caller's RS_* stay as they are)
  local cur_ca
  cur_ca=$(sql_replica_status "$pod"; printf '%s' "$RS_SSL_CA")
  case $FLAVOR in
    mysql)
      sql "$pod" "STOP REPLICA;
        CHANGE REPLICATION SOURCE TO SOURCE_HOST=$h, SOURCE_PORT=$p,
          SOURCE_USER='$REPL_USER', SOURCE_PASSWORD=$pw,
          SOURCE_AUTO_POSITION=1, GET_SOURCE_PUBLIC_KEY=1,
          SOURCE_CONNECT_RETRY=5, SOURCE_RETRY_COUNT=86400$(repl_tls_sql "$cur_ca");
        SET GLOBAL rpl_semi_sync_replica_enabled=ON;
        START REPLICA" || return 1 ;;
    mariadb)
      local binpos slavepos pos
      sql "$pod" "STOP SLAVE" || return 1
      binpos=$(sql "$pod" "SELECT @@global.gtid_binlog_pos") || return 1
      slavepos=$(sql "$pod" "SELECT @@global.gtid_slave_pos") || return 1
      pos=$(mdb_pos_max "$binpos" "$slavepos")
      if [ "$pos" != "$slavepos" ]; then
        sql "$pod" "SET GLOBAL gtid_slave_pos=$(sql_quote "$pos")" || return 1
      fi
      sql "$pod" "CHANGE MASTER TO MASTER_HOST=$h, MASTER_PORT=$p,
          MASTER_USER='$REPL_USER', MASTER_PASSWORD=$pw,
          MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=5$(repl_tls_sql "$cur_ca");
        SET GLOBAL rpl_semi_sync_slave_enabled=ON;
        START SLAVE" || return 1 ;;
  esac
}

# repl_tls_sql CURRENT_CA: the channel's TLS options for CHANGE MASTER TO /
# CHANGE REPLICATION SOURCE TO, each after ", ", as the TLS mode says.
# Verify: TLS on, the source's certificate checked against TLS_CA.  Off:
# nothing (the server's defaults), except for a channel verify made (its CA,
# CURRENT_CA, is TLS_CA): the statement keeps every option it is not given,
# so that one is turned off explicitly.  Pure.
# MySQL: SOURCE_SSL, SOURCE_SSL_CA, SOURCE_SSL_VERIFY_SERVER_CERT (RM 15.4.2.2;
#   with the CA the source's certificate and host name are verified).
# MariaDB: MASTER_SSL, MASTER_SSL_CA, MASTER_SSL_VERIFY_SERVER_CERT (MariaDB KB:
#   CHANGE MASTER TO; the certificate must name MASTER_HOST).
repl_tls_sql() {
  local on=0 ca="''" pre=MASTER
  [ "$FLAVOR" = mysql ] && pre=SOURCE
  if (( TLS_VERIFY )); then on=1 ca=$(sql_quote "$TLS_CA")
  elif [ "${1:-}" != "$TLS_CA" ]; then return 0; fi
  printf ', %s_SSL=%s, %s_SSL_CA=%s, %s_SSL_VERIFY_SERVER_CERT=%s' "$pre" "$on" "$pre" "$ca" "$pre" "$on"
}

# repoint_member POD NEW: after NEW was promoted, make POD its replica unless
# POD holds transactions NEW lacks (then POD is only made read-only and is to
# be rebuilt).  Sets REPOINT_RESULT (replica | rebuild) and returns 0, or
# returns 1 with REPOINT_ERR set.  Never exits the script: repointing is best
# effort, the agents (join.sh every AGENT_INTERVAL s) finish what fails here.
REPOINT_APPLY_WAIT=${REPOINT_APPLY_WAIT:-30}  # seconds for a member to apply its relay log first
repoint_member() {
  local p=$1 new=$2 e nexec
  REPOINT_RESULT="" REPOINT_ERR=""
  if replicating_from "$p" "$new"; then REPOINT_RESULT=replica; return 0; fi
  # already NEW's replica over a channel of the other TLS mode: made again
  # below, and CHANGE MASTER deletes the relay log; apply what it received
  # (possibly acknowledged to clients) first, as join.sh does
  if streaming_from "$p" "$new"; then
    sql_stop_io_thread "$p"
    sql_drain_relay_log "$p" "$REPOINT_APPLY_WAIT" ||
      { REPOINT_ERR="$p: did not apply its relay log within ${REPOINT_APPLY_WAIT}s"; return 1; }
  fi
  # the member first, then the primary: the primary's set only grows
  e=$(sql_gtid_executed "$p" 2>&1) || { REPOINT_ERR="$p: ${e##*$'\n'}"; return 1; }
  nexec=$(sql_gtid_executed "$new" 2>&1) || { REPOINT_ERR="$new: ${nexec##*$'\n'}"; return 1; }
  if ! gtid_subset "$e" "$nexec" "$new"; then
    log "$p has transactions $new lacks: $(gtid_subtract "$e" "$nexec" "$new" 2>/dev/null || true); not repointed"
    sql_try_read_only "$p" "$FENCE_LOCK_WAIT" >/dev/null 2>&1 || true
    REPOINT_RESULT=rebuild; return 0
  fi
  if ! e=$(sql_make_replica "$p" "$new" 2>&1); then
    REPOINT_ERR="$p: ${e##*$'\n'}"; return 1
  fi
  REPOINT_RESULT=replica
}
# repoint_all NEW POD...: repoint_member for each POD; sets the arrays
# REPOINTED, REBUILD, REPOINT_FAILED (the reason of each failure is logged).
repoint_all() {
  local new=$1 p; shift
  REPOINTED=() REBUILD=() REPOINT_FAILED=()
  for p in "$@"; do
    if repoint_member "$p" "$new"; then
      case $REPOINT_RESULT in
        replica) REPOINTED+=("$p") ;;
        rebuild) REBUILD+=("$p") ;;
      esac
    else
      log "repointing $p to $new failed (the agents finish it): $REPOINT_ERR"
      REPOINT_FAILED+=("$p")
    fi
  done
}

# Lossless semi-synchronous source: wait AFTER_SYNC (binlog synced, before the
# engine commit becomes visible), for one acknowledgement, with a timeout so
# long the source never silently reverts to asynchronous replication, and keep
# waiting even when no replica is connected.
# MySQL (RM 19.1.6.2, 19.4.10.2): rpl_semi_sync_source_wait_point,
#   rpl_semi_sync_source_wait_for_replica_count, rpl_semi_sync_source_timeout,
#   rpl_semi_sync_source_wait_no_replica, rpl_semi_sync_source_enabled
#   (plugin semisync_source loaded by my.cnf).
# MariaDB (built in): rpl_semi_sync_master_wait_point, _timeout,
#   _wait_no_slave, _enabled (always exactly one acknowledgement).
# semisync_source_sql true|false: the statements that turn the semi-sync
# source on (as above) or off.  MySQL waits for SEMISYNC_ACKS [1]
# acknowledgements (rpl_semi_sync_source_wait_for_replica_count, RM
# 19.4.10.2); MariaDB has exactly one.  Pure.
semisync_source_sql() {
  case $FLAVOR:$1 in
    mysql:true) printf '%s' "SET GLOBAL rpl_semi_sync_source_wait_point=AFTER_SYNC;
      SET GLOBAL rpl_semi_sync_source_wait_for_replica_count=$SEMISYNC_ACKS;
      SET GLOBAL rpl_semi_sync_source_timeout=$SEMISYNC_TIMEOUT_MS;
      SET GLOBAL rpl_semi_sync_source_wait_no_replica=ON;
      SET GLOBAL rpl_semi_sync_source_enabled=ON;" ;;
    mariadb:true) printf '%s' "SET GLOBAL rpl_semi_sync_master_wait_point=AFTER_SYNC;
      SET GLOBAL rpl_semi_sync_master_timeout=$SEMISYNC_TIMEOUT_MS;
      SET GLOBAL rpl_semi_sync_master_wait_no_slave=ON;
      SET GLOBAL rpl_semi_sync_master_enabled=ON;" ;;
    mysql:*)   printf '%s' "SET GLOBAL rpl_semi_sync_source_enabled=OFF;" ;;
    mariadb:*) printf '%s' "SET GLOBAL rpl_semi_sync_master_enabled=OFF;" ;;
  esac
}
sql_enable_semisync_source() { sql "$1" "$(semisync_source_sql true)"; }
# Single-member cluster: no replica can acknowledge, so the source must not wait.
sql_disable_semisync_source() { sql "$1" "$(semisync_source_sql false)"; }
# promote_sql IS_REPLICA(0|1) SEMISYNC(true|false): one batch that makes a
# fenced server the primary -- stop replication and forget the source (when it
# is a replica), semi-sync source on or off, then writable.  Pure.
# MySQL: STOP REPLICA, RESET REPLICA ALL (RM 15.4.2.5, 15.4.2.3),
#   super_read_only=OFF, read_only=OFF (RM 7.1.8).
# MariaDB: STOP SLAVE, RESET SLAVE ALL, read_only=OFF.
promote_sql() {
  local q=""
  if [ "$1" = 1 ]; then
    case $FLAVOR in
      mysql)   q+="STOP REPLICA; RESET REPLICA ALL;" ;;
      mariadb) q+="STOP SLAVE; RESET SLAVE ALL;" ;;
    esac
  fi
  q+=$(semisync_source_sql "$2")
  printf '%s %s' "$q" "$(open_with_epoch_sql)"
}
# sql_epoch POD: the epoch POD was opened in (`_mysqlhook.epoch`, see
# open_with_epoch_sql), as the server prints a BIGINT; empty or an error when it
# never was (no table or row: never promoted, or before epochs).  Callers only
# compare it as text with the validated EPOCH: it reaches no expression or SQL.
sql_epoch() { sql "$1" "SELECT epoch FROM _mysqlhook.epoch WHERE id = 1" 2>/dev/null; }
# own_promotion POD: POD is writable, replicates from nobody and carries this
# Job's EPOCH: an earlier run of this very Job opened it (a pod that died after
# the promotion), so a rerun may adopt it.  Any other writable member is an old
# primary a cut failover could not fence (issue 31.1), never adopted.  Sets RS_*.
own_promotion() {
  [ "$(sql_is_read_only "$1")" = 0 ] || return 1
  sql_replica_status "$1"
  [ "$RS_CONFIGURED" = 0 ] && [ "$(sql_epoch "$1")" = "$EPOCH" ]
}
# open_with_epoch_sql: the statements that make a server writable as the primary
# of EPOCH (issue 31.1): the epoch first, then writes, so a writable server always
# knows the epoch it was promoted in and its agent never takes it for a stale old
# primary. Local only (sql_log_bin=0: never replicated, never errant; _mysqlhook is
# never dumped). MySQL: with super_read_only OFF and read_only still ON only the
# operator account (CONNECTION_ADMIN) may write.
open_with_epoch_sql() {
  local epoch="SET SESSION sql_log_bin=0; CREATE DATABASE IF NOT EXISTS _mysqlhook;
    CREATE TABLE IF NOT EXISTS _mysqlhook.epoch (id INT PRIMARY KEY, epoch BIGINT NOT NULL);
    REPLACE INTO _mysqlhook.epoch VALUES (1, $EPOCH); SET SESSION sql_log_bin=1;"
  case $FLAVOR in
    mysql)   printf '%s' "SET GLOBAL super_read_only=OFF; $epoch SET GLOBAL read_only=OFF" ;;
    mariadb) printf '%s' "$epoch SET GLOBAL read_only=OFF" ;;
  esac
}
# sql_promote POD SEMISYNC: promote_sql on POD (one client call: the write
# freeze of a switchover is counted in client calls).
sql_promote() {
  local pod=$1
  sql_replica_status "$pod"
  sql "$pod" "$(promote_sql "$RS_CONFIGURED" "$2")"
}
# 1 when semi-sync source is enabled.
sql_semisync_source_enabled() {
  case $FLAVOR in
    mysql)   sql "$1" "SELECT @@global.rpl_semi_sync_source_enabled" ;;
    mariadb) sql "$1" "SELECT @@global.rpl_semi_sync_master_enabled" ;;
  esac
}
# Number of semi-sync replicas connected to POD.
# MySQL: status Rpl_semi_sync_source_clients (RM 7.1.10). MariaDB: Rpl_semi_sync_master_clients.
sql_semisync_clients() {
  local v
  case $FLAVOR in
    mysql)   v=$(sql "$1" "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_source_clients'") ;;
    mariadb) v=$(sql "$1" "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_clients'") ;;
  esac
  printf '%s' "${v##*[[:space:]]}"
}

# The replication account, created on the primary (replicated).  It may
# replicate and nothing else: its password is in every pod, and the scripts
# do everything else (dumps included) as root.  REVOKE first, so a rerun also
# narrows an account an older version created with more.
# MySQL: CREATE USER (RM 15.7.1.3), ALTER USER (RM 15.7.1.1), REVOKE ALL
#   PRIVILEGES, GRANT OPTION (RM 15.7.1.8), GRANT REPLICATION SLAVE (RM 8.2.2:
#   what a replica's receiver needs to read the binary log).
# MariaDB: the same statements; REPLICATION SLAVE alone lets a replica connect
#   and read the binary log, semi-sync acknowledgements included.
sql_create_repl_user() {
  local pw
  pw=$(sql_quote "${REPLICATION_PASSWORD:?REPLICATION_PASSWORD is required}")
  sql "$1" "CREATE USER IF NOT EXISTS '$REPL_USER'@'%' IDENTIFIED BY $pw;
    ALTER USER '$REPL_USER'@'%' IDENTIFIED BY $pw;
    REVOKE ALL PRIVILEGES, GRANT OPTION FROM '$REPL_USER'@'%';
    GRANT REPLICATION SLAVE ON *.* TO '$REPL_USER'@'%'"
}
# Can the repl account log in with the current password? (skip re-creating it)
repl_user_ok() {
  local tmp=$CNF rc=0
  CNF=$(mktemp "${TMPDIR:-/tmp}/hookcnf.XXXXXX"); chmod 600 "$CNF"
  write_cnf "$REPL_USER" "$REPLICATION_PASSWORD"
  SQL_TIMEOUT=$((CONNECT_TIMEOUT + 5)) sql "$1" "SELECT 1" >/dev/null 2>&1 || rc=1
  rm -f "$CNF"; CNF=$tmp
  return $rc
}

# Application schemas (what a backup dumps).  The hook's own marker schema
# _mysqlhook (written by restore.sh) is excluded, and so are MariaDB's
# '#mysql50#...' names: any directory in the data dir shows up as a schema,
# e.g. `#mysql50#lost+found` on an ext4 volume.
sql_user_schemas() {
  sql "$1" "SELECT schema_name FROM information_schema.schemata
    WHERE schema_name NOT IN ('mysql','sys','information_schema','performance_schema','_mysqlhook')
      AND schema_name NOT LIKE '#mysql50#%'
    ORDER BY schema_name"
}
# Binary log files present on POD, oldest first (name<TAB>size).
# MySQL: SHOW BINARY LOGS (RM page show-binary-logs.html). MariaDB: SHOW BINARY LOGS.
sql_binlog_files() { sql "$1" "SHOW BINARY LOGS" | while IFS=$'\t' read -r f s _; do printf '%s\t%s\n' "$f" "$s"; done; }

# ================================================================ client tools

# dump_cmd POD OUTFILE DB...: consistent logical dump with the GTID position.
# MySQL: mysqldump (RM 6.5.4) --single-transaction --source-data=2
#   --set-gtid-purged=ON (writes SET @@GLOBAL.GTID_PURGED and SQL_LOG_BIN=0).
# MariaDB: mariadb-dump --single-transaction --master-data=2 --gtid (writes a
#   commented "SET GLOBAL gtid_slave_pos='...'", near the end of the file).
# OUTFILE ending in .gz: the dump is compressed as it streams (gzip -1), so no
# uncompressed copy ever takes space on the staging volume; a failing dump
# fails the pipeline (pipefail).
dump_cmd() {
  local pod=$1 out=$2; shift 2
  local -a args=(--defaults-extra-file="$CNF" --protocol=TCP -h "$(pod_host "$pod")"
    -P "$(pod_port "$pod")"
    --single-transaction --routines --events --triggers --hex-blob
    --add-drop-database --default-character-set=utf8mb4)
  case $FLAVOR in
    mysql)   args+=(--source-data=2 --set-gtid-purged=ON) ;;
    mariadb) args+=(--master-data=2 --gtid) ;;
  esac
  case $out in
    *.gz) "$DUMP" "${args[@]}" --databases "$@" | gzip -1 > "$out" ;;
    *)    "$DUMP" "${args[@]}" --result-file="$out" --databases "$@" ;;
  esac
}
# dump_file DIR: the dump of the backup in DIR, compressed (dump.sql.gz) or not.
dump_file() {
  if [ -f "$1/dump.sql.gz" ]; then printf '%s' "$1/dump.sql.gz"; else printf '%s' "$1/dump.sql"; fi
}
# dump_cat FILE: a dump's SQL on stdout, whether or not it is gzip'd.
dump_cat() {
  case $1 in
    *.gz) gzip -dc -- "$1" ;;
    *) cat -- "$1" ;;
  esac
}
# dump_gtid FILE: the GTID position the dump tool recorded in FILE (canonical
# text, empty when none); returns 1 when it is not a GTID text of the flavor.
# The agent's `dump-position` (agent/src/dump.rs, ported from here) reads only
# the tool's own statement: MySQL's header, MariaDB's trailer, never a match
# inside the users' routines and comments (issue 34.12).
dump_gtid() {
  dump_cat "$1" | agent_value "the position of $1" DUMP_POSITION_OUT dump-position
}
# binlog_fetch POD DIR FIRST_FILE: copy binary logs FIRST_FILE..last from POD.
# MySQL: mysqlbinlog (RM 6.6.9) --read-from-remote-server --raw --to-last-log.
# MariaDB: mariadb-binlog with the same options.
binlog_fetch() {
  local pod=$1 dir=$2 first=$3
  SQL_TIMEOUT=${BINLOG_TIMEOUT:-1800} timeout "${BINLOG_TIMEOUT:-1800}" \
    "$BINLOG" --defaults-extra-file="$CNF" --read-from-remote-server --raw --to-last-log \
    --protocol=TCP --host="$(pod_host "$pod")" --port="$(pod_port "$pod")" \
    --result-file="$dir/" "$first"
}
# binlog_replay POD START_GTID UNTIL FILE...: replay binary logs into POD,
# transactions after START_GTID and before UNTIL ('YYYY-MM-DD HH:MM:SS', UTC;
# empty: to the end).  Events keep their original GTIDs.
# MySQL: mysqlbinlog --exclude-gtids=START --stop-datetime (RM 6.6.9); GTIDs
#   already executed are skipped by the server anyway.
# MariaDB: mariadb-binlog --start-position=<GTID list> (exclusive, 10.8+)
#   --stop-datetime.
# --stop-datetime is read in the local time zone of the client: TZ=UTC.
binlog_replay() {
  local pod=$1 start=$2 until=$3; shift 3
  local -a opt=()
  [ -n "$until" ] && opt+=(--stop-datetime="$until")
  case $FLAVOR in
    mysql)   [ -n "$start" ] && opt+=(--exclude-gtids="$start") ;;
    mariadb) [ -n "$start" ] && opt+=(--start-position="$start") ;;
  esac
  TZ=UTC "$BINLOG" --defaults-extra-file="$CNF" "${opt[@]}" "$@" |
    SQL_TIMEOUT=${REPLAY_TIMEOUT:-3600} sql_stdin "$pod"
}
# sql_stdin POD: run SQL read from stdin (dump loading, binlog replay).
# What comes from a backup store is data, never instructions for the client:
# a tampered dump or binary log must not make the client run `\!`/`system`,
# `source` a file or `tee` into one, in a pod that holds the root password.
# --binary-mode turns off every client command but `charset` and `delimiter`
# for input that is not typed (MySQL RM 6.5.1.1, mysql --binary-mode; MariaDB
# mariadb --binary-mode).  On top of it: MariaDB's --sandbox (10.5.25, 10.6.18,
# 10.11.8, 11.0.6 and later: a disabled command is an error) and MySQL's
# --system-command=OFF (8.0.40, 8.4.3 and later); `loose-` lets an older
# client ignore the option, binary mode still applies.
sql_stdin() {
  local pod=$1
  local -a extra=()
  case $FLAVOR in
    mysql)   extra=(--binary-mode --loose-system-command=OFF) ;;
    mariadb) extra=(--binary-mode --loose-sandbox) ;;
  esac
  timeout "${SQL_TIMEOUT:-$QUERY_TIMEOUT}" "$CLIENT" --defaults-extra-file="$CNF" \
    --protocol=TCP -h "$(pod_host "$pod")" -P "$(pod_port "$pod")" \
    --connect-timeout="$CONNECT_TIMEOUT" "${extra[@]}" --max-allowed-packet=1G -N -B
}
# dump_load_parallel POD DUMP N WORKDIR: loads a dump as one client would,
# but the tables of each database N at a time (issue 19.7; at 1 GB on 2 cores
# two clients load 1.6 times as fast as one, docs/performance.md).  The dump is
# cut (csplit, at lines only mysqldump writes: `-- Current Database:`, `-- Table
# structure for table`) into pieces in WORKDIR, which needs the dump's
# uncompressed size free.  A piece that starts a table is a unit of its own:
# the table, its data, its triggers (created after its data, as in one
# client), and what follows up to the next table (views' placeholders, the
# database's events and routines).  Units of one database load in parallel;
# everything else (the header, each database's DROP/CREATE, the final views and
# the trailer) loads alone, in the dump's order, once the units before it have
# finished.  Verbatim user text appears only in routine, trigger and event
# bodies, between `DELIMITER ;;` and `DELIMITER ;` (the client's own rule): the
# cut is made at those lines too, and whatever lies between them stays glued to
# its unit, so no body is ever cut; a body whose own text holds a `DELIMITER ;`
# line (in a string: the client reads on) is detected and the dump is loaded
# by one client instead (return 2, before anything is loaded).  Every client of a table unit gets the
# dump's session settings (the header's `/*!NNNNN SET ... */` lines without
# GLOBAL, MySQL's SQL_LOG_BIN) and `USE` of its database; session state of its
# own (foreign key checks off) as the single client has.  Any client failing
# fails the load (the others finish; a rerun reloads from scratch).
dump_load_parallel() {
  local pod=$1 dump=$2 n=$3 work=$4
  local pieces=$work/pieces pre=$work/session.sql
  rm -rf "$pieces"; mkdir -p "$pieces"
  dump_cat "$dump" | csplit -s -z -n 6 -f "$pieces/p" - \
    '/^-- Current Database: \|^-- Table structure for table \|^DELIMITER ;;$\|^DELIMITER ;$/' '{*}' ||
    { LAST_ERR="cannot cut $dump into pieces in $work (space?)"; rm -rf "$pieces"; return 1; }
  local -a files=("$pieces"/p*)
  # The header's session settings, for every client after the header's own.
  local line
  : > "$pre"
  while IFS= read -r line; do
    case $line in
      *GLOBAL*) ;;
      '/*!'[0-9][0-9][0-9][0-9][0-9]' SET '*|'SET @@SESSION.'*|'SET @MYSQLDUMP_TEMP_LOG_BIN'*) printf '%s\n' "$line" >> "$pre" ;;
    esac
  done < "${files[0]}"
  # Units, in the dump's order: kind (seq: alone; par: with the other tables
  # of its database), database, pieces.
  local -a unit=() kinds=() dbs=() members=()
  local body=0 db="" first f kind=seq
  for f in "${files[@]}"; do
    first=""; IFS= read -r first < "$f" || true
    if (( body )); then
      unit+=("$f"); [ "$first" != "DELIMITER ;" ] || body=0
      continue
    fi
    case $first in
      "DELIMITER ;;") unit+=("$f"); body=1; continue ;;
      # Outside a body: the body before it ended at a `DELIMITER ;` inside a
      # string of its own, which the client (quote-aware) does not take for
      # the end; this cut cannot be trusted.
      "DELIMITER ;") LAST_ERR="$dump: a routine body holds a DELIMITER line"; rm -rf "$pieces"; return 2 ;;
      "-- Current Database: "*|"-- Table structure for table "*) ;;
      *) unit+=("$f"); continue ;;
    esac
    if (( ${#unit[@]} )); then kinds+=("$kind"); dbs+=("$db"); members+=("${unit[*]}"); fi
    unit=("$f")
    if [[ $first == "-- Current Database: "* ]]; then
      kind=seq; db=${first#-- Current Database: \`}; db=${db%\`}
    else
      kind=par
    fi
    if [ "$kind" = par ] && [[ -z $db || $db == *[\`\ ]* ]]; then
      LAST_ERR="$dump: a table outside a database section"; rm -rf "$pieces"; return 2
    fi
  done
  if (( ${#unit[@]} )); then kinds+=("$kind"); dbs+=("$db"); members+=("${unit[*]}"); fi
  (( ! body )) || { LAST_ERR="$dump: a DELIMITER ;; block never ends"; rm -rf "$pieces"; return 2; }
  # Load: seq units alone, par units up to n at once.
  local -a pids=() part=()
  local i p rc=0 done_pid
  for i in "${!kinds[@]}"; do
    read -r -a part <<< "${members[i]}"
    if [ "${kinds[i]}" = seq ]; then
      for p in "${pids[@]}"; do wait "$p" || rc=1; done
      pids=()
      (( rc == 0 )) || break
      { printf '%s\n' "$SQL_NO_BINLOG"; (( i == 0 )) || cat "$pre"; cat "${part[@]}"; } | sql_stdin "$pod" || { rc=1; break; }
      continue
    fi
    if (( ${#pids[@]} >= n )); then
      done_pid=""
      wait -n -p done_pid "${pids[@]}" || rc=1
      for p in "${!pids[@]}"; do [ "${pids[p]}" != "$done_pid" ] || unset 'pids[p]'; done
      pids=("${pids[@]}")
      (( rc == 0 )) || break
    fi
    { printf '%s\n' "$SQL_NO_BINLOG"; cat "$pre"; printf 'USE `%s`;\n' "${dbs[i]}"; cat "${part[@]}"; } |
      sql_stdin "$pod" &
    pids+=("$!")
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  rm -rf "$pieces"
  (( rc == 0 )) || { LAST_ERR="a client loading part of $dump failed"; return 1; }
}

# Restore bookkeeping on a fresh server: empty the GTID history before loading.
# MySQL: RESET BINARY LOGS AND GTIDS (8.2 and later, RM 15.4.1.2), RESET MASTER
#   before 8.2 (8.0 RM 13.4.1.2; removed in 8.4); the dump itself then sets
#   gtid_purged.  MariaDB: RESET MASTER.
sql_reset_gtid_history() {
  case $FLAVOR in
    mysql)   sql "$1" "$(mysql_reset_statement "$(sql "$1" "SELECT VERSION()")")" ;;
    mariadb) sql "$1" "RESET MASTER; SET GLOBAL gtid_slave_pos=''" ;;
  esac
}
# mysql_reset_statement VERSION: the statement that empties binary logs and
# GTID history on that MySQL version (issue 19.11).  Pure.
mysql_reset_statement() {
  local v=$1 major minor
  [[ $v =~ ^([0-9]+)\.([0-9]+) ]] || { printf 'RESET BINARY LOGS AND GTIDS'; return 0; }
  major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
  if (( major < 8 || (major == 8 && minor < 2) )); then printf 'RESET MASTER'; else printf 'RESET BINARY LOGS AND GTIDS'; fi
}
# After loading a dump taken at GTID position G: record G as executed.
# MySQL: nothing, the dump's SET @@GLOBAL.GTID_PURGED did it (RM 19.1.6.5).
# MariaDB: gtid_binlog_state := G (the binary log is empty after RESET MASTER,
#   so new own writes continue after G) and gtid_slave_pos := G.
sql_set_restored_position() {
  local pod=$1 g=$2
  case $FLAVOR in
    mysql) : ;;
    mariadb)
      [ -n "$g" ] || return 0
      sql "$pod" "SET GLOBAL gtid_binlog_state=$(sql_quote "$g");
        SET GLOBAL gtid_slave_pos=$(sql_quote "$g")" ;;
  esac
}
# ================================================================ signatures
# A backup may be signed with a key kept outside the store: SIGNATURE holds
# "hmac-sha256 <hex>", HMAC-SHA256 (RFC 2104) of the bytes of SHA256SUMS, which
# lists dump.sql, every binary log and manifest.json.  Whoever can write the
# store but not read the key cannot make a restore load anything else.  Bash and
# coreutils only (od, sha256sum): the server images have no openssl.

# hex_of_file FILE: the file's bytes as lowercase hex.
hex_of_file() { local h; h=$(od -An -v -tx1 < "$1"); h=${h//[[:space:]]/}; printf '%s' "$h"; }
# hex_fmt HEX: a printf format writing those bytes.
hex_fmt() { local h=$1 i out=""; for ((i = 0; i < ${#h}; i += 2)); do out+="\\x${h:i:2}"; done; printf '%s' "$out"; }
# hmac_sha256 KEY_FILE FILE: HMAC-SHA256 of FILE under the bytes of KEY_FILE, hex.
hmac_sha256() {
  local key ipad="" opad="" i b inner outer
  key=$(hex_of_file "$1")
  if (( ${#key} > 128 )); then   # keys longer than the 64-byte block are hashed first
    key=$(printf "$(hex_fmt "$key")" | sha256sum); key=${key%% *}
  fi
  while (( ${#key} < 128 )); do key+=0; done
  for ((i = 0; i < 128; i += 2)); do
    b=$((16#${key:i:2}))
    ipad+=$(printf '\\x%02x' $((b ^ 0x36)))
    opad+=$(printf '\\x%02x' $((b ^ 0x5c)))
  done
  inner=$({ printf "$ipad"; cat "$2"; } | sha256sum); inner=${inner%% *}
  outer=$({ printf "$opad"; printf "$(hex_fmt "$inner")"; } | sha256sum)
  printf '%s' "${outer%% *}"
}
# sign_backup DIR KEY_FILE: write DIR/SIGNATURE.
sign_backup() { printf 'hmac-sha256 %s\n' "$(hmac_sha256 "$2" "$1/SHA256SUMS")" > "$1/SIGNATURE"; }
# signature_ok DIR KEY_FILE: DIR/SIGNATURE is the HMAC of DIR/SHA256SUMS under the key.
signature_ok() {
  local line
  [ -r "$1/SIGNATURE" ] && [ -r "$1/SHA256SUMS" ] || return 1
  IFS= read -r line < "$1/SIGNATURE" || true
  [ "$line" = "hmac-sha256 $(hmac_sha256 "$2" "$1/SHA256SUMS")" ]
}

# Statement that keeps a session's own writes out of the binary log.
# MySQL: SET SESSION sql_log_bin (RM 19.1.6.4, sysvar_sql_log_bin). MariaDB: same.
SQL_NO_BINLOG="SET SESSION sql_log_bin=0;"

# ================================================================ backups
# What a backup must prove before it is written and a restore before it loads:
# the source holds every transaction of the current primary up to a known
# moment (issue 19.9), and the binary logs replayed are contiguous from the
# dump's position to the point in time (issue 19.1).

# sql_clock_position POD: "<unix seconds><TAB><position>", read in one
# statement: every transaction POD had binlogged when that second began is
# inside the position.
# MySQL: UNIX_TIMESTAMP(), gtid_executed (RM 19.1.6.5).
# MariaDB: UNIX_TIMESTAMP(), gtid_binlog_pos.
sql_clock_position() {
  case $FLAVOR in
    mysql)   sql "$1" "SELECT UNIX_TIMESTAMP(), REPLACE(@@global.gtid_executed, '\n', '')" ;;
    mariadb) sql "$1" "SELECT UNIX_TIMESTAMP(), @@global.gtid_binlog_pos" ;;
  esac
}
# current_primary: CURRENT_PRIMARY = the one member that answers and is
# writable; returns 1 (CURRENT_PRIMARY empty, PRIMARY_ERR set) when none or
# more than one is.
current_primary() {
  local p ro
  local -a writable=()
  CURRENT_PRIMARY="" PRIMARY_ERR=""
  for p in "${POD_NAMES[@]}"; do
    ro=$(sql_is_read_only "$p" 2>/dev/null) || continue
    [ "$ro" = 0 ] && writable+=("$p")
  done
  case ${#writable[@]} in
    1) CURRENT_PRIMARY=${writable[0]} ;;
    0) PRIMARY_ERR="no member is a writable primary" ; return 1 ;;
    *) PRIMARY_ERR="more than one member is writable: ${writable[*]}"; return 1 ;;
  esac
}
# binlog_number FILE: the sequence number of a binary log file name
# (binlog.000012 -> 12); returns 1 for another shape.  Pure.
binlog_number() {
  local n=${1##*.}
  [[ $n =~ ^[0-9]+$ ]] || return 1
  printf '%d' "$((10#$n))"
}
# binlog_start_state FILE: the GTIDs the server had binlogged before FILE
# began, read from FILE's header (MySQL's Previous_gtids, MariaDB's Gtid_list
# event) through the flavor's binary log tool, canonical text: the agent's
# `binlog-header` (agent/src/binlog.rs, ported from here: the bash took MySQL
# 9.7's "[empty]", a server's first file, for a missing header, and every
# point-in-time restore on MySQL failed binlog-gap).
binlog_start_state() {
  agent_value "start state of $1" BINLOG_START_OUT binlog-header BINLOG_PATH="$1" BINLOG_TOOL="$BINLOG"
}
# sql_binlog_start_state POD FILE: binlog_start_state of FILE, read on POD,
# canonical text: the agent's `binlog-start` (agent/src/binlog.rs, ported from
# here; it reads the Previous_gtids / Gtid_list event over the protocol and
# parses it strictly; the batch client's literal "\n" made MySQL's multi-source
# sets unparsable, issue 34.12).
sql_binlog_start_state() {
  agent_value "start state of $2 on $1" BINLOG_START_OUT binlog-start BINLOG_POD="$1" BINLOG_FILE="$2"
}
# binlog_fetch_one POD DIR FILE: a raw copy of one binary log file of POD.
# MySQL: mysqlbinlog --read-from-remote-server --raw (RM 6.6.9.3).
# MariaDB: mariadb-binlog, the same options.
binlog_fetch_one() {
  local pod=$1 dir=$2 f=$3
  timeout "${BINLOG_TIMEOUT:-1800}" "$BINLOG" --defaults-extra-file="$CNF" --read-from-remote-server --raw \
    --protocol=TCP --host="$(pod_host "$pod")" --port="$(pod_port "$pod")" --result-file="$dir/" "$f"
}
# epoch_of 'YYYY-MM-DD HH:MM:SS' (UTC) / utc_of EPOCH: conversions.
epoch_of() { TZ=UTC date -d "$1" +%s; }
utc_of() { TZ=UTC date -d "@$1" '+%Y-%m-%d %H:%M:%S'; }
# read_positions DIR: POS_<key> variables from DIR/POSITIONS ("key value"
# lines, written by backup.sh); returns 1 when the file is missing, 2 (with
# POS_ERR) when a value is not a number or a GTID text (gtid_text_ok): the
# store's content is never trusted.
read_positions() {
  local k v
  POS_DUMP_GTID="" POS_PITR_FROM="" POS_BINLOGS_UNTIL="" POS_BINLOGS_GTID="" POS_ERR=""
  [ -r "$1/POSITIONS" ] || return 1
  while read -r k v; do
    case $k in
      dump-gtid) POS_DUMP_GTID=$v ;;
      pitr-from) POS_PITR_FROM=$v ;;
      binlogs-until) POS_BINLOGS_UNTIL=$v ;;
      binlogs-gtid) POS_BINLOGS_GTID=$v ;;
    esac
  done < "$1/POSITIONS"
  uint_ok "$POS_PITR_FROM" && { [ -z "$POS_BINLOGS_UNTIL" ] || uint_ok "$POS_BINLOGS_UNTIL"; } &&
    gtid_text_ok "$POS_DUMP_GTID" && gtid_text_ok "$POS_BINLOGS_GTID" && return 0
  POS_ERR="$1/POSITIONS is corrupt: a position is not a number or a GTID text"
  POS_DUMP_GTID="" POS_PITR_FROM="" POS_BINLOGS_UNTIL="" POS_BINLOGS_GTID=""
  return 2
}
# binlog_continuity DUMP_GTID FILE...: the files (sorted by name) continue the
# dump at DUMP_GTID without a hole: the first began at or before the dump's
# position, each next one is the next number of the same server's sequence
# and began no earlier than the one before.  Sets CONT_ERR naming the missing
# range and returns 1 otherwise.
binlog_continuity() {
  local g=$1 f prev="" n s ps=""
  shift
  CONT_ERR=""
  for f in "$@"; do
    s=$(binlog_start_state "$f") || { CONT_ERR="${f##*/}: no GTID header (not a binary log?)"; return 1; }
    n=$(binlog_number "${f##*/}") || { CONT_ERR="${f##*/}: not a binary log file name"; return 1; }
    if [ -z "$prev" ]; then
      if ! gtid_within "$s" "$g"; then
        CONT_ERR="the binary logs begin at [$s] (${f##*/}), after the dump's position [$g]: the transactions after [$g] up to [$s] are missing"
        return 1
      fi
    else
      if [ "${f%.*}" != "${prev%.*}" ] || (( n != $(binlog_number "${prev##*/}") + 1 )) || ! gtid_within "$ps" "$s"; then
        CONT_ERR="binary logs missing between ${prev##*/} and ${f##*/}: the transactions after those of ${prev##*/} (which began at [$ps]) up to [$s] are not there"
        return 1
      fi
    fi
    prev=$f ps=$s
  done
  return 0
}

# ================================================================ seeding
# A new or emptied server copies a healthy donor's data, then replicates from
# the primary from the donor's GTID position (seed.sh, run by join.sh in the
# server's own pod).  An empty server therefore never depends on the primary
# still having every binary log since the cluster began (a restore, PURGE
# BINARY LOGS, binlog expiry).
# - MySQL 8.4: the clone plugin (RM 7.6.7): CLONE INSTANCE run on the
#   recipient pulls a physical copy from the donor over the server port,
#   replaces the recipient's data, carries gtid_executed and restarts the
#   recipient (here: mysqld exits and the kubelet restarts the container).
# - MariaDB: a logical stream over TCP: mariadb-dump --single-transaction
#   --master-data --gtid from the donor piped into the recipient with the
#   binary log off (see seed.sh for why not mariadb-backup).

# sql_is_seeding POD: 0 while POD holds a partial copy.
# MySQL: a clone is in progress on POD (performance_schema.clone_status,
#   RM 29.12.19.1; the table exists only with the clone plugin loaded).
# MariaDB: the local table _mysqlhook.seeding exists (seed.sh writes it with
#   the binary log off before it empties the server and drops it last).
sql_is_seeding() {
  local v
  case $FLAVOR in
    mysql)   v=$(sql "$1" "SELECT COUNT(*) FROM performance_schema.clone_status WHERE STATE = 'In Progress'" 2>/dev/null) || return 1 ;;
    mariadb) v=$(sql "$1" "SELECT COUNT(*) FROM information_schema.tables
               WHERE table_schema = '_mysqlhook' AND table_name = 'seeding'" 2>/dev/null) || return 1 ;;
  esac
  [ "${v:-0}" != 0 ]
}
# server_is_empty POD: what init.sh leaves (a new pod, a deleted volume): no
# GTID history, no application schema, no replica configuration.
# MySQL: gtid_executed; MariaDB: gtid_binlog_state and gtid_slave_pos.
server_is_empty() {
  local pod=$1 g
  case $FLAVOR in
    mysql)   g=$(sql "$pod" "SELECT REPLACE(@@global.gtid_executed, '\n', '')") || return 1 ;;
    mariadb) g=$(sql "$pod" "SELECT CONCAT(@@global.gtid_binlog_state, @@global.gtid_slave_pos)") || return 1 ;;
  esac
  [ -z "$g" ] && [ -z "$(sql_user_schemas "$pod")" ] || return 1
  sql_replica_status "$pod"
  [ "$RS_CONFIGURED" = 0 ]
}
# sql_ident NAME: a quoted SQL identifier.  Pure.
sql_ident() { local s=$1; s=${s//\`/\`\`}; printf '`%s`' "$s"; }

# --- MariaDB: logical copy -----------------------------------------------------
# mdb_seed_begin POD DONOR: POD forgets any source, is marked seeding, and
# loses its application schemas, its accounts other than root and
# mariadb.sys, and its GTID history -- all with the binary log off, so
# nothing of it is ever replicated.  STOP SLAVE, RESET SLAVE ALL, RESET
# MASTER, gtid_slave_pos, DROP DATABASE / USER / ROLE.
mdb_seed_begin() {
  local pod=$1 donor=$2 q="$SQL_NO_BINLOG" s u h role
  sql "$pod" "STOP SLAVE; RESET SLAVE ALL" || return 1
  sql "$pod" "$SQL_NO_BINLOG CREATE DATABASE IF NOT EXISTS _mysqlhook;
    CREATE TABLE IF NOT EXISTS _mysqlhook.seeding (id INT PRIMARY KEY, donor VARCHAR(255) NOT NULL,
      started DATETIME NOT NULL);
    REPLACE INTO _mysqlhook.seeding VALUES (1, $(sql_quote "$donor"), UTC_TIMESTAMP())" || return 1
  while IFS= read -r s; do
    [ -n "$s" ] && q+="DROP DATABASE IF EXISTS $(sql_ident "$s");"
  done < <(sql_user_schemas "$pod")
  while IFS=$'\t' read -r u h role; do
    [ -n "$u$h" ] || continue
    if [ "$role" = Y ]; then q+="DROP ROLE IF EXISTS $(sql_ident "$u");"
    else q+="DROP USER IF EXISTS $(sql_quote "$u")@$(sql_quote "$h");"; fi
  done < <(sql "$pod" "SELECT user, host, is_role FROM mysql.user
    WHERE NOT (user = 'root' AND host IN ('localhost', '%')) AND user NOT IN ('mariadb.sys', '$OPERATOR_USER')")
  q+="RESET MASTER; SET GLOBAL gtid_slave_pos='';"
  sql "$pod" "$q"
}
# mdb_dump_users POD: POD's accounts and roles as CREATE USER IF NOT EXISTS
# and GRANT statements (mariadb-dump --system=users), on stdout.  They carry
# password hashes: stdout goes to a private file or a pipe, never argv.
mdb_dump_users() {
  local pod=$1
  timeout "$QUERY_TIMEOUT" "$DUMP" --defaults-extra-file="$CNF" --protocol=TCP -h "$(pod_host "$pod")" \
    -P "$(pod_port "$pod")" --system=users --insert-ignore \
    --skip-comments --skip-dump-date
}
# mdb_users_loadable < dump > statements: the accounts dump without its PROXY
# grants: mariadb-install-db grants root@localhost PROXY ON ''@'%', which root@'%'
# (the scripts' account) may not grant again (ER 1698), and the copy needs
# none.  Pure.
mdb_users_loadable() {
  local line
  while IFS= read -r line || [ -n "$line" ]; do
    [[ $line == "GRANT PROXY ON "* ]] && continue
    printf '%s\n' "$line"
  done
}
# mdb_dump_data POD DB...: a consistent (InnoDB) dump of the DBs on stdout,
# its GTID position as a comment near the end (-- SET GLOBAL gtid_slave_pos=):
# --single-transaction --master-data=2 --gtid (MariaDB takes the position from
# the snapshot itself, binlog_snapshot_file/pos: no global read lock).
mdb_dump_data() {
  local pod=$1; shift
  timeout "${SEED_TIMEOUT:-21600}" "$DUMP" --defaults-extra-file="$CNF" --protocol=TCP -h "$(pod_host "$pod")" \
    -P "$(pod_port "$pod")" --max-allowed-packet=1G \
    --single-transaction --master-data=2 --gtid --routines --events --triggers --hex-blob \
    --add-drop-database --default-character-set=utf8mb4 --skip-dump-date --databases "$@"
}
# mdb_seed_state BEFORE AFTER POS: the donor's gtid_binlog_state at the
# dump's snapshot, from its states read before and after the dump and the
# dump's position: each entry as before, the position's own (domain,
# server_id) at the position.  Returns 1 when that cannot be known: an entry
# of another server_id changed while the dump ran (a role change), or the
# position is not between the two states (agent/src/gtid_calc.rs).
mdb_seed_state() { gtid_calc seed-state "$1" "$2" "$3"; }
# mdb_seed_finish POD STATE POS: after the load, POD's GTID history is the
# donor's at the snapshot: gtid_binlog_state := STATE (its binary log is empty
# since mdb_seed_begin), gtid_slave_pos := POS; then events the copy brought
# in enabled are disabled on this replica (a replica's event scheduler must not
# write; MariaDB: ALTER EVENT ... DISABLE ON SLAVE); then the seeding mark goes.
mdb_seed_finish() {
  local pod=$1 state=$2 pos=$3 q="$SQL_NO_BINLOG" d n
  while IFS=$'\t' read -r d n; do
    [ -n "$d$n" ] && q+="ALTER EVENT $(sql_ident "$d").$(sql_ident "$n") DISABLE ON SLAVE;"
  done < <(sql "$pod" "SELECT event_schema, event_name FROM information_schema.events WHERE status = 'ENABLED'")
  q+="SET GLOBAL gtid_binlog_state=$(sql_quote "$state"); SET GLOBAL gtid_slave_pos=$(sql_quote "$pos");"
  q+="DROP TABLE IF EXISTS _mysqlhook.seeding;"
  sql "$pod" "$q"
}

# --- MySQL: the clone plugin ----------------------------------------------------
# clone_sql DONOR: the statements a recipient runs to copy DONOR (RM 7.6.7.3
# "Cloning Remote Data"): clone_valid_donor_list names the donor (RM 7.6.7.13,
# sysvar_clone_valid_donor_list), super_read_only goes off for the clone's own
# data removal (read_only stays ON: no application writes), then CLONE
# INSTANCE FROM 'root'@host:port IDENTIFIED BY <root password> (the operator
# account and its password when there is one, issue 18.5).  Both hold
# BACKUP_ADMIN on the donor and CLONE_ADMIN on the recipient (GRANT ALL
# includes both once the plugin is loaded: my.cnf plugin_load_add =
# mysql_clone.so on every server).  Unverified here: no MySQL 8 server in CI.
# Pure.
clone_sql() {
  local donor=$1 hp user=root pw=$MYSQL_ROOT_PASSWORD
  if [ -n "${OPERATOR_PASSWORD:-}" ]; then user=$OPERATOR_USER pw=$OPERATOR_PASSWORD; fi
  hp="$(pod_host "$donor"):$(pod_port "$donor")"
  printf '%s' "SET GLOBAL clone_valid_donor_list=$(sql_quote "$hp");
    SET GLOBAL super_read_only=OFF;
    CLONE INSTANCE FROM $(sql_quote "$user")@$(sql_quote "$(pod_host "$donor")"):$(pod_port "$donor")
      IDENTIFIED BY $(sql_quote "$pw")"
}

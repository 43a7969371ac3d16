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
# Tools needed: bash, coreutils (timeout, date, sha256sum, stat, mktemp, head,
# sort, sleep, cat, mv, rm, mkdir) and the client programs of the flavor.  No
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

log() { printf '%s %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${SCRIPT_NAME:-script}" "$*" >&2; }

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
    (( ${#fields[@]} > 0 )) || break
    unset 'fields[-1]'; trunc=1   # too long for a termination message
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
LAST_ERR=""
trap 'LAST_ERR="line $LINENO: $BASH_COMMAND (exit $?)"' ERR
on_exit() {
  local code=$?
  [ -n "${CNF:-}" ] && rm -f "$CNF"
  if [ "$RESULT_DONE" = 0 ]; then
    RESULT_DONE=1
    R_FIELDS=()
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
is_member() { [[ -n "${1:-}" && -n "${POD_ADDR[$1]+x}" ]]; }
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

# Credentials go into a private option file, never onto the command line.
CNF=$(mktemp "${TMPDIR:-/tmp}/hookcnf.XXXXXX")
chmod 600 "$CNF"
write_cnf() {  # write_cnf USER PASSWORD
  local pw=$2
  # option-file value in double quotes: escape backslash and double quote
  pw=${pw//\\/\\\\}; pw=${pw//\"/\\\"}
  {
    printf '[client]\nuser=%s\npassword="%s"\n' "$1" "$pw"
    # MySQL 8.4 default auth is caching_sha2_password; over a non-TLS connection
    # the client must be allowed to fetch the server's RSA key
    # (RM 6.5.1 mysql client options, --get-server-public-key).
    if [ "$FLAVOR" = mysql ]; then printf 'get-server-public-key=1\n'; fi
  } > "$CNF"
}
write_cnf root "${MYSQL_ROOT_PASSWORD:?MYSQL_ROOT_PASSWORD is required}"

# sql POD STATEMENTS: run on POD as root, tab separated rows on stdout, no header.
# SQL_TIMEOUT overrides the client-side cap for long waits.
sql() {
  local pod=$1 q=$2 fmt=-N
  [ -n "${SQL_VERTICAL:-}" ] && fmt=-E
  timeout "${SQL_TIMEOUT:-$QUERY_TIMEOUT}" "$CLIENT" --defaults-extra-file="$CNF" \
    --protocol=TCP -h "$(pod_host "$pod")" -P "$(pod_port "$pod")" \
    --connect-timeout="$CONNECT_TIMEOUT" "$fmt" -B -e "$q"
}
reachable() { SQL_TIMEOUT=$((CONNECT_TIMEOUT + 5)) sql "$1" "SELECT 1" >/dev/null 2>&1; }
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

# Executed plus already received (in the relay log, not yet applied).
# MySQL: gtid_executed UNION performance_schema.replication_connection_status.
#   RECEIVED_TRANSACTION_SET (RM 29.12.11.13); a union of GTID sets is their
#   comma-joined text (RM 14.18.2).
# MariaDB: per domain the furthest of gtid_current_pos and the IO thread's
#   Gtid_IO_Pos (SHOW SLAVE STATUS).
sql_gtid_received() {
  local pod=$1
  case $FLAVOR in
    mysql)
      sql "$pod" "SELECT REPLACE(CONCAT_WS(',', NULLIF(@@global.gtid_executed,''),
        (SELECT NULLIF(GROUP_CONCAT(RECEIVED_TRANSACTION_SET),'')
           FROM performance_schema.replication_connection_status)), '\n', '')" ;;
    mariadb)
      local cur
      cur=$(sql "$pod" "SELECT @@global.gtid_current_pos")
      sql_replica_status "$pod"
      mdb_pos_max "$cur" "$RS_IO_GTID" ;;
  esac
}

# Wait until POD has executed GTIDS; prints nothing, returns 0 when reached.
# MySQL: WAIT_FOR_EXECUTED_GTID_SET(set, timeout) -> 0 reached, 1 timeout
#   (RM 14.18.2).
# MariaDB: MASTER_GTID_WAIT(pos, timeout) -> 0 reached, -1 timeout; it waits
#   for the replica SQL thread (gtid_slave_pos).
sql_wait_executed() {
  local pod=$1 gtids=$2 t=${3:-$WAIT_TIMEOUT} r
  [ -n "$gtids" ] || return 0
  case $FLAVOR in
    mysql)   r=$(SQL_TIMEOUT=$((t + 30)) sql "$pod" "SELECT WAIT_FOR_EXECUTED_GTID_SET($(sql_quote "$gtids"), $t)") ;;
    mariadb) r=$(SQL_TIMEOUT=$((t + 30)) sql "$pod" "SELECT MASTER_GTID_WAIT($(sql_quote "$gtids"), $t)") ;;
  esac
  [ "$r" = 0 ]
}

# gtid_subset A B [POD]: true when every transaction of A is also in B.
# MySQL: GTID_SUBSET(a, b) evaluated on POD (RM 14.18.2).
# MariaDB: no server function exists; compared here from gtid_binlog_state
#   lists: every (domain, server_id, seq) of A needs the same (domain,
#   server_id) in B with a seq at least as high.
gtid_subset() {
  local a=$1 b=$2 pod=${3:-}
  case $FLAVOR in
    mysql)
      [ -n "$a" ] || return 0
      [ "$(sql "$pod" "SELECT GTID_SUBSET($(sql_quote "$a"), $(sql_quote "$b"))")" = 1 ] ;;
    mariadb) mdb_state_subset "$a" "$b" ;;
  esac
}
# gtid_own_errant SET OTHERS IDENTITY [POD]: true when SET holds a transaction
# that originated on IDENTITY (a server's own write) and that OTHERS lacks.
# MySQL: GTID_SUBTRACT(set, others) (RM 14.18.2), then look for "uuid:".
gtid_own_errant() {
  local set=$1 others=$2 ident=$3 pod=${4:-} d e
  case $FLAVOR in
    mysql)
      d=$(sql "$pod" "SELECT REPLACE(GTID_SUBTRACT($(sql_quote "$set"), $(sql_quote "$others")), '\n', '')")
      csv_items "$d"
      for e in "${CSV[@]}"; do [ "${e%%:*}" = "$ident" ] && return 0; done
      return 1 ;;
    mariadb)
      local s items
      csv_items "$set"; items=("${CSV[@]}")
      for e in "${items[@]}"; do
        s=${e#*-}; s=${s%%-*}
        [ "$s" = "$ident" ] || continue
        mdb_state_subset "$e" "$others" || return 0
      done
      return 1 ;;
  esac
}
# gtid_subtract A B [POD]: the part of A that B lacks, as text (for reports).
# MySQL: GTID_SUBTRACT(a, b) (RM 14.18.2).  MariaDB: the (domain, server_id)
#   entries of A not covered by B.
gtid_subtract() {
  local a=$1 b=$2 pod=${3:-} e out=""
  case $FLAVOR in
    mysql) sql "$pod" "SELECT REPLACE(GTID_SUBTRACT($(sql_quote "$a"), $(sql_quote "$b")), '\n', '')" ;;
    mariadb)
      local items
      csv_items "$a"; items=("${CSV[@]}")
      for e in "${items[@]}"; do
        mdb_state_subset "$e" "$b" || out+="${out:+,}$e"
      done
      printf '%s' "$out" ;;
  esac
}
# gtid_ge A B [POD]: A is at least as advanced as B (B is contained in A).
# MySQL: GTID_SUBSET(b, a).  MariaDB: per domain seq_no comparison of positions.
gtid_ge() {
  case $FLAVOR in
    mysql)   gtid_subset "$2" "$1" "${3:-}" ;;
    mariadb) mdb_pos_ge "$1" "$2" ;;
  esac
}

# --- MariaDB GTID list helpers (bash only) ----------------------------------
# A position/state is "d-s-n,d-s-n,...".
# csv_items STRING: the non-empty comma separated items, whitespace removed,
# into the global array CSV.
csv_items() {
  local -a raw=()
  local x
  CSV=()
  IFS=, read -r -a raw <<< "${1//[[:space:]]/}" || true
  for x in "${raw[@]}"; do [ -n "$x" ] && CSV+=("$x"); done
  return 0
}
mdb_pos_max() {   # per domain, the GTID with the larger seq_no (union of positions)
  local -A best=() bseq=()
  local e d s n out=""
  csv_items "$1,$2"
  for e in "${CSV[@]}"; do
    d=${e%%-*}; s=${e#*-}; n=${s#*-}
    if [ -z "${bseq[$d]+x}" ] || (( n > bseq[$d] )); then bseq[$d]=$n; best[$d]=$e; fi
  done
  local -a doms=()
  [ ${#best[@]} -gt 0 ] && mapfile -t doms < <(printf '%s\n' "${!best[@]}" | sort -n)
  for d in "${doms[@]}"; do out+="${out:+,}${best[$d]}"; done
  printf '%s' "$out"
}
mdb_pos_ge() {    # every domain of B is present in A with seq_no >= B's
  local -A aseq=()
  local e d n
  csv_items "$1"
  for e in "${CSV[@]}"; do
    d=${e%%-*}; n=${e##*-}
    if [ -z "${aseq[$d]+x}" ] || (( n > aseq[$d] )); then aseq[$d]=$n; fi
  done
  csv_items "$2"
  for e in "${CSV[@]}"; do
    d=${e%%-*}; n=${e##*-}
    [ -n "${aseq[$d]+x}" ] && (( aseq[$d] >= n )) || return 1
  done
  return 0
}
mdb_state_subset() {  # every (d,s,n) of A has (d,s,m>=n) in B
  local -A bseq=()
  local e k n
  csv_items "$2"
  for e in "${CSV[@]}"; do
    k=${e%-*}; n=${e##*-}
    if [ -z "${bseq[$k]+x}" ] || (( n > bseq[$k] )); then bseq[$k]=$n; fi
  done
  csv_items "$1"
  for e in "${CSV[@]}"; do
    k=${e%-*}; n=${e##*-}
    [ -n "${bseq[$k]+x}" ] && (( bseq[$k] >= n )) || return 1
  done
  return 0
}
# Union of several GTID sets / states, as text.
gtid_union() {
  local out="" x
  for x in "$@"; do [ -n "$x" ] && out+="${out:+,}$x"; done
  printf '%s' "$out"
}

# --- replica status ----------------------------------------------------------
# sql_replica_status POD: sets RS_CONFIGURED (0/1), RS_HOST, RS_PORT, RS_IO
# (Yes/No/Connecting), RS_SQL, RS_LAG, RS_IO_GTID (MariaDB Gtid_IO_Pos), RS_ERR.
# MySQL: SHOW REPLICA STATUS (RM 15.7.7.35), Source_*/Replica_* field names.
# MariaDB: SHOW SLAVE STATUS, Master_*/Slave_* field names.
sql_replica_status() {
  local out line k v
  case $FLAVOR in
    mysql)   out=$(SQL_VERTICAL=1 sql "$1" 'SHOW REPLICA STATUS') ;;
    mariadb) out=$(SQL_VERTICAL=1 sql "$1" 'SHOW SLAVE STATUS') ;;
  esac
  RS_CONFIGURED=0 RS_HOST="" RS_PORT="" RS_IO="" RS_SQL="" RS_LAG="" RS_IO_GTID="" RS_ERR=""
  while IFS= read -r line; do
    [[ $line =~ ^[[:space:]]*([A-Za-z_]+):[[:space:]]?(.*)$ ]] || continue
    k=${BASH_REMATCH[1]} v=${BASH_REMATCH[2]}
    case $k in
      Source_Host|Master_Host) RS_HOST=$v; [ -n "$v" ] && RS_CONFIGURED=1 ;;
      Source_Port|Master_Port) RS_PORT=$v ;;
      Replica_IO_Running|Slave_IO_Running) RS_IO=$v ;;
      Replica_SQL_Running|Slave_SQL_Running) RS_SQL=$v ;;
      Seconds_Behind_Source|Seconds_Behind_Master) RS_LAG=$v ;;
      Gtid_IO_Pos) RS_IO_GTID=$v ;;
      Last_IO_Error|Last_SQL_Error) [ -n "$v" ] && RS_ERR+="${RS_ERR:+; }$v" ;;
    esac
  done <<< "$out"
  return 0
}
# replicating_from POD SRC: POD is configured to replicate from SRC and both
# threads run.
replicating_from() {
  sql_replica_status "$1"
  [ "$RS_CONFIGURED" = 1 ] && [ "$RS_HOST" = "$(pod_host "$2")" ] &&
    [ "$RS_PORT" = "$(pod_port "$2")" ] && [ "$RS_IO" = Yes ] && [ "$RS_SQL" = Yes ]
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

# Make POD a (semi-sync) replica of SRC_POD, GTID auto-positioned.
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
sql_make_replica() {
  local pod=$1 src=$2 h p pw
  h=$(sql_quote "$(pod_host "$src")"); p=$(pod_port "$src")
  pw=$(sql_quote "${REPLICATION_PASSWORD:?REPLICATION_PASSWORD is required}")
  sql_disable_semisync_source "$pod"
  case $FLAVOR in
    mysql)
      sql "$pod" "STOP REPLICA;
        CHANGE REPLICATION SOURCE TO SOURCE_HOST=$h, SOURCE_PORT=$p,
          SOURCE_USER='$REPL_USER', SOURCE_PASSWORD=$pw,
          SOURCE_AUTO_POSITION=1, GET_SOURCE_PUBLIC_KEY=1,
          SOURCE_CONNECT_RETRY=5, SOURCE_RETRY_COUNT=86400;
        SET GLOBAL rpl_semi_sync_replica_enabled=ON;
        START REPLICA" ;;
    mariadb)
      local binpos slavepos pos
      sql "$pod" "STOP SLAVE"
      binpos=$(sql "$pod" "SELECT @@global.gtid_binlog_pos")
      slavepos=$(sql "$pod" "SELECT @@global.gtid_slave_pos")
      pos=$(mdb_pos_max "$binpos" "$slavepos")
      if [ "$pos" != "$slavepos" ]; then
        sql "$pod" "SET GLOBAL gtid_slave_pos=$(sql_quote "$pos")"
      fi
      sql "$pod" "CHANGE MASTER TO MASTER_HOST=$h, MASTER_PORT=$p,
          MASTER_USER='$REPL_USER', MASTER_PASSWORD=$pw,
          MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=5;
        SET GLOBAL rpl_semi_sync_slave_enabled=ON;
        START SLAVE" ;;
  esac
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
sql_enable_semisync_source() {
  case $FLAVOR in
    mysql) sql "$1" "SET GLOBAL rpl_semi_sync_source_wait_point=AFTER_SYNC;
      SET GLOBAL rpl_semi_sync_source_wait_for_replica_count=1;
      SET GLOBAL rpl_semi_sync_source_timeout=$SEMISYNC_TIMEOUT_MS;
      SET GLOBAL rpl_semi_sync_source_wait_no_replica=ON;
      SET GLOBAL rpl_semi_sync_source_enabled=ON" ;;
    mariadb) sql "$1" "SET GLOBAL rpl_semi_sync_master_wait_point=AFTER_SYNC;
      SET GLOBAL rpl_semi_sync_master_timeout=$SEMISYNC_TIMEOUT_MS;
      SET GLOBAL rpl_semi_sync_master_wait_no_slave=ON;
      SET GLOBAL rpl_semi_sync_master_enabled=ON" ;;
  esac
}
# Single-member cluster: no replica can acknowledge, so the source must not wait.
sql_disable_semisync_source() {
  case $FLAVOR in
    mysql)   sql "$1" "SET GLOBAL rpl_semi_sync_source_enabled=OFF" ;;
    mariadb) sql "$1" "SET GLOBAL rpl_semi_sync_master_enabled=OFF" ;;
  esac
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

# The replication / backup account, created on the primary (replicated).
# MySQL: CREATE USER (RM 15.7.1.3), ALTER USER (RM 15.7.1.1), GRANT (RM 15.7.1.6);
#   REPLICATION SLAVE + REPLICATION CLIENT for replication, BACKUP_ADMIN and
#   CLONE_ADMIN for clone/backup (RM 8.2.2), plus what mysqldump needs.
# MariaDB: REPLICATION SLAVE, BINLOG MONITOR, SLAVE MONITOR (10.5+ split of
#   REPLICATION CLIENT) plus what mariadb-dump needs.
sql_create_repl_user() {
  local pw
  pw=$(sql_quote "${REPLICATION_PASSWORD:?REPLICATION_PASSWORD is required}")
  case $FLAVOR in
    mysql) sql "$1" "CREATE USER IF NOT EXISTS '$REPL_USER'@'%' IDENTIFIED BY $pw;
      ALTER USER '$REPL_USER'@'%' IDENTIFIED BY $pw;
      GRANT REPLICATION SLAVE, REPLICATION CLIENT, BACKUP_ADMIN, CLONE_ADMIN,
        SELECT, RELOAD, PROCESS, SHOW VIEW, TRIGGER, EVENT, LOCK TABLES
        ON *.* TO '$REPL_USER'@'%'" ;;
    mariadb) sql "$1" "CREATE USER IF NOT EXISTS '$REPL_USER'@'%' IDENTIFIED BY $pw;
      ALTER USER '$REPL_USER'@'%' IDENTIFIED BY $pw;
      GRANT REPLICATION SLAVE, BINLOG MONITOR, SLAVE MONITOR,
        SELECT, RELOAD, PROCESS, SHOW VIEW, TRIGGER, EVENT, LOCK TABLES
        ON *.* TO '$REPL_USER'@'%'" ;;
  esac
}
# The mysqld_exporter account (exporter-user.sh): local logins only, at most 3
# connections, no access to application data.  MySQL: REPLICATION CLIENT for
# SHOW REPLICA STATUS (RM 15.7.7.35), PROCESS for the InnoDB information_schema
# tables.  MariaDB: SLAVE MONITOR for SHOW SLAVE STATUS (10.5.9+), BINLOG MONITOR
# (what REPLICATION CLIENT means there since 10.5.2), PROCESS.
sql_create_exporter_user() {
  local pw
  pw=$(sql_quote "${EXPORTER_PASSWORD:?EXPORTER_PASSWORD is required}")
  case $FLAVOR in
    mysql) sql "$1" "CREATE USER IF NOT EXISTS 'exporter'@'localhost' IDENTIFIED BY $pw WITH MAX_USER_CONNECTIONS 3;
      ALTER USER 'exporter'@'localhost' IDENTIFIED BY $pw WITH MAX_USER_CONNECTIONS 3;
      GRANT PROCESS, REPLICATION CLIENT ON *.* TO 'exporter'@'localhost';
      GRANT SELECT ON performance_schema.* TO 'exporter'@'localhost'" ;;
    mariadb) sql "$1" "CREATE USER IF NOT EXISTS 'exporter'@'localhost' IDENTIFIED BY $pw WITH MAX_USER_CONNECTIONS 3;
      ALTER USER 'exporter'@'localhost' IDENTIFIED BY $pw WITH MAX_USER_CONNECTIONS 3;
      GRANT PROCESS, BINLOG MONITOR, SLAVE MONITOR ON *.* TO 'exporter'@'localhost';
      GRANT SELECT ON performance_schema.* TO 'exporter'@'localhost'" ;;
  esac
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
dump_cmd() {
  local pod=$1 out=$2; shift 2
  local -a common=(--defaults-extra-file="$CNF" --protocol=TCP -h "$(pod_host "$pod")"
    -P "$(pod_port "$pod")"
    --single-transaction --routines --events --triggers --hex-blob
    --add-drop-database --default-character-set=utf8mb4 --result-file="$out")
  case $FLAVOR in
    mysql)   "$DUMP" "${common[@]}" --source-data=2 --set-gtid-purged=ON --databases "$@" ;;
    mariadb) "$DUMP" "${common[@]}" --master-data=2 --gtid --databases "$@" ;;
  esac
}
# dump_gtid FILE: the GTID position recorded in a dump's header.
dump_gtid() {
  local line collecting=0 g=""
  while IFS= read -r line; do
    case $FLAVOR in
      mariadb)
        if [[ $line =~ gtid_slave_pos=\'([^\']*)\' ]]; then printf '%s' "${BASH_REMATCH[1]}"; return 0; fi ;;
      mysql)
        # SET @@GLOBAL.GTID_PURGED=/*!80000 '+'*/ 'uuid:1-5,\nuuid:1-3';
        if [[ $line == *GTID_PURGED=* ]]; then collecting=1; line=${line#*GTID_PURGED=}; line=${line#*\*/}; fi
        if (( collecting )); then
          g+=$line
          if [[ $line == *\;* ]]; then
            g=${g%%;*}; g=${g//\'/}; g=${g//[[:space:]]/}
            printf '%s' "$g"; return 0
          fi
        fi ;;
    esac
  done < <(head -n 400 "$1"; tail -n 200 "$1")   # mariadb-dump 10.11 writes it at the end
  return 0
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
sql_stdin() {
  local pod=$1
  local -a extra=()
  [ "$FLAVOR" = mariadb ] && extra=(--binary-mode)
  timeout "${SQL_TIMEOUT:-$QUERY_TIMEOUT}" "$CLIENT" --defaults-extra-file="$CNF" \
    --protocol=TCP -h "$(pod_host "$pod")" -P "$(pod_port "$pod")" \
    --connect-timeout="$CONNECT_TIMEOUT" "${extra[@]}" --max-allowed-packet=1G -N -B
}
# Restore bookkeeping on a fresh server: empty the GTID history before loading.
# MySQL: RESET BINARY LOGS AND GTIDS (RM 15.4.1.2); the dump itself then sets
#   gtid_purged.  MariaDB: RESET MASTER.
sql_reset_gtid_history() {
  case $FLAVOR in
    mysql)   sql "$1" "RESET BINARY LOGS AND GTIDS" ;;
    mariadb) sql "$1" "RESET MASTER; SET GLOBAL gtid_slave_pos=''" ;;
  esac
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
# Statement that keeps a session's own writes out of the binary log.
# MySQL: SET SESSION sql_log_bin (RM 19.1.6.4, sysvar_sql_log_bin). MariaDB: same.
SQL_NO_BINLOG="SET SESSION sql_log_bin=0;"

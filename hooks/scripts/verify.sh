#!/bin/bash
# verify.sh DIR -- proves that the backup in DIR restores (issue 19.6).  Run by
# backup.sh when BACKUP_VERIFY=true, on the finished backup before it counts as
# complete: a backup that does not restore is never renamed into place, never
# uploaded, and never lets retention remove an older one.  Usable on its own
# on any backup directory.
#
# How: a throwaway server in this pod -- init.sh on an empty data directory
# under VERIFY_DIR [$TMPDIR/mysql-hook-verify], a minimal option file of the
# flavor (GTIDs and binary log as the cluster's servers have them, read-only,
# small buffers, 127.0.0.1:VERIFY_PORT [3399] only) -- then restore.sh loads
# DIR into it exactly as a restore Job would (checksums, the dump, the
# accounts, the GTID position; with RESTORE_VERIFY_KEY_FILE the signature).
# Then what the server holds is compared with the manifest: the GTID position
# the restore reports must be the backup's, every schema the dump lists must
# exist.  The server is stopped and VERIFY_DIR removed however it ends.
# TLS settings of the cluster are ignored: the throwaway server is local.
#
# Exit: 0 {"result":"verified","gtid":...,"databases":N,"tables":N,
# "seconds":S}; 1 {"result":"error","reason":"verify-failed"|"bad-env",...}.
SCRIPT_NAME=verify
unset TLS_MODE TLS_MODE_FILE
VERIFY_PORT=${VERIFY_PORT:-3399}
export PODS="verify-0=127.0.0.1:$VERIFY_PORT" POD_NAME=verify-0
unset PODS_FILE POD_HOST
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

dir=${1:-}
[ -n "$dir" ] && [ -f "$dir/manifest.json" ] || fail bad-env "'$dir' is not a backup directory (no manifest.json)"
[[ $VERIFY_PORT =~ ^[1-9][0-9]*$ ]] || fail bad-env "VERIFY_PORT '$VERIFY_PORT' is not a port"
vdir=${VERIFY_DIR:-${TMPDIR:-/tmp}/mysql-hook-verify}
t0=$SECONDS
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 300); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  rm -rf -- "$vdir"
}
trap 'cleanup; on_exit' EXIT
rm -rf -- "$vdir"
mkdir -p "$vdir/conf" "$vdir/data" "$vdir/tmp" "$vdir/files"

# The flavor's replication-relevant options as the servers have them (the
# dump's GTID statements need them), nothing the Job's pod lacks (no TLS files,
# no cluster-sized buffers).
{
  printf '# verify.sh: throwaway server\n[mysqld]\n'
  printf 'log_bin = binlog\nbinlog_format = ROW\nread_only = ON\nskip_name_resolve = ON\n'
  case $FLAVOR in
    mysql)   printf 'gtid_mode = ON\nenforce_gtid_consistency = ON\nsuper_read_only = ON\nskip_replica_start = ON\nmysqlx = OFF\nsecure_file_priv = NULL\n' ;;
    mariadb) printf 'gtid_strict_mode = ON\nlog_slave_updates = ON\nskip_slave_start = ON\nsecure_file_priv = %s\n' "$vdir/files" ;;
  esac
  printf 'datadir = %s\nsocket = %s\nport = %s\nbind_address = 127.0.0.1\ntmpdir = %s\n' \
    "$vdir/data" "$vdir/mysqld.sock" "$VERIFY_PORT" "$vdir/tmp"
  printf 'pid_file = %s\nlog_error = %s\n' "$vdir/mysqld.pid" "$vdir/error.log"
  printf 'innodb_buffer_pool_size = 64M\nperformance_schema = OFF\nmax_allowed_packet = 1G\n'
} > "$vdir/my.cnf"
printf '!includedir %s\n' "$vdir/conf" > "$vdir/server.cnf"

# The throwaway server's root: this Job's root password (without the operator
# account this script logs in to the throwaway server as root), or, in a Job
# of a cluster whose root is local only (no root password here), one of its
# own.  A private file either way, as init.sh and restore.sh read it.
root_file=$vdir/root-password
if [ -n "${MYSQL_ROOT_PASSWORD:-}" ]; then
  (umask 077; printf '%s' "$MYSQL_ROOT_PASSWORD" > "$root_file")
else
  (umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$root_file")
fi
# sub SCRIPT: run a sibling script against the throwaway server; its result
# line (last stdout line) in SUB_LINE, its exit code returned.  Its termination
# message is not this script's.
sub() {
  local rc=0
  SUB_LINE=$(MYSQL_ROOT_PASSWORD_FILE="$root_file" \
    CONF_DIR="$vdir/conf" DATA_DIR="$vdir/data" TMPDIR="$vdir/tmp" MY_CNF="$vdir/my.cnf" \
    SERVER_DEFAULTS_FILE="$vdir/server.cnf" TERMINATION_LOG=/dev/null bash "$SCRIPTS_DIR/$1" | tail -n 1) || rc=$?
  return "$rc"
}
field() { [[ $2 =~ \"$1\":\"([^\"]*)\" ]] && printf '%s' "${BASH_REMATCH[1]}"; }

log "initializing a throwaway $FLAVOR server in $vdir"
sub init.sh || fail verify-failed "the throwaway server could not be initialized: $(field message "$SUB_LINE")"
case $FLAVOR in
  mysql)   server_bin=${SERVER_BIN:-mysqld} ;;
  mariadb) server_bin=${SERVER_BIN:-mariadbd} ;;
esac
as_root=()
if [ "$(id -u)" = 0 ]; then as_root=(--user=root); fi   # tests only; pods run as 999
"$server_bin" --defaults-file="$vdir/server.cnf" "${as_root[@]}" >/dev/null 2>&1 &
server_pid=$!
wait_reachable verify-0 "${VERIFY_WAIT:-120}" ||
  fail verify-failed "the throwaway server did not start: $(tail -n 5 "$vdir/error.log" 2>/dev/null || true)"

log "restoring $dir into it"
if ! RESTORE_FROM=$dir RESTORE_BINLOGS_FROM="" RESTORE_UNTIL="" sub restore.sh; then
  fail verify-failed "the backup does not restore: $(field reason "$SUB_LINE"): $(field message "$SUB_LINE")"
fi
restored=$SUB_LINE

manifest=$(<"$dir/manifest.json")
want=$(field gtid "$manifest") || true
# The position the restored server itself reports (restore.sh's `gtid`, read
# from the server after the load), not the dump's own header parsed a second
# time: a restore that loads the data but not the position must fail here.
got=$(field gtid "$restored") || true
gtid_subset "$got" "$want" && gtid_subset "$want" "$got" ||
  fail verify-failed "the restored server's position [$got] is not the backup's [$want]"
[[ $manifest =~ \"databases\":\[([^]]*)\] ]] || fail verify-failed "the manifest lists no databases"
listed=${BASH_REMATCH[1]}
mapfile -t have < <(sql_user_schemas verify-0)
n=0
while [[ $listed =~ ^,?\"([^\"]*)\"(.*)$ ]]; do
  db=${BASH_REMATCH[1]} listed=${BASH_REMATCH[2]}
  is_member_of "$db" "${have[@]}" || fail verify-failed "schema '$db' of the dump is missing after the restore"
  n=$((n + 1))
done
tables=0
if (( n > 0 )); then
  in=""; for db in "${have[@]}"; do in+="${in:+,}$(sql_quote "$db")"; done
  tables=$(sql verify-0 "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema IN ($in)")
fi

r_str gtid "$got"
r_raw databases "$n"
r_raw tables "$tables"
r_raw seconds "$((SECONDS - t0))"
finish verified

#!/bin/bash
# probe.sh liveness|readiness|candidate -- the server pods' probes.
#
#   liveness   (mysqld) the server answers a ping on 127.0.0.1 or its socket (also when it
#              refuses the login: a wrong password is no reason to restart it).
#   readiness  (mysqld) may this server take client traffic?  root logs in over
#              TCP (with OPERATOR_PASSWORD_FILE: through SERVER_SOCKET
#              [/var/run/mysqld/mysqld.sock], root being local only), then, in
#              this order:
#              - $PRIMARY_FILE names this pod and the cluster is bootstrapped:
#                Ready only while writable (read_only OFF);
#              - writable and not a replica (a primary the file does not name
#                yet: the kubelet refreshes the file up to a minute late):
#                Ready;
#              - $REBUILD_MARKER exists (join.sh: transactions the primary
#                lacks): not Ready;
#              - $SEED_MARKER exists (seed.sh is copying a donor): not Ready;
#              - the cluster is not bootstrapped yet ($INITIALIZED_FILE is not
#                `true` and the `repl` account does not exist): Ready when it
#                answers (restores and bootstrap need the servers up);
#              - a replica: Ready only while both replication threads run, no
#                replication error is recorded, and its lag is at most
#                $MAX_LAG_FILE seconds (spec.replication.maxLagSeconds;
#                default 60).  So a replica whose applier stopped on an error,
#                one that is still seeding, one that is not replicating at all,
#                or one hours behind serves no stale reads from -replicas.
#   candidate  (agent container) could this server be promoted?  Not while it
#              holds a partial copy ($SEED_MARKER) or transactions the primary
#              lacks ($REBUILD_MARKER, unless $PRIMARY_FILE names this pod).
#              No client call.  The hook counts a server whose mysqld runs and
#              whose agent is ready as a failover candidate: a replica turns
#              NotReady the moment its primary dies (its receiver fails), so
#              readiness alone would leave a failover no candidate.
#
# Why the recorded-primary rule: every server starts read-only, so a recorded
# primary that restarts comes back read-only.  Merely "up" it would look Ready,
# nobody would make it writable again, and writes through the -primary Service
# would fail.  NotReady instead lets the hook's failover (after its grace
# period) promote the most advanced server - possibly this one again.
#
# Exit 0 = pass, 1 = fail; one line on stdout says why (kubelet shows it in
# the pod's events).  One client call per run: cheap enough for a 2 s period.
# Credentials go through a private option file in $TMPDIR, never argv.
# Writes nothing else (not the termination log: that belongs to mysqld).
# Optional env: PROBE_HOST [127.0.0.1], PROBE_PORT [this pod's port in PODS,
# else 3306], PROBE_TIMEOUT [3] seconds to connect.
set -u
mode=${1:-}
case "${FLAVOR:-}" in
  mysql)   CLIENT=mysql   ADMIN=mysqladmin ;;
  mariadb) CLIENT=mariadb ADMIN=mariadb-admin ;;
  *) echo "probe: FLAVOR must be mysql or mariadb"; exit 1 ;;
esac
case "$mode" in
  liveness|readiness|candidate) ;;
  *) echo "usage: probe.sh liveness|readiness|candidate"; exit 1 ;;
esac
# first_line FILE: the file's first line, whitespace removed ("" if unreadable).
first_line() {
  local v=""
  if [ -n "${1:-}" ] && [ -r "$1" ]; then IFS= read -r v < "$1" || true; fi
  printf '%s' "${v//[[:space:]]/}"
}
primary=$(first_line "${PRIMARY_FILE:-}")
if [ "$mode" = candidate ]; then
  if [ -n "${SEED_MARKER:-}" ] && [ -e "$SEED_MARKER" ]; then
    echo "not a candidate: ${POD_NAME:-this server} is being seeded (partial data)"; exit 1
  fi
  if [ "$primary" != "${POD_NAME:-}" ] && [ -n "${REBUILD_MARKER:-}" ] && [ -e "$REBUILD_MARKER" ]; then
    echo "not a candidate: ${POD_NAME:-this server} holds transactions the primary lacks"; exit 1
  fi
  echo "candidate"; exit 0
fi
host=${PROBE_HOST:-127.0.0.1}
port=${PROBE_PORT:-}
if [ -z "$port" ]; then
  port=3306
  members=${PODS:-}
  if [ -n "${PODS_FILE:-}" ] && [ -r "$PODS_FILE" ]; then members=$(<"$PODS_FILE"); fi
  for e in $members ${POD_NAME:-x}=${POD_HOST:-}; do
    if [ "${e%%=*}" = "${POD_NAME:-}" ] && [[ $e == *:* ]]; then port=${e##*:}; fi
  done
fi
wait_s=${PROBE_TIMEOUT:-3}

umask 077
cnf=$(mktemp "${TMPDIR:-/tmp}/probe.XXXXXX") || { echo "probe: cannot create option file"; exit 1; }
trap 'rm -f "$cnf"' EXIT
# The root password: from MYSQL_ROOT_PASSWORD_FILE (pods mount it as a file;
# mysqld's own environment holds no password), else the environment.
pw=${MYSQL_ROOT_PASSWORD:-}
if [ -n "${MYSQL_ROOT_PASSWORD_FILE:-}" ] && [ -r "$MYSQL_ROOT_PASSWORD_FILE" ]; then
  IFS= read -r -d '' pw < "$MYSQL_ROOT_PASSWORD_FILE" || true
fi
export -n MYSQL_ROOT_PASSWORD 2>/dev/null || true
pw=${pw//\\/\\\\}; pw=${pw//\"/\\\"}
{
  printf '[client]\nuser=root\npassword="%s"\n' "$pw"
  # MySQL 8.4 caching_sha2_password over plain TCP (RM 6.5.1, --get-server-public-key)
  if [ "$FLAVOR" = mysql ]; then printf 'get-server-public-key=1\n'; fi
} > "$cnf"
conn=(--defaults-file="$cnf" --protocol=TCP --host="$host" --port="$port" --connect-timeout="$wait_s")
# With the operator account (OPERATOR_PASSWORD_FILE set, issue 18.5) root has no
# network account: root@'localhost', through the server's socket.
if [ -n "${OPERATOR_PASSWORD_FILE:-}" ]; then
  conn=(--defaults-file="$cnf" --protocol=SOCKET --socket="${SERVER_SOCKET:-/var/run/mysqld/mysqld.sock}"
    --connect-timeout="$wait_s")
fi

if [ "$mode" = liveness ]; then
  if out=$(timeout $((wait_s + 2)) "$ADMIN" "${conn[@]}" ping 2>&1); then
    echo "alive: ${out//$'\n'/ }"; exit 0
  fi
  echo "not alive: ${out//$'\n'/ }"; exit 1
fi

case $FLAVOR in
  mysql)   replica_status="SHOW REPLICA STATUS" ;;
  mariadb) replica_status="SHOW SLAVE STATUS" ;;
esac
# One call, vertical output ("name: value" lines): the SELECT's two columns,
# then the replica status, if any.
if ! out=$(timeout $((wait_s + 2)) "$CLIENT" "${conn[@]}" -E -e \
    "SELECT @@global.read_only AS ro, (SELECT COUNT(*) FROM mysql.user WHERE user = 'repl') AS repl; $replica_status" 2>&1); then
  echo "not ready: ${out//$'\n'/ }"; exit 1
fi
ro="" repl=0 host="" io="" sqlt="" lag="" ioerr="" sqlerr="" ioerrno=0 sqlerrno=0
while IFS= read -r line; do
  [[ $line =~ ^[[:space:]]*([A-Za-z_]+):[[:space:]]?(.*)$ ]] || continue
  v=${BASH_REMATCH[2]}
  case ${BASH_REMATCH[1]} in
    ro) ro=$v ;;
    repl) repl=$v ;;
    Master_Host|Source_Host) host=$v ;;
    Slave_IO_Running|Replica_IO_Running) io=$v ;;
    Slave_SQL_Running|Replica_SQL_Running) sqlt=$v ;;
    Seconds_Behind_Master|Seconds_Behind_Source) lag=$v ;;
    Last_IO_Errno) ioerrno=${v:-0} ;;
    Last_SQL_Errno) sqlerrno=${v:-0} ;;
    Last_IO_Error) ioerr=$v ;;
    Last_SQL_Error) sqlerr=$v ;;
  esac
done <<< "$out"
me=${POD_NAME:-this server}
bootstrapped=false
if [ "$(first_line "${INITIALIZED_FILE:-}")" = true ] || [ "${repl:-0}" != 0 ]; then bootstrapped=true; fi
if [ -n "$primary" ] && [ "$primary" = "${POD_NAME:-}" ] && [ "$bootstrapped" = true ]; then
  case "$ro" in
    0|OFF) echo "ready: $me is the primary (writable)"; exit 0 ;;
    *) echo "not ready: $me is the recorded primary but read-only (read_only=$ro)"; exit 1 ;;
  esac
fi
if [ -z "$host" ] && { [ "$ro" = 0 ] || [ "$ro" = OFF ]; }; then
  echo "ready: $me is writable and replicates from nobody (the primary; the primary file names ${primary:-nobody} yet)"; exit 0
fi
# join.sh found transactions the primary lacks: this server must not serve reads.
if [ -n "${REBUILD_MARKER:-}" ] && [ -r "$REBUILD_MARKER" ]; then
  IFS= read -r why < "$REBUILD_MARKER" || true
  echo "not ready: $me must be rebuilt: ${why:0:300}"; exit 1
fi
if [ -n "${SEED_MARKER:-}" ] && [ -r "$SEED_MARKER" ]; then
  read -r donor since _ < "$SEED_MARKER" || true
  echo "not ready: $me is being seeded from ${donor:-a donor} since ${since:-?} (copying its data)"; exit 1
fi
if [ "$bootstrapped" = false ]; then
  echo "ready: read_only=$ro, the cluster is not bootstrapped yet (primary ${primary:-none})"; exit 0
fi
max_lag=$(first_line "${MAX_LAG_FILE:-}")
[[ $max_lag =~ ^[0-9]+$ ]] || max_lag=60
if [ -z "$host" ]; then
  echo "not ready: $me does not replicate (its agent has not joined it to ${primary:-the primary} yet)"; exit 1
fi
if [ "$io" != Yes ] || [ "$sqlt" != Yes ] || [ "$ioerrno" != 0 ] || [ "$sqlerrno" != 0 ]; then
  why="receiver ${io:-?}, applier ${sqlt:-?}"
  [ "$ioerrno" = 0 ] || why+="; receiver error $ioerrno: ${ioerr:0:200}"
  [ "$sqlerrno" = 0 ] || why+="; applier error $sqlerrno: ${sqlerr:0:200}"
  echo "not ready: $me replicates from $host with $why"; exit 1
fi
if ! [[ $lag =~ ^[0-9]+$ ]]; then
  echo "not ready: $me replicates from $host, lag unknown (${lag:-NULL})"; exit 1
fi
if (( lag > max_lag )); then
  echo "not ready: $me lags ${lag}s behind $host (at most ${max_lag}s)"; exit 1
fi
echo "ready: $me replicates from $host, lag ${lag}s (at most ${max_lag}s)"
exit 0

#!/bin/bash
# probe.sh liveness|readiness -- the mysqld container's probes.
#
#   liveness   the server answers a ping on 127.0.0.1 (also when it refuses the
#              login: a wrong password is no reason to restart the server).
#   readiness  root logs in over TCP AND, when $PRIMARY_FILE names this pod
#              (POD_NAME) and the cluster has been bootstrapped, the server is
#              writable (read_only OFF); and, for any other pod, no
#              $REBUILD_MARKER file (join.sh writes it when this server has
#              transactions the primary lacks: it must not serve reads).
#
# Why the second readiness rule: every server starts read-only, so a recorded
# primary that restarts comes back read-only.  Merely "up" it would look Ready,
# nobody would make it writable again, and writes through the -primary Service
# would fail.  NotReady instead lets the hook's failover (after its grace
# period) promote the most advanced server - possibly this one again.
# "Bootstrapped" = the replication account `repl` exists (bootstrap.sh creates
# it; restore.sh does not dump accounts), so a pod named in the initial
# PRIMARY_FILE is Ready before the bootstrap Job ran.
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
  liveness|readiness) ;;
  *) echo "usage: probe.sh liveness|readiness"; exit 1 ;;
esac
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

if [ "$mode" = liveness ]; then
  if out=$(timeout $((wait_s + 2)) "$ADMIN" "${conn[@]}" ping 2>&1); then
    echo "alive: ${out//$'\n'/ }"; exit 0
  fi
  echo "not alive: ${out//$'\n'/ }"; exit 1
fi

if ! out=$(timeout $((wait_s + 2)) "$CLIENT" "${conn[@]}" -N -B -e \
    "SELECT @@global.read_only, (SELECT COUNT(*) FROM mysql.user WHERE user = 'repl')" 2>&1); then
  echo "not ready: ${out//$'\n'/ }"; exit 1
fi
read -r ro repl _ <<< "$out"
primary=""
if [ -n "${PRIMARY_FILE:-}" ] && [ -r "$PRIMARY_FILE" ]; then
  read -r primary < "$PRIMARY_FILE" || true
  primary=${primary//[[:space:]]/}
fi
if [ -n "$primary" ] && [ "$primary" = "${POD_NAME:-}" ] && [ "${repl:-0}" != 0 ]; then
  case "$ro" in
    0|OFF) ;;
    *) echo "not ready: $POD_NAME is the recorded primary but read-only (read_only=$ro)"; exit 1 ;;
  esac
fi
# join.sh found transactions the primary lacks: this server must not serve reads.
if [ "$primary" != "${POD_NAME:-}" ] && [ -n "${REBUILD_MARKER:-}" ] && [ -r "$REBUILD_MARKER" ]; then
  IFS= read -r why < "$REBUILD_MARKER" || true
  echo "not ready: ${POD_NAME:-this server} must be rebuilt (restored from a backup): ${why:0:300}"; exit 1
fi
echo "ready: read_only=$ro primary=${primary:-none}"
exit 0

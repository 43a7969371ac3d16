#!/bin/bash
# operator-user.sh -- one shot, run by the agent sidecar on the pod of the primary when
# the pod has the operator account's password (OPERATOR_PASSWORD_FILE, the
# credentials Secret's key operator-password; issue 18.5).  Makes sure that:
#   - 'mysqlhook'@'%' logs in with OPERATOR_PASSWORD and holds every privilege
#     WITH GRANT OPTION (see init.sh: seeds copy accounts, restores grant what
#     applications held);
#   - when ROOT_REMOTE_FILE (the config ConfigMap's key rootRemote) reads
#     `drop`: root has no account but root@'localhost'.  The hook writes `drop`
#     once every server's pod has the operator account's password: until then a
#     pod of the older template may still log in as root over the network.
# It logs in as root@'localhost' through the server's socket (SERVER_SOCKET
# [/var/run/mysqld/mysqld.sock]) -- the one account that exists in every state:
# a new cluster (init.sh made mysqlhook), a cluster made before the operator
# account (root@'%' only) and one whose operator password was changed since.
#
# Only on a writable server: the changes reach every replica through the
# binary log, like the repl and exporter accounts (a replica written to
# directly would hold a transaction the primary lacks).  A steady cluster
# writes nothing: the operator logs in and root has no other host.
#
# Exit: 0 `operator-user` (changed true/false); 75 `waiting` (this server is not
# writable, or does not answer: try later); 1 error.
SCRIPT_NAME=operator-user
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
self=${POD_NAME:-}
is_member "$self" || fail bad-env "POD_NAME '$self' is not in PODS"
[ -n "${OPERATOR_PASSWORD:-}" ] || fail bad-env "OPERATOR_PASSWORD_FILE is required"
[ -n "$CNF_ROOT" ] || fail bad-env "MYSQL_ROOT_PASSWORD_FILE is required (root logs in through the socket)"
SERVER_SOCKET=${SERVER_SOCKET:-/var/run/mysqld/mysqld.sock}
r_str pod "$self"
waiting() { r_str reason "$1"; r_str message "$2"; finish waiting 75; }

# local_sql STATEMENTS: as root@'localhost' through the socket; rows on stdout.
local_sql() {
  printf '%s\n' "$1" | timeout "$QUERY_TIMEOUT" "$CLIENT" --defaults-extra-file="$CNF_ROOT" \
    --protocol=SOCKET --socket="$SERVER_SOCKET" --connect-timeout="$CONNECT_TIMEOUT" -N -B
}
# Can the operator log in over the network with the current password?
operator_login_ok() {
  SQL_TIMEOUT=$((CONNECT_TIMEOUT + 5)) sql_as "$CNF" "$self" "SELECT 1" -N >/dev/null 2>&1
}

ro=$(local_sql "SELECT @@global.read_only") || waiting self-unreachable "$self does not answer on $SERVER_SOCKET"
[ "$ro" = 0 ] || waiting self-read-only "$self is not writable; the primary sets the operator account"

changed=false
if ! operator_login_ok; then
  pw=$(sql_quote "$OPERATOR_PASSWORD")
  local_sql "CREATE USER IF NOT EXISTS '$OPERATOR_USER'@'%' IDENTIFIED BY $pw;
    ALTER USER '$OPERATOR_USER'@'%' IDENTIFIED BY $pw;
    GRANT ALL PRIVILEGES ON *.* TO '$OPERATOR_USER'@'%' WITH GRANT OPTION" ||
    fail account-failed "could not set $OPERATOR_USER@'%' on $self"
  operator_login_ok || fail login-failed "$OPERATOR_USER still cannot log in to $self"
  log "account $OPERATOR_USER@'%' set on $self"
  changed=true
fi

root_remote=""
if [ -n "${ROOT_REMOTE_FILE:-}" ] && [ -r "$ROOT_REMOTE_FILE" ]; then
  IFS= read -r root_remote < "$ROOT_REMOTE_FILE" || true
fi
if [ "${root_remote//[[:space:]]/}" = drop ]; then
  drop=""
  while IFS= read -r h; do
    [ -n "$h" ] && drop+="DROP USER IF EXISTS 'root'@$(sql_quote "$h");"
  done < <(local_sql "SELECT host FROM mysql.user WHERE user = 'root' AND host <> 'localhost'") ||
    fail account-failed "could not list root's accounts on $self"
  if [ -n "$drop" ]; then
    local_sql "$drop" || fail account-failed "could not drop root's network accounts on $self"
    log "root's network accounts dropped on $self: root is local only"
    changed=true
  fi
fi
r_raw changed "$changed"
finish operator-user 0

#!/bin/bash
# exporter-user.sh -- one shot, run by the agent sidecar on the pod of the primary when
# the pod has a mysqld_exporter sidecar (EXPORTER_PASSWORD set).  Makes sure the
# account 'exporter'@'localhost' logs in with EXPORTER_PASSWORD and holds only
# what mysqld_exporter's default collectors need:
#   MySQL 8.4: PROCESS (InnoDB information_schema tables), REPLICATION CLIENT
#              (SHOW REPLICA STATUS, SHOW BINARY LOGS; RM 8.2.2)
#   MariaDB:   PROCESS, BINLOG MONITOR (SHOW BINLOG STATUS), SLAVE MONITOR
#              (SHOW SLAVE STATUS, 10.5.9+)
#   both:      SELECT on performance_schema only (never on application data),
#              at most 3 connections.
# 'localhost' = the server's socket only: the sidecar logs in through it (which
# also lets MySQL 8.4's caching_sha2_password work without TLS), nobody reaches
# the account over the network.
#
# Only on a writable server: the account reaches every replica through the
# binary log, like the repl account (a replica written to directly would hold a
# transaction the primary lacks).  Does nothing when the exporter can already
# log in through EXPORTER_SOCKET (the socket both containers share), so a
# password the Secret has since changed (the sidecar turned off and on again)
# is set again, and a steady cluster writes nothing.
#
# Exit: 0 `exporter-user` (changed true/false); 75 `waiting` (this server is not
# writable, or does not answer: try later); 1 error.
SCRIPT_NAME=exporter-user
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

self=${POD_NAME:-}
is_member "$self" || fail bad-env "POD_NAME '$self' is not in PODS"
# The exporter's password: a file of the Secret <name>-exporter (pods), never
# the environment (EXPORTER_PASSWORD itself: tests, by hand).
load_secret EXPORTER_PASSWORD
[ -n "${EXPORTER_PASSWORD:-}" ] || fail bad-env "EXPORTER_PASSWORD_FILE is required"
[ -n "${EXPORTER_SOCKET:-}" ] || fail bad-env "EXPORTER_SOCKET is required"
r_str pod "$self"

waiting() { r_str reason "$1"; r_str message "$2"; finish waiting 75; }

# Can the exporter log in with the current password, through the socket?
exporter_login_ok() {
  local cnf rc=0 pw=$EXPORTER_PASSWORD
  cnf=$(mktemp "${TMPDIR:-/tmp}/exportercnf.XXXXXX"); chmod 600 "$cnf"
  pw=${pw//\\/\\\\}; pw=${pw//\"/\\\"}
  printf '[client]\nuser=exporter\npassword="%s"\n' "$pw" > "$cnf"
  timeout $((CONNECT_TIMEOUT + 5)) "$CLIENT" --defaults-extra-file="$cnf" --protocol=SOCKET \
    --socket="$EXPORTER_SOCKET" --connect-timeout="$CONNECT_TIMEOUT" -N -B -e "SELECT 1" >/dev/null 2>&1 || rc=1
  rm -f "$cnf"
  return $rc
}

if exporter_login_ok; then
  r_raw changed false
  finish exporter-user 0
fi
reachable "$self" || waiting self-unreachable "$self does not answer"
[ "$(sql_is_read_only "$self")" = 0 ] || waiting self-read-only "$self is not writable; the primary creates the account"
sql_create_exporter_user "$self"
exporter_login_ok || fail login-failed "the exporter still cannot log in through $EXPORTER_SOCKET"
log "account exporter@localhost set on $self"
r_raw changed true
finish exporter-user 0

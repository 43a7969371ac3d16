#!/bin/bash
# tls-reload.sh -- run by the agent sidecar (spec.tls): makes the server load the
# certificate, key and CA now in TLS_DIR.  The server reads them once, at start;
# cert-manager renews a certificate well before it expires and the kubelet then
# replaces the mounted files, but without this the server would go on presenting
# the old certificate until it expired, and from then on every client that
# verifies (the failover and switchover Jobs among them) would be refused.
#
# It logs in through the server's own socket (SERVER_SOCKET), never TCP: a
# verifying TCP client would check the server's old certificate against the new
# CA, which fails exactly when a CA rotation needs the reload.
#   MySQL:   ALTER INSTANCE RELOAD TLS (RM 15.1.5, 8.0.16+; never written to
#            the binary log).
#   MariaDB: FLUSH LOCAL SSL (KB "FLUSH", 10.4+).  LOCAL: a FLUSH is otherwise
#            written to the binary log, and on a replica that would be a
#            transaction of its own, errant for the rest of the cluster.
# A reload that fails (a broken new certificate) leaves the server with the
# one it had (both servers keep the old context on error), and says so.
#
# Prints one JSON line: {"result":"reloaded"} or {"result":"error",...}.
set -u
SCRIPT_NAME=tls-reload
SERVER_SOCKET=${SERVER_SOCKET:-/var/run/mysqld/mysqld.sock}
CONNECT_TIMEOUT=${CONNECT_TIMEOUT:-5}
FLAVOR=${FLAVOR:-mysql}
case $FLAVOR in
  mysql)   CLIENT=mysql   stmt="ALTER INSTANCE RELOAD TLS" ;;
  mariadb) CLIENT=mariadb stmt="FLUSH LOCAL SSL" ;;
  *) printf '{"result":"error","reason":"bad-env","message":"FLAVOR %s is not mysql or mariadb"}\n' "$FLAVOR"; exit 1 ;;
esac

pw=${MYSQL_ROOT_PASSWORD:-}
if [ -n "${MYSQL_ROOT_PASSWORD_FILE:-}" ] && [ -r "$MYSQL_ROOT_PASSWORD_FILE" ]; then
  IFS= read -r -d '' pw < "$MYSQL_ROOT_PASSWORD_FILE" || true
fi
export -n MYSQL_ROOT_PASSWORD 2>/dev/null || true
cnf=$(mktemp "${TMPDIR:-/tmp}/tlsreload.XXXXXX") || exit 1
trap 'rm -f "$cnf"' EXIT
chmod 600 "$cnf"
pw=${pw//\\/\\\\}; pw=${pw//\"/\\\"}
printf '[client]\nuser=root\npassword="%s"\n' "$pw" > "$cnf"

# The statement goes over stdin like every other (no SQL on a command line).
if out=$(printf '%s\n' "$stmt" | timeout $((CONNECT_TIMEOUT + 10)) "$CLIENT" --defaults-extra-file="$cnf" \
    --protocol=SOCKET --socket="$SERVER_SOCKET" --connect-timeout="$CONNECT_TIMEOUT" -N -B 2>&1); then
  printf '{"result":"reloaded"}\n'
else
  out=${out//\\/\\\\}; out=${out//\"/\\\"}; out=${out//$'\n'/ }
  printf '{"result":"error","reason":"reload-failed","message":"%s: %s"}\n' "$stmt" "$out"
  exit 1
fi

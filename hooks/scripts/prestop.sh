#!/bin/bash
# prestop.sh -- the mysqld container's preStop hook:
#
#     lifecycle: { preStop: { exec: { command: [bash, /opt/mysql-hook/prestop.sh] } } }
#
# A primary pod that is being deleted (eviction, node drain, rollout) should
# hand over to a replica by a switchover -- seconds of refused writes -- not
# die and cost a failover.  The kubelet sends mysqld its SIGTERM only after
# this hook returns, and the hook sees the pod's deletionTimestamp meanwhile
# and runs switchover.sh.  So:
#   - this pod (POD_NAME) is not the primary -- neither named in PRIMARY_FILE
#     nor a writable non-replica itself -- or PODS has one member: exit at once;
#   - otherwise wait, up to PRESTOP_WAIT seconds [90; below the pod's 120 s
#     termination grace period], until this server is read-only AND another
#     member is a writable non-replica (the switchover happened); then exit.
# It never fails: it always exits 0 (a failed preStop hook only delays the
# kill), and says on stderr why it stopped waiting; one JSON line on stdout:
#   {"result":"not-primary"|"single-member"|"handed-over"|"timeout"|
#    "self-unreachable"|"error","pod","primary","waited":SECONDS,"message"}
# It does not write the termination log: that belongs to mysqld.
# Env: FLAVOR, POD_NAME, PODS (or PODS_FILE), MYSQL_ROOT_PASSWORD_FILE, PRIMARY_FILE,
# PRESTOP_WAIT [90], PRESTOP_INTERVAL [1] seconds between checks.
if [ -z "${PRESTOP_INNER:-}" ]; then
  # whatever happens below, the hook succeeds
  PRESTOP_INNER=1 bash "${BASH_SOURCE[0]}" "$@" || true
  exit 0
fi

SCRIPT_NAME=prestop
TERMINATION_LOG=/dev/null              # the container's message belongs to mysqld
CONNECT_TIMEOUT=${CONNECT_TIMEOUT:-3}
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PRESTOP_WAIT=${PRESTOP_WAIT:-90}
PRESTOP_INTERVAL=${PRESTOP_INTERVAL:-1}

self=${POD_NAME:-}
is_member "$self" || fail bad-env "POD_NAME '$self' is not in PODS"
recorded=$(recorded_primary)
r_str pod "$self"
r_str primary "$recorded"
stop() { r_raw waited "$SECONDS"; r_str message "$2"; log "$2"; finish "$1" 0; }

(( ${#POD_NAMES[@]} > 1 )) || stop single-member "one-member cluster: nobody to hand over to"
reachable "$self" || stop self-unreachable "$self does not answer; nothing to hand over"
# writable non-replica: the primary, whatever the (possibly stale) file says
is_open() {
  [ "$(sql_is_read_only "$1" 2>/dev/null)" = 0 ] || return 1
  sql_replica_status "$1" 2>/dev/null
  [ "$RS_CONFIGURED" = 0 ]
}
if [ "$recorded" != "$self" ] && ! is_open "$self"; then
  stop not-primary "$self is not the primary (recorded: ${recorded:-none}); nothing to wait for"
fi

log "$self is the primary; waiting up to ${PRESTOP_WAIT}s for the switchover"
while :; do
  if reachable "$self"; then
    if [ "$(sql_is_read_only "$self" 2>/dev/null)" = 1 ]; then
      for p in "${POD_NAMES[@]}"; do
        [ "$p" = "$self" ] && continue
        if reachable "$p" && is_open "$p"; then
          r_str newPrimary "$p"
          stop handed-over "$self is read-only and $p is the writable primary after ${SECONDS}s"
        fi
      done
    fi
  else
    stop self-unreachable "$self stopped answering after ${SECONDS}s"
  fi
  (( SECONDS < PRESTOP_WAIT )) || stop timeout "no switchover within ${PRESTOP_WAIT}s; stopping anyway (the hook fails over)"
  sleep "$PRESTOP_INTERVAL"
done

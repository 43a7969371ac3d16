#!/bin/bash
# bootstrap.sh -- Job, once per cluster.  Makes PRIMARY (or the ordinal-0 pod
# when PRIMARY is empty) the writable primary with lossless semi-sync, creates
# the repl account, and makes every other reachable member its replica.
# Idempotent: a rerun finds the account, the replicas and the open primary in
# place and changes nothing.  Refuses when the chosen pod replicates from
# another member or another member is already writable (then the cluster was
# bootstrapped before and has moved on: use switchover/failover instead).
SCRIPT_NAME=bootstrap
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
BOOTSTRAP_WAIT=${BOOTSTRAP_WAIT:-300}   # seconds for the primary to answer
MEMBER_WAIT=${MEMBER_WAIT:-30}          # seconds for the other members to answer

primary=${PRIMARY:-}
if [ -z "$primary" ]; then
  for p in "${POD_NAMES[@]}"; do
    if [ "$(pod_ordinal "$p" || echo x)" = 0 ]; then primary=$p; break; fi
  done
  primary=${primary:-${POD_NAMES[0]}}
fi
is_member "$primary" || fail bad-env "PRIMARY '$primary' is not in PODS"
r_str primary "$primary"
wait_reachable "$primary" "$BOOTSTRAP_WAIT" || fail primary-unreachable "$primary did not answer within ${BOOTSTRAP_WAIT}s"

# The others, waited for together (pods of a new StatefulSet come up one by one).
others=() unreachable=()
pending=()
for p in "${POD_NAMES[@]}"; do [ "$p" = "$primary" ] || pending+=("$p"); done
deadline=$((SECONDS + MEMBER_WAIT))
while (( ${#pending[@]} > 0 )); do
  still=()
  for p in "${pending[@]}"; do if reachable "$p"; then others+=("$p"); else still+=("$p"); fi; done
  pending=("${still[@]}")
  (( ${#pending[@]} == 0 || SECONDS >= deadline )) && break
  sleep 1
done
unreachable=("${pending[@]}")

# Safety first.
sql_replica_status "$primary"
if [ "$RS_CONFIGURED" = 1 ]; then
  fail primary-is-replica "$primary replicates from $RS_HOST:$RS_PORT; the cluster was bootstrapped before"
fi
for p in "${others[@]}"; do
  if [ "$(sql_is_read_only "$p")" = 0 ]; then
    fail other-writable "$p is writable; refusing to create a second primary"
  fi
done

semisync=false
(( ${#POD_NAMES[@]} > 1 )) && semisync=true

# The repl account (replicated to everyone through the binary log).
if ! repl_user_ok "$primary"; then
  sql_set_admin_writable "$primary"
  sql_create_repl_user "$primary"
fi
if [ "$semisync" = true ]; then sql_enable_semisync_source "$primary"; else sql_disable_semisync_source "$primary"; fi

joined=() rebuild=()
for p in "${others[@]}"; do
  if replicating_from "$p" "$primary"; then joined+=("$p"); continue; fi
  e=$(sql_gtid_executed "$p"); pexec=$(sql_gtid_executed "$primary")
  if ! gtid_subset "$e" "$pexec" "$primary"; then
    log "$p has transactions the primary lacks: $(gtid_subtract "$e" "$pexec" "$primary")"
    rebuild+=("$p"); continue
  fi
  log "making $p a replica of $primary"
  sql_make_replica "$p" "$primary"
  joined+=("$p")
done

# Wait (bounded) until the replicas are connected, so the report is true.
deadline=$((SECONDS + 30))
for p in "${joined[@]}"; do
  until replicating_from "$p" "$primary"; do
    if (( SECONDS >= deadline )); then log "$p not connected yet: ${RS_IO:-?}/${RS_SQL:-?} ${RS_ERR}"; break; fi
    sleep 0.5
  done
done

sql_set_writable "$primary"
log "$primary is writable (semi-sync: $semisync)"

r_raw semiSync "$semisync"
r_arr replicas "${joined[@]}"
r_arr unreachable "${unreachable[@]}"
r_arr rebuildNeeded "${rebuild[@]}"
r_str gtid "$(sql_gtid_position "$primary")"
finish bootstrapped 0

#!/bin/bash
# bootstrap.sh -- Job, once per cluster (also safe to rerun).  Chooses the
# first primary, makes it writable with lossless semi-sync, creates the repl
# account, and makes every other reachable member its replica.
#
# PRIMARY is a hint (empty: the ordinal-0 pod).  Every member is surveyed:
# - every member that answers is empty (no GTIDs: a new cluster): the hint
#   becomes the primary; members that do not answer within MEMBER_WAIT are
#   left out ("unreachable"; they join later through their agents);
# - any member holds data (retained volumes, a restore, an earlier run):
#   every member must answer (BOOTSTRAP_WAIT; else members-unreachable).
#   Members with transactions of their own that no other member has are
#   errant (the failover rule in README.md): reported in rebuildNeeded, never
#   joined, never silently discarded.  Among the others the primary is the
#   one whose executed+received set contains every other's -- on a tie the
#   hint, then a member with no replica configuration, then ordinal order;
#   none: diverged (the sets are listed; a human decides).  A chosen member
#   that is a former replica first applies its relay log, then its replica
#   configuration is reset.
# - a member that is already the writable primary (an earlier run, a running
#   cluster) is kept; two writable members: other-writable, nothing touched.
# The result line names the chosen "primary" and, once it is writable,
# "promoted".  Idempotent: a rerun finds the account, the replicas and the
# open primary in place and changes nothing.
SCRIPT_NAME=bootstrap
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
BOOTSTRAP_WAIT=${BOOTSTRAP_WAIT:-300}   # seconds for the hint / every member (data) to answer
MEMBER_WAIT=${MEMBER_WAIT:-30}          # seconds for the other members of a new cluster

hint=${PRIMARY:-}
if [ -z "$hint" ]; then
  for p in "${POD_NAMES[@]}"; do
    if [ "$(pod_ordinal "$p" || echo x)" = 0 ]; then hint=$p; break; fi
  done
  hint=${hint:-${POD_NAMES[0]}}
fi
is_member "$hint" || fail bad-env "PRIMARY '$hint' is not in PODS"

# --- survey: who answers, who holds data -------------------------------------
declare -A EXEC=() RECV=() IDENT=()
answered=() pending=("${POD_NAMES[@]}") has_data=false
survey() {
  local p=$1
  EXEC[$p]=$(sql_gtid_executed "$p") || return 1
  RECV[$p]=$(sql_gtid_received "$p") || return 1
  IDENT[$p]=$(sql_server_identity "$p") || return 1
}
start=$SECONDS
while :; do
  still=()
  for p in "${pending[@]}"; do
    if reachable "$p" && survey "$p"; then
      answered+=("$p")
      [ -n "${EXEC[$p]}" ] && has_data=true
    else
      still+=("$p")
    fi
  done
  pending=("${still[@]}")
  (( ${#pending[@]} == 0 )) && break
  elapsed=$((SECONDS - start))
  if [ "$has_data" = true ]; then
    (( elapsed < BOOTSTRAP_WAIT )) ||
      fail members-unreachable "members hold data, so every member must answer to choose the primary; not answering after ${BOOTSTRAP_WAIT}s: ${pending[*]}"
  elif is_member_of "$hint" "${answered[@]}"; then
    (( elapsed < MEMBER_WAIT )) || break
  else
    (( elapsed < BOOTSTRAP_WAIT )) || { r_str primary "$hint"; fail primary-unreachable "$hint did not answer within ${BOOTSTRAP_WAIT}s"; }
  fi
  sleep 1
done
unreachable=("${pending[@]}")
# answered, in ordinal (PODS) order
members=()
for p in "${POD_NAMES[@]}"; do is_member_of "$p" "${answered[@]}" && members+=("$p"); done

# --- who is writable already ---------------------------------------------------
writable=()
for p in "${members[@]}"; do
  [ "$(sql_is_read_only "$p")" = 0 ] && writable+=("$p")
done
(( ${#writable[@]} <= 1 )) ||
  fail other-writable "several members are writable: ${writable[*]}; refusing to choose"

errant=()
if (( ${#writable[@]} == 1 )); then
  primary=${writable[0]}
  sql_replica_status "$primary"
  [ "$RS_CONFIGURED" = 0 ] ||
    fail other-writable "$primary is writable and replicates from $RS_HOST:$RS_PORT; refusing to choose"
  log "$primary is already the writable primary; keeping it"
elif [ "$has_data" = false ]; then
  primary=$hint
  log "new cluster (no member holds data): $primary becomes the primary"
else
  # errant members: transactions of their own no other member has
  split_errant - "${members[@]}"
  errant=("${ERRANT[@]}") candidates=("${NONERRANT[@]}")
  for p in "${errant[@]}"; do log "$p is errant: it wrote transactions no other member has"; done
  # preference: the hint, members with no replica configuration, the rest
  ordered=() plain=() former=()
  for p in "${candidates[@]}"; do
    [ "$p" = "$hint" ] && { ordered+=("$p"); continue; }
    sql_replica_status "$p"
    if [ "$RS_CONFIGURED" = 0 ]; then plain+=("$p"); else former+=("$p"); fi
  done
  ordered+=("${plain[@]}" "${former[@]}")
  CAND_SET=()
  for p in "${ordered[@]}"; do CAND_SET[$p]=${RECV[$p]}; done
  sets=""
  for p in "${members[@]}"; do sets+="$p=[${EXEC[$p]}] "; done
  (( ${#ordered[@]} > 0 )) || fail diverged "every member is errant: ${sets% }"
  primary=$(choose_most_advanced "${ordered[@]}") ||
    fail diverged "no member contains every other's transactions: ${sets% } (errant: ${errant[*]:-none})"
  log "members hold data: $primary contains every other member's transactions (hint: $hint)"
fi
r_str primary "$primary"

# --- the chosen primary: a former replica applies its relay log, then forgets
# its source
sql_replica_status "$primary"
if [ "$RS_CONFIGURED" = 1 ]; then
  sql_stop_io_thread "$primary"
  sql_drain_relay_log "$primary" "$WAIT_TIMEOUT" ||
    fail apply-timeout "$primary did not apply its relay log within ${WAIT_TIMEOUT}s"
  [ -z "${RECV[$primary]:-}" ] || sql_wait_executed "$primary" "${RECV[$primary]}" 5 ||
    fail apply-timeout "$primary did not reach [${RECV[$primary]}]"
  log "$primary: resetting its replica configuration ($RS_HOST:$RS_PORT)"
  sql_reset_replica_all "$primary"
fi

semisync=false
(( ${#POD_NAMES[@]} > 1 )) && semisync=true

# The repl account (replicated to everyone through the binary log).
if ! repl_user_ok "$primary"; then
  sql_set_admin_writable "$primary"
  sql_create_repl_user "$primary"
fi
if [ "$semisync" = true ]; then sql_enable_semisync_source "$primary"; else sql_disable_semisync_source "$primary"; fi

joined=() rebuild=("${errant[@]}")
for p in "${members[@]}"; do
  [ "$p" = "$primary" ] && continue
  is_member_of "$p" "${errant[@]}" && continue
  if replicating_from "$p" "$primary"; then joined+=("$p"); continue; fi
  # an interrupted seed (partial data): its agent copies a donor again
  if sql_is_seeding "$p"; then log "$p is being seeded; its agent joins it"; continue; fi
  e=$(sql_gtid_executed "$p"); pexec=$(sql_gtid_executed "$primary")
  if ! gtid_subset "$e" "$pexec" "$primary"; then
    log "$p has transactions the primary lacks: $(gtid_subtract "$e" "$pexec" "$primary")"
    rebuild+=("$p"); continue
  fi
  log "making $p a replica of $primary"
  sql_make_replica "$p" "$primary"
  joined+=("$p")
done
for p in "${rebuild[@]}"; do sql_try_read_only "$p" "$FENCE_LOCK_WAIT" >/dev/null 2>&1 || true; done

# Wait (bounded) until the replicas are connected, so the report is true.
deadline=$((SECONDS + 30))
for p in "${joined[@]}"; do
  until replicating_from "$p" "$primary"; do
    if (( SECONDS >= deadline )); then log "$p not connected yet: ${RS_IO:-?}/${RS_SQL:-?} ${RS_ERR}"; break; fi
    sleep 0.5
  done
done

sql "$primary" "$(open_with_epoch_sql)"
promoted "$primary"
log "$primary is writable (semi-sync: $semisync)"

r_raw semiSync "$semisync"
r_arr replicas "${joined[@]}"
r_arr unreachable "${unreachable[@]}"
r_arr rebuildNeeded "${rebuild[@]}"
r_str gtid "$(sql_gtid_position "$primary")"
finish bootstrapped 0

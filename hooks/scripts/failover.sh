#!/bin/bash
# failover.sh -- Job.  PRIMARY is dead or unhealthy: promote the most advanced
# healthy replica.
#   1. fence PRIMARY if it answers (common.sh `fence`: read only,
#      super_read_only on MySQL, client connections killed), and any other
#      writable member; one that answers and cannot be fenced: fence-failed,
#      nothing promoted;
#   2. stop the IO (receiver) thread on every reachable replica, so nothing new
#      arrives and the old primary cannot collect semi-sync acknowledgements;
#   3. skip errant replicas (rule in README.md) and pick the one whose
#      executed+received GTID set contains every other candidate's;
#   4. wait until it has applied its relay log;
#   5. promote it: stop replication, forget the source, semi-sync source on
#      (more than one member), writable;
#   6. repoint every other reachable member, the fenced old primary included,
#      unless it has transactions the new primary lacks (rebuildNeeded).
# Idempotent: a rerun that finds exactly one writable non-replica member other
# than PRIMARY (promoted by an earlier run) adopts it and only repeats step 6.
SCRIPT_NAME=failover
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

old=${PRIMARY:-}
is_member "$old" || fail bad-env "PRIMARY '$old' is not in PODS"
r_str from "$old"

# 1. fence: nothing is promoted while another member answers and is not
#    fenced (read-only, client connections killed).
old_up=false fenced=false old_exec=""
if reachable "$old"; then
  old_up=true
  if fence "$old"; then
    fenced=true
  elif reachable "$old"; then
    fail fence-failed "$old answers but could not be made read-only (see the log); nothing promoted"
  else
    old_up=false
    log "old primary $old stopped answering while being fenced"
  fi
  [ "$old_up" = true ] && old_exec=$(sql_gtid_executed "$old")
  log "old primary $old answers; fenced=$fenced"
else
  log "old primary $old does not answer"
fi

members=() unreachable=()
for p in "${POD_NAMES[@]}"; do
  [ "$p" = "$old" ] && continue
  if reachable "$p"; then members+=("$p"); else unreachable+=("$p"); fi
done
r_arr unreachable "${unreachable[@]}"

# Promoted by an earlier run?  Any other writable member is fenced.
writable=() loose=()
for p in "${members[@]}"; do
  [ "$(sql_is_read_only "$p")" = 0 ] || continue
  sql_replica_status "$p"
  if [ "$RS_CONFIGURED" = 0 ]; then writable+=("$p"); else loose+=("$p"); fi
done
if (( ${#writable[@]} > 1 )); then
  for p in "${writable[@]}"; do fence "$p" || true; done
  fail split-brain "more than one writable member: ${writable[*]} (fenced; a rerun chooses among them)"
fi
for p in "${loose[@]}"; do
  log "$p is a writable replica; fencing it"
  fence "$p" || fail fence-failed "$p answers, is writable and could not be made read-only; nothing promoted"
done
r_raw fenced "$fenced"

semisync=false
(( ${#POD_NAMES[@]} > 1 )) && semisync=true

if (( ${#writable[@]} == 1 )); then
  new=${writable[0]}
  log "$new is already the writable primary (earlier run); adopting it"
else
  (( ${#members[@]} > 0 )) || fail no-candidate "no member other than $old answers"
  # 2. nothing new may arrive
  for p in "${members[@]}"; do sql_stop_io_thread "$p"; done
  # 3. survey
  declare -A EXEC=() RECV=() IDENT=()
  for p in "${members[@]}"; do
    EXEC[$p]=$(sql_gtid_executed "$p")
    RECV[$p]=$(sql_gtid_received "$p")
    IDENT[$p]=$(sql_server_identity "$p")
    log "$p executed=[${EXEC[$p]}] received=[${RECV[$p]}]"
  done
  errant=() candidates=()
  for p in "${members[@]}"; do
    others_exec=$old_exec nothers=0
    [ "$old_up" = true ] && nothers=1
    for q in "${members[@]}"; do
      [ "$q" = "$p" ] && continue
      others_exec=$(gtid_union "$others_exec" "${EXEC[$q]}"); nothers=$((nothers + 1))
    done
    if (( nothers > 0 )) && gtid_own_errant "${EXEC[$p]}" "$others_exec" "${IDENT[$p]}" "$p"; then
      log "$p is errant: it wrote transactions no other member has"
      errant+=("$p")
    else
      candidates+=("$p")
    fi
  done
  r_arr errant "${errant[@]}"
  (( ${#candidates[@]} > 0 )) || fail no-candidate "every reachable replica is errant"
  best=${candidates[0]}
  for c in "${candidates[@]:1}"; do
    if gtid_ge "${RECV[$c]}" "${RECV[$best]}" "$c" && ! gtid_ge "${RECV[$best]}" "${RECV[$c]}" "$c"; then best=$c; fi
  done
  for c in "${candidates[@]}"; do
    gtid_ge "${RECV[$best]}" "${RECV[$c]}" "$best" ||
      fail diverged "no candidate contains all others: $best lacks part of $c"
  done
  new=$best
  log "candidate: $new"
  # 4. apply what was received
  sql_start_sql_thread "$new"
  sql_wait_executed "$new" "${RECV[$new]}" "$WAIT_TIMEOUT" ||
    fail apply-timeout "$new did not apply its relay log within ${WAIT_TIMEOUT}s"
  # 5. promote
  sql_reset_replica_all "$new"
  if [ "$semisync" = true ]; then sql_enable_semisync_source "$new"; else sql_disable_semisync_source "$new"; fi
  sql_set_writable "$new"
  log "$new promoted"
fi
r_str primary "$new"

# 6. repoint the rest
targets=()
for p in "${members[@]}"; do [ "$p" = "$new" ] || targets+=("$p"); done
[ "$old_up" = true ] && targets+=("$old")
repointed=() rebuild=()
for p in "${targets[@]}"; do
  if replicating_from "$p" "$new"; then repointed+=("$p"); continue; fi
  # member first, then the primary (whose set only grows)
  e=$(sql_gtid_executed "$p"); nexec=$(sql_gtid_executed "$new")
  if ! gtid_subset "$e" "$nexec" "$new"; then
    log "$p has transactions $new lacks: $(gtid_subtract "$e" "$nexec" "$new"); not repointed"
    sql_set_read_only "$p" 2>/dev/null || true
    rebuild+=("$p"); continue
  fi
  sql_make_replica "$p" "$new"
  repointed+=("$p")
done
r_raw semiSync "$semisync"
r_arr replicas "${repointed[@]}"
r_arr rebuildNeeded "${rebuild[@]}"
r_str gtid "$(sql_gtid_position "$new")"
finish promoted 0

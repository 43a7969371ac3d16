#!/bin/bash
# failover.sh -- Job.  PRIMARY is dead or unhealthy: promote the most advanced
# healthy replica.
#   1. fence PRIMARY if it answers (read only; super_read_only on MySQL);
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
# One member (PODS names only PRIMARY): there is nobody to promote, but a
# restarted server comes back read-only; if PRIMARY answers and replicates from
# nobody it is made writable again (result promoted, primary = PRIMARY).
SCRIPT_NAME=failover
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

old=${PRIMARY:-}
is_member "$old" || fail bad-env "PRIMARY '$old' is not in PODS"
r_str from "$old"

# 1. fence
old_up=false fenced=false old_exec=""
if reachable "$old"; then
  old_up=true
  for _ in 1 2 3; do
    if sql_set_read_only "$old" 2>/dev/null && [ "$(sql_is_read_only "$old")" = 1 ]; then fenced=true; break; fi
    sleep 1
  done
  old_exec=$(sql_gtid_executed "$old" 2>/dev/null || true)
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

# Promoted by an earlier run?
writable=()
for p in "${members[@]}"; do
  sql_replica_status "$p"
  if [ "$(sql_is_read_only "$p")" = 0 ] && [ "$RS_CONFIGURED" = 0 ]; then writable+=("$p"); fi
done
(( ${#writable[@]} <= 1 )) || fail split-brain "more than one writable member: ${writable[*]}"

if [ "$old_up" = true ] && [ "$fenced" = false ]; then
  # The old primary answers but could not be fenced (commits stuck?).  That is
  # only safe while it runs lossless semi-sync: with every receiver stopped it
  # cannot complete a commit.  Otherwise refuse.
  if [ "$(sql_semisync_source_enabled "$old" 2>/dev/null || echo 0)" != 1 ]; then
    fail fence-failed "$old answers, is still writable and not semi-synchronous"
  fi
fi
r_raw fenced "$fenced"

semisync=false
(( ${#POD_NAMES[@]} > 1 )) && semisync=true

if (( ${#POD_NAMES[@]} == 1 )); then
  # The only member: nothing to fence it against, nothing it could lack.
  [ "$old_up" = true ] || fail no-candidate "$old, the only member, does not answer"
  sql_replica_status "$old"
  [ "$RS_CONFIGURED" = 0 ] || fail primary-is-replica "$old, the only member, replicates from ${RS_HOST:-another server}"
  sql_disable_semisync_source "$old"
  sql_set_writable "$old"
  [ "$(sql_is_read_only "$old")" = 0 ] || fail not-writable "$old stays read-only"
  new=$old
  log "$new, the only member, is writable again"
elif (( ${#writable[@]} == 1 )); then
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
[ "$old_up" = true ] && [ "$old" != "$new" ] && targets+=("$old")
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

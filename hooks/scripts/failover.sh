#!/bin/bash
# failover.sh -- Job.  The recorded primary PRIMARY is dead, unhealthy, or
# restarted read-only: make the most advanced reachable server the writable
# primary -- possibly PRIMARY itself.
#   1. fence PRIMARY if it answers (common.sh `fence`: read only,
#      super_read_only on MySQL, client connections killed), and any other
#      writable member; one that a commit waiting for a semi-sync
#      acknowledgement keeps writable is shut down (FENCE_SHUTDOWN=1: on MySQL
#      KILL does not end that wait; it stops answering, the client never got an
#      OK, and it restarts read-only); one that answers and cannot be fenced
#      otherwise: fence-failed, nothing promoted;
#   2. stop the IO (receiver) thread on every reachable member other than
#      PRIMARY, so nothing new arrives and the old primary cannot collect
#      semi-sync acknowledgements, and verify it stopped (a member whose
#      receiver may still run is not examined); read each one's executed and
#      received sets: all members at once, by the agent's `examine`;
#   3. quorum: fewer than QUORUM of them answered and FORCE is not 1 ->
#      no-quorum, nothing promoted -- unless PRIMARY answers, at least one
#      other member is examined, and PRIMARY's received set contains every
#      examined member's and PRIMARY_GTID (then nothing acknowledged can be
#      missing from it);
#   4. candidates: PRIMARY when it answers (fenced; its own transactions are
#      never errant) and the examined members that are not errant (rule in
#      README.md); choose the one whose executed+received set contains every
#      other candidate's, PRIMARY first on a tie, then ordinal order;
#      none -> diverged;
#   5. wait until it has applied what it received, relay log included (also
#      after a restart: see sql_drain_relay_log in common.sh);
#   6. promote it: stop replication, forget the source, semi-sync source on
#      (more than one member), writable.  From here on every result line
#      carries "promoted";
#   7. repoint every other reachable member, the fenced old primary included,
#      unless it has transactions the new primary lacks (rebuildNeeded); best
#      effort: a member that cannot be repointed is listed in repointFailed
#      (reason in the log) and does not fail the Job.
# Env (besides the common ones): PRIMARY; QUORUM = how many members other than
# PRIMARY must answer [all of them] (more than there are: never met); FORCE=1 skips the quorum (a human's
# decision: commits only the missing members hold are lost); PRIMARY_GTID =
# what the hook last saw executed on PRIMARY [none]; WAIT_TIMEOUT.
# Idempotent: a rerun that finds exactly one writable non-replica member other
# than PRIMARY carrying this Job's EPOCH (promoted by an earlier run) adopts it
# and only repeats step 7 -- a writable member of any other epoch is fenced and
# examined (step 1), never adopted (issue 31.1);
# a rerun after PRIMARY was re-promoted fences and re-promotes it again.
SCRIPT_NAME=failover
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
FENCE_SHUTDOWN=1

old=${PRIMARY:-}
is_member "$old" || fail bad-env "PRIMARY '$old' is not in PODS"
others=()
for p in "${POD_NAMES[@]}"; do [ "$p" = "$old" ] || others+=("$p"); done
QUORUM=${QUORUM:-${#others[@]}}
# More than the members other than PRIMARY: a scale-down not yet proven safe
# (issue 31.4), met only by FORCE or by PRIMARY holding everything.
[[ $QUORUM =~ ^[0-9]+$ ]] || fail bad-env "QUORUM '$QUORUM' must be a number"
FORCE=${FORCE:-0}
[[ $FORCE == [01] ]] || fail bad-env "FORCE must be 0 or 1"
# What the hook last saw executed on PRIMARY (issue 31.3); parsed before use.
PRIMARY_GTID=${PRIMARY_GTID:-}
gtid_text_ok "$PRIMARY_GTID" || fail bad-env "PRIMARY_GTID is not a $FLAVOR GTID text"
r_str from "$old"

# 1. fence: nothing is promoted while another member answers and is not
#    fenced (read-only, client connections killed).
old_up=false fenced=false
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
  log "old primary $old answers; fenced=$fenced"
else
  log "old primary $old does not answer"
fi

members=() unreachable=()
for p in "${others[@]}"; do
  if reachable "$p"; then members+=("$p"); else unreachable+=("$p"); fi
done

# Promoted by an earlier run of this Job (common.sh own_promotion: writable,
# no source, this EPOCH)?  Any other writable member -- a writable replica, or
# an old primary a cut failover could not fence (issue 31.1) -- is fenced and
# examined below like every other member, never adopted.
writable=() loose=()
for p in "${members[@]}"; do
  if own_promotion "$p"; then writable+=("$p")
  elif [ "$(sql_is_read_only "$p")" = 0 ]; then loose+=("$p"); fi
done
if (( ${#writable[@]} > 1 )); then
  for p in "${writable[@]}"; do fence "$p" || true; done
  r_arr unreachable "${unreachable[@]}"
  fail split-brain "more than one writable member: ${writable[*]} (fenced; a rerun chooses among them)"
fi
for p in "${loose[@]}"; do
  log "$p is writable but not this Job's promotion (epoch $EPOCH); fencing it"
  fence "$p" || fail fence-failed "$p answers, is writable and could not be made read-only; nothing promoted"
done

semisync=false
(( ${#POD_NAMES[@]} > 1 )) && semisync=true

# EXEC (executed), RECV (executed + received), IDENT per examined member (step 2).
declare -A EXEC=() RECV=() IDENT=()

if (( ${#writable[@]} == 1 )); then
  r_arr unreachable "${unreachable[@]}"
  r_raw fenced "$fenced"
  new=${writable[0]}
  log "$new is already the writable primary (earlier run); adopting it"
  promoted "$new"
else
  # 2. nothing new may arrive; read what each member has: the agent's
  #    `examine` (agent/src/examine.rs) stops every receiver, verifies that it
  #    stopped (a member whose receiver may still receive is not examined),
  #    and reads all members at once.
  ask=("${members[@]}")
  [ "$old_up" = true ] && ask+=("$old")
  look=$(mktemp -d "${TMPDIR:-/tmp}/examine.XXXXXX")
  out=$(EXAMINE_PODS="${ask[*]}" EXAMINE_OUT=$look TERMINATION_LOG=/dev/null "$AGENT_BIN" examine) ||
    fail examine-failed "the agent could not examine the members: ${out:-it did not answer}"
  log "examine: $out"
  examined=()
  for p in "${ask[@]}"; do
    if [ -f "$look/$p" ]; then
      { IFS= read -r "EXEC[$p]"; IFS= read -r "RECV[$p]"; IFS= read -r "IDENT[$p]"; } < "$look/$p"
      log "$p executed=[${EXEC[$p]}] received=[${RECV[$p]}]"
      [ "$p" = "$old" ] || examined+=("$p")
    elif [ "$p" = "$old" ]; then
      old_up=false; log "old primary $old is not examined: $(< "$look/$p.why")"
    else
      log "$p is not examined: $(< "$look/$p.why")"; unreachable+=("$p")
    fi
  done
  rm -rf "$look"
  members=("${examined[@]}")
  r_arr unreachable "${unreachable[@]}"
  r_raw fenced "$fenced"

  # 3. quorum
  if (( ${#members[@]} < QUORUM )); then
    # The exception needs a witness: with no member examined, "holds every
    # examined member's set" is true of an old primary that came back empty
    # or from an older volume (issue 31.3).
    holds_all=false
    if [ "$old_up" = true ] && (( ${#members[@]} > 0 )); then
      holds_all=true
      for p in "${members[@]}"; do
        gtid_contains "${RECV[$old]}" "${RECV[$p]}" "$old" || { holds_all=false; break; }
      done
    fi
    # ... and it must still hold what the hook last saw executed on it: the
    # examined members may be behind too (issue 31.3).
    lacks_known=false
    if [ "$holds_all" = true ] && [ -n "$PRIMARY_GTID" ] && ! gtid_contains "${RECV[$old]}" "$PRIMARY_GTID" "$old"; then
      holds_all=false lacks_known=true
    fi
    if [ "$FORCE" = 1 ]; then
      log "quorum not met (${#members[@]} of ${#others[@]} answer, $QUORUM needed); FORCE=1: going on"
    elif [ "$holds_all" = true ]; then
      log "quorum not met, but $old answers and holds every examined member's received transactions"
    else
      if [ "$lacks_known" = true ]; then
        fail no-quorum "${#members[@]} of ${#others[@]} replicas answer, $QUORUM needed; $old answers but lacks transactions the hook saw executed on it (PRIMARY_GTID=[$PRIMARY_GTID], it holds [${RECV[$old]}]): it may be back from an older volume, so nothing proves it holds every acknowledged commit (not answering: ${unreachable[*]:-none}); force the failover to promote anyway, accepting the loss of commits only they hold"
      fi
      if [ "$old_up" = true ] && (( ${#members[@]} == 0 )); then
        fail no-quorum "0 of ${#others[@]} replicas answer; $old answers but there is no replica to compare it with, so nothing proves it holds every acknowledged commit (it may have come back empty or from an older volume; not answering: ${unreachable[*]:-none}); force the failover to promote anyway, accepting the loss of commits only they hold"
      fi
      fail no-quorum "${#members[@]} of ${#others[@]} replicas answer; $QUORUM needed to be sure the promoted server holds every acknowledged commit (not answering: ${unreachable[*]:-none}); force the failover to promote anyway, accepting the loss of commits only they hold"
    fi
  fi

  # 4. candidates
  base=-
  [ "$old_up" = true ] && base=${EXEC[$old]}
  split_errant "$base" "${members[@]}"
  errant=("${ERRANT[@]}") candidates=()
  for p in "${errant[@]}"; do log "$p is errant: it wrote transactions no other member has"; done
  [ "$old_up" = true ] && candidates+=("$old")
  for p in "${NONERRANT[@]}"; do
    # a server being seeded holds a partial copy: never promoted
    if sql_is_seeding "$p"; then log "$p is being seeded: not a candidate"; else candidates+=("$p"); fi
  done
  r_arr errant "${errant[@]}"
  (( ${#candidates[@]} > 0 )) || fail no-candidate "no member answers that could be promoted (errant: ${errant[*]:-none})"
  CAND_SET=()
  for c in "${candidates[@]}"; do CAND_SET[$c]=${RECV[$c]}; done
  new=$(choose_most_advanced "${candidates[@]}") ||
    fail diverged "no candidate contains all others: $(for c in "${candidates[@]}"; do printf '%s=[%s] ' "$c" "${CAND_SET[$c]}"; done)"
  log "candidate: $new"

  # 5. apply what was received (without losing the relay log: common.sh
  #    sql_drain_relay_log)
  sql_replica_status "$new"
  if [ "$RS_CONFIGURED" = 1 ]; then
    { sql_drain_relay_log "$new" "$WAIT_TIMEOUT" && sql_wait_executed "$new" "${RECV[$new]}" 5; } ||
      fail apply-timeout "$new did not apply its relay log (up to [${RECV[$new]}]) within ${WAIT_TIMEOUT}s"
    sql_replica_status "$new"
  fi
  # 6. promote
  sql_promote "$new" "$semisync"
  promoted "$new"
  log "$new promoted"
fi
r_str primary "$new"

# 7. repoint the rest: best effort; a member that cannot be repointed is
#    listed in repointFailed and never fails the Job (the promotion stands).
targets=()
for p in "${members[@]}"; do [ "$p" = "$new" ] || targets+=("$p"); done
[ "$old_up" = true ] && [ "$old" != "$new" ] && targets+=("$old")
repoint_all "$new" "${targets[@]}"
r_raw semiSync "$semisync"
r_arr replicas "${REPOINTED[@]}"
r_arr rebuildNeeded "${REBUILD[@]}"
r_arr repointFailed "${REPOINT_FAILED[@]}"
r_str gtid "$(sql_gtid_position "$new")"
finish promoted 0

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
#   Steps 2-4 are the agent's `examine` (agent/src/examine.rs, the rule in
#   agent/src/decide.rs); this script relays its answer.
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
# QUORUM [all members other than PRIMARY], FORCE and PRIMARY_GTID (what the
# hook last saw executed on PRIMARY, issue 31.3) are the agent's `examine`'s
# (steps 2-4; QUORUM more than the members other than PRIMARY: a scale-down not
# yet proven safe, issue 31.4, met only by FORCE or by PRIMARY holding
# everything).  Checked here too, so that a bad one fails the Job before
# anything is fenced.
[[ ${QUORUM:-0} =~ ^[0-9]+$ ]] || fail bad-env "QUORUM '$QUORUM' must be a number"
[[ ${FORCE:-0} == [01] ]] || fail bad-env "FORCE must be 0 or 1"
gtid_text_ok "${PRIMARY_GTID:-}" || fail bad-env "PRIMARY_GTID is not a $FLAVOR GTID text"
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

if (( ${#writable[@]} == 1 )); then
  r_arr unreachable "${unreachable[@]}"
  r_raw fenced "$fenced"
  new=${writable[0]}
  log "$new is already the writable primary (earlier run); adopting it"
  promoted "$new"
else
  # 2.-4. the agent's `examine` (agent/src/examine.rs, agent/src/decide.rs)
  #    stops every receiver and verifies that it stopped (a member whose
  #    receiver may still receive is not examined), reads all members at once,
  #    and makes the choice: the quorum and its exception, the errant members,
  #    the candidate.  Here its answer is only relayed.
  look=$(mktemp -d "${TMPDIR:-/tmp}/examine.XXXXXX")
  out=$(EXAMINE_PODS="${members[*]}" EXAMINE_OLD_UP=$old_up EXAMINE_OUT=$look TERMINATION_LOG=/dev/null \
        "$AGENT_BIN" examine) ||
    fail examine-failed "the agent could not examine the members: ${out:-it did not answer}"
  log "examine: $out"
  read -r -a members < "$look/examined"
  read -r -a unreachable < "$look/unreachable"
  IFS= read -r old_up < "$look/old-up"
  r_arr unreachable "${unreachable[@]}"
  r_raw fenced "$fenced"
  if [ -f "$look/errant" ]; then read -r -a errant < "$look/errant"; r_arr errant "${errant[@]}"; fi
  if [ -f "$look/refused" ]; then
    { IFS= read -r reason; IFS= read -r message; } < "$look/refused"
    rm -rf "$look"
    fail "$reason" "$message"
  fi
  { IFS= read -r new; IFS= read -r new_received; } < "$look/candidate"
  rm -rf "$look"

  # 5. apply what was received (without losing the relay log: common.sh
  #    sql_drain_relay_log)
  sql_replica_status "$new"
  if [ "$RS_CONFIGURED" = 1 ]; then
    { sql_drain_relay_log "$new" "$WAIT_TIMEOUT" && sql_wait_executed "$new" "$new_received" 5; } ||
      fail apply-timeout "$new did not apply its relay log (up to [$new_received]) within ${WAIT_TIMEOUT}s"
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

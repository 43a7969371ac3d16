#!/bin/bash
# switchover.sh -- Job.  Graceful change of primary from PRIMARY to TARGET:
#   1. wait (SWITCHOVER_WAIT, 60 s) until TARGET has executed PRIMARY's
#      current GTID position while PRIMARY still takes writes; if it does not
#      catch up: catchup-timeout, PRIMARY was never made read-only;
#   2. fence PRIMARY (common.sh `fence`: read only, super_read_only on MySQL,
#      client connections killed): from here on no client commit succeeds on
#      it; capture its position and wait (SWITCHOVER_FENCED_WAIT, 30 s) for
#      the little committed since step 1; on timeout PRIMARY is opened again
#      and the Job fails (catchup-timeout: nothing changed);
#   3. promote TARGET (stop replication, forget source, semi-sync, writable);
#      frozenMs = how long PRIMARY refused writes before TARGET opened;
#   4. repoint every other member, the old primary included (best effort:
#      repointFailed; the agents finish it).  Every result line after the
#      promotion carries "promoted".
# At no moment are two servers writable: TARGET opens only after PRIMARY closed
# and TARGET holds everything PRIMARY committed.
# Idempotent: if TARGET is already the writable non-replica of this Job's EPOCH
# (an earlier run promoted it), only step 4 runs; a writable TARGET of any other
# epoch is fenced first and judged like any target (issue 31.1).
SCRIPT_NAME=switchover
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
SWITCHOVER_WAIT=${SWITCHOVER_WAIT:-60}               # catch-up, PRIMARY writable
SWITCHOVER_FENCED_WAIT=${SWITCHOVER_FENCED_WAIT:-30} # the rest, PRIMARY read-only

old=${PRIMARY:-} target=${TARGET:-}
is_member "$old" || fail bad-env "PRIMARY '$old' is not in PODS"
is_member "$target" || fail bad-env "TARGET '$target' is not in PODS"
[ "$old" != "$target" ] || fail bad-env "TARGET is already PRIMARY"
r_str primary "$target"
r_str from "$old"
reachable "$target" || fail target-unreachable "$target does not answer"

semisync=false
(( ${#POD_NAMES[@]} > 1 )) && semisync=true

# the other members, as they answer now (repointed after the promotion)
members=() unreachable=()
for p in "${POD_NAMES[@]}"; do
  [ "$p" = "$target" ] && continue
  if reachable "$p"; then members+=("$p"); else unreachable+=("$p"); fi
done

if own_promotion "$target"; then
  log "$target is already the writable primary of epoch $EPOCH (earlier run)"
  promoted "$target"
else
  # A writable target that this Job did not open is an old primary a cut
  # failover left writable (or a writable replica): fenced first, so the
  # checks below judge a server nobody writes to, and PRIMARY stays the only
  # writable one; a stale old primary then fails target-not-replicating.
  if [ "$(sql_is_read_only "$target")" = 0 ]; then
    log "$target is writable but not this Job's promotion (epoch $EPOCH): fencing it"
    fence "$target" || fail fence-failed "$target is writable and could not be made read-only; nothing changed"
  fi
  sql_replica_status "$target"
  reachable "$old" || fail primary-unreachable "$old does not answer; use failover"
  # streaming, not replicating_from: TARGET's channel is reset when it is
  # promoted, so its TLS (a TLS mode change its agent has not applied yet)
  # is no reason to refuse
  streaming_from "$target" "$old" ||
    fail target-not-replicating "$target does not replicate from $old (${RS_IO:-?}/${RS_SQL:-?} ${RS_ERR})"
  texec=$(sql_gtid_executed "$target"); oexec=$(sql_gtid_executed "$old")
  gtid_subset "$texec" "$oexec" "$old" ||
    fail target-errant "$target has transactions $old lacks: $(gtid_subtract "$texec" "$oexec" "$old")"
  # 1. catch up while PRIMARY still takes writes: no freeze for the lag
  g=$(sql_gtid_position "$old")
  log "waiting for $target to reach [$g] while $old stays writable"
  sql_wait_executed "$target" "$g" "$SWITCHOVER_WAIT" ||
    fail catchup-timeout "$target did not reach [$g] within ${SWITCHOVER_WAIT}s; $old was never made read-only"
  # 2. fence PRIMARY (read-only, client connections killed), then wait for
  #    the little it committed meanwhile
  t_fenced=$(date +%s%N)
  if ! fence "$old"; then
    sql_set_writable "$old" || true
    fail fence-failed "could not make $old read-only; reopened"
  fi
  g=$(sql_gtid_position "$old")
  log "$old read-only at [$g]; waiting for $target"
  if ! sql_wait_executed "$target" "$g" "$SWITCHOVER_FENCED_WAIT"; then
    log "$target did not catch up; reopening $old"
    sql_set_writable "$old"
    fail catchup-timeout "$target did not reach [$g] within ${SWITCHOVER_FENCED_WAIT}s after $old was made read-only; $old reopened"
  fi
  # 3. promote
  sql_promote "$target" "$semisync"
  promoted "$target"
  frozen_ms=$(( ($(date +%s%N) - t_fenced) / 1000000 ))
  r_raw frozenMs "$frozen_ms"
  log "$target promoted; writes were refused for ${frozen_ms} ms"
fi

# 4. repoint everyone else: best effort; a member that cannot be repointed
#    is listed in repointFailed and never fails the Job.
repoint_all "$target" "${members[@]}"
r_raw semiSync "$semisync"
r_arr replicas "${REPOINTED[@]}"
r_arr unreachable "${unreachable[@]}"
r_arr rebuildNeeded "${REBUILD[@]}"
r_arr repointFailed "${REPOINT_FAILED[@]}"
r_str gtid "$(sql_gtid_position "$target")"
finish switched 0

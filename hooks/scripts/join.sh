#!/bin/bash
# join.sh -- one shot, per pod (POD_NAME).  Makes this server a replica of the
# primary named in ${PRIMARY_FILE} (first line; falls back to $PRIMARY) when
#   - it is not itself that primary,
#   - it is read only (a writable server is left alone: only bootstrap,
#     failover and switchover change who is writable),
#   - the primary answers, is writable and is not a replica itself (a stale
#     file naming a fenced old primary is never followed),
#   - it is not already replicating from it,
#   - and it has no errant transactions (local GTIDs the primary lacks); else
#     it reports rebuild-needed and does nothing.
# A replica whose receiver is stopped first applies its relay log (waiting
# applying-relay-log while that takes longer than JOIN_APPLY_WAIT).
# With REBUILD_MARKER set, rebuild-needed also writes that file (why, one line),
# which probe.sh readiness then fails on, so a diverged server serves no reads;
# joined, already-replica and is-primary remove it.
# Never makes a server writable.  Exit: 0 joined/already-replica/is-primary,
# 2 rebuild-needed, 75 waiting/no-primary (try again later), 1 error.
SCRIPT_NAME=join
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
JOIN_WAIT=${JOIN_WAIT:-30}              # seconds for the new replica to connect
JOIN_APPLY_WAIT=${JOIN_APPLY_WAIT:-60}  # seconds to apply a relay log first

self=${POD_NAME:-}
is_member "$self" || fail bad-env "POD_NAME '$self' is not in PODS"
primary=""
if [ -n "${PRIMARY_FILE:-}" ] && [ -r "$PRIMARY_FILE" ]; then
  IFS= read -r primary < "$PRIMARY_FILE" || true
  primary=${primary//[[:space:]]/}
fi
[ -n "$primary" ] || primary=${PRIMARY:-}
r_str pod "$self"
r_str primary "$primary"
# consistent() clears the rebuild marker: this server is fine where it stands.
consistent() { [ -z "${REBUILD_MARKER:-}" ] || rm -f "$REBUILD_MARKER"; finish "$1" 0; }
[ -n "$primary" ] || finish no-primary 75
[ "$primary" != "$self" ] || consistent is-primary
is_member "$primary" || fail bad-primary "primary '$primary' is not in PODS"

waiting() { r_str reason "$1"; r_str message "$2"; finish waiting 75; }
reachable "$self" || waiting self-unreachable "$self does not answer"
[ "$(sql_is_read_only "$self")" = 1 ] || waiting self-writable "$self is writable; not touching it"
reachable "$primary" || waiting primary-unreachable "$primary does not answer"
sql_replica_status "$primary"
{ [ "$(sql_is_read_only "$primary")" = 0 ] && [ "$RS_CONFIGURED" = 0 ]; } ||
  waiting primary-not-writable "$primary is not a writable primary (stale primary file?)"

if replicating_from "$self" "$primary"; then
  r_str gtid "$(sql_gtid_position "$self")"
  consistent already-replica
fi

# A replica whose receiver is stopped (restarted, or stopped by a failover)
# first applies what it already received: repointing it (CHANGE MASTER) would
# delete its relay log, and those transactions may have been acknowledged to
# clients.  Applying them first also means that transactions the primary
# lacks are found (rebuild-needed), never silently discarded.
sql_replica_status "$self"
if [ "$RS_CONFIGURED" = 1 ] && [ "$RS_IO" != Yes ]; then
  sql_stop_io_thread "$self"   # (Connecting to a source that is gone)
  sql_drain_relay_log "$self" "$JOIN_APPLY_WAIT" ||
    waiting applying-relay-log "$self is applying its relay log before it is repointed; not done within ${JOIN_APPLY_WAIT}s"
fi

sexec=$(sql_gtid_executed "$self"); pexec=$(sql_gtid_executed "$primary")
if ! gtid_subset "$sexec" "$pexec" "$primary"; then
  errant=$(gtid_subtract "$sexec" "$pexec" "$primary")
  r_str errant "$errant"
  r_str message "$self has transactions $primary lacks; it must be rebuilt (restored from a backup)"
  if [ -n "${REBUILD_MARKER:-}" ]; then
    printf 'transactions %s lacks: %s\n' "$primary" "$errant" > "$REBUILD_MARKER.partial" &&
      mv -f "$REBUILD_MARKER.partial" "$REBUILD_MARKER"
  fi
  finish rebuild-needed 2
fi

sql_make_replica "$self" "$primary"
deadline=$((SECONDS + JOIN_WAIT))
until replicating_from "$self" "$primary"; do
  if (( SECONDS >= deadline )); then
    fail not-connected "$self does not replicate from $primary after ${JOIN_WAIT}s: ${RS_IO:-?}/${RS_SQL:-?} ${RS_ERR}"
  fi
  sleep 0.5
done
r_str gtid "$(sql_gtid_position "$self")"
consistent joined

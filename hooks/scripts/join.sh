#!/bin/bash
# join.sh -- one shot, per pod (POD_NAME).  Makes this server a replica of the
# primary named in ${PRIMARY_FILE} (first line; falls back to $PRIMARY) when
#   - it is not itself that primary,
#   - it is read only (a writable server is left alone: only bootstrap,
#     failover and switchover change who is writable),
#   - the primary answers, is writable and is not a replica itself (a stale
#     file naming a fenced old primary is never followed),
#   - it is not already replicating from it with the TLS the mode asks for
#     (TLS_MODE_FILE, else TLS_MODE: a channel made before the mode changed
#     is made again, with TLS and verification or without; common.sh),
#   - and it has no errant transactions (local GTIDs the primary lacks); else
#     it reports rebuild-needed and does nothing -- unless rebuilding is opted
#     in (REBUILD_ERRANT_FILE says `true`) and the server cannot be the most
#     advanced one (below): then its binary logs are kept aside (the agent's
#     `quarantine`: <datadir>/.mysql-hook-quarantine/) and it is rebuilt
#     through seed.sh and joined.
# An empty server (a new pod, a deleted volume) and one whose seeding was
# interrupted first copy a donor (seed.sh: the primary may no longer have the
# binary logs since the cluster began); so does a replica the primary can no
# longer serve because it purged the binary logs the replica needs (IO error
# 1236): it holds nothing the primary lacks, so nothing is lost.
# A replica whose receiver is stopped first applies its relay log (waiting
# applying-relay-log while that takes longer than JOIN_APPLY_WAIT).
# With REBUILD_MARKER set, rebuild-needed also writes that file (why, one line),
# which the readiness probe then fails on, so a diverged server serves no reads;
# joined, already-replica and is-primary remove it.
# "Could be the most advanced": a server whose executed and received
# transactions contain every transaction of the primary.  It is never rebuilt
# automatically (were the primary's extra writes not there yet, it might hold
# commits a failover must keep); one the primary has moved past -- the primary
# holds transactions it lacks -- is on a branch the cluster left, and only the
# primary's history counts.  join.sh acts only while the primary answers, is
# writable and is not a replica: with the primary down, nothing is rebuilt.
# Never makes a server writable.  Exit: 0 joined/already-replica/is-primary,
# 2 rebuild-needed, 75 waiting/no-primary (try again later), 1 error.
SCRIPT_NAME=join
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
JOIN_WAIT=${JOIN_WAIT:-30}              # seconds for the new replica to connect
JOIN_APPLY_WAIT=${JOIN_APPLY_WAIT:-60}  # seconds to apply a relay log first

self=${POD_NAME:-}
is_member "$self" || fail bad-env "POD_NAME '$self' is not in PODS"
primary=$(recorded_primary)
r_str pod "$self"
r_str primary "$primary"
# consistent() clears the rebuild marker: this server is fine where it stands.
consistent() { [ -z "${REBUILD_MARKER:-}" ] || rm -f "$REBUILD_MARKER"; finish "$1" 0; }
[ -n "$primary" ] || finish no-primary 75
# The primary's own agent keeps its semi-sync source in step with the
# membership (PODS_FILE follows scaling, bootstrap and role changes set it only
# for the membership of their moment): one member -> off (no replica could
# acknowledge: with wait_no_slave every commit would wait forever); more ->
# on, once a replica is connected (waiting for an acknowledgement no replica
# can give yet would stop every write while a new replica is seeded).  Only a
# writable server that replicates from nobody is touched.
if [ "$primary" = "$self" ]; then
  if reachable "$self" && [ "$(sql_is_read_only "$self")" = 0 ] && { sql_replica_status "$self"; [ "$RS_CONFIGURED" = 0 ]; }; then
    on=$(sql_semisync_source_enabled "$self")
    if (( ${#POD_NAMES[@]} == 1 )) && [ "$on" = 1 ]; then
      log "one member: semi-sync source off (nothing can acknowledge)"
      sql_disable_semisync_source "$self"; on=0
    elif (( ${#POD_NAMES[@]} > 1 )) && [ "$on" != 1 ] && (( $(sql_semisync_clients "$self") > 0 )); then
      log "${#POD_NAMES[@]} members and a replica connected: semi-sync source on"
      sql_enable_semisync_source "$self"; on=1
    fi
    r_raw semiSync "$([ "$on" = 1 ] && echo true || echo false)"
  fi
  consistent is-primary
fi
is_member "$primary" || fail bad-primary "primary '$primary' is not in PODS"

waiting() { r_str reason "$1"; r_str message "$2"; finish waiting 75; }
rebuild_errant=false
if [ -n "${REBUILD_ERRANT_FILE:-}" ] && [ -r "$REBUILD_ERRANT_FILE" ]; then
  IFS= read -r rebuild_errant < "$REBUILD_ERRANT_FILE" || true
  rebuild_errant=${rebuild_errant//[[:space:]]/}
elif [ -n "${REBUILD_ERRANT:-}" ]; then
  rebuild_errant=$REBUILD_ERRANT
fi
# run_seed WIPE: seed.sh for this server (WIPE=1: it holds data that may go);
# sets SEEDED_FROM, or waits (exit 75) with seed.sh's reason.
SEEDED_FROM=""
run_seed() {
  local out line reason="" msg=""
  # The passwords reach seed.sh as files, as here; only a run without the
  # files (tests, by hand) hands them on in seed.sh's environment (exported in
  # this subshell only: never on a command line).
  out=$(
    [ -n "${MYSQL_ROOT_PASSWORD_FILE:-}" ] || export MYSQL_ROOT_PASSWORD
    [ -n "${REPLICATION_PASSWORD_FILE:-}" ] || export REPLICATION_PASSWORD
    [ -n "${OPERATOR_PASSWORD_FILE:-}" ] || [ -z "${OPERATOR_PASSWORD:-}" ] || export OPERATOR_PASSWORD
    SEED_WIPE=$1 TERMINATION_LOG=/dev/null PRIMARY=$primary bash "$SCRIPTS_DIR/seed.sh"
  ) || true
  line=${out##*$'\n'}
  if [[ $line == '{"result":"seeded"'* ]]; then
    [[ $line =~ \"donor\":\"([^\"]*)\" ]] && SEEDED_FROM=${BASH_REMATCH[1]}
    return 0
  fi
  [[ $line =~ \"reason\":\"([^\"]*)\" ]] && reason=${BASH_REMATCH[1]}
  [[ $line =~ \"message\":\"(([^\"\\]|\\.)*)\" ]] && msg=${BASH_REMATCH[1]}
  waiting seeding-failed "seeding $self failed (${reason:-no result}): ${msg//\\\"/\"}"
}
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

# An empty server (a new pod, a deleted volume), or one whose seeding was
# interrupted, copies a donor first.
if sql_is_seeding "$self" || server_is_empty "$self"; then
  run_seed 0
fi

# A replica whose receiver is stopped (restarted, or stopped by a failover)
# first applies what it already received: repointing it (CHANGE MASTER) would
# delete its relay log, and those transactions may have been acknowledged to
# clients.  Applying them first also means that transactions the primary
# lacks are found (rebuild-needed), never silently discarded.  The same for a
# replica that streams from the primary over a channel of the other TLS mode
# (replicating_from said no above): its channel is made again below.
sql_replica_status "$self"
if [ "$RS_CONFIGURED" = 1 ] && { [ "$RS_IO" != Yes ] || streaming_from "$self" "$primary"; }; then
  sql_stop_io_thread "$self"   # (Connecting to a source that is gone)
  sql_drain_relay_log "$self" "$JOIN_APPLY_WAIT" ||
    waiting applying-relay-log "$self is applying its relay log before it is repointed; not done within ${JOIN_APPLY_WAIT}s"
fi

sexec=$(sql_gtid_executed "$self"); pexec=$(sql_gtid_executed "$primary")
if ! gtid_subset "$sexec" "$pexec" "$primary"; then
  errant=$(gtid_subtract "$sexec" "$pexec" "$primary")
  r_str errant "$errant"
  advanced=false
  if gtid_contains "$(sql_gtid_received "$self")" "$pexec" "$self"; then advanced=true; fi
  if [ "$rebuild_errant" = true ] && [ "$advanced" = false ]; then
    log "$self has transactions $primary lacks ($errant) and lacks some of $primary's: rebuilding it"
    # Its binary logs are kept aside first (agent/src/quarantine.rs): the
    # errant transactions are on no other member.  Not kept: not rebuilt.
    kept=$(QUARANTINE_ERRANT=$errant QUARANTINE_PRIMARY=$primary TERMINATION_LOG=/dev/null "$AGENT_BIN" quarantine) ||
      waiting quarantine-failed "$self's errant transactions ($errant) could not be kept before its rebuild: ${kept:-no answer}"
    log "$kept"
    run_seed 1
    r_str rebuilt "$errant"
  else
    if [ "$advanced" = true ]; then
      r_str message "$self has transactions $primary lacks and every transaction $primary has: it could be the most advanced server, so it is never rebuilt automatically; a human decides (restore it from a backup, or fail over to it)"
    else
      r_str message "$self has transactions $primary lacks; it must be rebuilt (delete its volume and pod, or set spec.replication.rebuildErrant)"
    fi
    if [ -n "${REBUILD_MARKER:-}" ]; then
      printf 'transactions %s lacks: %s\n' "$primary" "$errant" > "$REBUILD_MARKER.partial" &&
        mv -f "$REBUILD_MARKER.partial" "$REBUILD_MARKER"
    fi
    finish rebuild-needed 2
  fi
fi

# connect: make this server a replica and wait until both threads run; 1 when
# the primary no longer has the binary logs it needs (MariaDB 1236
# ER_MASTER_FATAL_ERROR_READING_BINLOG; MySQL 13114, the same error as a
# replica's: "Got fatal error 1236 from source ... purged required binary logs").
connect() {
  sql_make_replica "$self" "$primary" || fail not-connected "$self could not be made a replica of $primary"
  local deadline=$((SECONDS + JOIN_WAIT))
  until replicating_from "$self" "$primary"; do
    case $RS_IO_ERRNO in 1236|13114) return 1 ;; esac
    if (( SECONDS >= deadline )); then
      fail not-connected "$self does not replicate from $primary after ${JOIN_WAIT}s: ${RS_IO:-?}/${RS_SQL:-?} ${RS_ERR}"
    fi
    sleep 0.5
  done
}
if ! connect; then
  # Behind the primary's binary logs: this server holds nothing the primary
  # lacks (checked above), so a fresh copy loses nothing.
  log "$primary no longer has the binary logs $self needs (${RS_ERR}); copying a donor"
  run_seed 1
  connect || fail not-connected "$self cannot replicate from $primary after a fresh copy: ${RS_ERR}"
fi
[ -z "$SEEDED_FROM" ] || r_str seededFrom "$SEEDED_FROM"
r_str gtid "$(sql_gtid_position "$self")"
consistent joined

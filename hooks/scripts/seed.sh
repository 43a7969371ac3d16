#!/bin/bash
# seed.sh -- one shot, per pod (POD_NAME); join.sh runs it.  Makes this server
# a copy of a healthy donor, ready to replicate from the primary named in
# ${PRIMARY_FILE} (falls back to $PRIMARY) from the donor's GTID position.  A
# new pod, a pod whose volume was deleted, a replica that fell behind the
# primary's binary logs, and -- opted in -- an errant replica get their data
# this way, so no server depends on the primary keeping every binary log since
# the cluster began (a restore, PURGE BINARY LOGS, binlog expiry).
#
# Refuses a server that is writable, is the primary, or holds data (GTIDs or
# application schemas) unless SEED_WIPE=1 (join.sh sets it after its own
# checks: errant or stale, never one that could be the most advanced) or an
# earlier seed of it was interrupted (MariaDB: the local table
# _mysqlhook.seeding; MySQL: the clone plugin restarts an interrupted clone
# from scratch itself).
#
# Donor: DONOR when set, else the first member (PODS order) that replicates
# from the primary with both threads running, lag <= SEED_DONOR_MAX_LAG
# (default 60 s), holds nothing the primary lacks and is not being seeded
# itself; else the primary.  A replica is preferred: the primary keeps its
# resources for the application.
#
# MariaDB, a logical stream (measured against mariadb-backup, see README.md):
#   1. the recipient is marked seeding (_mysqlhook.seeding, binary log off),
#      forgets any source, loses its application schemas, its accounts but
#      root and mariadb.sys, and its GTID history (RESET MASTER);
#   2. the donor's accounts (mariadb-dump --system=users) are loaded;
#   3. mariadb-dump --single-transaction --master-data=2 --gtid of every
#      application schema is piped straight into the recipient with the binary
#      log off (nothing is written to a disk but the recipient's);
#   4. consistency: the accounts dumped again, and the donor's
#      gtid_binlog_state read again, must not have changed except for the
#      primary's own entry (else: donor-changed, nothing kept; join.sh runs
#      this again).  The recipient's gtid_binlog_state becomes the donor's at
#      the dump's snapshot (mdb_seed_state), gtid_slave_pos its position;
#   5. events copied enabled are disabled on the replica; the mark goes.
# Only InnoDB tables are copied consistently (--single-transaction), as in
# backups; accounts are consistent through the before/after check.
# MySQL 8.4: CLONE INSTANCE (clone_sql in common.sh): the recipient's mysqld
# replaces its data and exits; the kubelet restarts the container, and this
# script waits for it to answer (SEED_RESTART_WAIT) with the donor's
# gtid_executed.  Unverified (no MySQL 8 server in CI).
#
# While it runs, SEED_MARKER (a file on the pod's /tmp) holds
# "<donor> <start time>": the readiness probe fails with "seeding", so the
# server serves no reads and the hook counts it out of the failover candidates.
# Exit 0 seeded (or nothing to copy), 1 error.
SCRIPT_NAME=seed
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
SEED_TIMEOUT=${SEED_TIMEOUT:-21600}          # seconds for the copy
SEED_DONOR_MAX_LAG=${SEED_DONOR_MAX_LAG:-60}  # seconds a donor replica may lag
SEED_RESTART_WAIT=${SEED_RESTART_WAIT:-600}  # MySQL: seconds for the restart after a clone

self=${POD_NAME:-}
is_member "$self" || fail bad-env "POD_NAME '$self' is not in PODS"
primary=$(recorded_primary)
r_str pod "$self"
is_member "$primary" || fail bad-env "primary '$primary' is not in PODS"
[ "$primary" != "$self" ] || fail bad-env "$self is the primary; a primary is never seeded"
reachable "$self" || fail self-unreachable "$self does not answer"
[ "$(sql_is_read_only "$self")" = 1 ] || fail self-writable "$self is writable; not touching it"

interrupted=false
if sql_is_seeding "$self"; then interrupted=true; fi
if [ "$interrupted" = false ] && [ "${SEED_WIPE:-0}" != 1 ] && ! server_is_empty "$self"; then
  fail not-empty "$self holds data; it is seeded only when empty (or by join.sh's rebuild)"
fi

# --- the donor -----------------------------------------------------------------
reachable "$primary" || fail primary-unreachable "$primary does not answer"
sql_replica_status "$primary"
{ [ "$(sql_is_read_only "$primary")" = 0 ] && [ "$RS_CONFIGURED" = 0 ]; } ||
  fail primary-not-writable "$primary is not a writable primary"
donor_ok() {
  local d=$1 e pexec
  [ "$d" != "$self" ] && [ "$d" != "$primary" ] || return 1
  reachable "$d" || { log "$d is no donor: it does not answer"; return 1; }
  ! sql_is_seeding "$d" || { log "$d is no donor: it is being seeded"; return 1; }
  if ! replicating_from "$d" "$primary" || ! [[ $RS_LAG =~ ^[0-9]+$ ]] || (( RS_LAG > SEED_DONOR_MAX_LAG )); then
    log "$d is no donor: replication ${RS_IO:-?}/${RS_SQL:-?} from ${RS_HOST:-nobody}, lag ${RS_LAG:-?}"
    return 1
  fi
  # the donor first, then the primary: under writes the primary's set only grows
  e=$(sql_gtid_executed "$d") && pexec=$(sql_gtid_executed "$primary") && gtid_subset "$e" "$pexec" "$primary" ||
    { log "$d is no donor: it holds transactions $primary lacks"; return 1; }
}
donor=${DONOR:-}
if [ -n "$donor" ]; then
  is_member "$donor" && [ "$donor" != "$self" ] || fail bad-env "DONOR '$donor' is not another member"
else
  for p in "${POD_NAMES[@]}"; do
    if donor_ok "$p"; then donor=$p; break; fi
  done
  donor=${donor:-$primary}
fi
r_str donor "$donor"
[ -n "$(sql_gtid_position "$donor")" ] || finish seeded   # nothing to copy (a cluster before any write)
log "seeding $self from $donor (primary $primary)"
if [ -n "${SEED_MARKER:-}" ]; then
  printf '%s %s\n' "$donor" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$SEED_MARKER.partial" && mv -f "$SEED_MARKER.partial" "$SEED_MARKER"
fi
start=$SECONDS

case $FLAVOR in
  mariadb)
    mdb_seed_begin "$self" "$donor" || fail seed-failed "$self could not be emptied"
    # private scratch files (the accounts carry password hashes), removed on exit
    work=$(mktemp -d "${TMPDIR:-/tmp}/seed.XXXXXX"); chmod 700 "$work"
    trap 'c=$?; rm -rf "$work"; (exit $c); on_exit' EXIT
    before=$(sql "$donor" "SELECT @@global.gtid_binlog_state") || fail seed-failed "$donor: cannot read its GTID state"
    mdb_dump_users "$donor" > "$work/users" || fail seed-failed "$donor: dumping its accounts failed"
    { printf '%s\n' "$SQL_NO_BINLOG"; mdb_users_loadable < "$work/users"; } | sql_stdin "$self" ||
      fail seed-failed "$self: loading the accounts failed"
    mapfile -t schemas < <(sql_user_schemas "$donor")
    if (( ${#schemas[@]} > 0 )); then
      log "copying ${#schemas[@]} schema(s) from $donor"
      # the stream goes straight into the recipient; a copy of it passes
      # through a FIFO to `tail`, which keeps the end: the GTID position
      mkfifo "$work/stream"
      tail -n 40 < "$work/stream" > "$work/tail" &
      tailpid=$!
      set +e
      { printf '%s\n' "$SQL_NO_BINLOG"
        mdb_dump_data "$donor" "${schemas[@]}" | tee "$work/stream"
        printf '%s' "${PIPESTATUS[0]}" > "$work/dump-rc"; } |
        SQL_TIMEOUT=$SEED_TIMEOUT sql_stdin "$self"
      load_rc=$?
      set -e
      wait "$tailpid" || true
      dump_rc=$(<"$work/dump-rc")
      [ "$dump_rc" = 0 ] && [ "$load_rc" = 0 ] ||
        fail seed-failed "copying from $donor failed (dump exit $dump_rc, load exit $load_rc)"
      pos=""
      while IFS= read -r line; do
        [[ $line =~ gtid_slave_pos=\'([^\']*)\' ]] && pos=${BASH_REMATCH[1]}
      done < "$work/tail"
      [ -n "$pos" ] || fail seed-failed "the dump of $donor carries no GTID position"
    else
      pos=$(sql "$donor" "SELECT @@global.gtid_binlog_pos")
    fi
    after=$(sql "$donor" "SELECT @@global.gtid_binlog_state") || fail seed-failed "$donor: cannot read its GTID state"
    [ "$(sha256sum < "$work/users")" = "$(mdb_dump_users "$donor" | sha256sum)" ] ||
      fail donor-changed "accounts changed on $donor while it was copied; copying again later"
    state=$(mdb_seed_state "$before" "$after" "$pos") ||
      fail donor-changed "the GTID history of $donor changed while it was copied ([$before] -> [$after], position $pos): a role change; copying again later"
    mdb_seed_finish "$self" "$state" "$pos" || fail seed-failed "$self: setting the GTID position failed"
    ;;
  mysql)
    sql "$self" "STOP REPLICA; RESET REPLICA ALL" || fail seed-failed "$self: cannot reset its replica configuration"
    # The clone ends with the recipient's restart: the statement fails with
    # ER 3707 (no supervisor: mysqld exits, the kubelet restarts it) or a
    # lost connection.  Success is judged after the restart.
    SQL_TIMEOUT=$SEED_TIMEOUT sql "$self" "$(clone_sql "$donor")" >/dev/null 2>&1 || true
    sleep 2
    wait_reachable "$self" "$SEED_RESTART_WAIT" || fail seed-failed "$self did not come back after the clone"
    st=$(sql "$self" "SELECT CONCAT(STATE, ' ', IFNULL(ERROR_NO, 0), ' ', IFNULL(ERROR_MESSAGE, ''))
      FROM performance_schema.clone_status") || st=""
    [[ $st == Completed* ]] || fail seed-failed "clone from $donor did not complete: ${st:-no clone status}"
    pos=$(sql_gtid_position "$self")
    [ -n "$pos" ] || fail seed-failed "$self has no GTID history after the clone"
    ;;
esac

[ -z "${SEED_MARKER:-}" ] || rm -f "$SEED_MARKER"
r_str gtid "$(sql_gtid_position "$self")"
r_raw seconds "$((SECONDS - start))"
log "seeded $self from $donor in $((SECONDS - start)) s"
finish seeded

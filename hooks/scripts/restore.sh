#!/bin/bash
# restore.sh -- Job / init, per pod.  Loads the backup RESTORE_FROM into the
# fresh, empty server POD_NAME (default: the first pod of PODS), then, when
# RESTORE_UNTIL ('YYYY-MM-DD HH:MM:SS', UTC) is set, replays binary logs from
# the dump's GTID position up to (not including) that second.  The binary logs
# come from RESTORE_BINLOGS_FROM (a later backup whose binlog/ covers the
# time wanted; default RESTORE_FROM itself) or, when RESTORE_BINLOGS_FROM is
# unset and RESTORE_ARCHIVE names a binary log archive (binlog.sh, issue 19.3)
# that exists, from one server's archived sequence; the backup's own binary
# logs when no archived sequence covers the point.
# Granularity: one second (--stop-datetime); a transaction whose first event
# is at or after RESTORE_UNTIL is not applied.
# Before anything is loaded a point-in-time restore proves (issues 19.1,
# 19.10) from the backups' POSITIONS and the binary logs' own headers that
#   - RESTORE_UNTIL is not before the dump (its pitr-from): else
#     `before-backup`, naming the dump's time;
#   - the binary logs hold every transaction up to RESTORE_UNTIL (their
#     binlogs-until): else `binlog-gap`, naming the range nobody has;
#   - the binary logs are contiguous from the dump's position on: the first
#     began at or before it, each next one is the next file of the same
#     sequence: else `binlog-gap`, naming the missing range.
# Accounts (accounts.sql) are loaded after the dump, without the binary log.
# Every GTID keeps its identity: the restored server continues the source's
# GTID history, so every member of the new cluster restored from the same
# backup to the same point can replicate from whichever becomes primary.
# Idempotent: progress is recorded in the local (never replicated, never
# dumped) table _mysqlhook.restore; a rerun after success reports the same
# result, a rerun after a crash starts the load again (the dump drops and
# recreates its schemas).  A server with other data is refused.
# Steps (issue 19.7: the restore's progress is visible in status): in a Job
# each step is its own container, so the pod's status says which one runs and
# since when; RESTORE_STEP picks one, default `all` (the three in one run):
#   check   proves everything above (checksums, signature, continuity, an empty
#           read-only target) and writes nothing; its result line summarizes
#           what will be loaded and replayed;
#   load    the same proof, then loads the dump and the accounts and records
#           the dump's position: marker `loaded`;
#   finish  the same proof, then (from marker `loaded` only) replays the binary
#           logs to RESTORE_UNTIL and marks the server `done`, read-only.
# Every step proves again, as a container never trusts another's word.  A
# failed step fails the pod; the Job's next pod starts again at `check`, and
# its `load` reloads from scratch (a replay cut short is never continued: the
# same transaction must not be applied twice).
# Parallel load (issue 19.7): RESTORE_PARALLEL clients (1-16, default 1) load
# the tables of each database at once (dump_load_parallel in common.sh); the
# dump is first cut into pieces in RESTORE_WORK_DIR [TMPDIR or /tmp], which
# needs its uncompressed size free.  1 streams the dump into one client and
# needs no space.
# Time: the Job's deadline (RESTORE_DEADLINE_SECONDS, spec.restore.timeoutSeconds,
# default 6 h) bounds the whole restore; the dump's load (LOAD_TIMEOUT) and the
# replay (REPLAY_TIMEOUT) may each use all of it unless set lower, so a large
# dump is never killed by a fixed limit of its own (issue 19.7).
SCRIPT_NAME=restore
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

step=${RESTORE_STEP:-all}
case $step in check|load|finish|all) ;; *) fail bad-env "RESTORE_STEP '$step' is not check, load, finish or all" ;; esac

deadline=${RESTORE_DEADLINE_SECONDS:-21600}
[[ $deadline =~ ^[1-9][0-9]*$ ]] || fail bad-env "RESTORE_DEADLINE_SECONDS '$deadline' is not a number of seconds"
LOAD_TIMEOUT=${LOAD_TIMEOUT:-$deadline}
parallel=${RESTORE_PARALLEL:-1}
[[ $parallel =~ ^([1-9]|1[0-6])$ ]] || fail bad-env "RESTORE_PARALLEL '$parallel' is not a number of clients from 1 to 16"
work=${RESTORE_WORK_DIR:-${TMPDIR:-/tmp}}
REPLAY_TIMEOUT=${REPLAY_TIMEOUT:-$deadline}
target=${POD_NAME:-${POD_NAMES[0]}}
is_member "$target" || fail bad-env "POD_NAME '$target' is not in PODS"
from=${RESTORE_FROM:-}
dump=$(dump_file "$from")
[ -n "$from" ] && [ -f "$dump" ] && [ -f "$from/SHA256SUMS" ] || fail bad-env "RESTORE_FROM '$from' is not a backup directory"
binfrom=${RESTORE_BINLOGS_FROM:-$from}
until=${RESTORE_UNTIL:-}
if [ -n "$until" ] && ! [[ $until =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}\ [0-9]{2}:[0-9]{2}:[0-9]{2}$ ]]; then
  fail bad-env "RESTORE_UNTIL '$until' is not 'YYYY-MM-DD HH:MM:SS'"
fi
r_str pod "$target"
r_str from "$from"
key="from=$from binlogs=$binfrom until=$until"

wait_reachable "$target" "${RESTORE_WAIT:-300}" || fail target-unreachable "$target does not answer"

# With a verification key (kept outside the store): the checksums must be signed
# by it, before anything is read from the store.
if [ -n "${RESTORE_VERIFY_KEY_FILE:-}" ]; then
  [ -r "$RESTORE_VERIFY_KEY_FILE" ] || fail bad-env "RESTORE_VERIFY_KEY_FILE is not readable"
  signature_ok "$from" "$RESTORE_VERIFY_KEY_FILE" || fail bad-signature "$from is not signed by the verification key"
  if [ -n "$until" ] && [ "$binfrom" != "$from" ]; then
    signature_ok "$binfrom" "$RESTORE_VERIFY_KEY_FILE" || fail bad-signature "$binfrom is not signed by the verification key"
  fi
fi
# verify the files against their checksums
( cd "$from" && sha256sum -c --quiet SHA256SUMS ) >&2 || fail corrupt "checksum mismatch in $from"
if [ -n "$until" ] && [ "$binfrom" != "$from" ]; then
  ( cd "$binfrom" && sha256sum -c --quiet SHA256SUMS ) >&2 || fail corrupt "checksum mismatch in $binfrom"
fi

# A point in time must be provably inside what the dump and the binary logs
# hold: checked before anything is loaded.
g=$(dump_gtid "$dump") || fail corrupt "the GTID position in the header of $dump is not a GTID text"
files=()
if [ -n "$until" ]; then
  t_until=$(epoch_of "$until")
  if ! read_positions "$from"; then
    [ -z "$POS_ERR" ] || fail corrupt "$POS_ERR"
    fail cannot-prove "$from has no POSITIONS (written by an older mysql-hook): the dump's time is unknown, a point in time cannot be proven; restore it without pointInTime"
  fi
  pitr_from=$POS_PITR_FROM
  (( t_until >= pitr_from )) ||
    fail before-backup "$from holds transactions up to $(utc_of $((pitr_from - 1))) UTC, later than $until: restore an older backup, with binlogsFrom naming this one"
  # The binary logs: the incremental archive (binlog.sh) when there is one and
  # no backup was named for them, else (or when no archived sequence serves)
  # the binary logs copied into the backup binfrom.  The archive is not
  # signed: with a verification key only signed backups' binary logs are used.
  errs=""
  if [ -n "${RESTORE_VERIFY_KEY_FILE:-}" ] && [ -n "${RESTORE_ARCHIVE:-}" ] && [ -d "$RESTORE_ARCHIVE" ]; then
    errs="the binary log archive is not signed, and a verification key is set"
  elif [ -z "${RESTORE_BINLOGS_FROM:-}" ] && [ -n "${RESTORE_ARCHIVE:-}" ] && [ -d "$RESTORE_ARCHIVE" ]; then
    # One server's sequence that reaches the point and continues the dump.
    for u in "$RESTORE_ARCHIVE"/*.until; do
      [ -f "$u" ] || continue
      id=${u##*/}; id=${id%.until}
      read -r a_clock _ < "$u" || true
      if ! [[ $a_clock =~ ^[0-9]+$ ]] || (( t_until > a_clock )); then
        errs+="${errs:+; }archive $id: archived up to $(utc_of "${a_clock:-0}") UTC, the transactions from then up to $until are not archived yet"
        continue
      fi
      x=$(mktemp -d "${TMPDIR:-/tmp}/archive.XXXXXX")
      cand=()
      for z in "$RESTORE_ARCHIVE/$id"/*.gz; do
        [ -f "$z" ] || continue
        b=${z##*/}; b=${b%.gz}
        gzip -dc "$z" > "$x/$b" || fail corrupt "$z does not decompress"
        cand+=("$x/$b")
      done
      if (( ${#cand[@]} > 0 )) && binlog_continuity "$g" "${cand[@]}"; then
        files=("${cand[@]}"); r_str archive "$id"; break
      fi
      rm -rf "$x"
      errs+="${errs:+; }archive $id: ${CONT_ERR:-no archived files}"
    done
  fi
  if (( ${#files[@]} == 0 )); then
    berr=""
    if ! read_positions "$binfrom"; then
      [ -z "$POS_ERR" ] || fail corrupt "$POS_ERR"
      berr="$binfrom has no POSITIONS (written by an older mysql-hook): how far its binary logs reach is unknown"
    elif (( t_until > POS_BINLOGS_UNTIL )); then
      berr="the binary logs of $binfrom reach $(utc_of "$POS_BINLOGS_UNTIL") UTC; the transactions from then up to $until are in no backup: restore with binlogsFrom naming a later backup"
    elif ! gtid_ge "$POS_BINLOGS_GTID" "$g"; then
      berr="the binary logs of $binfrom end at [$POS_BINLOGS_GTID], before the dump's position [$g]: not a later backup of the same history"
    else
      for f in "$binfrom"/binlog/*; do [ -f "$f" ] && files+=("$f"); done
      if (( ${#files[@]} == 0 )); then
        berr="no binary logs in $binfrom/binlog: the transactions after [$g] up to $until are missing"
      elif ! binlog_continuity "$g" "${files[@]}"; then
        berr=$CONT_ERR files=()
      fi
    fi
    if (( ${#files[@]} == 0 )); then
      [ -n "$errs" ] || [[ $berr != *"no POSITIONS"* ]] || fail cannot-prove "$berr"
      fail binlog-gap "$berr${errs:+; $errs}"
    fi
  fi
fi

# earlier run?  (Marker phases: loading, loaded, replaying, done.)
marker=""
if [ -n "$(sql "$target" "SELECT 1 FROM information_schema.tables WHERE table_schema='_mysqlhook' AND table_name='restore'")" ]; then
  marker=$(sql "$target" "SELECT CONCAT(phase, '|', backup_key) FROM _mysqlhook.restore WHERE id=1")
fi
if [ "$marker" = "done|$key" ]; then
  line=$(sql "$target" "SELECT result FROM _mysqlhook.restore WHERE id=1")
  log "already restored"
  emit_line "$line" 0
fi
case $marker in
  ""|"loading|$key"|"loaded|$key"|"replaying|$key") ;;
  *) fail target-not-empty "$target was restored from something else (${marker#*|})" ;;
esac
if [ -z "$marker" ] && [ -n "$(sql_user_schemas "$target")" ]; then
  fail target-not-empty "$target has application schemas; restore needs an empty server"
fi
sql_replica_status "$target"
[ "$RS_CONFIGURED" = 0 ] || fail target-is-replica "$target replicates from $RS_HOST:$RS_PORT"
[ "$(sql_is_read_only "$target")" = 1 ] || fail target-writable "$target is writable (serving?); refusing"

dump_bytes=$(stat -c %s "$dump")
if [ "$step" = check ]; then
  r_str dump "${dump##*/}"; r_raw bytes "$dump_bytes"; r_raw binlogs "${#files[@]}"
  r_str marker "${marker%%|*}"
  finish checked
fi

# load: the dump and the accounts, without the binary log, then the dump's
# position as executed.
load_dump() {
  sql_set_admin_writable "$target"
  sql_reset_gtid_history "$target"
  sql "$target" "$SQL_NO_BINLOG
    CREATE DATABASE IF NOT EXISTS _mysqlhook;
    CREATE TABLE IF NOT EXISTS _mysqlhook.restore (id INT PRIMARY KEY, phase VARCHAR(16) NOT NULL,
      backup_key TEXT NOT NULL, result TEXT);
    REPLACE INTO _mysqlhook.restore VALUES (1, 'loading', $(sql_quote "$key"), NULL)"
  local rc=0
  clients=$parallel
  if (( parallel > 1 )); then
    log "loading $dump, the tables of each database $parallel at a time (pieces in $work)"
    SQL_TIMEOUT=$LOAD_TIMEOUT dump_load_parallel "$target" "$dump" "$parallel" "$work" || rc=$?
    case $rc in
      0) ;;
      2) log "$LAST_ERR: loading it with one client"; clients=1 ;;
      *) fail script-failed "$LAST_ERR" ;;
    esac
  fi
  if (( parallel == 1 || rc == 2 )); then
    log "loading $dump"
    { printf '%s\n' "$SQL_NO_BINLOG"; dump_cat "$dump"; } | SQL_TIMEOUT=$LOAD_TIMEOUT sql_stdin "$target"
  fi
  if [ -f "$from/accounts.sql" ]; then
    log "loading $from/accounts.sql"
    { printf '%s\n' "$SQL_NO_BINLOG"; cat "$from/accounts.sql"; } | sql_stdin "$target"
  fi
  sql_set_restored_position "$target" "$g"
  sql "$target" "$SQL_NO_BINLOG UPDATE _mysqlhook.restore SET phase='loaded' WHERE id=1"
}

if [ "$step" != finish ]; then
  load_dump
  if [ "$step" = load ]; then
    r_str dump "${dump##*/}"; r_raw bytes "$dump_bytes"; r_raw seconds "$SECONDS"; r_raw clients "$clients"
    finish loaded
  fi
elif [ "$marker" = "loaded|$key" ]; then
  sql_set_admin_writable "$target"
else
  fail not-loaded "$target holds no completed load of $from (marker '${marker%%|*}'): the Job's next attempt loads it again"
fi
r_str backupGtid "$g"
[ "$step" = finish ] || r_raw clients "$clients"

pitr=false
if [ -n "$until" ]; then
  sql "$target" "$SQL_NO_BINLOG UPDATE _mysqlhook.restore SET phase='replaying' WHERE id=1"
  log "replaying ${#files[@]} binary log file(s) after [$g] until $until UTC"
  binlog_replay "$target" "$g" "$until" "${files[@]}"
  pitr=true
fi
r_raw pitr "$pitr"
r_str until "$until"
r_str gtid "$(sql_gtid_position "$target")"
line=$(result_line restored)
sql "$target" "$SQL_NO_BINLOG UPDATE _mysqlhook.restore SET phase='done', result=$(sql_quote "$line") WHERE id=1"
sql_set_read_only "$target"
emit_line "$line" 0

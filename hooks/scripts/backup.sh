#!/bin/bash
# backup.sh -- Job.  Logical dump plus binary logs into $BACKUP_DIR/$BACKUP_NAME/:
#   dump.sql.gz    consistent dump (--single-transaction) of every application
#                  schema with routines, events, triggers and the GTID position,
#                  gzip -1 (issue 19.4; BACKUP_COMPRESSION=none keeps dump.sql:
#                  restore.sh reads either, and backups of older versions)
#   accounts.sql   every user and role with its authentication and grants,
#                  except root and the replication account (issue 19.2), as
#                  they were before the dump and after it (the agent's
#                  `catalog`; a schema or account changed during the dump
#                  fails the attempt `catalog-changed`, issue 34.6)
#   binlog/        every binary log file the source still has (raw copies,
#                  fetched over the replication protocol) for point-in-time
#                  recovery up to the moment of the backup; a later backup's
#                  binlog/ covers the time after this one (see restore.sh).
#                  None with BACKUP_BINLOGS=archive: the cluster's binary log
#                  archive (binlog.sh) holds them, each file once
#   POSITIONS      "key value" lines: dump-gtid, pitr-from (the earliest
#                  second a point-in-time restore of this dump may stop at),
#                  binlogs-until (binlog/ holds every transaction the primary
#                  committed before this second), binlogs-gtid; seconds are
#                  Unix times
#   OWNER          one line, BACKUP_OWNER (set by the hook: "<kind>
#                  <namespace>/<name> <uid>"): retention removes only backups
#                  whose OWNER is exactly its RETENTION_OWNER (issue 19.8)
#   SHA256SUMS     sha256sum -c format, over everything above
#   manifest.json  time, source, gtid, sizes, sha256
#   result.json    the result line
# With BACKUP_VERIFY=true the finished backup is first restored into a
# throwaway server in this pod (verify.sh, issue 19.6); the result then says
# "verified":true with the tables found and the seconds it took.
# Source (issue 19.9): the current primary is the one member that is writable,
# whatever PRIMARY said when the Job was created (a stale PRIMARY is logged);
# no writable member, or two, fails the backup.  The source is the first
# healthy replica of it (both threads running, lag <= BACKUP_MAX_LAG s, no
# transaction the primary lacks) in PODS order, else the primary.  Before the
# dump the source must have executed everything the primary had
# (BACKUP_CATCHUP_TIMEOUT s), and the dump's position must be inside the
# primary's history, or the backup fails.
# Written into a hidden .partial directory and renamed when complete;
# idempotent: if the backup exists already its result is reported again.
# Retention (KEEP and RETENTION_OWNER set, a store mounted at BACKUP_DIR):
# after a successful backup, all but the newest KEEP complete backups (with
# result.json) of that OWNER in BACKUP_DIR are removed (result.json first),
# and the partial folders of that owner's earlier attempts.
SCRIPT_NAME=backup
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
BACKUP_MAX_LAG=${BACKUP_MAX_LAG:-60}
BACKUP_CATCHUP_TIMEOUT=${BACKUP_CATCHUP_TIMEOUT:-300}
BACKUP_COMPRESSION=${BACKUP_COMPRESSION:-gzip}
case $BACKUP_COMPRESSION in
  gzip|none) ;;
  *) fail bad-env "BACKUP_COMPRESSION '$BACKUP_COMPRESSION' must be gzip or none" ;;
esac
BACKUP_VERIFY=${BACKUP_VERIFY:-false}
case $BACKUP_VERIFY in
  true|false) ;;
  *) fail bad-env "BACKUP_VERIFY '$BACKUP_VERIFY' must be true or false" ;;
esac

dir=${BACKUP_DIR:-} name=${BACKUP_NAME:-}
[ -n "$dir" ] && [ -d "$dir" ] || fail bad-env "BACKUP_DIR '$dir' is not a directory"
[[ $name =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || fail bad-env "BACKUP_NAME '$name' is not a plain name"
final=$dir/$name
if [ -s "$final/result.json" ]; then
  # An earlier attempt of this Job committed it: reported again, not dumped
  # anew.  Only when it is this owner's (OWNER is compared as a whole line): a
  # recreated MySQLBackup or cluster of the same name, whose Job names can
  # repeat, must never report an earlier incarnation's backup as its own.
  owner=""
  [ -r "$final/OWNER" ] && { IFS= read -r owner < "$final/OWNER" || true; }
  [ "$owner" = "${BACKUP_OWNER:-}" ] ||
    fail exists "$final is committed already by another owner ('$owner', this one is '${BACKUP_OWNER:-}'): not reported as this backup"
  IFS= read -r line < "$final/result.json"
  log "backup $final exists already"
  emit_line "$line" 0
fi
[ -e "$final" ] && fail exists "$final exists but is incomplete (no result.json); remove it first"

# The current primary, found now: the Job's PRIMARY may be from before a failover.
current_primary || fail no-primary "$PRIMARY_ERR: the source cannot be proven caught up without the current primary"
primary=$CURRENT_PRIMARY
if [ -n "${PRIMARY:-}" ] && [ "$PRIMARY" != "$primary" ]; then
  log "PRIMARY=$PRIMARY is stale: the current primary is $primary"
fi
r_str primary "$primary"

source=""
for p in "${POD_NAMES[@]}"; do
  [ "$p" = "$primary" ] && continue
  reachable "$p" || continue
  [ "$(sql_is_read_only "$p")" = 1 ] || continue
  sql_replica_status "$p"
  [ "$RS_IO" = Yes ] && [ "$RS_SQL" = Yes ] && [[ $RS_LAG =~ ^[0-9]+$ ]] && (( RS_LAG <= BACKUP_MAX_LAG )) || continue
  { [ "$RS_HOST" = "$(pod_host "$primary")" ] && [ "$RS_PORT" = "$(pod_port "$primary")" ]; } || continue
  # the replica first, then the primary: the primary's history only grows
  e=$(sql_gtid_executed "$p") || continue
  pe=$(sql_gtid_executed "$primary") || continue
  if ! gtid_subset "$e" "$pe"; then
    log "$p holds transactions the primary $primary lacks ($(gtid_subtract "$e" "$pe")): not a source"
    continue
  fi
  source=$p; break
done
[ -n "$source" ] || source=$primary
r_str source "$source"
log "backing up from $source (primary $primary)"

# catch_up: CLOCK, POS = the primary's clock and position now; the source
# has executed POS when this returns.
catch_up() {
  IFS=$'\t' read -r CLOCK POS < <(sql_clock_position "$primary") || fail no-primary "$primary stopped answering"
  [[ $CLOCK =~ ^[0-9]+$ ]] || fail no-primary "$primary stopped answering"
  if [ "$source" != "$primary" ] && ! sql_wait_executed "$source" "$POS" "$BACKUP_CATCHUP_TIMEOUT"; then
    fail source-behind "$source has not executed the primary $primary's position [$POS] within ${BACKUP_CATCHUP_TIMEOUT}s"
  fi
}

work=$dir/.$name.partial
rm -rf "$work"
mkdir -p "$work"
[ "${BACKUP_BINLOGS:-copy}" = archive ] || mkdir -p "$work/binlog"
printf '%s\n' "${BACKUP_OWNER:-}" > "$work/OWNER"
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)

catch_up
t0=$CLOCK x0=$POS
# gzip -1 (the fastest level), as the dump streams (dump_cmd); at 1 GB it made
# the dump 3.4 times smaller for 20 s more (docs/performance.md).
dumpfile=$work/dump.sql
[ "$BACKUP_COMPRESSION" = gzip ] && dumpfile+=.gz
# The schemas and accounts, read before the dump and again after it (the agent's
# `catalog`, agent/src/catalog.rs): neither can be read inside the dump's
# snapshot, so the dump is kept only when both reads are equal (issue 34.6).
catalog "$source" "$work/catalog.0" || fail no-source "reading the schemas and accounts of $source failed"
mapfile -d '' -t dbs < "$work/catalog.0/schemas"
if (( ${#dbs[@]} > 0 )); then
  dump_cmd "$source" "$dumpfile" "${dbs[@]}"
  gtid=$(dump_gtid "$dumpfile")
  [ -n "$gtid" ] || fail no-gtid "the dump carries no GTID position"
else
  # nothing to dump: record the position in the same form the dump would
  gtid=$(sql_gtid_position "$source")
  case $FLAVOR in
    mariadb) printf -- "-- no application schemas\n-- SET GLOBAL gtid_slave_pos='%s';\n" "$gtid" ;;
    mysql)   printf -- "-- no application schemas\nSET @@SESSION.SQL_LOG_BIN=0;\n%s\n" \
               "$( [ -n "$gtid" ] && printf "SET @@GLOBAL.GTID_PURGED='%s';" "$gtid")" ;;
  esac | if [ "$BACKUP_COMPRESSION" = gzip ]; then gzip -1; else cat; fi > "$dumpfile"
fi
rc=0; catalog "$source" "$work/catalog.1" "$work/catalog.0" || rc=$?
case $rc in
  0) ;;
  75) fail catalog-changed "$(<"$work/catalog.1/changes"); the Job's next attempt dumps again" ;;
  *) fail no-source "reading the schemas and accounts of $source again failed" ;;
esac
mv "$work/catalog.1/accounts.sql" "$work/accounts.sql"
ACCOUNTS=$(<"$work/catalog.1/accounts.count")
rm -rf "$work/catalog.0" "$work/catalog.1"

# The dump holds only the primary's history, and at least what it had at t0.
pe=$(sql_gtid_executed "$primary") || fail no-primary "$primary stopped answering"
gtid_subset "$gtid" "$pe" ||
  fail source-diverged "the dump's position [$gtid] on $source holds transactions the primary $primary lacks: $(gtid_subtract "$gtid" "$pe")"
gtid_ge "$gtid" "$x0" || fail source-behind "the dump's position [$gtid] is behind the primary's [$x0]"
# Earliest point in time this dump can serve: every transaction it holds was
# binlogged before that second.  Exactly t0+1 when the dump is no further
# than what the primary had at t0; else the second after the dump ended.
catch_up
if gtid_within "$gtid" "$x0"; then pitr_from=$((t0 + 1)); else pitr_from=$((CLOCK + 1)); fi

# Binary logs: from the source, once it has executed what the primary had now;
# none with BACKUP_BINLOGS=archive (binlog.sh archives each file once, and
# restores read the archive; the dump then reaches its own pitr-from only).
if [ "${BACKUP_BINLOGS:-copy}" = archive ]; then
  binlogs_until=$pitr_from binlogs_gtid=$gtid
else
  catch_up
  binlogs_until=$CLOCK binlogs_gtid=$POS
  mapfile -t blfiles < <(sql_binlog_files "$source")
  if (( ${#blfiles[@]} > 0 )); then
    binlog_fetch "$source" "$work/binlog" "${blfiles[0]%%$'\t'*}"
  fi
fi
finished=$(date -u +%Y-%m-%dT%H:%M:%SZ)
printf 'dump-gtid %s\npitr-from %s\nbinlogs-until %s\nbinlogs-gtid %s\n' \
  "$gtid" "$pitr_from" "$binlogs_until" "$binlogs_gtid" > "$work/POSITIONS"

# checksums and sizes
bytes=0 files_json="" binlogs=()
: > "$work/SHA256SUMS"
for f in "$work/dump.sql" "$work/dump.sql.gz" "$work/accounts.sql" "$work/POSITIONS" "$work/OWNER" "$work"/binlog/*; do
  [ -f "$f" ] || continue
  rel=${f#"$work"/}
  sz=$(stat -c %s "$f"); sum=$(sha256sum "$f"); sum=${sum%% *}
  bytes=$((bytes + sz))
  printf '%s  %s\n' "$sum" "$rel" >> "$work/SHA256SUMS"
  files_json+="${files_json:+,}{\"path\":\"$(json_esc "$rel")\",\"bytes\":$sz,\"sha256\":\"$sum\"}"
  [[ $rel == binlog/* ]] && binlogs+=("${rel#binlog/}")
done
dbs_json="" ; for d in "${dbs[@]}"; do dbs_json+="${dbs_json:+,}\"$(json_esc "$d")\""; done
printf '{"name":"%s","flavor":"%s","compression":"%s","source":"%s","primary":"%s","startedAt":"%s","finishedAt":"%s","gtid":"%s","pitrFrom":"%s","binlogsUntil":"%s","databases":[%s],"accounts":%s,"bytes":%s,"files":[%s]}\n' \
  "$(json_esc "$name")" "$FLAVOR" "$BACKUP_COMPRESSION" "$(json_esc "$source")" "$(json_esc "$primary")" "$started" "$finished" \
  "$(json_esc "$gtid")" "$(utc_of "$pitr_from")" "$(utc_of "$binlogs_until")" \
  "$dbs_json" "$ACCOUNTS" "$bytes" "$files_json" > "$work/manifest.json"
sum=$(sha256sum "$work/manifest.json"); printf '%s  manifest.json\n' "${sum%% *}" >> "$work/SHA256SUMS"
# Signed with a key kept outside the store (see sign_backup in common.sh).
if [ -n "${BACKUP_SIGNING_KEY_FILE:-}" ]; then
  [ -r "$BACKUP_SIGNING_KEY_FILE" ] || fail bad-env "BACKUP_SIGNING_KEY_FILE is not readable"
  sign_backup "$work" "$BACKUP_SIGNING_KEY_FILE"
  r_raw signed true
fi

# Verification (BACKUP_VERIFY=true, issue 19.6): the finished backup is
# restored into a throwaway server in this pod (verify.sh) before it counts:
# one that does not restore fails here, is never renamed into place, and lets
# retention remove nothing.
if [ "$BACKUP_VERIFY" = true ]; then
  log "verifying $work: restoring it into a throwaway server"
  vline=$(RESTORE_VERIFY_KEY_FILE=${BACKUP_SIGNING_KEY_FILE:-} TERMINATION_LOG=/dev/null \
    bash "$SCRIPTS_DIR/verify.sh" "$work" | tail -n 1) || true
  if [[ $vline != *'"result":"verified"'* ]]; then
    [[ $vline =~ \"message\":\"([^\"]*)\" ]] && vmsg=${BASH_REMATCH[1]} || vmsg=$vline
    fail verify-failed "the backup did not restore into a throwaway server: $vmsg"
  fi
  [[ $vline =~ \"tables\":([0-9]+) ]] && r_raw verifiedTables "${BASH_REMATCH[1]}"
  [[ $vline =~ \"seconds\":([0-9]+) ]] && r_raw verifySeconds "${BASH_REMATCH[1]}"
  r_raw verified true
fi

r_str location "$final"
# the backup's checksum: SHA-256 of SHA256SUMS, which lists every file's
r_str sha256 "$(sum=$(sha256sum "$work/SHA256SUMS"); printf '%s' "${sum%% *}")"
r_raw bytes "$bytes"
r_str gtid "$gtid"
r_str startedAt "$started"
r_str finishedAt "$finished"
r_str pitrFrom "$(utc_of "$pitr_from")"
r_str binlogsUntil "$(utc_of "$binlogs_until")"
r_raw databases "${#dbs[@]}"
r_raw accounts "$ACCOUNTS"
r_raw binlogs "${#binlogs[@]}"
line=$(result_line backed-up)
printf '%s\n' "$line" > "$work/result.json"
sync "$work" 2>/dev/null || sync
mv "$work" "$final"
prune_dir() {
  local d owner
  [ -n "${KEEP:-}" ] && [ -n "${RETENTION_OWNER:-}" ] || return 0
  [[ $KEEP =~ ^[1-9][0-9]*$ ]] || { log "KEEP '$KEEP' is not a positive number: nothing pruned"; return 0; }
  for d in "$dir"/* "$dir"/.*.partial; do
    [ -d "$d" ] && [ -r "$d/OWNER" ] || continue
    IFS= read -r owner < "$d/OWNER" || true
    [ "$owner" = "$RETENTION_OWNER" ] || continue
    if [[ ${d##*/} == .*.partial ]]; then
      log "removing $d, an earlier attempt that never completed"; rm -rf -- "$d"; continue
    fi
    [ -s "$d/result.json" ] || continue
    printf '%s %s\n' "$(stat -c %Y "$d/result.json")" "${d##*/}"
  done | sort -rn | tail -n +"$((KEEP + 1))" | while read -r _ d; do
    log "pruning $dir/$d (older than the newest $KEEP of $RETENTION_OWNER)"
    rm -f -- "$dir/$d/result.json"; rm -rf -- "${dir:?}/$d"
  done
}
prune_dir || log "pruning old backups failed"
emit_line "$line" 0

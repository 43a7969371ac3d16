#!/bin/bash
# backup.sh -- Job.  Logical dump plus binary logs into $BACKUP_DIR/$BACKUP_NAME/:
#   dump.sql       consistent dump (--single-transaction) of every application
#                  schema with routines, events, triggers and the GTID position
#   binlog/        every binary log file the source still has (raw copies,
#                  fetched over the replication protocol) for point-in-time
#                  recovery up to the moment of the backup; a later backup's
#                  binlog/ covers the time after this one (see restore.sh)
#   SHA256SUMS     sha256sum -c format, over dump.sql and binlog/*
#   manifest.json  time, source, gtid, sizes, sha256
#   result.json    the result line
# Source: the first healthy replica (replicating from PRIMARY, both threads
# running, lag <= BACKUP_MAX_LAG s) in PODS order, else the primary.
# Written into a hidden .partial directory and renamed when complete;
# idempotent: if the backup exists already its result is reported again.
SCRIPT_NAME=backup
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
BACKUP_MAX_LAG=${BACKUP_MAX_LAG:-60}

dir=${BACKUP_DIR:-} name=${BACKUP_NAME:-}
[ -n "$dir" ] && [ -d "$dir" ] || fail bad-env "BACKUP_DIR '$dir' is not a directory"
[[ $name =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || fail bad-env "BACKUP_NAME '$name' is not a plain name"
final=$dir/$name
if [ -s "$final/result.json" ]; then
  IFS= read -r line < "$final/result.json"
  log "backup $final exists already"
  emit_line "$line" 0
fi
[ -e "$final" ] && fail exists "$final exists but is incomplete (no result.json); remove it first"

primary=${PRIMARY:-}
source=""
for p in "${POD_NAMES[@]}"; do
  [ "$p" = "$primary" ] && continue
  reachable "$p" || continue
  [ "$(sql_is_read_only "$p")" = 1 ] || continue
  sql_replica_status "$p"
  [ "$RS_IO" = Yes ] && [ "$RS_SQL" = Yes ] && [[ $RS_LAG =~ ^[0-9]+$ ]] && (( RS_LAG <= BACKUP_MAX_LAG )) || continue
  if [ -n "$primary" ] && { [ "$RS_HOST" != "$(pod_host "$primary")" ] || [ "$RS_PORT" != "$(pod_port "$primary")" ]; }; then continue; fi
  source=$p; break
done
if [ -z "$source" ]; then
  if [ -n "$primary" ] && reachable "$primary"; then source=$primary
  else fail no-source "no healthy replica and primary '${primary}' does not answer"; fi
fi
r_str source "$source"
log "backing up from $source"

work=$dir/.$name.partial
rm -rf "$work"
mkdir -p "$work/binlog"
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)

mapfile -t dbs < <(sql_user_schemas "$source")
if (( ${#dbs[@]} > 0 )); then
  dump_cmd "$source" "$work/dump.sql" "${dbs[@]}"
  gtid=$(dump_gtid "$work/dump.sql")
  [ -n "$gtid" ] || fail no-gtid "the dump carries no GTID position"
else
  # nothing to dump: record the position in the same form the dump would
  gtid=$(sql_gtid_position "$source")
  case $FLAVOR in
    mariadb) printf -- "-- no application schemas\n-- SET GLOBAL gtid_slave_pos='%s';\n" "$gtid" > "$work/dump.sql" ;;
    mysql)   printf -- "-- no application schemas\nSET @@SESSION.SQL_LOG_BIN=0;\n%s\n" \
               "$( [ -n "$gtid" ] && printf "SET @@GLOBAL.GTID_PURGED='%s';" "$gtid")" > "$work/dump.sql" ;;
  esac
fi

mapfile -t blfiles < <(sql_binlog_files "$source")
if (( ${#blfiles[@]} > 0 )); then
  binlog_fetch "$source" "$work/binlog" "${blfiles[0]%%$'\t'*}"
fi
finished=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# checksums and sizes
bytes=0 files_json="" binlogs=()
: > "$work/SHA256SUMS"
for f in "$work/dump.sql" "$work"/binlog/*; do
  [ -f "$f" ] || continue
  rel=${f#"$work"/}
  sz=$(stat -c %s "$f"); sum=$(sha256sum "$f"); sum=${sum%% *}
  bytes=$((bytes + sz))
  printf '%s  %s\n' "$sum" "$rel" >> "$work/SHA256SUMS"
  files_json+="${files_json:+,}{\"path\":\"$(json_esc "$rel")\",\"bytes\":$sz,\"sha256\":\"$sum\"}"
  [[ $rel == binlog/* ]] && binlogs+=("${rel#binlog/}")
done
dbs_json="" ; for d in "${dbs[@]}"; do dbs_json+="${dbs_json:+,}\"$(json_esc "$d")\""; done
printf '{"name":"%s","flavor":"%s","source":"%s","startedAt":"%s","finishedAt":"%s","gtid":"%s","databases":[%s],"bytes":%s,"files":[%s]}\n' \
  "$(json_esc "$name")" "$FLAVOR" "$(json_esc "$source")" "$started" "$finished" "$(json_esc "$gtid")" \
  "$dbs_json" "$bytes" "$files_json" > "$work/manifest.json"
sum=$(sha256sum "$work/manifest.json"); printf '%s  manifest.json\n' "${sum%% *}" >> "$work/SHA256SUMS"
# Signed with a key kept outside the store (see sign_backup in common.sh).
if [ -n "${BACKUP_SIGNING_KEY_FILE:-}" ]; then
  [ -r "$BACKUP_SIGNING_KEY_FILE" ] || fail bad-env "BACKUP_SIGNING_KEY_FILE is not readable"
  sign_backup "$work" "$BACKUP_SIGNING_KEY_FILE"
  r_raw signed true
fi

r_str location "$final"
r_raw bytes "$bytes"
r_str gtid "$gtid"
r_str startedAt "$started"
r_str finishedAt "$finished"
r_raw databases "${#dbs[@]}"
r_raw binlogs "${#binlogs[@]}"
line=$(result_line backed-up)
printf '%s\n' "$line" > "$work/result.json"
sync "$work" 2>/dev/null || sync
mv "$work" "$final"
emit_line "$line" 0

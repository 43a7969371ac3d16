#!/bin/bash
# binlog.sh -- Job (CronJob <name>-binlog, every few minutes).  Archives the
# current primary's binary logs incrementally (issue 19.3): each closed file
# once, compressed, into $ARCHIVE_DIR/<server identity>/:
#   <file>.gz      the raw binary log file, gzip
#   <file>.start   the GTIDs the server had before the file began (its
#                  Gtid_list / Previous_gtids), for continuity and retention
#   ../<identity>.until  "<unix second> <position>": every transaction the
#                  primary had binlogged when that second began is in the
#                  archived files of <identity> (rewritten by every run)
# The current file is closed first (FLUSH BINARY LOGS) when it holds any
# transaction, so the archive reaches the moment of the run: the recovery
# point is the CronJob's interval plus one run.  One server identity's files
# form one sequence; after a failover the new primary's own sequence is
# archived from its oldest file on, so a restore replays one sequence
# (restore.sh picks the one that covers the point).
# Retention (RETENTION_OWNER set): files no kept backup needs are removed --
# an earlier primary's whole sequence once it ends before the oldest kept
# backup's pitr-from; of every other sequence, each file followed by one that
# began at or before the dump position of the oldest complete backup in
# BACKUP_ROOT (its POSITIONS), when that backup is RETENTION_OWNER's.  Every
# scheduled backup counts: those of an earlier incarnation of the cluster
# (another uid) too, and while one of them is the oldest only whole sequences
# go (issue 34.2).  A .start stays while the primary
# still has its file, so a file is never archived twice.
# S3: s3.sh archive-pull mirrors the small files (*.start, *.until, the
# backups' OWNER, result.json and POSITIONS) into staging first; this script
# writes new files there and the names to delete into $ARCHIVE_DIR/PRUNE;
# s3.sh archive-push uploads the new files, then their .start, then *.until,
# then deletes.
# A run's budget (ARCHIVE_MAX_BYTES, S3: the hook sets half the staging
# volume, which holds every file of the run until the push): closed files are
# archived oldest first while their sizes (as the server lists them, before
# gzip) add up to at most that, one file at least; the rest are left to the
# next runs (result "left"), and <identity>.until is not rewritten until a run
# archived everything, so a backlog larger than the volume is archived over
# several runs instead of being evicted in every one (issue 34.12).
# Needs (the replicas' configuration): binary log expiry longer than the
# CronJob's interval, or a file may be purged before it is archived (the
# next restore then names the gap).
SCRIPT_NAME=binlog
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

adir=${ARCHIVE_DIR:-}
[ -n "$adir" ] || fail bad-env "ARCHIVE_DIR is required"
mkdir -p "$adir" || fail bad-env "cannot create $adir"
root=${BACKUP_ROOT:-$(dirname "$adir")}
budget=${ARCHIVE_MAX_BYTES:-}
[ -z "$budget" ] || [[ $budget =~ ^[1-9][0-9]{0,17}$ ]] ||
  fail bad-env "ARCHIVE_MAX_BYTES '$budget' must be a positive number of bytes"

current_primary || fail no-primary "$PRIMARY_ERR"
primary=$CURRENT_PRIMARY
ident=$(sql_server_identity "$primary")
[[ $ident =~ ^[A-Za-z0-9-]+$ ]] || fail bad-env "server identity '$ident' of $primary"
r_str primary "$primary"
r_str identity "$ident"
mkdir -p "$adir/$ident"

mapfile -t blfiles < <(sql_binlog_files "$primary")
(( ${#blfiles[@]} > 0 )) || fail no-binlogs "$primary has no binary logs"
cur=${blfiles[-1]%%$'\t'*}
cur_start=$(sql_binlog_start_state "$primary" "$cur") ||
  fail unreadable "the start state of $cur on $primary (the log says why)"
IFS=$'\t' read -r clock pos < <(sql_clock_position "$primary")
# Close the current file when it holds a transaction: it is archived now.
if ! gtid_subset "$(sql_gtid_executed "$primary")" "$cur_start"; then
  sql "$primary" "FLUSH BINARY LOGS"
  mapfile -t blfiles < <(sql_binlog_files "$primary")
fi
archived=()
declare -A on_primary=()
for l in "${blfiles[@]}"; do on_primary[${l%%$'\t'*}]=1; done
staged=0 left=0
for ((i = 0; i < ${#blfiles[@]} - 1; i++)); do
  f=${blfiles[i]%%$'\t'*}
  [ -e "$adir/$ident/$f.start" ] && continue
  if [ -n "$budget" ]; then
    size=${blfiles[i]#*$'\t'}
    [[ $size =~ ^[0-9]{1,18}$ ]] || fail sql-failed "SHOW BINARY LOGS on $primary gave the size '$size' for $f"
    # in order, never skipping one: the first that does not fit ends the run
    if (( left > 0 || (${#archived[@]} > 0 && staged + size > budget) )); then
      left=$((left + 1))
      continue
    fi
    staged=$((staged + size))
  fi
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/binlog.XXXXXX")
  binlog_fetch_one "$primary" "$tmp" "$f"
  gzip -1 -c "$tmp/$f" > "$adir/$ident/.$f.gz.partial"
  rm -rf "$tmp"
  mv "$adir/$ident/.$f.gz.partial" "$adir/$ident/$f.gz"
  # the sidecar last: a file counts as archived once its .start exists
  sql_binlog_start_state "$primary" "$f" > "$adir/$ident/.$f.start.partial" ||
    fail unreadable "the start state of $f on $primary (the log says why)"
  mv "$adir/$ident/.$f.start.partial" "$adir/$ident/$f.start"
  archived+=("$f")
done
if (( left == 0 )); then
  printf '%s %s\n' "$clock" "$pos" > "$adir/.$ident.until.partial"
  mv "$adir/.$ident.until.partial" "$adir/$ident.until"
else
  log "$left closed files left for the next runs (ARCHIVE_MAX_BYTES $budget): $ident.until unchanged"
fi

# Retention: the oldest complete backup of the owner sets what must stay.
: > "$adir/PRUNE"
pruned=0
if [ -n "${RETENTION_OWNER:-}" ]; then
  oldest="" oldest_t=""
  for d in "$root"/*/; do
    d=${d%/}
    [ -s "$d/result.json" ] && [ -r "$d/OWNER" ] && [ -r "$d/POSITIONS" ] || continue
    # With the cluster's signing key, only what it signed counts (issue 30.2):
    # the SIGNATURE over SHA256SUMS, and OWNER and POSITIONS as listed there.
    if [ -n "${ARCHIVE_VERIFY_KEY_FILE:-}" ]; then
      signature_ok "$d" "$ARCHIVE_VERIFY_KEY_FILE" &&
        ( cd "$d" && sha256sum -c --quiet --ignore-missing SHA256SUMS ) >&2 || {
        log "$d is not signed by the cluster's key: not counted for retention"; continue; }
    fi
    IFS= read -r owner < "$d/OWNER" || true
    # Every scheduled backup of the prefix counts, not only RETENTION_OWNER's
    # (issue 34.2): an earlier incarnation's (same name, another uid) stay in
    # the store and hold no binary logs of their own.
    case $owner in "scheduled "*) ;; *) continue ;; esac
    read_positions "$d" || fail corrupt "${POS_ERR:-$d/POSITIONS is unreadable}"
    if [ -z "$oldest_t" ] || (( POS_PITR_FROM < oldest_t )); then
      oldest_t=$POS_PITR_FROM oldest=$POS_DUMP_GTID
      # Another incarnation's GTIDs do not compare with this one's (numbering
      # restarts, issue 34.1): then only whole sequences go, by time.
      [ "$owner" = "$RETENTION_OWNER" ] || oldest=""
    fi
  done
  if [ -n "$oldest_t" ]; then
    for idir in "$adir"/*/; do
      idir=${idir%/}
      id=${idir##*/}
      # An earlier primary's sequence that ends before the oldest kept backup
      # begins: no restore of a kept backup can replay it (restore.sh uses one
      # sequence that reaches the point), so all of it goes.
      a_clock=""
      [ "$id" = "$ident" ] || { read -r a_clock _ < "$adir/$id.until" || true; } 2>/dev/null
      if [[ $a_clock =~ ^[0-9]+$ ]] && (( a_clock < oldest_t )); then
        # every file there, and the .gz of every .start (S3 staging holds only
        # the .start files)
        for f in "$idir"/*; do [ -f "$f" ] && printf '%s/%s\n' "$id" "${f##*/}" >> "$adir/PRUNE"; done
        for f in "$idir"/*.start; do [ -f "$f" ] && printf '%s/%s.gz\n' "$id" "$(basename "$f" .start)" >> "$adir/PRUNE"; done
        printf '%s.until\n' "$id" >> "$adir/PRUNE"
        pruned=$((pruned + 1))
        continue
      fi
      [ -n "$oldest" ] || continue
      mapfile -t starts < <(cd "$idir" && for s in *.start; do [ -f "$s" ] && printf '%s\n' "$s"; done | sort)
      for ((i = 0; i + 1 < ${#starts[@]}; i++)); do
        next=$(<"$idir/${starts[i + 1]}")
        gtid_text_ok "$next" || fail corrupt "$idir/${starts[i + 1]} is not a GTID text"
        gtid_within "$next" "$oldest" || break
        f=${starts[i]%.start}
        # The .start stays while the primary still has the file (it marks the
        # file archived, so it is never archived twice); then it goes too.
        gone=("$f.gz")
        [ "${idir##*/}" = "$ident" ] && [ -n "${on_primary[$f]:-}" ] || gone+=("$f.start")
        # (a mounted store shows what is gone; S3 staging has no .gz: repeated)
        [ -e "$idir/$f.gz" ] || (( ${#gone[@]} > 1 )) || [ -n "${ARCHIVE_REMOTE:-}" ] || continue
        for g in "${gone[@]}"; do printf '%s/%s\n' "${idir##*/}" "$g" >> "$adir/PRUNE"; done
        pruned=$((pruned + 1))
      done
    done
  fi
  if [ -z "${ARCHIVE_REMOTE:-}" ]; then   # a mounted store: prune here
    while IFS= read -r rel; do rm -f -- "${adir:?}/$rel"; done < "$adir/PRUNE"
    rm -f "$adir/PRUNE"
    rmdir "$adir"/*/ 2>/dev/null || true
  fi
fi
r_arr archived "${archived[@]}"
r_raw pruned "$pruned"
if (( left == 0 )); then
  r_str until "$(utc_of "$clock")"
else
  r_raw left "$left"
  r_str message "$left closed files did not fit this run's ARCHIVE_MAX_BYTES ($budget): the next runs archive them"
fi
# S3: s3.sh archive-push reports this line after the upload.
[ -z "${ARCHIVE_REMOTE:-}" ] || result_line archived > "$adir/.result"
finish archived 0

#!/bin/sh
# s3.sh -- the S3 side of backups and restores.  Runs in the uploader image
# (POSIX sh, coreutils and the AWS CLI v2; no bash), beside backup.sh /
# restore.sh in the server image, on the shared staging volume.
#
#   s3.sh check     before backup.sh: when the backup is committed in the
#                   bucket already (an earlier attempt of the same Job), its
#                   result.json is put into staging, so backup.sh reports it
#                   again instead of dumping anew.  Fails early on a wrong key
#                   or a missing bucket, before anything is dumped.
#   s3.sh upload    after backup.sh: write-then-commit.  A committed backup is
#                   never overwritten (its result is reported); the folder of an
#                   uncommitted earlier attempt is removed; every file but
#                   result.json is uploaded, then result.json, the commit
#                   marker, last.  Then, with KEEP and RETENTION_OWNER, prune.
#   s3.sh download  before restore.sh: BACKUP_NAME (and BINLOGS_NAME) into
#                   staging, committed backups only; with ARCHIVE=true the
#                   binary log archive (_binlog/) as well.
#   s3.sh archive-pull / archive-push
#                   around binlog.sh (the binary log archive, issue 19.3, in
#                   <prefix>/_binlog/): pull the small files it reads, push the
#                   files it archived (sidecars after data), delete the ones
#                   its retention let go; binlog.sh's result (.result) is the
#                   push's result.
#   s3.sh prune     keep the newest KEEP committed backups under the prefix
#                   whose OWNER file reads exactly RETENTION_OWNER (by commit
#                   time); remove the older ones.  Never touches uncommitted
#                   folders, nor backups of any other owner (other clusters,
#                   MySQLBackups, final backups), whatever their names.
#
# Env: S3_BUCKET, S3_PREFIX, S3_ENDPOINT (optional), the AWS CLI's own
# (AWS_DEFAULT_REGION; credentials from AWS_ACCESS_KEY_ID /
# AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, or the CLI's default chain:
# web identity, container or instance credentials), BACKUP_NAME,
# BINLOGS_NAME, KEEP, RETENTION_OWNER, STAGING [/backup], TERMINATION_LOG
# [/dev/termination-log].
# Result: on failure one JSON line {"result":"error","reason","message"} on
# stdout and in the termination log; the upload's success line is the
# backup's own result.json.
set -u
STAGING=${STAGING:-/backup}
TERM_LOG=${TERMINATION_LOG:-/dev/termination-log}
ERR=$(mktemp "${TMPDIR:-/tmp}/s3err.XXXXXX")
trap 'rm -f "$ERR"' EXIT

log() { printf '%s s3: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }
s3() { if [ -n "${S3_ENDPOINT:-}" ]; then aws --endpoint-url "$S3_ENDPOINT" "$@"; else aws "$@"; fi; }
# The last line the AWS CLI wrote to stderr, JSON-safe: it names the cause
# (InvalidAccessKeyId, SignatureDoesNotMatch, NoSuchBucket, AccessDenied, ...).
cause() { tail -n 3 "$ERR" 2>/dev/null | tr -d '"\\\000-\037' | tr -s ' ' | cut -c1-600; }
fail() {
  line=$(printf '{"result":"error","reason":"%s","message":"%s"}' "$1" "$(printf '%s' "$2" | tr -d '"\\\000-\037')")
  printf '%s\n' "$line"
  printf '%s\n' "$line" > "$TERM_LOG" 2>/dev/null || true
  exit 1
}
need() { eval "[ -n \"\${$1:-}\" ]" || fail bad-env "$1 is required"; }
need S3_BUCKET
base="s3://$S3_BUCKET${S3_PREFIX:+/$S3_PREFIX}"

# committed NAME: 0 when NAME/result.json exists, 1 when it does not, and the
# script fails on any other answer (credentials, bucket, network).
committed() {
  if s3 s3api head-object --bucket "$S3_BUCKET" --key "${S3_PREFIX:+$S3_PREFIX/}$1/result.json" >/dev/null 2>"$ERR"; then
    return 0
  fi
  case $(cat "$ERR") in
    *"(404)"*|*"Not Found"*|*NoSuchKey*) return 1 ;;
  esac
  fail store-unusable "s3://$S3_BUCKET: $(cause)"
}

# bucket_ok: the bucket answers with these credentials (a missing bucket
# answers 404 to head-object as a missing key would).
# A HEAD answer has no body: on failure a GET names the cause
# (SignatureDoesNotMatch, InvalidAccessKeyId, NoSuchBucket, AccessDenied).
bucket_ok() {
  s3 s3api head-bucket --bucket "$S3_BUCKET" >/dev/null 2>"$ERR" && return 0
  s3 s3api list-objects-v2 --bucket "$S3_BUCKET" --max-items 1 >/dev/null 2>"$ERR"
  fail store-unusable "s3://$S3_BUCKET: $(cause)"
}

prune() {
  [ -n "${KEEP:-}" ] && [ -n "${RETENTION_OWNER:-}" ] || return 0
  s3 s3 ls "$base/" > "$ERR.ls" 2>"$ERR" || { log "pruning: listing $base/ failed: $(cause)"; rm -f "$ERR.ls"; return 0; }
  : > "$ERR.keep"
  while read -r kind d; do
    [ "$kind" = PRE ] || continue
    d=${d%/}
    # committed: result.json, with its commit time
    stamp=$(s3 s3 ls "$base/$d/result.json" 2>/dev/null) || continue
    set -- $stamp
    [ $# -ge 2 ] || continue
    owner=$(s3 s3 cp --only-show-errors "$base/$d/OWNER" - 2>/dev/null) || continue
    [ "$owner" = "$RETENTION_OWNER" ] || continue
    printf '%s %s %s\n' "$1" "$2" "$d" >> "$ERR.keep"
  done < "$ERR.ls"
  sort -r "$ERR.keep" | tail -n +"$((KEEP + 1))" | while read -r _ _ d; do
    log "pruning $base/$d/ (older than the newest $KEEP of $RETENTION_OWNER)"
    # the commit marker first: a half-deleted backup is never taken for a complete one
    s3 s3 rm --only-show-errors "$base/$d/result.json" && s3 s3 rm --recursive --only-show-errors "$base/$d/" ||
      log "pruning $d failed"
  done
  rm -f "$ERR.ls" "$ERR.keep"
}

case ${1:-} in
  check)
    need BACKUP_NAME
    bucket_ok
    if committed "$BACKUP_NAME"; then
      mkdir -p "$STAGING/$BACKUP_NAME"
      s3 s3 cp --only-show-errors "$base/$BACKUP_NAME/result.json" "$STAGING/$BACKUP_NAME/result.json" 2>"$ERR" ||
        fail store-unusable "reading $base/$BACKUP_NAME/result.json: $(cause)"
      # and whose it is: backup.sh reports it again only for the same owner
      # (a backup without OWNER is nobody's, and never reported as this one)
      s3 s3 cp --only-show-errors "$base/$BACKUP_NAME/OWNER" "$STAGING/$BACKUP_NAME/OWNER" 2>"$ERR" ||
        log "$base/$BACKUP_NAME/OWNER: $(cause)"
      log "$base/$BACKUP_NAME is committed already"
    fi
    ;;
  upload)
    need BACKUP_NAME
    src=$STAGING/$BACKUP_NAME dest=$base/$BACKUP_NAME
    [ -s "$src/result.json" ] || fail bad-env "$src/result.json is missing: backup.sh did not finish"
    bucket_ok
    if committed "$BACKUP_NAME"; then
      log "$dest is committed already; reporting it"
      s3 s3 cp --only-show-errors "$dest/result.json" "$src/result.json" 2>"$ERR" || fail upload-failed "$(cause)"
    else
      s3 s3 rm --recursive --only-show-errors "$dest/" 2>"$ERR" || fail upload-failed "removing the uncommitted $dest/: $(cause)"
      s3 s3 cp --recursive --only-show-errors --exclude result.json "$src/" "$dest/" 2>"$ERR" ||
        fail upload-failed "copying the backup to $dest/: $(cause)"
      s3 s3 cp --only-show-errors "$src/result.json" "$dest/result.json" 2>"$ERR" ||
        fail upload-failed "committing $dest/result.json: $(cause)"
      log "committed $dest"
    fi
    prune
    cat "$src/result.json"
    cat "$src/result.json" > "$TERM_LOG" 2>/dev/null || true
    ;;
  download)
    need BACKUP_NAME
    bucket_ok
    for n in "$BACKUP_NAME" ${BINLOGS_NAME:-}; do
      committed "$n" || fail not-committed "$base/$n has no result.json: that backup never completed"
      s3 s3 cp --recursive --only-show-errors "$base/$n/" "$STAGING/$n/" 2>"$ERR" ||
        fail download-failed "copying $base/$n/: $(cause)"
    done
    # ARCHIVE=true (a point-in-time restore): the binary log archive too
    if [ "${ARCHIVE:-}" = true ]; then
      s3 s3 cp --recursive --only-show-errors "$base/_binlog/" "$STAGING/_binlog/" 2>"$ERR" ||
        fail download-failed "copying $base/_binlog/: $(cause)"
    fi
    ;;
  archive-pull)
    # Before binlog.sh: what it reads of the store -- the archive's sidecars
    # (*.start, *.until) and the backups' OWNER, result.json and POSITIONS
    # (for retention), with SHA256SUMS and SIGNATURE to check them by -- never
    # the archived files themselves.
    bucket_ok
    mkdir -p "$STAGING/_binlog"
    s3 s3 cp --recursive --only-show-errors --exclude '*' --include '_binlog/*.start' --include '_binlog/*.until' \
      --include '*/OWNER' --include '*/result.json' --include '*/POSITIONS' \
      --include '*/SHA256SUMS' --include '*/SIGNATURE' "$base/" "$STAGING/" 2>"$ERR" ||
      fail download-failed "reading $base/: $(cause)"
    ;;
  archive-push)
    # After binlog.sh: the new files, then their .start (a file counts as
    # archived once its .start exists), then *.until (how far the archive
    # reaches), then the files retention let go.  The result is binlog.sh's.
    a=$STAGING/_binlog
    [ -s "$a/.result" ] || fail bad-env "$a/.result is missing: binlog.sh did not finish"
    for pat in '*.gz' '*.start' '*.until'; do
      s3 s3 sync --only-show-errors --exclude '*' --include "$pat" --exclude '.*' "$a/" "$base/_binlog/" 2>"$ERR" ||
        fail upload-failed "copying $pat to $base/_binlog/: $(cause)"
    done
    if [ -f "$a/PRUNE" ]; then
      while IFS= read -r rel; do
        [ -n "$rel" ] || continue
        s3 s3 rm --only-show-errors "$base/_binlog/$rel" 2>"$ERR" || log "pruning $rel failed: $(cause)"
      done < "$a/PRUNE"
    fi
    cat "$a/.result"
    cat "$a/.result" > "$TERM_LOG" 2>/dev/null || true
    ;;
  prune) prune ;;
  *) fail bad-env "usage: s3.sh check|upload|download|prune|archive-pull|archive-push" ;;
esac
exit 0

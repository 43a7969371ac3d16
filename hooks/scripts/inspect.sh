#!/bin/bash
# inspect.sh -- Job, periodic and whenever a server's readiness changes: what
# every member of PODS says about itself, for the hook's status.servers.  It
# reads and changes nothing: a survey, one client call per member (two on the
# primary, three per seeding check on MariaDB at most).
#
# Result: {"result":"inspected","primary":"<PRIMARY>","servers":[...]} with,
# per member in PODS order (keys only when known):
#   "name"; "up": false when it does not answer (nothing else then);
#   "writable": read_only is OFF;
#   "source": the member (or host:port) it replicates from;
#   "io", "sql": receiver and applier state (Yes, No, Connecting);
#   "lag": seconds behind (Seconds_Behind_Master/Source), when known;
#   "error": the last replication error (receiver, then applier);
#   "gtid": its GTID position (MySQL gtid_executed, MariaDB gtid_binlog_pos);
#   "seeding": true while it holds a partial copy (seed.sh);
#   "errant": transactions PRIMARY lacks (when PRIMARY answers);
#   on PRIMARY: "semiSync" (source enabled) and "semiSyncClients".
# Texts are clipped (gtid 120, error 160, errant 80 characters) so that nine
# servers fit the 4 KiB termination message.  Exit 0 whenever it could run.
SCRIPT_NAME=inspect
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

primary=${PRIMARY:-}
r_str primary "$primary"
clip() { local s=$1 n=$2; if (( ${#s} > n )); then printf '%s...' "${s:0:n}"; else printf '%s' "$s"; fi; }
# member_at HOST PORT: the member with that address, or HOST:PORT.
member_at() {
  local p
  for p in "${POD_NAMES[@]}"; do
    if [ "$(pod_host "$p")" = "$1" ] && [ "$(pod_port "$p")" = "$2" ]; then printf '%s' "$p"; return; fi
  done
  printf '%s:%s' "$1" "$2"
}
pexec=""
if is_member "$primary" && reachable "$primary"; then pexec=$(sql_gtid_executed "$primary" 2>/dev/null) || pexec=""; fi

entries=()
for p in "${POD_NAMES[@]}"; do
  e="\"name\":\"$(json_esc "$p")\""
  if ! reachable "$p"; then entries+=("{$e,\"up\":false}"); continue; fi
  ro=$(sql_is_read_only "$p" 2>/dev/null) || { entries+=("{$e,\"up\":false}"); continue; }
  e+=",\"up\":true,\"writable\":$([ "$ro" = 0 ] && echo true || echo false)"
  if sql_replica_status "$p" 2>/dev/null && [ "$RS_CONFIGURED" = 1 ]; then
    e+=",\"source\":\"$(json_esc "$(member_at "$RS_HOST" "$RS_PORT")")\""
    e+=",\"io\":\"$(json_esc "$RS_IO")\",\"sql\":\"$(json_esc "$RS_SQL")\""
    [[ $RS_LAG =~ ^[0-9]+$ ]] && e+=",\"lag\":$RS_LAG"
    [ -z "$RS_ERR" ] || e+=",\"error\":\"$(json_esc "$(clip "$RS_ERR" 160)")\""
  fi
  g=$(sql_gtid_position "$p" 2>/dev/null) || g=""
  e+=",\"gtid\":\"$(json_esc "$(clip "$g" 120)")\""
  if sql_is_seeding "$p"; then e+=",\"seeding\":true"; fi
  if [ -n "$pexec" ] && [ "$p" != "$primary" ] && x=$(sql_gtid_executed "$p" 2>/dev/null) &&
     ! gtid_subset "$x" "$pexec" "$primary"; then
    e+=",\"errant\":\"$(json_esc "$(clip "$(gtid_subtract "$x" "$pexec" "$primary")" 80)")\""
  fi
  if [ "$p" = "$primary" ]; then
    on=$(sql_semisync_source_enabled "$p" 2>/dev/null) || on=""
    n=$(sql_semisync_clients "$p" 2>/dev/null) || n=""
    [ -z "$on" ] || e+=",\"semiSync\":$([ "$on" = 1 ] && echo true || echo false)"
    [[ $n =~ ^[0-9]+$ ]] && e+=",\"semiSyncClients\":$n"
  fi
  entries+=("{$e}")
done
r_raw servers "[$(IFS=,; printf '%s' "${entries[*]}")]"
finish inspected

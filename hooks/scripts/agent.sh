#!/bin/bash
# agent.sh -- long-running sidecar, per pod.  Runs join.sh every
# AGENT_INTERVAL seconds (default 10) so that the pod follows the primary named
# in ${PRIMARY_FILE}, printing a result line whenever it changes.
# AGENT_ITERATIONS=N stops after N rounds (tests); 0 (default) runs forever.
# With EXPORTER_PASSWORD_FILE (a mysqld_exporter sidecar), on the primary each round
# also runs exporter-user.sh, which sets up the exporter's account if it cannot
# log in.
# With OPERATOR_PASSWORD_FILE (the operator account, issue 18.5), on the primary
# each round also runs operator-user.sh, which sets up that account if it cannot
# log in and, once the hook says so, drops root's network accounts.
# With spec.tls (TLS_MODE_FILE set), each round it also compares the mounted
# certificate, key and CA with what the server last loaded, and runs
# tls-reload.sh when they differ (a renewal): once at the start, then on change.
set -u
trap 'exit 0' TERM  # PID 1 of its container: without a handler SIGTERM is ignored and every pod waits out its grace period
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
interval=${AGENT_INTERVAL:-10}
iterations=${AGENT_ITERATIONS:-0}
last="" elast="" olast="" tlast="" i=0
tls_dir=$(dirname "${TLS_CA:-/etc/mysql/tls/ca.crt}")
loaded=""   # checksum of the TLS files the server last loaded
while :; do
  # join.sh logs go to our stderr; its last stdout line is the result
  line=$(bash "$here/join.sh" | tail -n 1)
  if [ "$line" != "$last" ]; then
    printf '%s\n' "$line"
    last=$line
  fi
  if [ -n "${OPERATOR_PASSWORD_FILE:-}${OPERATOR_PASSWORD:-}" ] && [[ $line == *'"result":"is-primary"'* ]]; then
    oline=$(bash "$here/operator-user.sh" | tail -n 1)
    if [ "$oline" != "$olast" ]; then printf '%s\n' "$oline"; olast=$oline; fi
  fi
  if [ -n "${EXPORTER_PASSWORD_FILE:-}${EXPORTER_PASSWORD:-}" ] && [[ $line == *'"result":"is-primary"'* ]]; then
    eline=$(bash "$here/exporter-user.sh" | tail -n 1)
    if [ "$eline" != "$elast" ]; then printf '%s\n' "$eline"; elast=$eline; fi
  fi
  if [ -n "${TLS_MODE_FILE:-}" ] && [ -r "$tls_dir/tls.crt" ]; then
    sum=$(cat "$tls_dir/tls.crt" "$tls_dir/tls.key" "$tls_dir/ca.crt" 2>/dev/null | cksum)
    if [ "$sum" != "$loaded" ]; then
      tline=$(bash "$here/tls-reload.sh" | tail -n 1)
      if [ "$tline" != "$tlast" ]; then printf '%s\n' "$tline"; tlast=$tline; fi
      if [[ $tline == *'"result":"reloaded"'* ]]; then loaded=$sum; fi
    fi
  fi
  i=$((i + 1))
  if (( iterations > 0 && i >= iterations )); then exit 0; fi
  sleep "$interval"
done

#!/usr/bin/env bash
# Measures the hook against its floor and prints one Markdown report:
#   1. criterion benches of hooks::sync / finalize / customize against the floor
#      (serde_json decode of the request + encode of the response, nothing else),
#      and the same ratio measured interleaved (hooks/benches/ratio.rs);
#   2. how the cost grows with replicas and related pods (a fitted line and R²);
#   3. an HTTP load run with wrk against the release binary on loopback: req/s,
#      p50/p99 latency per concurrency, RSS after >=100k and >=1M requests, peak RSS;
#   4. with PEER_SYNC_JS set, bench/side-by-side.sh: the same load against
#      Metacontroller's example hook, side by side (see its header).
#
# Usage: bench/run.sh            (about 15 minutes on 2 cores; the soak is most of it)
#        QUICK=1 bench/run.sh    (shorter everything, for trying the script)
#        SOAK_REQUESTS=N         (soak length; default 1,000,000, stopped after 15 min)
# Needs wrk (Debian: apt-get install wrk) and python3. Everything it sends goes to
# 127.0.0.1 only; every load step is bounded in time and the server it starts is
# stopped on exit. CI does not run this.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out="$root/target/perf"
mkdir -p "$out"

quick=${QUICK:-}
if [[ -n $quick ]]; then
  crit_args=(--warm-up-time 0.3 --measurement-time 0.5)
  growth_ms=60; load_secs=2; soak_target=${SOAK_REQUESTS:-200000}; soak_limit=120
else
  crit_args=(--warm-up-time 1 --measurement-time 3)
  growth_ms=300; load_secs=8; soak_target=${SOAK_REQUESTS:-1000000}; soak_limit=900
fi
# A port nobody listens on (other services on this machine use fixed ones).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
body="$root/test-fixtures/sync/running/request.json"

command -v wrk >/dev/null || { echo "bench/run.sh needs wrk: apt-get install wrk" >&2; exit 1; }

log() { echo "bench/run.sh: $*" >&2; }

log "building the release binary and the benches"
cargo build --release --locked --bin mysql-hook >&2
cargo bench --locked -p hooks --no-run >&2 2>&1

log "criterion: hooks vs floor"
rm -rf "$root/target/criterion"
cargo bench --locked -p hooks --bench core -- "${crit_args[@]}" >"$out/criterion.txt" 2>&1

log "path / floor, interleaved"
RATIO_BUDGET_MS=$((growth_ms * 5)) cargo bench --locked -p hooks --bench ratio >"$out/ratio.md" 2>"$out/ratio.err"

log "growth sweep"
GROWTH_BUDGET_MS=$growth_ms cargo bench --locked -p hooks --bench growth >"$out/growth.md" 2>"$out/growth.err"

# --- HTTP load ---------------------------------------------------------------
log "HTTP load on 127.0.0.1:$port"
server_pid=
cleanup() { if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi; }
trap cleanup EXIT
# Default settings (info logging, to /dev/null here; one worker per CPU) except the
# admission limit: above every concurrency below, so every request is answered
# rather than refused with 429 (tests/overload.rs covers the limit).
MYSQL_HOOK_MAX_CONCURRENT_REQUESTS=256 MYSQL_HOOK_LISTEN=127.0.0.1:$port "$root/target/release/mysql-hook" serve 2>/dev/null &
server_pid=$!
for _ in $(seq 50); do
  ss -ltnp "sport = :$port" | grep -q "pid=$server_pid," && break
  sleep 0.1
done
# Load only the server started here, never whatever else might hold the port.
ss -ltnp "sport = :$port" | grep -q "pid=$server_pid," || { echo "127.0.0.1:$port is not our server" >&2; exit 1; }
status=$(curl -sS -o /dev/null -w '%{http_code}' -H 'content-type: application/json' --data-binary "@$body" "http://127.0.0.1:$port/sync")
[[ $status == 200 ]] || { echo "the fixture answered $status" >&2; exit 1; }

served() { # sync requests answered 200 so far, from the hook's own counter
  curl -fsS "http://127.0.0.1:$port/metrics" | awk '/^mysql_hook_requests_total\{hook="sync",outcome="ok"\}/ {print $2}'
}
vm() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$server_pid/status"; }
wrk_run() { # connections seconds -> wrk output file
  local c=$1 secs=$2 threads=2
  ((c < 2)) && threads=1
  BODY="$body" wrk -t"$threads" -c"$c" -d"${secs}s" --latency -s "$root/bench/post.lua" "http://127.0.0.1:$port/sync"
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; } # utime + stime
tick_us=$((1000000 / $(getconf CLK_TCK)))
rss_start=$(vm VmRSS)
for c in 1 8 32 128; do
  before=$(cpu_ticks)
  wrk_run "$c" "$load_secs" >"$out/wrk-c$c.txt"
  echo $((($(cpu_ticks) - before) * tick_us)) >"$out/cpu-c$c.txt" # server CPU µs in the run
done
# Soak at 32 connections: RSS after >=100k and after >=1M requests in all.
rss_100k=; n_100k=; soak_start=$(date +%s)
while :; do
  n=$(served)
  if [[ -z $rss_100k ]] && ((n >= 100000)); then rss_100k=$(vm VmRSS); n_100k=$n; fi
  ((n >= soak_target)) && break
  (($(date +%s) - soak_start > soak_limit)) && { log "soak stopped by its time limit at $n requests"; break; }
  wrk_run 32 5 >/dev/null
done
n_end=$(served); rss_end=$(vm VmRSS); hwm=$(vm VmHWM)
cleanup; server_pid=

# --- Report ------------------------------------------------------------------
python3 - "$out" "$root/target/criterion" <<'EOF'
import json, os, re, sys
out, crit = sys.argv[1], sys.argv[2]

def est(group, fn, size):
    p = os.path.join(crit, group, fn, size, "new", "estimates.json")
    with open(p) as f:
        e = json.load(f)
    return e["median"]["point_estimate"] / 1000.0  # ns -> µs

print("### Hooks against the floor (criterion, median µs per request)\n")
print("`path` = decode request + hook + encode response; `floor` = decode request + encode the same response "
      "with serde_json and nothing else; `core` = the hook alone on a decoded request. Target: path/floor ≤ 1.5.\n")
print("| hook | size | path µs | floor µs | core µs | path / floor |")
print("|---|---|---:|---:|---:|---:|")
for group in ("sync", "finalize", "customize"):
    for size in ("1", "3", "9", "large"):
        try:
            p, f, c = (est(group, fn, size) for fn in ("path", "floor", "core"))
        except FileNotFoundError:
            continue
        print(f"| {group} | {size} | {p:.1f} | {f:.1f} | {c:.1f} | {p / f:.2f} |")
print("\nSizes: 1, 3, 9 Ready replicas; `large` = 9 replicas + 48 Job pods of 16 Jobs "
      "(built from test-fixtures/sync/running).\n")

print("### path / floor, interleaved (benches/ratio.rs: median of 41 rounds, each a batch of path calls and a batch of floor calls back to back)\n")
with open(os.path.join(out, "ratio.md")) as f:
    print(f.read().strip() + "\n")

print("### Growth (decode + sync + encode)\n")
with open(os.path.join(out, "growth.md")) as f:
    print(f.read().strip() + "\n")

def wrk(path):
    text = open(path).read()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    def lat(pct):
        m = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
        v, unit = float(m.group(1)), m.group(2)
        return v * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    errs = re.search(r"Socket errors:(.*)", text)
    n = int(re.search(r"(\d+) requests in", text).group(1))
    return rps, lat(50), lat(99), int(bad.group(1)) if bad else 0, errs.group(1).strip() if errs else "none", n

print("### HTTP load (wrk on loopback, test-fixtures/sync/running/request.json, keep-alive)\n")
print("`server CPU` = the hook process's user + system CPU during the run divided by the requests.\n")
print("| connections | req/s | p50 ms | p99 ms | server CPU µs/req | non-200 | socket errors |")
print("|---:|---:|---:|---:|---:|---:|---|")
for c in (1, 8, 32, 128):
    rps, p50, p99, bad, errs, n = wrk(os.path.join(out, f"wrk-c{c}.txt"))
    cpu = int(open(os.path.join(out, f"cpu-c{c}.txt")).read()) / max(n, 1)
    print(f"| {c} | {rps:,.0f} | {p50:.2f} | {p99:.2f} | {cpu:.0f} | {bad} | {errs} |")
EOF
cat <<EOF

| memory (kB) | value |
|---|---:|
| RSS at start | ${rss_start} |
| RSS after ${n_100k:-?} requests | ${rss_100k:-?} |
| RSS after ${n_end} requests | ${rss_end} |
| peak RSS (VmHWM) | ${hwm} |

Machine: $(nproc) cores, $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); wrk and the hook share the cores.
EOF

if [[ -n ${PEER_SYNC_JS:-} ]]; then
  echo
  "$root/bench/side-by-side.sh"
else
  log "side by side with the peer skipped: set PEER_SYNC_JS (see bench/side-by-side.sh)"
fi

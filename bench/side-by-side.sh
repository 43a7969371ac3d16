#!/usr/bin/env bash
# Our hook against the simplest peer, in one run (issue 36.1): Metacontroller's
# example hook (examples/catset/manifest/sync.js of its repository) behind a
# minimal Node server (bench/peer-server.js), each sent requests of the same size:
#   small: our test-fixtures/sync/new-cluster request, compact, against a new
#          CatSet padded to its size (bench/catset_request.py new);
#   large: our test-fixtures/sync/running request, compact, against a CatSet of
#          3 Running Pods padded to its size (bench/catset_request.py running).
# wrk -t2 -c32 on the same two cores, each measurement after a 3 s warm-up, the
# two servers alternated ROUNDS times; the server's user + system CPU per request
# from /proc, so a slower hook shows even where wrk saturates first.
#
# Usage: PEER_SYNC_JS=PATH bench/side-by-side.sh   (about 2 minutes)
#   PEER_SYNC_JS  the peer's sync.js, fetched for the comparison and never
#                 committed, e.g. from a clone of github.com/metacontroller/metacontroller:
#                 git show HEAD:examples/catset/manifest/sync.js > /tmp/sync.js
#   ROUNDS=2 SECS=8 CONNECTIONS=32
# Needs wrk, node and python3. Both servers listen on 127.0.0.1 only and are
# stopped on exit. bench/run.sh calls this when PEER_SYNC_JS is set; CI does not.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out="$root/target/perf/side-by-side"
rounds=${ROUNDS:-2} secs=${SECS:-8} conns=${CONNECTIONS:-32}
log() { echo "bench/side-by-side.sh: $*" >&2; }

peer=${PEER_SYNC_JS:-}
[[ -n $peer && -f $peer ]] || { log "set PEER_SYNC_JS to the peer's sync.js (see the header)"; exit 2; }
for tool in wrk node python3; do
  command -v "$tool" >/dev/null || { log "needs $tool"; exit 1; }
done
rm -rf "$out" && mkdir -p "$out"

log "building the release binary"
cargo build --release --locked --bin mysql-hook >&2

compact() { python3 -c 'import json, sys; sys.stdout.write(json.dumps(json.load(open(sys.argv[1])), separators=(",", ":")))' "$1"; }
compact test-fixtures/sync/new-cluster/request.json >"$out/ours-small.json"
compact test-fixtures/sync/running/request.json >"$out/ours-large.json"
python3 bench/catset_request.py new "$(wc -c <"$out/ours-small.json")" >"$out/peer-small.json"
python3 bench/catset_request.py running "$(wc -c <"$out/ours-large.json")" >"$out/peer-large.json"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
declare -A pid port
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

port[ours]=$(free_port)
MYSQL_HOOK_MAX_CONCURRENT_REQUESTS=256 MYSQL_HOOK_LISTEN=127.0.0.1:${port[ours]} \
  "$root/target/release/mysql-hook" serve 2>/dev/null &
pid[ours]=$!
pids+=("$!")
port[peer]=$(free_port)
node bench/peer-server.js "$peer" "${port[peer]}" &
pid[peer]=$!
pids+=("$!")

for who in ours peer; do
  for _ in $(seq 100); do
    ss -ltnp "sport = :${port[$who]}" | grep -q "pid=${pid[$who]}," && break
    sleep 0.1
  done
  # Load only the servers started here, never whatever else might hold the port.
  ss -ltnp "sport = :${port[$who]}" | grep -q "pid=${pid[$who]}," || { log "$who is not listening"; exit 1; }
  for size in small large; do
    status=$(curl -sS -o "$out/$who-$size.answer" -w '%{http_code}' -H 'content-type: application/json' \
      --data-binary "@$out/$who-$size.json" "http://127.0.0.1:${port[$who]}/sync")
    [[ $status == 200 ]] || { log "$who answered $status to its $size request"; exit 1; }
  done
done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime
tick_us=$((1000000 / $(getconf CLK_TCK)))
run() { # who size seconds -> wrk output
  BODY="$out/$1-$2.json" wrk -t2 -c"$conns" -d"${3}s" --latency -s "$root/bench/post.lua" \
    "http://127.0.0.1:${port[$1]}/sync"
}
for r in $(seq "$rounds"); do
  for size in small large; do
    for who in ours peer; do
      log "round $r: $who, $size request"
      run "$who" "$size" 3 >/dev/null
      before=$(cpu_ticks "${pid[$who]}")
      run "$who" "$size" "$secs" >"$out/wrk-$who-$size-$r.txt"
      echo $((($(cpu_ticks "${pid[$who]}") - before) * tick_us)) >"$out/cpu-$who-$size-$r.txt"
    done
  done
done

python3 - "$out" "$rounds" "$conns" <<'EOF'
import os, re, sys
out, rounds, conns = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def wrk(path):
    text = open(path).read()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    m = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
    p99 = float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]
    n = int(re.search(r"(\d+) requests in", text).group(1))
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    return rps, p99, n, int(bad.group(1)) if bad else 0

print(f"### Side by side with Metacontroller's CatSet example (wrk -t2 -c{conns}, {rounds} rounds alternated)\n")
print("| request | server | bytes | req/s per round | p99 ms per round | CPU µs/req | non-200 |")
print("|---|---|---:|---|---|---:|---:|")
best = {}
for size in ("small", "large"):
    for who in ("ours", "peer"):
        runs = [wrk(os.path.join(out, f"wrk-{who}-{size}-{r}.txt")) for r in range(1, rounds + 1)]
        cpu = [int(open(os.path.join(out, f"cpu-{who}-{size}-{r}.txt")).read()) for r in range(1, rounds + 1)]
        size_b = os.path.getsize(os.path.join(out, f"{who}-{size}.json"))
        rps = " / ".join(f"{x[0]:,.0f}" for x in runs)
        p99 = " / ".join(f"{x[1]:.2f}" for x in runs)
        per_req = sum(cpu) / max(sum(x[2] for x in runs), 1)
        bad = sum(x[3] for x in runs)
        name = "mysql-hook" if who == "ours" else "catset sync.js (Node)"
        print(f"| {size} | {name} | {size_b:,} | {rps} | {p99} | {per_req:.0f} | {bad} |")
        best[size, who] = sum(x[0] for x in runs) / len(runs)
print()
for size in ("small", "large"):
    print(f"- {size}: mysql-hook / peer throughput {best[size, 'ours'] / best[size, 'peer']:.2f}× (mean of the rounds)")
print(f"\nMachine: {os.cpu_count()} cores; wrk and both servers share them; node {os.popen('node --version').read().strip()}.")
EOF

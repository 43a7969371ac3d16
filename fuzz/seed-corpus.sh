#!/usr/bin/env bash
# Seeds fuzz/corpus/hook_body with every fixture request, prefixed with the byte
# that selects its hook (0 sync, 1 finalize, 2 customize).
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p corpus/hook_body corpus/mutated_request
for f in ../test-fixtures/*/*/request.json; do
  hook=$(basename "$(dirname "$(dirname "$f")")")
  case "$hook" in sync) b='\x00' ;; finalize) b='\x01' ;; customize) b='\x02' ;; esac
  name=$(basename "$(dirname "$f")")
  { printf "$b"; cat "$f"; } > "corpus/hook_body/$hook-$name"
done
# One input per fixture for the structural target (its first choice picks it).
n=$(ls ../test-fixtures/*/*/request.json | wc -l)
for i in $(seq 0 $((n - 1))); do printf "\\x$(printf %02x $((i / 256)))\\x$(printf %02x $((i % 256)))" > "corpus/mutated_request/fixture-$i"; done
echo "seeded: $(ls corpus/hook_body | wc -l) hook_body, $(ls corpus/mutated_request | wc -l) mutated_request"

#!/usr/bin/env bash
# Rebuilds every fixture request and rewrites every expected answer. Scenarios form
# chains (a later state observes the hook's answer to an earlier one, at most seven
# deep), so the generator and the golden update alternate eight times; the result is
# deterministic. CI never runs this: read `git diff test-fixtures/` afterwards as a
# reviewer, since it is the product's behaviour changing.
set -euo pipefail
cd "$(dirname "$0")/.."
for _ in 1 2 3 4 5 6 7 8; do
  python3 test-fixtures/generate.py
  UPDATE_GOLDEN=1 cargo test -q --test golden >/dev/null
done
echo "fixtures regenerated; review them with: git diff test-fixtures/"

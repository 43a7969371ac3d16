#!/usr/bin/env bash
# Rebuilds every fixture request and rewrites every expected answer. Scenarios form
# chains (a later state observes the hook's answer to an earlier one, at most eleven
# deep), so the generator and the golden update alternate twelve times; the result is
# deterministic. CI never runs this: read `git diff test-fixtures/` afterwards as a
# reviewer, since it is the product's behaviour changing.
set -euo pipefail
cd "$(dirname "$0")/.."
# While the chain is still settling after a behaviour change, a later scenario may
# not find what it expects in an earlier answer yet: the generator may fail in the
# first rounds, but never in the last.
for round in 1 2 3 4 5 6 7 8 9 10 11 12; do
  if ! python3 test-fixtures/generate.py 2>/tmp/mysql-hook-generate.err; then
    if [ "$round" = 12 ]; then cat /tmp/mysql-hook-generate.err >&2; exit 1; fi
    echo "round $round: the generator stopped early ($(tail -n 1 /tmp/mysql-hook-generate.err)); going on" >&2
  fi
  UPDATE_GOLDEN=1 cargo test -q --test golden >/dev/null
done
echo "fixtures regenerated; review them with: git diff test-fixtures/"

#!/usr/bin/env bash
# Results do not change unless a change means them to: every command of
# tests/golden/commands.txt (the quickstart and the paper scenarios at
# their smallest GPU counts) must write the same bytes as its stored JSON.
# A change whose point is new results updates them, and says so:
#   tests/golden_test.sh build/shardsim . --update
# usage: tests/golden_test.sh SHARDSIM SOURCE_DIR [--update]
set -euo pipefail
bin=$(realpath "$1")
cd "$2"
update=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
while read -r name args; do
  case "$name" in ''|'#'*) continue ;; esac
  # shellcheck disable=SC2086  # args are words by design
  "$bin" $args --json "$tmp/$name.json" >/dev/null
  if [ "$update" = --update ]; then
    cp "$tmp/$name.json" "tests/golden/$name.json"
  elif ! cmp -s "$tmp/$name.json" "tests/golden/$name.json"; then
    echo "golden: $name differs from tests/golden/$name.json:" >&2
    diff "tests/golden/$name.json" "$tmp/$name.json" | head -20 >&2 || true
    failed=1
  fi
done <tests/golden/commands.txt
if [ "$update" = --update ]; then echo "golden: updated"; elif [ "$failed" = 0 ]; then echo "golden: every output as stored"; fi
exit "$failed"

#!/usr/bin/env bash
# The docs cannot drift from the program (ctest `docs`): every program
# output README.md and docs/*.md quote under a marker is what SHARDSIM
# prints now (docs/refresh --check), every glossary names the columns of
# the table it explains, every relative link resolves, every benchmark
# command named in docs/performance.md exists, no page tells history
# ("issue N", "session N"), and README.md stays under 20 KiB
# (docs/refresh --lint).
#
# usage: tests/docs_test.sh SHARDSIM REPO_ROOT
# On failure: run `docs/refresh --shardsim build/shardsim` from the
# repository root, read the diff (git diff README.md docs/), and fix the
# prose around what moved.
set -euo pipefail
shardsim=$(realpath "$1")
root=$(realpath "$2")
cd "$root"

fail=0
size=$(wc -c < README.md)
if [ "$size" -ge 20480 ]; then
  echo "FAIL: README.md is $size bytes; it must stay under 20480" >&2
  fail=1
fi

# Every docs/ link in README.md names a file that exists (also checked,
# with anchors, by --lint below; this one needs nothing but grep).
for target in $(grep -o '](docs/[^)#]*' README.md | sed 's/^](//' | sort -u); do
  if [ ! -e "$target" ]; then
    echo "FAIL: README.md links to $target, which does not exist" >&2
    fail=1
  fi
done

if ! python3 docs/refresh --check --lint --shardsim "$shardsim" \
    --root "$root"; then
  echo "FAIL: docs/refresh --check --lint" >&2
  fail=1
fi

[ "$fail" -eq 0 ] && echo "docs: OK"
exit "$fail"

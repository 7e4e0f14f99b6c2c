#!/usr/bin/env bash
# An installed build, moved elsewhere, finds its data from its own path:
# install into a temporary prefix (stripped: no source path left even in
# debug info), move the prefix, and from / run the quickstart at 16 GPUs.
# It must print the same rows as the build tree, and hold no path into the
# source tree's data (absl's flags keep their source file names, which
# nothing reads).
# usage: tests/install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/first" --strip >/dev/null
mv "$tmp/first" "$tmp/moved"
P=$tmp/moved
fail() { echo "install_test: $*" >&2; exit 1; }

[ -x "$P/bin/shardsim" ] || fail "no $P/bin/shardsim"
for d in platforms scenarios reports; do
  [ -d "$P/share/shardsim/$d" ] || fail "no $P/share/shardsim/$d"
done
for d in platforms scenarios reports; do
  if grep -q -a -F "$src/$d" "$P/bin/shardsim"; then
    fail "the installed binary names $src/$d"
  fi
done
"$P/bin/shardsim" --version | grep -q '^shardsim [0-9.]* (git ' ||
  fail "--version: $("$P/bin/shardsim" --version 2>&1)"

(cd / && "$P/bin/shardsim" run "$P/share/shardsim/scenarios/quickstart.textproto" \
   --gpus 16 --json "$tmp/installed.json" >"$tmp/installed.txt")
(cd / && "$build/shardsim" run "$src/scenarios/quickstart.textproto" \
   --gpus 16 --json "$tmp/tree.json" >"$tmp/tree.txt")
cmp "$tmp/installed.txt" "$tmp/tree.txt" || fail "the tables differ"
python3 - "$tmp/installed.json" "$tmp/tree.json" <<'PY' || fail "the JSON rows differ"
import json, sys
a, b = (json.load(open(f))["rows"] for f in sys.argv[1:])
sys.exit(0 if a == b and len(a) > 0 else 1)
PY
echo "install_test: ok ($(wc -l <"$tmp/tree.txt") lines, moved prefix, run from /)"

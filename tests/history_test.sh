#!/usr/bin/env bash
# The docs and code comments say what and why, never when: a reader has
# neither the project's work log nor its team folders. Fails naming every
# file:line, in the shipped docs, sources, data and tests, that cites a
# numbered work item (the word "issue" or "session" and a number) or a
# path into a folder beside the checkout (dot-dot, then "shared").
# A reference to another project's tracker is written as its URL
# (https://github.com/OWNER/REPO/issues/N), which does not match.
# usage: history_test.sh repo-root
set -u
root=$(realpath "${1:?usage: history_test.sh repo-root}")
cd "$root" || exit 1

# Each pattern is assembled from parts, so that this file's own text holds
# none of them and the test needs no exception for itself.
dot='\.'
updir="$dot$dot/"
pattern="(iss""ue|sess""ion) [0-9]|${updir}shared"

paths=(README.md CMakeLists.txt docs sim hw validate platforms scenarios
       reports tests .ci)
for p in "${paths[@]}"; do
  [ -e "$p" ] || { echo "FAIL: $root/$p is missing"; exit 1; }
done

# -I: binary files (figures, a gzipped trace) are skipped. -o with up to 40
# characters each side keeps a match on a very long table row readable.
hits=$(grep -rnIoiE --exclude-dir=__pycache__ ".{0,40}($pattern).{0,40}" \
       "${paths[@]}")
status=$?
if [ "$status" -gt 1 ]; then
  echo "FAIL: grep failed (exit $status)"
  exit 1
fi
if [ -n "$hits" ]; then
  echo "FAIL: history in docs or comments (say why, not when; cite other"
  echo "projects' trackers by URL; keep data in the repository):"
  printf '%s\n' "$hits"
  echo "$(printf '%s\n' "$hits" | cut -d: -f1,2 | sort -u | wc -l) line(s)"
  exit 1
fi
echo "PASS: no numbered work items or out-of-tree paths in ${paths[*]}"

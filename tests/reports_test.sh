#!/bin/bash
# Smoke test of reports/regenerate (registered as ctest "reports"):
#   tests/reports_test.sh SHARDSIM_BINARY REPO_ROOT
# Runs `reports/regenerate OUT --quick --shardsim BIN`, then checks every PNG
# (matplotlib.image.imread: non-empty, not a single colour), every PDF
# (starts with %PDF, > 1 KB) and that summary.md has markdown tables with
# numbers. Prints "reports: N passed, M failed"; exit 1 on any failure.
set -u
BIN=$(readlink -f "${1:?usage: reports_test.sh SHARDSIM REPO_ROOT}")
ROOT=$(readlink -f "${2:?usage: reports_test.sh SHARDSIM REPO_ROOT}")
OUT=$(mktemp -d "${TMPDIR:-/tmp}/reports_test.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3   # Debian's matplotlib

"$ROOT/reports/regenerate" "$OUT" --quick --shardsim "$BIN"
RC=$?

"$PY" - "$OUT" "$RC" <<'PYEOF'
import glob, os, re, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.image as mpimg

out, rc = sys.argv[1], int(sys.argv[2])
passed, failed = 0, 0
def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL: " + what)

check(rc == 0, "reports/regenerate exit status %d" % rc)
expected = ["paro_throughput", "paro_scaling", "lins_scaling", "breakdown",
            "paro_traffic_memory", "horing", "timeline"]
for stem in expected:
    for ext in ("png", "pdf"):
        check(os.path.exists(os.path.join(out, stem + "." + ext)),
              "missing %s.%s" % (stem, ext))
for png in sorted(glob.glob(os.path.join(out, "*.png"))):
    try:
        img = mpimg.imread(png)
        ok = img.size > 0 and img.shape[0] > 50 and img.shape[1] > 50 and \
            float(img.max()) > float(img.min())
        check(ok, "%s: empty or a single colour" % png)
    except Exception as e:
        check(False, "%s: %r" % (png, e))
for pdf in sorted(glob.glob(os.path.join(out, "*.pdf"))):
    with open(pdf, "rb") as f:
        head = f.read(4)
    check(head == b"%PDF" and os.path.getsize(pdf) > 1024,
          "%s: not a PDF or <= 1 KB" % pdf)
md = open(os.path.join(out, "summary.md")).read() \
    if os.path.exists(os.path.join(out, "summary.md")) else ""
check(bool(md), "summary.md missing or empty")
tables = re.findall(r"(?m)^\|---", md)
check(len(tables) >= 5, "summary.md: %d tables, want >= 5" % len(tables))
num_rows = [l for l in md.splitlines()
            if l.startswith("|") and re.search(r"\|\s*\d+(\.\d+)?%?\s*\|", l)]
check(len(num_rows) >= 10,
      "summary.md: %d table rows with numbers, want >= 10" % len(num_rows))
check("## Failures" not in md, "summary.md lists failures")
print("reports: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PYEOF

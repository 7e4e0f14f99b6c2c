#!/bin/bash
# Test of reports/regenerate and reports/plan_figure (ctest "reports"):
#   tests/reports_test.sh SHARDSIM_BINARY REPO_ROOT
# Runs `reports/regenerate OUT --quick --shardsim BIN`, then checks every PNG
# (matplotlib.image.imread: non-empty, not a single colour), every PDF
# (starts with %PDF, > 1 KB) and that summary.md has markdown tables with
# numbers. Then draws the figures again in this process, reading each one
# before it is saved, and checks what they say:
#   - colours: every bar or line of a strategy (or algorithm) has
#     palette.color's colour, the strategies of one figure have distinct
#     colours, and palette.py holds the only strategy-to-colour mapping;
#   - OOM: no out-of-memory point is drawn as a bar or a line point, and
#     each of paro_throughput's has its OOM marker;
#   - the breakdown draws the step less its compute, nothing of compute;
#   - no legend overlaps an axes, no title names a file, memory axes are in
#     GiB and the GPU's memory line sits at its datasheet value;
#   - plan_figure on a hand-made plan: front labels merged or apart, never
#     overlapping, and the memory cap drawn and labelled in GiB.
# Prints "reports: N passed, M failed"; exit 1 on any failure.
set -u
BIN=$(readlink -f "${1:?usage: reports_test.sh SHARDSIM REPO_ROOT}")
ROOT=$(readlink -f "${2:?usage: reports_test.sh SHARDSIM REPO_ROOT}")
OUT=$(mktemp -d "${TMPDIR:-/tmp}/reports_test.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3   # Debian's matplotlib

"$ROOT/reports/regenerate" "$OUT/files" --quick --shardsim "$BIN"
RC=$?

"$PY" - "$OUT" "$RC" "$BIN" "$ROOT" <<'PYEOF'
import collections, glob, importlib.machinery, importlib.util, json, os
import re, subprocess, sys
sys.dont_write_bytecode = True  # no __pycache__ in the checkout
import matplotlib
matplotlib.use("Agg")
import matplotlib.colors as mcolors
import matplotlib.image as mpimg
import matplotlib.pyplot as plt

tmp, rc, binary, root = sys.argv[1], int(sys.argv[2]), sys.argv[3], \
    sys.argv[4]
out = os.path.join(tmp, "files")
passed, failed = 0, 0
def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL: " + what)

# --- the files regenerate wrote ------------------------------------------
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

# --- one colour mapping ----------------------------------------------------
# palette.py's COLORS is the only place a strategy is given a colour: no
# other file of reports/ spells a strategy as a dict key, nor picks
# colours from a colour cycle by position.
reports = os.path.join(root, "reports")
for name in sorted(os.listdir(reports)):
    path = os.path.join(reports, name)
    if not os.path.isfile(path) or name == "palette.py" or \
            name.endswith((".md", ".png", ".pdf")):
        continue
    src = open(path).read()
    keys = re.findall(r'"(zero[123]|mics|zeropp|paro-[NIG]{3}|ring|horing)"'
                      r"\s*:", src)
    check(not keys, "reports/%s maps %s to something (colours belong in "
          "palette.py)" % (name, sorted(set(keys))))
    check("tab10" not in src and "strategy_colors(" not in src,
          "reports/%s colours by position in a cycle" % name)


def load(name):
    path = os.path.join(root, "reports", name)
    loader = importlib.machinery.SourceFileLoader(name, path)
    spec = importlib.util.spec_from_loader(name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


regen = load("regenerate")
palette = regen.palette
same = lambda a, b: mcolors.same_color(a, b)

# --- the figures, read as they are drawn -----------------------------------
# What stands for a number of a timed point: never drawn at an OOM point
# (memory and traffic are numbers there too: "mem", "memline", "traffic").
TIMED_KINDS = {"bar", "cause", "line", "gap"}
figs = {}  # stem -> {"gids": [(kind, name, where, artist, ax)], ...}


def read(fig, stem):
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    got = {"gids": [], "legends": [], "axes": [], "titles": [],
           "labels": [], "lines": [], "texts": []}
    if fig._suptitle is not None:
        got["titles"].append(fig._suptitle.get_text())
    for lg in fig.legends:
        got["legends"].append(lg.get_window_extent(r))
    for ax in fig.axes:
        if not ax.axison:
            continue
        got["axes"].append(ax.get_window_extent(r))
        got["titles"].append(ax.get_title())
        got["labels"] += [ax.get_xlabel(), ax.get_ylabel()]
        for child in ax.get_children():
            # a secondary axis (MFU beside tokens/s) has its own label
            if hasattr(child, "get_ylabel") and child is not ax:
                got["labels"].append(child.get_ylabel())
        if ax.get_legend() is not None:
            got["legends"].append(ax.get_legend().get_window_extent(r))
        got["texts"] += [t.get_text() for t in ax.texts]
        for a in list(ax.patches) + list(ax.lines) + list(ax.texts):
            gid = a.get_gid() or ""
            if gid == "memory-cap":
                got["lines"].append(a)
            parts = gid.split("|")
            if len(parts) == 3:
                got["gids"].append((parts[0], parts[1], parts[2], a, ax))
    figs[stem] = got


save = regen.Figures.save
def hooked(self, fig, stem, caption, right=1.0):
    read(fig, stem)
    return save(self, fig, stem, caption, right)
regen.Figures.save = hooked
sys.argv = ["regenerate", os.path.join(tmp, "again"), "--quick",
            "--shardsim", binary]
check(regen.main() == 0, "regenerate.main() in process failed")
check(sorted(figs) == sorted(expected),
      "figures drawn in process: %s" % sorted(figs))

rows = []  # every `run` row, for the OOM points
for f in glob.glob(os.path.join(tmp, "again", "json", "*.json")):
    d = json.load(open(f))
    if isinstance(d, dict) and "rows" in d:
        rows += [r for r in d["rows"] if "step_time_s" in r or r["oom"]]
oom = {(r["strategy"], "%s/%d" % (r["model"], r["gpus"]))
       for r in rows if r["oom"]}
# MiCS shards P, G and OS over one node's 8 GPUs only: LLaMA-65B's
# 65.3e9 parameters x (2 + 2 + 12) bytes / 8 = 130.6e9 bytes = 121.6 GiB
# per GPU > 80 GiB at any GPU count, so the quick run has OOM points.
check(("mics", "llama-65b/32") in oom,
      "no OOM point for mics at llama-65b/32: the OOM checks check nothing")

for stem, got in sorted(figs.items()):
    colours = collections.defaultdict(set)
    for kind, name, where, a, ax in got["gids"]:
        if kind in ("line", "gap", "memline", "alg", "bar", "traffic"):
            c = a.get_color() if kind in ("line", "gap", "memline") \
                else a.get_facecolor()
            check(same(c, palette.color(name)),
                  "%s: %s %s at %s is %s, palette says %s" % (
                      stem, kind, name, where, mcolors.to_hex(c),
                      palette.color(name)))
            colours[mcolors.to_hex(c)].add(name)
        if kind in TIMED_KINDS - {"line", "gap"}:
            check((name, where) not in oom,
                  "%s: OOM point %s at %s drawn as a %s" % (
                      stem, name, where, kind))
        if kind in ("line", "gap"):
            xs = set(a.get_xdata())
            bad = [w for s, w in oom if s == name and
                   w.split("/")[0] == where and int(w.split("/")[1]) in xs]
            check(not bad, "%s: line of %s has OOM points %s" % (
                stem, name, bad))
    shared = {c: n for c, n in colours.items()
              if len({palette.key(x) for x in n}) > 1}
    check(not shared, "%s: strategies sharing a colour: %s" % (stem, shared))
    for lg in got["legends"]:
        hit = [ax for ax in got["axes"] if lg.overlaps(ax)]
        check(not hit, "%s: a legend lies over an axes" % stem)
    for t in got["titles"]:
        check(not re.search(r"\.textproto|\.json|scenarios/|/tmp/", t),
              "%s: title names a file: %r" % (stem, t))
    for lab in got["labels"]:
        if "memory" in lab.lower():
            check("GiB" in lab and "(GB)" not in lab,
                  "%s: memory axis not in GiB: %r" % (stem, lab))

# Every OOM point of paro_throughput's scenarios has its marker there.
marked = {(n, w) for k, n, w, a, ax in figs["paro_throughput"]["gids"]
          if k == "oom"}
throughput_rows = {(r["strategy"], "%s/%d" % (r["model"], r["gpus"]))
                   for f in ("paro_throughput_7b", "paro_throughput_65b")
                   for r in json.load(open(os.path.join(
                       tmp, "again", "json", f + ".json")))["rows"]
                   if r["oom"]}
check(throughput_rows and marked == throughput_rows,
      "paro_throughput: OOM markers %s, OOM rows %s" % (
          sorted(marked), sorted(throughput_rows)))

# The breakdown's bars add up to the step less its compute: compute itself
# is not drawn.
byrow = {(r["strategy"], "%s/%d" % (r["model"], r["gpus"])): r
         for r in rows if r.get("breakdown")}
stacks = collections.defaultdict(float)
for k, n, w, a, ax in figs["breakdown"]["gids"]:
    if k == "cause":
        stacks[(n, w)] += a.get_height()
check(len(stacks) >= 3, "breakdown: %d stacks" % len(stacks))
for key, h in stacks.items():
    r = byrow[key]
    rest = r["step_time_s"] - r["breakdown"]["compute_s"]
    check(abs(h - rest) < 1e-6 * max(1, r["step_time_s"]),
          "breakdown %s: bars %.6f s, step less compute %.6f s" % (
              key, h, rest))

# The GPU's memory: platforms/gpus/a100_sxm4_80gb.textproto memory_bytes
# 85899345920 = 80 x 2^30, the A100/A800 80 GB datasheet's 80 GiB.
for stem in ("lins_scaling", "paro_traffic_memory"):
    caps = {float(l.get_ydata()[0]) for l in figs[stem]["lines"]}
    check(caps == {80.0}, "%s: memory cap lines at %s GiB" % (stem, caps))
    check(any("80 GiB" in t for t in figs[stem]["texts"]),
          "%s: the memory cap line has no '80 GiB' label" % stem)

# --- plan_figure on a hand-made plan -------------------------------------
GiB = 2 ** 30
def row(strategy, gib, tok, mbs=1, recompute=False):
    return {"strategy": strategy, "peak_memory_bytes": str(int(gib * GiB)),
            "tokens_per_gpu_per_s": tok, "settings": {
                "micro_batch_size": mbs, "micro_batches": 8,
                "recompute": recompute, "execution": {}}}
plan = {"scenario": "scenarios/quickstart.textproto", "gpus": 32,
        "memory_cap_bytes": str(60 * GiB),  # --memory-cap 60
        "candidates": 9, "filtered": 1, "pruned": 2, "simulated": 6,
        # 1 and 2 a few MiB apart (one label "1,2"); 3 and 4 apart.
        "pareto": [row("zero3", 10.0, 3000, recompute=True),
                   row("zero3", 10.001, 3000.5),
                   row("zeropp@both=horing", 20, 3500),
                   row("paro-NNG", 45, 4200)],
        "best": [row("paro-NNG", 45, 4200), row("paro-NIG", 50, 4150)],
        "presets": [row("zero3", 30, 3900), row("paro-NIG", 50, 4150),
                    row("fsdp:FULL_SHARD", 31, 3850)]}
pf = load("plan_figure")
fig = pf.draw(plan)
fig.canvas.draw()
r = fig.canvas.get_renderer()
ax = fig.axes[0]
labels = [t for t in ax.texts if t.get_gid() == "front-label"]
texts = sorted(t.get_text() for t in labels)
check(texts == ["1,2", "3", "4"], "plan_figure front labels %s, want "
      "['1,2', '3', '4']" % texts)
boxes = [t.get_window_extent(r) for t in labels]
check(not any(a.overlaps(b) for i, a in enumerate(boxes)
              for b in boxes[i + 1:]), "plan_figure: front labels overlap")
caps = [l for l in ax.lines if l.get_gid() == "memory-cap"]
check(len(caps) == 1 and float(caps[0].get_xdata()[0]) == 60.0,
      "plan_figure: no memory cap line at 60 GiB")
check(any("60 GiB" in t.get_text() for t in ax.texts),
      "plan_figure: the memory cap line has no '60 GiB' label")
check("GiB" in ax.get_xlabel(), "plan_figure: x label %r" % ax.get_xlabel())
check(not ax.get_legend().get_window_extent(r).overlaps(
    ax.get_window_extent(r)), "plan_figure: legend over the axes")
check("/" not in ax.get_title() and ".textproto" not in ax.get_title(),
      "plan_figure: title names a file: %r" % ax.get_title())
plt.close(fig)
# A cap far right of every point (a small model on an 80 GiB GPU) is named
# at the axes' edge rather than crushing the points against the left one.
small = dict(plan, memory_cap_bytes=str(80 * GiB),
             pareto=[row("zero3", 2.0, 3000), row("paro-NNG", 2.2, 4000)],
             best=[], presets=[])
fig = pf.draw(small)
ax = fig.axes[0]
check(ax.get_xlim()[1] < 10 and any(
    "80 GiB" in t.get_text() and t.get_gid() == "memory-cap"
    for t in ax.texts), "plan_figure: far cap: xlim %s, texts %s" % (
        ax.get_xlim(), [t.get_text() for t in ax.texts]))
plt.close(fig)
with open(os.path.join(tmp, "plan.json"), "w") as f:
    json.dump(plan, f)
p = subprocess.run([sys.executable, os.path.join(root, "reports",
                                                 "plan_figure"),
                    os.path.join(tmp, "plan.json"),
                    os.path.join(tmp, "plan.png")], stderr=subprocess.PIPE)
check(p.returncode == 0 and os.path.getsize(os.path.join(tmp, "plan.png"))
      > 1024, "plan_figure as a program: exit %d %s" % (
          p.returncode, p.stderr.decode()[-300:]))

print("reports: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PYEOF

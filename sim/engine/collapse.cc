#include "sim/engine/collapse.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "sim/engine/step_actors.h"
#include "sim/engine/step_order.h"
#include "sim/schedule/host_cost.h"
#include "sim/schedule/programs.h"

namespace shardsim {
namespace {

// a <= b up to rounding (a part in 1e10).
bool NotAfter(double a, double b) {
  return a <= b + 1e-12 + 1e-10 * std::max(std::abs(a), std::abs(b));
}

bool Near(double a, double b, double abs, double rel) {
  return std::abs(a - b) <= abs + rel * std::max(std::abs(a), std::abs(b));
}

// The same state up to the engine's rounding: ids and counts exactly,
// the rest to a part in 1e10, seconds to 1e-10 s and bytes to 1e-5 (a
// tenth of SimGrid's precision/timing, 1e-9 s by default, and its
// precision/work-amount: Configuring_SimGrid.rst, "Numerical Precision").
// The engine ends a flow up to 1e-9 s early, so a pipeline's stages,
// whose flows meet at another instant every block, drift by a few
// 1e-11 s a block where nothing else changes (a 4-stage, tp 8 step on 128
// GPUs: 1.5e-11 s on a 5 s step); their flows' bytes left then drift too
// (1 byte of 4.9 MB a block there), and the state is not let repeat: a
// drift that small still adds up over the dropped blocks (bytes let
// through at a part in 1e6 put a 24-layer LLaMA-2-70B step 1e-9 off).
bool SameState(const Snapshot& a, const Snapshot& b) {
  if (a.state.size() != b.state.size() || a.bytes.size() != b.bytes.size()) {
    return false;
  }
  for (size_t i = 0; i < a.state.size(); ++i) {
    if (!Near(a.state[i], b.state[i], 1e-10, 1e-10)) return false;
  }
  for (size_t i = 0; i < a.bytes.size(); ++i) {
    if (!Near(a.bytes[i], b.bytes[i], 1e-5, 1e-10)) return false;
  }
  return true;
}

// The first block j whose start state comes back at block j + 1's start,
// or -1. `snaps` are taken at blocks lo + 1, lo + 2, ...; the oldest op in
// flight must belong to a repeating block for the state to stand for the
// ones to come.
// Whether the start state at snaps[i] is that of snaps[i - m], the oldest
// op in flight in a repeating block (else the state stands for none to
// come).
bool ComesBack(const std::vector<Snapshot>& snaps, size_t i, int m,
               const Repeats& r) {
  return snaps[i].oldest >= r.BlockStart(r.lo + 1) && snaps[i - m].read &&
         snaps[i].read && SameState(snaps[i - m], snaps[i]);
}

int RepeatingBlock(const std::vector<Snapshot>& snaps, const Repeats& r) {
  for (size_t i = 1; i < snaps.size(); ++i) {
    if (ComesBack(snaps, i, 1, r)) return r.lo + static_cast<int>(i);
  }
  return -1;
}

// The fewest blocks m (2..kMaxCycle) after which the start state comes
// back, and in `settled` the first block whose state does; 0 if none. The
// stages' flows can fall into a cycle of several blocks (each block's NIC
// flows meeting the next stage's at another phase) where no block's start
// state is the next one's.
int CycleOf(const std::vector<Snapshot>& snaps, const Repeats& r,
            int* settled) {
  for (int m = 2; m <= kMaxCycle; ++m) {
    for (size_t i = m; i < snaps.size(); ++i) {
      if (ComesBack(snaps, i, m, r)) {
        *settled = r.lo + 1 + static_cast<int>(i) - m;
        return m;
      }
    }
  }
  return 0;
}

// The largest difference between the states of two snapshots, each
// entry's against its size; infinite where they differ in shape.
double Distance(const Snapshot& a, const Snapshot& b) {
  if (!a.read || !b.read || a.state.size() != b.state.size() ||
      a.bytes.size() != b.bytes.size()) {
    return std::numeric_limits<double>::infinity();
  }
  double d = 0;
  auto add = [&](const std::vector<double>& x, const std::vector<double>& y) {
    for (size_t i = 0; i < x.size(); ++i) {
      d = std::max(d,
                   std::abs(x[i] - y[i]) /
                       std::max(1.0, std::max(std::abs(x[i]), std::abs(y[i]))));
    }
  };
  add(a.state, b.state);
  add(a.bytes, b.bytes);
  return d;
}

// Whether the state is settling: the last three snapshots alike in shape,
// and the last step between them no larger than the one before.
bool Settling(const std::vector<Snapshot>& snaps) {
  const size_t n = snaps.size();
  if (n < 3) return false;
  const double before = Distance(snaps[n - 3], snaps[n - 2]);
  const double last = Distance(snaps[n - 2], snaps[n - 1]);
  return std::isfinite(before) && std::isfinite(last) && last <= before;
}

// A stream whose oldest op in flight falls further behind at every
// boundary: its backlog grows, and there is never a steady state.
bool BacklogGrows(const std::vector<Snapshot>& gpu) {
  bool growing = gpu.size() >= 3;
  for (size_t i = 1; growing && i < gpu.size(); ++i) {
    growing = gpu[i].oldest - gpu[i].at < gpu[i - 1].oldest - gpu[i - 1].at;
  }
  return growing;
}

// Why no state repeated within `blocks` micro-batches: a backlog that
// grows, or a state that did not settle in time.
std::string NoRepeatBecause(const Schedule& s, const std::vector<Snapshot>& gpu,
                            int blocks) {
  if (BacklogGrows(gpu)) {
    const Op& old = s.ops(gpu.back().oldest);
    return absl::StrCat("the ",
                        absl::AsciiStrToLower(Stream_Name(old.stream())),
                        " stream falls further behind at every micro-batch "
                        "(its backlog grows): no state repeats");
  }
  return absl::StrCat(
      "the state at a micro-batch boundary did not repeat within ", blocks,
      " micro-batches");
}

// The host's times from the GPU's, per op (host_start, host_end): what
// Replayer::Host does, as sums, each program's host apart. For a state
// that repeats on the GPU only, whose host times do not repeat.
std::vector<std::pair<double, double>> RecomputeHost(const StepOps& s,
                                                     const Platform& p,
                                                     const StepTimes& times) {
  const std::vector<double> cost = HostCosts(s, p);
  std::vector<double> hosts(std::max(1, s.base().programs_size()), 0);
  std::vector<std::pair<double, double>> out(s.size());
  for (int id = 0; id < s.size(); ++id) {
    double& host = hosts[s.op(id).program()];
    for (int w : s.host_waits(id)) host = std::max(host, times[w].end);
    out[id].first = host;
    host += cost[id];
    out[id].second = host;
  }
  return out;
}

// Whether the GPU times of `gpu` follow from the host times of `host`
// from op `from` on: each op starts when its deps and the op before it on
// its stream are done or, if later, when the host issues it; a compute op
// ends when its work is done or, if later, when the host has launched its
// last kernel. Returns the first op that does not, or -1.
int HostDisagrees(const StepOps& s, const StepTimes& gpu,
                  const std::vector<std::pair<double, double>>& host,
                  int from) {
  auto same = [](double a, double b) {
    return NotAfter(a, b) && NotAfter(b, a);
  };
  const std::vector<int> stream_prev = StreamPredecessors(s);
  for (int id = from; id < s.size(); ++id) {
    const Op& op = s.op(id);
    const int prev = stream_prev[id];
    const OpTime g = gpu[id];
    const auto [host_start, host_end] = host[id];
    double ready = prev >= 0 ? gpu[prev].end : 0;
    for (int d : s.deps(id)) ready = std::max(ready, gpu[d].end);
    const double issue = op.has_compute() ? host_start : host_end;
    bool ok = NotAfter(issue, g.start) &&
              (NotAfter(g.start, ready) || same(g.start, issue));
    if (op.has_compute()) {
      const double work_done = g.start + g.gpu_s;
      ok = ok && NotAfter(host_end, g.end) &&
           (same(g.end, work_done) || same(g.end, host_end));
    }
    if (!ok) return id;
  }
  return -1;
}

bool Before(const OpTime& t, double limit) {
  return t.start < limit && t.end < limit && t.host_start < limit &&
         t.host_end < limit;
}

}  // namespace

int KeptBlocks(const StepOps& step, const Repeats& r) {
  const int programs = step.base().programs_size();
  if (programs <= 1) return kKeptBlocks;
  return kKeptBlocks + (programs + r.stride - 1) / r.stride;
}

namespace {

// What a failed try shows the next one needs: `more` blocks kept (where
// the ops a far block repeats still ran when the tail began, enough for
// them to end first; where a pipeline's state did not repeat yet, as many
// again), or blocks of `cycle` blocks each, whose start states repeat
// from block `settled` on (CycleOf).
struct Retry {
  int more = 0;
  int cycle = 0;
  int settled = 0;
};

// `r`'s blocks taken m at a time: block lo's first op on, each m blocks
// (m * r.stride micro-batches); the last r.hi - lo + 1 mod m go to the
// tail. The step repeats with m blocks as it does with one.
Repeats BlocksOf(const Repeats& r, int m) {
  Repeats out = r;
  out.hi = r.lo + (r.hi - r.lo + 1) / m - 1;
  out.period_ops = m * r.period_ops;
  out.stride = m * r.stride;
  return out;
}

// One try at the collapse, with blocks keep + 1 .. r.hi dropped: the full
// step's times, or nullopt with the reason in `info` and in `next` what a
// second try would need.
absl::StatusOr<std::optional<StepTimes>> TryCollapse(
    const StepOps& step, const Repeats& r, int keep, Fabric* fabric,
    CollectiveEngine* collectives, StepReplay* info, Retry* next) {
  *next = Retry();
  const int P = r.period_ops;
  std::string why;
  std::optional<Shortened> cut = DropBlocks(step, r, keep, &why);
  if (!cut) {
    info->set_full_because(why);
    return std::nullopt;
  }
  std::vector<int> watch;
  for (int k = r.lo + 1; k <= keep + 1; ++k) watch.push_back(r.BlockStart(k));
  std::optional<Programs> programs;  // several: those of the shortened step
  if (step.base().programs_size() > 1) {
    absl::StatusOr<Programs> p = ReadPrograms(*cut->schedule, fabric->mesh());
    if (!p.ok()) return p.status();
    programs = *std::move(p);
  }
  Snapshots snaps;
  absl::StatusOr<std::vector<OpTime>> t =
      RunStepActors(*cut->schedule, programs ? &*programs : nullptr, fabric,
                    collectives, watch, &snaps);
  if (!t.ok()) return t.status();
  // What is read of the shortened step past the replay; the rest is let go
  // (a 64-stage pipeline keeps 10^6 ops).
  const int cut_size = cut->schedule->ops_size();
  const std::vector<int> pinned = std::move(cut->pinned);
  const std::string no_repeat =
      NoRepeatBecause(*cut->schedule, snaps.gpu, (keep - r.lo + 1) * r.stride);
  cut.reset();
  programs.reset();
  // The state repeats at the host where the host waits for the GPU in every
  // block. Where it runs ahead, its lead grows and the state repeats on the
  // GPU only: the GPU's times then repeat alone, and the host's are summed
  // anew, which is exact if the host never held the GPU back (checked).
  int j = RepeatingBlock(snaps.host, r);
  const bool on_gpu = j < 0;
  if (on_gpu) j = RepeatingBlock(snaps.gpu, r);
  if (j < 0) {
    info->set_full_because(no_repeat);
    // A state that comes back every few blocks repeats in blocks of that
    // many.
    next->cycle = CycleOf(snaps.host, r, &next->settled);
    if (next->cycle == 0) next->cycle = CycleOf(snaps.gpu, r, &next->settled);
    // A pipeline's state that is settling (its last stage's part of a
    // block not yet in the repeating ones, KeptBlocks; a queue still
    // filling) may repeat within twice the blocks. One whose flows meet at
    // another phase every block does not: keeping twice the blocks found
    // no repeating state in any of 26 such tries of a sweep of pipelines
    // (1F1B and interleaved, tp, cp, 2 to 8 stages, 32 and 64
    // micro-batches), each costing more than half a full replay.
    if (next->cycle == 0 && step.base().programs_size() > 1 &&
        !BacklogGrows(snaps.gpu) &&
        (Settling(snaps.host) || Settling(snaps.gpu))) {
      next->more = keep - r.lo;
    }
    return std::nullopt;
  }
  const std::vector<Snapshot>& at = on_gpu ? snaps.gpu : snaps.host;
  const double period = at[j - r.lo].time - at[j - r.lo - 1].time;
  // When the tail begins: the host issues its first op, or, with the host
  // set aside, the first of its ops starts on the GPU.
  double tail_start = snaps.host.back().time;
  if (on_gpu) {
    tail_start = std::numeric_limits<double>::infinity();
    for (int y = r.BlockStart(keep + 1); y < cut_size; ++y) {
      tail_start = std::min(tail_start, (*t)[y].start);
    }
  }
  // Ops standing for others must be done before the tail can touch them.
  const int near = r.BlockStart(j + 1);  // ops before it stand for themselves
                                         // or (block j) for far blocks
  int late = -1;  // the last of them to end, if after the tail began
  for (int x = 0; x < near; ++x) {
    if (!Before((*t)[x], tail_start) &&
        (late < 0 || (*t)[x].end > (*t)[late].end)) {
      late = x;
    }
  }
  if (late >= 0) {
    info->set_full_because(absl::StrCat(
        "op ", late, " (", step.op(late).label(),
        ") still runs when the tail begins: the repeating state needs "
        "more micro-batches before the tail"));
    // Each block kept more starts the tail a period later.
    if (period > 0) {
      next->more = 1 + static_cast<int>(
                           std::ceil(((*t)[late].end - tail_start) / period));
    }
    return std::nullopt;
  }
  for (int p : pinned) {
    if ((*t)[p].end > tail_start) {
      info->set_full_because(absl::StrCat("the tail waits for op ", p,
                                          ", not done when it begins"));
      return std::nullopt;
    }
  }
  // Expand (replay.h): before block j + 1 as simulated; far blocks repeat
  // block j; the last keep - j blocks and the tail are the simulated ones,
  // later by the dropped blocks.
  const int dropped = r.hi - keep;
  StepTimes::Repeat repeat;
  repeat.near_end = r.BlockStart(j + 1);
  repeat.far_end = r.BlockStart(r.hi - (keep - j) + 1);
  repeat.first_op = r.first_op;
  repeat.period_ops = P;
  repeat.lo = r.lo;
  repeat.first_repeated = j;
  repeat.dropped = dropped;
  repeat.period_s = period;
  StepTimes times(*std::move(t), step.size(), repeat);
  if (on_gpu) {
    // The host's times do not repeat: every op's summed anew.
    std::vector<std::pair<double, double>> host =
        RecomputeHost(step, fabric->platform(), times);
    if (const int x = HostDisagrees(step, times, host, r.BlockStart(j + 1));
        x >= 0) {
      info->set_full_because(absl::StrCat(
          "the state repeats on the GPU only, and the host issues op ", x, " (",
          step.op(x).label(), ") at another point of it in the full step"));
      return std::nullopt;
    }
    times.SetHostTimes(std::move(host));
  }
  info->set_collapsed(true);
  info->set_full_because("");
  info->set_period_s(period);
  info->set_micro_batches_simulated(info->micro_batches() - dropped * r.stride);
  return times;
}

}  // namespace

absl::StatusOr<std::optional<StepTimes>> ReplayCollapsed(
    const StepOps& step, const Repeats& r, Fabric* fabric,
    CollectiveEngine* collectives, StepReplay* info) {
  Repeats by = r;
  int keep = r.lo + KeptBlocks(step, r);
  bool cycled = false;
  // Up to three tries: each more keeps as many blocks as the one before
  // showed it needs, or takes the blocks of a cycle it found together
  // (once).
  for (int tries = 1;; ++tries) {
    Retry next;
    absl::StatusOr<std::optional<StepTimes>> t =
        TryCollapse(step, by, keep, fabric, collectives, info, &next);
    if (!t.ok() || *t || tries == 3) return t;
    if (next.cycle > 1 && !cycled) {
      cycled = true;
      by = BlocksOf(r, next.cycle);
      // Blocks of the cycle from its first whose start state repeats.
      const int settled =
          by.lo + (next.settled - r.lo + next.cycle - 1) / next.cycle;
      keep = std::max(by.lo + KeptBlocks(step, by), settled + 1);
    } else if (next.more > 0) {
      keep += next.more;
    } else {
      return t;
    }
    if (keep >= by.hi) return t;
  }
}

}  // namespace shardsim

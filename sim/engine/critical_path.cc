// The critical path (replay.h, CriticalPathBreakdown): walked back from the
// op that ends last, each second of it charged to one cause. A pipeline's
// (several programs) is the busiest stage's: its own ops, and the time it
// waits on the others (the bubble).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "sim/engine/replay.h"
#include "sim/engine/step_order.h"
#include "sim/schedule/lower.h"

namespace shardsim {
namespace {

const char* kShort[] = {"?", "AG", "RS", "AR", "BC"};

class PathWalk {
 public:
  PathWalk(const StepOps& s, StepTimes* t)
      : s_(s),
        t_(*t),
        stream_prev_(StreamPredecessors(s)),
        host_prev_(HostPredecessors(s)),
        busiest_(BusiestProgram()) {}

  Breakdown Walk() {
    const int last = t_.LastToEnd();
    double t = last >= 0 ? t_[last].end : 0;
    // Several programs: the walk is the busiest stage's, from its own last
    // op; its GPUs wait through the rest of the step.
    int cur = busiest_ >= 0 ? LastOfBusiest() : last;
    if (cur >= 0 && cur != last) Bubble(last, At(cur).end, &t);
    while (cur >= 0 && t > kEps) {
      SkipRepeats(&cur, &t);
      const Op& op = s_.op(cur);
      const OpTime ot = At(cur);
      // What let it start: the latest of its GPU predecessors, or the host;
      // and the latest of those on its own program.
      int pred = -1, own = -1;
      auto consider = [&](int d) {
        if (pred < 0 || At(d).end > At(pred).end) pred = d;
        if (s_.op(d).program() == op.program() &&
            (own < 0 || At(d).end > At(own).end)) {
          own = d;
        }
      };
      for (int d : s_.deps(cur)) consider(d);
      if (const int sp = stream_prev_[cur]; sp >= 0) consider(sp);
      const double issue = op.has_compute() ? ot.host_start : ot.host_end;
      const bool by_host = pred < 0 || issue > At(pred).end + kEps;
      Charge(cur, std::min(ot.start, t), t, by_host);
      t = std::min(ot.start, t);
      if (!by_host && own != pred) {
        // It waited for another stage's send: the busiest stage idles
        // back to its own op before, or to the step's start.
        Bubble(pred, own >= 0 ? At(own).end : 0.0, &t);
        cur = own;
        continue;
      }
      if (!by_host) {
        Gap(At(pred).end, &t);
        cur = pred;
        continue;
      }
      // Started when the host issued it: a collective's call came first.
      if (!op.has_compute()) {
        Host(cur, ot.host_start, &t);
      }
      cur = HostChain(cur, &t);
    }
    if (t > kEps) b_.set_launch_overhead_s(b_.launch_overhead_s() + t);
    for (const auto& [name, seconds] : by_collective_) {
      ExposedCollective* e = b_.add_by_collective();
      e->set_collective(name);
      e->set_seconds(seconds);
    }
    for (const auto& [rank, seconds] : by_straggler_) {
      Stragglers::Wait* w = b_.mutable_waited_on()->add_waits();
      w->set_rank(rank);
      w->set_seconds(seconds);
    }
    return b_;
  }

 private:
  // Where the walk entered a block of a collapsed step's far blocks.
  struct Entry {
    int block = 0;  // blocks past Repeat::lo
    int at = 0;     // the op, from the block's first
    double t = 0;   // the time, from the block's period
    Breakdown b;    // charged so far
    std::map<std::string, double> by_collective;
    std::map<int, double> by_straggler;
    size_t marks = 0;  // Mark calls so far
  };

  // A time of the walk: it remembers the lowest op it read.
  OpTime At(int id) {
    lowest_ = std::min(lowest_, id);
    return t_[id];
  }

  // A collapsed step's far blocks (StepTimes::Repeat) have one block's
  // times, a period later each. The walk is a function of the op it is
  // on, its time and the times before them, so where it enters two of
  // those blocks one after the other at the same op and time of each, it
  // crosses the blocks below the same way for as long as what it reads
  // lies in them. Those crossings are charged and marked as the one
  // walked, and skipped: the walk costs the simulated blocks, not the
  // step's.
  void SkipRepeats(int* cur, double* t) {
    const std::optional<StepTimes::Repeat>& r = t_.repeat();
    if (!r || skipped_ || *cur < r->near_end || *cur >= r->far_end) return;
    const int P = r->period_ops;
    const int block = (*cur - r->first_op) / P;
    if (entered_ && entered_->block == block) return;
    const int shift = r->lo + block - r->first_repeated;
    Entry now{block,
              *cur - r->first_op - block * P,
              *t - shift * r->period_s,
              b_,
              by_collective_,
              by_straggler_,
              marks_.size()};
    // The lowest op read since the last entry, and so in the blocks
    // below by each crossing like it.
    const int lowest = std::exchange(lowest_, *cur);
    if (entered_ && entered_->block == block + 1 && entered_->at == now.at &&
        std::abs(entered_->t - now.t) <=
            1e-12 + 1e-10 * std::max(std::abs(entered_->t), std::abs(now.t))) {
      const int crossings = (lowest - r->near_end) / P;
      if (crossings >= 1) {
        Recross(*entered_, now, crossings);
        *cur -= crossings * P;
        *t -= crossings * r->period_s;
        return;
      }
    }
    entered_ = std::move(now);
  }

  // The crossing from `from` to `to` (one block down) `n` times more.
  void Recross(const Entry& from, const Entry& to, int n) {
    skipped_ = true;  // marks_ is read from here on, not added to
    const int P = t_.repeat()->period_ops;
    for (int k = 1; k <= n; ++k) {
      for (size_t i = from.marks; i < to.marks; ++i) {
        Mark(marks_[i].first - k * P, marks_[i].second);
      }
    }
    const google::protobuf::Descriptor* d = b_.GetDescriptor();
    const google::protobuf::Reflection* fields = b_.GetReflection();
    for (int i = 0; i < d->field_count(); ++i) {
      const google::protobuf::FieldDescriptor* f = d->field(i);
      if (f->is_repeated() ||
          f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE) {
        continue;
      }
      const double per =
          fields->GetDouble(to.b, f) - fields->GetDouble(from.b, f);
      // A cause the step never had stays unset (the optional ones).
      if (per == 0 && f->has_presence() && !fields->HasField(b_, f)) continue;
      fields->SetDouble(&b_, f, fields->GetDouble(b_, f) + n * per);
    }
    Extend(from.by_collective, n, &by_collective_);
    Extend(from.by_straggler, n, &by_straggler_);
  }

  // Each entry of `now` grows n times more by what it grew since `before`.
  template <typename Key>
  static void Extend(const std::map<Key, double>& before, int n,
                     std::map<Key, double>* now) {
    for (auto& [key, seconds] : *now) {
      const auto was = before.find(key);
      seconds += n * (seconds - (was == before.end() ? 0.0 : was->second));
    }
  }

  // Host time on the path: launching kernels or calling a collective.
  void Host(int id, double from, double* t) {
    if (*t > from) {
      b_.set_launch_overhead_s(b_.launch_overhead_s() + (*t - from));
      Mark(id, "launch overhead");
      *t = from;
    }
  }

  // From the host's start on op `id` at *t, back along the host's chain
  // until an op the host waited for; returns that op, or -1 at the start.
  // With several programs, the chain of op `id`'s program's host.
  int HostChain(int id, double* t) {
    for (int h = id; h >= 0;) {
      int wait = -1;
      for (int w : s_.host_waits(h)) {
        if (wait < 0 || At(w).end > At(wait).end) wait = w;
      }
      if (wait >= 0 && At(wait).end >= At(h).host_start - kEps) {
        Gap(At(wait).end, t);
        return wait;
      }
      const int before = host_prev_.empty() ? h - 1 : host_prev_[h];
      if (before < 0) break;
      // The host was busy with the op before.
      Host(before, At(before).host_start, t);
      h = before;
    }
    return -1;
  }

  // The busiest stage idle from `from` to *t, waiting on op `on` of
  // another stage (its send, or the step's last op).
  void Bubble(int on, double from, double* t) {
    if (*t > from) {
      b_.set_pipeline_bubble_s(b_.pipeline_bubble_s() + (*t - from));
      Mark(on, "pipeline bubble");
    }
    *t = std::min(*t, from);
  }

  // The busiest program's op that ends last.
  int LastOfBusiest() {
    int out = -1;
    for (int id = 0; id < s_.size(); ++id) {
      if (s_.op(id).program() != busiest_) continue;
      if (out < 0 || At(id).end > At(out).end) out = id;
    }
    return out;
  }

  // Time between a predecessor's end and *t that nothing accounts for.
  void Gap(double end, double* t) {
    if (*t > end + kEps) {
      b_.set_launch_overhead_s(b_.launch_overhead_s() + (*t - end));
    }
    *t = std::min(*t, end);
  }

  // The first cause an op is marked with stays. Every mark is kept for
  // SkipRepeats, those that change nothing too: a crossing repeated marks
  // as the walk would, whatever the crossings before it marked.
  void Mark(int id, const char* cause) {
    if (t_.repeat() && !skipped_) marks_.emplace_back(id, cause);
    if (t_.cause(id).empty()) t_.set_cause(id, cause);
  }

  // Charges op `id`'s time in [from, to].
  void Charge(int id, double from, double to, bool by_host) {
    const double d = to - from;
    if (d <= 0) return;
    const Op& op = s_.op(id);
    const OpTime ot = At(id);
    if (op.has_compute() && OnHostSide(op)) {
      b_.set_offload_s(b_.offload_s() + d);
      Mark(id, "offload");
      return;
    }
    if (op.has_compute()) {
      const double whole = ot.end - ot.start;
      const double scale = whole > 0 ? d / whole : 0;
      // A degraded GPU's kernels: what the platform's own GPU would take
      // is compute, the rest the straggler's.
      const double extra =
          ot.straggler_rank >= 0 ? std::max(0.0, ot.base_s - ot.nominal_s) : 0;
      const double base = (ot.base_s - extra) * scale;
      const double straggler = extra * scale;
      const double slow = std::max(0.0, ot.gpu_s - ot.base_s) * scale;
      const double host = std::max(0.0, d - base - straggler - slow);
      if (straggler > 0) {
        b_.set_straggler_s(b_.straggler_s() + straggler);
        by_straggler_[ot.straggler_rank] += straggler;
      }
      // The update's GPU work (the optimizer, and the overflow check and
      // gradient norm before it) is the optimizer's time; its host side
      // (offload) was counted above.
      if (op.phase() == UPDATE) {
        b_.set_optimizer_s(b_.optimizer_s() + base);
        Mark(id, "optimizer");
      } else {
        b_.set_compute_s(b_.compute_s() + base);
        Mark(id, "compute");
      }
      b_.set_compute_slowdown_s(b_.compute_slowdown_s() + slow);
      b_.set_launch_overhead_s(b_.launch_overhead_s() + host);
      return;
    }
    if (op.has_send()) {
      // A wait on another program's send: moving its bytes, or latency.
      by_collective_[absl::StrCat("SEND ", op.send().tensor())] += d;
      b_.set_point_to_point_s(b_.point_to_point_s() + d);
      Mark(id, "point-to-point");
      return;
    }
    if (!op.has_collective()) return;
    const CollectiveCall& c = op.collective();
    by_collective_[absl::StrCat(kShort[c.op()], " ", c.tensor())] += d;
    // A model-parallel group's collective: tensor (and sequence)
    // parallelism's, or context parallelism's ring.
    if (c.dimension() == "tp") {
      b_.set_tensor_parallel_s(b_.tensor_parallel_s() + d);
      Mark(id, "tensor parallel");
    } else if (c.dimension() == "cp") {
      b_.set_context_parallel_s(b_.context_parallel_s() + d);
      Mark(id, "context parallel");
    } else if (by_host && op.limited_by() == PREFETCH_LIMIT) {
      b_.set_prefetch_wait_s(b_.prefetch_wait_s() + d);
      Mark(id, "waiting on prefetch");
    } else if (by_host && op.limited_by() == MEMORY_LIMIT) {
      b_.set_prefetch_depth_s(b_.prefetch_depth_s() + d);
      Mark(id, "memory-limited prefetch depth");
    } else {
      const double latency = std::min(d, ot.latency_s);
      b_.set_latency_s(b_.latency_s() + latency);
      b_.set_bandwidth_s(b_.bandwidth_s() + d - latency);
      Mark(id, d - latency > latency ? "bandwidth" : "latency");
    }
  }

  // Several programs: the one whose compute ops run longest, the pipeline
  // stage that bounds the step; -1 for one program.
  int BusiestProgram() const {
    if (host_prev_.empty()) return -1;
    std::vector<double> busy;
    for (int id = 0; id < s_.size(); ++id) {
      const Op& op = s_.op(id);
      if (!op.has_compute()) continue;
      if (op.program() >= static_cast<int>(busy.size())) {
        busy.resize(op.program() + 1, 0);
      }
      busy[op.program()] += t_[id].end - t_[id].start;
    }
    if (busy.size() < 2) return -1;
    return static_cast<int>(std::max_element(busy.begin(), busy.end()) -
                            busy.begin());
  }

  const StepOps& s_;
  StepTimes& t_;
  std::vector<int> stream_prev_;
  std::vector<int> host_prev_;  // several programs only (HostPredecessors)
  const int busiest_;
  Breakdown b_;
  std::map<std::string, double> by_collective_;
  std::map<int, double> by_straggler_;  // Stragglers, by rank
  // For SkipRepeats: the last far block entered, the lowest op read since,
  // and every Mark call, in order, until it skips.
  std::optional<Entry> entered_;
  int lowest_ = std::numeric_limits<int>::max();
  std::vector<std::pair<int, const char*>> marks_;
  bool skipped_ = false;
};

}  // namespace

Breakdown CriticalPathBreakdown(const StepOps& ops, StepTimes* times) {
  return PathWalk(ops, times).Walk();
}

}  // namespace shardsim

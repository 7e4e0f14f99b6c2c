#include "sim/engine/replay.h"

#include <algorithm>
#include <map>
#include <memory>

#include <simgrid/s4u.hpp>

#include "absl/strings/str_cat.h"
#include "sim/compute/kernel_time.h"

namespace sg4 = simgrid::s4u;

namespace shardsim {
namespace {

// Times closer than this are the same instant (floating-point sums).
constexpr double kEps = 1e-12;

int Launches(const ComputeOp& op) {
  int n = 0;
  for (const Kernel& k : op.kernels()) {
    n += k.has_memory() ? std::max(1, k.memory().launches()) : 1;
  }
  return n;
}

// One actor for the host and one per stream: a stream's ops run in order,
// each once the host has issued it and its deps are done. Waiting is on one
// condition variable, notified whenever anything another actor waits for
// changes (an op issued or done, a collective starting or ending).
class Replayer {
 public:
  Replayer(const Schedule& s, Fabric* f, CollectiveEngine* c)
      : schedule_(s), fabric_(f), collectives_(c),
        issued_(s.ops_size(), false),
        done_(s.ops_size(), false),
        cost_(s.ops_size()),
        times_(s.ops_size()),
        by_stream_(Stream_ARRAYSIZE),
        mutex_(sg4::Mutex::create()),
        changed_(sg4::ConditionVariable::create()) {
    const Platform& p = fabric_->platform();
    for (const Op& op : s.ops()) {
      by_stream_[op.stream()].push_back(op.id());
      if (op.has_compute()) {
        cost_[op.id()] = ComputeOpCost(op.compute(), p);
        times_[op.id()].base_s = cost_[op.id()].seconds;
      }
    }
  }

  void Start() {
    sg4::Actor::create("host", fabric_->gpu(0), [this] { Host(); });
    for (int stream = 0; stream < Stream_ARRAYSIZE; ++stream) {
      if (by_stream_[stream].empty()) continue;
      sg4::Actor::create(absl::StrCat("stream", stream), fabric_->gpu(0),
                         [this, stream] { RunStream(stream); });
    }
  }

  int completed() const { return completed_; }

  StepTiming Finish() {
    StepTiming t;
    for (const OpTime& o : times_) t.step_time_s = std::max(t.step_time_s, o.end);
    for (int id : by_stream_[COMPUTE]) {
      t.compute_busy_s += times_[id].end - times_[id].start;
    }
    t.ops = std::move(times_);
    t.breakdown = CriticalPathBreakdown(schedule_, &t.ops);
    return t;
  }

 private:
  double Now() const { return sg4::Engine::get_clock(); }

  // The host issues the ops in order: waits, then launch costs.
  void Host() {
    const Platform& p = fabric_->platform();
    for (const Op& op : schedule_.ops()) {
      {
        std::unique_lock<sg4::Mutex> lock(*mutex_);
        for (int w : op.host_waits()) {
          while (!done_[w]) changed_->wait(lock);
        }
      }
      OpTime& t = times_[op.id()];
      t.host_start = Now();
      double cost = 0;
      if (op.has_compute()) {
        cost = Launches(op.compute()) * p.kernels().host_launch_s();
        t.host_end = t.host_start + cost;
        Issue(op.id());  // the GPU may start on the first kernel
        if (cost > 0) sg4::this_actor::sleep_for(cost);
      } else {
        if (op.has_collective()) cost = op.collective().launch_overhead_s();
        if (cost > 0) sg4::this_actor::sleep_for(cost);
        t.host_end = Now();
        Issue(op.id());
      }
    }
  }

  void Issue(int id) {
    issued_[id] = true;
    changed_->notify_all();
  }

  bool Ready(int id) const {
    if (!issued_[id]) return false;
    for (int d : schedule_.ops(id).deps()) {
      if (!done_[d]) return false;
    }
    return true;
  }

  void RunStream(int stream) {
    for (int id : by_stream_[stream]) {
      {
        std::unique_lock<sg4::Mutex> lock(*mutex_);
        while (!Ready(id)) changed_->wait(lock);
      }
      Execute(id);
    }
  }

  // Collectives hold SMs; a compute op slows by the share they hold.
  double Slowdown(const OpCost& c) const {
    if (c.seconds <= 0 || comm_sms_ == 0) return 0;
    const Platform& p = fabric_->platform();
    const double held = std::min(1.0, static_cast<double>(comm_sms_) / p.gpu().sms());
    const Interference& in = p.interference();
    return held *
           (c.compute_bound_s * in.compute_slowdown() +
            c.memory_bound_s * in.memory_slowdown()) /
           c.seconds;
  }

  void SetComputeBusy(bool busy) {
    const double scale =
        busy ? fabric_->platform().interference().nvlink_under_compute() : 1;
    if (scale != nvlink_scale_) {
      nvlink_scale_ = scale;
      fabric_->SetNvlinkScale(scale, collectives_->node_symmetry());
    }
  }

  void RunCompute(int id) {
    const OpCost& c = cost_[id];
    SetComputeBusy(true);
    double remaining = c.seconds;  // seconds of work alone
    std::unique_lock<sg4::Mutex> lock(*mutex_);
    while (remaining > kEps) {
      const double rate = 1 / (1 + Slowdown(c));
      const double t0 = Now();
      const std::cv_status s = changed_->wait_for(lock, remaining / rate);
      if (s == std::cv_status::timeout) break;
      remaining -= (Now() - t0) * rate;
    }
    lock.unlock();
    times_[id].gpu_s = Now() - times_[id].start;
    SetComputeBusy(false);
    // The host may still be launching its last kernels.
    if (Now() < times_[id].host_end) sg4::this_actor::sleep_until(times_[id].host_end);
  }

  void Execute(int id) {
    const Op& op = schedule_.ops(id);
    OpTime& t = times_[id];
    t.start = Now();
    switch (op.body_case()) {
      case Op::kCompute:
        RunCompute(id);
        break;
      case Op::kCollective: {
        const int sms = fabric_->platform().interference().collective_sms();
        comm_sms_ += sms;
        changed_->notify_all();
        t.latency_s = collectives_->Run(op.collective()).latency_s;
        comm_sms_ -= sms;
        break;
      }
      default:  // memory bookkeeping takes no time
        break;
    }
    t.end = Now();
    ++completed_;
    done_[id] = true;
    changed_->notify_all();
  }

  const Schedule& schedule_;
  Fabric* fabric_;
  CollectiveEngine* collectives_;
  std::vector<bool> issued_;
  std::vector<bool> done_;
  std::vector<OpCost> cost_;
  std::vector<OpTime> times_;
  std::vector<std::vector<int>> by_stream_;  // op ids, in order
  sg4::MutexPtr mutex_;
  sg4::ConditionVariablePtr changed_;
  int comm_sms_ = 0;  // SMs held by the collectives in flight
  double nvlink_scale_ = 1;
  int completed_ = 0;
};

// ---- the critical path ----

const char* kShort[] = {"?", "AG", "RS", "AR", "BC"};

class PathWalk {
 public:
  PathWalk(const Schedule& s, std::vector<OpTime>* t) : s_(s), t_(*t) {
    std::vector<int> last(Stream_ARRAYSIZE, -1);
    stream_prev_.assign(s.ops_size(), -1);
    for (const Op& op : s.ops()) {
      stream_prev_[op.id()] = last[op.stream()];
      last[op.stream()] = op.id();
    }
  }

  Breakdown Walk() {
    int cur = -1;
    for (int i = 0; i < s_.ops_size(); ++i) {
      if (cur < 0 || t_[i].end >= t_[cur].end) cur = i;
    }
    double t = cur >= 0 ? t_[cur].end : 0;
    while (cur >= 0 && t > kEps) {
      const Op& op = s_.ops(cur);
      const OpTime& ot = t_[cur];
      // What let it start: the latest of its GPU predecessors, or the host.
      int pred = -1;
      for (int d : op.deps()) {
        if (pred < 0 || t_[d].end > t_[pred].end) pred = d;
      }
      const int sp = stream_prev_[cur];
      if (sp >= 0 && (pred < 0 || t_[sp].end > t_[pred].end)) pred = sp;
      const double issue = op.has_compute() ? ot.host_start : ot.host_end;
      const bool by_host =
          pred < 0 || issue > t_[pred].end + kEps;
      Charge(cur, std::min(ot.start, t), t, by_host);
      t = std::min(ot.start, t);
      if (!by_host) {
        Gap(t_[pred].end, &t);
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
    return b_;
  }

 private:
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
  int HostChain(int id, double* t) {
    for (int h = id; h >= 0; --h) {
      const Op& op = s_.ops(h);
      int wait = -1;
      for (int w : op.host_waits()) {
        if (wait < 0 || t_[w].end > t_[wait].end) wait = w;
      }
      if (wait >= 0 && t_[wait].end >= t_[h].host_start - kEps) {
        Gap(t_[wait].end, t);
        return wait;
      }
      if (h == 0) break;
      // The host was busy with the op before.
      Host(h - 1, t_[h - 1].host_start, t);
    }
    return -1;
  }

  // Time between a predecessor's end and *t that nothing accounts for.
  void Gap(double end, double* t) {
    if (*t > end + kEps) {
      b_.set_launch_overhead_s(b_.launch_overhead_s() + (*t - end));
    }
    *t = std::min(*t, end);
  }

  void Mark(int id, const char* cause) {
    if (t_[id].cause.empty()) t_[id].cause = cause;
  }

  // Charges op `id`'s time in [from, to].
  void Charge(int id, double from, double to, bool by_host) {
    const double d = to - from;
    if (d <= 0) return;
    const Op& op = s_.ops(id);
    const OpTime& ot = t_[id];
    if (op.has_compute()) {
      const double whole = ot.end - ot.start;
      const double scale = whole > 0 ? d / whole : 0;
      const double base = ot.base_s * scale;
      const double slow = std::max(0.0, ot.gpu_s - ot.base_s) * scale;
      const double host = std::max(0.0, d - base - slow);
      if (op.compute().kind() == "optimizer") {
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
    if (!op.has_collective()) return;
    const CollectiveCall& c = op.collective();
    by_collective_[absl::StrCat(kShort[c.op()], " ", c.tensor())] += d;
    if (by_host && op.limited_by() == PREFETCH_LIMIT) {
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

  const Schedule& s_;
  std::vector<OpTime>& t_;
  std::vector<int> stream_prev_;
  Breakdown b_;
  std::map<std::string, double> by_collective_;
};

}  // namespace

Breakdown CriticalPathBreakdown(const Schedule& schedule,
                                std::vector<OpTime>* times) {
  return PathWalk(schedule, times).Walk();
}

absl::StatusOr<StepTiming> ReplayStep(const Schedule& schedule, Fabric* fabric,
                                      CollectiveEngine* collectives) {
  for (const Op& op : schedule.ops()) {
    if (op.body_case() != Op::kCollective) continue;
    if (absl::Status s = collectives->Prepare(op.collective()); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule op ", op.id(), " (", op.label(), "): ",
                       s.message()));
    }
  }
  // Every GPU runs this same program; node symmetry holds when every plan
  // is symmetric across nodes too (collective_engine.h).
  collectives->set_node_symmetry(collectives->AllIntraSymmetric());
  Replayer replayer(schedule, fabric, collectives);
  replayer.Start();
  sg4::Engine::get_instance()->run();
  if (replayer.completed() != schedule.ops_size()) {
    return absl::InternalError(absl::StrCat(
        "replay: ", schedule.ops_size() - replayer.completed(),
        " ops never ran (a dependency on a later op?)"));
  }
  return replayer.Finish();
}

}  // namespace shardsim

#include "sim/engine/replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <simgrid/s4u.hpp>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "sim/compute/kernel_time.h"
#include "sim/schedule/host_cost.h"
#include "sim/schedule/lower.h"
#include "sim/schedule/periodic.h"

namespace sg4 = simgrid::s4u;

namespace shardsim {
namespace {

// Times closer than this are the same instant (floating-point sums).
constexpr double kEps = 1e-12;

// Per op, the op before it on its stream, or -1.
std::vector<int> StreamPredecessors(const StepOps& s) {
  std::vector<int> last(Stream_ARRAYSIZE, -1);
  std::vector<int> prev(s.size(), -1);
  for (int id = 0; id < s.size(); ++id) {
    const Stream stream = s.op(id).stream();
    prev[id] = last[stream];
    last[stream] = id;
  }
  return prev;
}

// One actor for the host and one per stream: a stream's ops run in order,
// each once the host has issued it and its deps are done. Waiting is on one
// condition variable, notified whenever anything another actor waits for
// changes (an op issued or done, a collective starting or ending).
// The state of a replay at a watched op (a block's first), by op ids
// relative to it, with what decides each op's rest (replay.h). Taken
// twice per watched op:
//  - at the host, when the host reaches it: every op issued before it and
//    not done, the host's lead over the GPU included;
//  - on the GPU, when it starts: every op from the oldest not done to the
//    newest started, done, running or not started, the host set aside.
struct Snapshot {
  int at = 0;       // the watched op
  double time = 0;  // when the host reached it, or it started
  int oldest = 0;   // the oldest op not done (at if none)
  std::vector<double> state;
};

class Replayer {
 public:
  // `watch`: op ids (ascending) at which to take a Snapshot.
  Replayer(const Schedule& s, Fabric* f, CollectiveEngine* c,
           std::vector<int> watch = {})
      : schedule_(s),
        fabric_(f),
        collectives_(c),
        watch_(std::move(watch)),
        watched_(s.ops_size(), false),
        issued_(s.ops_size(), false),
        started_(s.ops_size(), false),
        done_(s.ops_size(), false),
        cost_(s.ops_size()),
        times_(s.ops_size()),
        progress_(s.ops_size()),
        work_(s.ops_size()),
        by_stream_(Stream_ARRAYSIZE),
        mutex_(sg4::Mutex::create()),
        changed_(sg4::ConditionVariable::create()) {
    for (int id : watch_) watched_[id] = true;
    const Platform& p = fabric_->platform();
    host_cost_ = HostCosts(s, p);
    std::vector<OpCost> list_cost;  // per kernel list
    for (const KernelList& l : s.kernel_lists()) {
      list_cost.push_back(ComputeOpCost(l, p));
    }
    for (const Op& op : s.ops()) {
      by_stream_[op.stream()].push_back(op.id());
      if (op.has_compute()) {
        cost_[op.id()] = list_cost[op.compute().kernel_list()];
        times_[op.id()].base_s = cost_[op.id()].seconds;
      }
    }
  }

  void Start() {
    origin_ = Now();
    sg4::Actor::create("host", fabric_->gpu(0), [this] { Host(); });
    for (int stream = 0; stream < Stream_ARRAYSIZE; ++stream) {
      if (by_stream_[stream].empty()) continue;
      sg4::Actor::create(absl::StrCat("stream", stream), fabric_->gpu(0),
                         [this, stream] { RunStream(stream); });
    }
  }

  int completed() const { return completed_; }
  const std::vector<Snapshot>& host_snapshots() const { return host_snaps_; }
  const std::vector<Snapshot>& gpu_snapshots() const { return gpu_snaps_; }

  // Op times from the start of this replay.
  std::vector<OpTime> Finish() {
    if (origin_ != 0) {
      for (OpTime& o : times_) {
        o.start -= origin_;
        o.end -= origin_;
        o.host_start -= origin_;
        o.host_end -= origin_;
      }
      for (Snapshot& s : host_snaps_) s.time -= origin_;
      for (Snapshot& s : gpu_snaps_) s.time -= origin_;
    }
    return std::move(times_);
  }

 private:
  double Now() const { return sg4::Engine::get_clock(); }

  // The host issues the ops in order: waits, then launch costs.
  void Host() {
    size_t next_watch = 0;
    for (const Op& op : schedule_.ops()) {
      if (next_watch < watch_.size() && watch_[next_watch] == op.id()) {
        TakeHostSnapshot(op.id());
        ++next_watch;
      }
      // SimGrid runs one actor at a time and switches only at simcalls, so
      // the flags read the same without the lock; it is taken (a lock and
      // an unlock, two simcalls) only to wait: a fifth of a step's simcalls.
      if (!HostWaitsDone(op)) {
        std::unique_lock<sg4::Mutex> lock(*mutex_);
        for (int w : op.host_waits()) {
          while (!done_[w]) changed_->wait(lock);
        }
      }
      OpTime& t = times_[op.id()];
      t.host_start = Now();
      const double cost = host_cost_[op.id()];
      if (op.has_compute()) {
        t.host_end = t.host_start + cost;
        Issue(op.id());  // the GPU may start on the first kernel
        if (cost > 0) sg4::this_actor::sleep_for(cost);
      } else {
        if (cost > 0) sg4::this_actor::sleep_for(cost);
        t.host_end = Now();
        Issue(op.id());
      }
    }
  }

  void Issue(int id) {
    issued_[id] = true;
    pending_.insert(id);
    changed_->notify_all();
  }

  // Compute: seconds of work left; collectives: their progress; both as
  // seen now. Ops not started yet carry nothing but their place.
  void TakeHostSnapshot(int at) {
    Snapshot s;
    s.at = at;
    s.time = Now();
    s.oldest = pending_.empty() ? at : *pending_.begin();
    for (int id : pending_) {
      s.state.push_back(id - at);
      s.state.push_back(started_[id] ? 1 : 0);
      if (!started_[id]) continue;
      AppendRest(id, s.time, &s.state);
      if (schedule_.ops(id).has_compute()) {
        s.state.push_back(std::max(0.0, times_[id].host_end - s.time));
      }
    }
    host_snaps_.push_back(std::move(s));
  }

  // Before `at` starts. Ops not started carry nothing: whether the host
  // has issued them is left out, and checked after the replay (replay.h).
  void TakeGpuSnapshot(int at) {
    Snapshot s;
    s.at = at;
    s.time = Now();
    s.oldest = *pending_.begin();  // `at` is pending
    s.state.push_back(s.oldest - at);
    for (int id = s.oldest; id <= newest_started_; ++id) {
      s.state.push_back(done_[id] ? 2 : started_[id] ? 1 : 0);
      if (started_[id] && !done_[id]) AppendRest(id, s.time, &s.state);
    }
    gpu_snaps_.push_back(std::move(s));
  }

  // A started op's rest: a compute op's seconds of work left, a
  // collective's progress.
  void AppendRest(int id, double now, std::vector<double>* state) const {
    const Op& op = schedule_.ops(id);
    if (op.has_compute()) {
      const Work& w = work_[id];
      state->push_back(std::max(0.0, w.left - (now - w.since) * w.rate));
    } else if (op.has_collective()) {
      progress_[id].AppendState(now, state);
    }
  }

  bool HostWaitsDone(const Op& op) const {
    for (int w : op.host_waits()) {
      if (!done_[w]) return false;
    }
    return true;
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
      if (!Ready(id)) {  // the lock only to wait, as the host's (Host)
        std::unique_lock<sg4::Mutex> lock(*mutex_);
        while (!Ready(id)) changed_->wait(lock);
      }
      Execute(id);
    }
  }

  // Collectives hold SMs; a compute op slows by the share they hold.
  double Slowdown(const OpCost& c) const {
    return ComputeSlowdown(c, comm_sms_, fabric_->platform());
  }

  void SetComputeBusy(bool busy) {
    const double scale =
        busy ? fabric_->platform().interference().nvlink_under_compute() : 1;
    if (scale != nvlink_scale_) {
      nvlink_scale_ = scale;
      collectives_->SetNvlinkScale(scale);
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
      work_[id] = {remaining, t0, rate};
      const std::cv_status s = changed_->wait_for(lock, remaining / rate);
      if (s == std::cv_status::timeout) break;
      remaining -= (Now() - t0) * rate;
    }
    lock.unlock();
    times_[id].gpu_s = Now() - times_[id].start;
    SetComputeBusy(false);
    // The host may still be launching its last kernels.
    if (Now() < times_[id].host_end)
      sg4::this_actor::sleep_until(times_[id].host_end);
  }

  void Execute(int id) {
    const Op& op = schedule_.ops(id);
    OpTime& t = times_[id];
    if (watched_[id]) TakeGpuSnapshot(id);
    t.start = Now();
    started_[id] = true;
    newest_started_ = std::max(newest_started_, id);
    switch (op.body_case()) {
      case Op::kCompute:
        RunCompute(id);
        break;
      case Op::kCollective: {
        const int sms = fabric_->platform().interference().collective_sms();
        comm_sms_ += sms;
        changed_->notify_all();
        t.latency_s =
            collectives_->Run(op.collective(), &progress_[id]).latency_s;
        comm_sms_ -= sms;
        break;
      }
      default:  // memory bookkeeping takes no time
        break;
    }
    t.end = Now();
    ++completed_;
    done_[id] = true;
    pending_.erase(id);
    changed_->notify_all();
  }

  // A compute op's work left at `since`, done at `rate` from then on.
  struct Work {
    double left = 0;
    double since = 0;
    double rate = 0;
  };

  const Schedule& schedule_;
  Fabric* fabric_;
  CollectiveEngine* collectives_;
  const std::vector<int> watch_;
  std::vector<bool> watched_;
  std::vector<bool> issued_;
  std::vector<bool> started_;
  std::vector<bool> done_;
  std::vector<OpCost> cost_;
  std::vector<double> host_cost_;  // per op (HostCosts)
  std::vector<OpTime> times_;
  std::vector<CollectiveEngine::Progress> progress_;
  std::vector<Work> work_;
  std::set<int> pending_;  // issued, not done
  std::vector<Snapshot> host_snaps_;
  std::vector<Snapshot> gpu_snaps_;
  int newest_started_ = -1;
  double origin_ = 0;
  std::vector<std::vector<int>> by_stream_;  // op ids, in order
  sg4::MutexPtr mutex_;
  sg4::ConditionVariablePtr changed_;
  int comm_sms_ = 0;  // SMs held by the collectives in flight
  double nvlink_scale_ = 1;
  int completed_ = 0;
};

}  // namespace

// ---- op times ----

namespace {

// Every cause the critical path charges (PathWalk); index 0: none.
constexpr std::string_view kCauses[] = {"",
                                        "compute",
                                        "optimizer",
                                        "launch overhead",
                                        "waiting on prefetch",
                                        "memory-limited prefetch depth",
                                        "bandwidth",
                                        "latency"};

}  // namespace

StepTimes::StepTimes(std::vector<OpTime> all)
    : simulated_(std::move(all)),
      size_(static_cast<int>(simulated_.size())),
      cause_(size_, 0) {}

StepTimes::StepTimes(std::vector<OpTime> simulated, int size,
                     const Repeat& repeat)
    : simulated_(std::move(simulated)),
      repeat_(repeat),
      size_(size),
      cause_(size, 0) {}

OpTime StepTimes::operator[](int id) const {
  OpTime t;
  if (!repeat_ || id < repeat_->near_end) {
    t = simulated_[id];
  } else {
    const Repeat& r = *repeat_;
    int blocks = r.dropped;  // the last blocks and the tail
    if (id < r.far_end) {
      blocks = r.lo + (id - r.first_op) / r.period_ops - r.first_repeated;
    }
    t = simulated_[id - blocks * r.period_ops];
    const double by = blocks * r.period_s;
    t.start += by;
    t.end += by;
    t.host_start += by;
    t.host_end += by;
  }
  t.cause = kCauses[cause_[id]];
  return t;
}

int StepTimes::LastToEnd() const {
  int last = -1;
  double end = 0;
  auto read = [&](int from, int to) {
    for (int id = from; id < to; ++id) {
      const double e = (*this)[id].end;
      if (last < 0 || e >= end) {
        last = id;
        end = e;
      }
    }
  };
  if (!repeat_) {
    read(0, size_);
    return last;
  }
  // An op of an earlier far block ends no later than its image in the
  // last (x + k p grows with k), which comes later: it is never the one.
  const Repeat& r = *repeat_;
  read(0, r.near_end);
  read(std::max(r.near_end, r.far_end - r.period_ops), size_);
  return last;
}

std::string_view StepTimes::cause(int id) const { return kCauses[cause_[id]]; }

void StepTimes::set_cause(int id, std::string_view cause) {
  for (size_t i = 0; i < std::size(kCauses); ++i) {
    if (kCauses[i] == cause) {
      cause_[id] = static_cast<uint8_t>(i);
      return;
    }
  }
  std::fprintf(stderr, "shardsim: StepTimes: cause \"%.*s\" is not listed\n",
               static_cast<int>(cause.size()), cause.data());
  std::abort();
}

namespace {

// ---- the critical path ----

const char* kShort[] = {"?", "AG", "RS", "AR", "BC"};

class PathWalk {
 public:
  PathWalk(const StepOps& s, StepTimes* t)
      : s_(s), t_(*t), stream_prev_(StreamPredecessors(s)) {}

  Breakdown Walk() {
    int cur = t_.LastToEnd();
    double t = cur >= 0 ? t_[cur].end : 0;
    while (cur >= 0 && t > kEps) {
      SkipRepeats(&cur, &t);
      const Op& op = s_.op(cur);
      const OpTime ot = At(cur);
      // What let it start: the latest of its GPU predecessors, or the host.
      int pred = -1;
      for (int d : s_.deps(cur)) {
        if (pred < 0 || At(d).end > At(pred).end) pred = d;
      }
      const int sp = stream_prev_[cur];
      if (sp >= 0 && (pred < 0 || At(sp).end > At(pred).end)) pred = sp;
      const double issue = op.has_compute() ? ot.host_start : ot.host_end;
      const bool by_host = pred < 0 || issue > At(pred).end + kEps;
      Charge(cur, std::min(ot.start, t), t, by_host);
      t = std::min(ot.start, t);
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
      fields->SetDouble(&b_, f, fields->GetDouble(b_, f) + n * per);
    }
    for (auto& [name, seconds] : by_collective_) {
      const auto before = from.by_collective.find(name);
      seconds +=
          n * (seconds -
               (before == from.by_collective.end() ? 0.0 : before->second));
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
  int HostChain(int id, double* t) {
    for (int h = id; h >= 0; --h) {
      int wait = -1;
      for (int w : s_.host_waits(h)) {
        if (wait < 0 || At(w).end > At(wait).end) wait = w;
      }
      if (wait >= 0 && At(wait).end >= At(h).host_start - kEps) {
        Gap(At(wait).end, t);
        return wait;
      }
      if (h == 0) break;
      // The host was busy with the op before.
      Host(h - 1, At(h - 1).host_start, t);
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

  const StepOps& s_;
  StepTimes& t_;
  std::vector<int> stream_prev_;
  Breakdown b_;
  std::map<std::string, double> by_collective_;
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

namespace {

struct Snapshots {
  std::vector<Snapshot> host;
  std::vector<Snapshot> gpu;
};

// One replay of `schedule` on the engine; may follow an earlier one.
absl::StatusOr<std::vector<OpTime>> Replay(const Schedule& schedule,
                                           Fabric* fabric,
                                           CollectiveEngine* collectives,
                                           std::vector<int> watch,
                                           Snapshots* snapshots) {
  Replayer replayer(schedule, fabric, collectives, std::move(watch));
  replayer.Start();
  sg4::Engine::get_instance()->run();
  collectives->EndRun();
  if (replayer.completed() != schedule.ops_size()) {
    return absl::InternalError(
        absl::StrCat("replay: ", schedule.ops_size() - replayer.completed(),
                     " ops never ran (a dependency on a later op?)"));
  }
  std::vector<OpTime> times = replayer.Finish();
  if (snapshots != nullptr) {
    // Finish() moved the clock's origin; snapshots follow it.
    snapshots->host = replayer.host_snapshots();
    snapshots->gpu = replayer.gpu_snapshots();
  }
  return times;
}

// a <= b up to rounding (a part in 1e10, as SameState).
bool NotAfter(double a, double b) {
  return a <= b + 1e-12 + 1e-10 * std::max(std::abs(a), std::abs(b));
}

// The same state up to rounding: ids and counts exactly, the rest to a
// part in 1e10 (seconds and bytes well above the engine's precision).
bool SameState(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!NotAfter(a[i], b[i]) || !NotAfter(b[i], a[i])) return false;
  }
  return true;
}

// Blocks simulated past the first repeating one before the tail: the state
// repeats at its second boundary at the earliest (block lo + 1's start
// comes back at lo + 2's), and the ops of block lo + 1, which stand for the
// far blocks, must be done before the tail begins: one block later, as
// many ops of a block still run when the next begins.
constexpr int kKeptBlocks = 2;

// The first block j whose start state comes back at block j + 1's start,
// or -1. `snaps` are taken at blocks lo + 1, lo + 2, ...; the oldest op in
// flight must belong to a repeating block for the state to stand for the
// ones to come.
int RepeatingBlock(const std::vector<Snapshot>& snaps, const Repeats& r) {
  for (size_t i = 1; i < snaps.size(); ++i) {
    if (snaps[i].oldest >= r.BlockStart(r.lo + 1) &&
        SameState(snaps[i - 1].state, snaps[i].state)) {
      return r.lo + static_cast<int>(i);
    }
  }
  return -1;
}

// Why no state repeated: a stream whose oldest op in flight falls further
// behind at every boundary has a backlog that grows, and never a steady
// state; otherwise the state did not settle in time.
std::string NoRepeatBecause(const Schedule& s,
                            const std::vector<Snapshot>& gpu) {
  bool growing = gpu.size() >= 3;
  for (size_t i = 1; growing && i < gpu.size(); ++i) {
    growing = gpu[i].oldest - gpu[i].at < gpu[i - 1].oldest - gpu[i - 1].at;
  }
  if (growing) {
    const Op& old = s.ops(gpu.back().oldest);
    return absl::StrCat("the ",
                        absl::AsciiStrToLower(Stream_Name(old.stream())),
                        " stream falls further behind at every micro-batch "
                        "(its backlog grows): no state repeats");
  }
  return absl::StrCat(
      "the state at a micro-batch boundary did not repeat within ",
      kKeptBlocks + 1, " micro-batches");
}

// The host's times from the GPU's: what Replayer::Host does, as sums. For
// a state that repeats on the GPU only, whose host times do not repeat.
void RecomputeHost(const StepOps& s, const Platform& p,
                   std::vector<OpTime>* times) {
  const std::vector<double> cost = HostCosts(s, p);
  double host = 0;
  for (int id = 0; id < s.size(); ++id) {
    for (int w : s.host_waits(id)) host = std::max(host, (*times)[w].end);
    OpTime& t = (*times)[id];
    t.host_start = host;
    host += cost[id];
    t.host_end = host;
  }
}

// Whether the GPU times of `gpu` follow from the host times of `host`
// from op `from` on: each op starts when its deps and the op before it on
// its stream are done or, if later, when the host issues it; a compute op
// ends when its work is done or, if later, when the host has launched its
// last kernel. Returns the first op that does not, or -1.
int HostDisagrees(const StepOps& s, const std::vector<OpTime>& gpu,
                  const std::vector<OpTime>& host, int from) {
  auto same = [](double a, double b) {
    return NotAfter(a, b) && NotAfter(b, a);
  };
  const std::vector<int> stream_prev = StreamPredecessors(s);
  for (int id = from; id < s.size(); ++id) {
    const Op& op = s.op(id);
    const int prev = stream_prev[id];
    const OpTime& g = gpu[id];
    const OpTime& h = host[id];
    double ready = prev >= 0 ? gpu[prev].end : 0;
    for (int d : s.deps(id)) ready = std::max(ready, gpu[d].end);
    const double issue = op.has_compute() ? h.host_start : h.host_end;
    bool ok = NotAfter(issue, g.start) &&
              (NotAfter(g.start, ready) || same(g.start, issue));
    if (op.has_compute()) {
      const double work_done = g.start + g.gpu_s;
      ok = ok && NotAfter(h.host_end, g.end) &&
           (same(g.end, work_done) || same(g.end, h.host_end));
    }
    if (!ok) return id;
  }
  return -1;
}

bool Before(const OpTime& t, double limit) {
  return t.start < limit && t.end < limit && t.host_start < limit &&
         t.host_end < limit;
}

// The collapsed replay (replay.h). Returns the full schedule's op times, or
// nullopt with the reason when the state did not repeat in time.
absl::StatusOr<std::optional<StepTimes>> ReplayCollapsed(
    const StepOps& step, const Repeats& r, Fabric* fabric,
    CollectiveEngine* collectives, StepReplay* info) {
  const int keep = r.lo + kKeptBlocks;
  const int P = r.period_ops;
  std::string why;
  std::optional<Shortened> cut = DropBlocks(step, r, keep, &why);
  if (!cut) {
    info->set_full_because(why);
    return std::nullopt;
  }
  std::vector<int> watch;
  for (int k = r.lo + 1; k <= keep + 1; ++k) watch.push_back(r.BlockStart(k));
  Snapshots snaps;
  absl::StatusOr<std::vector<OpTime>> t =
      Replay(*cut->schedule, fabric, collectives, watch, &snaps);
  if (!t.ok()) return t.status();
  // The state repeats at the host where the host waits for the GPU in every
  // block. Where it runs ahead, its lead grows and the state repeats on the
  // GPU only: the GPU's times then repeat alone, and the host's are summed
  // anew, which is exact if the host never held the GPU back (checked).
  int j = RepeatingBlock(snaps.host, r);
  const bool on_gpu = j < 0;
  if (on_gpu) j = RepeatingBlock(snaps.gpu, r);
  if (j < 0) {
    info->set_full_because(NoRepeatBecause(*cut->schedule, snaps.gpu));
    return std::nullopt;
  }
  const std::vector<Snapshot>& at = on_gpu ? snaps.gpu : snaps.host;
  const double period = at[j - r.lo].time - at[j - r.lo - 1].time;
  // When the tail begins: the host issues its first op, or, with the host
  // set aside, the first of its ops starts on the GPU.
  double tail_start = snaps.host.back().time;
  if (on_gpu) {
    tail_start = std::numeric_limits<double>::infinity();
    for (int y = r.BlockStart(keep + 1); y < cut->schedule->ops_size(); ++y) {
      tail_start = std::min(tail_start, (*t)[y].start);
    }
  }
  // Ops standing for others must be done before the tail can touch them.
  const int near = r.BlockStart(j + 1);  // ops before it stand for themselves
                                         // or (block j) for far blocks
  for (int x = 0; x < near; ++x) {
    if (!Before((*t)[x], tail_start)) {
      info->set_full_because(absl::StrCat(
          "op ", x, " (", step.op(x).label(),
          ") still runs when the tail begins: the repeating state needs "
          "more micro-batches before the tail"));
      return std::nullopt;
    }
  }
  for (int p : cut->pinned) {
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
    // The host's times do not repeat: every op's stored.
    const std::vector<OpTime> full(times.begin(), times.end());
    std::vector<OpTime> host = full;
    RecomputeHost(step, fabric->platform(), &host);
    if (const int x = HostDisagrees(step, full, host, r.BlockStart(j + 1));
        x >= 0) {
      info->set_full_because(absl::StrCat(
          "the state repeats on the GPU only, and the host issues op ", x, " (",
          step.op(x).label(), ") at another point of it in the full step"));
      return std::nullopt;
    }
    times = StepTimes(std::move(host));
  }
  info->set_collapsed(true);
  info->set_period_s(period);
  info->set_micro_batches_simulated(info->micro_batches() - dropped);
  return times;
}

}  // namespace

absl::StatusOr<StepTiming> ReplayStep(const StepOps& step, Fabric* fabric,
                                      CollectiveEngine* collectives,
                                      bool collapse) {
  // Copies of a block make no call the base does not.
  for (const Op& op : step.base().ops()) {
    if (op.body_case() != Op::kCollective) continue;
    if (absl::Status s = collectives->Prepare(op.collective()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "schedule op ", op.id(), " (", op.label(), "): ", s.message()));
    }
  }
  // Every GPU runs this same program; node and network symmetry hold when
  // the plans are symmetric across nodes too (collective_engine.h).
  collectives->UseSymmetry();
  StepTiming out;
  const int micro_batches = step.micro_batches();
  out.replay.set_micro_batches(micro_batches);
  out.replay.set_micro_batches_simulated(micro_batches);
  std::optional<StepTimes> times;
  std::string why;
  std::optional<Repeats> r;
  if (!collapse) {
    out.replay.set_full_because("collapsing was turned off");
  } else if (collectives->mode() != FlowMode::kFast) {
    out.replay.set_full_because("per-step flows");
  } else if (r = FindRepeats(step, &why); !r) {
    out.replay.set_full_because(why);
  } else if (r->hi - r->lo <= kKeptBlocks) {
    out.replay.set_full_because(absl::StrCat(
        r->hi - r->lo + 1, " repeating micro-batches: too few to collapse"));
  } else {
    absl::StatusOr<std::optional<StepTimes>> c =
        ReplayCollapsed(step, *r, fabric, collectives, &out.replay);
    if (!c.ok()) return c.status();
    times = *std::move(c);
  }
  if (!times) {
    // A full replay needs every op stored.
    std::optional<OwnedSchedule> whole;
    if (step.fold()) whole = Unfold(step);
    absl::StatusOr<std::vector<OpTime>> t =
        Replay(whole ? **whole : step.base(), fabric, collectives, {}, nullptr);
    if (!t.ok()) return t.status();
    times = StepTimes(*std::move(t));
  }
  if (const int last = times->LastToEnd(); last >= 0) {
    out.step_time_s = std::max(0.0, (*times)[last].end);
  }
  for (int id = 0; id < step.size(); ++id) {
    if (step.op(id).stream() == COMPUTE) {
      const OpTime t = (*times)[id];
      out.compute_busy_s += t.end - t.start;
    }
  }
  out.ops = *std::move(times);
  out.breakdown = CriticalPathBreakdown(step, &out.ops);
  return out;
}

absl::StatusOr<StepTiming> ReplayStep(const Schedule& schedule, Fabric* fabric,
                                      CollectiveEngine* collectives,
                                      bool collapse) {
  return ReplayStep(StepOps(schedule), fabric, collectives, collapse);
}

uint64_t ReplayDigest(const Schedule& schedule) {
  std::string why;
  const std::optional<Repeats> r = FindRepeats(schedule, &why);
  Schedule read = schedule;
  read.clear_strategy();
  for (Op& op : *read.mutable_ops()) {
    if (op.has_memory()) op.mutable_memory()->Clear();
  }
  // A schedule has no map fields: its serialization is deterministic (as
  // periodic.cc and analyze.cc compare schedules).
  std::string bytes = read.SerializeAsString();
  absl::StrAppend(
      &bytes, "|repeats ",
      r ? absl::StrCat(r->lo, " ", r->hi, " ", r->first_op, " ", r->period_ops)
        : why);
  return std::hash<std::string>()(bytes);
}

}  // namespace shardsim

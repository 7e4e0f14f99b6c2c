#include "sim/engine/step_actors.h"

#include <algorithm>
#include <set>
#include <simgrid/s4u.hpp>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "sim/compute/kernel_time.h"
#include "sim/engine/step_order.h"
#include "sim/schedule/host_cost.h"
#include "sim/schedule/lower.h"

namespace sg4 = simgrid::s4u;

namespace shardsim {
namespace {

// Per program, one actor for the host and one per stream, and per class of
// ranks that compute alike (degraded.h) a set of them of its own, each
// with its own times (one program then: Fabric::classes); a collective
// starts when every class has reached it, and ends for all at once: a stream's
// ops run in order, each once its host has issued it and its deps are done (a
// dep on another program's send: once the send's bytes arrived). The actors of
// a program wait on its condition variable, notified when one of its ops is
// issued or done or a send it waits for is done; a compute op in flight waits
// on another, notified when its rate changes (one of its program's collectives
// starts or ends). Each is notified only if someone waits on it: a 64-stage
// pipeline's actors are not all woken at every op, nor a running kernel at
// every op issued beside it.
class Replayer {
 public:
  // `watch`: op ids (ascending) at which to take a Snapshot.
  Replayer(const Schedule& s, const Programs& programs, Fabric* f,
           CollectiveEngine* c, std::vector<int> watch = {})
      : schedule_(s),
        programs_(programs),
        fabric_(f),
        collectives_(c),
        n_(s.ops_size()),
        classes_(static_cast<int>(f->classes().size())),
        lanes_(classes_ * static_cast<int>(programs.list.size())),
        watch_(std::move(watch)),
        watched_(n_, false),
        issued_(n_ * classes_, false),
        started_(n_ * classes_, false),
        done_(n_ * classes_, false),
        cost_(n_ * classes_),
        nominal_s_(n_, 0),
        times_(n_ * classes_),
        progress_(n_ * classes_),
        work_(n_ * classes_),
        by_stream_(lanes_ * Stream_ARRAYSIZE),
        comm_sms_(lanes_, 0),
        nvlink_scale_(lanes_, 1),
        mutex_(sg4::Mutex::create()),
        met_(sg4::ConditionVariable::create()),
        waiting_(lanes_, 0),
        computing_(lanes_, 0),
        host_at_(lanes_, 0),
        host_until_(lanes_, -1) {
    for (int g = 0; g < lanes_; ++g) {
      changed_.push_back(sg4::ConditionVariable::create());
      rate_changed_.push_back(sg4::ConditionVariable::create());
    }
    if (classes_ > 1) meet_.resize(n_);
    for (int id : watch_) watched_[id] = true;
    const Platform& p = fabric_->platform();
    std::vector<double> nominal;  // per kernel list, the platform's own GPU
    for (const KernelList& l : s.kernel_lists()) {
      nominal.push_back(ComputeOpCost(l, p).seconds);
    }
    for (int c = 0; c < classes_; ++c) {
      const RankClass& rc = fabric_->classes()[c];
      std::vector<double> host = HostCosts(s, rc.platform);
      host_cost_.insert(host_cost_.end(), host.begin(), host.end());
      std::vector<OpCost> list_cost;  // per kernel list
      for (const KernelList& l : s.kernel_lists()) {
        list_cost.push_back(Slowed(ComputeOpCost(l, rc.platform), rc.speed));
      }
      for (const Op& op : s.ops()) {
        if (!op.has_compute()) continue;
        const int at = Slot(c, op.id());
        cost_[at] = list_cost[op.compute().kernel_list()];
        times_[at].base_s = cost_[at].seconds;
        nominal_s_[op.id()] = nominal[op.compute().kernel_list()];
      }
    }
    const int per_class = static_cast<int>(programs.list.size());
    for (const Op& op : s.ops()) {
      for (int c = 0; c < classes_; ++c) {
        by_stream_[(c * per_class + op.program()) * Stream_ARRAYSIZE +
                   op.stream()]
            .push_back(op.id());
      }
      auto waits_on = [&](int d) {
        if (s.ops(d).program() == op.program()) return;
        std::vector<int>& w = waiters_[d];
        if (std::find(w.begin(), w.end(), op.program()) == w.end()) {
          w.push_back(op.program());
        }
      };
      for (int d : op.deps()) waits_on(d);
      for (int d : op.host_waits()) waits_on(d);
    }
  }

  void Start() {
    origin_ = Now();
    const bool several = programs_.several();
    for (int g = 0; g < lanes_; ++g) {
      const int p = Program(g);
      // Where an actor sits changes nothing: it only waits and sleeps.
      sg4::Host* const where = fabric_->gpu(programs_.list[p].ranks[0]);
      const std::string tag = several ? absl::StrCat(p, ".")
                              : g > 0 ? absl::StrCat("c", g, ".")
                                      : "";
      sg4::Actor::create(absl::StrCat("host", tag), where,
                         [this, g] { Host(g); });
      for (int stream = 0; stream < Stream_ARRAYSIZE; ++stream) {
        const int lane = g * Stream_ARRAYSIZE + stream;
        if (by_stream_[lane].empty()) continue;
        sg4::Actor::create(absl::StrCat("stream", tag, stream), where,
                           [this, lane] { RunStream(lane); });
      }
    }
  }

  int completed() const { return completed_; }
  const std::vector<Snapshot>& host_snapshots() const { return host_snaps_; }
  const std::vector<Snapshot>& gpu_snapshots() const { return gpu_snaps_; }

  // Op times from the start of this replay. Of several classes, each op's
  // as the class that ends it last (of those, the last to start it: a
  // collective's, the class that held it up).
  std::vector<OpTime> Finish() {
    for (int c = 0; c < classes_; ++c) {
      const RankClass& rc = fabric_->classes()[c];
      const bool straggler = rc.speed != 1 || rc.other_model;
      for (int id = 0; id < n_; ++id) {
        OpTime& o = times_[Slot(c, id)];
        o.nominal_s = nominal_s_[id];
        if (straggler && schedule_.ops(id).has_compute()) {
          o.straggler_rank = rc.ranks[0];
        }
      }
    }
    if (classes_ > 1) {
      for (int id = 0; id < n_; ++id) {
        int best = 0;
        for (int c = 1; c < classes_; ++c) {
          const OpTime& a = times_[Slot(c, id)];
          const OpTime& b = times_[Slot(best, id)];
          if (a.end > b.end || (a.end == b.end && a.start > b.start)) best = c;
        }
        if (best != 0) times_[id] = times_[Slot(best, id)];
      }
      times_.resize(n_);
    }
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

  // Class c's state of op `id`; a lane's (a class's program's) program
  // and class.
  int Slot(int c, int id) const { return c * n_ + id; }
  int Program(int g) const {
    return g % static_cast<int>(programs_.list.size());
  }
  int Class(int g) const { return g / static_cast<int>(programs_.list.size()); }
  int Lane(int c, const Op& op) const {
    return c * static_cast<int>(programs_.list.size()) + op.program();
  }

  // A GPU at `speed` of its own: its kernels take 1 / speed of their time;
  // the host's work (offload's copies and CPU step) is the host's.
  static OpCost Slowed(OpCost c, double speed) {
    if (speed == 1) return c;
    const double more =
        (c.compute_bound_s + c.memory_bound_s) * (1 / speed - 1);
    c.compute_bound_s /= speed;
    c.memory_bound_s /= speed;
    c.seconds += more;
    return c;
  }

  // Lane `g`'s host issues its program's ops in order: waits, then launch
  // costs.
  void Host(int g) {
    const int p = Program(g);
    const int c = Class(g);
    for (int id : programs_.list[p].ops) {
      const Op& op = schedule_.ops(id);
      host_at_[g] = id;
      if (watched_[id]) TakeHostSnapshot(g, id);
      // SimGrid runs one actor at a time and switches only at simcalls, so
      // the flags read the same without the lock; it is taken (a lock and
      // an unlock, two simcalls) only to wait: a fifth of a step's simcalls.
      if (!HostWaitsDone(c, op)) {
        std::unique_lock<sg4::Mutex> lock(*mutex_);
        for (int w : op.host_waits()) {
          ++waiting_[g];
          while (!done_[Slot(c, w)]) changed_[g]->wait(lock);
          --waiting_[g];
        }
      }
      OpTime& t = times_[Slot(c, op.id())];
      t.host_start = Now();
      const double cost = host_cost_[Slot(c, op.id())];
      if (op.has_compute()) {
        t.host_end = t.host_start + cost;
        Issue(c, op.id());  // the GPU may start on the first kernel
        if (cost > 0) sg4::this_actor::sleep_for(cost);
      } else {
        host_until_[g] = t.host_start + cost;
        if (cost > 0) sg4::this_actor::sleep_for(cost);
        host_until_[g] = -1;
        t.host_end = Now();
        Issue(c, op.id());
      }
    }
    host_at_[g] = n_;
  }

  void Issue(int c, int id) {
    issued_[Slot(c, id)] = true;
    if (!watch_.empty()) pending_.insert(id);
    Wake(Lane(c, schedule_.ops(id)));
  }

  // Compute: seconds of work left; collectives: their progress; both as
  // seen now. Ops not started yet carry nothing but their place. Taken by
  // lane `g`'s host; with several programs, where each other host is: the
  // op it waits for or launches, and the launch time it has left.
  void TakeHostSnapshot(int g, int at) {
    Snapshot s;
    s.at = at;
    s.time = Now();
    s.oldest = pending_.empty() ? at : *pending_.begin();
    // Watched ops are a block apart.
    const size_t block = watch_.size() > 1 ? watch_[1] - watch_[0] : n_;
    if (pending_.size() > 4 * block) {
      s.read = false;
      host_snaps_.push_back(std::move(s));
      return;
    }
    for (int id : pending_) {
      s.state.push_back(id - at);
      s.state.push_back(started_[id] ? 1 : 0);
      if (!started_[id]) continue;
      AppendRest(id, s.time, &s);
      if (schedule_.ops(id).has_compute()) {
        s.state.push_back(std::max(0.0, times_[id].host_end - s.time));
      }
    }
    for (int other = 0; programs_.several() && other < lanes_; ++other) {
      if (other == g) continue;
      s.state.push_back(host_at_[other] - at);
      s.state.push_back(host_until_[other] < 0 ? -1
                                               : host_until_[other] - s.time);
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
      if (started_[id] && !done_[id]) AppendRest(id, s.time, &s);
    }
    gpu_snaps_.push_back(std::move(s));
  }

  // A started op's rest: a compute op's seconds of work left, a
  // collective's progress.
  void AppendRest(int id, double now, Snapshot* s) const {
    const Op& op = schedule_.ops(id);
    if (op.has_compute()) {
      const Work& w = work_[id];
      s->state.push_back(std::max(0.0, w.left - (now - w.since) * w.rate));
    } else if (op.has_collective()) {
      progress_[id].AppendState(now, &s->state, &s->bytes);
    }
  }

  bool HostWaitsDone(int c, const Op& op) const {
    for (int w : op.host_waits()) {
      if (!done_[Slot(c, w)]) return false;
    }
    return true;
  }

  bool Ready(int c, int id) const {
    if (!issued_[Slot(c, id)]) return false;
    for (int d : schedule_.ops(id).deps()) {
      if (!done_[Slot(c, d)]) return false;
    }
    return true;
  }

  // `lane`: a class's program's stream (Lane x Stream_ARRAYSIZE + stream).
  void RunStream(int lane) {
    const std::vector<int>& ops = by_stream_[lane];
    const int g = lane / Stream_ARRAYSIZE;
    const int c = Class(g);
    for (size_t k = 0; k < ops.size(); ++k) {
      const int id = ops[k];
      if (!Ready(c, id)) {  // the lock only to wait, as the host's (Host)
        std::unique_lock<sg4::Mutex> lock(*mutex_);
        ++waiting_[g];
        while (!Ready(c, id)) changed_[g]->wait(lock);
        --waiting_[g];
      }
      Execute(c, id);
      // A kernel followed on its stream by a kernel ready now leaves the
      // ports slowed: no instant passes between the two, and each change
      // of their bandwidth costs SimGrid a new share of every port.
      if (OnGpu(schedule_.ops(id)) &&
          !(k + 1 < ops.size() && OnGpu(schedule_.ops(ops[k + 1])) &&
            Ready(c, ops[k + 1]))) {
        SetComputeBusy(g, false);
      }
    }
  }

  // A compute op that runs kernels on the GPU's SMs: not ZeRO-Offload's
  // host side (its copies by the copy engines, its CPU step).
  static bool OnGpu(const Op& op) {
    return op.has_compute() && !OnHostSide(op);
  }

  // ZeRO-Offload's host side takes its time whatever the GPU does: no SMs
  // held, no ports slowed, nothing that collectives slow.
  void RunHostSide(int at) {
    const double seconds = cost_[at].seconds;
    work_[at] = {seconds, Now(), 1};
    sg4::this_actor::sleep_for(seconds);
    times_[at].gpu_s = Now() - times_[at].start;
    // Not done before the host has issued it (as RunCompute).
    if (Now() < times_[at].host_end) {
      sg4::this_actor::sleep_until(times_[at].host_end);
    }
  }

  // Collectives hold SMs; a compute op slows by the share they hold.
  // Of lane `g`'s GPUs: communication on other GPUs leaves them be.
  double Slowdown(const OpCost& c, int g) const {
    return ComputeSlowdown(c, comm_sms_[g],
                           fabric_->classes()[Class(g)].platform);
  }

  // Lane `g`'s compute slows its ranks' NVSwitch ports. Of several
  // classes, the first class's compute sets every port's (docs/engine.md).
  void SetComputeBusy(int g, bool busy) {
    if (Class(g) != 0) return;
    const double scale =
        busy ? fabric_->platform().interference().nvlink_under_compute() : 1;
    if (scale != nvlink_scale_[g]) {
      nvlink_scale_[g] = scale;
      if (programs_.several()) {
        collectives_->SetNvlinkScale(scale, g);
      } else {
        collectives_->SetNvlinkScale(scale);
      }
    }
  }

  void RunCompute(int c, int id) {
    const int at = Slot(c, id);
    const OpCost& cost = cost_[at];
    const int g = Lane(c, schedule_.ops(id));
    SetComputeBusy(g, true);
    double remaining = cost.seconds;  // seconds of work alone
    std::unique_lock<sg4::Mutex> lock(*mutex_);
    ++computing_[g];
    while (remaining > kEps) {
      const double rate = 1 / (1 + Slowdown(cost, g));
      const double t0 = Now();
      work_[at] = {remaining, t0, rate};
      const std::cv_status s =
          rate_changed_[g]->wait_for(lock, remaining / rate);
      if (s == std::cv_status::timeout) break;
      remaining -= (Now() - t0) * rate;
    }
    --computing_[g];
    lock.unlock();
    times_[at].gpu_s = Now() - times_[at].start;
    // The host may still be launching its last kernels: the GPU idles.
    // (Else RunStream lets the ports go once no kernel follows at once.)
    if (Now() < times_[at].host_end) {
      SetComputeBusy(g, false);
      sg4::this_actor::sleep_until(times_[at].host_end);
    }
  }

  // A collective of every class: each class's NCCL kernel holds its SMs
  // from when it reached the call (spinning on its peers); the last to
  // reach it runs it, and it ends for every class at once.
  double MeetAndRun(int c, int id) {
    const Op& op = schedule_.ops(id);
    Meeting& m = meet_[id];
    if (++m.arrived < classes_) {
      std::unique_lock<sg4::Mutex> lock(*mutex_);
      while (!m.done) met_->wait(lock);
      return m.latency_s;
    }
    m.latency_s = collectives_->Run(op.collective(), &progress_[Slot(c, id)], 0)
                      .latency_s;
    m.done = true;
    met_->notify_all();
    return m.latency_s;
  }

  void Execute(int c, int id) {
    const Op& op = schedule_.ops(id);
    const int at = Slot(c, id);
    const int g = Lane(c, op);
    OpTime& t = times_[at];
    if (watched_[id]) TakeGpuSnapshot(id);
    t.start = Now();
    started_[at] = true;
    newest_started_ = std::max(newest_started_, id);
    switch (op.body_case()) {
      case Op::kCompute:
        if (OnGpu(op)) {
          RunCompute(c, id);
        } else {
          RunHostSide(at);
        }
        break;
      case Op::kCollective: {
        const int sms = fabric_->platform().interference().collective_sms();
        comm_sms_[g] += sms;
        WakeCompute(g);
        t.latency_s = classes_ > 1 ? MeetAndRun(c, id)
                                   : collectives_
                                         ->Run(op.collective(), &progress_[id],
                                               op.program())
                                         .latency_s;
        comm_sms_[g] -= sms;
        WakeCompute(g);
        break;
      }
      case Op::kSend: {
        // Its kernels hold the sender's SMs, as a collective's do.
        const int sms = fabric_->platform().interference().collective_sms();
        const int peer = op.send().peer_program();
        comm_sms_[g] += sms;
        WakeCompute(g);
        t.latency_s =
            collectives_
                ->RunSend(op.send(), programs_.list[op.program()].ranks,
                          programs_.list[peer].ranks, &progress_[id])
                .latency_s;
        comm_sms_[g] -= sms;
        WakeCompute(g);
        break;
      }
      default:  // memory bookkeeping takes no time
        break;
    }
    t.end = Now();
    if (c == 0) ++completed_;
    done_[at] = true;
    if (!watch_.empty()) pending_.erase(id);
    Wake(g);
    if (auto it = waiters_.find(id); it != waiters_.end()) {
      for (int q : it->second) Wake(q);
    }
  }

  // Lane g's actors waiting for an op; its compute op in flight.
  void Wake(int g) {
    if (waiting_[g] > 0) changed_[g]->notify_all();
  }
  void WakeCompute(int g) {
    if (computing_[g] > 0) rate_changed_[g]->notify_all();
  }

  // A collective's meeting of the classes (MeetAndRun).
  struct Meeting {
    int arrived = 0;
    bool done = false;
    double latency_s = 0;
  };

  // A compute op's work left at `since`, done at `rate` from then on.
  struct Work {
    double left = 0;
    double since = 0;
    double rate = 0;
  };

  const Schedule& schedule_;
  const Programs& programs_;
  Fabric* fabric_;
  CollectiveEngine* collectives_;
  const int n_;        // ops
  const int classes_;  // Fabric::classes(); per-op state is per class (Slot)
  const int lanes_;    // classes x programs
  const std::vector<int> watch_;
  std::vector<bool> watched_;
  std::vector<bool> issued_;
  std::vector<bool> started_;
  std::vector<bool> done_;
  std::vector<OpCost> cost_;
  std::vector<double> nominal_s_;  // per op: on the platform's own GPU
  std::vector<double> host_cost_;  // per op and class (HostCosts)
  std::vector<OpTime> times_;
  std::vector<CollectiveEngine::Progress> progress_;
  std::vector<Work> work_;
  std::set<int> pending_;  // issued, not done; kept for snapshots only
  std::vector<Snapshot> host_snaps_;
  std::vector<Snapshot> gpu_snaps_;
  int newest_started_ = -1;
  double origin_ = 0;
  // Per lane and stream (RunStream's lane): op ids, in order.
  std::vector<std::vector<int>> by_stream_;
  // Per lane: SMs held by its collectives in flight, and the scale its
  // compute set its NVSwitch ports to.
  std::vector<int> comm_sms_;
  std::vector<double> nvlink_scale_;
  sg4::MutexPtr mutex_;
  sg4::ConditionVariablePtr met_;  // a meeting's collective done
  std::vector<Meeting> meet_;      // per op, of several classes
  // Per lane: ops issued or done, and the compute rate changed; and
  // how many actors wait on each.
  std::vector<sg4::ConditionVariablePtr> changed_;
  std::vector<sg4::ConditionVariablePtr> rate_changed_;
  // Per op: the other programs with an op that depends on it.
  // (Sends only, in a pipeline: a map, not a list per op.)
  absl::flat_hash_map<int, std::vector<int>> waiters_;
  std::vector<int> waiting_;
  std::vector<int> computing_;
  // Per lane, for snapshots: the op its host is at (n_ once it is done),
  // and when its launch of a call ends (-1: none under way).
  std::vector<int> host_at_;
  std::vector<double> host_until_;
  int completed_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<OpTime>> RunStepActors(const Schedule& schedule,
                                                  const Programs* programs,
                                                  Fabric* fabric,
                                                  CollectiveEngine* collectives,
                                                  std::vector<int> watch,
                                                  Snapshots* snapshots) {
  Programs one;
  if (programs == nullptr) {
    ProgramInfo& all = one.list.emplace_back();
    all.ranks.resize(fabric->mesh().gpus());
    for (int r = 0; r < fabric->mesh().gpus(); ++r) all.ranks[r] = r;
    all.ops.resize(schedule.ops_size());
    for (int id = 0; id < schedule.ops_size(); ++id) all.ops[id] = id;
    programs = &one;
  }
  // Classes replay one program in full: each has its own ops' state, but
  // sends pair programs and snapshots read one timeline.
  if (fabric->classes().size() > 1 && (programs->several() || !watch.empty())) {
    return absl::InternalError(
        "replay: several classes of ranks with several programs or "
        "snapshots");
  }
  Replayer replayer(schedule, *programs, fabric, collectives, std::move(watch));
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

}  // namespace shardsim

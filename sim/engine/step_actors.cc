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

// Per program, one actor for the host and one per stream: a stream's ops
// run in order, each once its host has issued it and its deps are done
// (a dep on another program's send: once the send's bytes arrived). The
// actors of a program wait on its condition variable, notified when one of
// its ops is issued or done or a send it waits for is done; a compute op
// in flight waits on another, notified when its rate changes (one of its
// program's collectives starts or ends). Each is notified only if someone
// waits on it: a 64-stage pipeline's actors are not all woken at every
// op, nor a running kernel at every op issued beside it.
class Replayer {
 public:
  // `watch`: op ids (ascending) at which to take a Snapshot (one program).
  Replayer(const Schedule& s, const Programs& programs, Fabric* f,
           CollectiveEngine* c, std::vector<int> watch = {})
      : schedule_(s),
        programs_(programs),
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
        by_stream_(programs.list.size() * Stream_ARRAYSIZE),
        comm_sms_(programs.list.size(), 0),
        nvlink_scale_(programs.list.size(), 1),
        mutex_(sg4::Mutex::create()),
        waiting_(programs.list.size(), 0),
        computing_(programs.list.size(), 0) {
    for (size_t p = 0; p < programs.list.size(); ++p) {
      changed_.push_back(sg4::ConditionVariable::create());
      rate_changed_.push_back(sg4::ConditionVariable::create());
    }
    for (int id : watch_) watched_[id] = true;
    const Platform& p = fabric_->platform();
    host_cost_ = HostCosts(s, p);
    std::vector<OpCost> list_cost;  // per kernel list
    for (const KernelList& l : s.kernel_lists()) {
      list_cost.push_back(ComputeOpCost(l, p));
    }
    for (const Op& op : s.ops()) {
      by_stream_[op.program() * Stream_ARRAYSIZE + op.stream()].push_back(
          op.id());
      auto waits_on = [&](int d) {
        if (s.ops(d).program() == op.program()) return;
        std::vector<int>& w = waiters_[d];
        if (std::find(w.begin(), w.end(), op.program()) == w.end()) {
          w.push_back(op.program());
        }
      };
      for (int d : op.deps()) waits_on(d);
      for (int d : op.host_waits()) waits_on(d);
      if (op.has_compute()) {
        cost_[op.id()] = list_cost[op.compute().kernel_list()];
        times_[op.id()].base_s = cost_[op.id()].seconds;
      }
    }
  }

  void Start() {
    origin_ = Now();
    const bool several = programs_.several();
    for (int p = 0; p < static_cast<int>(programs_.list.size()); ++p) {
      // Where an actor sits changes nothing: it only waits and sleeps.
      sg4::Host* const where = fabric_->gpu(programs_.list[p].ranks[0]);
      const std::string tag = several ? absl::StrCat(p, ".") : "";
      sg4::Actor::create(absl::StrCat("host", tag), where,
                         [this, p] { Host(p); });
      for (int stream = 0; stream < Stream_ARRAYSIZE; ++stream) {
        const int lane = p * Stream_ARRAYSIZE + stream;
        if (by_stream_[lane].empty()) continue;
        sg4::Actor::create(absl::StrCat("stream", tag, stream), where,
                           [this, lane] { RunStream(lane); });
      }
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

  // Program `p`'s host issues its ops in order: waits, then launch costs.
  void Host(int p) {
    size_t next_watch = 0;
    for (int id : programs_.list[p].ops) {
      const Op& op = schedule_.ops(id);
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
          ++waiting_[p];
          while (!done_[w]) changed_[p]->wait(lock);
          --waiting_[p];
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
    if (!watch_.empty()) pending_.insert(id);
    Wake(schedule_.ops(id).program());
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

  // `lane`: a program's stream (program x Stream_ARRAYSIZE + stream).
  void RunStream(int lane) {
    const std::vector<int>& ops = by_stream_[lane];
    const int p = lane / Stream_ARRAYSIZE;
    for (size_t k = 0; k < ops.size(); ++k) {
      const int id = ops[k];
      if (!Ready(id)) {  // the lock only to wait, as the host's (Host)
        std::unique_lock<sg4::Mutex> lock(*mutex_);
        ++waiting_[p];
        while (!Ready(id)) changed_[p]->wait(lock);
        --waiting_[p];
      }
      Execute(id);
      // A kernel followed on its stream by a kernel ready now leaves the
      // ports slowed: no instant passes between the two, and each change
      // of their bandwidth costs SimGrid a new share of every port.
      if (OnGpu(schedule_.ops(id)) &&
          !(k + 1 < ops.size() && OnGpu(schedule_.ops(ops[k + 1])) &&
            Ready(ops[k + 1]))) {
        SetComputeBusy(p, false);
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
  void RunHostSide(int id) {
    const double seconds = cost_[id].seconds;
    work_[id] = {seconds, Now(), 1};
    sg4::this_actor::sleep_for(seconds);
    times_[id].gpu_s = Now() - times_[id].start;
    // Not done before the host has issued it (as RunCompute).
    if (Now() < times_[id].host_end) {
      sg4::this_actor::sleep_until(times_[id].host_end);
    }
  }

  // Collectives hold SMs; a compute op slows by the share they hold.
  // Of program `p`'s GPUs: communication on other GPUs leaves them be.
  double Slowdown(const OpCost& c, int p) const {
    return ComputeSlowdown(c, comm_sms_[p], fabric_->platform());
  }

  // Program `p`'s compute slows its ranks' NVSwitch ports.
  void SetComputeBusy(int p, bool busy) {
    const double scale =
        busy ? fabric_->platform().interference().nvlink_under_compute() : 1;
    if (scale != nvlink_scale_[p]) {
      nvlink_scale_[p] = scale;
      if (programs_.several()) {
        collectives_->SetNvlinkScale(scale, p);
      } else {
        collectives_->SetNvlinkScale(scale);
      }
    }
  }

  void RunCompute(int id) {
    const OpCost& c = cost_[id];
    const int p = schedule_.ops(id).program();
    SetComputeBusy(p, true);
    double remaining = c.seconds;  // seconds of work alone
    std::unique_lock<sg4::Mutex> lock(*mutex_);
    ++computing_[p];
    while (remaining > kEps) {
      const double rate = 1 / (1 + Slowdown(c, p));
      const double t0 = Now();
      work_[id] = {remaining, t0, rate};
      const std::cv_status s =
          rate_changed_[p]->wait_for(lock, remaining / rate);
      if (s == std::cv_status::timeout) break;
      remaining -= (Now() - t0) * rate;
    }
    --computing_[p];
    lock.unlock();
    times_[id].gpu_s = Now() - times_[id].start;
    // The host may still be launching its last kernels: the GPU idles.
    // (Else RunStream lets the ports go once no kernel follows at once.)
    if (Now() < times_[id].host_end) {
      SetComputeBusy(p, false);
      sg4::this_actor::sleep_until(times_[id].host_end);
    }
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
        if (OnGpu(op)) {
          RunCompute(id);
        } else {
          RunHostSide(id);
        }
        break;
      case Op::kCollective: {
        const int sms = fabric_->platform().interference().collective_sms();
        comm_sms_[op.program()] += sms;
        WakeCompute(op.program());
        t.latency_s =
            collectives_->Run(op.collective(), &progress_[id], op.program())
                .latency_s;
        comm_sms_[op.program()] -= sms;
        WakeCompute(op.program());
        break;
      }
      case Op::kSend: {
        // Its kernels hold the sender's SMs, as a collective's do.
        const int sms = fabric_->platform().interference().collective_sms();
        const int peer = op.send().peer_program();
        comm_sms_[op.program()] += sms;
        WakeCompute(op.program());
        t.latency_s =
            collectives_
                ->RunSend(op.send(), programs_.list[op.program()].ranks,
                          programs_.list[peer].ranks)
                .latency_s;
        comm_sms_[op.program()] -= sms;
        WakeCompute(op.program());
        break;
      }
      default:  // memory bookkeeping takes no time
        break;
    }
    t.end = Now();
    ++completed_;
    done_[id] = true;
    if (!watch_.empty()) pending_.erase(id);
    Wake(op.program());
    if (auto it = waiters_.find(id); it != waiters_.end()) {
      for (int q : it->second) Wake(q);
    }
  }

  // Program p's actors waiting for an op; its compute op in flight.
  void Wake(int p) {
    if (waiting_[p] > 0) changed_[p]->notify_all();
  }
  void WakeCompute(int p) {
    if (computing_[p] > 0) rate_changed_[p]->notify_all();
  }

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
  std::set<int> pending_;  // issued, not done; kept for snapshots only
  std::vector<Snapshot> host_snaps_;
  std::vector<Snapshot> gpu_snaps_;
  int newest_started_ = -1;
  double origin_ = 0;
  // Per program and stream (RunStream's lane): op ids, in order.
  std::vector<std::vector<int>> by_stream_;
  // Per program: SMs held by its collectives in flight, and the scale its
  // compute set its NVSwitch ports to.
  std::vector<int> comm_sms_;
  std::vector<double> nvlink_scale_;
  sg4::MutexPtr mutex_;
  // Per program: ops issued or done, and the compute rate changed; and
  // how many actors wait on each.
  std::vector<sg4::ConditionVariablePtr> changed_;
  std::vector<sg4::ConditionVariablePtr> rate_changed_;
  // Per op: the other programs with an op that depends on it.
  // (Sends only, in a pipeline: a map, not a list per op.)
  absl::flat_hash_map<int, std::vector<int>> waiters_;
  std::vector<int> waiting_;
  std::vector<int> computing_;
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

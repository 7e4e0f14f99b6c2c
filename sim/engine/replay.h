// Step replay: the schedule IR on the fabric. The GPUs of one program run
// the same ops, so one op stands for all of them; a schedule has one
// program (every GPU's: all the lowering makes) or several (one per rank
// role, as a pipeline's stages: schedule.proto Program).
//
//  - The host: one actor walks the ops in IR order (the framework's issue
//    order). It blocks on an op's host_waits, then spends its launch cost:
//    a compute op's kernel launches (KernelModel.host_launch_s each), a
//    collective's launch_overhead_s. A compute op may start on the GPU as
//    soon as the host begins launching it but cannot end before the host
//    has launched its last kernel; a collective starts once its call
//    returns.
//  - The GPU: an op runs once the host issued it, its deps are done and the
//    op before it on its stream is done. Compute ops take their kernels'
//    time (sim/compute), slowed while collectives hold SMs
//    (Interference: compute- and memory-bound parts apart); collectives run
//    on the fabric, and NVSwitch ports run at nvlink_under_compute of their
//    rate while compute runs (CollectiveEngine::SetNvlinkScale).
//  - Why: the step's critical path is walked back from its last op; every
//    second of it is charged to one cause (results.proto Breakdown).
//  - Several programs: each has its host and its streams, replayed side by
//    side; a send (PointToPoint) runs on its stream as one flow per rank
//    pair (CollectiveEngine::RunSend), and the peer program's ops that
//    depend on it start when it is done. Each collective runs its
//    program's groups only; compute and SMs held slow that program's GPUs
//    and NVSwitch ports only. Such a step has no network symmetry, and
//    node symmetry only where every program holds whole nodes; it
//    collapses as one program does where every program
//    repeats its blocks (a pipeline lists its stages block by block,
//    sim/schedule/pipeline/pipeline.cc), with every program's state
//    compared; a folded one, or a collective whose group holds ranks of
//    two programs, is an error. The critical path crosses programs through
//    sends, whose time it charges as a collective's (bandwidth and latency, by
//    collective "SEND tensor").
#ifndef SHARDSIM_SIM_ENGINE_REPLAY_H_
#define SHARDSIM_SIM_ENGINE_REPLAY_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/engine/collective_engine.h"
#include "sim/engine/fabric.h"
#include "sim/schedule/periodic.h"
#include "sim/schema/results.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

struct OpTime {
  double start = 0;
  double end = 0;
  double host_start = 0;  // when the host began issuing it
  double host_end = 0;    // when the host was done with it
  double base_s = 0;      // compute: its kernels alone on the GPU
  double gpu_s = 0;       // compute: on the GPU, interference included
  double latency_s = 0;   // collective: its latency part
  // Compute: its kernels alone on the platform's own GPU at full speed;
  // base_s is longer on a slow or older GPU (platform.proto Degraded).
  double nominal_s = 0;
  // Compute run by a class of degraded GPUs: that class's first rank
  // (what the breakdown says the step waited on); else -1.
  int straggler_rank = -1;
  // On the critical path: the cause its time was charged to ("compute",
  // "bandwidth", ...: a literal); empty if it is not on the path.
  std::string_view cause;
};

// A replayed step's op times, by op id: every op's stored, or, for a
// collapsed replay, the simulated ops' and the rule that repeats them
// (ReplayStep's expansion), so that a step of many micro-batches stores
// those of a few.
class StepTimes {
 public:
  // Where the collapsed replay's expansion takes each op's times from:
  // ops before near_end as simulated; ops of block b before far_end are
  // block first_repeated's, b - first_repeated periods later; the rest
  // are the simulated ones `dropped` periods later.
  struct Repeat {
    int near_end = 0;  // ops before it are as simulated
    int far_end = 0;   // ops before it repeat block `first_repeated`
    int first_op = 0;  // Repeats::first_op, period_ops, lo
    int period_ops = 0;
    int lo = 0;
    int first_repeated = 0;  // the block the far blocks repeat
    int dropped = 0;         // blocks dropped before the tail
    double period_s = 0;
  };

  StepTimes() = default;
  explicit StepTimes(std::vector<OpTime> all);
  StepTimes(std::vector<OpTime> simulated, int size, const Repeat& repeat);

  int size() const { return size_; }
  OpTime operator[](int id) const;  // its cause included
  // The op that ends last (of those that end together, the last of them),
  // or -1 if there is none. In a collapsed step only the last far block
  // is read: each ends a period after the one before.
  int LastToEnd() const;
  // How a collapsed replay's ops repeat; nullopt when every op is stored,
  // or when the host's times were summed anew (they do not repeat).
  const std::optional<Repeat>& repeat() const {
    return host_.empty() ? repeat_ : kNone;
  }
  // The host's times summed anew, by op (host_start, host_end): for a
  // state that repeats on the GPU only (the collapse), over those the
  // expansion gives.
  void SetHostTimes(std::vector<std::pair<double, double>> host) {
    host_ = std::move(host);
  }
  std::string_view cause(int id) const;
  void set_cause(int id, std::string_view cause);  // a literal

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = OpTime;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = OpTime;

    Iterator(const StepTimes* t, int id) : t_(t), id_(id) {}
    OpTime operator*() const { return (*t_)[id_]; }
    Iterator& operator++() {
      ++id_;
      return *this;
    }
    bool operator==(const Iterator& o) const { return id_ == o.id_; }
    bool operator!=(const Iterator& o) const { return id_ != o.id_; }

   private:
    const StepTimes* t_;
    int id_;
  };
  Iterator begin() const { return Iterator(this, 0); }
  Iterator end() const { return Iterator(this, size_); }

 private:
  static constexpr std::optional<Repeat> kNone = std::nullopt;
  std::vector<OpTime> simulated_;
  std::optional<Repeat> repeat_;
  std::vector<std::pair<double, double>> host_;  // SetHostTimes; or empty
  int size_ = 0;
  std::vector<uint8_t> cause_;  // index into the causes, 0: none
};

struct StepTiming {
  double step_time_s = 0;
  // Time the compute stream is busy; with several programs, the busiest
  // program's.
  double compute_busy_s = 0;
  StepTimes ops;
  Breakdown breakdown;  // adds up to step_time_s
  // How it was replayed. Collapsed: the micro-batches that repeat
  // (sim/schedule/periodic.h) were simulated until the state at a boundary
  // between two of them came back (every op in flight, with its work,
  // bytes and waits left), and the rest are that period repeated: exact,
  // since the engine is deterministic and the same state with the same
  // ops to come runs the same way.
  StepReplay replay;
};

// Runs the SimGrid engine until the step is done. Call once per process,
// after Fabric::Build. The fabric's NVSwitch rates change while it runs.
// With `collapse`, repeating micro-batches are simulated until the state
// repeats (StepTiming::replay); a step whose state does not repeat soon
// enough is then replayed in full after that attempt.
//
// The state is compared at each block's first op twice: when the host
// reaches it (ops issued and not done, the host's lead included), and when
// it starts on the GPU (ops done, running or waiting, the host set aside).
// The first repeats where the host waits for the GPU in every block. The
// second also repeats where the host runs ahead and its lead grows; the
// GPU's times then repeat alone, the host's are summed anew from them
// (launch costs and waits), and the collapse stands only if those host
// times give the same GPU times: no op issued later than it started, and
// every op the host held back held at the same point as simulated.
//
// Expanding a collapsed run (blocks lo..hi repeat; blocks keep+1..hi were
// dropped; the state at block j's start came back at block j+1's, one
// period later): ops before block j+1 are as simulated; ops of block b in
// j+1..hi-(keep-j) are block j's, b-j periods later (block j starts from
// the state block j+1 starts from, and its ops end before the tail begins,
// which is checked); the last keep-j blocks and the tail are the simulated
// ones, hi-keep periods later.
//
// A folded step (sim/schedule/periodic.h) is replayed as the step it stands
// for: collapsed from its base, or unfolded for a full replay.
absl::StatusOr<StepTiming> ReplayStep(const StepOps& step, Fabric* fabric,
                                      CollectiveEngine* collectives,
                                      bool collapse = true);
absl::StatusOr<StepTiming> ReplayStep(const Schedule& schedule, Fabric* fabric,
                                      CollectiveEngine* collectives,
                                      bool collapse = true);

// A digest of what ReplayStep reads of a step stored whole: every op, a
// memory op's payload aside (bookkeeping the replay never times), and
// the repeats it would collapse by (FindRepeats, which does compare
// payloads); not the schedule's name. Steps with the same digest replay
// alike on one fabric: the same times, breakdown and StepReplay. 64 bits:
// a false match among a few thousand steps has a chance near 1e-13.
uint64_t ReplayDigest(const Schedule& schedule);
// The same of a step stored folded (or whole): folded steps with the same
// digest are the same step. A step's folded and whole digests differ.
uint64_t ReplayDigest(const StepOps& ops);

// Charges each second of a replayed step to a cause by walking its critical
// path back from the op that ends last, and marks the ops it passes with
// their cause. In a collapsed step, once it crosses two far blocks the same
// way it charges and marks the blocks below as the one crossed, without
// walking them (the sums then differ in their last digits only). Exposed
// for tests; ReplayStep calls it.
Breakdown CriticalPathBreakdown(const StepOps& ops, StepTimes* times);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ENGINE_REPLAY_H_

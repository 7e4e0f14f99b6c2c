// Step replay: the schedule IR on the fabric. Every GPU runs the same
// program, so one op stands for all GPUs.
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
//    rate while compute runs.
//  - Why: the step's critical path is walked back from its last op; every
//    second of it is charged to one cause (results.proto Breakdown).
#ifndef SHARDSIM_SIM_ENGINE_REPLAY_H_
#define SHARDSIM_SIM_ENGINE_REPLAY_H_

#include <string>
#include <string_view>
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
  // On the critical path: the cause its time was charged to ("compute",
  // "bandwidth", ...: a literal); empty if it is not on the path.
  std::string_view cause;
};

struct StepTiming {
  double step_time_s = 0;
  double compute_busy_s = 0;  // time the compute stream is busy
  std::vector<OpTime> ops;    // by op id
  Breakdown breakdown;        // adds up to step_time_s
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
// j+1..hi-(keep-j) are block j+1's, b-j-1 periods later (they end before
// the tail begins, which is checked); the last keep-j blocks and the tail
// are the simulated ones, hi-keep periods later.
//
// A folded step (sim/schedule/periodic.h) is replayed as the step it stands
// for: collapsed from its base, or unfolded for a full replay.
absl::StatusOr<StepTiming> ReplayStep(const StepOps& step, Fabric* fabric,
                                      CollectiveEngine* collectives,
                                      bool collapse = true);
absl::StatusOr<StepTiming> ReplayStep(const Schedule& schedule, Fabric* fabric,
                                      CollectiveEngine* collectives,
                                      bool collapse = true);

// Charges each second of a replayed step to a cause by walking its critical
// path back from the op that ends last, and marks the ops it passes with
// their cause. Exposed for tests; ReplayStep calls it.
Breakdown CriticalPathBreakdown(const StepOps& ops, std::vector<OpTime>* times);
Breakdown CriticalPathBreakdown(const Schedule& schedule,
                                std::vector<OpTime>* times);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ENGINE_REPLAY_H_

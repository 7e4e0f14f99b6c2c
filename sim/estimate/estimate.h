// The estimate tier: a step's time from the same kernel, collective and
// pipeline models the engine reads, composed without the discrete-event
// engine: milliseconds a point where a simulation takes tenths of a second
// to minutes. `shardsim estimate` prints them; `plan --time-limit`
// estimates every point it bounds: it simulates the estimate's best first,
// and past its time limit with nothing simulated returns the estimate's
// best rows.
//
// The step is the replay's order constraints walked in issue order
// (sim/schedule/issue_order.h), each op taking its expected time alone:
//  - a compute op, its kernels' time (sim/compute/kernel_time.h);
//  - a collective, the alpha-beta estimate of its plan with the protocol
//    the engine picks (sim/collective/estimate.h: every step as long as its
//    busiest NVSwitch port, NIC or up-link with every group of its shape
//    running at once), or its busiest NVSwitch port's or NIC's bytes, if
//    longer;
//  - a send, its protocol's latency and its bytes over the NIC (or the
//    NVSwitch port) its GPUs share;
//  - memory bookkeeping, nothing.
// Then what the engine adds, from the walk's own overlaps: a compute op
// runs at 1 / (1 + ComputeSlowdown) of its speed while its program's
// collectives and sends hold SMs (each its collective_sms); a
// collective's NVSwitch bytes run at nvlink_under_compute of their rate
// while its program's compute runs, and its NIC bytes (every group of its
// shape at once, as the bound counts them) at 1 / k of the NICs while k of
// its program's calls cross them (max-min sharing). Left out: up-links
// shared by concurrent calls, sends sharing NICs with collectives or with
// other programs' calls, and the degraded GPUs' classes.
#ifndef SHARDSIM_SIM_ESTIMATE_ESTIMATE_H_
#define SHARDSIM_SIM_ESTIMATE_ESTIMATE_H_

#include <string>

#include "absl/status/statusor.h"
#include "sim/engine/prepared_calls.h"
#include "sim/scenario/scenario.h"
#include "sim/schedule/periodic.h"
#include "sim/schema/results.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

// The overlaps are read off one walk and set the op times of the next:
// walks until no op's time moves by more than kSettled of the step (each
// walk's change shrinks geometrically; the step is then settled to about
// that, far below the estimate's error against the engine), kMaxPasses at
// most. Ops can cycle where the overlaps they read flip with them: of the
// 269 points of tests/bench/estimate_bench.py, 14 never settled in 64
// walks, and a Llama-2-70B pipeline on 256 GPUs took 4 to 23 s a point
// doing so; with 8 walks at most the steps moved from 64 walks' by 0 in
// the median and 0.29% at worst, under the estimate's error against the
// engine (docs/performance.md).
inline constexpr int kMaxPasses = 8;
inline constexpr double kSettled = 1e-6;

struct StepEstimate {
  double step_time_s = 0;
  // The busiest program's compute stream, slowdowns included.
  double compute_s = 0;
  // Seconds of the collectives and sends on the walk's critical path
  // (traced back from the op that ends last through what held each op
  // back) that their program's compute does not cover.
  double exposed_comm_s = 0;
};

// `calls` must be made with volumes, on the schedule's mesh and platform.
// Errors: a call the plans refuse; a malformed schedule (issue_order.h).
absl::StatusOr<StepEstimate> EstimateStep(const Schedule& schedule,
                                          PreparedCalls* calls);
// The step `ops` stands for, folded or whole: the same estimate as of its
// Unfold, each base op's time alone worked out once.
absl::StatusOr<StepEstimate> EstimateStep(const StepOps& ops,
                                          PreparedCalls* calls);

// What the estimate leaves out on `platform` that the engine would time, as
// a warning: its degraded parts; empty if nothing.
std::string EstimateCaveat(const Platform& platform);

// Every strategy x GPU count of the job, as SimulateJob's rows (memory and
// traffic as analysed, OOM rows untimed) with the step's times estimated:
// each row's `estimate` is set. A platform with degraded parts is timed as
// if it had none, and its Results.warnings say so.
absl::StatusOr<Results> EstimateJob(const Job& job);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ESTIMATE_ESTIMATE_H_

// Goodput of simulated points (`shardsim goodput`): each point's step
// (sim/simulate), the parts of the cluster it runs on that can fail
// (platform.proto Reliability), and what its checkpoints cost
// (CheckpointStorage), turned into goodput.h's input and its answer.
//
// What a point is made of:
//  - Work: `days` of steps at the uniform step (the platform without its
//    degraded parts), or the steps of a token budget. Degraded parts
//    stretch every step to the simulated one: straggler time.
//  - Parts that fail: its GPUs; its nodes, their NICs (nics_per_node
//    each) and their software; the switches of the two-level fat tree the
//    engine lays its NICs out on (sim/base/fat_tree.h): its leaves, and as
//    many spines as a leaf has up-links, none for one leaf.
//  - A checkpoint: every parameter in bf16 (2 bytes) and the optimizer's
//    states (optimizer_bytes_per_param), each once however the strategy
//    shards or replicates them: PyTorch DCP deduplicates replicated
//    tensors and spreads the writes over the ranks (planner
//    dedup_save_plans); DeepSpeed writes each optimizer shard once. Written
//    by every node at once, each at storage.node_write_bytes_per_s.
//    Asynchronous (dcp.async_save): the step blocks while each GPU copies
//    what it holds (its parameter and optimizer-state lines of the memory
//    model: a shard, or a replica) to host memory at
//    host.pcie_bytes_per_s; then the write goes on.
//  - A restart: reliability.relaunch_s + init_s + every GPU reading back
//    what it holds, a node's GPUs together at node_read_bytes_per_s.
#ifndef SHARDSIM_SIM_GOODPUT_JOB_GOODPUT_H_
#define SHARDSIM_SIM_GOODPUT_JOB_GOODPUT_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/goodput/goodput.h"
#include "sim/scenario/scenario.h"
#include "sim/schema/results.pb.h"

namespace shardsim {

struct GoodputOptions {
  double days = 0;                   // of work; or
  double tokens = 0;                 // a token budget (one of the two > 0)
  std::optional<double> interval_s;  // work between checkpoints; or Daly's
  bool async_checkpoint = false;
  int trials = 0;  // > 0: a Monte Carlo of that many runs
  uint64_t seed = 1;
};

// The goodput of `row` (a simulated point of `job`), `uniform_step_s` its
// step on the platform without degraded parts. Errors name the platform
// field the job lacks (reliability, storage, host.pcie_bytes_per_s) or
// the option at fault.
absl::StatusOr<GoodputResult> PointGoodput(const Job& job, const ResultRow& row,
                                           double uniform_step_s,
                                           const GoodputOptions& options);

// The switches of a two-level fat tree for `nodes` nodes (above).
int64_t FatTreeSwitches(const Platform& platform, int nodes);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_GOODPUT_JOB_GOODPUT_H_

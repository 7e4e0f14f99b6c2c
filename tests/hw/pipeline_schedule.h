// Pipeline-like schedules of several programs, built by hand for
// shardsim-hw's tests (the lowering makes none): stage k computes each
// micro-batch's forward, sends its activations to stage k + 1, and on the
// way back sends its activation gradients to stage k - 1 (GPipe's order:
// every forward, then every backward); each stage holds its activations
// from forward to backward and ends with an all-reduce of its gradients
// over its own ranks.
#ifndef SHARDSIM_TESTS_HW_PIPELINE_SCHEDULE_H_
#define SHARDSIM_TESTS_HW_PIPELINE_SCHEDULE_H_

#include <cstdint>
#include <vector>

#include "sim/schema/schedule.pb.h"

namespace shardsim::hw {

struct Pipeline {
  std::vector<std::vector<int>> ranks;  // per stage, global ranks
  Group group;                          // the shape of one stage's ranks
  int micro_batches = 2;
  // Micro-batch m sends activation_bytes + m forward and
  // gradient_bytes + m back (sizes differ, so a receive paired with the
  // wrong send is the wrong size).
  int64_t activation_bytes = 4099;
  int64_t gradient_bytes = 2053;
  // Stage k holds (k + 1) x this per micro-batch of activations.
  int64_t activation_memory = 1000;
  int64_t allreduce_bytes = 8192;
};

Schedule PipelineSchedule(const Pipeline& p);

// Appends op of `program` on `stream`, its id the next index.
Op* AddOp(Schedule* s, int program, Stream stream, const char* label);

}  // namespace shardsim::hw

#endif  // SHARDSIM_TESTS_HW_PIPELINE_SCHEDULE_H_

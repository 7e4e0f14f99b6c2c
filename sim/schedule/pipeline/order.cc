#include "sim/schedule/pipeline/order.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace shardsim {
namespace {

std::vector<PipeStep> Gpipe(int micro_batches) {
  std::vector<PipeStep> out;
  for (int mb = 0; mb < micro_batches; ++mb) out.push_back({true, mb, 0});
  for (int mb = 0; mb < micro_batches; ++mb) out.push_back({false, mb, 0});
  return out;
}

// Warm-up forwards, then forward k + warmup with backward k, then the rest
// of the backwards: the shape of both Megatron schedules, over the k-th
// forward and k-th backward pass of the stage (`pass`).
template <typename Pass>
std::vector<PipeStep> OneForwardOneBackward(int total, int warmup, Pass pass) {
  std::vector<PipeStep> out;
  for (int k = 0; k < warmup; ++k) out.push_back(pass(k, true));
  for (int k = 0; k + warmup < total; ++k) {
    out.push_back(pass(k + warmup, true));
    out.push_back(pass(k, false));
  }
  for (int k = std::max(0, total - warmup); k < total; ++k) {
    out.push_back(pass(k, false));
  }
  return out;
}

}  // namespace

PipelineSchedule ResolvePipelineSchedule(PipelineSchedule schedule,
                                         int chunks) {
  if (schedule != PIPELINE_SCHEDULE_UNSPECIFIED) return schedule;
  return chunks > 1 ? INTERLEAVED_1F1B : ONE_F_ONE_B;
}

absl::Status CheckStageOrder(PipelineSchedule schedule, int stages, int chunks,
                             int micro_batches) {
  schedule = ResolvePipelineSchedule(schedule, chunks);
  if (schedule != INTERLEAVED_1F1B && chunks != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "field parallelism.vpp: ", chunks, " model chunks a stage need the ",
        "interleaved schedule, not ", PipelineSchedule_Name(schedule)));
  }
  switch (schedule) {
    case GPIPE:
    case ONE_F_ONE_B:
      return absl::OkStatus();
    case INTERLEAVED_1F1B:
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("field parallelism.pipeline_schedule: ",
                       PipelineSchedule_Name(schedule), " is not modelled"));
  }
  if (micro_batches % stages != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "field micro_batches: the interleaved schedule runs micro-batches in "
        "groups of the ",
        stages, " stages; ", micro_batches, " is not a multiple"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PipeStep>> StageOrder(PipelineSchedule schedule,
                                                 int stages, int chunks,
                                                 int micro_batches, int stage) {
  if (absl::Status s = CheckStageOrder(schedule, stages, chunks, micro_batches);
      !s.ok()) {
    return s;
  }
  schedule = ResolvePipelineSchedule(schedule, chunks);
  switch (schedule) {
    case GPIPE:
      return Gpipe(micro_batches);
    case ONE_F_ONE_B:
      return OneForwardOneBackward(micro_batches,
                                   std::min(stages - stage - 1, micro_batches),
                                   [](int k, bool fwd) {
                                     return PipeStep{fwd, k, 0};
                                   });
    default:  // INTERLEAVED_1F1B: CheckStageOrder refused the rest
      break;
  }
  const int total = micro_batches * chunks;
  const int warmup =
      micro_batches == stages
          ? total
          : std::min(total, (stages - stage - 1) * 2 + (chunks - 1) * stages);
  // schedules.py: get_model_chunk_id and the micro-batch within the chunk.
  const int group = stages * chunks;
  return OneForwardOneBackward(total, warmup, [&](int k, bool fwd) {
    int chunk = k % group / stages;
    if (!fwd) chunk = chunks - 1 - chunk;
    return PipeStep{fwd, k / group * stages + k % stages, chunk};
  });
}

}  // namespace shardsim

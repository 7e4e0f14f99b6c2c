// Compute efficiency from measured timelines: a `shardsim-hw run --trace`
// file holds, per rank, every compute op with its FLOPs and measured
// duration, so FLOPs / (duration x peak) is the share of peak each op kind
// reached on that GPU.
#ifndef SHARDSIM_VALIDATE_COMPUTE_H_
#define SHARDSIM_VALIDATE_COMPUTE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/schema/platform.pb.h"

namespace shardsim {

struct ComputeFit {
  std::string kind;  // forward, backward, recompute
  double efficiency = 0;  // median over ops and ranks
  double low = 0;         // smallest and largest seen
  double high = 0;
  int ops = 0;
};

// True when `path` is a Chrome trace (has "traceEvents").
bool IsTimelineFile(const std::string& path);

// Per compute kind, the median share of `platform`'s peak FLOP/s. The
// optimizer step is left out: it is bound by HBM, not FLOPs. Errors name
// the file.
absl::StatusOr<std::vector<ComputeFit>> FitComputeEfficiency(
    const std::string& path, const Platform& platform);

}  // namespace shardsim

#endif  // SHARDSIM_VALIDATE_COMPUTE_H_

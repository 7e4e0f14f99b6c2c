#include "sim/collective/sweep.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "sim/schema/limits.h"

namespace shardsim {

absl::Status ValidateSweep(const CollectiveSweep& sweep,
                           absl::string_view where) {
  FieldCheck c(where);
  c.Rule("op", sweep.op() != OP_UNSPECIFIED, "must be set")
      .Rule("algorithm", sweep.algorithm() != ALGORITHM_UNSPECIFIED,
            "must be set")
      .Count("min_bytes", sweep.min_bytes(), 1, limits::kMaxCollectiveBytes)
      .Count("max_bytes", sweep.max_bytes(), sweep.min_bytes(),
             limits::kMaxCollectiveBytes)
      .Real("step_factor", sweep.step_factor(), 1, 1e6)
      .Rule("step_factor", sweep.step_factor() != 1, "must be > 1")
      .Count("channels", sweep.channels(), 0, limits::kMaxChannels)
      .Count("warmup", sweep.warmup(), 0, 1000000)
      .Count("iters", sweep.iters(), 0, 1000000);
  if (!c.ok()) return c.status();
  const double sizes =
      1 + std::floor(std::log(static_cast<double>(sweep.max_bytes()) /
                              sweep.min_bytes()) /
                     std::log(sweep.step_factor()));
  return c
      .Rule("step_factor", sizes <= limits::kMaxSweepSizes,
            absl::StrCat("from ", sweep.min_bytes(), " to ", sweep.max_bytes(),
                         " bytes by ", Num(sweep.step_factor()), " is ",
                         Num(sizes), " sizes, beyond the limit of ",
                         limits::kMaxSweepSizes))
      .status();
}

int SweepChannels(const CollectiveSweep& sweep, const Platform& platform) {
  return sweep.channels() > 0 ? sweep.channels() : platform.channels();
}

std::vector<CollectiveCall> SweepCalls(const CollectiveSweep& sweep,
                                       const Mesh& mesh) {
  std::vector<CollectiveCall> calls;
  // The small slack keeps max_bytes in when repeated multiplication lands
  // a hair above it.
  for (double size = sweep.min_bytes(); size <= sweep.max_bytes() * (1 + 1e-9);
       size *= sweep.step_factor()) {
    CollectiveCall c;
    c.set_op(sweep.op());
    *c.mutable_group() = GlobalGroup(mesh);
    c.set_bytes(static_cast<int64_t>(std::llround(size)));
    c.set_dtype(FP32);  // nccl-tests' default type
    c.set_algorithm(sweep.algorithm());
    c.set_root(sweep.root());
    calls.push_back(c);
  }
  return calls;
}

double BusFactor(CollectiveOp op, int gpus) {
  const double n = gpus;
  switch (op) {
    case ALL_GATHER:
    case REDUCE_SCATTER:
      return (n - 1) / n;
    case ALL_REDUCE:
      return 2 * (n - 1) / n;
    default:
      return 1;
  }
}

}  // namespace shardsim

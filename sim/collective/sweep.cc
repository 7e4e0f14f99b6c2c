#include "sim/collective/sweep.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "sim/schema/limits.h"

namespace shardsim {

absl::Status ValidateSweep(const SweepSpec& spec, absl::string_view where) {
  FieldCheck c(where);
  c.Count("min_bytes", spec.min_bytes, 1, limits::kMaxCollectiveBytes)
      .Count("max_bytes", spec.max_bytes, spec.min_bytes,
             limits::kMaxCollectiveBytes)
      .Real("step_factor", spec.step_factor, 1, 1e6)
      .Rule("step_factor", spec.step_factor != 1, "must be > 1");
  if (!c.ok()) return c.status();
  const double sizes =
      1 + std::floor(
              std::log(static_cast<double>(spec.max_bytes) / spec.min_bytes) /
              std::log(spec.step_factor));
  return c
      .Rule(
          "step_factor", sizes <= limits::kMaxSweepSizes,
          absl::StrCat("from ", spec.min_bytes, " to ", spec.max_bytes,
                       " bytes by ", Num(spec.step_factor), " is ", Num(sizes),
                       " sizes, beyond the limit of ", limits::kMaxSweepSizes))
      .status();
}

std::vector<CollectiveCall> SweepCalls(const SweepSpec& spec,
                                       const Mesh& mesh) {
  std::vector<CollectiveCall> calls;
  // The small slack keeps max_bytes in when repeated multiplication lands
  // a hair above it.
  for (double size = spec.min_bytes; size <= spec.max_bytes * (1 + 1e-9);
       size *= spec.step_factor) {
    CollectiveCall c;
    c.set_op(spec.op);
    *c.mutable_group() = GlobalGroup(mesh);
    c.set_bytes(static_cast<int64_t>(std::llround(size)));
    c.set_dtype(FP32);  // nccl-tests' default type
    c.set_algorithm(spec.algorithm);
    c.set_root(spec.root);
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

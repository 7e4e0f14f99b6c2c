#include "sim/collective/executor.h"

#include "absl/strings/str_cat.h"
#include "sim/collective/check_data.h"

namespace shardsim {
namespace {

std::string Describe(const Transfer& t) {
  return absl::StrCat("step ", t.step, " channel ", t.channel, " ", t.src, "->",
                      t.dst, " [", t.offset, ", +", t.count, ")",
                      t.reduce ? " reduce" : " copy");
}

}  // namespace

absl::Status ExecutePlan(const Plan& plan,
                         std::vector<std::vector<int64_t>>* buffers) {
  const int p = plan.shape.size();
  if (static_cast<int>(buffers->size()) != p) {
    return absl::InvalidArgumentError(absl::StrCat(
        "executor: ", buffers->size(), " buffers for ", p, " members"));
  }
  std::vector<int64_t> switch_buffer(plan.count, 0);
  auto buffer_of = [&](int who) -> std::vector<int64_t>& {
    return who == kSwitch ? switch_buffer : (*buffers)[who];
  };
  const std::vector<Transfer> transfers = ExpandTransfers(plan);
  std::vector<int64_t> payload;
  for (const auto& [begin, end] : StepRuns(transfers)) {
    // Read every source as the step found it, then write.
    payload.clear();
    for (size_t i = begin; i < end; ++i) {
      const Transfer& t = transfers[i];
      for (int who : {t.src, t.dst}) {
        if (who != kSwitch && (who < 0 || who >= p)) {
          return absl::OutOfRangeError(
              absl::StrCat("executor: member out of group in ", Describe(t)));
        }
      }
      if (t.offset < 0 || t.count < 0 || t.offset + t.count > plan.count) {
        return absl::OutOfRangeError(absl::StrCat(
            "executor: range outside the buffer in ", Describe(t)));
      }
      const std::vector<int64_t>& src = buffer_of(t.src);
      payload.insert(payload.end(), src.begin() + t.offset,
                     src.begin() + t.offset + t.count);
    }
    size_t at = 0;
    for (size_t i = begin; i < end; ++i) {
      const Transfer& t = transfers[i];
      std::vector<int64_t>& dst = buffer_of(t.dst);
      for (int64_t e = 0; e < t.count; ++e) {
        if (t.reduce) {
          dst[t.offset + e] += payload[at + e];
        } else {
          dst[t.offset + e] = payload[at + e];
        }
      }
      at += t.count;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPlan(const Plan& plan) {
  const int p = plan.shape.size();
  const int64_t n = plan.count;
  const DataCheck check(plan.op, p, plan.root, n, CheckValues::Exact());
  std::vector<std::vector<int64_t>> buffers(p, std::vector<int64_t>(n));
  for (int m = 0; m < p; ++m) check.Fill(m, buffers[m].data());
  if (absl::Status s = ExecutePlan(plan, &buffers); !s.ok()) return s;
  if (p > 0 && n > 0 && !DataCheck::Supports(plan.op)) {
    return absl::InvalidArgumentError("executor: unknown op");
  }
  for (int m = 0; m < p; ++m) {
    const DataCheck::Count c = check.Verify(m, buffers[m].data());
    if (c.wrong > 0) {
      const int64_t e = c.first_wrong;
      return absl::InternalError(absl::StrCat(
          CollectiveOp_Name(plan.op), " ", Algorithm_Name(plan.algorithm),
          " on ", plan.shape.per_node, "x", plan.shape.nodes, " count ", n,
          " channels ", plan.channels, ": member ", m, " element ", e, " is ",
          buffers[m][e], ", expected ", check.ExpectedValue(m, e)));
    }
  }
  return absl::OkStatus();
}

}  // namespace shardsim

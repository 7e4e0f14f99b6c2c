#include "sim/memory/allocation.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardsim {
namespace {

// The memory model's line of a buffer, or nullptr for one it lacks.
int64_t* LineOf(const std::string& buffer, MemoryLines* lines) {
  if (buffer == "P shard" || buffer == "P secondary") return &lines->params;
  if (buffer == "G shard") return &lines->grads;
  if (buffer == "OS shard") return &lines->optimizer;
  if (buffer == "activations" || buffer == "recompute") {
    return &lines->activations;
  }
  if (buffer == "P full" || buffer == "G full") return &lines->buffers;
  return nullptr;
}

void Max(const MemoryLines& now, MemoryLines* best) {
  best->params = std::max(best->params, now.params);
  best->grads = std::max(best->grads, now.grads);
  best->optimizer = std::max(best->optimizer, now.optimizer);
  best->activations = std::max(best->activations, now.activations);
  best->buffers = std::max(best->buffers, now.buffers);
}

}  // namespace

absl::StatusOr<AllocationPlan> PlanAllocations(const Schedule& schedule) {
  AllocationPlan plan;
  std::map<int, size_t> live;  // alloc op id -> index in allocations
  MemoryLines now;
  for (const Op& op : schedule.ops()) {
    if (!op.has_memory()) continue;
    const MemoryOp& m = op.memory();
    int64_t* line = LineOf(m.buffer(), &now);
    if (line == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule op ", op.id(), ": buffer \"", m.buffer(),
                       "\" has no line in the memory model"));
    }
    if (m.delta_bytes() > 0) {
      live[op.id()] = plan.allocations.size();
      plan.allocations.push_back({op.id(), -1, m.buffer(), m.delta_bytes()});
    } else {
      auto it = live.find(m.frees());
      if (it == live.end() ||
          plan.allocations[it->second].buffer != m.buffer() ||
          plan.allocations[it->second].bytes != -m.delta_bytes()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "schedule op ", op.id(), ": frees ", -m.delta_bytes(),
            " bytes of \"", m.buffer(), "\" allocated by op ", m.frees(),
            ", which is no live allocation of that buffer and size"));
      }
      plan.allocations[it->second].free_op = op.id();
      live.erase(it);
    }
    *line += m.delta_bytes();
    Max(now, &plan.own_peak);
    if (now.total() > plan.peak_bytes) {
      plan.peak_bytes = now.total();
      plan.peak_op = op.id();
      plan.at_peak = now;
    }
  }
  return plan;
}

MemoryLines LinesOf(const MemoryBreakdown& m) {
  MemoryLines l;
  l.params = m.states.params;
  l.grads = m.states.grads;
  l.optimizer = m.states.optimizer;
  l.activations = m.activations;
  l.buffers = m.buffers;
  return l;
}

std::string FormatAllocationPlan(const AllocationPlan& plan,
                                 const MemoryBreakdown& model) {
  std::string out = absl::StrFormat(
      "allocation plan: %d allocations, peak %.3f GB after op %d\n",
      plan.allocations.size(), plan.peak_bytes / 1e9, plan.peak_op);
  absl::StrAppendFormat(&out, "%-10s %14s %14s %14s\n", "line (GB)",
                        "plan at peak", "plan own peak", "memory model");
  const MemoryLines m = LinesOf(model);
  auto row = [&](const char* name, int64_t a, int64_t b, int64_t c) {
    absl::StrAppendFormat(&out, "%-10s %14.3f %14.3f %14.3f\n", name, a / 1e9,
                          b / 1e9, c / 1e9);
  };
  const MemoryLines& p = plan.at_peak;
  const MemoryLines& o = plan.own_peak;
  row("P", p.params, o.params, m.params);
  row("G", p.grads, o.grads, m.grads);
  row("OS", p.optimizer, o.optimizer, m.optimizer);
  row("act", p.activations, o.activations, m.activations);
  row("buffers", p.buffers, o.buffers, m.buffers);
  row("total", p.total(), o.total(), m.total());
  return out;
}

}  // namespace shardsim

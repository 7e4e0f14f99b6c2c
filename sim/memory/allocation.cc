#include "sim/memory/allocation.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

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

absl::Status NoLine(int id, const MemoryOp& m) {
  return absl::InvalidArgumentError(
      absl::StrCat("schedule op ", id, ": buffer \"", m.buffer(),
                   "\" has no line in the memory model"));
}

// The walk over the step's ops in order, i = 0..n-1: `op_of(i)` is the
// i-th op, `id_of(i)` its id and `frees_of(i)` the id of the op it frees
// (a freeing memory op).
template <typename OpOf, typename IdOf, typename FreesOf>
absl::StatusOr<AllocationPlan> Walk(int n, const OpOf& op_of, const IdOf& id_of,
                                    const FreesOf& frees_of) {
  AllocationPlan plan;
  std::map<int, size_t> live;  // alloc op id -> index in allocations
  MemoryLines now;
  for (int i = 0; i < n; ++i) {
    const Op& op = op_of(i);
    if (!op.has_memory()) continue;
    const int id = id_of(i);
    const MemoryOp& m = op.memory();
    int64_t* line = LineOf(m.buffer(), &now);
    if (line == nullptr) return NoLine(id, m);
    if (m.delta_bytes() > 0) {
      live[id] = plan.allocations.size();
      plan.allocations.push_back({id, -1, m.buffer(), m.delta_bytes()});
    } else {
      const int frees = frees_of(i);
      auto it = live.find(frees);
      if (it == live.end() ||
          plan.allocations[it->second].buffer != m.buffer() ||
          plan.allocations[it->second].bytes != -m.delta_bytes()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "schedule op ", id, ": frees ", -m.delta_bytes(), " bytes of \"",
            m.buffer(), "\" allocated by op ", frees,
            ", which is no live allocation of that buffer and size"));
      }
      plan.allocations[it->second].free_op = id;
      live.erase(it);
    }
    *line += m.delta_bytes();
    Max(now, &plan.own_peak);
    if (now.total() > plan.peak_bytes) {
      plan.peak_bytes = now.total();
      plan.peak_op = id;
      plan.at_peak = now;
    }
  }
  return plan;
}

// The plan of program `program`, whose memory ops are schedule.ops(mine[i]).
absl::StatusOr<AllocationPlan> WalkProgram(const Schedule& schedule,
                                           int program,
                                           const std::vector<int>& mine) {
  absl::StatusOr<AllocationPlan> plan = Walk(
      static_cast<int>(mine.size()),
      [&](int i) -> const Op& { return schedule.ops(mine[i]); },
      [&](int i) { return schedule.ops(mine[i]).id(); },
      [&](int i) { return schedule.ops(mine[i]).memory().frees(); });
  if (plan.ok() && program < schedule.programs_size() &&
      schedule.programs_size() > 1) {
    plan->program = program;
    plan->program_role = schedule.programs(program).role();
  }
  return plan;
}

}  // namespace

namespace {

// Host memory beside the GPU's: each rank's pinned bytes, times the job's
// ranks on a node.
absl::StatusOr<AllocationPlan> WithHost(const Schedule& schedule,
                                        absl::StatusOr<AllocationPlan> plan) {
  if (plan.ok()) {
    plan->host_bytes_per_node =
        schedule.host_bytes_per_gpu() * schedule.gpus_per_node();
  }
  return plan;
}

absl::StatusOr<AllocationPlan> PlanSchedule(const Schedule& schedule) {
  if (schedule.programs_size() <= 1) {
    return Walk(
        schedule.ops_size(),
        [&](int i) -> const Op& { return schedule.ops(i); },
        [&](int i) { return schedule.ops(i).id(); },
        [&](int i) { return schedule.ops(i).memory().frees(); });
  }
  // Each program's memory ops, found in one pass over the step.
  std::vector<std::vector<int>> mine(schedule.programs_size());
  for (int i = 0; i < schedule.ops_size(); ++i) {
    const Op& op = schedule.ops(i);
    if (op.has_memory() && op.program() >= 0 &&
        op.program() < schedule.programs_size()) {
      mine[op.program()].push_back(i);
    }
  }
  std::optional<AllocationPlan> highest;
  for (int p = 0; p < schedule.programs_size(); ++p) {
    absl::StatusOr<AllocationPlan> plan = WalkProgram(schedule, p, mine[p]);
    if (!plan.ok()) return plan.status();
    if (!highest || plan->peak_bytes > highest->peak_bytes) {
      highest = *std::move(plan);
    }
  }
  return *std::move(highest);
}

}  // namespace

absl::StatusOr<AllocationPlan> PlanAllocations(const Schedule& schedule) {
  return WithHost(schedule, PlanSchedule(schedule));
}

absl::StatusOr<AllocationPlan> PlanAllocations(const Schedule& schedule,
                                               int program) {
  std::vector<int> mine;  // indices of the program's memory ops, in order
  for (int i = 0; i < schedule.ops_size(); ++i) {
    const Op& op = schedule.ops(i);
    if (op.has_memory() && op.program() == program) mine.push_back(i);
  }
  return WithHost(schedule, WalkProgram(schedule, program, mine));
}

absl::StatusOr<AllocationPlan> PlanAllocations(const StepOps& ops) {
  const Schedule& base = ops.base();
  if (!ops.fold() || ops.fold()->copies == 0) return PlanAllocations(base);
  const Fold& fold = *ops.fold();
  const int block = fold.r.BlockStart(fold.r.hi);
  const int period = fold.r.period_ops;
  // Each line's deltas over the repeated block.
  MemoryLines net;
  for (int id = block; id < block + period; ++id) {
    const Op& op = base.ops(id);
    if (!op.has_memory()) continue;
    int64_t* line = LineOf(op.memory().buffer(), &net);
    if (line == nullptr) return NoLine(id, op.memory());
    *line += op.memory().delta_bytes();
  }
  if (net.params != 0 || net.grads != 0 || net.optimizer != 0 ||
      net.activations != 0 || net.buffers != 0) {
    return WithHost(
        base,
        Walk(
            ops.size(), [&](int id) -> const Op& { return ops.op(id); },
            [](int id) { return id; }, [&](int id) { return ops.frees(id); }));
  }
  absl::StatusOr<AllocationPlan> plan = PlanAllocations(base);
  if (!plan.ok()) return plan.status();
  if (plan->peak_op >= block + period) {
    plan->peak_op += fold.copies * period;  // in the tail
  }
  return plan;
}

const Gpu& TightestGpu(const Platform& platform) {
  const Gpu* tightest = &platform.gpu();
  auto left = [](const Gpu& g) {
    return g.memory_bytes() - g.reserved_bytes();
  };
  for (const Degraded::Gpus& g : platform.degraded().gpus()) {
    if (g.has_model() && left(g.model().gpu()) < left(*tightest)) {
      tightest = &g.model().gpu();
    }
  }
  return *tightest;
}

StepMemory StepMemoryOf(const AllocationPlan& plan, const Platform& platform) {
  const Gpu& gpu = TightestGpu(platform);
  StepMemory m;
  m.lines = plan.at_peak;
  m.reserved = gpu.reserved_bytes();
  m.peak = plan.peak_bytes + m.reserved;
  m.host_per_node = plan.host_bytes_per_node;
  m.host_oom = m.host_per_node > platform.host().memory_bytes();
  m.oom = m.peak > gpu.memory_bytes() || m.host_oom;
  return m;
}

std::string FormatAllocationPlan(const AllocationPlan& plan) {
  std::string out = absl::StrFormat(
      "allocation plan: %d allocations, peak %.3f GB after op %d\n",
      plan.allocations.size(), plan.peak_bytes / 1e9, plan.peak_op);
  absl::StrAppendFormat(&out, "%-10s %14s %14s\n", "line (GB)", "at peak",
                        "own peak");
  auto row = [&](const char* name, int64_t a, int64_t b) {
    absl::StrAppendFormat(&out, "%-10s %14.3f %14.3f\n", name, a / 1e9,
                          b / 1e9);
  };
  const MemoryLines& p = plan.at_peak;
  const MemoryLines& o = plan.own_peak;
  row("P", p.params, o.params);
  row("G", p.grads, o.grads);
  row("OS", p.optimizer, o.optimizer);
  row("act", p.activations, o.activations);
  row("buffers", p.buffers, o.buffers);
  row("total", p.total(), o.total());
  return out;
}

}  // namespace shardsim

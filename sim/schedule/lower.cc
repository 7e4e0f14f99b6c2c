#include "sim/schedule/lower.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/schedule/lower/activations.h"
#include "sim/schedule/lower/fetch.h"
#include "sim/schedule/lower/gradients.h"
#include "sim/schedule/lower/pass.h"
#include "sim/schedule/lower/recompute.h"
#include "sim/schedule/lower/reducer.h"
#include "sim/schedule/lower/resident.h"
#include "sim/schedule/lower/step.h"
#include "sim/schedule/lower/update.h"
#include "sim/schedule/lower/walk.h"
#include "sim/schedule/pipeline/pipeline.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace {

// The step as passes over one Step (sim/schedule/lower/): first the walk
// (which compute ops, in host order), then the concerns that hang ops on
// it. Their order is the order the framework's host issues their ops at
// one hook (pass.h): the gathers first, then the buffers of the compute op,
// then, after it, the frees and the gradient reduction (sharding G, by
// the strategy's family of reducer).
void Build(const std::vector<Layer>& layers, const Strategy& strategy,
           const Layout& layout, const Scenario& scenario, Schedule* out) {
  lower::Step step(layers, strategy, layout, scenario, out);
  step.segments =
      lower::BuildSegments(layers, strategy.execution(), step.ParamsSharded());
  step.visits =
      lower::WalkMicroBatches(step.segments, scenario.micro_batches());
  lower::RunLoweringPasses(&step, nullptr);
}

}  // namespace

namespace lower {

void RunLoweringPasses(Step* step, Pass* last) {
  InsertRecomputes(step);
  ResidentPass resident(step);        // model states, before all
  FetchPass fetch(step);              // sharding P
  ActivationsPass activations(step);  // what forward keeps
  RecomputePass recompute(step);      // checkpointed layers
  GradientsPass gradients(step, MakeReducer(step));
  UpdatePass update(step);  // sharding OS
  std::vector<Pass*> passes = {&resident,  &fetch,     &activations,
                               &recompute, &gradients, &update};
  if (last != nullptr) passes.push_back(last);
  RunPasses(passes, step);
}

}  // namespace lower

int64_t QuantizedBytes(int64_t elements, int bits) {
  return lower::CeilDiv(elements * bits, 8) +
         lower::CeilDiv(elements, kQuantGroupElements) * kQuantScaleBytes;
}

absl::StatusOr<OwnedSchedule> LowerStep(const std::vector<Layer>& layers,
                                        const Strategy& strategy,
                                        const Mesh& mesh,
                                        const Scenario& scenario) {
  absl::StatusOr<Layout> layout = Layout::Make(mesh, scenario.parallelism());
  if (!layout.ok()) return layout.status();
  if (absl::Status s = ValidateStrategy(strategy, layout->DpMesh()); !s.ok()) {
    return s;
  }
  if (layers.empty()) return absl::InvalidArgumentError("model has no layers");
  if (strategy.execution().gather_unit() == GATHER_UNIT_UNSPECIFIED) {
    return absl::InternalError(
        absl::StrCat("strategy \"", strategy.name(),
                     "\": execution profile not resolved (ResolveExecution)"));
  }
  OwnedSchedule owned;
  Schedule& schedule = *owned.mutable_schedule();
  schedule.set_strategy(strategy.name());
  schedule.set_gpus(mesh.gpus());
  schedule.set_gpus_per_node(mesh.gpus_per_node);
  schedule.set_tokens_per_step(int64_t{layout->dp()} *
                               scenario.micro_batch_size() *
                               scenario.seq_len() * scenario.micro_batches());
  if (layout->pp() > 1) {
    if (absl::Status s =
            LowerPipeline(layers, strategy, *layout, scenario, &schedule);
        !s.ok()) {
      return s;
    }
  } else {
    Build(layers, strategy, *layout, scenario, &schedule);
  }
  return owned;
}

void UseAlgorithms(const Strategy& strategy, Schedule* schedule) {
  for (Op& op : *schedule->mutable_ops()) {
    if (!op.has_collective() || op.collective().algorithm() == DIRECT) continue;
    CollectiveCall* c = op.mutable_collective();
    c->set_algorithm(AlgorithmFor(strategy, c->group()));
  }
}

const KernelList& KernelsOf(const Schedule& schedule, const ComputeOp& op) {
  const int i = op.kernel_list();
  if (i < 0 || i >= schedule.kernel_lists_size()) {
    std::fprintf(stderr,
                 "shardsim: internal error: compute op names kernel list %d "
                 "of %d\n",
                 i, schedule.kernel_lists_size());
    std::abort();
  }
  return schedule.kernel_lists(i);
}

std::string FormatSchedule(const Schedule& s) {
  std::string out = absl::StrFormat(
      "schedule of %s on %d GPUs (%d per node), %d ops, %d tokens per step\n",
      s.strategy(), s.gpus(), s.gpus_per_node(), s.ops_size(),
      s.tokens_per_step());
  absl::StrAppendFormat(&out, "%5s  %-7s %-8s %4s  %-34s %s\n", "id", "stream",
                        "phase", "mb", "op", "details");
  for (const Op& op : s.ops()) {
    std::string details;
    switch (op.body_case()) {
      case Op::kCompute:
        details = absl::StrFormat("%.3f GFLOP, %d kernels",
                                  op.compute().flops() / 1e9,
                                  KernelsOf(s, op.compute()).kernels_size());
        break;
      case Op::kCollective: {
        const CollectiveCall& c = op.collective();
        details = absl::StrFormat(
            "%s over %s, %s, %.3f MB %s", CollectiveOp_Name(c.op()),
            GroupName(c.group()), Algorithm_Name(c.algorithm()),
            c.bytes() / 1e6, DType_Name(c.dtype()));
        if (c.op() == BROADCAST) absl::StrAppend(&details, ", root ", c.root());
        break;
      }
      case Op::kMemory:
        details = absl::StrFormat("%+.3f MB", op.memory().delta_bytes() / 1e6);
        break;
      default:
        break;
    }
    if (op.deps_size() > 0) {
      absl::StrAppend(&details, "  after ", absl::StrJoin(op.deps(), ","));
    }
    absl::StrAppendFormat(
        &out, "%5d  %-7s %-8s %4s  %-34s %s\n", op.id(),
        absl::AsciiStrToLower(Stream_Name(op.stream())),
        absl::AsciiStrToLower(Phase_Name(op.phase())),
        op.micro_batch() >= 0 ? absl::StrCat(op.micro_batch()) : "-",
        op.label(), details);
  }
  return out;
}

}  // namespace shardsim

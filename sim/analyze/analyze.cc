#include "sim/analyze/analyze.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/base/layout.h"
#include "sim/memory/allocation.h"
#include "sim/model/model.h"
#include "sim/strategy/composition.h"
#include "sim/strategy/execution.h"
#include "sim/strategy/strategy.h"
#include "sim/traffic/traffic.h"

namespace shardsim {

namespace {

void SetName(const Job& job, const std::string& spec, int gpus,
             ResultRow* row) {
  row->set_strategy(spec);
  row->set_gpus(gpus);
  row->set_model(job.model.name());
  row->set_platform(job.platform.name());
}

}  // namespace

void SetNameAndMemory(const Job& job, const std::string& spec, int gpus,
                      const AllocationPlan& plan, ResultRow* row) {
  SetName(job, spec, gpus, row);
  const StepMemory mem = StepMemoryOf(plan, job.platform);
  row->set_param_bytes(mem.lines.params);
  row->set_grad_bytes(mem.lines.grads);
  row->set_optimizer_bytes(mem.lines.optimizer);
  row->set_activation_bytes(mem.lines.activations);
  row->set_buffer_bytes(mem.lines.buffers);
  row->set_reserved_bytes(mem.reserved);
  row->set_peak_memory_bytes(mem.peak);
  row->set_oom(mem.oom);
  row->set_gpu_memory_bytes(TightestGpu(job.platform).memory_bytes());
  if (mem.host_per_node > 0) {
    row->set_host_memory_bytes(mem.host_per_node);
    row->set_host_oom(mem.host_oom);
  }
  if (!plan.program_role.empty()) {
    row->set_peak_memory_program(plan.program_role);
  }
}

namespace {

// A point resolved and checked: everything but the schedule.
struct Resolved {
  Scenario scenario;
  Strategy strategy;
  Mesh mesh;
  std::vector<Layer> layers;
};

// ZeRO-Offload (sim/schedule/lower/offload.h) as modelled: the platform
// gives its host side, and DeepSpeed moves each gradient to the host once a
// step. Where it moves them every micro-batch it is refused, not
// simulated short.
absl::Status CheckOffload(const Job& job, const std::string& spec, int gpus,
                          const Strategy& strategy, const Scenario& at) {
  if (!strategy.execution().offload_optimizer()) return absl::OkStatus();
  const std::string where = PointName(job, spec, gpus);
  const Host& host = job.platform.host();
  const char* missing = host.pcie_bytes_per_s() <= 0 ? "pcie_bytes_per_s"
                        : host.cpu_adam_params_per_s() <= 0
                            ? "cpu_adam_params_per_s"
                        : host.memory_bytes() <= 0 ? "memory_bytes"
                                                   : nullptr;
  if (missing != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "offload_optimizer needs platform \"", job.platform.name(),
        "\"'s host.", missing,
        " (the host side of ZeRO-Offload), which it does not give"));
  }
  if (FactorSize(strategy.p()) > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        "offload_optimizer with sharded parameters (stage 3, MiCS, ZeRO++) "
        "is not modelled: DeepSpeed moves each micro-batch's gradient "
        "partition to the host and back (stage3.py, partition_grads)"));
  }
  if (strategy.execution().reduce_every_micro_batch() &&
      at.micro_batches() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "offload_optimizer at ", at.micro_batches(),
        " micro-batches is not modelled for stage 2: DeepSpeed accumulates "
        "each micro-batch's gradients in host memory through the GPU "
        "(stage_1_and_2.py, async_accumulate_grad_in_cpu_via_gpu)"));
  }
  return absl::OkStatus();
}

// FSDP2's float8 all-gather is a hook on FSDP's sharded parameters: other
// frameworks, and strategies that keep parameters whole, have no gather to
// run in float8.
absl::Status CheckFloat8Gather(const Job& job, const std::string& spec,
                               int gpus, const Strategy& strategy) {
  if (!job.scenario.kernels().float8().fsdp_all_gather())
    return absl::OkStatus();
  if (strategy.execution().framework() != FSDP ||
      FactorSize(strategy.p()) == 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        PointName(job, spec, gpus),
        "kernels.float8.fsdp_all_gather is FSDP2's all-gather of sharded "
        "parameters in float8; this strategy (",
        FrameworkName(strategy.execution().framework()),
        FactorSize(strategy.p()) == 1 ? ", parameters whole" : "",
        ") gathers none that way"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Resolved> Resolve(const Job& job, const std::string& spec,
                                 int gpus) {
  absl::StatusOr<Mesh> mesh = JobMesh(job.platform, gpus);
  if (!mesh.ok())
    return absl::InvalidArgumentError(
        absl::StrCat(job.path, ": field gpus: ", mesh.status().message()));
  absl::StatusOr<Layout> layout =
      Layout::Make(*mesh, job.scenario.parallelism());
  if (!layout.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(PointName(job, spec, gpus), layout.status().message()));
  }
  // The strategy shards over the data-parallel ranks.
  absl::StatusOr<Strategy> strategy =
      ParseStrategy(spec, layout->DpMesh(), job.base_dir);
  if (!strategy.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(PointName(job, spec, gpus), strategy.status().message()));
  }
  if (const std::string why =
          UnsupportedComposition(*strategy, job.scenario.parallelism());
      !why.empty() && !job.scenario.what_if()) {
    return absl::InvalidArgumentError(
        absl::StrCat(PointName(job, spec, gpus), why,
                     "; field what_if (--what-if) simulates it anyway"));
  }
  if (absl::Status s = ResolveExecution(job.scenario.execution(),
                                        job.model.hidden(), &*strategy);
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        job.path, ": field ", s.message(), " (strategy \"", spec, "\")"));
  }
  absl::StatusOr<Scenario> scenario = ScenarioAt(job.scenario, gpus);
  if (!scenario.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        job.path,
        ": field global_batch_tokens: ", scenario.status().message()));
  }
  if (absl::Status s = CheckOffload(job, spec, gpus, *strategy, *scenario);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckFloat8Gather(job, spec, gpus, *strategy); !s.ok()) {
    return s;
  }
  return Resolved{*scenario, *strategy, *mesh,
                  ModelLayers(job.model, ScenarioBatch(*scenario))};
}

// The step lowered at FoldBase micro-batches and folded to its own count,
// where that fold one block on is exactly the step lowered one block
// longer: the lowering then repeats a block the way Fold says. nullopt
// otherwise, lowering errors included (the whole step's lowering reports
// them).
struct Folded {
  OwnedSchedule base;
  Fold fold;
};
std::optional<Folded> LowerFolded(const Resolved& r) {
  const Parallelism& par = r.scenario.parallelism();
  const int micro_batches = r.scenario.micro_batches();
  const int at_base = FoldBase(par.pp(), par.vpp());
  const int stride = FoldStride(par.pp(), par.vpp());
  Scenario at = r.scenario;
  at.set_micro_batches(at_base);
  absl::StatusOr<OwnedSchedule> base =
      LowerStep(r.layers, r.strategy, r.mesh, at);
  at.set_micro_batches(at_base + stride);
  absl::StatusOr<OwnedSchedule> next =
      LowerStep(r.layers, r.strategy, r.mesh, at);
  if (!base.ok() || !next.ok()) return std::nullopt;
  // Tokens are per micro-batch times the count (checked with the rest).
  const int64_t tokens = (*base)->tokens_per_step() / at_base;
  std::string why;
  std::optional<Fold> f = FoldOf(**base, 1, tokens * (at_base + stride), &why);
  if (!f || f->r.stride != stride ||
      Unfold(StepOps(**base, *f))->SerializeAsString() !=
          (*next)->SerializeAsString()) {
    return std::nullopt;
  }
  f->copies = (micro_batches - at_base) / stride;
  f->tokens_per_step = tokens * micro_batches;
  return Folded{*std::move(base), *f};
}

}  // namespace

std::string PointName(const Job& job, const std::string& spec, int gpus) {
  return absl::StrCat(job.path, ": field strategies: \"", spec, "\" at ", gpus,
                      " GPUs: ");
}

absl::StatusOr<Point> LowerPoint(const Job& job, const std::string& spec,
                                 int gpus, Storage storage) {
  absl::StatusOr<Resolved> r = Resolve(job, spec, gpus);
  if (!r.ok()) return r.status();
  std::optional<Point> point;
  if (storage == Storage::kFolded && FoldsAt(r->scenario)) {
    if (std::optional<Folded> f = LowerFolded(*r)) {
      point = Point{std::move(r->scenario),
                    std::move(r->strategy),
                    r->mesh,
                    std::move(f->base),
                    f->fold,
                    {}};
    }
  }
  if (!point) {
    absl::StatusOr<OwnedSchedule> schedule =
        LowerStep(r->layers, r->strategy, r->mesh, r->scenario);
    if (!schedule.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          PointName(job, spec, gpus), schedule.status().message()));
    }
    point = Point{std::move(r->scenario), std::move(r->strategy), r->mesh,
                  *std::move(schedule),   std::nullopt,           {}};
  }
  absl::StatusOr<AllocationPlan> plan = PlanAllocations(point->ops());
  if (!plan.ok()) {
    return absl::InternalError(
        absl::StrCat(PointName(job, spec, gpus), plan.status().message()));
  }
  SetNameAndMemory(job, spec, gpus, *plan, &point->row);
  return *std::move(point);
}

absl::StatusOr<Point> AnalyzePoint(const Job& job, const std::string& spec,
                                   int gpus, Storage storage) {
  absl::StatusOr<Point> point = LowerPoint(job, spec, gpus, storage);
  if (!point.ok()) return point.status();
  absl::StatusOr<std::vector<TrafficEntry>> traffic =
      CountTraffic(point->ops(), point->mesh, job.platform);
  if (!traffic.ok()) {
    return absl::InternalError(
        absl::StrCat(PointName(job, spec, gpus), traffic.status().message()));
  }
  ResultRow& row = point->row;
  for (TrafficEntry& e : *traffic) {
    row.set_intra_node_bytes(row.intra_node_bytes() + e.intra_node_bytes());
    row.set_inter_node_bytes(row.inter_node_bytes() + e.inter_node_bytes());
    *row.add_traffic() = std::move(e);
  }
  return point;
}

absl::Status RenamePoint(const Job& job, const std::string& spec, int gpus,
                         ResultRow* row) {
  // The point's own memory: schedules the engine replays alike may differ
  // in their memory ops alone (ReplayDigest leaves them out).
  absl::StatusOr<Point> own = LowerPoint(job, spec, gpus, Storage::kFolded);
  if (!own.ok()) return own.status();
  absl::StatusOr<AllocationPlan> plan = PlanAllocations(own->ops());
  if (!plan.ok()) return plan.status();
  SetNameAndMemory(job, spec, gpus, *plan, row);
  return absl::OkStatus();
}

absl::Status CheckPoints(const Job& job) {
  for (const std::string& spec : job.scenario.strategies()) {
    for (int gpus : job.scenario.gpus()) {
      if (absl::StatusOr<Resolved> r = Resolve(job, spec, gpus); !r.ok()) {
        return r.status();
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Results> AnalyzeJob(const Job& job, Analysis what) {
  Results results;
  results.set_scenario(job.path);
  for (const std::string& spec : job.scenario.strategies()) {
    for (int gpus : job.scenario.gpus()) {
      if (what == Analysis::kMemory) {
        absl::StatusOr<Point> point =
            LowerPoint(job, spec, gpus, Storage::kFolded);
        if (!point.ok()) return point.status();
        *results.add_rows() = std::move(point->row);
        continue;
      }
      absl::StatusOr<Point> point =
          AnalyzePoint(job, spec, gpus, Storage::kFolded);
      if (!point.ok()) return point.status();
      *results.add_rows() = std::move(point->row);
    }
  }
  return results;
}

int FoldBase(int pp, int vpp) {
  if (pp <= 1) return kFoldAt;
  if (vpp > 1) return (kFoldAt + 2) * pp;
  return kFoldAt + 3 * (pp - 1);
}

bool FoldsAt(const Scenario& scenario) {
  const Parallelism& par = scenario.parallelism();
  const int stride = FoldStride(par.pp(), par.vpp());
  const int m = scenario.micro_batches();
  const int base = FoldBase(par.pp(), par.vpp());
  return m > base + stride && (m - base) % stride == 0 &&
         (par.pp() <= 1 || m >= kFoldGain * base);
}

void SetStepTime(const Job& job, const Point& point, double step_time_s,
                 ResultRow* row) {
  const int64_t tokens = point.ops().tokens_per_step();
  const int gpus = row->gpus();
  Batch whole = ScenarioBatch(point.scenario);
  whole.tp = whole.cp = 1;
  whole.sequence_parallel = false;
  const double micro_batches_in_step =
      static_cast<double>(tokens) / (whole.micro_batch_size * whole.seq_len);
  const double flops_per_gpu =
      ModelFlopsPerMicroBatch(job.model, whole) * micro_batches_in_step / gpus;
  row->set_step_time_s(step_time_s);
  row->set_tokens_per_gpu_per_s(tokens / static_cast<double>(gpus) /
                                step_time_s);
  row->set_tflops_per_gpu(flops_per_gpu / step_time_s / 1e12);
  row->set_mfu(flops_per_gpu / step_time_s / job.platform.gpu().peak_flops());
}

}  // namespace shardsim

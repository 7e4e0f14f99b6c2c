// Memory relations over every built-in model, shipped platform and named
// strategy: more GPUs never raise a ZeRO-family strategy's model states,
// recomputation and flash attention never raise activations, the parts sum
// to the peak, and a point is out of memory exactly when its peak exceeds
// the GPU's capacity; a pipeline stage holds no more activations than its
// schedule keeps in flight, however many micro-batches.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "sim/analyze/analyze.h"
#include "sim/memory/allocation.h"
#include "sim/model/model.h"
#include "sim/schedule/pipeline/pipeline.h"
#include "tests/properties/property.h"

namespace shardsim::property {
namespace {

struct MemoryCase {
  std::string model;
  std::string platform;
  std::string strategy;
  int micro_batch_size = 1;
  int seq_len = 1024;
  bool recompute = false;
  bool flash_attention = false;
};

MemoryCase AnyMemoryCase() {
  MemoryCase c;
  c.model = *rc::gen::elementOf(BuiltinModelNames());
  c.platform = *rc::gen::elementOf(ShippedPlatforms());
  c.strategy = *AnyNamedStrategy();
  c.micro_batch_size = *rc::gen::inRange(1, 9);
  c.seq_len = *rc::gen::element(256, 512, 1024, 2048, 4096);
  c.recompute = *rc::gen::arbitrary<bool>();
  c.flash_attention = *rc::gen::arbitrary<bool>();
  RC_LOG() << c.model << " on " << c.platform << ", " << c.strategy << ", "
           << c.micro_batch_size << " x " << c.seq_len << ", recompute "
           << c.recompute << ", flash " << c.flash_attention << "\n";
  return c;
}

// The memory rows of `c` at each of `gpus`, in order; an error where the
// strategy cannot run at one of them (a shard wider than the job).
absl::StatusOr<Job> MemoryJob(const MemoryCase& c,
                              const std::vector<int>& gpus) {
  Scenario sc;
  sc.set_name("property");
  sc.set_model(c.model);
  sc.set_platform(c.platform);
  sc.add_strategies(c.strategy);
  for (int g : gpus) sc.add_gpus(g);
  sc.set_micro_batch_size(c.micro_batch_size);
  sc.set_micro_batches(1);
  sc.set_seq_len(c.seq_len);
  sc.set_recompute(c.recompute);
  sc.set_flash_attention(c.flash_attention);
  sc.set_optimizer_bytes_per_param(12);
  return ResolveJob("property.textproto", sc);
}

absl::StatusOr<Results> MemoryRows(const MemoryCase& c,
                                   const std::vector<int>& gpus) {
  absl::StatusOr<Job> job = MemoryJob(c, gpus);
  if (!job.ok()) return job.status();
  return AnalyzeJob(*job, Analysis::kMemory);
}

// The activation line's own highest point over the step, from the
// allocation plan: what recomputation and flash attention act on. (A
// row's activation_bytes is the line at the step's peak moment, which
// moves when the peak moves: with less kept, the peak can come earlier,
// where more activations are live.)
absl::StatusOr<int64_t> ActivationPeak(const MemoryCase& c, int gpus) {
  absl::StatusOr<Job> job = MemoryJob(c, {gpus});
  if (!job.ok()) return job.status();
  absl::StatusOr<Point> point = LowerPoint(*job, c.strategy, gpus);
  if (!point.ok()) return point.status();
  absl::StatusOr<AllocationPlan> plan = PlanAllocations(point->ops());
  if (!plan.ok()) return plan.status();
  return plan->own_peak.activations;
}

int64_t ModelStates(const ResultRow& r) {
  return r.param_bytes() + r.grad_bytes() + r.optimizer_bytes();
}

TEST(Memory, MoreGpusNeverRaiseModelStates) {
  Check(400, [] {
    const MemoryCase c = AnyMemoryCase();
    const int fewer = 8 << *rc::gen::inRange(0, 7);
    const int more = fewer << *rc::gen::inRange(1, 4);
    const absl::StatusOr<Results> r = MemoryRows(c, {fewer, more});
    RC_PRE(r.ok());
    RC_LOG() << fewer << " GPUs: " << ModelStates(r->rows(0)) << " B, " << more
             << " GPUs: " << ModelStates(r->rows(1)) << " B\n";
    RC_ASSERT(ModelStates(r->rows(1)) <= ModelStates(r->rows(0)));
  });
}

TEST(Memory, RecomputationAndFlashAttentionNeverRaiseActivations) {
  Check(400, [] {
    MemoryCase off = AnyMemoryCase();
    const bool flip_recompute = *rc::gen::arbitrary<bool>();
    off.recompute = flip_recompute ? false : off.recompute;
    off.flash_attention = flip_recompute ? off.flash_attention : false;
    MemoryCase on = off;
    (flip_recompute ? on.recompute : on.flash_attention) = true;
    const int gpus = 8 << *rc::gen::inRange(0, 5);
    const absl::StatusOr<int64_t> a = ActivationPeak(off, gpus);
    RC_PRE(a.ok());
    const absl::StatusOr<int64_t> b = ActivationPeak(on, gpus);
    RC_ASSERT(b.ok());
    RC_LOG() << (flip_recompute ? "recompute" : "flash attention") << ": " << *a
             << " B -> " << *b << " B\n";
    RC_ASSERT(*b <= *a);
  });
}

TEST(Memory, PartsSumToThePeakAndOutOfMemoryIsAboveCapacity) {
  Check(400, [] {
    const MemoryCase c = AnyMemoryCase();
    const int gpus = 8 << *rc::gen::inRange(0, 8);
    const absl::StatusOr<Results> r = MemoryRows(c, {gpus});
    RC_PRE(r.ok());
    const ResultRow& row = r->rows(0);
    RC_ASSERT(row.param_bytes() + row.grad_bytes() + row.optimizer_bytes() +
                  row.activation_bytes() + row.buffer_bytes() +
                  row.reserved_bytes() ==
              row.peak_memory_bytes());
    RC_ASSERT(row.oom() == (row.peak_memory_bytes() >
                            Shipped(c.platform).gpu().memory_bytes()));
  });
}

// A pipelined point: a built-in model cut to p v k blocks, p stages of v
// chunks each, tp x p x dp GPUs, m micro-batches.
struct PipeCase {
  std::string model, strategy;
  int p = 2, v = 1, k = 1, tp = 1, dp = 1;
  PipelineSchedule schedule = ONE_F_ONE_B;
  RecomputeGranularity recompute = RECOMPUTE_NONE;
};

PipeCase AnyPipeCase() {
  PipeCase c;
  c.model = *rc::gen::elementOf(BuiltinModelNames());
  c.strategy = *AnyNamedStrategy();
  c.p = *rc::gen::element(2, 3, 4);
  c.schedule = *rc::gen::element(ONE_F_ONE_B, GPIPE, INTERLEAVED_1F1B);
  c.v = c.schedule == INTERLEAVED_1F1B ? *rc::gen::inRange(2, 4) : 1;
  c.k = *rc::gen::inRange(1, 3);
  c.tp = *rc::gen::element(1, 2);
  c.dp = *rc::gen::element(1, 2);
  c.recompute =
      *rc::gen::element(RECOMPUTE_NONE, RECOMPUTE_FULL, RECOMPUTE_SELECTIVE);
  RC_LOG() << c.model << ", " << c.strategy << ", pp " << c.p << " vpp " << c.v
           << " (" << PipelineSchedule_Name(c.schedule) << "), "
           << c.p * c.v * c.k << " blocks, tp " << c.tp << ", dp " << c.dp
           << ", " << RecomputeGranularity_Name(c.recompute) << "\n";
  return c;
}

absl::StatusOr<Point> PipePoint(const PipeCase& c, int micro_batches) {
  absl::StatusOr<Model> model = BuiltinModel(c.model);
  if (!model.ok()) return model.status();
  Scenario sc;
  sc.set_name("property");
  *sc.mutable_model_def() = *model;
  sc.mutable_model_def()->set_layers(c.p * c.v * c.k);
  sc.set_platform("dgx_a100");
  sc.add_strategies(c.strategy);
  const int gpus = c.tp * c.p * c.dp;
  sc.add_gpus(gpus);
  sc.set_micro_batch_size(1);
  sc.set_micro_batches(micro_batches);
  sc.set_seq_len(1024);
  sc.set_flash_attention(true);
  sc.set_optimizer_bytes_per_param(12);
  sc.set_recompute_granularity(c.recompute);
  sc.mutable_parallelism()->set_tp(c.tp);
  sc.mutable_parallelism()->set_pp(c.p);
  sc.mutable_parallelism()->set_vpp(c.v);
  sc.mutable_parallelism()->set_pipeline_schedule(c.schedule);
  absl::StatusOr<Job> job = ResolveJob("property.textproto", sc);
  if (!job.ok()) return job.status();
  return LowerPoint(*job, c.strategy, gpus);
}

// Chunk passes stage s holds at once (order.h): GPipe every forward,
// 1F1B its warm-up and one, the interleaved schedule its warm-up and one
// (every pass when m == p, Megatron's all-forwards-first case).
int InFlight(const PipeCase& c, int s, int m) {
  switch (c.schedule) {
    case GPIPE:
      return m;
    case ONE_F_ONE_B:
      return std::min(c.p - s, m);
    default:
      return m == c.p
                 ? m * c.v
                 : std::min(m * c.v, 2 * (c.p - s - 1) + (c.v - 1) * c.p + 1);
  }
}

// Stage s's activation peak against what its schedule keeps: at most
// InFlight chunk passes of its largest chunk's activations, plus the
// largest recompute working set (one layer's, in one backward at a time).
void CheckStage(const PipeCase& c, const Point& point, int s, int m) {
  absl::StatusOr<std::vector<std::vector<int>>> vstages =
      VirtualStageLayers(c.p * c.v * c.k, c.p, c.v, {});
  RC_ASSERT(vstages.ok());
  std::vector<int> chunk_of;  // stage-local layer index -> chunk
  for (int ch = 0; ch < c.v; ++ch) {
    chunk_of.insert(chunk_of.end(), (*vstages)[ch * c.p + s].size(), ch);
  }
  std::vector<int64_t> chunk(c.v, 0);
  int64_t working = 0;
  for (const Op& op : point.schedule->ops()) {
    if (op.program() != s || !op.has_memory()) continue;
    const int64_t bytes = op.memory().delta_bytes();
    if (op.memory().buffer() == "activations" && bytes > 0 &&
        op.micro_batch() == 0) {
      chunk[chunk_of.at(op.layer())] += bytes;
    }
    if (op.memory().buffer() == "recompute") working = std::max(working, bytes);
  }
  const absl::StatusOr<AllocationPlan> plan =
      PlanAllocations(*point.schedule, s);
  RC_ASSERT(plan.ok());
  const int64_t bound =
      InFlight(c, s, m) * *std::max_element(chunk.begin(), chunk.end()) +
      working;
  RC_LOG() << "stage " << s << " at " << m
           << " micro-batches: " << plan->own_peak.activations << " B, bound "
           << bound << "\n";
  RC_ASSERT(plan->own_peak.activations <= bound);
}

TEST(Memory, PipelineStagesHoldNoMoreThanTheScheduleKeepsInFlight) {
  Check(150, [] {
    const PipeCase c = AnyPipeCase();
    // Past 2p micro-batches the 1F1B schedules' in-flight count is fixed.
    const int m = c.p * *rc::gen::inRange(2, 4);
    const absl::StatusOr<Point> a = PipePoint(c, m);
    RC_PRE(a.ok());
    const absl::StatusOr<Point> b = PipePoint(c, 2 * m);
    RC_ASSERT(b.ok());
    for (int s = 0; s < c.p; ++s) {
      CheckStage(c, *a, s, m);
      CheckStage(c, *b, s, 2 * m);
      if (c.schedule == GPIPE) continue;
      const absl::StatusOr<AllocationPlan> pa =
          PlanAllocations(*a->schedule, s);
      const absl::StatusOr<AllocationPlan> pb =
          PlanAllocations(*b->schedule, s);
      RC_ASSERT(pa.ok() && pb.ok());
      RC_ASSERT(pb->own_peak.activations == pa->own_peak.activations);
    }
  });
}

}  // namespace
}  // namespace shardsim::property

// Memory relations over every built-in model, shipped platform and named
// strategy: more GPUs never raise a ZeRO-family strategy's model states,
// recomputation and flash attention never raise activations, the parts sum
// to the peak, and a point is out of memory exactly when its peak exceeds
// the GPU's capacity.
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "sim/analyze/analyze.h"
#include "sim/memory/allocation.h"
#include "sim/model/model.h"
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

}  // namespace
}  // namespace shardsim::property

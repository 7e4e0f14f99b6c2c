// What the engine reports agrees with itself: the breakdown adds up to the
// step, the engine's exact shortcuts (micro-batch collapse, replayed lone
// stages, network symmetry) and --jobs change no step, and strategies that
// are the same on one node give the same row there.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "sim/simulate/simulate.h"
#include "tests/properties/property.h"

namespace shardsim::property {
namespace {

// Equal to SimGrid's resolution (1e-9 s, as tests/engine_test.cc).
bool Same(double a, double b) {
  return std::abs(a - b) <= std::max(1e-9 * std::max(a, b), 1e-9);
}

// `job` simulated with `options`; nothing where it cannot run.
std::optional<Results> Simulate(const Job& job, const EngineOptions& options) {
  absl::StatusOr<Results> r = SimulateJob(job, options);
  if (!r.ok()) return std::nullopt;
  return *r;
}

// LLaMA-7B cut to 2 layers on a drawn platform with drawn micro-batches,
// running `strategies` on `gpus` GPUs.
absl::StatusOr<Job> AnyJob(const std::vector<std::string>& strategies,
                           int gpus) {
  const Platform p = AnyPlatform();
  const int micro_batch_size = *rc::gen::inRange(1, 5);
  const int micro_batches = *rc::gen::inRange(1, 10);
  const int seq_len = *rc::gen::element(256, 512, 1024);
  RC_LOG() << Describe(p) << "; " << gpus << " GPUs, " << micro_batches
           << " micro-batches of " << micro_batch_size << " x " << seq_len
           << "\n";
  absl::StatusOr<Job> job = SmallJob(p, strategies[0], gpus, micro_batch_size,
                                     micro_batches, seq_len);
  if (!job.ok()) return job;
  job->scenario.clear_strategies();
  for (const std::string& s : strategies) job->scenario.add_strategies(s);
  return job;
}

TEST(Consistency, TheBreakdownAddsUpToTheStep) {
  Check(400, [] {
    const std::string strategy = *AnyNamedStrategy();
    RC_LOG() << strategy << "\n";
    const absl::StatusOr<Job> job =
        AnyJob({strategy}, *rc::gen::element(8, 16, 32, 64, 128));
    RC_PRE(job.ok());
    const std::optional<Results> r = Simulate(*job, EngineOptions());
    RC_PRE(r.has_value() && r->rows(0).has_step_time_s());
    const ResultRow& row = r->rows(0);
    const Breakdown& b = row.breakdown();
    const double parts = b.compute_s() + b.compute_slowdown_s() +
                         b.optimizer_s() + b.bandwidth_s() + b.latency_s() +
                         b.launch_overhead_s() + b.prefetch_wait_s() +
                         b.prefetch_depth_s();
    RC_LOG() << "parts " << parts << " s, step " << row.step_time_s() << "\n";
    RC_ASSERT(Same(parts, row.step_time_s()));
  });
}

TEST(Consistency, ShortcutsAndJobsChangeNoStep) {
  Check(300, [] {
    const std::string strategy = *AnyNamedStrategy();
    RC_LOG() << strategy << "\n";
    const absl::StatusOr<Job> job =
        AnyJob({strategy}, *rc::gen::element(16, 32, 64, 128));
    RC_PRE(job.ok());
    EngineOptions all;
    const std::optional<Results> with = Simulate(*job, all);
    RC_PRE(with.has_value() && with->rows(0).has_step_time_s());
    // Some of the shortcuts off (at least one), one job or two.
    EngineOptions some;
    do {
      some.collapse = *rc::gen::arbitrary<bool>();
      some.replay_stages = *rc::gen::arbitrary<bool>();
      some.network_symmetry = *rc::gen::arbitrary<bool>();
    } while (some.collapse && some.replay_stages && some.network_symmetry);
    some.jobs = *rc::gen::inRange(1, 3);
    const std::optional<Results> without = Simulate(*job, some);
    RC_ASSERT(without.has_value());
    RC_LOG() << with->rows(0).step_time_s() << " s with every shortcut, "
             << without->rows(0).step_time_s() << " s with collapse "
             << some.collapse << ", stage replay " << some.replay_stages
             << ", network symmetry " << some.network_symmetry << ", "
             << some.jobs << " jobs\n";
    RC_ASSERT(
        Same(with->rows(0).step_time_s(), without->rows(0).step_time_s()));
  });
}

// On one node of 8 GPUs: MiCS's shard is the node, as ZeRO-3's whole
// group; HYBRID_SHARD shards within the node and replicates across none;
// PaRO's IGG and IIG differ only in the inter-node group of gradients.
TEST(Consistency, StrategiesTheSameOnOneNodeGiveOneRow) {
  Check(200, [] {
    const std::pair<std::string, std::string> twins = *rc::gen::element(
        std::make_pair(std::string("zero3"), std::string("mics")),
        std::make_pair(std::string("fsdp:FULL_SHARD"),
                       std::string("fsdp:HYBRID_SHARD")),
        std::make_pair(std::string("paro-IGG"), std::string("paro-IIG")));
    RC_LOG() << twins.first << " against " << twins.second << "\n";
    const absl::StatusOr<Job> job = AnyJob({twins.first, twins.second}, 8);
    RC_PRE(job.ok());
    const std::optional<Results> r = Simulate(*job, EngineOptions());
    RC_ASSERT(r.has_value());
    const ResultRow& a = r->rows(0);
    const ResultRow& b = r->rows(1);
    RC_ASSERT(a.peak_memory_bytes() == b.peak_memory_bytes());
    RC_ASSERT(a.intra_node_bytes() == b.intra_node_bytes());
    RC_ASSERT(a.inter_node_bytes() == b.inter_node_bytes());
    RC_ASSERT(a.has_step_time_s() == b.has_step_time_s());
    if (a.has_step_time_s()) {
      RC_LOG() << a.step_time_s() << " s against " << b.step_time_s() << " s\n";
      RC_ASSERT(Same(a.step_time_s(), b.step_time_s()));
    }
  });
}

}  // namespace
}  // namespace shardsim::property

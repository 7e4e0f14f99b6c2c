// `shardsim plan`'s search: its lower bound never exceeds the step the
// engine simulates, so pruning keeps the answer, and its best point is
// never slower than a named preset; for any platform (oversubscribed
// leaves included, where the bound counts the up-links), GPU count and
// batch, on the tiny model (tests/data/tiny_model.textproto).
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "sim/search/search.h"
#include "tests/properties/property.h"

namespace shardsim::property {
namespace {

TEST(Plan, TheBoundIsSoundAndTheBestBeatsEveryPreset) {
  Check(10, [] {
    Scenario sc;
    sc.set_name("property");
    sc.set_model(std::string(SHARDSIM_SOURCE_DIR) +
                 "/tests/data/tiny_model.textproto");
    *sc.mutable_platform_def() = AnyPlatform();
    sc.add_strategies("zero3");  // replaced by the candidates
    const int gpus = *rc::gen::element(8, 16, 32, 64);
    sc.add_gpus(gpus);
    sc.set_micro_batch_size(*rc::gen::inRange(1, 5));
    sc.set_micro_batches(*rc::gen::inRange(1, 5));
    sc.set_seq_len(*rc::gen::element(256, 512, 1024));
    sc.set_optimizer_bytes_per_param(12);
    RC_LOG() << Describe(sc.platform_def()) << "; " << gpus << " GPUs, "
             << sc.micro_batches() << " micro-batches of "
             << sc.micro_batch_size() << " x " << sc.seq_len() << "\n";
    absl::StatusOr<Job> job = ResolveJob("property.textproto", sc);
    RC_ASSERT(job.ok());
    SearchOptions every;
    every.exhaustive = true;
    every.algorithms = *rc::gen::arbitrary<bool>();
    every.settings = false;
    every.top = 100000;
    SearchOptions pruned = every;
    pruned.exhaustive = false;
    const absl::StatusOr<SearchResults> all = SearchStrategies(*job, every);
    RC_ASSERT(all.ok());
    const absl::StatusOr<SearchResults> some = SearchStrategies(*job, pruned);
    RC_ASSERT(some.ok());
    RC_ASSERT(all->best_size() > 0);
    for (const ResultRow& r : all->best()) {
      RC_LOG() << r.strategy() << ": bound " << r.step_lower_bound_s()
               << " s, step " << r.step_time_s() << " s\n";
      RC_ASSERT(r.step_lower_bound_s() <= r.step_time_s() * (1 + 1e-9));
    }
    const ResultRow& best = all->best(0);
    for (const ResultRow& preset : all->presets()) {
      RC_ASSERT(best.step_time_s() <= preset.step_time_s());
    }
    RC_ASSERT(some->best(0).strategy() == best.strategy());
    RC_ASSERT(some->best(0).step_time_s() == best.step_time_s());
  });
}

}  // namespace
}  // namespace shardsim::property

// Reduce-scatter onto G's shards every micro-batch (or once, on the last),
// then finish over the OS scope (ReduceOverOsScope). ZeRO, FSDP, MiCS and
// PaRO; DeepSpeed's ZeRO-1/2 all-reduce their buckets whole instead
// (Execution::all_reduce_buckets).
#include "sim/schedule/lower/reducer.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace lower {
namespace {

class ReduceScatter : public Reducer {
 public:
  explicit ReduceScatter(Step* step) : step_(*step) {}

  int Reduce(int mb, const Bucket& bucket) override {
    const Strategy& strategy = step_.strategy();
    const int layer = step_.segments[bucket.segments.back()].layer;
    int done = bucket.after;
    if (FactorSize(strategy.g()) > 1) {
      const Group g = FactorGroup(strategy.g());
      done = step_.Collective(
          step_.ReduceStream(), BACKWARD, mb, layer,
          step_.ex().all_reduce_buckets() ? ALL_REDUCE : REDUCE_SCATTER, g,
          step_.grad_bytes() * bucket.params, step_.grad_dtype(),
          step_.AlgorithmFor(g), "G", {done});
    }
    if (mb != step_.last_mb()) return done;
    return ReduceOverOsScope(&step_, layer, bucket.params, done);
  }

 private:
  Step& step_;
};

}  // namespace

std::unique_ptr<Reducer> NewReduceScatter(Step* step) {
  return std::make_unique<ReduceScatter>(step);
}

}  // namespace lower
}  // namespace shardsim

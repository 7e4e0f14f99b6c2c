// Lins: reduce-scatter over the P group; while accumulating, all-reduce
// over the GPUs sharing a P shard inside the G group and keep one's own
// slice (select and drop); on the last micro-batch all-reduce over every
// GPU sharing the P shard.
#include "sim/schedule/lower/reducer.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace lower {
namespace {

class SelectAndDrop : public Reducer {
 public:
  explicit SelectAndDrop(Step* step) : step_(*step) {}

  int Reduce(int mb, const Bucket& bucket) override {
    const Strategy& strategy = step_.strategy();
    const int layer = step_.segments[bucket.segments.back()].layer;
    const int64_t full = 2 * bucket.params;
    const Stream stream = step_.ReduceStream();
    const Group p = FactorGroup(strategy.p());
    const int done =
        step_.Collective(stream, BACKWARD, mb, layer, REDUCE_SCATTER, p, full,
                         BF16, step_.AlgorithmFor(p), "G", {bucket.after});
    const int64_t shard = CeilDiv(full, FactorSize(strategy.p()));
    if (mb != step_.last_mb()) {
      const Group g = RatioGroup(strategy.g(), strategy.p());
      return step_.Collective(stream, BACKWARD, mb, layer, ALL_REDUCE, g, shard,
                              BF16, step_.AlgorithmFor(g), "G select-and-drop",
                              {done});
    }
    const Group all = RatioGroup(step_.dp(), strategy.p());
    return step_.Collective(stream, UPDATE, -1, layer, ALL_REDUCE, all, shard,
                            BF16, step_.AlgorithmFor(all), "G", {done});
  }

 private:
  Step& step_;
};

}  // namespace

std::unique_ptr<Reducer> NewSelectAndDrop(Step* step) {
  return std::make_unique<SelectAndDrop>(step);
}

}  // namespace lower
}  // namespace shardsim

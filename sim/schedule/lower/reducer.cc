#include "sim/schedule/lower/reducer.h"

#include "sim/strategy/strategy.h"

namespace shardsim {
namespace lower {

std::unique_ptr<Reducer> MakeReducer(Step* step) {
  const Strategy& strategy = step->strategy();
  if (strategy.lowering() == LINS) return NewSelectAndDrop(step);
  if (strategy.quantized_gradients()) return NewQuantizedAllToAll(step);
  return NewReduceScatter(step);
}

int ReduceOverOsScope(Step* step, int layer, int64_t params, int done) {
  const Strategy& strategy = step->strategy();
  const Stream stream = step->ReduceStream();
  const CollectiveOp reduce =
      step->ex().all_reduce_buckets() ? ALL_REDUCE : REDUCE_SCATTER;
  int64_t shard =
      CeilDiv(step->grad_bytes() * params, FactorSize(strategy.g()));
  if (FactorSize(strategy.os()) > FactorSize(strategy.g())) {
    const Group g = RatioGroup(strategy.os(), strategy.g());
    done = step->Collective(stream, UPDATE, -1, layer, reduce, g, shard,
                            step->grad_dtype(), step->AlgorithmFor(g),
                            FactorSize(strategy.g()) > 1 ? "G shard" : "G",
                            {done});
    shard = CeilDiv(shard, GroupSize(g));
  }
  if (FactorSize(step->dp()) > FactorSize(strategy.os())) {
    const Group g = RatioGroup(step->dp(), strategy.os());
    done = step->Collective(stream, UPDATE, -1, layer, ALL_REDUCE, g, shard,
                            step->grad_dtype(), step->AlgorithmFor(g),
                            FactorSize(strategy.os()) > 1 ? "G shard" : "G",
                            {done});
  }
  return done;
}

}  // namespace lower
}  // namespace shardsim

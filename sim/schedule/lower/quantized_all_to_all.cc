// ZeRO++ qgZ, tensor by tensor (DeepSpeed's all_to_all_quant_reduce,
// runtime/comm/coalesced_collectives.py): a matrix whose elements divide
// by 2 x the G group goes int4 all-to-all inside the node, then across
// nodes on the node-reduced slice (data and scales in one call per level
// here; DeepSpeed makes two, the scales' latency is left out). Every 1-D
// tensor, and a matrix that does not divide, is reduce-scattered in bf16
// over the G group instead, padded to a multiple of it
// (reduce_scatter_coalesced of that one tensor). After the last
// micro-batch, the reduction finishes over the OS scope as the
// reduce-scatter families' does (ReduceOverOsScope).
#include "sim/schedule/lower.h"
#include "sim/schedule/lower/reducer.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace lower {
namespace {

class QuantizedAllToAll : public Reducer {
 public:
  explicit QuantizedAllToAll(Step* step) : step_(*step) {}

  int Reduce(int mb, const Bucket& bucket) override {
    const int layer = step_.segments[bucket.segments.back()].layer;
    int done = bucket.after;
    if (FactorSize(step_.strategy().g()) > 1) {
      done = AllToAll(mb, layer, bucket, done);
    }
    if (mb != step_.last_mb()) return done;
    return ReduceOverOsScope(&step_, layer, bucket.params, done);
  }

 private:
  // The calls over the G group, after `done`; returns the last.
  int AllToAll(int mb, int layer, const Bucket& bucket, int done) {
    const Factor& factor = step_.strategy().g();
    const Stream stream = step_.ReduceStream();
    const double launch = step_.ex().launch_overhead_s();
    const Group g = FactorGroup(factor);
    const int64_t world = FactorSize(factor);
    const Group intra = MakeGroup(factor.intra(), 1, 1, 1);
    const Group inter = MakeGroup(1, 1, factor.inter(), 1);
    auto reduce_scatter = [&](int64_t elements) {
      done = step_.Collective(stream, BACKWARD, mb, layer, REDUCE_SCATTER, g,
                              2 * elements, BF16, step_.AlgorithmFor(g), "G",
                              {done});
    };
    for (int q : bucket.segments) {
      for (const Unit* u : step_.segments[q].units) {
        if (u->params == 0) continue;
        int64_t matrix = u->params;
        for (int64_t v : u->vectors) matrix -= v;
        if (matrix > 0 && matrix % (2 * world) == 0) {
          done = step_.Collective(stream, BACKWARD, mb, layer, REDUCE_SCATTER,
                                  intra, QuantizedBytes(matrix, 4), INT4,
                                  DIRECT, "G int4", {done}, 0, launch);
          done = step_.Collective(
              stream, BACKWARD, mb, layer, REDUCE_SCATTER, inter,
              QuantizedBytes(CeilDiv(matrix, factor.intra()), 4), INT4, DIRECT,
              "G int4", {done}, 0, launch);
        } else if (matrix > 0) {
          reduce_scatter(matrix);
        }
        for (int64_t v : u->vectors) reduce_scatter(v);
      }
    }
    return done;
  }

  Step& step_;
};

}  // namespace

std::unique_ptr<Reducer> NewQuantizedAllToAll(Step* step) {
  return std::make_unique<QuantizedAllToAll>(step);
}

}  // namespace lower
}  // namespace shardsim

// Gradient reduction (sharding G), one family of collectives per Reducer.
// GradientsPass (gradients.h) fills buckets of gradients in backward order
// and hands each full one to the step's reducer, which MakeReducer picks
// once from the strategy. A new family is a file defining its reducer, its
// New... function below, and a line in MakeReducer.
#ifndef SHARDSIM_SIM_SCHEDULE_LOWER_REDUCER_H_
#define SHARDSIM_SIM_SCHEDULE_LOWER_REDUCER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/schedule/lower/step.h"

namespace shardsim {
namespace lower {

// Gradients reduced by one call (or one series of calls).
struct Bucket {
  int64_t params = 0;
  std::vector<int> segments;  // in backward order
  std::vector<int> allocs;    // their full-size gradients
  int after = -1;             // the compute op that produced the last grads
};

class Reducer {
 public:
  virtual ~Reducer() = default;

  // Adds the collectives that reduce `bucket`'s gradients of micro-batch
  // `mb` (bucket.params > 0), after bucket.after; on the last micro-batch
  // also those that finish the reduction for the update. Returns the op
  // after which the gradients are reduced (bucket.after when there is
  // nothing to reduce: one GPU per group).
  virtual int Reduce(int mb, const Bucket& bucket) = 0;
};

// The reducer of `step`'s strategy.
std::unique_ptr<Reducer> MakeReducer(Step* step);

// The families, one file each.
// Reduce-scatter onto G's shards (ZeRO, FSDP, MiCS, PaRO; DeepSpeed's
// ZeRO-1/2 all-reduce their buckets whole): reduce_scatter.cc.
std::unique_ptr<Reducer> NewReduceScatter(Step* step);
// ZeRO++ qgZ: int4 all-to-all, level by level: quantized_all_to_all.cc.
std::unique_ptr<Reducer> NewQuantizedAllToAll(Step* step);
// Lins: all-reduce with select-and-drop: select_and_drop.cc.
std::unique_ptr<Reducer> NewSelectAndDrop(Step* step);

// What the reduce-scatter families do once per step, after the last
// micro-batch's reduction onto G's shards (`done`): the G shard reduced
// onto the OS shard, then summed over the OS replicas. Returns the last
// op, `done` when neither is needed.
int ReduceOverOsScope(Step* step, int layer, int64_t params, int done);

}  // namespace lower
}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_LOWER_REDUCER_H_

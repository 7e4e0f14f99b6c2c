// The gradients of backward: each segment's full-size buffer (where G or P
// is sharded, gradients live in it only until reduced; when only the last
// micro-batch reduces, the micro-batches accumulate into one), the buckets they
// are reduced in (by the strategy's Reducer, reducer.h), and DeepSpeed
// ZeRO-3's wait for its reductions at the end of each backward.
//
// A full bucket (over Execution::reduce_bucket_elements; without a bucket
// size, the end of a layer), or the end of backward, is reduced: every
// micro-batch, or only the last one's when gradients accumulate.
#ifndef SHARDSIM_SIM_SCHEDULE_LOWER_GRADIENTS_H_
#define SHARDSIM_SIM_SCHEDULE_LOWER_GRADIENTS_H_

#include <memory>
#include <vector>

#include "sim/schedule/lower/pass.h"
#include "sim/schedule/lower/reducer.h"
#include "sim/schedule/lower/step.h"

namespace shardsim {
namespace lower {

class GradientsPass : public Pass {
 public:
  GradientsPass(Step* step, std::unique_ptr<Reducer> reducer);

  // A backward's full-size gradient buffer.
  void BeforeCompute(int v, std::vector<int>* deps) override;
  // A pending sync's host waits; a backward's gradients into the bucket.
  void AfterCompute(int v, int op) override;
  // The step's last reduction where it waits for the whole backward.
  void End() override;

 private:
  // Whether gradients live in full-size buffers only until reduced.
  bool TransientGrad() const;
  void ReduceAfter(int v, int op);
  void Flush(int mb);

  Step& step_;
  const std::unique_ptr<Reducer> reducer_;
  Bucket bucket_;
  std::vector<int> grad_alloc_;  // per segment: its unreduced gradients
  int last_reduce_ = -1;
  int sync_pending_ = -1;  // the next visit's ops wait for this reduction
  int final_mb_ = -1;      // the micro-batch End() reduces, if any
};

}  // namespace lower
}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_LOWER_GRADIENTS_H_

#include "sim/schedule/lower/gradients.h"

#include <algorithm>
#include <utility>

#include "sim/schema/limits.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace lower {

GradientsPass::GradientsPass(Step* step, std::unique_ptr<Reducer> reducer)
    : step_(*step),
      reducer_(std::move(reducer)),
      grad_alloc_(step->segments.size(), -1) {}

bool GradientsPass::TransientGrad() const {
  return FactorSize(step_.strategy().g()) > 1 || step_.ParamsSharded();
}

void GradientsPass::BeforeCompute(int v, std::vector<int>* /*deps*/) {
  const Visit& visit = step_.visits[v];
  if (!visit.backward() || !TransientGrad()) return;
  // Accumulated until the last micro-batch reduces it: one buffer a
  // segment (FSDP's unsharded gradients under no_sync).
  if (grad_alloc_[visit.seg] >= 0) return;
  const Segment& seg = step_.segments[visit.seg];
  grad_alloc_[visit.seg] =
      step_.Alloc(COMPUTE, BACKWARD, visit.mb, seg.layer,
                  step_.grad_bytes() * seg.params, "G full");
}

void GradientsPass::AfterCompute(int v, int op) {
  // DeepSpeed ZeRO-3 synchronizes its reduce stream at the end of each
  // backward: the host issues nothing more (this visit's hook and compute
  // op) until the reductions are done.
  if (sync_pending_ >= 0) {
    for (int o = step_.visit_begin; o <= op; ++o) {
      step_.mutable_op(o)->add_host_waits(sync_pending_);
    }
    sync_pending_ = -1;
  }
  if (step_.visits[v].backward()) ReduceAfter(v, op);
}

// Gradients into the bucket; a full bucket (or, without a bucket size,
// the end of a layer, or the end of backward) is reduced.
void GradientsPass::ReduceAfter(int v, int op) {
  const Execution& ex = step_.ex();
  const Visit& visit = step_.visits[v];
  const int q = visit.seg;
  const Segment& seg = step_.segments[q];
  const bool last_of_layer = q == 0 || step_.segments[q - 1].layer != seg.layer;
  if (!ex.reduce_every_micro_batch() && visit.mb != step_.last_mb()) return;
  const int64_t ranks = FactorSize(step_.dp());
  const int64_t per_rank = std::min(ex.reduce_bucket_elements_per_rank(),
                                    limits::kMaxElements / ranks);
  const int64_t cap = std::max(ex.reduce_bucket_elements(), per_rank * ranks);
  if (cap > 0 && bucket_.params > 0 && bucket_.params + seg.params > cap) {
    Flush(visit.mb);
  }
  bucket_.params += seg.params;
  bucket_.segments.push_back(q);
  bucket_.allocs.push_back(grad_alloc_[q]);
  grad_alloc_[q] = -1;
  bucket_.after = op;
  // A reduction that does not overlap backward is the framework's call
  // after the whole backward (Megatron-LM's finalize_model_grads after the
  // pipeline schedule, DeepSpeed's pipeline ReduceGrads after the last
  // SendGrad): the step's last one is issued after every pass's hooks,
  // after a pipeline stage's last send. Without a pipeline nothing comes
  // between.
  if (q == 0 && !ex.overlap_comm() && visit.mb == step_.last_mb()) {
    final_mb_ = visit.mb;
    return;
  }
  if ((cap == 0 && last_of_layer) || q == 0) Flush(visit.mb);
  if (q == 0 && ex.sync_after_backward() && visit.mb < step_.last_mb()) {
    sync_pending_ = last_reduce_;
  }
}

void GradientsPass::End() {
  if (final_mb_ >= 0) Flush(final_mb_);
}

void GradientsPass::Flush(int mb) {
  if (bucket_.params == 0) {
    // Segments without parameters: nothing to reduce, no buffers to free.
    bucket_.segments.clear();
    return;
  }
  const int done = reducer_->Reduce(mb, bucket_);
  const int layer = step_.segments[bucket_.segments.back()].layer;
  if (TransientGrad()) {
    for (int alloc : bucket_.allocs) {
      step_.Free(step_.ReduceStream(), BACKWARD, mb, layer, alloc, {done});
    }
  }
  for (int q : bucket_.segments) step_.reduced[step_.segments[q].layer] = done;
  last_reduce_ = done;
  bucket_ = Bucket();
}

}  // namespace lower
}  // namespace shardsim

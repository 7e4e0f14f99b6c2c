// The estimate is the steady-state peak of one GPU during backward of a
// micro-batch: model states, every activation of that micro-batch's
// forward (all still alive when backward starts), the working set of the
// layer whose backward runs, and the full-size parameter and gradient
// buffers of the layers in flight around it. It leaves out allocator
// fragmentation beyond the platform's reserve, the temporary buffers of
// quantized collectives (ZeRO++ qwZ/qgZ), optimizer-step temporaries and
// the loss's transient buffers; the reserve is meant to absorb these.
#include "tests/memory_estimate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sim/strategy/strategy.h"

namespace shardsim {
namespace {

// Bytes per parameter and per gradient element (bf16/fp16).
constexpr int64_t kHalfBytes = 2;

// An unset factor (0x0) means no sharding.
int64_t Shards(const Factor& f) { return std::max<int64_t>(1, FactorSize(f)); }

bool ParamsSharded(const Strategy& strategy) {
  return Shards(strategy.p()) > 1 || strategy.secondary_params_intra() > 0;
}

int64_t LargestLayerParams(const std::vector<Layer>& layers) {
  int64_t largest = 0;
  for (const Layer& l : layers) largest = std::max(largest, l.params);
  return largest;
}

// The largest module that is gathered on its own (above the persistence
// threshold).
int64_t LargestUnitParams(const std::vector<Layer>& layers,
                          int64_t persistence_threshold) {
  int64_t largest = 0;
  for (const Layer& l : layers) {
    for (const Unit& u : l.units) {
      if (u.params > persistence_threshold)
        largest = std::max(largest, u.params);
    }
  }
  return largest;
}

// Every layer's forward activations are alive when backward starts; the
// layer whose backward runs adds its working set (recomputed activations)
// on top. Counting the largest working set on top of all kept bytes is a
// slight overestimate: by then later layers' kept bytes could be freed.
int64_t ActivationBytes(const std::vector<Layer>& layers) {
  int64_t kept = 0;
  int64_t working = 0;
  for (const Layer& l : layers) {
    kept += l.activation_bytes;
    working = std::max(working, l.backward_working_bytes);
  }
  return kept + working;
}

// Full-size bf16 buffers that exist beside the sharded states, as the
// strategy's framework keeps them (strategy.execution()).
int64_t BufferBytes(const std::vector<Layer>& layers,
                    const Strategy& strategy) {
  const Execution& ex = strategy.execution();
  int64_t gathered = 0;
  if (ParamsSharded(strategy) && strategy.keep_params_through_backward()) {
    // FSDP SHARD_GRAD_OP / _HYBRID_SHARD_ZERO2: every layer gathered in
    // forward stays whole until its backward, so at the turn of the
    // micro-batch the full model's parameters are alive.
    for (const Layer& l : layers) gathered += l.params;
  } else if (ParamsSharded(strategy)) {
    const int64_t unit =
        ex.gather_unit() == SUBMODULE
            ? LargestUnitParams(layers, ex.persistence_threshold())
            : LargestLayerParams(layers);
    if (ex.prefetch_bucket_elements() > 0) {
      // DeepSpeed: the module in use, the bucket ahead of it and the module
      // that crosses the bucket's end, within the live budget.
      gathered = unit + ex.prefetch_bucket_elements() + unit;
      if (ex.max_live_elements() > 0) {
        gathered = std::min(gathered, std::max(unit, ex.max_live_elements()));
      }
    } else {
      const int64_t units = ex.max_gathered_units() > 0
                                ? ex.max_gathered_units()
                                : 1 + ex.prefetch_units();
      gathered = units * unit;
    }
  }
  int64_t gradients = 0;
  if (Shards(strategy.g()) > 1 || ex.reduce_bucket_elements() > 0) {
    // Gradients are produced full-size and reduced (onto their shards, or
    // all-reduced per bucket): one buffer being filled, one being reduced.
    int64_t psi = 0;
    for (const Layer& l : layers) psi += l.params;
    const int64_t bucket = ex.reduce_bucket_elements() > 0
                               ? std::min(ex.reduce_bucket_elements(), psi)
                               : LargestLayerParams(layers);
    gradients = 2 * bucket;
  }
  return kHalfBytes * (gathered + gradients);
}

}  // namespace

// `mesh` is not needed: the strategy's factors already carry the shard
// counts.
MemoryBreakdown EstimateMemory(const std::vector<Layer>& layers,
                               const Strategy& strategy, const Mesh& /*mesh*/,
                               const Scenario& scenario,
                               const Platform& platform) {
  int64_t psi = 0;
  for (const Layer& l : layers) psi += l.params;
  // The scenario loader rejects K <= 0: no default here.
  const double k = scenario.optimizer_bytes_per_param();

  MemoryBreakdown m;
  m.states = ModelStateBytes(psi, k, strategy);
  m.activations = ActivationBytes(layers);
  m.buffers = BufferBytes(layers, strategy);
  m.reserved = platform.gpu().reserved_bytes();
  m.total = m.states.params + m.states.grads + m.states.optimizer +
            m.activations + m.buffers + m.reserved;
  m.oom = m.total > platform.gpu().memory_bytes();
  return m;
}

}  // namespace shardsim

// The estimate is the steady-state peak of one GPU during backward of a
// micro-batch: model states, every activation of that micro-batch's
// forward (all still alive when backward starts), the working set of the
// layer whose backward runs, and the full-size parameter and gradient
// buffers of the layers in flight around it. It leaves out allocator
// fragmentation beyond the platform's reserve, the temporary buffers of
// quantized collectives (ZeRO++ qwZ/qgZ), optimizer-step temporaries and
// the loss's transient buffers; the reserve is meant to absorb these.
#include "sim/memory/memory.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sim/strategy/strategy.h"

namespace shardsim {
namespace {

// Bytes per parameter and per gradient element (bf16/fp16).
constexpr int64_t kHalfBytes = 2;

// Largest shard when `total` bytes are split over `shards`: round up.
int64_t CeilDiv(int64_t total, int64_t shards) {
  return (total + shards - 1) / shards;
}

// An unset factor (0x0) means no sharding.
int64_t Shards(const Factor& f) {
  return std::max<int64_t>(1, FactorSize(f));
}

// bytes_per_param * psi / shards, rounded up; exact in integers when
// bytes_per_param is whole (K = 12 or 16), which it nearly always is.
int64_t ShardBytes(int64_t psi, double bytes_per_param, int64_t shards) {
  double whole = 0;
  if (std::modf(bytes_per_param, &whole) == 0.0) {
    return CeilDiv(static_cast<int64_t>(whole) * psi, shards);
  }
  return static_cast<int64_t>(
      std::ceil(bytes_per_param * static_cast<double>(psi) / shards));
}

bool ParamsSharded(const Strategy& strategy) {
  return Shards(strategy.p()) > 1 || strategy.secondary_params_intra() > 0;
}

int64_t LargestLayerHalfBytes(const std::vector<Layer>& layers) {
  int64_t largest = 0;
  for (const Layer& l : layers) largest = std::max(largest, l.params);
  return kHalfBytes * largest;
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

// Full-size bf16 buffers that exist beside the sharded states.
int64_t BufferBytes(const std::vector<Layer>& layers,
                    const Strategy& strategy, const Scenario& scenario) {
  const int64_t layer_bytes = LargestLayerHalfBytes(layers);
  int64_t buffers = 0;
  if (ParamsSharded(strategy) && strategy.keep_params_through_backward()) {
    // FSDP SHARD_GRAD_OP / _HYBRID_SHARD_ZERO2: every layer gathered in
    // forward stays whole until its backward, so at the turn of the
    // micro-batch the full model's bf16 parameters are alive.
    int64_t all = 0;
    for (const Layer& l : layers) all += kHalfBytes * l.params;
    buffers += all;
  } else if (ParamsSharded(strategy)) {
    // The layer being computed plus the ones gathered ahead of it.
    const int64_t prefetch =
        scenario.has_prefetch_layers() ? scenario.prefetch_layers() : 1;
    buffers += (1 + std::max<int64_t>(0, prefetch)) * layer_bytes;
  }
  if (Shards(strategy.g()) > 1 || scenario.bucket_bytes() > 0) {
    // Gradients are produced full-size and reduced (onto their shards, or
    // all-reduced per bucket): one buffer being filled, one being reduced.
    buffers += scenario.bucket_bytes() > 0 ? 2 * scenario.bucket_bytes()
                                           : 2 * layer_bytes;
  }
  return buffers;
}

}  // namespace

ModelStates ModelStateBytes(int64_t psi, double optimizer_bytes_per_param,
                            const Strategy& strategy) {
  ModelStates states;
  states.params = ShardBytes(psi, kHalfBytes, Shards(strategy.p()));
  if (strategy.secondary_params_intra() > 0) {
    // ZeRO++ hpZ: a second bf16 copy sharded only inside the node.
    states.params +=
        ShardBytes(psi, kHalfBytes, strategy.secondary_params_intra());
  }
  states.grads = ShardBytes(psi, kHalfBytes, Shards(strategy.g()));
  states.optimizer =
      ShardBytes(psi, optimizer_bytes_per_param, Shards(strategy.os()));
  return states;
}

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
  m.buffers = BufferBytes(layers, strategy, scenario);
  m.reserved = platform.gpu().reserved_bytes();
  m.total = m.states.params + m.states.grads + m.states.optimizer +
            m.activations + m.buffers + m.reserved;
  m.oom = m.total > platform.gpu().memory_bytes();
  return m;
}

}  // namespace shardsim

#include "sim/strategy/model_states.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "sim/strategy/strategy.h"

namespace shardsim {
namespace {

// Bytes per parameter and per gradient element (bf16/fp16).
constexpr int64_t kHalfBytes = 2;

// An unset factor (0x0) means no sharding.
int64_t Shards(const Factor& f) { return std::max<int64_t>(1, FactorSize(f)); }

// bytes_per_param * psi / shards, rounded up; exact in integers when
// bytes_per_param is whole (K = 12 or 16), which it nearly always is.
int64_t ShardBytes(int64_t psi, double bytes_per_param, int64_t shards) {
  double whole = 0;
  if (std::modf(bytes_per_param, &whole) == 0.0) {
    const int64_t total = static_cast<int64_t>(whole) * psi;
    return (total + shards - 1) / shards;
  }
  return static_cast<int64_t>(
      std::ceil(bytes_per_param * static_cast<double>(psi) / shards));
}

}  // namespace

ModelStates ModelStateBytes(int64_t psi, double optimizer_bytes_per_param,
                            const Strategy& strategy) {
  ModelStates states;
  states.params = ShardBytes(psi, kHalfBytes, Shards(strategy.p()));
  if (strategy.secondary_params_intra() > 0) {
    // ZeRO++ hpZ: a second bf16 copy sharded only inside the node.
    states.secondary =
        ShardBytes(psi, kHalfBytes, strategy.secondary_params_intra());
    states.params += states.secondary;
  }
  states.grads =
      ShardBytes(psi, GradBytes(strategy.execution()), Shards(strategy.g()));
  states.optimizer =
      ShardBytes(psi, optimizer_bytes_per_param, Shards(strategy.os()));
  if (strategy.execution().offload_optimizer()) {
    std::swap(states.optimizer, states.host_optimizer);
    states.host_buffers = ShardBytes(psi, 4 + 2, Shards(strategy.os()));
  }
  return states;
}

}  // namespace shardsim

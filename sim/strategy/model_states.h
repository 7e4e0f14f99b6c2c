// The model states one GPU keeps all step under a strategy's factors
// (docs/strategies.md §2): bf16 parameters, bf16 gradients and K bytes of
// optimizer state per parameter, each divided over its shard count
// (gradients in fp32 where Execution.grad_fp32 says so). The
// lowering allocates exactly these before the step (sim/schedule/), and the
// memory report reads them back from there (sim/memory/).
#ifndef SHARDSIM_SIM_STRATEGY_MODEL_STATES_H_
#define SHARDSIM_SIM_STRATEGY_MODEL_STATES_H_

#include <cstdint>

#include "sim/schema/strategy.pb.h"

namespace shardsim {

struct ModelStates {
  int64_t params = 0;     // 2 psi / s_p, plus the hpZ secondary copy
  int64_t secondary = 0;  // of params: the hpZ secondary copy alone
  int64_t grads = 0;      // 2 psi / s_g
  int64_t optimizer = 0;  // K psi / s_os; 0 under ZeRO-Offload
  // Under ZeRO-Offload (Execution.offload_optimizer) the K psi / s_os bytes
  // live in the host's memory instead, beside the pinned buffers the shard
  // moves through: its fp32 gradients copied out and bf16 parameters copied
  // back, 6 psi / s_os (single_partition_of_fp32_groups' grad and
  // param_buffer_of_bit16_for_cpu_offload_groups, stage_1_and_2.py).
  int64_t host_optimizer = 0;
  int64_t host_buffers = 0;
};

// Bytes of one gradient element: 2, or 4 with Execution.grad_fp32.
inline int64_t GradBytes(const Execution& e) { return e.grad_fp32() ? 4 : 2; }

// Model states of `psi` parameters with K optimizer bytes per parameter.
// Shards round up (the largest shard); exact in integers when K is whole.
ModelStates ModelStateBytes(int64_t psi, double optimizer_bytes_per_param,
                            const Strategy& strategy);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_STRATEGY_MODEL_STATES_H_

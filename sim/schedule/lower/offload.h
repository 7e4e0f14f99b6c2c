// ZeRO-Offload's update (Execution.offload_optimizer: DeepSpeed's
// zero_optimization.offload_optimizer.device "cpu"), in place of the
// optimizer kernels on the GPU. DeepSpeed (stage_1_and_2.py and stage3.py
// at edaa722):
//  - each reduced gradient shard is cast to fp32 on the GPU and copied to
//    a pinned host buffer, 4 bytes a parameter, as soon as it is reduced
//    (async_inplace_copy_grad_to_fp32_buffer_from_gpu,
//    _offload_grad_partition_at_boundary);
//  - after backward, DeepSpeedCPUAdam updates the fp32 master shard on the
//    host's CPU, the host thread blocked through it (step());
//  - the shard is cast to bf16 on the CPU and copied back, 2 bytes a
//    parameter (bit16_partitions[...].data.copy_(...));
//  - then the parameters are rebuilt as without offload.
// The copies run on the OFFLOAD stream, the CPU's step on the HOST stream
// (schedule.proto).
#ifndef SHARDSIM_SIM_SCHEDULE_LOWER_OFFLOAD_H_
#define SHARDSIM_SIM_SCHEDULE_LOWER_OFFLOAD_H_

#include "sim/schedule/lower/step.h"

namespace shardsim {
namespace lower {

// Adds the copies out (one per layer, after its gradients' last
// reduction), the CPU's Adam over the whole OS shard (after `norm`, the
// gradient norm's op, unless -1) and the copy back; returns the copy
// back's op, which the rebuild waits for.
int OffloadedUpdate(Step* step, int norm);

}  // namespace lower
}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_LOWER_OFFLOAD_H_

// What the hardware backend's kernels touch, decided on the host (no CUDA
// here, so it is tested without a GPU): the operands of each kernel of the
// IR and the launches of a memory-bound op.
#ifndef SHARDSIM_HW_RUNTIME_KERNEL_WORK_H_
#define SHARDSIM_HW_RUNTIME_KERNEL_WORK_H_

#include <cstdint>
#include <vector>

#include "sim/schema/kernel.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim::hw {

// Bytes of each operand a kernel reads or writes, in the order the CUDA
// runner lays them out in its workspace:
//  - Gemm: A (m x k), B (k x n), C (m x n), bf16, times batch;
//  - Attention: Q, K, V, O (and dO, dQ, dK, dV backward) bf16 in
//    (batch, seq, heads, head_dim), K and V over kv_heads; fp32 statistics
//    (batch, heads, seq);
//  - MemoryKernel: source and destination, half of the larger path each;
//  - OptimizerKernel: the fp32 gradient (w, m, v are the OS shard).
std::vector<int64_t> KernelOperands(const Kernel& kernel);

// Their sum, each rounded up to 256 bytes (cudaMalloc's alignment).
int64_t WorkspaceBytes(const Kernel& kernel);
// The largest over every compute op of a schedule.
int64_t WorkspaceBytes(const Schedule& schedule);

// A memory-bound op as the runner launches it: per launch, the bytes read
// plus written on each path (the op's bytes split evenly over its
// launches, half read, half written). The vector path moves 16-byte
// vectors, the general one 2-byte elements: what is moved is rounded down
// to those, and MovedBytes says how much that is in all.
struct MoveLaunch {
  bool vector = true;
  int64_t bytes = 0;  // read + written by this launch
};
std::vector<MoveLaunch> MoveLaunches(const MemoryKernel& m);
int64_t MovedBytes(const MemoryKernel& m);

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_RUNTIME_KERNEL_WORK_H_

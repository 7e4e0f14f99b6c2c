// The CUDA + NCCL backend of shardsim-hw: one MPI rank drives one GPU.
//
// Collectives: algorithm RING runs NCCL's own collective (its ring is what
// the simulator's RING plan models) on a communicator of the group; every
// other algorithm (HRING, TORUS2D, HORING, TREE, DIRECT, SHARP) executes the
// simulator's plan (sim/collective/plan.h) step by step with ncclSend /
// ncclRecv, so the algorithm measured is the one simulated. HO-Ring runs a
// step's intra-node and inter-node transfers as two NCCL groups on two
// communicators and two CUDA streams, so both rings are in flight at once.
// SHARP without CollNet: member 0 of the group plays the switch (its zeroed
// buffer); this measures the data path of the plan, not SHARP's speed.
//
// Compute: each kernel of a compute op runs as itself, with its shapes
// (kernel_runner.h: cuBLAS GEMMs, cuDNN's fused attention, the step's own
// memory-bound and Adam kernels). Memory: every memory op of the IR
// allocates or frees a real buffer from a stream-ordered pool
// (cudaMallocFromPoolAsync / cudaFreeAsync), so the step holds what the
// allocation plan (sim/memory/allocation.h) says, when it says it.
#ifndef SHARDSIM_HW_CUDA_CUDA_BACKEND_H_
#define SHARDSIM_HW_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "hw/backend.h"
#include "hw/runtime/fault.h"
#include "sim/base/group.h"
#include "sim/schema/platform.pb.h"

namespace shardsim::hw {

struct CudaOptions {
  // Start, Finish, RunChecked, TimeCollective (and each collective's
  // enqueue) that make no progress for this long abort every communicator
  // and every rank (hw/runtime/watchdog.h); so does an NCCL async error.
  double watchdog_s = 300;
  // Testing aid (hw/runtime/fault.h).
  Fault fault;
  // Times every kernel of every compute op (CUDA events around each), for
  // a per-kernel timeline; off, only ops are timed.
  bool kernel_timeline = false;
};

// MPI must be initialized. Rank = MPI_COMM_WORLD rank; the world size must
// equal mesh.gpus(); the GPU is the node-local rank modulo the visible
// device count. Collective over MPI_COMM_WORLD.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(
    const Mesh& mesh, const Platform& platform, const CudaOptions& options);

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_CUDA_CUDA_BACKEND_H_

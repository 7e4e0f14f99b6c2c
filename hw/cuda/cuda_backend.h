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
// Compute: a ComputeOp only has a kind and FLOPs. With gemm_compute it runs
// cuBLAS bf16 GEMMs (fp32 accumulate) of n = k = 4096 and m = FLOPs /
// (2 n k) rows, at least 1, in slabs of at most 8192 rows; otherwise one
// GPU thread spins on the global timer for ComputeOpCost(op, platform)
// (sim/compute/kernel_time.h), the simulator's own kernel times.
#ifndef SHARDSIM_HW_CUDA_CUDA_BACKEND_H_
#define SHARDSIM_HW_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "hw/backend.h"
#include "sim/collective/group.h"
#include "sim/schema/platform.pb.h"

namespace shardsim::hw {

struct CudaOptions {
  // Finish, RunChecked, TimeCollective (and each collective's enqueue) that
  // make no progress for this long abort every communicator and exit.
  double watchdog_s = 300;
  // Compute ops as bf16 GEMMs (true) or as a timed spin (false).
  bool gemm_compute = true;
};

// MPI must be initialized. Rank = MPI_COMM_WORLD rank; the world size must
// equal mesh.gpus(); the GPU is the node-local rank modulo the visible
// device count. Collective over MPI_COMM_WORLD.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(
    const Mesh& mesh, const Platform& platform, const CudaOptions& options);

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_CUDA_CUDA_BACKEND_H_

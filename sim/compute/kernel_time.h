// Stage 4: how long kernels take on one GPU, from their shapes and a few
// parameters per kernel family (the platform's KernelModel). Used by the
// engine (step replay), calibration (fitting the parameters) and the
// hardware backend (its spin stand-in). Free of SimGrid.
//
//  - GEMM: 2mnk / (peak x e x tile fill x grid fill x k / (k + k0)), or the
//    operands' bytes at the vectorized HBM rate if that is longer. Tile
//    fill: m and n rounded up to whole output tiles. Grid fill: a GEMM of
//    fewer tiles than SMs is split along k (cuBLAS's split-K) until it
//    fills the GPU or its slices get short (256 deep); what still does not
//    fill leaves SMs idle. A GEMM of several waves loses nothing to its last
//    one: Hopper's cuBLAS kernels are persistent and balance tiles over SMs
//    (no wave pattern shows in validate/reference/h100_torch.json). k0 is a
//    tile's prologue and epilogue in units of its reduction depth.
//  - Fused attention: the FLOPs it runs (causal: half) at peak x e x s /
//    (s + s0): short sequences keep the kernel's pipeline short.
//  - Memory-bound: vector bytes at the vectorized rate plus general bytes at
//    the general-path rate (kernel.proto), each a share of HBM bandwidth.
//  - Optimizer: its bytes at the optimizer's share of HBM bandwidth.
//  - Host side (ZeRO-Offload): a copy's bytes at the platform's PCIe rate;
//    the CPU's Adam at the node's rate shared by its GPUs. Neither holds
//    SMs or HBM bandwidth the model counts, so collectives do not slow them.
//  Every launch adds launch_s (the GPU-side gap between back-to-back
//  kernels).
#ifndef SHARDSIM_SIM_COMPUTE_KERNEL_TIME_H_
#define SHARDSIM_SIM_COMPUTE_KERNEL_TIME_H_

#include <string>

#include "absl/status/status.h"
#include "sim/schema/kernel.pb.h"
#include "sim/schema/platform.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

// Seconds `kernel` takes alone on one GPU of `platform`.
double KernelSeconds(const Kernel& kernel, const Platform& platform);

// True when the kernel is bound by HBM bandwidth rather than by its math
// (it then suffers from other HBM traffic, not from lost SMs).
bool KernelMemoryBound(const Kernel& kernel, const Platform& platform);

// A compute op alone on one GPU: its kernels back to back, split by what
// bounds them.
struct OpCost {
  double seconds = 0;
  double compute_bound_s = 0;  // GEMMs and attention bound by their math
  double memory_bound_s = 0;   // everything bound by HBM bandwidth
  double host_s = 0;  // PCIe copies and the CPU's work: so the parts sum up
};

OpCost ComputeOpCost(const KernelList& kernels, const Platform& platform);

// How much longer a compute op of cost `c` takes while collectives hold
// `comm_sms` of the GPU's SMs: it runs at 1 / (1 + slowdown) of its speed.
// Its compute-bound part loses the share of SMs held times
// compute_slowdown, its memory-bound part that share times
// memory_slowdown (platform.proto's Interference).
double ComputeSlowdown(const OpCost& c, int comm_sms, const Platform& platform);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_COMPUTE_KERNEL_TIME_H_

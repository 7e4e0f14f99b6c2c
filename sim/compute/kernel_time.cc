#include "sim/compute/kernel_time.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/model/kernels.h"

namespace shardsim {
namespace {

// Shortest slice of k a split-K GEMM gives one tile.
constexpr int64_t kMinSplitDepth = 256;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

double Hbm(const Platform& p) { return p.gpu().hbm_bytes_per_s(); }

struct Roofline {
  double math_s = 0;
  double memory_s = 0;
};

Roofline GemmRoofline(const Kernel& kernel, const Platform& p) {
  const KernelModel& km = p.kernels();
  const Gemm& g = kernel.gemm();
  const int64_t batch = std::max<int64_t>(1, g.batch());
  const int64_t tm = CeilDiv(g.m(), km.gemm_tile_m());
  const int64_t tn = CeilDiv(g.n(), km.gemm_tile_n());
  const double tile_fill =
      static_cast<double>(g.m()) * g.n() /
      (static_cast<double>(tm * km.gemm_tile_m()) * (tn * km.gemm_tile_n()));
  const int64_t tiles = batch * tm * tn;
  const int64_t sms = p.gpu().sms();
  int64_t splits = 1;
  if (tiles < sms) {
    splits =
        std::max<int64_t>(1, std::min(sms / tiles, g.k() / kMinSplitDepth));
  }
  const double grid_fill =
      std::min(1.0, static_cast<double>(tiles * splits) / sms);
  const double depth = static_cast<double>(g.k()) / splits;
  const double peak = g.fp8() ? p.gpu().fp8_peak_flops() : p.gpu().peak_flops();
  const double e = g.fp8() ? km.fp8_gemm_efficiency() : km.gemm_efficiency();
  const double efficiency =
      e * tile_fill * grid_fill * depth / (depth + km.gemm_k_overhead());
  Roofline r;
  r.math_s = KernelFlops(kernel) / (peak * efficiency);
  double bytes = static_cast<double>(KernelBytes(kernel));
  // Split-K writes fp32 partial tiles and reads them back to reduce.
  if (splits > 1) bytes += 2.0 * 4 * g.m() * g.n() * splits;
  r.memory_s = bytes / (Hbm(p) * km.vector_fraction());
  return r;
}

Roofline AttentionRoofline(const Kernel& kernel, const Platform& p) {
  const KernelModel& km = p.kernels();
  const Attention& a = kernel.attention();
  const double e = a.backward() ? km.attention_bwd_efficiency()
                                : km.attention_fwd_efficiency();
  const double s0 =
      a.backward() ? km.attention_bwd_seq() : km.attention_fwd_seq();
  const double s = static_cast<double>(a.seq());
  Roofline r;
  r.math_s = KernelFlops(kernel) / (p.gpu().peak_flops() * e * s / (s + s0));
  r.memory_s = KernelBytes(kernel) / (Hbm(p) * km.vector_fraction());
  return r;
}

// Seconds without the launch cost, and whether HBM bounds it.
std::pair<double, bool> Body(const Kernel& kernel, const Platform& p) {
  const KernelModel& km = p.kernels();
  switch (kernel.body_case()) {
    case Kernel::kGemm: {
      const Roofline r = GemmRoofline(kernel, p);
      return {std::max(r.math_s, r.memory_s), r.memory_s > r.math_s};
    }
    case Kernel::kAttention: {
      const Roofline r = AttentionRoofline(kernel, p);
      return {std::max(r.math_s, r.memory_s), r.memory_s > r.math_s};
    }
    case Kernel::kMemory: {
      const MemoryKernel& m = kernel.memory();
      return {m.vector_bytes() / (Hbm(p) * km.vector_fraction()) +
                  m.general_bytes() / (Hbm(p) * km.general_fraction()),
              true};
    }
    case Kernel::kOptimizer:
      return {KernelBytes(kernel) / (Hbm(p) * km.optimizer_fraction()), true};
    case Kernel::kHostCopy:
      return {kernel.host_copy().bytes() / p.host().pcie_bytes_per_s(), false};
    case Kernel::kHostOptimizer: {
      // The node's CPU Adam rate, shared by the job's ranks on it.
      const HostOptimizer& h = kernel.host_optimizer();
      return {static_cast<double>(h.params()) * std::max(1, h.sharers()) /
                  p.host().cpu_adam_params_per_s(),
              false};
    }
    default:
      return {0, true};
  }
}

// A kernel of the host side (kernel.proto's HostCopy, HostOptimizer).
bool HostKernel(const Kernel& kernel) {
  return kernel.has_host_copy() || kernel.has_host_optimizer();
}

}  // namespace

double KernelSeconds(const Kernel& kernel, const Platform& platform) {
  return Body(kernel, platform).first +
         KernelLaunches(kernel) * platform.kernels().launch_s();
}

bool KernelMemoryBound(const Kernel& kernel, const Platform& platform) {
  return Body(kernel, platform).second;
}

OpCost ComputeOpCost(const KernelList& kernels, const Platform& platform) {
  OpCost cost;
  for (const Kernel& k : kernels.kernels()) {
    const double t = KernelSeconds(k, platform);
    cost.seconds += t;
    if (HostKernel(k)) {
      cost.host_s += t;
    } else {
      (KernelMemoryBound(k, platform) ? cost.memory_bound_s
                                      : cost.compute_bound_s) += t;
    }
  }
  return cost;
}

double ComputeSlowdown(const OpCost& c, int comm_sms, const Platform& p) {
  if (c.seconds <= 0 || comm_sms == 0) return 0;
  const double held =
      std::min(1.0, static_cast<double>(comm_sms) / p.gpu().sms());
  const Interference& in = p.interference();
  return held *
         (c.compute_bound_s * in.compute_slowdown() +
          c.memory_bound_s * in.memory_slowdown()) /
         c.seconds;
}

}  // namespace shardsim

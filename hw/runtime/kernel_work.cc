#include "hw/runtime/kernel_work.h"

#include <algorithm>

namespace shardsim::hw {
namespace {

constexpr int64_t kBf16 = 2;
constexpr int64_t kFp32 = 4;
constexpr int64_t kAlign = 256;

int64_t RoundUp(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// Bytes one launch of the mover really moves: both halves rounded down to
// whole units (16-byte vectors, 2-byte elements).
int64_t Moved(bool vector, int64_t bytes) {
  const int64_t unit = vector ? 16 : 2;
  return 2 * (bytes / 2 / unit * unit);
}

}  // namespace

std::vector<int64_t> KernelOperands(const Kernel& kernel) {
  switch (kernel.body_case()) {
    case Kernel::kGemm: {
      const Gemm& g = kernel.gemm();
      const int64_t b = std::max<int64_t>(1, g.batch());
      return {b * g.m() * g.k() * kBf16, b * g.k() * g.n() * kBf16,
              b * g.m() * g.n() * kBf16};
    }
    case Kernel::kAttention: {
      const Attention& a = kernel.attention();
      const int64_t q = a.batch() * a.seq() * a.heads() * a.head_dim() * kBf16;
      const int64_t kv = a.batch() * a.seq() * std::max(1, a.kv_heads()) *
                         a.head_dim() * kBf16;
      const int64_t stats = a.batch() * a.heads() * a.seq() * kFp32;
      if (!a.backward()) return {q, kv, kv, q, stats};
      return {q, kv, kv, q, stats, q, q, kv, kv};
    }
    case Kernel::kMemory: {
      int64_t largest = 0;
      for (const MoveLaunch& l : MoveLaunches(kernel.memory())) {
        largest = std::max(largest, l.bytes);
      }
      return {largest / 2, largest / 2};
    }
    case Kernel::kOptimizer:
      return {kernel.optimizer().params() * kFp32};
    default:
      return {};
  }
}

int64_t WorkspaceBytes(const Kernel& kernel) {
  int64_t total = 0;
  for (int64_t b : KernelOperands(kernel)) total += RoundUp(b);
  return total;
}

int64_t WorkspaceBytes(const Schedule& schedule) {
  int64_t largest = 0;
  for (const KernelList& list : schedule.kernel_lists()) {
    for (const Kernel& k : list.kernels()) {
      largest = std::max(largest, WorkspaceBytes(k));
    }
  }
  return largest;
}

std::vector<MoveLaunch> MoveLaunches(const MemoryKernel& m) {
  // Launches go to each path in proportion to its bytes, at least one to
  // each path that has bytes (so an op of one launch with both paths gets
  // two).
  const int paths = (m.vector_bytes() > 0) + (m.general_bytes() > 0);
  const int launches = std::max({1, m.launches(), paths});
  const int64_t total = m.vector_bytes() + m.general_bytes();
  std::vector<MoveLaunch> out;
  if (total <= 0) return out;
  int vec =
      m.vector_bytes() > 0
          ? static_cast<int>(
                (int64_t{launches} * m.vector_bytes() + total / 2) / total)
          : 0;
  if (m.vector_bytes() > 0) vec = std::max(vec, 1);
  if (m.general_bytes() > 0) vec = std::min(vec, launches - 1);
  const int gen = launches - vec;
  for (int i = 0; i < vec; ++i) {
    // The bytes spread over the launches, the remainder on the first.
    const int64_t share =
        m.vector_bytes() / vec + (i == 0 ? m.vector_bytes() % vec : 0);
    out.push_back({true, share});
  }
  for (int i = 0; i < gen && m.general_bytes() > 0; ++i) {
    const int64_t share =
        m.general_bytes() / gen + (i == 0 ? m.general_bytes() % gen : 0);
    out.push_back({false, share});
  }
  return out;
}

int64_t MovedBytes(const MemoryKernel& m) {
  int64_t moved = 0;
  for (const MoveLaunch& l : MoveLaunches(m)) moved += Moved(l.vector, l.bytes);
  return moved;
}

}  // namespace shardsim::hw

#include "sim/cli/heap.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

namespace shardsim {

// A point lowers, folds and copies schedules of tens of MB one after
// another. With glibc's defaults (mallopt(3): blocks over a dynamic
// threshold of at most 32 MiB are mmap'd, and free memory above 128 KiB
// goes back to the OS) each of them faults its pages in anew: 10% of a
// ZeRO-3 step of 128 micro-batches (tests/bench/engine_bench.py). Kept
// on the heap and not trimmed, freed pages are reused; untouched heap
// is not resident.
//
// Faults are dear in virtual machines: on the 2-core VM of the benchmarks
// one costs about 12 us (40 MiB touched page by page: 120 ms), and that
// step still took 7,100 of them. So the heap a point is about to grow
// into asks for transparent huge pages, which a first touch faults in 2
// MiB at a time: what glibc's tunable glibc.malloc.hugetlb=1 does, which
// only the environment can set. Best effort: where the kernel gives huge
// pages never (or always), the request changes nothing.
void SetUpHeap() {
  constexpr int kThreshold = 32 << 20;  // glibc's largest (64-bit)
  constexpr int kTopPad = 64 << 20;     // fewer, larger heap extensions
  mallopt(M_MMAP_THRESHOLD, kThreshold);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);  // above a point's schedules
  mallopt(M_TOP_PAD, kTopPad);
  // Below the threshold, so taken from the heap, which grows by it and
  // the pad; freed, it stays there for the point to use.
  constexpr uintptr_t kHuge = 2 << 20;  // x86-64's PMD page
  constexpr uintptr_t kBlock = kThreshold - kHuge;
  void* block = std::malloc(kBlock);
  if (block == nullptr) return;
  const uintptr_t lo =
      (reinterpret_cast<uintptr_t>(block) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t hi = reinterpret_cast<uintptr_t>(sbrk(0)) & ~(kHuge - 1);
  std::free(block);
  // Only a block the heap's end lies just past: one that glibc had to map
  // on its own (no room to grow the heap) is left as it is.
  if (hi > lo && hi - lo <= kBlock + kTopPad) {
    madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
  }
}

}  // namespace shardsim

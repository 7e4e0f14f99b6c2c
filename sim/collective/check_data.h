// The data check of a collective, one oracle for every executor of plans:
// the in-memory executor (executor.h's CheckPlan) and shardsim-hw's CPU and
// CUDA transports (RunChecked). It says which elements of a member's buffer
// are inputs under plan.h's contract, what they hold, and what every checked
// element must hold after the collective. Free of CUDA and MPI.
#ifndef SHARDSIM_SIM_COLLECTIVE_CHECK_DATA_H_
#define SHARDSIM_SIM_COLLECTIVE_CHECK_DATA_H_

#include <cstdint>
#include <limits>

#include "sim/collective/plan.h"

namespace shardsim {

// The value scheme: member m's input element e is
//   (m + 1) * member_scale + (e mod period) * element_scale + offset,
// and an element that is not an input holds `poison` (so that a plan that
// forgets to send it is caught).
struct CheckValues {
  int64_t member_scale = 1;
  int64_t element_scale = 1;
  int64_t offset = 0;
  int64_t period = std::numeric_limits<int64_t>::max();
  int64_t poison = -1;

  // int64 elements, whose sums are exact: (m + 1) * 1000003 + 7 e + 1,
  // distinct across members and elements, so a misplaced or doubled
  // contribution shows.
  static CheckValues Exact();
  // float32 elements in a group of p: (m + 1) + p (e mod period), distinct
  // across members (for one e) and across elements modulo period = 2^24 /
  // p^2 (at least 1), so every partial sum stays below 2^24 and float adds
  // are exact. Poison -1: inputs and sums are >= 1.
  static CheckValues Float32(int p);
};

// One collective's check: `op` over a group of p members and a buffer of n
// elements (root: BROADCAST's source member).
class DataCheck {
 public:
  DataCheck(CollectiveOp op, int p, int root, int64_t n, CheckValues values);

  // Whether the oracle knows `op`'s result (ALL_GATHER, REDUCE_SCATTER,
  // ALL_REDUCE, BROADCAST). For any other op nothing is checked.
  static bool Supports(CollectiveOp op);

  // Member's element e before the collective: an input (IsInput) or poison.
  bool IsInput(int member, int64_t e) const;
  int64_t InputValue(int member, int64_t e) const;
  int64_t InitialValue(int member, int64_t e) const;

  // After the collective: whether member's element e is checked (all but
  // REDUCE_SCATTER's elements outside the member's own chunk), and its
  // expected value.
  bool IsChecked(int member, int64_t e) const;
  int64_t ExpectedValue(int member, int64_t e) const;

  // The member whose chunk (ChunkRange) holds element e.
  int OwnerOf(int64_t e) const;

  // Fills member's n-element buffer with its initial values.
  template <typename T>
  void Fill(int member, T* buffer) const {
    for (int64_t e = 0; e < n_; ++e) {
      buffer[e] = static_cast<T>(InitialValue(member, e));
    }
  }

  struct Count {
    int64_t checked = 0;
    int64_t wrong = 0;
    int64_t first_wrong = -1;  // the lowest wrong element, -1 if none
  };
  // Compares member's n-element buffer after the collective with the
  // expected values (each converted to T).
  template <typename T>
  Count Verify(int member, const T* buffer) const {
    Count c;
    if (!Supports(op_)) return c;
    for (int owner = 0; owner < p_; ++owner) {
      if (op_ == REDUCE_SCATTER && owner != member) continue;
      const Range r = ChunkRange(n_, p_, owner);
      for (int64_t e = r.offset; e < r.offset + r.count; ++e) {
        const T want = static_cast<T>(Expected(owner, e));
        ++c.checked;
        if (buffer[e] != want && c.wrong++ == 0) c.first_wrong = e;
      }
    }
    return c;
  }

 private:
  // Expected value of element e, held in `owner`'s chunk.
  int64_t Expected(int owner, int64_t e) const;

  CollectiveOp op_;
  int p_;
  int root_;
  int64_t n_;
  CheckValues v_;
};

}  // namespace shardsim

#endif  // SHARDSIM_SIM_COLLECTIVE_CHECK_DATA_H_

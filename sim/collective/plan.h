// Collective plans: a collective over a group, lowered to point-to-point
// transfers (who sends which elements to whom, in which step, on which
// channel). Both the SimGrid engine and the hardware backend execute plans;
// traffic is counted from them. No collective is written anywhere else.
//
// Data contract (checked by executor.h on real buffers). Every member holds
// a buffer of `count` elements; chunk i is ChunkRange(count, p, i).
//   ALL_GATHER      before: member i's chunk i.   after: every chunk,
//   everywhere. REDUCE_SCATTER  before: a full buffer each.   after: member i's
//   chunk i is
//                                                 the sum over members.
//   ALL_REDUCE      before: a full buffer each.   after: the sum, everywhere.
//   BROADCAST       before: root's buffer.        after: root's buffer,
//   everywhere.
//
// Step semantics: steps run in order. All transfers of one step read their
// source as it was when the step began, then write: a copy overwrites the
// destination range, a reduce adds into it; several reduces into one element
// in one step all add. A step never both copies and reduces into the same
// element. Transfers of one step with the same channel, source and
// destination are one message cut into ranges (strided blocks): the engine
// sends them as one flow. kSwitch is the network switch of SHARP: it
// holds one zeroed buffer of `count` elements that reduces add into and that
// sends copies from.
#ifndef SHARDSIM_SIM_COLLECTIVE_PLAN_H_
#define SHARDSIM_SIM_COLLECTIVE_PLAN_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/schema/schedule.pb.h"
#include "sim/schema/strategy.pb.h"

namespace shardsim {

// A group as `nodes` nodes with `per_node` members each; member m sits on
// node m / per_node. Members are numbered 0..size()-1 in global-rank order.
struct PlanShape {
  int per_node = 1;
  int nodes = 1;
  int size() const { return per_node * nodes; }
  int NodeOf(int member) const { return member / per_node; }

  friend bool operator==(const PlanShape& a, const PlanShape& b) {
    return a.per_node == b.per_node && a.nodes == b.nodes;
  }
  template <typename H>
  friend H AbslHashValue(H h, const PlanShape& s) {
    return H::combine(std::move(h), s.per_node, s.nodes);
  }
};

inline constexpr int kSwitch = -1;

struct Transfer {
  int32_t step = 0;
  // Parallel lanes (NCCL channels). Rings use 0..channels-1; the double
  // binary tree gives each of its two trees its own set, 0..2*channels-1.
  int32_t channel = 0;
  int32_t src = 0;     // member index or kSwitch
  int32_t dst = 0;     // member index or kSwitch
  int64_t offset = 0;  // in elements
  int64_t count = 0;
  bool reduce = false;  // add into dst instead of copying
};

// Element range of chunk `index` when `count` elements are cut into `parts`:
// the first count % parts chunks hold one element more.
struct Range {
  int64_t offset = 0;
  int64_t count = 0;
};
Range ChunkRange(int64_t count, int parts, int index);

// One pass around a ring, stored as what it is rather than as its
// (n - 1) x n transfers: a ring over every GPU of a large job would be
// millions of them. n = order.size(). At pass step t (0 .. n-2) position r
// sends ranges[(r - t - lag) mod n] from order[r] to order[(r + 1) % n], at
// plan step first_step + t. lag 0 is an all-gather pass (own range first,
// then forward what arrived), lag 1 a reduce-scatter pass (reduce = true;
// range j ends complete at position j). `reversed` runs the pass backwards
// in time and direction: pass step t moves to first_step + n - 2 - t, from
// order[(r + 1) % n] to order[r] (HO-Ring's reduce-scatter mirrors its
// all-gather this way).
struct RingPass {
  int32_t first_step = 0;
  int32_t channel = 0;
  int32_t lag = 0;
  bool reduce = false;
  bool reversed = false;
  std::vector<int32_t> order;
  std::vector<Range> ranges;  // by position
};

// A pipelined chain, stored as what it is rather than as its pieces x
// (n - 1) transfers: a broadcast over every GPU of a large job would be
// millions of them. n = order.size(). Piece j crosses hop h, order[h] to
// order[h + 1], at plan step first_step + j + h (h = 0 .. n - 2), as a
// copy; an empty piece moves nothing.
struct ChainPass {
  int32_t first_step = 0;
  int32_t channel = 0;
  std::vector<int32_t> order;
  std::vector<Range> pieces;
};

// An all-to-all pass, stored as what it is rather than as its
// (n - 1) x n x channels transfers: 2048 members on 8 channels would be 33
// million. n = chunks.size(), every member of the plan. At pass step t
// (1 .. n - 1), plan step first_step + t - 1, member m sends to
// d = (m + t) mod n (DirectPeer) its own chunk m (an all-gather pass) or,
// reduce = true, chunk d, which d adds into its own (a reduce-scatter
// pass), cut into one sub-range per channel as the ring's are. The shift
// pairs every receiver with exactly one sender per step, and no member
// ever sends the chunk it owns while reduces land in it.
struct DirectPass {
  int32_t first_step = 0;
  bool reduce = false;
  std::vector<Range> chunks;  // by member
};

// The receiver of member m at pass step t of an n-member direct pass, and
// the chunk m sends it.
inline int DirectPeer(int m, int t, int n) { return (m + t) % n; }
inline Range DirectChunk(const DirectPass& pass, int m, int t) {
  const int n = static_cast<int>(pass.chunks.size());
  return pass.chunks[pass.reduce ? DirectPeer(m, t, n) : m];
}

struct Plan {
  CollectiveOp op = OP_UNSPECIFIED;
  Algorithm algorithm = ALGORITHM_UNSPECIFIED;
  PlanShape shape;
  int64_t count = 0;  // elements in each member's buffer
  int channels = 1;
  int root = 0;  // BROADCAST only
  int num_steps = 0;
  // The plan is the explicit transfers plus the ring, chain and direct
  // passes'.
  std::vector<Transfer> transfers;  // sorted by step, none empty
  std::vector<RingPass> rings;
  std::vector<ChainPass> chains;
  std::vector<DirectPass> directs;
};

// Every transfer of the plan, ring, chain and direct passes expanded,
// sorted by step, empty ones dropped; inside a step the explicit transfers
// come first, then the chains' (in plan order, by piece), then the rings',
// then the direct passes' (by sender, then channel).
// O(size of the plan): for executing and checking.
std::vector<Transfer> ExpandTransfers(const Plan& plan);

// [begin, end) of each step's transfers in a list sorted by step.
std::vector<std::pair<size_t, size_t>> StepRuns(
    const std::vector<Transfer>& transfers);

// A transfer between these members leaves its node: to another node's
// member, or to or from the switch (through the NIC).
inline bool LeavesNode(const PlanShape& shape, int src, int dst) {
  return src == kSwitch || dst == kSwitch ||
         shape.NodeOf(src) != shape.NodeOf(dst);
}

struct PlanRequest {
  CollectiveOp op = OP_UNSPECIFIED;
  Algorithm algorithm = RING;
  PlanShape shape;
  int64_t count = 0;
  int channels = 1;  // parallel rings (NCCL channels); each moves 1/k
  int root = 0;

  friend bool operator==(const PlanRequest& a, const PlanRequest& b) {
    return a.op == b.op && a.algorithm == b.algorithm && a.shape == b.shape &&
           a.count == b.count && a.channels == b.channels && a.root == b.root;
  }
  template <typename H>
  friend H AbslHashValue(H h, const PlanRequest& r) {
    return H::combine(std::move(h), r.op, r.algorithm, r.shape, r.count,
                      r.channels, r.root);
  }
};

// Lowers a collective. Errors name the field and the reason (an algorithm
// that cannot run this op on this shape, a channel count < 1, ...).
absl::StatusOr<Plan> MakePlan(const PlanRequest& request);

// Elements sent over the step, summed over senders, split by whether the
// transfer leaves its node. Transfers to or from the switch leave the node;
// those from the switch are counted apart (the switch is not a GPU).
struct PlanVolume {
  int64_t intra_node = 0;   // GPU to GPU, same node
  int64_t inter_node = 0;   // GPU to another node's GPU or to the switch
  int64_t from_switch = 0;  // switch to GPU
};
// Reads ring, chain and direct passes without expanding them.
PlanVolume CountVolume(const Plan& plan);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_COLLECTIVE_PLAN_H_

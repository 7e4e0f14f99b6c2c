// Hierarchical collectives HRING and TORUS2D (HORING is in horing.cc).
//
// Shape: per_node (M) members on each of `nodes` (g) nodes; member m is
// (node m / M, local m % M). "Column l" is the g members of local index l,
// one per node. The final layout is plan.h's flat one: chunk i belongs to
// member i, so node n's block is chunks n*M .. n*M+M-1 (contiguous) and
// column piece l is chunks n*M+l for every node n (strided).
//
// HRING (hierarchical ring, leader-based, as Horovod's hierarchical
// all-reduce). Only each node's leader (local 0) uses the network.
//   ALL_GATHER: intra ring all-gather of the node's chunks; ring all-gather
//     of node blocks among the g leaders; each leader then broadcasts the
//     other g-1 node blocks into its node down a pipelined chain
//     0 -> 1 -> ... -> M-1, one node block per step. A chain rather than
//     direct copies over the NVSwitch: direct copies put (M-1)(g-1) blocks
//     on the leader's NVLink egress, the chain at most g-1 on every GPU's,
//     for M-2 extra (pipelined) steps.
//   REDUCE_SCATTER: intra ring reduce-scatter of the column pieces, then
//     every member copies its summed piece to the leader in one step, so the
//     leader holds the node's sum of the whole buffer; ring reduce-scatter
//     of node blocks among the leaders; the leader scatters each member's
//     chunk in one step of direct copies (each member gets different data,
//     so a chain would only add hops).
//   ALL_REDUCE: intra reduce to the leader as above; ring all-reduce of node
//     blocks among the leaders; each leader broadcasts the whole buffer into
//     its node down the pipelined chain (pieces: the g node blocks).
//   BROADCAST: the root copies the buffer to its node's leader (if it is not
//     the leader); pipelined chain among the leaders from the root's node
//     (pieces: the g node blocks); every leader broadcasts into its node down
//     the pipelined chain (pieces: the M column pieces), skipping the root.
//
// TORUS2D (2D torus: every GPU in its own inter-node ring).
//   ALL_GATHER: every column runs a ring all-gather of its members' chunks
//     (inter), so member l of every node holds column piece l; then every
//     node runs a ring all-gather of the column pieces (intra).
//   REDUCE_SCATTER: the mirror image: intra ring reduce-scatter of the
//     column pieces (member l of node n ends with node n's partial sum of
//     column piece l), then a ring reduce-scatter of chunks along each
//     column.
//   ALL_REDUCE: intra reduce-scatter, column ring all-reduce, intra
//     all-gather.
//   BROADCAST: the root scatters the column pieces in its node (one step);
//     each column broadcasts its piece down a pipelined chain starting at the
//     root's node (pieces: the column's g chunks); intra ring all-gather.
//
// Phases are sequential: a phase starts the step after the previous one
// ends, so it only reads what earlier steps delivered. Rings of one phase
// (one per node or per column) share their steps. With one node or one GPU
// per node there is no hierarchy and both are the flat ring (BuildRing).
//
// Channels: channel c runs the whole algorithm on sub-range c of every chunk
// (ChannelGrid of chunks.h), at the same steps as the other channels.
#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "sim/collective/algorithms.h"
#include "sim/collective/chunks.h"
#include "sim/collective/plan.h"
#include "sim/collective/ring.h"

namespace shardsim::internal {
namespace {

// Element ranges that move together between the same two members in the
// same step. Every block of one ring phase has the same number of ranges,
// so a ring over blocks is that many single-range rings of ring.h sharing
// their steps (range q of every block forms ring q).
using Block = std::vector<Range>;

// One channel of a plan: its grid, its blocks, and the transfers it
// appends.
class Channel : public ChannelGrid {
 public:
  Channel(const ChannelGrid& grid, Plan* out) : ChannelGrid(grid), out_(out) {}

  Block NodeBlock(int node) const {
    if (channels() == 1) {
      // The node's chunks are adjacent: one range, one transfer per hop.
      const Range first = Chunk(Member(node, 0));
      const Range last = Chunk(Member(node, per_node() - 1));
      return {Range{first.offset, last.offset + last.count - first.offset}};
    }
    return NodeChunks(node);
  }

  Block Whole() const {
    if (channels() == 1) return {Range{0, count()}};
    return AllChunks();
  }

  std::vector<Block> NodeBlocks() const {
    std::vector<Block> blocks;
    for (int n = 0; n < nodes(); ++n) blocks.push_back(NodeBlock(n));
    return blocks;
  }

  // Column piece l is ColumnChunks(l).
  std::vector<Block> ColumnPieces() const {
    std::vector<Block> blocks;
    for (int l = 0; l < per_node(); ++l) blocks.push_back(ColumnChunks(l));
    return blocks;
  }

  // blocks[r] = the chunk of members[r], a block of one range.
  std::vector<Block> ChunkBlocks(const std::vector<int>& members) const {
    std::vector<Block> blocks;
    for (const Range& chunk : ChunksOf(members)) blocks.push_back({chunk});
    return blocks;
  }

  // Runs `phase` over `order` on blocks (blocks[r] belongs to position r, or
  // is piece r of a chain) from `first_step`; returns the steps it took.
  int Run(RingPhase phase, const std::vector<int>& order,
          const std::vector<Block>& blocks, int first_step) {
    int steps = 0;
    const size_t ranges = blocks.empty() ? 0 : blocks[0].size();
    std::vector<Range> ring_q;
    ring_q.reserve(blocks.size());
    for (size_t q = 0; q < ranges; ++q) {
      ring_q.clear();
      for (const Block& block : blocks) ring_q.push_back(block[q]);
      steps = phase(order, ring_q, first_step, channel(), out_);
    }
    return steps;
  }

  // Direct copy over one link (gathers, scatters, root to leader).
  void Copy(int step, int src, int dst, const Block& block) {
    for (const Range& r : block) {
      AppendTransfer(step, channel(), src, dst, r, /*reduce=*/false, out_);
    }
  }

 private:
  Plan* out_;
};

// The same ring phase in every node at once; blocks[l] belongs to local l.
int EveryNode(Channel& ch, RingPhase phase, const std::vector<Block>& blocks,
              int first_step) {
  int steps = 0;
  for (int n = 0; n < ch.nodes(); ++n) {
    steps = ch.Run(phase, ch.NodeOrder(n), blocks, first_step);
  }
  return steps;
}

// The same ring phase on every column at once, over its members' chunks.
int EveryColumn(Channel& ch, RingPhase phase, int first_step) {
  int steps = 0;
  for (int l = 0; l < ch.per_node(); ++l) {
    const std::vector<int> order = ch.ColumnOrder(l, 0);
    steps = ch.Run(phase, order, ch.ChunkBlocks(order), first_step);
  }
  return steps;
}

// ---- HRING ----------------------------------------------------------------

std::vector<int> Leaders(const Channel& ch, int first_node) {
  return ch.ColumnOrder(0, first_node);
}

int HringAllGather(Channel& ch) {
  int step = 0;
  int steps = 0;
  for (int n = 0; n < ch.nodes(); ++n) {
    const std::vector<int> order = ch.NodeOrder(n);
    steps = ch.Run(AppendRingAllGather, order, ch.ChunkBlocks(order), step);
  }
  step += steps;
  step += ch.Run(AppendRingAllGather, Leaders(ch, 0), ch.NodeBlocks(), step);
  for (int n = 0; n < ch.nodes(); ++n) {
    // The other blocks in the order the leader ring delivered them.
    std::vector<Block> pieces;
    for (int j = 1; j < ch.nodes(); ++j) pieces.push_back(ch.NodeBlock(n - j));
    steps = ch.Run(AppendChainBroadcast, ch.NodeOrder(n), pieces, step);
  }
  return step + steps;
}

// Leaves the node's sum of the whole buffer on each leader: intra ring
// reduce-scatter of column pieces, then one step of copies to the leader.
int IntraReduceToLeader(Channel& ch, int step) {
  step += EveryNode(ch, AppendRingReduceScatter, ch.ColumnPieces(), step);
  for (int n = 0; n < ch.nodes(); ++n) {
    for (int l = 1; l < ch.per_node(); ++l) {
      ch.Copy(step, ch.Member(n, l), ch.Member(n, 0), ch.ColumnChunks(l));
    }
  }
  return step + 1;
}

int HringReduceScatter(Channel& ch) {
  int step = IntraReduceToLeader(ch, 0);
  step +=
      ch.Run(AppendRingReduceScatter, Leaders(ch, 0), ch.NodeBlocks(), step);
  for (int n = 0; n < ch.nodes(); ++n) {
    for (int l = 1; l < ch.per_node(); ++l) {
      const int member = ch.Member(n, l);
      ch.Copy(step, ch.Member(n, 0), member, {ch.Chunk(member)});
    }
  }
  return step + 1;
}

int HringAllReduce(Channel& ch) {
  int step = IntraReduceToLeader(ch, 0);
  step += ch.Run(AppendRingAllReduce, Leaders(ch, 0), ch.NodeBlocks(), step);
  int steps = 0;
  for (int n = 0; n < ch.nodes(); ++n) {
    steps =
        ch.Run(AppendChainBroadcast, ch.NodeOrder(n), ch.NodeBlocks(), step);
  }
  return step + steps;
}

int HringBroadcast(Channel& ch, int root) {
  const int root_node = root / ch.per_node();
  int step = 0;
  if (root % ch.per_node() != 0) {
    ch.Copy(step, root, ch.Member(root_node, 0), ch.Whole());
    ++step;
  }
  step += ch.Run(AppendChainBroadcast, Leaders(ch, root_node), ch.NodeBlocks(),
                 step);
  int steps = 0;
  for (int n = 0; n < ch.nodes(); ++n) {
    std::vector<int> chain = ch.NodeOrder(n);
    // The root already holds everything; when it is not the leader its
    // node's chain goes around it.
    if (n == root_node && chain[0] != root) {
      chain.erase(std::find(chain.begin(), chain.end(), root));
    }
    steps = std::max(
        steps, ch.Run(AppendChainBroadcast, chain, ch.ColumnPieces(), step));
  }
  return step + steps;
}

// ---- TORUS2D --------------------------------------------------------------

int TorusAllGather(Channel& ch) {
  int step = EveryColumn(ch, AppendRingAllGather, 0);
  return step + EveryNode(ch, AppendRingAllGather, ch.ColumnPieces(), step);
}

int TorusReduceScatter(Channel& ch) {
  int step = EveryNode(ch, AppendRingReduceScatter, ch.ColumnPieces(), 0);
  return step + EveryColumn(ch, AppendRingReduceScatter, step);
}

int TorusAllReduce(Channel& ch) {
  int step = EveryNode(ch, AppendRingReduceScatter, ch.ColumnPieces(), 0);
  step += EveryColumn(ch, AppendRingAllReduce, step);
  return step + EveryNode(ch, AppendRingAllGather, ch.ColumnPieces(), step);
}

int TorusBroadcast(Channel& ch, int root) {
  const int root_node = root / ch.per_node();
  const int root_local = root % ch.per_node();
  for (int l = 0; l < ch.per_node(); ++l) {
    if (l != root_local) {
      ch.Copy(0, root, ch.Member(root_node, l), ch.ColumnChunks(l));
    }
  }
  int step = 1;
  int steps = 0;
  for (int l = 0; l < ch.per_node(); ++l) {
    // Pieces: the column's chunks, in node order.
    steps = ch.Run(AppendChainBroadcast, ch.ColumnOrder(l, root_node),
                   ch.ChunkBlocks(ch.ColumnOrder(l, 0)), step);
  }
  step += steps;
  return step + EveryNode(ch, AppendRingAllGather, ch.ColumnPieces(), step);
}

// ---- dispatch -------------------------------------------------------------

int HringChannel(const PlanRequest& request, const ChannelGrid& grid,
                 Plan* out) {
  Channel ch(grid, out);
  switch (request.op) {
    case ALL_GATHER:
      return HringAllGather(ch);
    case REDUCE_SCATTER:
      return HringReduceScatter(ch);
    case ALL_REDUCE:
      return HringAllReduce(ch);
    default:  // BROADCAST
      return HringBroadcast(ch, request.root);
  }
}

int TorusChannel(const PlanRequest& request, const ChannelGrid& grid,
                 Plan* out) {
  Channel ch(grid, out);
  switch (request.op) {
    case ALL_GATHER:
      return TorusAllGather(ch);
    case REDUCE_SCATTER:
      return TorusReduceScatter(ch);
    case ALL_REDUCE:
      return TorusAllReduce(ch);
    default:  // BROADCAST
      return TorusBroadcast(ch, request.root);
  }
}

}  // namespace

absl::Status BuildHierarchical(const PlanRequest& request, const char* name,
                               ChannelSchedule schedule, Plan* plan) {
  const CollectiveOp op = request.op;
  if (!IsLoweredOp(op)) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan op: ", name, " has no schedule for op ",
                     static_cast<int>(op), " ", CollectiveOp_Name(op)));
  }
  // One level only: nothing to arrange hierarchically.
  if (request.shape.nodes == 1 || request.shape.per_node == 1) {
    return BuildRing(request, plan);
  }
  BuildChannels(request, schedule, plan);
  return absl::OkStatus();
}

absl::Status BuildHring(const PlanRequest& request, Plan* plan) {
  return BuildHierarchical(request, "HRING", HringChannel, plan);
}

absl::Status BuildTorus2d(const PlanRequest& request, Plan* plan) {
  return BuildHierarchical(request, "TORUS2D", TorusChannel, plan);
}

}  // namespace shardsim::internal

// NCCL's double binary tree, built as NCCL builds it (src/graph/trees.cc
// ncclGetBtree and ncclGetDtree; src/graph/connect.cc ncclTopoPreset and
// connectTrees, NVIDIA/nccl at 5067397): two binary trees over the nodes,
// each carrying half of the buffer (a node that is a leaf in one tree is
// nearly always an inner node in the other), and inside each node a chain
// of its members. A channel's chain starts at its own member (NCCL's
// search starts each channel at another GPU and NIC): the chain's head
// links to the parent node, and a child node links to the head
// (parentChildType 1) or to the chain's second member (type 0), NCCL's
// BALANCED_TREE pattern, the first it tries (init.cc), which spreads a
// node's network links over two GPUs. NCCL routes both through the head's
// NIC; here each GPU sends through its own.
//
// NCCL itself offers the tree for all-reduce only; here all-gather,
// reduce-scatter and broadcast are lowered on the same trees too, so that
// the simulator can compare the algorithms op by op:
//   ALL_REDUCE      pipelined reduce up to the root, then pipelined
//                   broadcast down.
//   BROADCAST       pipelined broadcast down from the root (the nodes are
//                   relabelled so that the root's node is the tree's root,
//                   and every chain starts at the root's place in its node).
//   ALL_GATHER      gather up (each child sends its subtree's chunks), then
//                   each parent sends each child the rest of the half.
//   REDUCE_SCATTER  pipelined reduce up, then the root scatters down (each
//                   parent sends each child only its subtree's chunks).
//
// Channels: like NCCL, which runs tree 0 on channels 0..k-1 and tree 1 on
// duplicated channels k..2k-1 with the same chains, tree t's half is cut
// into k parts and part c goes on channel t * k + c. Transfers thus use
// channels 0..2k-1.
#include <algorithm>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "sim/collective/algorithms.h"
#include "sim/collective/chunks.h"

namespace shardsim::internal {
namespace {

// ncclGetBtree: in-order numbering where a rank's level is its lowest set
// bit; rank 0 is the root with the single child of the highest level.
//   0---------8
//            / \   (children of 8)
//           4   12 ...      (nranks = 14)
int BtreeParent(int n, int rank) {
  if (rank == 0) return -1;
  const int bit = rank & -rank;
  const int up = (rank ^ bit) | (bit << 1);
  return up < n ? up : (rank ^ bit);
}

// A node's parent in tree `tree` (0 or 1) over n nodes (-1 at the root),
// and which child of it the node is (ncclGetBtree's parentChildType: 0 if
// the node's rank is below its parent's). ncclGetDtree's second tree is the
// first shifted by one rank when n is odd, mirrored (rank -> n - 1 - rank)
// when n is even; the child type is the one in the shifted or mirrored
// numbering.
struct NodeLink {
  int up = -1;
  int child_type = 0;
};
NodeLink NodeParent(int n, int tree, int rank) {
  int r = rank;
  if (tree == 1) r = n % 2 == 1 ? (rank - 1 + n) % n : n - 1 - rank;
  const int u = BtreeParent(n, r);
  if (u < 0) return {};
  const int child_type = r < u ? 0 : 1;
  if (tree == 0) return {u, child_type};
  return {n % 2 == 1 ? (u + 1) % n : n - 1 - u, child_type};
}

// ncclGetDtreeRoots (one node: the root of both).
int TreeRoot(int n, int tree) {
  if (tree == 0) return 0;
  return n % 2 == 1 ? 1 % n : n - 1;
}

struct Tree {
  std::vector<int> parent;                 // by member; -1 at the root
  std::vector<std::vector<int>> children;  // by member
  std::vector<std::vector<int>> levels;    // members by depth; levels[0] = root
  int height() const { return static_cast<int>(levels.size()) - 1; }
};

// Tree `tree` (0 or 1) of NCCL's pair over `shape`, each node's chain
// starting at its member `start` (0 .. per_node - 1), the nodes rotated so
// that node `root_node` is the tree's root: node-rank r sits on node
// (r - TreeRoot + root_node) mod nodes. A rotation keeps the tree's shape;
// with root_node = TreeRoot it is NCCL's tree itself.
absl::StatusOr<Tree> MakeTree(const PlanShape& shape, int tree, int start,
                              int root_node) {
  const int nodes = shape.nodes;
  const int per = shape.per_node;
  const int p = shape.size();
  const int shift = root_node - TreeRoot(nodes, tree);
  auto node_of = [&](int rank) {
    return ((rank + shift) % nodes + nodes) % nodes;
  };
  // The member at place i of node n's chain.
  auto chain = [&](int n, int i) { return n * per + (start + i) % per; };
  Tree t;
  t.parent.assign(p, -1);
  t.children.assign(p, {});
  auto link = [&](int child, int up) {
    t.parent[child] = up;
    t.children[up].push_back(child);
  };
  for (int rank = 0; rank < nodes; ++rank) {
    const int n = node_of(rank);
    const NodeLink up = NodeParent(nodes, tree, rank);
    if (up.up >= 0) {
      // BALANCED_TREE: child0 of a node links to its chain's second member
      // (the head itself when the node has one member), child1 to the head.
      const int at = up.child_type == 0 ? std::min(1, per - 1) : 0;
      link(chain(n, 0), chain(node_of(up.up), at));
    }
    for (int i = 1; i < per; ++i) link(chain(n, i), chain(n, i - 1));
  }
  const int root = chain(root_node, 0);
  int reached = 0;
  for (std::vector<int> level = {root}; !level.empty();) {
    reached += static_cast<int>(level.size());
    t.levels.push_back(level);
    std::vector<int> next;
    for (int m : level) {
      next.insert(next.end(), t.children[m].begin(), t.children[m].end());
    }
    level = std::move(next);
  }
  if (reached != p) {
    return absl::InternalError(absl::StrCat("tree: tree ", tree, " over ", p,
                                            " members reaches only ", reached));
  }
  return t;
}

// One (tree, part of the buffer, channel) combination; lanes run in
// parallel over the same step numbers.
struct Lane {
  const Tree* tree;
  Range range;
  int channel;
};

// Pipeline depth: NCCL halves a tree's chunk until every channel has at
// least depth x 8 of them (src/enqueue.cc, Simple protocol; depth is the
// tree's height, connect.cc), and larger messages have more: 8 x height
// pieces, the fewest NCCL runs where the chunks are not at their floor
// (128 KiB), keep the fill and drain of a reduce + broadcast (2 x height - 1
// steps) to a fifth of the run.
std::vector<Range> Pieces(const Lane& lane) {
  const int n = std::max(1, 8 * lane.tree->height());
  std::vector<Range> pieces(n);
  for (int j = 0; j < n; ++j) pieces[j] = SubRange(lane.range, n, j);
  return pieces;
}

// Piece j leaves depth d for the parent at first_step + j + (D - d): the
// deepest members start, and a member sends piece j the step after all its
// children's contributions to it arrived. Returns the steps used.
int ReduceUp(const Lane& lane, const std::vector<Range>& pieces, int first_step,
             Plan* out) {
  const Tree& tree = *lane.tree;
  const int height = tree.height();
  for (int j = 0; j < static_cast<int>(pieces.size()); ++j) {
    for (int d = 1; d <= height; ++d) {
      for (int m : tree.levels[d]) {
        AppendTransfer(first_step + j + height - d, lane.channel, m,
                       tree.parent[m], pieces[j], /*reduce=*/true, out);
      }
    }
  }
  return static_cast<int>(pieces.size()) + height - 1;
}

// Piece j leaves depth d for the children at first_step + j + d, the step
// after it arrived there. Returns the steps used.
int BroadcastDown(const Lane& lane, const std::vector<Range>& pieces,
                  int first_step, Plan* out) {
  const Tree& tree = *lane.tree;
  const int height = tree.height();
  for (int j = 0; j < static_cast<int>(pieces.size()); ++j) {
    for (int d = 0; d < height; ++d) {
      for (int m : tree.levels[d]) {
        for (int child : tree.children[m]) {
          AppendTransfer(first_step + j + d, lane.channel, m, child, pieces[j],
                         /*reduce=*/false, out);
        }
      }
    }
  }
  return static_cast<int>(pieces.size()) + height - 1;
}

// Members of every member's subtree (itself included), sorted.
std::vector<std::vector<int>> Subtrees(const Tree& tree) {
  std::vector<std::vector<int>> sub(tree.parent.size());
  for (int d = tree.height(); d >= 0; --d) {
    for (int m : tree.levels[d]) {
      sub[m].push_back(m);
      for (int child : tree.children[m]) {
        sub[m].insert(sub[m].end(), sub[child].begin(), sub[child].end());
      }
      std::sort(sub[m].begin(), sub[m].end());
    }
  }
  return sub;
}

// The chunks of `members` (sorted) inside `within`, with adjacent chunks
// merged: a subtree is usually a contiguous run of members, so this is one
// or two transfers rather than one per chunk.
std::vector<Range> ChunkRuns(const std::vector<int>& members, int64_t count,
                             int p, Range within) {
  std::vector<Range> runs;
  for (int m : members) {
    const Range chunk = ChunkRange(count, p, m);
    const int64_t begin = std::max(chunk.offset, within.offset);
    const int64_t end =
        std::min(chunk.offset + chunk.count, within.offset + within.count);
    if (begin >= end) continue;
    if (!runs.empty() && runs.back().offset + runs.back().count == begin) {
      runs.back().count += end - begin;
    } else {
      runs.push_back(Range{begin, end - begin});
    }
  }
  return runs;
}

// `within` minus the sorted, disjoint `runs`.
std::vector<Range> Complement(const std::vector<Range>& runs, Range within) {
  std::vector<Range> gaps;
  int64_t at = within.offset;
  for (const Range& r : runs) {
    if (r.offset > at) gaps.push_back(Range{at, r.offset - at});
    at = r.offset + r.count;
  }
  const int64_t end = within.offset + within.count;
  if (end > at) gaps.push_back(Range{at, end - at});
  return gaps;
}

// All-gather: depth d sends its subtree's chunks up at step D - d; then
// depth d sends each child everything the child's subtree lacks at step
// D + d. Each datum crosses each tree edge at most once.
int AllGather(const Lane& lane, const std::vector<std::vector<int>>& sub,
              int64_t count, Plan* out) {
  const Tree& tree = *lane.tree;
  const int p = static_cast<int>(tree.parent.size());
  const int height = tree.height();
  for (int d = 1; d <= height; ++d) {
    for (int m : tree.levels[d]) {
      for (const Range& r : ChunkRuns(sub[m], count, p, lane.range)) {
        AppendTransfer(height - d, lane.channel, m, tree.parent[m], r,
                       /*reduce=*/false, out);
      }
    }
  }
  for (int d = 0; d < height; ++d) {
    for (int m : tree.levels[d]) {
      for (int child : tree.children[m]) {
        const std::vector<Range> have =
            ChunkRuns(sub[child], count, p, lane.range);
        for (const Range& r : Complement(have, lane.range)) {
          AppendTransfer(height + d, lane.channel, m, child, r,
                         /*reduce=*/false, out);
        }
      }
    }
  }
  return 2 * height;
}

// Reduce-scatter: pipelined reduce up, then depth d hands each child the
// sums of the child's subtree's chunks, overwriting its partial sums.
int ReduceScatter(const Lane& lane, const std::vector<std::vector<int>>& sub,
                  int64_t count, Plan* out) {
  const Tree& tree = *lane.tree;
  const int p = static_cast<int>(tree.parent.size());
  const int up = ReduceUp(lane, Pieces(lane), 0, out);
  for (int d = 0; d < tree.height(); ++d) {
    for (int m : tree.levels[d]) {
      for (int child : tree.children[m]) {
        for (const Range& r : ChunkRuns(sub[child], count, p, lane.range)) {
          AppendTransfer(up + d, lane.channel, m, child, r, /*reduce=*/false,
                         out);
        }
      }
    }
  }
  return up + tree.height();
}

// All-reduce: the root forwards piece j down at step j + D, the step after
// its last contribution arrived (ReduceUp's piece j reaches the root at
// step j + D - 1).
int AllReduce(const Lane& lane, Plan* out) {
  const std::vector<Range> pieces = Pieces(lane);
  ReduceUp(lane, pieces, 0, out);
  return lane.tree->height() +
         BroadcastDown(lane, pieces, lane.tree->height(), out);
}

int RunLane(const PlanRequest& req, const Lane& lane,
            const std::vector<std::vector<int>>& sub, Plan* out) {
  switch (req.op) {
    case ALL_GATHER:
      return AllGather(lane, sub, req.count, out);
    case REDUCE_SCATTER:
      return ReduceScatter(lane, sub, req.count, out);
    case ALL_REDUCE:
      return AllReduce(lane, out);
    default:
      return BroadcastDown(lane, Pieces(lane), 0, out);
  }
}

}  // namespace

absl::Status BuildTree(const PlanRequest& request, Plan* plan) {
  const CollectiveOp op = request.op;
  if (!IsLoweredOp(op)) return UnsupportedOp("tree", op);
  const PlanShape& shape = request.shape;
  const int k = request.channels;
  int steps = 0;
  for (int t = 0; t < 2; ++t) {
    const int root_node =
        op == BROADCAST ? shape.NodeOf(request.root) : TreeRoot(shape.nodes, t);
    const Range half = ChunkRange(request.count, 2, t);
    for (int c = 0; c < k; ++c) {
      // A broadcast's chains start at the root's place, so that the root
      // heads its node; else channel c's chains start at member c.
      const int start = (op == BROADCAST ? request.root : c) % shape.per_node;
      absl::StatusOr<Tree> tree = MakeTree(shape, t, start, root_node);
      if (!tree.ok()) return tree.status();
      std::vector<std::vector<int>> sub;
      if (op == ALL_GATHER || op == REDUCE_SCATTER) sub = Subtrees(*tree);
      const Lane lane{&*tree, SubRange(half, k, c), t * k + c};
      steps = std::max(steps, RunLane(request, lane, sub, plan));
    }
  }
  plan->num_steps = steps;
  return absl::OkStatus();
}

}  // namespace shardsim::internal

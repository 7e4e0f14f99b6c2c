// HORING: PaRO's hierarchical overlapping ring (docs/strategies.md §5). The
// intra-node ring and the inter-node (column) ring run at the same time, so
// NVLink and every GPU's NIC are busy together.
//
// Shape and names as in hierarchical.cc: M = per_node members on each of g
// nodes, member (n, l) = n*M + l, column l = the g members of local index l,
// chunk (n, l) = the final chunk of member (n, l).
//
//   ALL_GATHER: at inter step j (j = 0..g-2, plan step j) every member (n, l)
//     sends on its column ring, to (n+1, l), the chunk it received at inter
//     step j-1 (at step 0 its own): chunk (n-j, l). That is exactly a ring
//     all-gather along each column. Meanwhile node n all-gathers "rows":
//     row j is node (n-j)'s chunks, one per local; row 0 is in place from
//     the start, row j >= 1 arrived over the column ring at step j-1, so its
//     intra ring all-gather runs at steps j .. j+M-2 and overlaps inter
//     step j. A transfer thus only reads what an earlier step delivered
//     (plan.h's snapshot rule). g+M-2 steps, the step count of TORUS2D's
//     sequential column-then-node phases, with the same volume on each
//     level; the gain is that no step leaves one level idle while the
//     other works, so NIC time hides under NVLink time.
//   REDUCE_SCATTER: the all-gather schedule run backwards: every transfer
//     reversed (dst -> src) and turned into a reduce, step t moved to step
//     T-1-t. Each chunk's all-gather transfers form a tree out of its owner,
//     every member received the chunk once, and before it forwarded it;
//     reversed, each member sends its partial sum up the tree after every
//     child has added into it, so the owner ends with the full sum. Read
//     forwards, this is the mirror image PaRO describes: each node first
//     reduce-scatters, on intra rings, the rows the column ring needs first
//     (the farthest node's chunks); column step j sends (the node's intra
//     partial sum of that chunk) + (what the previous node delivered), one
//     step after both are in; the intra reduce of the node's own row goes
//     last and adds into what the column ring delivered.
//   ALL_REDUCE: HO-Ring reduce-scatter, then HO-Ring all-gather.
//   BROADCAST: the root copies column piece l (chunks (n', l) for all n') to
//     local l of its node (one step); each column forwards its piece down a
//     pipelined chain from the root's node, one chunk (n', l) per step in
//     node order n'; row q of a node (chunks (q, l) for every l) is complete
//     the step after chunk q arrives, and its intra ring all-gather starts
//     then, overlapped with the chain still moving later chunks. The root's
//     node has every row after the scatter and all-gathers them at once.
//
// With one node or one GPU per node nothing can overlap; HORING is then the
// flat ring (BuildRing). Channels: channel c runs the schedule on sub-range c
// of every chunk (ChannelGrid of chunks.h) at the same steps.
#include <utility>
#include <vector>

#include "sim/collective/algorithms.h"
#include "sim/collective/chunks.h"
#include "sim/collective/plan.h"
#include "sim/collective/ring.h"

namespace shardsim::internal {
namespace {

int AllGather(const ChannelGrid& grid, int first, Plan* out) {
  out->rings.reserve(out->rings.size() + grid.per_node() +
                     grid.nodes() * grid.nodes());
  for (int l = 0; l < grid.per_node(); ++l) {
    AppendRingAllGather(grid.ColumnOrder(l, 0), grid.ColumnChunks(l), first,
                        grid.channel(), out);
  }
  // Every node's chunks, each row's ring reused (nodes^2 passes).
  std::vector<std::vector<Range>> rows;
  rows.reserve(grid.nodes());
  for (int q = 0; q < grid.nodes(); ++q) rows.push_back(grid.NodeChunks(q));
  for (int n = 0; n < grid.nodes(); ++n) {
    const std::vector<int> order = grid.NodeOrder(n);
    for (int j = 0; j < grid.nodes(); ++j) {
      // Row j (node n-j's chunks) is in place at step j: own for j = 0,
      // else delivered by the column ring at step j-1.
      AppendRingAllGather(order, rows[Mod(n - j, grid.nodes())], first + j,
                          grid.channel(), out);
    }
  }
  return grid.nodes() + grid.per_node() - 2;
}

int ReduceScatter(const ChannelGrid& grid, int first, Plan* out) {
  const size_t begin = out->transfers.size();
  const size_t begin_rings = out->rings.size();
  const int steps = AllGather(grid, 0, out);
  for (size_t i = begin; i < out->transfers.size(); ++i) {
    Transfer& t = out->transfers[i];
    t.step = first + steps - 1 - t.step;
    std::swap(t.src, t.dst);
    t.reduce = true;
  }
  // A ring pass reversed the same way: its last step comes first.
  for (size_t i = begin_rings; i < out->rings.size(); ++i) {
    RingPass& ring = out->rings[i];
    const int n = static_cast<int>(ring.order.size());
    ring.first_step = first + steps - 1 - (ring.first_step + n - 2);
    ring.reversed = !ring.reversed;
    ring.reduce = true;
  }
  return steps;
}

int AllReduce(const ChannelGrid& grid, int first, Plan* out) {
  const int steps = ReduceScatter(grid, first, out);
  return steps + AllGather(grid, first + steps, out);
}

int Broadcast(const ChannelGrid& grid, int root, int first, Plan* out) {
  const int root_node = root / grid.per_node();
  const int root_local = root % grid.per_node();
  for (int l = 0; l < grid.per_node(); ++l) {
    if (l == root_local) continue;
    for (const Range& r : grid.ColumnChunks(l)) {
      AppendTransfer(first, grid.channel(), root, grid.Member(root_node, l), r,
                     /*reduce=*/false, out);
    }
  }
  const int chains = first + 1;
  for (int l = 0; l < grid.per_node(); ++l) {
    // Chunk (q, l) crosses hop h at step chains + q + h (ring.h).
    AppendChainBroadcast(grid.ColumnOrder(l, root_node), grid.ColumnChunks(l),
                         chains, grid.channel(), out);
  }
  for (int h = 0; h < grid.nodes(); ++h) {
    for (int q = 0; q < grid.nodes(); ++q) {
      // Row q reaches the node h hops down the chain at step
      // chains + q + h - 1; the root's node has it after the scatter.
      const int start = h == 0 ? chains : chains + q + h;
      AppendRingAllGather(grid.NodeOrder(root_node + h), grid.NodeChunks(q),
                          start, grid.channel(), out);
    }
  }
  return 1 + 2 * (grid.nodes() - 1) + grid.per_node() - 1;
}

int HoringChannel(const PlanRequest& request, const ChannelGrid& grid,
                  Plan* out) {
  switch (request.op) {
    case ALL_GATHER:
      return AllGather(grid, 0, out);
    case REDUCE_SCATTER:
      return ReduceScatter(grid, 0, out);
    case ALL_REDUCE:
      return AllReduce(grid, 0, out);
    default:  // BROADCAST
      return Broadcast(grid, request.root, 0, out);
  }
}

}  // namespace

absl::Status BuildHoring(const PlanRequest& request, Plan* plan) {
  return BuildHierarchical(request, "HORING", HoringChannel, plan);
}

}  // namespace shardsim::internal

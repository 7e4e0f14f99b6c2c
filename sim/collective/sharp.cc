// In-network reduction: NVIDIA SHARP, as NCCL's CollNet uses it. The switch
// (kSwitch) adds what members send it into one zeroed buffer of `count`
// elements and multicasts results back; a multicast counts as one transfer
// per receiver. Only members on different nodes meet at the switch, so a
// group inside one node is refused.
//
// Channels: every range below is cut into k parts, part c on channel c, and
// all channels run over the same step numbers.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sim/collective/algorithms.h"
#include "sim/collective/ring.h"

namespace shardsim::internal {
namespace {

void Send(int step, int channel, int src, int dst, Range range, bool reduce,
          std::vector<Transfer>* out) {
  Transfer t;
  t.step = step;
  t.channel = channel;
  t.src = src;
  t.dst = dst;
  t.offset = range.offset;
  t.count = range.count;
  t.reduce = reduce;
  out->push_back(t);
}

// All-reduce as CollNet does it: the node's members reduce-scatter among
// themselves (ring), so that local index l holds the node's sum of intra
// chunk l; each adds it into the switch, which multicasts the global sum of
// chunk l back to local l of every node (the columns use disjoint ranges of
// the one switch buffer); an intra-node ring all-gather finishes. With one
// member per node the ring phases are empty and the whole buffer goes
// through the switch.
int AllReduce(const PlanRequest& req, int channel, std::vector<Transfer>* out) {
  const PlanShape& shape = req.shape;
  const int k = req.channels;
  std::vector<Range> intra(shape.per_node);
  for (int l = 0; l < shape.per_node; ++l) {
    intra[l] = SubRange(ChunkRange(req.count, shape.per_node, l), k, channel);
  }
  // The intra ring of channel c starts at local c, as the flat ring's does,
  // so chunk ownership follows the member, not the ring position.
  const std::vector<int> local_order =
      FlatRingOrder(PlanShape{shape.per_node, 1}, channel);
  std::vector<Range> ranges(shape.per_node);
  for (int r = 0; r < shape.per_node; ++r) ranges[r] = intra[local_order[r]];

  int rs = 0;
  for (int node = 0; node < shape.nodes; ++node) {
    std::vector<int> order(local_order);
    for (int& m : order) m += node * shape.per_node;
    rs = AppendRingReduceScatter(order, ranges, 0, channel, out);
  }
  for (int m = 0; m < shape.size(); ++m) {
    const Range mine = intra[m % shape.per_node];
    Send(rs, channel, m, kSwitch, mine, /*reduce=*/true, out);
    Send(rs + 1, channel, kSwitch, m, mine, /*reduce=*/false, out);
  }
  int ag = 0;
  for (int node = 0; node < shape.nodes; ++node) {
    std::vector<int> order(local_order);
    for (int& m : order) m += node * shape.per_node;
    ag = AppendRingAllGather(order, ranges, rs + 2, channel, out);
  }
  return rs + 2 + ag;
}

// Every member adds its whole buffer into the switch, which returns to each
// member its own chunk of the sum.
int ReduceScatter(const PlanRequest& req, int channel,
                  std::vector<Transfer>* out) {
  const int p = req.shape.size();
  const Range all = SubRange(Range{0, req.count}, req.channels, channel);
  for (int m = 0; m < p; ++m) {
    Send(0, channel, m, kSwitch, all, /*reduce=*/true, out);
    Send(1, channel, kSwitch, m,
         SubRange(ChunkRange(req.count, p, m), req.channels, channel),
         /*reduce=*/false, out);
  }
  return 2;
}

// Every member copies its chunk into the switch, which multicasts the whole
// buffer (a member's own chunk comes back unchanged: multicast sends one
// payload to all).
int AllGather(const PlanRequest& req, int channel, std::vector<Transfer>* out) {
  const int p = req.shape.size();
  const Range all = SubRange(Range{0, req.count}, req.channels, channel);
  for (int m = 0; m < p; ++m) {
    Send(0, channel, m, kSwitch,
         SubRange(ChunkRange(req.count, p, m), req.channels, channel),
         /*reduce=*/false, out);
    Send(1, channel, kSwitch, m, all, /*reduce=*/false, out);
  }
  return 2;
}

// The root copies its buffer into the switch, which multicasts it to the
// other members.
int Broadcast(const PlanRequest& req, int channel, std::vector<Transfer>* out) {
  const Range all = SubRange(Range{0, req.count}, req.channels, channel);
  Send(0, channel, req.root, kSwitch, all, /*reduce=*/false, out);
  for (int m = 0; m < req.shape.size(); ++m) {
    if (m != req.root) Send(1, channel, kSwitch, m, all, false, out);
  }
  return 2;
}

}  // namespace

absl::Status BuildSharp(const PlanRequest& request, Plan* plan) {
  if (request.shape.nodes == 1) {
    return absl::InvalidArgumentError(
        "sharp: the group lies inside one node; in-network reduction needs a "
        "group that spans nodes");
  }
  int steps = 0;
  for (int c = 0; c < request.channels; ++c) {
    std::vector<Transfer>* out = &plan->transfers;
    switch (request.op) {
      case ALL_REDUCE:
        steps = AllReduce(request, c, out);
        break;
      case REDUCE_SCATTER:
        steps = ReduceScatter(request, c, out);
        break;
      case ALL_GATHER:
        steps = AllGather(request, c, out);
        break;
      case BROADCAST:
        steps = Broadcast(request, c, out);
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "sharp: op ", CollectiveOp_Name(request.op), " is not supported"));
    }
  }
  plan->num_steps = steps;
  return absl::OkStatus();
}

}  // namespace shardsim::internal

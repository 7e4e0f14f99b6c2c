// Small helpers that every collective builder shares: cutting ranges into
// per-channel parts, numbering the members of a node x local grid, and
// appending transfers. Internal to sim/collective.
#ifndef SHARDSIM_SIM_COLLECTIVE_CHUNKS_H_
#define SHARDSIM_SIM_COLLECTIVE_CHUNKS_H_

#include <cstdint>
#include <vector>

#include "sim/collective/plan.h"

namespace shardsim::internal {

// a mod n in 0..n-1, also for negative a: ring positions and node indices
// wrap around in both directions.
inline int Mod(int a, int n) { return ((a % n) + n) % n; }

// Sub-range `part` of `range` when it is cut into `parts` (ChunkRange
// applied inside the range).
inline Range SubRange(Range range, int parts, int part) {
  Range sub = ChunkRange(range.count, parts, part);
  sub.offset += range.offset;
  return sub;
}

// Appends the transfer of `range` from src to dst (plan.h's Transfer).
inline void AppendTransfer(int step, int channel, int src, int dst, Range range,
                           bool reduce, Plan* out) {
  out->transfers.push_back(
      Transfer{step, channel, src, dst, range.offset, range.count, reduce});
}

// One channel's view of a group: its members as (node, local) and this
// channel's part of every chunk. Channel c of k moves part c of every range
// (SubRange), so the channels partition the buffer and each runs the whole
// schedule on its 1/k, at the same steps as the others.
class ChannelGrid {
 public:
  ChannelGrid(const PlanShape& shape, int64_t count, int channels, int channel)
      : shape_(shape), count_(count), channels_(channels), channel_(channel) {}
  ChannelGrid(const PlanRequest& request, int channel)
      : ChannelGrid(request.shape, request.count, request.channels, channel) {}

  const PlanShape& shape() const { return shape_; }
  int per_node() const { return shape_.per_node; }
  int nodes() const { return shape_.nodes; }
  int64_t count() const { return count_; }
  int channels() const { return channels_; }
  int channel() const { return channel_; }

  // Member `local` of node `node`. Nodes wrap around, so node n - j is the
  // node j hops back along a column ring.
  int Member(int node, int local) const {
    return Mod(node, nodes()) * per_node() + local;
  }

  // This channel's part of `range`.
  Range Part(Range range) const { return SubRange(range, channels_, channel_); }

  // This channel's part of the chunk of `member` (plan.h's chunk i).
  Range Chunk(int member) const {
    return Part(ChunkRange(count_, shape_.size(), member));
  }

  // ranges[r] = the chunk of members[r]: ring.h's chunk-range mapping, so
  // that each member ends with its own chunk whatever the ring order.
  std::vector<Range> ChunksOf(const std::vector<int>& members) const {
    std::vector<Range> ranges;
    ranges.reserve(members.size());
    for (int m : members) ranges.push_back(Chunk(m));
    return ranges;
  }

  // The chunk of every member, in member order.
  std::vector<Range> AllChunks() const {
    std::vector<Range> ranges;
    ranges.reserve(shape_.size());
    for (int m = 0; m < shape_.size(); ++m) ranges.push_back(Chunk(m));
    return ranges;
  }

  // The members of node `node`, local 0 first.
  std::vector<int> NodeOrder(int node) const {
    std::vector<int> order;
    order.reserve(per_node());
    for (int l = 0; l < per_node(); ++l) order.push_back(Member(node, l));
    return order;
  }

  // Column `local` (its member on every node), starting at `first_node`.
  std::vector<int> ColumnOrder(int local, int first_node) const {
    std::vector<int> order;
    order.reserve(nodes());
    for (int h = 0; h < nodes(); ++h) {
      order.push_back(Member(first_node + h, local));
    }
    return order;
  }

  // Node `node`'s chunks in local order (a row of the grid).
  std::vector<Range> NodeChunks(int node) const {
    return ChunksOf(NodeOrder(node));
  }

  // Column `local`'s chunks in node order.
  std::vector<Range> ColumnChunks(int local) const {
    return ChunksOf(ColumnOrder(local, 0));
  }

 private:
  PlanShape shape_;
  int64_t count_;
  int channels_;
  int channel_;
};

}  // namespace shardsim::internal

#endif  // SHARDSIM_SIM_COLLECTIVE_CHUNKS_H_

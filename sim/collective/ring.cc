// Flat NCCL-style rings, and the ring building blocks of ring.h that the
// other algorithms reuse.
#include "sim/collective/ring.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sim/collective/algorithms.h"

namespace shardsim::internal {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

Transfer MakeTransfer(int step, int channel, int src, int dst, Range range,
                      bool reduce) {
  Transfer t;
  t.step = step;
  t.channel = channel;
  t.src = src;
  t.dst = dst;
  t.offset = range.offset;
  t.count = range.count;
  t.reduce = reduce;
  return t;
}

// Ranges of channel `channel` on ring `order`: sub-chunk `channel` of the
// chunk of the member at each position. Indexing by member (not position)
// keeps chunk ownership: member m ends up with its own chunk m even though
// the ring is rotated.
std::vector<Range> ChannelRanges(const std::vector<int>& order, int64_t count,
                                 int channels, int channel) {
  const int p = static_cast<int>(order.size());
  std::vector<Range> ranges(p);
  for (int r = 0; r < p; ++r) {
    ranges[r] = SubRange(ChunkRange(count, p, order[r]), channels, channel);
  }
  return ranges;
}

// The broadcast chain of one channel: the channel's ring, rotated so that
// it starts at the root.
std::vector<int> ChainFrom(std::vector<int> order, int root) {
  auto it = std::find(order.begin(), order.end(), root);
  std::rotate(order.begin(), it, order.end());
  return order;
}

}  // namespace

Range SubRange(Range range, int parts, int part) {
  Range sub = ChunkRange(range.count, parts, part);
  sub.offset += range.offset;
  return sub;
}

std::vector<int> FlatRingOrder(const PlanShape& shape, int channel) {
  std::vector<int> order;
  order.reserve(shape.size());
  const int start = channel % shape.per_node;
  for (int node = 0; node < shape.nodes; ++node) {
    for (int i = 0; i < shape.per_node; ++i) {
      order.push_back(node * shape.per_node + (start + i) % shape.per_node);
    }
  }
  return order;
}

int AppendRingAllGather(const std::vector<int>& order,
                        const std::vector<Range>& ranges, int first_step,
                        int channel, std::vector<Transfer>* out) {
  const int n = static_cast<int>(order.size());
  if (n <= 1) return 0;
  for (int t = 0; t < n - 1; ++t) {
    for (int r = 0; r < n; ++r) {
      // Step 0 sends the own range; later steps forward what just arrived.
      out->push_back(MakeTransfer(first_step + t, channel, order[r],
                                  order[(r + 1) % n], ranges[Mod(r - t, n)],
                                  /*reduce=*/false));
    }
  }
  return n - 1;
}

int AppendRingReduceScatter(const std::vector<int>& order,
                            const std::vector<Range>& ranges, int first_step,
                            int channel, std::vector<Transfer>* out) {
  const int n = static_cast<int>(order.size());
  if (n <= 1) return 0;
  for (int t = 0; t < n - 1; ++t) {
    for (int r = 0; r < n; ++r) {
      // Range j starts at position j + 1 and travels n - 1 hops, gathering
      // one contribution per hop, so it arrives complete at position j.
      out->push_back(MakeTransfer(first_step + t, channel, order[r],
                                  order[(r + 1) % n], ranges[Mod(r - t - 1, n)],
                                  /*reduce=*/true));
    }
  }
  return n - 1;
}

int AppendRingAllReduce(const std::vector<int>& order,
                        const std::vector<Range>& ranges, int first_step,
                        int channel, std::vector<Transfer>* out) {
  const int rs =
      AppendRingReduceScatter(order, ranges, first_step, channel, out);
  return rs + AppendRingAllGather(order, ranges, first_step + rs, channel, out);
}

int AppendChainBroadcast(const std::vector<int>& order,
                         const std::vector<Range>& pieces, int first_step,
                         int channel, std::vector<Transfer>* out) {
  const int n = static_cast<int>(order.size());
  const int k = static_cast<int>(pieces.size());
  if (n <= 1 || k == 0) return 0;
  for (int j = 0; j < k; ++j) {
    for (int h = 0; h + 1 < n; ++h) {
      // Piece j reached order[h] at step j + h - 1, so it can move on now
      // while later pieces follow one hop behind (the pipeline).
      out->push_back(MakeTransfer(first_step + j + h, channel, order[h],
                                  order[h + 1], pieces[j], /*reduce=*/false));
    }
  }
  return k + n - 2;
}

absl::Status BuildRing(const PlanRequest& request, Plan* plan) {
  const int p = request.shape.size();
  const int k = request.channels;
  int steps = 0;
  for (int c = 0; c < k; ++c) {
    const std::vector<int> order = FlatRingOrder(request.shape, c);
    // Chunk i of channel c is sub-chunk c of chunk i, so channels partition
    // the buffer and each runs the whole algorithm on its 1/k.
    const std::vector<Range> ranges = ChannelRanges(order, request.count, k, c);
    std::vector<Transfer>* out = &plan->transfers;
    switch (request.op) {
      case ALL_GATHER:
        steps = AppendRingAllGather(order, ranges, 0, c, out);
        break;
      case REDUCE_SCATTER:
        steps = AppendRingReduceScatter(order, ranges, 0, c, out);
        break;
      case ALL_REDUCE:
        steps = AppendRingAllReduce(order, ranges, 0, c, out);
        break;
      case BROADCAST: {
        // Pipeline depth p: piece j is sub-chunk c of chunk j.
        std::vector<Range> pieces(p);
        for (int j = 0; j < p; ++j) {
          pieces[j] = SubRange(ChunkRange(request.count, p, j), k, c);
        }
        steps = AppendChainBroadcast(ChainFrom(order, request.root), pieces, 0,
                                     c, out);
        break;
      }
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "ring: op ", CollectiveOp_Name(request.op), " is not supported"));
    }
  }
  plan->num_steps = steps;
  return absl::OkStatus();
}

}  // namespace shardsim::internal

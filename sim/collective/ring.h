// Ring building blocks over an explicit, ordered list of members. The flat
// ring (ring.cc), SHARP's intra-node phases (sharp.cc) and the hierarchical
// algorithms all lower their ring phases through these, so that one piece of
// code owns the ring schedule.
//
// Conventions for every function below:
//   order[r]   the member (group-local index) at ring position r; position r
//              sends to position (r + 1) % n, n = order.size().
//   ranges[r]  the element range that belongs to position r (its "chunk").
//              Ranges must be pairwise disjoint; they need not be contiguous
//              with each other nor in member order (that is the chunk-range
//              mapping: pass ranges[r] = the chunk of member order[r]).
//   first_step the plan step the first transfer uses; the phase occupies
//              steps first_step .. first_step + returned - 1.
//   channel    written into every transfer.
// Ring passes are appended to out->rings (plan.h's RingPass), chains to
// out->chains (ChainPass), other transfers to out->transfers (zero-count
// ones included; MakePlan drops them). Each function returns the number of
// steps it used (0 when n <= 1).
#ifndef SHARDSIM_SIM_COLLECTIVE_RING_H_
#define SHARDSIM_SIM_COLLECTIVE_RING_H_

#include <vector>

#include "sim/collective/chunks.h"
#include "sim/collective/plan.h"

namespace shardsim::internal {

// Before: order[r] holds ranges[r]. After: every member of order holds every
// range. n - 1 steps; at step t position r forwards the range of position
// r - t (the one it received in the step before).
int AppendRingAllGather(const std::vector<int>& order,
                        const std::vector<Range>& ranges, int first_step,
                        int channel, Plan* out);

// Before: every member of order holds its own values for every range.
// After: order[r] holds, in ranges[r], the sum over the members of order.
// n - 1 steps of reduce transfers; other ranges are left partially summed.
int AppendRingReduceScatter(const std::vector<int>& order,
                            const std::vector<Range>& ranges, int first_step,
                            int channel, Plan* out);

// Reduce-scatter then all-gather over the same ring: after, every member of
// order holds the sum in every range. 2 (n - 1) steps.
int AppendRingAllReduce(const std::vector<int>& order,
                        const std::vector<Range>& ranges, int first_step,
                        int channel, Plan* out);

// Pipelined chain from order[0] (the root) to order[n - 1]; the ring's
// closing edge is not used. pieces[j] crosses hop h (order[h] -> order[h+1])
// at step first_step + j + h. Before: order[0] holds every piece. After:
// every member of order holds every piece. pieces.size() + n - 2 steps.
int AppendChainBroadcast(const std::vector<int>& order,
                         const std::vector<Range>& pieces, int first_step,
                         int channel, Plan* out);

// The signature the four phase builders above share, for callers that run
// one phase over many rings.
using RingPhase = int (*)(const std::vector<int>& order,
                          const std::vector<Range>& ranges, int first_step,
                          int channel, Plan* out);

// The member order of NCCL-style flat ring `channel` of `channels` on
// `shape`: nodes in order, and inside each node its members starting at
// local index s = channel % per_node, or, with fewer channels than GPUs per
// node, s = channel * per_node / channels (spread evenly). The edge leaving
// node n thus goes from local s - 1 of node n to local s of node n + 1, so
// different channels cross node boundaries through GPUs spread over the
// node, and so over its NICs when GPUs share them.
std::vector<int> FlatRingOrder(const PlanShape& shape, int channel,
                               int channels);

}  // namespace shardsim::internal

#endif  // SHARDSIM_SIM_COLLECTIVE_RING_H_

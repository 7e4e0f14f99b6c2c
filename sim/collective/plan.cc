#include "sim/collective/plan.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/collective/algorithms.h"
#include "sim/collective/chunks.h"

namespace shardsim {

Range ChunkRange(int64_t count, int parts, int index) {
  const int64_t base = count / parts;
  const int64_t extra = count % parts;
  Range r;
  r.offset = index * base + std::min<int64_t>(index, extra);
  r.count = base + (index < extra ? 1 : 0);
  return r;
}

namespace {

// Transfers in step order, each step's in the order they came: a stable
// counting sort, as steps are few and dense against the transfers (a tree
// over 1024 GPUs has millions). Builders that emit step by step (direct,
// 130,000 transfers for 128 members on 8 channels) need no copy at all.
void SortByStep(std::vector<Transfer>* transfers) {
  if (std::is_sorted(transfers->begin(), transfers->end(),
                     [](const Transfer& a, const Transfer& b) {
                       return a.step < b.step;
                     })) {
    return;
  }
  int lo = transfers->front().step;
  int hi = lo;
  for (const Transfer& t : *transfers) {
    lo = std::min(lo, t.step);
    hi = std::max(hi, t.step);
  }
  std::vector<size_t> place(static_cast<size_t>(hi - lo) + 2, 0);
  for (const Transfer& t : *transfers) ++place[t.step - lo + 1];
  for (size_t s = 1; s < place.size(); ++s) place[s] += place[s - 1];
  std::vector<Transfer> sorted(transfers->size());
  for (const Transfer& t : *transfers) sorted[place[t.step - lo]++] = t;
  *transfers = std::move(sorted);
}

}  // namespace

absl::StatusOr<Plan> MakePlan(const PlanRequest& req) {
  if (req.shape.per_node < 1 || req.shape.nodes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan shape: per_node and nodes must be >= 1, got ",
                     req.shape.per_node, "x", req.shape.nodes));
  }
  if (req.count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan count: must be >= 0, got ", req.count));
  }
  if (req.channels < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan channels: must be >= 1, got ", req.channels));
  }
  if (req.op == BROADCAST && (req.root < 0 || req.root >= req.shape.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan root: ", req.root, " is not a member of a group of ",
                     req.shape.size()));
  }
  if (req.op == OP_UNSPECIFIED) {
    return absl::InvalidArgumentError("plan op: unspecified");
  }
  Plan plan;
  plan.op = req.op;
  plan.algorithm = req.algorithm;
  plan.shape = req.shape;
  plan.count = req.count;
  plan.channels = req.channels;
  plan.root = req.op == BROADCAST ? req.root : 0;
  if (req.shape.size() == 1) return plan;  // nothing moves

  absl::Status status;
  switch (req.algorithm) {
    case RING:
      status = internal::BuildRing(req, &plan);
      break;
    case DIRECT:
      status = internal::BuildDirect(req, &plan);
      break;
    case TREE:
      status = internal::BuildTree(req, &plan);
      break;
    case SHARP:
      status = internal::BuildSharp(req, &plan);
      break;
    case HRING:
      status = internal::BuildHring(req, &plan);
      break;
    case TORUS2D:
      status = internal::BuildTorus2d(req, &plan);
      break;
    case HORING:
      status = internal::BuildHoring(req, &plan);
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("plan algorithm: ", Algorithm_Name(req.algorithm),
                       " is not a collective algorithm"));
  }
  if (!status.ok()) return status;
  // Empty transfers (a chunk of zero elements) move nothing; drop them so
  // that the engine never starts a zero-byte flow.
  plan.transfers.erase(
      std::remove_if(plan.transfers.begin(), plan.transfers.end(),
                     [](const Transfer& t) { return t.count == 0; }),
      plan.transfers.end());
  SortByStep(&plan.transfers);
  return plan;
}

namespace {

void AddVolume(const PlanShape& shape, int src, int dst, int64_t count,
               PlanVolume* v) {
  if (src == kSwitch) {
    v->from_switch += count;
  } else if (LeavesNode(shape, src, dst)) {
    v->inter_node += count;
  } else {
    v->intra_node += count;
  }
}

}  // namespace

std::vector<Transfer> ExpandTransfers(const Plan& plan) {
  std::vector<Transfer> out = plan.transfers;
  for (const ChainPass& chain : plan.chains) {
    const int n = static_cast<int>(chain.order.size());
    for (size_t j = 0; j < chain.pieces.size(); ++j) {
      const Range piece = chain.pieces[j];
      if (piece.count == 0) continue;
      for (int h = 0; h + 1 < n; ++h) {
        out.push_back(Transfer{chain.first_step + static_cast<int>(j) + h,
                               chain.channel, chain.order[h],
                               chain.order[h + 1], piece.offset, piece.count,
                               /*reduce=*/false});
      }
    }
  }
  for (const RingPass& ring : plan.rings) {
    const int n = static_cast<int>(ring.order.size());
    for (int t = 0; t + 1 < n; ++t) {
      for (int r = 0; r < n; ++r) {
        const Range range = ring.ranges[((r - t - ring.lag) % n + 2 * n) % n];
        if (range.count == 0) continue;
        Transfer x{ring.first_step + (ring.reversed ? n - 2 - t : t),
                   ring.channel,
                   ring.order[r],
                   ring.order[(r + 1) % n],
                   range.offset,
                   range.count,
                   ring.reduce};
        if (ring.reversed) std::swap(x.src, x.dst);
        out.push_back(x);
      }
    }
  }
  for (const DirectPass& pass : plan.directs) {
    const int n = static_cast<int>(pass.chunks.size());
    for (int t = 1; t < n; ++t) {
      for (int m = 0; m < n; ++m) {
        const Range chunk = DirectChunk(pass, m, t);
        for (int c = 0; c < plan.channels; ++c) {
          const Range part = internal::SubRange(chunk, plan.channels, c);
          if (part.count == 0) continue;
          out.push_back(Transfer{pass.first_step + t - 1, c, m,
                                 DirectPeer(m, t, n), part.offset, part.count,
                                 pass.reduce});
        }
      }
    }
  }
  SortByStep(&out);
  return out;
}

std::vector<std::pair<size_t, size_t>> StepRuns(
    const std::vector<Transfer>& transfers) {
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t i = 0; i < transfers.size(); ++i) {
    if (i == 0 || transfers[i].step != transfers[i - 1].step) {
      runs.push_back({i, i});
    }
    runs.back().second = i + 1;
  }
  return runs;
}

PlanVolume CountVolume(const Plan& plan) {
  PlanVolume v;
  for (const Transfer& t : plan.transfers) {
    AddVolume(plan.shape, t.src, t.dst, t.count, &v);
  }
  // Every piece of a chain crosses each of its hops.
  for (const ChainPass& chain : plan.chains) {
    int64_t total = 0;
    for (const Range& r : chain.pieces) total += r.count;
    for (size_t h = 0; h + 1 < chain.order.size(); ++h) {
      AddVolume(plan.shape, chain.order[h], chain.order[h + 1], total, &v);
    }
  }
  // Over a pass the hop leaving position r carries every range but one:
  // the one its successor starts with (all-gather) or ends with.
  for (const RingPass& ring : plan.rings) {
    const int n = static_cast<int>(ring.order.size());
    if (n < 2) continue;
    int64_t total = 0;
    for (const Range& r : ring.ranges) total += r.count;
    for (int r = 0; r < n; ++r) {
      const int64_t skipped =
          ring.ranges[((r + 1 - ring.lag) % n + n) % n].count;
      AddVolume(plan.shape, ring.order[r], ring.order[(r + 1) % n],
                total - skipped, &v);
    }
  }
  // Over a pass every chunk crosses from one member to each other one: to
  // the per_node - 1 others of a node, and to every member of the others.
  for (const DirectPass& pass : plan.directs) {
    const int64_t n = static_cast<int64_t>(pass.chunks.size());
    const int64_t local = plan.shape.per_node - 1;
    for (const Range& chunk : pass.chunks) {
      v.intra_node += chunk.count * local;
      v.inter_node += chunk.count * (n - 1 - local);
    }
  }
  return v;
}

}  // namespace shardsim

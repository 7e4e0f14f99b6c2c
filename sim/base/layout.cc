#include "sim/base/layout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace shardsim {
namespace {

constexpr Dim kDims[] = {Dim::kTp, Dim::kCp, Dim::kDp, Dim::kPp};

absl::StatusOr<std::array<Dim, 4>> ParseOrder(const std::string& text) {
  if (text.empty())
    return std::array<Dim, 4>{Dim::kTp, Dim::kCp, Dim::kDp, Dim::kPp};
  std::array<Dim, 4> order;
  std::array<bool, 4> seen = {false, false, false, false};
  const std::vector<std::string> parts = absl::StrSplit(text, '-');
  bool ok = parts.size() == 4;
  for (size_t i = 0; ok && i < parts.size(); ++i) {
    ok = false;
    for (Dim d : kDims) {
      if (parts[i] == DimName(d) && !seen[static_cast<int>(d)]) {
        seen[static_cast<int>(d)] = true;
        order[i] = d;
        ok = true;
      }
    }
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("field parallelism.order: \"", text,
                     "\" must name tp, cp, dp and pp once each, innermost "
                     "first, joined by '-' (Megatron's default: "
                     "tp-cp-dp-pp)"));
  }
  return order;
}

// Intra part of `a` and inter part of `b`, each of which holds only that
// part (or nothing): one Group.
absl::StatusOr<Group> Combine(const Group& a, const Group& b) {
  const bool a_trivial = GroupSize(a) == 1, b_trivial = GroupSize(b) == 1;
  if (b_trivial) return a;
  if (a_trivial) return b;
  if (a.inter_size() != 1 || b.intra_size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("groups ", GroupName(a), " and ", GroupName(b),
                     " do not combine into one group shape"));
  }
  return MakeGroup(a.intra_size(), a.intra_stride(), b.inter_size(),
                   b.inter_stride());
}

}  // namespace

const char* DimName(Dim d) {
  switch (d) {
    case Dim::kTp:
      return "tp";
    case Dim::kCp:
      return "cp";
    case Dim::kDp:
      return "dp";
    case Dim::kPp:
      return "pp";
  }
  return "?";
}

absl::StatusOr<Group> RankGroup(const Mesh& mesh, int size, int stride) {
  const int gpn = mesh.gpus_per_node;
  Group g;
  if (size == 1) {
    g = MakeGroup(1, 1, 1, 1);
  } else if (int64_t{size} * stride <= gpn) {
    g = MakeGroup(size, stride, 1, 1);
  } else if (stride >= gpn) {
    if (stride % gpn != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ranks ", stride, " apart are not whole ", gpn, "-GPU nodes apart"));
    }
    g = MakeGroup(1, 1, size, stride / gpn);
  } else {
    // Across the node boundary: every gpn/stride-th member starts a node.
    const int per_node = gpn / stride;
    if (gpn % stride != 0 || size % per_node != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(size, " ranks ", stride, " apart do not fill whole ",
                       gpn, "-GPU nodes"));
    }
    g = MakeGroup(per_node, stride, size / per_node, 1);
  }
  if (absl::Status s = ValidateGroup(g, mesh); !s.ok()) return s;
  return g;
}

Layout Layout::DataParallel(const Mesh& mesh) {
  Layout l;
  l.mesh_ = mesh;
  l.size_ = {1, 1, mesh.gpus(), 1};
  l.stride_ = {1, 1, 1, mesh.gpus()};
  l.dp_mesh_ = mesh;
  return l;
}

absl::StatusOr<Layout> Layout::Make(const Mesh& mesh, const Parallelism& p) {
  Layout l;
  l.mesh_ = mesh;
  absl::StatusOr<std::array<Dim, 4>> order = ParseOrder(p.order());
  if (!order.ok()) return order.status();
  l.order_ = *order;
  const int tp = std::max(1, p.tp()), cp = std::max(1, p.cp()),
            pp = std::max(1, p.pp());
  const int64_t others = int64_t{tp} * cp * pp;
  if (mesh.gpus() % others != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("field parallelism: tp ", tp, " x cp ", cp, " x pp ", pp,
                     " = ", others, " does not divide ", mesh.gpus(), " GPUs"));
  }
  l.size_ = {tp, cp, static_cast<int>(mesh.gpus() / others), pp};
  int stride = 1;
  for (Dim d : l.order_) {
    l.stride_[static_cast<int>(d)] = stride;
    stride *= l.size(d);
  }
  for (Dim d : kDims) {
    absl::StatusOr<Group> g = RankGroup(mesh, l.size(d), l.stride(d));
    if (!g.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("field parallelism.", DimName(d), ": its ", l.size(d),
                       " ranks, ", l.stride(d), " apart (order ",
                       absl::StrJoin(l.order_, "-",
                                     [](std::string* out, Dim x) {
                                       absl::StrAppend(out, DimName(x));
                                     }),
                       "), are no group of the ", mesh.gpus_per_node,
                       "-GPU nodes: ", g.status().message()));
    }
  }
  // The strategies shard over dp x cp: cp ranks hold the same parameters
  // and sum their gradients with the dp ranks' (Megatron's
  // data_parallel_group_with_cp, torchtitan's dp_shard_cp mesh). With cp
  // the two must sit next to each other in the order, one stride apart.
  int s = l.stride(Dim::kDp), dp = l.dp();
  if (cp > 1) {
    const int inner = std::min(s, l.stride(Dim::kCp));
    const int outer = std::max(s, l.stride(Dim::kCp));
    if (outer != inner * (inner == s ? dp : cp)) {
      return absl::InvalidArgumentError(
          "field parallelism.order: the sharding strategies shard over "
          "dp x cp (Megatron's data-parallel group with context "
          "parallelism), so cp and dp must be next to each other in the "
          "order (e.g. tp-cp-dp-pp)");
    }
    s = inner;
    dp *= cp;
    if (absl::StatusOr<Group> g = RankGroup(mesh, dp, s); !g.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field parallelism: dp x cp's ", dp, " ranks, ", s,
          " apart, are no group of the nodes: ", g.status().message()));
    }
  }
  l.shard_stride_ = s;
  const int gpn = mesh.gpus_per_node;
  if (int64_t{s} * dp <= gpn) {
    l.dp_mesh_ = Mesh{dp, 1};
  } else if (s >= gpn) {
    l.dp_mesh_ = Mesh{1, dp};
  } else {
    l.dp_mesh_ = Mesh{gpn / s, dp / (gpn / s)};  // RankGroup checked both
  }
  return l;
}

Group Layout::GroupOf(Dim d) const {
  absl::StatusOr<Group> g = RankGroup(mesh_, size(d), stride(d));
  return *g;  // Make checked every dimension
}

Group Layout::EmbedDp(const Group& g) const {
  if (data_parallel_only()) return g;
  const int s = shard_stride_;
  absl::StatusOr<Group> intra =
      RankGroup(mesh_, g.intra_size(), g.intra_stride() * s);
  absl::StatusOr<Group> inter = RankGroup(
      mesh_, g.inter_size(), g.inter_stride() * dp_mesh_.gpus_per_node * s);
  absl::StatusOr<Group> out =
      intra.ok() && inter.ok()
          ? Combine(*intra, *inter)
          : absl::StatusOr<Group>(intra.ok() ? inter.status() : intra.status());
  // A group that tiles DpMesh is dp ranks of whole dp nodes: it always
  // embeds (tests/layout_test.cc checks every shape of several layouts).
  return *out;
}

std::vector<int> Layout::StageRanks(int stage) const {
  std::vector<int> out;
  out.reserve(mesh_.gpus() / pp());
  for (int r = 0; r < mesh_.gpus(); ++r) {
    if (IndexOf(r, Dim::kPp) == stage) out.push_back(r);
  }
  return out;
}

std::string Layout::Name() const {
  std::vector<std::string> parts;
  for (Dim d : order_) {
    if (size(d) > 1 || d == Dim::kDp) {
      parts.push_back(absl::StrCat(DimName(d), " ", size(d)));
    }
  }
  return absl::StrJoin(parts, " x ");
}

}  // namespace shardsim

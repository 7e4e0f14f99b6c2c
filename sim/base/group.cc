#include "sim/base/group.h"

#include "absl/strings/str_cat.h"

namespace shardsim {

absl::StatusOr<Mesh> MeshOf(int gpus, int gpus_per_node) {
  if (gpus <= gpus_per_node) return Mesh{gpus, 1};
  if (gpus % gpus_per_node != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        gpus, " GPUs is not a whole number of ", gpus_per_node, "-GPU nodes"));
  }
  return Mesh{gpus_per_node, gpus / gpus_per_node};
}

Group MakeGroup(int intra_size, int intra_stride, int inter_size,
                int inter_stride) {
  Group g;
  g.set_intra_size(intra_size);
  g.set_intra_stride(intra_stride);
  g.set_inter_size(inter_size);
  g.set_inter_stride(inter_stride);
  return g;
}

Group GlobalGroup(const Mesh& m) {
  return MakeGroup(m.gpus_per_node, 1, m.nodes, 1);
}
Group IntraGroup(const Mesh& m) { return MakeGroup(m.gpus_per_node, 1, 1, 1); }
Group InterGroup(const Mesh& m) { return MakeGroup(1, 1, m.nodes, 1); }

namespace {

absl::Status ValidateAxis(const char* axis, int size, int stride, int extent,
                          const char* unit) {
  if (size < 1 || stride < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(axis, " size and stride must be >= 1, got size ", size,
                     " stride ", stride));
  }
  if (extent % (size * stride) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(axis, " size ", size, " x stride ", stride,
                     " does not tile ", extent, " ", unit));
  }
  return absl::OkStatus();
}

// First member along one axis of the block that contains `pos`.
int AxisBase(int pos, int size, int stride) {
  const int block = size * stride;
  return pos / block * block + pos % stride;
}

// Members along one axis of the block that contains `pos`.
std::vector<int> AxisMembers(int pos, int size, int stride) {
  const int base = AxisBase(pos, size, stride);
  std::vector<int> out(size);
  for (int k = 0; k < size; ++k) out[k] = base + k * stride;
  return out;
}

}  // namespace

absl::Status ValidateGroup(const Group& g, const Mesh& m) {
  if (absl::Status s = ValidateAxis("intra", g.intra_size(), g.intra_stride(),
                                    m.gpus_per_node, "GPUs per node");
      !s.ok()) {
    return s;
  }
  return ValidateAxis("inter", g.inter_size(), g.inter_stride(), m.nodes,
                      "nodes");
}

std::vector<int> GroupMembers(const Group& g, const Mesh& m, int rank) {
  const std::vector<int> nodes =
      AxisMembers(rank / m.gpus_per_node, g.inter_size(), g.inter_stride());
  const std::vector<int> locals =
      AxisMembers(rank % m.gpus_per_node, g.intra_size(), g.intra_stride());
  std::vector<int> out;
  out.reserve(nodes.size() * locals.size());
  for (int n : nodes) {
    for (int l : locals) out.push_back(n * m.gpus_per_node + l);
  }
  return out;
}

int GroupFirstMember(const Group& g, const Mesh& m, int rank) {
  return AxisBase(rank / m.gpus_per_node, g.inter_size(), g.inter_stride()) *
             m.gpus_per_node +
         AxisBase(rank % m.gpus_per_node, g.intra_size(), g.intra_stride());
}

std::vector<std::vector<int>> GroupsOf(const Group& group, const Mesh& mesh) {
  std::vector<std::vector<int>> out;
  for (int rank = 0; rank < mesh.gpus(); ++rank) {
    if (GroupFirstMember(group, mesh, rank) == rank) {
      out.push_back(GroupMembers(group, mesh, rank));
    }
  }
  return out;
}

std::string GroupName(const Group& g) {
  std::string s = absl::StrCat(g.intra_size(), "x", g.inter_size());
  if (g.intra_stride() > 1 || g.inter_stride() > 1) {
    absl::StrAppend(&s, " stride ", g.intra_stride(), "x", g.inter_stride());
  }
  return s;
}

}  // namespace shardsim

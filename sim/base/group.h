// Group geometry: which GPUs a Group (sim/schema/schedule.proto) names.
//
// GPUs form a mesh of `nodes` x `gpus_per_node`; global rank = node *
// gpus_per_node + local rank. A Group picks `size` members `stride` apart
// along each axis, tiled so that every GPU belongs to exactly one group of a
// given shape. Members are listed in global-rank order (node-major), which is
// the order a flat ring visits them.
#ifndef SHARDSIM_SIM_BASE_GROUP_H_
#define SHARDSIM_SIM_BASE_GROUP_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

struct Mesh {
  int gpus_per_node = 0;
  int nodes = 0;
  int gpus() const { return gpus_per_node * nodes; }
};

// The one rule for laying `gpus` GPUs (>= 1) out at `gpus_per_node` (>= 1)
// a node: part of one node, or whole nodes. Otherwise an error, "N GPUs is
// not a whole number of M-GPU nodes"; callers add where N and M came from
// (a scenario's field, an MPI world).
absl::StatusOr<Mesh> MeshOf(int gpus, int gpus_per_node);

// Common shapes.
Group GlobalGroup(const Mesh& mesh);  // every GPU
Group IntraGroup(const Mesh& mesh);   // the GPUs of one node
Group InterGroup(const Mesh& mesh);   // same local rank in every node
Group MakeGroup(int intra_size, int intra_stride, int inter_size,
                int inter_stride);

inline int GroupSize(const Group& g) { return g.intra_size() * g.inter_size(); }

// OK when sizes and strides are positive and the shape tiles the mesh.
absl::Status ValidateGroup(const Group& group, const Mesh& mesh);

// Global ranks of the members of `rank`'s group, in global-rank order.
std::vector<int> GroupMembers(const Group& group, const Mesh& mesh, int rank);

// The first member of `rank`'s group (GroupMembers(...)[0]) in O(1): one
// rank per group equals it, so it enumerates groups cheaply.
int GroupFirstMember(const Group& group, const Mesh& mesh, int rank);

// Every group of `group`'s shape in the mesh, by first member, each as its
// GroupMembers: the groups that all run a call at once.
std::vector<std::vector<int>> GroupsOf(const Group& group, const Mesh& mesh);

// "8x1", "1x8 stride 8" style text for tables and errors.
std::string GroupName(const Group& group);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_BASE_GROUP_H_

// The parallel layout: how a job's GPUs divide the work besides data
// parallelism (scenario `parallelism`, docs/parallelism.md).
//
// The GPUs form a mesh of four dimensions: tensor (tp), context (cp), data
// (dp) and pipeline (pp) parallelism. Ranks are numbered along them in
// `order`, innermost first: with Megatron's default "tp-cp-dp-pp" a rank is
// tp_i + tp * (cp_i + cp * (dp_i + dp * pp_i)) (megatron/core/
// parallel_state.py, RankGenerator). Each dimension's groups are then a
// Group shape on the physical mesh, and the sharding strategies see the dp
// ranks as a mesh of their own (DpMesh), whose groups EmbedDp places back.
#ifndef SHARDSIM_SIM_BASE_LAYOUT_H_
#define SHARDSIM_SIM_BASE_LAYOUT_H_

#include <array>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/group.h"
#include "sim/schema/scenario.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

enum class Dim { kTp = 0, kCp = 1, kDp = 2, kPp = 3 };

// "tp", "cp", "dp", "pp".
const char* DimName(Dim d);

class Layout {
 public:
  // The layout of `parallelism` over `mesh`: its sizes (0 taken as 1) must
  // divide the GPU count, dp is what is left, and every dimension's groups
  // must be a Group shape on the mesh (a dimension within a node, across
  // nodes, or whole nodes: e.g. tp 8 on 8-GPU nodes, or tp 4 at stride 1).
  // Errors name the field ("parallelism.tp") and why.
  static absl::StatusOr<Layout> Make(const Mesh& mesh,
                                     const Parallelism& parallelism);

  // Pure data parallelism over `mesh`.
  static Layout DataParallel(const Mesh& mesh);

  const Mesh& mesh() const { return mesh_; }
  int size(Dim d) const { return size_[static_cast<int>(d)]; }
  int tp() const { return size(Dim::kTp); }
  int cp() const { return size(Dim::kCp); }
  int dp() const { return size(Dim::kDp); }
  int pp() const { return size(Dim::kPp); }
  bool data_parallel_only() const { return dp() == mesh_.gpus(); }

  // Rank distance between neighbours along `d`.
  int stride(Dim d) const { return stride_[static_cast<int>(d)]; }

  // The groups of dimension `d` (one per combination of the others), as a
  // shape on the physical mesh.
  Group GroupOf(Dim d) const;

  // The ranks the sharding strategies shard over, as they see them: dp x
  // cp GPUs (cp ranks hold the same parameters), as many a node as of
  // those ranks sit in one physical node.
  Mesh DpMesh() const { return dp_mesh_; }

  // A group of DpMesh() placed on the physical mesh: the same dp (x cp)
  // ranks, with every other dimension's index held.
  Group EmbedDp(const Group& group) const;

  // Rank `r`'s index along `d`.
  int IndexOf(int rank, Dim d) const { return rank / stride(d) % size(d); }

  // The global ranks of pipeline stage `stage`, ordered by their index in
  // the other dimensions, so that rank i of two stages hold the same tp, cp
  // and dp indices (a pipeline send pairs them by index).
  std::vector<int> StageRanks(int stage) const;

  // "tp 8 x pp 4 x dp 8" (the sizes above 1, innermost first), or "dp N".
  std::string Name() const;

 private:
  Layout() = default;

  Mesh mesh_;
  std::array<int, 4> size_ = {1, 1, 1, 1};    // by Dim
  std::array<int, 4> stride_ = {1, 1, 1, 1};  // by Dim
  std::array<Dim, 4> order_ = {Dim::kTp, Dim::kCp, Dim::kDp, Dim::kPp};
  Mesh dp_mesh_;
  int shard_stride_ = 1;  // rank distance between DpMesh's neighbours
};

// The ranks `size` apart by `stride` (a dimension, rank-space), as a Group
// on `mesh`; an error when no Group shape holds them.
absl::StatusOr<Group> RankGroup(const Mesh& mesh, int size, int stride);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_BASE_LAYOUT_H_

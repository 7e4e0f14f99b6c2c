// Stage 2: a strategy spec as the user writes it -> sharding factors.
//
// Every system is a point (s_p, s_g, s_os) of intra x inter factors on the
// data-parallel mesh (Lins' notation). Presets map names onto it; Lins'
// dependency rule keeps a strategy free of useless traffic.
#ifndef SHARDSIM_SIM_STRATEGY_STRATEGY_H_
#define SHARDSIM_SIM_STRATEGY_STRATEGY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/base/group.h"
#include "sim/schema/strategy.pb.h"

namespace shardsim {

// Resolves `spec` on `mesh`:
//   ddp, zero1, zero2, zero3
//   fsdp:FULL_SHARD | fsdp:SHARD_GRAD_OP | fsdp:HYBRID_SHARD |
//     fsdp:_HYBRID_SHARD_ZERO2
//   mics[:shard_size=S][:hierarchical_params_gather=true]
//   zeropp[:hpz=S][:qwz=true][:qgz=true]   (defaults: hpz = GPUs per node,
//     qwz and qgz on, as the ZeRO++ paper runs it)
//   paro-XYZ for X, Y, Z in {N, I, G} (P, G, OS granularity)
//   lins:p=AxB:g=CxD:os=ExF
//   a DeepSpeed config file (*.json), read through zero_optimization;
//   relative paths are taken from `base_dir`;
// each optionally followed by @KIND=ALGO for one or more group kinds: the
// algorithm of the collectives whose group is of that kind
// (AlgorithmChoices), e.g. zero3@both=horing or
// paro-NIG@intra=tree@inter=tree.
// The result's name is `spec` as written. Errors say what is wrong with
// which part of the spec.
absl::StatusOr<Strategy> ParseStrategy(absl::string_view spec, const Mesh& mesh,
                                       absl::string_view base_dir = "");

// Where a collective's group lies: inside one node, across nodes with one
// GPU in each, or across nodes with several GPUs in each.
enum class GroupKind { kIntra, kInter, kBoth };
GroupKind KindOf(const Group& group);
const char* GroupKindName(GroupKind kind);  // "intra", "inter", "both"

// The algorithms a group of `kind` may run, RING first: a node's group
// rings or trees (NVSwitch); one GPU per node adds SHARP; spanning both,
// the hierarchical ones (HRING, TORUS2D, HORING) too. SHARP runs only on a
// platform with network.sharp (plan_cache.h refuses it elsewhere).
std::vector<Algorithm> AlgorithmChoices(GroupKind kind);

// The algorithm `strategy` runs a collective of `group` with (every one
// but qgZ's all-to-all): the one its spec or system chose for the group's
// kind (AlgorithmOf), RING if none.
Algorithm AlgorithmOf(const Strategy& strategy, GroupKind kind);
inline Algorithm AlgorithmFor(const Strategy& strategy, const Group& group) {
  return AlgorithmOf(strategy, KindOf(group));
}

// Lins' rule on each mesh axis: 1 <= s_p <= s_g <= s_os <= dp, every factor
// divides the axis, an inter factor > 1 needs the intra factor to fill the
// node. The error names the rule and the values.
absl::Status ValidateStrategy(const Strategy& strategy, const Mesh& mesh);

// The named systems of docs/strategies.md §1, as specs ParseStrategy accepts.
std::vector<std::string> NamedStrategies();

inline int FactorSize(const Factor& f) { return f.intra() * f.inter(); }
// "8x1"
std::string FactorName(const Factor& f);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_STRATEGY_STRATEGY_H_

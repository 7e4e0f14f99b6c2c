#include "sim/collective/plan_cache.h"

#include "absl/strings/str_cat.h"

namespace shardsim {

PlanKey KeyOf(const CollectiveCall& call, int64_t count, int channels) {
  const Group& g = call.group();
  PlanKey key;
  key.request.op = call.op();
  key.request.algorithm = call.algorithm();
  key.request.shape = {g.intra_size(), g.inter_size()};
  key.request.count = count;
  key.request.channels = channels;
  key.request.root = call.root();
  key.intra_stride = g.intra_stride();
  key.inter_stride = g.inter_stride();
  return key;
}

absl::StatusOr<Plan> PlanCall(const CollectiveCall& call, const PlanKey& key,
                              const Mesh& mesh, const Platform& platform) {
  if (absl::Status s = ValidateGroup(call.group(), mesh); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("group ", GroupName(call.group()), ": ", s.message()));
  }
  if (call.algorithm() == SHARP && !platform.network().sharp()) {
    return absl::InvalidArgumentError(
        absl::StrCat("algorithm SHARP: platform ", platform.name(),
                     " has no SHARP-capable switches (network.sharp)"));
  }
  return MakePlan(key.request);
}

}  // namespace shardsim

// The programs of a schedule (schedule.proto: Program, Op.program,
// PointToPoint) as the engine replays them: which ranks run each, which ops
// each issues and in what order, checked against the contract the proto
// states. A schedule without programs is one program of every rank: the
// lowering's, the only kind before pipelines.
#ifndef SHARDSIM_SIM_ENGINE_PROGRAMS_H_
#define SHARDSIM_SIM_ENGINE_PROGRAMS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/group.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

struct ProgramInfo {
  std::string role;
  std::vector<int> ranks;  // global ranks, in the order sends pair them
  std::vector<int> ops;    // op ids, in issue order
};

struct Programs {
  std::vector<ProgramInfo> list;  // one at least
  bool several() const { return list.size() > 1; }
};

// The programs of `s` on `mesh`. One program (no Program listed, or one
// of every rank): every op in it, no op a send, and nothing else checked
// (the replay's checks as before). Several: the contract of
// schedule.proto, each breach an error naming the op or program at fault.
absl::StatusOr<Programs> ReadPrograms(const Schedule& s, const Mesh& mesh);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ENGINE_PROGRAMS_H_

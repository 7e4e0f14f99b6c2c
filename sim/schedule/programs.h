// The programs of a schedule (schedule.proto: Program, Op.program,
// PointToPoint) as the engine replays them: which ranks run each, which ops
// each issues and in what order, checked against the contract the proto
// states. A schedule without programs is one program of every rank: the
// lowering's, the only kind before pipelines.
#ifndef SHARDSIM_SIM_SCHEDULE_PROGRAMS_H_
#define SHARDSIM_SIM_SCHEDULE_PROGRAMS_H_

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

// A collective runs within one program (schedule.proto's contract): OK
// when every rank of `group` (global ranks, one group of `shape`) is in
// `program` by `program_of` (each rank's program); else an error naming
// the first rank of another program.
absl::Status GroupWithinProgram(const Group& shape,
                                const std::vector<int>& group,
                                const std::vector<int>& program_of,
                                int program);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_PROGRAMS_H_

// One run of a step's ops on the fabric: SimGrid actors for the host that
// issues them and for each stream that runs them (replay.h says what each
// does). ReplayStep runs it once for a full replay, and the collapse once
// on a step with blocks dropped, taking snapshots of the state as it goes.
#ifndef SHARDSIM_SIM_ENGINE_STEP_ACTORS_H_
#define SHARDSIM_SIM_ENGINE_STEP_ACTORS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "sim/engine/collective_engine.h"
#include "sim/engine/fabric.h"
#include "sim/engine/replay.h"
#include "sim/schedule/programs.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

// The state of a replay at a watched op (a block's first), by op ids
// relative to it, with what decides each op's rest (replay.h). Taken
// twice per watched op:
//  - at the host, when the host reaches it: every op issued before it and
//    not done, the host's lead over the GPU included;
//  - on the GPU, when it starts: every op from the oldest not done to the
//    newest started, done, running or not started, the host set aside.
struct Snapshot {
  int at = 0;       // the watched op
  double time = 0;  // when the host reached it, or it started
  int oldest = 0;   // the oldest op not done (at if none)
  // False where the state was not read: at the host, when more ops are in
  // flight than four blocks hold (its lead over the GPU grows; no state
  // with it repeats, and reading it at every block would cost more than
  // the replay).
  bool read = true;
  // Ids, counts and seconds; the flows' bytes still to go apart (the
  // collapse compares them to another precision).
  std::vector<double> state;
  std::vector<double> bytes;
};

struct Snapshots {
  std::vector<Snapshot> host;
  std::vector<Snapshot> gpu;
};

// One replay of `schedule` on the engine, from the clock's time now (it
// may follow an earlier one): each op's times from its start. `programs`:
// those of the schedule (ReadPrograms); null for one program of every op.
// `watch`: op ids (ascending) at which to take snapshots, into `snapshots`
// if given. An error if some op never ran (a dependency on
// a later op).
absl::StatusOr<std::vector<OpTime>> RunStepActors(const Schedule& schedule,
                                                  const Programs* programs,
                                                  Fabric* fabric,
                                                  CollectiveEngine* collectives,
                                                  std::vector<int> watch,
                                                  Snapshots* snapshots);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ENGINE_STEP_ACTORS_H_

// Repeating micro-batches of a schedule, for the engine's collapsed replay
// (sim/engine/replay.h).
//
// Block k is the ops from the first op of micro-batch k (in issue order) up
// to the first op of micro-batch k + 1: the host issues block k between
// those two points, whatever micro-batches its ops belong to (prefetches of
// the next one, reductions of the last one). Blocks lo..hi repeat when each
// is the one before it with every id shifted by the block's length: same
// bodies, same streams, micro-batch + 1, and every dependency either
// shifted too or on the same op before block lo.
#ifndef SHARDSIM_SIM_SCHEDULE_PERIODIC_H_
#define SHARDSIM_SIM_SCHEDULE_PERIODIC_H_

#include <optional>
#include <string>
#include <vector>

#include "sim/schema/schedule.pb.h"

namespace shardsim {

struct Repeats {
  int lo = 0;          // first repeating block
  int hi = 0;          // last repeating block (never the last micro-batch)
  int first_op = 0;    // id of block lo's first op
  int period_ops = 0;  // ops per block
  // Id of block k's first op, lo <= k <= hi + 1 (block hi + 1 starts the
  // tail: the rest of the schedule).
  int BlockStart(int k) const { return first_op + (k - lo) * period_ops; }
};

// The longest run of repeating blocks (at least two), or nullopt with the
// reason in `why` when there is none.
std::optional<Repeats> FindRepeats(const Schedule& schedule, std::string* why);

struct Shortened {
  Schedule schedule;
  // Ops of the shortened schedule that a tail op waits for by their own id
  // (not shifted with the tail): the shortened run stands for the full one
  // only if each is done before the tail is issued.
  std::vector<int> pinned;
};

// `schedule` without blocks keep + 1 .. r.hi (lo <= keep < hi): the tail
// follows block `keep`, its ids shifted down by (r.hi - keep) blocks and its
// dependencies on dropped blocks mapped onto the kept ones they repeat.
// nullopt (and `why`) when a tail op depends on a dropped block with no
// kept image.
std::optional<Shortened> DropBlocks(const Schedule& schedule, const Repeats& r,
                                    int keep, std::string* why);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_PERIODIC_H_

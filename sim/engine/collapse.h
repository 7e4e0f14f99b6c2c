// The collapsed replay (replay.h): the repeating micro-batches simulated
// until the state at a boundary between two of them comes back, the rest
// that period repeated.
#ifndef SHARDSIM_SIM_ENGINE_COLLAPSE_H_
#define SHARDSIM_SIM_ENGINE_COLLAPSE_H_

#include <optional>

#include "absl/status/statusor.h"
#include "sim/engine/collective_engine.h"
#include "sim/engine/fabric.h"
#include "sim/engine/replay.h"
#include "sim/schedule/periodic.h"
#include "sim/schema/results.pb.h"

namespace shardsim {

// Blocks simulated past the first repeating one before the tail: the state
// repeats at its second boundary at the earliest (block lo + 1's start
// comes back at lo + 2's), and the ops of block lo + 1, which stand for the
// far blocks, must be done before the tail begins: one block later, as
// many ops of a block still run when the next begins.
constexpr int kKeptBlocks = 2;

// The longest cycle of blocks the collapse looks for where no block's
// start state is the next one's (a pipeline's stages can settle into a
// cycle of a few): a cycle of m blocks is then collapsed in blocks of m,
// which need m times the blocks simulated; past 8, as much as a long
// pipeline's full replay.
constexpr int kMaxCycle = 8;

// Blocks `step` keeps past the first of its repeats `r`: kKeptBlocks, and
// with several programs (a pipeline's stages) one more per program, in
// blocks of r.stride micro-batches. The stages run their parts of a block
// one after the other, stage s a forward pass after stage s - 1 (its
// input is that pass's output), and a block takes a forward and a
// backward pass per stage, a backward pass being no shorter than a
// forward one: a block's ops end within half as many periods as there
// are stages. The state repeats once the oldest op in flight is in a
// repeating block, that lag after the first, and every op of the block
// the far ones repeat must then be done before the tail begins, another.
// Where that is not so, ReplayCollapsed measures how many more it needs
// and tries again, or, where the start state comes back every m blocks
// (m <= kMaxCycle), collapses the step in blocks of m.
int KeptBlocks(const StepOps& step, const Repeats& r);

// Replays `step` collapsed by its repeats `r` (more than KeptBlocks + 1
// blocks, fast mode). Returns the full step's op times, or nullopt with
// the reason in `info` when the state did not repeat in time (the caller
// then replays it in full); `info` gets the collapse's numbers otherwise.
absl::StatusOr<std::optional<StepTimes>> ReplayCollapsed(
    const StepOps& step, const Repeats& r, Fabric* fabric,
    CollectiveEngine* collectives, StepReplay* info);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ENGINE_COLLAPSE_H_

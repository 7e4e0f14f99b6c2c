// Repeating micro-batches of a schedule, for the engine's collapsed replay
// (sim/engine/replay.h).
//
// Block k is the ops from the first op of micro-batch k (in issue order) up
// to the first op of micro-batch k + 1: the host issues block k between
// those two points, whatever micro-batches its ops belong to (prefetches of
// the next one, reductions of the last one). Blocks lo..hi repeat when each
// is the one before it with every id shifted by the block's length: same
// bodies, same streams and programs, micro-batch + 1, and every dependency
// either shifted too or on the same op before block lo. A pipeline's
// blocks may be groups of as many micro-batches as it has stages
// (interleaved 1F1B runs them so): block k then runs from micro-batch
// k * stride's first op to (k + 1) * stride's, each op micro-batch + stride.
#ifndef SHARDSIM_SIM_SCHEDULE_PERIODIC_H_
#define SHARDSIM_SIM_SCHEDULE_PERIODIC_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "sim/schedule/lower.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

struct Repeats {
  int lo = 0;          // first repeating block
  int hi = 0;          // last repeating block (never the last micro-batch)
  int first_op = 0;    // id of block lo's first op
  int period_ops = 0;  // ops per block
  int stride = 1;      // micro-batches per block
  // Id of block k's first op, lo <= k <= hi + 1 (block hi + 1 starts the
  // tail: the rest of the schedule).
  int BlockStart(int k) const { return first_op + (k - lo) * period_ops; }
};

// The longest run of repeating blocks (at least two), or nullopt with the
// reason in `why` when there is none.
std::optional<Repeats> FindRepeats(const Schedule& schedule, std::string* why);

struct Shortened {
  // On an arena, as lowered steps are: a shortened step of thousands of ops
  // is built and dropped whole (its ops freed one by one cost as much as
  // copying them).
  OwnedSchedule schedule;
  // Ops of the shortened schedule that a tail op waits for by their own id
  // (not shifted with the tail): the shortened run stands for the full one
  // only if each is done before the tail is issued.
  std::vector<int> pinned;
};

// `schedule` without blocks keep + 1 .. r.hi (lo <= keep < hi): the tail
// follows block `keep`, its ids shifted down by (r.hi - keep) blocks and its
// dependencies on dropped blocks mapped onto the kept ones they repeat; a
// dependency more blocks before the tail than are kept (kept - lo + 1) is
// mapped onto its copy in block lo, which the shortened run stands for
// only if it is done before the tail is issued (as the collapse checks of
// every op before the block its far blocks repeat). nullopt (and `why`)
// when keep is not in lo..hi - 1.
std::optional<Shortened> DropBlocks(const Schedule& schedule, const Repeats& r,
                                    int keep, std::string* why);

// A step stored folded: `base`, the step lowered at fewer micro-batches,
// stands for it with its last repeating block (r.hi) repeated `copies`
// more times. Copy k of that block is the block k blocks on: ids and
// every reference that shifts between blocks r.hi - 1 and r.hi shift by
// k blocks, micro-batches by k * r.stride; references that stay, stay. The tail
// follows the last copy, its ids, micro-batches and references into blocks
// r.lo.. shifted by `copies` blocks. This is how the lowering repeats a
// micro-batch; LowerFolded (sim/analyze) checks it on every fold it makes
// against the step lowered at one more micro-batch, and falls back to the
// full step where it does not hold.
struct Fold {
  Repeats r;  // of the base
  int copies = 0;
  int64_t tokens_per_step = 0;  // of the whole step
};

// The fold of `base` by `copies` (>= 1) blocks, each r.stride micro-
// batches: nullopt, with the reason in `why`, when base has no two
// repeating blocks.
std::optional<Fold> FoldOf(const Schedule& base, int copies,
                           int64_t tokens_per_step, std::string* why);

// A step's ops, stored whole or folded. Op `id` of the step is the base op
// op(id) (whose own id and references are the base's: read the step's
// through this class).
class StepOps {
 public:
  using Refs = absl::InlinedVector<int, 4>;

  explicit StepOps(const Schedule& whole)
      : s_(&whole), block_end_(whole.ops_size()), tail_(block_end_) {}
  StepOps(const Schedule& base, const Fold& fold)
      : s_(&base),
        fold_(fold),
        period_(fold.r.period_ops),
        copies_(fold.copies),
        block_(fold.r.BlockStart(fold.r.hi)),
        block_end_(block_ + period_),
        tail_(block_end_ + copies_ * period_) {}

  int size() const { return s_->ops_size() + copies_ * period_; }
  const Op& op(int id) const { return s_->ops(Base(id)); }
  int micro_batch(int id) const;
  // One more than the last micro-batch of any op: read off the base ops'
  // last copies, not every op (a folded step of 128 has 10^5 of them).
  int micro_batches() const;
  Refs deps(int id) const { return Shift(id, &Op::deps); }
  Refs host_waits(int id) const { return Shift(id, &Op::host_waits); }
  // The op a freeing memory op frees.
  int frees(int id) const;
  int64_t tokens_per_step() const {
    return fold_ ? fold_->tokens_per_step : s_->tokens_per_step();
  }
  // How many step ops base op `base_id` stands for, and the first of them.
  int Multiplicity(int base_id) const;
  int FirstId(int base_id) const;
  const Schedule& base() const { return *s_; }
  const std::optional<Fold>& fold() const { return fold_; }

 private:
  using Field = const google::protobuf::RepeatedField<int32_t>& (Op::*)() const;
  // The base op step op `id` is, and how many blocks on (0: itself, and
  // `copies` for the tail).
  int Base(int id) const;
  int Copies(int id) const;
  bool InTail(int id) const { return copies_ > 0 && id >= tail_; }
  int ShiftRef(int id, int ref, int ref_a_block_before) const;
  Refs Shift(int id, Field field) const;

  const Schedule* s_;
  std::optional<Fold> fold_;
  // Derived from fold_ (all 0 or past the end for a whole step): the
  // repeated block is base ops [block_, block_end_); the tail starts at
  // step op tail_.
  int period_ = 0;
  int copies_ = 0;
  int block_ = 0;
  int block_end_ = 0;
  int tail_ = 0;
};

// The step `ops` stands for, every op stored.
OwnedSchedule Unfold(const StepOps& ops);

// FindRepeats and DropBlocks of the step `ops` stands for, without
// unfolding it: the same as on Unfold(ops). A folded step's repeats are
// its base's, longer by the copies; DropBlocks reads the blocks it keeps
// through the fold (keep >= r.hi: nullopt and `why`).
std::optional<Repeats> FindRepeats(const StepOps& ops, std::string* why);
std::optional<Shortened> DropBlocks(const StepOps& ops, const Repeats& r,
                                    int keep, std::string* why);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_PERIODIC_H_

// A plan (sim/collective/plan.h) as one rank executes it: per step, what
// it sends, receives, or moves locally. No CUDA and no MPI here: both
// backends (hw/cpu, hw/cuda) lower plans with BuildRankProgram and keep only
// the execution of the steps (MPI Isend/Irecv, NCCL grouped send/recv) to
// themselves, and the lowering can be checked on a host (every rank's
// program run against ExecutePlan).
//
// Executing a step: everything the step sends or moves locally is read as
// it was when the step began; then staged data is applied in order, copies
// overwrite, reduces add. Peers match sends to receives in order, which is
// the same on both sides because every rank walks ExpandTransfers' order
// (RankOp::index is the transfer's position in its step, the same on both
// ends, for transports that tag messages).
//
// SHARP without CollNet: the switch (kSwitch) lives on member 0. A transfer
// to or from it becomes a send/receive with member 0 (local on member 0
// itself); member 0 holds the zeroed switch buffer.
#ifndef SHARDSIM_HW_RUNTIME_RANK_PROGRAM_H_
#define SHARDSIM_HW_RUNTIME_RANK_PROGRAM_H_

#include <cstdint>
#include <vector>

#include "sim/collective/plan.h"

namespace shardsim::hw {

// One rank's part of one plan step: what it sends, receives, or moves
// locally (the emulated switch on member 0).
struct RankOp {
  enum Kind { kSend, kRecv, kLocal } kind = kSend;
  int peer = 0;             // member index (kSend / kRecv)
  bool src_switch = false;  // reads the switch buffer (kSend / kLocal)
  bool dst_switch = false;  // writes the switch buffer (kRecv / kLocal)
  bool inter = false;       // leaves the node (HO-Ring's second stream)
  bool reduce = false;
  int64_t offset = 0;  // in the source and destination buffers
  int64_t count = 0;
  int64_t stage_off = 0;  // in the receive staging buffer (kRecv / kLocal)
  int64_t index = 0;      // position of the transfer in its plan step
};

struct RankProgram {
  std::vector<int32_t> step_ids;           // plan step of each entry
  std::vector<std::vector<RankOp>> steps;  // non-empty steps only, in order
  int64_t stage_elems = 0;                 // max over steps
  bool uses_switch = false;                // this rank hosts switch traffic
  bool split_streams = false;              // HO-Ring: intra and inter apart
};

// Member `me`'s program for `plan`.
RankProgram BuildRankProgram(const Plan& plan, int me);

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_RUNTIME_RANK_PROGRAM_H_

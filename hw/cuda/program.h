// A plan (sim/collective/plan.h) as one rank executes it: per step, what
// it sends, receives, or moves locally. No CUDA here, so the lowering can be
// checked on a host (every rank's program run against ExecutePlan).
//
// Execution of a step (cuda_backend.cc): local moves are snapshot into the
// staging buffer; then one NCCL group posts every send (read straight from
// the buffers: every write of the step comes after the group) and every
// receive (into staging); then staged data is applied in order, copies
// overwrite, reduces add. Peers match sends to receives in order, which is
// the same on both sides because every rank walks ExpandTransfers' order.
//
// SHARP without CollNet: the switch (kSwitch) lives on member 0. A transfer
// to or from it becomes a send/receive with member 0 (local on member 0
// itself); member 0 holds the zeroed switch buffer.
#ifndef SHARDSIM_HW_CUDA_PROGRAM_H_
#define SHARDSIM_HW_CUDA_PROGRAM_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "sim/collective/plan.h"

namespace shardsim::hw {

// One rank's part of one plan step: what it sends, receives, or moves
// locally (the emulated switch on member 0).
struct XferOp {
  enum Kind { kSend, kRecv, kLocal } kind = kSend;
  int peer = 0;             // member index (kSend / kRecv)
  bool src_switch = false;  // reads the switch buffer (kSend / kLocal)
  bool dst_switch = false;  // writes the switch buffer (kRecv / kLocal)
  bool inter = false;       // leaves the node (HO-Ring's second stream)
  bool reduce = false;
  int64_t offset = 0;      // in the source and destination buffers
  int64_t count = 0;
  int64_t stage_off = 0;   // in the receive staging buffer (kRecv / kLocal)
};

struct Program {
  std::vector<int32_t> step_ids;           // plan step of each entry
  std::vector<std::vector<XferOp>> steps;  // non-empty steps only, in order
  int64_t stage_elems = 0;                 // max over steps
  bool uses_switch = false;                // this rank hosts switch traffic
  bool split_streams = false;              // HO-Ring: intra and inter apart
};

inline Program BuildProgram(const Plan& plan, int me) {
  Program prog;
  prog.split_streams = plan.algorithm == HORING;
  const std::vector<Transfer> transfers = ExpandTransfers(plan);
  auto host = [](int who) { return who == kSwitch ? 0 : who; };
  size_t begin = 0;
  while (begin < transfers.size()) {
    size_t end = begin;
    while (end < transfers.size() &&
           transfers[end].step == transfers[begin].step) {
      ++end;
    }
    std::vector<XferOp> ops;
    int64_t stage = 0;
    for (size_t i = begin; i < end; ++i) {
      const Transfer& t = transfers[i];
      const int hs = host(t.src), hd = host(t.dst);
      if (hs != me && hd != me) continue;
      XferOp op;
      op.src_switch = t.src == kSwitch;
      op.dst_switch = t.dst == kSwitch;
      op.inter = t.src == kSwitch || t.dst == kSwitch ||
                 plan.shape.NodeOf(t.src) != plan.shape.NodeOf(t.dst);
      op.reduce = t.reduce;
      op.offset = t.offset;
      op.count = t.count;
      if (hs == me && hd == me) {
        op.kind = XferOp::kLocal;
        op.stage_off = stage;
        stage += t.count;
      } else if (hs == me) {
        op.kind = XferOp::kSend;
        op.peer = hd;
        op.dst_switch = false;
      } else {
        op.kind = XferOp::kRecv;
        op.peer = hs;
        op.src_switch = false;
        op.stage_off = stage;
        stage += t.count;
      }
      if (op.src_switch || op.dst_switch) prog.uses_switch = true;
      ops.push_back(op);
    }
    if (!ops.empty()) {
      prog.steps.push_back(std::move(ops));
      prog.step_ids.push_back(transfers[begin].step);
    }
    prog.stage_elems = std::max(prog.stage_elems, stage);
    begin = end;
  }
  return prog;
}

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_CUDA_PROGRAM_H_

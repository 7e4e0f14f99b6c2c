#include "hw/runtime/rank_program.h"

#include <algorithm>
#include <utility>

namespace shardsim::hw {

RankProgram BuildRankProgram(const Plan& plan, int me) {
  RankProgram prog;
  prog.split_streams = plan.algorithm == HORING;
  const std::vector<Transfer> transfers = ExpandTransfers(plan);
  auto host = [](int who) { return who == kSwitch ? 0 : who; };
  for (const auto& [begin, end] : StepRuns(transfers)) {
    std::vector<RankOp> ops;
    int64_t stage = 0;
    for (size_t i = begin; i < end; ++i) {
      const Transfer& t = transfers[i];
      const int hs = host(t.src), hd = host(t.dst);
      if (hs != me && hd != me) continue;
      RankOp op;
      op.src_switch = t.src == kSwitch;
      op.dst_switch = t.dst == kSwitch;
      op.inter = LeavesNode(plan.shape, t.src, t.dst);
      op.reduce = t.reduce;
      op.offset = t.offset;
      op.count = t.count;
      op.index = static_cast<int64_t>(i - begin);
      if (hs == me && hd == me) {
        op.kind = RankOp::kLocal;
        op.stage_off = stage;
        stage += t.count;
      } else if (hs == me) {
        op.kind = RankOp::kSend;
        op.peer = hd;
        op.dst_switch = false;
      } else {
        op.kind = RankOp::kRecv;
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
  }
  return prog;
}

}  // namespace shardsim::hw

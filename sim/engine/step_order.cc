#include "sim/engine/step_order.h"

#include <algorithm>

namespace shardsim {

std::vector<int> StreamPredecessors(const StepOps& s) {
  const int programs = std::max(1, s.base().programs_size());
  std::vector<int> last(programs * Stream_ARRAYSIZE, -1);
  std::vector<int> prev(s.size(), -1);
  for (int id = 0; id < s.size(); ++id) {
    const Op& op = s.op(id);
    const int stream = op.program() * Stream_ARRAYSIZE + op.stream();
    prev[id] = last[stream];
    last[stream] = id;
  }
  return prev;
}

std::vector<int> HostPredecessors(const StepOps& s) {
  if (s.base().programs_size() <= 1) return {};
  std::vector<int> last(s.base().programs_size(), -1);
  std::vector<int> prev(s.size(), -1);
  for (int id = 0; id < s.size(); ++id) {
    const int program = s.op(id).program();
    prev[id] = last[program];
    last[program] = id;
  }
  return prev;
}

}  // namespace shardsim

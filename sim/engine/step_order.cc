#include "sim/engine/step_order.h"

namespace shardsim {

std::vector<int> StreamPredecessors(const StepOps& s) {
  std::vector<int> last(Stream_ARRAYSIZE, -1);
  std::vector<int> prev(s.size(), -1);
  for (int id = 0; id < s.size(); ++id) {
    const Stream stream = s.op(id).stream();
    prev[id] = last[stream];
    last[stream] = id;
  }
  return prev;
}

}  // namespace shardsim

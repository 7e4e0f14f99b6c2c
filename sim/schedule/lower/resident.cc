#include "sim/schedule/lower/resident.h"

#include "sim/strategy/model_states.h"

namespace shardsim {
namespace lower {

void ResidentPass::Begin() {
  int64_t psi = 0;
  for (const Layer& l : step_.layers()) psi += l.params;
  const ModelStates st =
      ModelStateBytes(psi, step_.optimizer_bytes_per_param(), step_.strategy());
  step_.Alloc(COMPUTE, FORWARD, -1, -1, st.params - st.secondary, "P shard");
  step_.Alloc(COMPUTE, FORWARD, -1, -1, st.secondary, "P secondary");
  step_.Alloc(COMPUTE, FORWARD, -1, -1, st.grads, "G shard");
  step_.Alloc(COMPUTE, FORWARD, -1, -1, st.optimizer, "OS shard");
  step_.set_host_bytes_per_gpu(st.host_optimizer + st.host_buffers);
}

}  // namespace lower
}  // namespace shardsim

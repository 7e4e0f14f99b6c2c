// The activations a layer keeps from its forward for its backward (only
// its input when it recomputes, Layer::activation_bytes): allocated at its
// first forward kernel, freed after its last backward one. Each
// micro-batch's are its own: a pipeline stage runs several forwards of a
// layer before their backwards (1F1B's warm-up, the interleaved schedule's
// groups), and each backward frees the activations of its micro-batch.
#ifndef SHARDSIM_SIM_SCHEDULE_LOWER_ACTIVATIONS_H_
#define SHARDSIM_SIM_SCHEDULE_LOWER_ACTIVATIONS_H_

#include <map>
#include <utility>
#include <vector>

#include "sim/schedule/lower/pass.h"
#include "sim/schedule/lower/step.h"

namespace shardsim {
namespace lower {

class ActivationsPass : public Pass {
 public:
  explicit ActivationsPass(Step* step);

  void BeforeCompute(int v, std::vector<int>* deps) override;
  void AfterCompute(int v, int op) override;

 private:
  Step& step_;
  // (layer, micro-batch) -> its live activations' alloc op.
  std::map<std::pair<int, int>, int> alloc_;
};

}  // namespace lower
}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_LOWER_ACTIVATIONS_H_

// The activations a layer keeps from its forward for its backward (only
// its input when it recomputes, Layer::activation_bytes): allocated at its
// first forward kernel, freed after its last backward one.
#ifndef SHARDSIM_SIM_SCHEDULE_LOWER_ACTIVATIONS_H_
#define SHARDSIM_SIM_SCHEDULE_LOWER_ACTIVATIONS_H_

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
  std::vector<int> alloc_;  // per layer: its live activations' alloc
};

}  // namespace lower
}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_LOWER_ACTIVATIONS_H_

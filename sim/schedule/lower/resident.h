// The model states this GPU keeps all step (sim/strategy/model_states.h):
// its P, G and OS shards (and a ZeRO++ hpZ secondary P copy), allocated
// before the step and never given back.
#ifndef SHARDSIM_SIM_SCHEDULE_LOWER_RESIDENT_H_
#define SHARDSIM_SIM_SCHEDULE_LOWER_RESIDENT_H_

#include "sim/schedule/lower/pass.h"
#include "sim/schedule/lower/step.h"

namespace shardsim {
namespace lower {

class ResidentPass : public Pass {
 public:
  explicit ResidentPass(Step* step) : step_(*step) {}

  void Begin() override;

 private:
  Step& step_;
};

}  // namespace lower
}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_LOWER_RESIDENT_H_

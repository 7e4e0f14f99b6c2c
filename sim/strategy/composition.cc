#include "sim/strategy/composition.h"

#include "sim/strategy/strategy.h"

namespace shardsim {

std::string UnsupportedComposition(const Strategy& strategy,
                                   const Parallelism& p) {
  const bool pipeline = p.pp() > 1;
  const bool any = pipeline || p.tp() > 1 || p.cp() > 1;
  if (!any) return "";
  switch (strategy.execution().framework()) {
    case DEEPSPEED:
      if (pipeline && FactorSize(strategy.g()) > 1) {
        return "DeepSpeed's pipeline engine runs ZeRO stage 0 or 1 only "
               "(\"ZeRO-2 and ZeRO-3 are incompatible with pipeline "
               "parallelism\", deepspeed/runtime/pipe/engine.py)";
      }
      return "";
    case PARO_PAPER:
      return "PaRO's schedule is its paper's, for data parallelism alone";
    default:
      return "";
  }
}

}  // namespace shardsim

// Which sharding strategies a framework runs composed with tensor, context
// and pipeline parallelism. A composition no framework runs is refused
// unless the scenario asks for it as a what-if (Scenario.what_if).
#ifndef SHARDSIM_SIM_STRATEGY_COMPOSITION_H_
#define SHARDSIM_SIM_STRATEGY_COMPOSITION_H_

#include <string>

#include "sim/schema/scenario.pb.h"
#include "sim/schema/strategy.pb.h"

namespace shardsim {

// Empty when `strategy`'s framework runs it with `parallelism`; otherwise
// why not, naming the framework's own check:
//  - DeepSpeed's pipeline engine refuses ZeRO stage 2 and 3 ("ZeRO-2 and
//    ZeRO-3 are incompatible with pipeline parallelism", deepspeed/runtime/
//    pipe/engine.py, PipelineEngine.__init__): every DeepSpeed strategy
//    that shards gradients (ZeRO-2, ZeRO-3, MiCS, ZeRO++) with pp > 1.
//  - PaRO's schedule is its paper's, for data parallelism alone.
// PyTorch DDP and FSDP compose with tp and pp as torchtitan composes them
// (FSDP2 with Megatron-style TP and torch.distributed.pipelining), Megatron
// and DeepSpeed's ZeRO-1 with all of them, InternEvo (Lins) with tp and pp.
std::string UnsupportedComposition(const Strategy& strategy,
                                   const Parallelism& parallelism);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_STRATEGY_COMPOSITION_H_

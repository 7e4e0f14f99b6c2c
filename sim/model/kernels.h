// Stage 1, continued: the GPU kernels of each layer, with their shapes, in
// the order a framework launches them.
//
// A layer is cut into units: the modules that own parameters (q_proj,
// gate_proj, ...), each with the kernels of its forward and backward. A
// kernel that owns no parameters (rotary, attention, activations, residual
// adds) belongs to the unit whose module runs it, or to the unit before
// it: it can run as soon as that unit's parameters are there. DeepSpeed
// ZeRO-3 gathers unit by unit; FSDP and PaRO a whole layer at once.
//
// Two styles, as the model code runs them (scenario `kernels`):
//  - EAGER: HF transformers' LLaMA/GPT modules in PyTorch eager mode. Each
//    memory-bound op is the chain of eager kernels (and, in backward, of
//    autograd kernels) it launches, counted op by op from the formulas: the
//    fp32-upcast RMSNorm is 8 launches forward and 14 backward, rotary by
//    rotate_half 5 and 9 per tensor. Checked against torch.profiler's
//    kernel list of one block (validate/reference/).
//  - FUSED: one kernel per op (Apex's RMSNorm, flash-attn's rotary, a fused
//    SwiGLU; without flash attention Megatron-LM's fused scale-mask-softmax),
//    reading its inputs and writing its outputs once.
#ifndef SHARDSIM_SIM_MODEL_KERNELS_H_
#define SHARDSIM_SIM_MODEL_KERNELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/layout.h"
#include "sim/schema/kernel.pb.h"
#include "sim/schema/model.pb.h"
#include "sim/schema/scenario.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

struct Batch;  // model.h

// A collective that a unit's module issues inside its forward or backward
// over the group of one dimension of the job's mesh.
//  - Tensor parallelism's (Megatron-LM's ColumnParallelLinear,
//    RowParallelLinear, VocabParallelEmbedding, vocab-parallel
//    cross-entropy: megatron/core/tensor_parallel/layers.py, mappings.py,
//    cross_entropy.py) run before kernel `at` of that kernel list (at ==
//    the list's size: after its last kernel), blocking the compute stream,
//    as Megatron runs them without its TP communication overlap.
//  - Context parallelism's ring exchange of keys and values (Megatron's
//    default cp_comm_type "p2p": Transformer Engine's
//    AttnFuncWithCPAndKVP2P) starts before kernel `at` on its own stream,
//    beside the attention over the GPU's own chunk, and kernel `wait` (the
//    attention over the chunks it brings) waits for it.
struct UnitCollective {
  Dim dim = Dim::kTp;  // whose group (sim/base/layout.h)
  CollectiveOp kind = ALL_REDUCE;
  bool backward = false;
  int at = 0;
  int wait = -1;      // -1: blocking; else the kernel that waits for it
  int64_t bytes = 0;  // as CollectiveCall.bytes counts them
  DType dtype = BF16;
  std::string tensor;  // what it carries, for the op's label
};

// A module that owns parameters, and the kernels its forward and backward
// launch (backward in launch order: the reverse of forward's).
struct Unit {
  std::string name;
  int64_t params = 0;
  // Elements of each of its 1-D tensors (a norm's weight and bias, a
  // linear layer's bias), in PyTorch's registration order after the one
  // matrix the rest of `params` is, if any. DeepSpeed's qgZ quantizes
  // matrices only (sim/schedule/lower/).
  std::vector<int64_t> vectors;
  // Parameters of its matrix gathered as float8, one byte each (FSDP2's
  // float8 all-gather: Float8.fsdp_all_gather); the rest in bf16.
  int64_t fp8_params = 0;
  std::vector<Kernel> forward;
  std::vector<Kernel> backward;
  // The collectives it issues, each list's in kernel order; none when tp
  // and cp are 1.
  std::vector<UnitCollective> comms;
};

// The units of each kind of layer, in forward order.
std::vector<Unit> EmbeddingUnits(const Model& model, const Batch& batch);
std::vector<Unit> BlockUnits(const Model& model, const Batch& batch);
std::vector<Unit> HeadUnits(const Model& model, const Batch& batch);

// The core attention of one block's forward (scores, softmax, context, with
// GQA's expansion of k and v): what Megatron's selective recomputation
// runs again (Korthikanti et al. 2022 section 5). Empty with FlashAttention,
// which keeps no scores to recompute.
std::vector<Kernel> CoreAttentionKernels(const Model& model,
                                         const Batch& batch);

// Heads of k and v on one of `tp` GPUs. Megatron divides the query groups
// when they are at least tp; with fewer (tp a multiple of them) each rank
// keeps one whole kv head, its projection's columns gathered from the
// group's ranks (megatron/core/transformer/attention.py, Attention.__init__:
// num_query_groups_per_partition = 1 if num_query_groups < world_size;
// transformer_config.py requires one to divide the other).
int KvHeadsPerGpu(int kv_heads, int tp);

// The optimizer step over `params` fp32 master weights of one GPU's shard:
// the reduced bf16 gradient cast to fp32 (none where the gradients are
// fp32 already, `fp32_grads`: Megatron's main_grad), fused Adam over
// weights, m and v, and the updated weights cast back to bf16 for the next
// forward.
std::vector<Kernel> OptimizerKernels(int64_t params, bool fp32_grads = false);

// ZeRO-Offload (sim/schedule/lower/offload.h): a reduced bf16 gradient
// shard of `params` cast to fp32 on the GPU and copied to the host (4 bytes
// a parameter); Adam over them on the host's CPU; the updated shard copied
// back in bf16 (2 bytes a parameter).
std::vector<Kernel> OffloadGradientKernels(int64_t params);
Kernel HostOptimizerKernel(int64_t params, int sharers);
Kernel OffloadParamsKernel(int64_t params);

// Adds a micro-batch's bf16 gradients of `elements` into the accumulated
// ones (PyTorch's .grad accumulation, or into a reduced shard).
Kernel AccumulateKernel(int64_t elements);

// The gradient norm's pass over `elements` gradients moving
// `bytes_per_element` through HBM in `launches` kernels, and the scaling by
// the clip coefficient that follows it (an fp32 gradient read and written).
Kernel GradNormKernel(int64_t elements, int64_t bytes_per_element,
                      int launches);
Kernel GradScaleKernel(int64_t elements);

// DeepSpeed's check of `elements` bf16 gradients for inf and NaN: 28 bytes
// an element through HBM in `launches` kernels (sim/schedule/lower/update.h
// counts them).
Kernel OverflowCheckKernel(int64_t elements, int launches);

// Launches a kernel takes: a memory-bound op's kernels, one for any other
// GPU kernel or copy, none for the host's own optimizer step.
int KernelLaunches(const Kernel& kernel);

// FLOPs a kernel executes (GEMMs 2mnk per product; attention the score and
// context products it computes: half of them under a causal mask, 2.5x
// forward's in backward). Memory-bound kernels count none.
double KernelFlops(const Kernel& kernel);

// HBM bytes a kernel reads plus writes.
int64_t KernelBytes(const Kernel& kernel);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_MODEL_KERNELS_H_

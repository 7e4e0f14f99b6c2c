// Stage 1 of the pipeline: a model's shape -> the cost of each layer.
//
// Parameter counts come from the matrix shapes (LLaMA's SwiGLU FFN has three
// hidden x ffn matrices, so 12*L*h^2 is not used). FLOPs count a
// multiply-add as 2; attention scores are not halved for causality
// (Megatron's convention).
#ifndef SHARDSIM_SIM_MODEL_MODEL_H_
#define SHARDSIM_SIM_MODEL_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/model/kernels.h"
#include "sim/schema/model.pb.h"
#include "sim/schema/scenario.pb.h"

namespace shardsim {

// One micro-batch as one GPU sees it.
struct Batch {
  int64_t micro_batch_size = 1;  // sequences
  int64_t seq_len = 1;
  bool recompute = false;        // full activation recomputation
  bool flash_attention = false;  // attention scores not kept
  KernelOptions kernels;         // how the model code runs (EAGER if unset)
  // Finer recomputation than `recompute` (which is RECOMPUTE_FULL):
  // selective recomputes the core attention, selective layer every
  // recompute_every_layers-th block in full.
  RecomputeGranularity recompute_granularity = RECOMPUTE_NONE;
  int recompute_every_layers = 0;
  // Tensor, sequence and context parallelism (scenario `parallelism`): this
  // GPU runs 1/tp of each block's heads and MLP columns and of the
  // vocabulary, on 1/cp of the sequence; with sequence_parallel its norms
  // and dropout run on 1/tp of the sequence too.
  int tp = 1;
  bool sequence_parallel = false;
  int cp = 1;
};

// The unit of sharding and scheduling: the embedding, each transformer
// block, and the head (final norm + output projection).
struct Layer {
  std::string name;  // "embedding", "block 0" .. "block L-1", "head"
  int64_t params = 0;
  double forward_flops = 0;    // one micro-batch
  double backward_flops = 0;   // gradients w.r.t. inputs and weights
  double recompute_flops = 0;  // forward run again in backward; 0 if none
  // Bytes this layer keeps from forward until its backward, one
  // micro-batch (only its input when recomputing).
  int64_t activation_bytes = 0;
  // Extra bytes live only while this layer's backward runs (the
  // recomputed activations when recomputing, else 0).
  int64_t backward_working_bytes = 0;
  // Bytes of its output, one micro-batch: what a pipeline stage ending
  // with this layer sends the next (bf16 hidden states), 0 for the head.
  int64_t output_bytes = 0;
  // The modules that own its parameters, in forward order, with the
  // kernels each runs (kernels.h). Their params add up to `params`.
  std::vector<Unit> units;
  // What its recomputation runs when that is less than its whole forward
  // (selective recomputation: the core attention); empty: the forward of
  // every unit, their tensor-parallel collectives included.
  std::vector<Kernel> recompute_kernels;
};

// Built-in models: llama-7b, llama-13b, llama-30b, llama-65b, gpt3-175b,
// llama-2-70b, llama-3-8b, llama-3-70b. Names are case-insensitive; an
// unknown one is NotFound, listing them with the nearest as a suggestion.
std::vector<std::string> BuiltinModelNames();
absl::StatusOr<Model> BuiltinModel(absl::string_view name);

// Rejects missing or inconsistent fields, naming the field.
absl::Status ValidateModel(const Model& model);

// Rejects a `tp` that does not split `model` as Megatron-LM splits it:
// heads, the kv heads' projection columns and ffn_hidden whole on each GPU,
// kv heads a multiple or a divisor of tp (megatron/core/transformer/
// transformer_config.py). The error names the field.
absl::Status ValidateTensorParallel(const Model& model, int tp);

// Embedding, blocks, head, in forward order, as one GPU holds and runs
// them (its tensor-parallel share, its context-parallel tokens).
std::vector<Layer> ModelLayers(const Model& model, const Batch& batch);

// The whole model's parameters, however it is split.
int64_t TotalParams(const Model& model);

// Model FLOPs of one micro-batch on one GPU (its tensor- and
// context-parallel share): forward + backward, no recomputation (the
// numerator of MFU).
double ModelFlopsPerMicroBatch(const Model& model, const Batch& batch);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_MODEL_MODEL_H_

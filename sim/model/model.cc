#include "sim/model/model.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "sim/base/did_you_mean.h"
#include "sim/schema/limits.h"

namespace shardsim {
namespace {

// Bytes per element of the activations kept for backward (bf16) and of the
// logits the loss reads (fp32, as Megatron and HF compute the softmax).
constexpr int64_t kActivationBytes = 2;
constexpr int64_t kLogitBytes = 4;

Model Llama(absl::string_view name, int layers, int64_t hidden, int heads,
            int64_t ffn_hidden) {
  Model m;
  m.set_name(std::string(name));
  m.set_layers(layers);
  m.set_hidden(hidden);
  m.set_heads(heads);
  m.set_ffn_hidden(ffn_hidden);
  m.set_vocab(32000);
  m.set_mlp(Model::SWIGLU);
  m.set_norm(Model::RMSNORM);
  // No biases, untied embeddings, rotary positions: the proto defaults.
  return m;
}

Model Gpt3() {
  Model m;
  m.set_name("gpt3-175b");
  m.set_layers(96);
  m.set_hidden(12288);
  m.set_heads(96);
  m.set_ffn_hidden(4 * 12288);
  m.set_vocab(50257);
  m.set_mlp(Model::GELU);
  m.set_norm(Model::LAYERNORM);
  m.set_linear_bias(true);
  m.set_tied_embeddings(true);
  m.set_learned_positions(2048);
  return m;
}

// LLaMA-2 70B and LLaMA-3: grouped-query attention and their own
// vocabularies.
Model LlamaGqa(absl::string_view name, int layers, int64_t hidden, int heads,
               int kv_heads, int64_t ffn_hidden, int64_t vocab) {
  Model m = Llama(name, layers, hidden, heads, ffn_hidden);
  m.set_kv_heads(kv_heads);
  m.set_vocab(vocab);
  return m;
}

// In BuiltinModelNames() order.
std::vector<Model> Builtins() {
  return {
      Llama("llama-7b", 32, 4096, 32, 11008),
      Llama("llama-13b", 40, 5120, 40, 13824),
      Llama("llama-30b", 60, 6656, 52, 17920),
      Llama("llama-65b", 80, 8192, 64, 22016),
      Gpt3(),
      // huggingface.co/meta-llama/Llama-2-70b-hf config.json:
      // num_hidden_layers 80, hidden_size 8192, num_attention_heads 64,
      // num_key_value_heads 8, intermediate_size 28672, vocab_size 32000,
      // tie_word_embeddings false.
      LlamaGqa("llama-2-70b", 80, 8192, 64, 8, 28672, 32000),
      // huggingface.co/meta-llama/Meta-Llama-3-8B config.json:
      // num_hidden_layers 32, hidden_size 4096, num_attention_heads 32,
      // num_key_value_heads 8, intermediate_size 14336, vocab_size 128256,
      // tie_word_embeddings false.
      LlamaGqa("llama-3-8b", 32, 4096, 32, 8, 14336, 128256),
      // huggingface.co/meta-llama/Meta-Llama-3-70B config.json:
      // num_hidden_layers 80, hidden_size 8192, num_attention_heads 64,
      // num_key_value_heads 8, intermediate_size 28672, vocab_size 128256,
      // tie_word_embeddings false.
      LlamaGqa("llama-3-70b", 80, 8192, 64, 8, 28672, 128256),
  };
}

// Width of the K and V projections: smaller than hidden under grouped-query
// attention (kv_heads < heads).
int64_t KvWidth(const Model& m) {
  if (m.kv_heads() <= 0 || m.heads() <= 0) return m.hidden();
  return m.hidden() * m.kv_heads() / m.heads();
}

int64_t MlpMatrices(const Model& m) { return m.mlp() == Model::SWIGLU ? 3 : 2; }

int64_t NormParams(const Model& m) {
  return m.norm() == Model::LAYERNORM ? 2 * m.hidden() : m.hidden();
}

// ---- one GPU's share under tensor parallelism (tp GPUs) ----
//
// Megatron-LM's split (megatron/core/tensor_parallel/layers.py): the
// column-parallel q, k, v and MLP input projections keep out/tp output
// columns (and their biases); the row-parallel o and down projections keep
// in/tp input rows and the whole bias; norms are whole on every GPU; the
// embedding and output layer keep vocab/tp rows, the vocabulary padded to
// a multiple of tp (megatron/training/vocab_utils.py). With tp = 1 these
// are the whole model's counts.

int Tp(const Batch& batch) { return std::max(1, batch.tp); }
int Cp(const Batch& batch) { return std::max(1, batch.cp); }

int64_t VocabRows(const Model& m, int tp) { return (m.vocab() + tp - 1) / tp; }

// Weights of the block's matrix multiplies: each costs 2 FLOPs per token.
int64_t BlockMatmulParams(const Model& m, int tp) {
  const int64_t h = m.hidden();
  const int64_t attention = (2 * h * h + 2 * h * KvWidth(m)) / tp;  // q,o + k,v
  return attention + MlpMatrices(m) * h * (m.ffn_hidden() / tp);
}

int64_t BlockBiasParams(const Model& m, int tp) {
  const int64_t h = m.hidden();
  const int64_t qkv = (h + 2 * KvWidth(m)) / tp;  // column-parallel
  if (!m.linear_bias()) return m.qkv_bias() ? qkv : 0;
  const int64_t attention = qkv + h;  // o's bias whole
  // The down projection's bias is h wide (whole); the others are ffn wide.
  const int64_t mlp = (MlpMatrices(m) - 1) * (m.ffn_hidden() / tp) + h;
  return attention + mlp;
}

int64_t BlockParams(const Model& m, int tp) {
  // Two norms per block: before attention and before the MLP.
  return BlockMatmulParams(m, tp) + BlockBiasParams(m, tp) + 2 * NormParams(m);
}

int64_t EmbeddingParams(const Model& m, int tp) {
  return (VocabRows(m, tp) + m.learned_positions()) * m.hidden();
}

// The final norm, plus the output projection unless it reuses the
// embedding's matrix (tied), in which case that matrix is counted once, in
// the embedding.
int64_t HeadParams(const Model& m, int tp) {
  const int64_t projection =
      m.tied_embeddings() ? 0 : VocabRows(m, tp) * m.hidden();
  return NormParams(m) + projection;
}

// Tokens of one micro-batch on this GPU: context parallelism gives it
// seq/cp of every sequence.
double Tokens(const Batch& batch) {
  return static_cast<double>(batch.micro_batch_size) *
         (batch.seq_len / Cp(batch));
}

// QK^T and AV, each 2 * b * queries * keys * (h/tp): this GPU's heads, its
// seq/cp queries against every key; causality is not discounted.
double AttentionCoreFlops(const Model& m, const Batch& batch) {
  const double queries = static_cast<double>(batch.seq_len / Cp(batch));
  const double keys = static_cast<double>(batch.seq_len);
  const double b = static_cast<double>(batch.micro_batch_size);
  return 2.0 * 2.0 * b * queries * keys * (m.hidden() / Tp(batch));
}

// Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
// Transformer Models"), eq. 2-5, per block and GPU, bf16:
//   no tensor parallelism     s*b*h*(34 + 5*a*s/h)
//   tensor parallel (t GPUs)  s*b*h*(10 + 24/t + 5*a*s/(h*t))
//   + sequence parallelism    s*b*h*(34/t + 5*a*s/(h*t))
// The 10*s*b*h outside the tensor-parallel region (the two norms' inputs,
// the dropout masks and outputs after attention and MLP) splits over t
// only with sequence parallelism; the 24*s*b*h inside it always does. The
// 5*a*s^2*b of the attention scores, softmax output and its dropout mask
// is not kept with FlashAttention (the kernel recomputes them in backward
// from the kept Q, K, V) nor with selective recomputation. Derived for
// GPT's 4h GELU MLP with multi-head attention; for SwiGLU it is the
// customary approximation, not an exact count. Under context parallelism
// s is this GPU's seq/cp tokens, and its scores seq/cp x seq.
//
// Grouped-query attention: of the attention block's 11*s*b*h (§4.1: input
// 2sbh, Q and K 4sbh, V 2sbh, the output projection's input 2sbh and its
// dropout mask sbh), K and V are each 2*s*b*h bytes only under multi-head
// attention; with kv_heads heads of head_dim they are 2*s*b*kv_heads*
// head_dim each, so 2 * 2*s*b*(h - kv_heads*head_dim) bytes fewer, /t on
// one GPU of t (or h/t - head_dim when each keeps one kv head,
// kernels.cc's KvHeadsPerGpu).
int64_t LinearActivationBytes(const Model& m, const Batch& batch) {
  const int tp = Tp(batch);
  const int64_t sbh =
      batch.seq_len / Cp(batch) * batch.micro_batch_size * m.hidden();
  const int kv_heads = m.kv_heads() > 0 ? m.kv_heads() : m.heads();
  const int64_t kv_width_per_gpu =
      int64_t{KvHeadsPerGpu(kv_heads, tp)} * (m.hidden() / m.heads());
  const int64_t kv_saving = 2 * kActivationBytes * (sbh / m.hidden()) *
                            (m.hidden() / tp - kv_width_per_gpu);
  const bool sp = batch.sequence_parallel && tp > 1;
  const int64_t outside = sp ? 0 : 10;  // the 10 of eq. 4
  const int64_t inside = sp ? 34 : 24;  // the 24/t of eq. 4, 34/t of eq. 5
  return outside * sbh + inside * sbh / tp - kv_saving;
}

// The attention scores' 5*a*s^2*b of eq. 2 on this GPU: a/t heads, seq/cp
// queries x seq keys.
int64_t ScoreActivationBytes(const Model& m, const Batch& batch) {
  if (batch.flash_attention) return 0;
  return 5 * (m.heads() / Tp(batch)) * (batch.seq_len / Cp(batch)) *
         batch.seq_len * batch.micro_batch_size;
}

// The input of a layer, kept as a recomputation checkpoint (split along
// the sequence in a sequence-parallel region).
int64_t InputBytes(const Model& m, const Batch& batch) {
  const int64_t split =
      batch.sequence_parallel && Tp(batch) > 1 ? Tp(batch) : 1;
  return kActivationBytes * (batch.seq_len / Cp(batch)) *
         batch.micro_batch_size * m.hidden() / split;
}

Layer Embedding(const Model& m, const Batch& batch) {
  Layer layer;
  layer.name = "embedding";
  layer.params = EmbeddingParams(m, Tp(batch));
  layer.units = EmbeddingUnits(m, batch);
  layer.output_bytes = InputBytes(m, batch);
  // A table lookup (and its gradient a scatter-add): no matmul FLOPs. Its
  // output is the first block's input, which that block already counts.
  return layer;
}

// What block `index` keeps from forward to backward.
enum class Keep {
  kAll,           // every activation
  kInput,         // its input; the forward runs again (full recomputation)
  kAllButScores,  // all but the core attention's, which runs again
};

Keep KeepOf(const Batch& batch, int index) {
  switch (batch.recompute_granularity) {
    case RECOMPUTE_FULL:
      return Keep::kInput;
    case RECOMPUTE_SELECTIVE:
      return Keep::kAllButScores;
    case RECOMPUTE_SELECTIVE_LAYER:
      // torchtitan's layer-wise selective checkpointing
      // (torchtitan/models/llama/parallelize_llama.py,
      // _apply_ac_to_transformer_block): a counter from 1 over the blocks
      // wraps the block whose count is a multiple of ac_freq, so blocks
      // K-1, 2K-1, ... (from 0) recompute in full, the others keep all.
      return batch.recompute_every_layers > 0 &&
                     (index + 1) % batch.recompute_every_layers == 0
                 ? Keep::kInput
                 : Keep::kAll;
    default:
      return batch.recompute ? Keep::kInput : Keep::kAll;
  }
}

// Megatron's selective recomputation (--recompute-granularity selective,
// megatron/core/transformer/attention.py: the core attention run under
// tensor_parallel.checkpoint): the score-sized activations are not kept
// and backward runs QK^T, softmax, dropout and AV again. FlashAttention
// keeps no scores, so there is nothing to recompute.
void RecomputeCoreAttention(const Model& m, const Batch& batch, Layer* layer) {
  layer->activation_bytes = LinearActivationBytes(m, batch);
  if (batch.flash_attention) return;
  layer->recompute_flops = AttentionCoreFlops(m, batch);
  layer->backward_working_bytes = ScoreActivationBytes(m, batch);
  layer->recompute_kernels = CoreAttentionKernels(m, batch);
}

Layer Block(const Model& m, const Batch& batch, int index) {
  Layer layer;
  layer.name = absl::StrCat("block ", index);
  layer.params = BlockParams(m, Tp(batch));
  layer.units = BlockUnits(m, batch);
  layer.output_bytes = InputBytes(m, batch);
  layer.forward_flops = 2.0 * Tokens(batch) * BlockMatmulParams(m, Tp(batch)) +
                        AttentionCoreFlops(m, batch);
  // Gradients w.r.t. both inputs and weights: two matmuls per forward one.
  layer.backward_flops = 2.0 * layer.forward_flops;
  const int64_t full =
      LinearActivationBytes(m, batch) + ScoreActivationBytes(m, batch);
  switch (KeepOf(batch, index)) {
    case Keep::kInput:
      // Only the block input is checkpointed; in backward the forward runs
      // again and its full activations live until this block's backward
      // ends.
      layer.recompute_flops = layer.forward_flops;
      layer.activation_bytes = InputBytes(m, batch);
      layer.backward_working_bytes = full;
      break;
    case Keep::kAllButScores:
      RecomputeCoreAttention(m, batch, &layer);
      break;
    case Keep::kAll:
      layer.activation_bytes = full;
      break;
  }
  return layer;
}

Layer Head(const Model& m, const Batch& batch) {
  const int64_t vocab = VocabRows(m, Tp(batch));
  Layer layer;
  layer.name = "head";
  layer.params = HeadParams(m, Tp(batch));
  layer.units = HeadUnits(m, batch);
  // The output projection runs whether or not its matrix is tied.
  layer.forward_flops = 2.0 * Tokens(batch) * m.hidden() * vocab;
  layer.backward_flops = 2.0 * layer.forward_flops;
  // Not recomputed: it keeps its input (for the projection's weight
  // gradient) and the fp32 logits the loss's softmax backward reads.
  layer.activation_bytes =
      InputBytes(m, batch) + kLogitBytes * (batch.seq_len / Cp(batch)) *
                                 batch.micro_batch_size * vocab;
  return layer;
}

}  // namespace

std::vector<std::string> BuiltinModelNames() {
  std::vector<std::string> names;
  for (const Model& m : Builtins()) names.push_back(m.name());
  return names;
}

absl::StatusOr<Model> BuiltinModel(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (Model& m : Builtins()) {
    if (m.name() == lower) return std::move(m);
  }
  const std::vector<std::string> names = BuiltinModelNames();
  return absl::NotFoundError(
      absl::StrCat("unknown model '", name, "'", DidYouMean(lower, names),
                   "; built-in models are: ", absl::StrJoin(names, ", "),
                   " (or give a model .textproto or hf:PATH/config.json)"));
}

absl::Status ValidateModel(const Model& model) {
  using namespace limits;  // NOLINT: the limits read as a table
  FieldCheck c("", "model.");
  c.Text("name", model.name())
      .Count("layers", model.layers(), 1, kMaxLayers)
      .Count("hidden", model.hidden(), 1, kMaxHidden)
      .Count("heads", model.heads(), 1, kMaxHeads)
      .Count("kv_heads", model.kv_heads(), 0, model.heads())
      .Count("ffn_hidden", model.ffn_hidden(), 1, kMaxFfnHidden)
      .Count("vocab", model.vocab(), 1, kMaxVocab)
      .Count("learned_positions", model.learned_positions(), 0, kMaxSeqLen)
      .Count("sliding_window", model.sliding_window(), 0, kMaxSeqLen)
      .Real("attention_dropout", model.attention_dropout(), 0, 1)
      .Rule("attention_dropout", model.attention_dropout() < 1,
            "is a probability below 1")
      .Real("hidden_dropout", model.hidden_dropout(), 0, 1)
      .Rule("hidden_dropout", model.hidden_dropout() < 1,
            "is a probability below 1")
      .Rule("mlp", model.mlp() != Model::MLP_UNSPECIFIED,
            "must be specified (SWIGLU or GELU)")
      .Rule("norm", model.norm() != Model::NORM_UNSPECIFIED,
            "must be specified (RMSNORM or LAYERNORM)");
  if (!c.ok()) return c.status();
  c.Rule("heads", model.hidden() % model.heads() == 0,
         absl::StrCat("must divide model.hidden (", model.hidden(), "), got ",
                      model.heads()))
      .Rule("kv_heads",
            model.kv_heads() == 0 || model.heads() % model.kv_heads() == 0,
            absl::StrCat("must be 0 (= heads) or divide model.heads (",
                         model.heads(), "), got ", model.kv_heads()));
  return c.status();
}

absl::Status ValidateTensorParallel(const Model& model, int tp) {
  const int kv_heads = model.kv_heads() > 0 ? model.kv_heads() : model.heads();
  const std::string of = absl::StrCat(" by parallelism.tp (", tp, ")");
  FieldCheck c("", "model.");
  c.Rule("heads", model.heads() % tp == 0,
         absl::StrCat("must be divisible", of))
      .Rule("kv_heads", kv_heads % tp == 0 || tp % kv_heads == 0,
            absl::StrCat("must be a multiple or a divisor of ", tp))
      .Rule("kv_heads", KvWidth(model) % tp == 0,
            absl::StrCat("x head_dim must be divisible", of))
      .Rule("ffn_hidden", model.ffn_hidden() % tp == 0,
            absl::StrCat("must be divisible", of));
  return c.status();
}

std::vector<Layer> ModelLayers(const Model& model, const Batch& batch) {
  std::vector<Layer> layers;
  layers.reserve(model.layers() + 2);
  layers.push_back(Embedding(model, batch));
  for (int i = 0; i < model.layers(); ++i) {
    layers.push_back(Block(model, batch, i));
  }
  layers.push_back(Head(model, batch));
  return layers;
}

int64_t TotalParams(const Model& model) {
  return EmbeddingParams(model, 1) + model.layers() * BlockParams(model, 1) +
         HeadParams(model, 1);
}

double ModelFlopsPerMicroBatch(const Model& model, const Batch& batch) {
  double flops = 0;
  for (const Layer& layer : ModelLayers(model, batch)) {
    flops += layer.forward_flops + layer.backward_flops;
  }
  return flops;
}

}  // namespace shardsim

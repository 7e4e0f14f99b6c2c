#include "sim/model/model.h"

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

// Weights of the block's matrix multiplies: each costs 2 FLOPs per token.
int64_t BlockMatmulParams(const Model& m) {
  const int64_t h = m.hidden();
  const int64_t attention = 2 * h * h + 2 * h * KvWidth(m);  // q,o + k,v
  return attention + MlpMatrices(m) * h * m.ffn_hidden();
}

int64_t BlockBiasParams(const Model& m) {
  const int64_t h = m.hidden();
  if (!m.linear_bias()) {
    return m.qkv_bias() ? h + 2 * KvWidth(m) : 0;  // q + k,v
  }
  const int64_t attention = 2 * h + 2 * KvWidth(m);  // q,o + k,v
  // The down projection's bias is h wide; the others are ffn wide.
  const int64_t mlp = (MlpMatrices(m) - 1) * m.ffn_hidden() + h;
  return attention + mlp;
}

int64_t BlockParams(const Model& m) {
  // Two norms per block: before attention and before the MLP.
  return BlockMatmulParams(m) + BlockBiasParams(m) + 2 * NormParams(m);
}

int64_t EmbeddingParams(const Model& m) {
  return (m.vocab() + m.learned_positions()) * m.hidden();
}

// The final norm, plus the output projection unless it reuses the
// embedding's matrix (tied), in which case that matrix is counted once, in
// the embedding.
int64_t HeadParams(const Model& m) {
  const int64_t projection = m.tied_embeddings() ? 0 : m.vocab() * m.hidden();
  return NormParams(m) + projection;
}

// Korthikanti et al. 2022, eq. 1 without tensor or sequence parallelism:
// s*b*h*34 bytes for the block's bf16 inputs, projections, MLP
// intermediates and dropout masks, plus 5*a*s^2*b (= s*b*h * 5*a*s/h) for
// the attention scores, softmax output and its dropout mask. With
// FlashAttention the score-sized matrices are never materialised (the
// kernel recomputes them in backward from the kept Q, K, V), so only the
// 34 term stays. The formula was derived for GPT's 4h GELU MLP with
// multi-head attention; for SwiGLU it is the customary approximation, not
// an exact count.
//
// Grouped-query attention: of the attention block's 11*s*b*h (§4.1: input
// 2sbh, Q and K 4sbh, V 2sbh, the output projection's input 2sbh and its
// dropout mask sbh), K and V are each 2*s*b*h bytes only under multi-head
// attention; with kv_heads heads of head_dim they are 2*s*b*kv_heads*
// head_dim each, so 2 * 2*s*b*(h - kv_heads*head_dim) bytes fewer.
int64_t FullBlockActivationBytes(const Model& m, const Batch& batch) {
  const int64_t s = batch.seq_len;
  const int64_t b = batch.micro_batch_size;
  const int64_t kv_saving =
      2 * kActivationBytes * s * b * (m.hidden() - KvWidth(m));
  const int64_t linear_terms = 34 * s * b * m.hidden() - kv_saving;
  if (batch.flash_attention) return linear_terms;
  return linear_terms + 5 * m.heads() * s * s * b;
}

// The input of a layer, kept as a recomputation checkpoint.
int64_t InputBytes(const Model& m, const Batch& batch) {
  return kActivationBytes * batch.seq_len * batch.micro_batch_size * m.hidden();
}

Layer Embedding(const Model& m, const Batch& batch) {
  Layer layer;
  layer.name = "embedding";
  layer.params = EmbeddingParams(m);
  layer.units = EmbeddingUnits(m, batch);
  layer.output_bytes = InputBytes(m, batch);
  // A table lookup (and its gradient a scatter-add): no matmul FLOPs. Its
  // output is the first block's input, which that block already counts.
  return layer;
}

Layer Block(const Model& m, const Batch& batch, int index) {
  const double tokens =
      static_cast<double>(batch.micro_batch_size) * batch.seq_len;
  const double s = static_cast<double>(batch.seq_len);
  const double b = static_cast<double>(batch.micro_batch_size);
  Layer layer;
  layer.name = absl::StrCat("block ", index);
  layer.params = BlockParams(m);
  layer.units = BlockUnits(m, batch);
  layer.output_bytes = InputBytes(m, batch);
  // QK^T and AV are each 2*b*s^2*h; causality is not discounted.
  const double attention = 2.0 * 2.0 * b * s * s * m.hidden();
  layer.forward_flops = 2.0 * tokens * BlockMatmulParams(m) + attention;
  // Gradients w.r.t. both inputs and weights: two matmuls per forward one.
  layer.backward_flops = 2.0 * layer.forward_flops;
  const int64_t full = FullBlockActivationBytes(m, batch);
  if (batch.recompute) {
    // Only the block input is checkpointed; in backward the forward runs
    // again and its full activations live until this block's backward ends.
    layer.recompute_flops = layer.forward_flops;
    layer.activation_bytes = InputBytes(m, batch);
    layer.backward_working_bytes = full;
  } else {
    layer.activation_bytes = full;
  }
  return layer;
}

Layer Head(const Model& m, const Batch& batch) {
  const double tokens =
      static_cast<double>(batch.micro_batch_size) * batch.seq_len;
  Layer layer;
  layer.name = "head";
  layer.params = HeadParams(m);
  layer.units = HeadUnits(m, batch);
  // The output projection runs whether or not its matrix is tied.
  layer.forward_flops = 2.0 * tokens * m.hidden() * m.vocab();
  layer.backward_flops = 2.0 * layer.forward_flops;
  // Not recomputed: it keeps its input (for the projection's weight
  // gradient) and the fp32 logits the loss's softmax backward reads.
  layer.activation_bytes = InputBytes(m, batch) + kLogitBytes * batch.seq_len *
                                                      batch.micro_batch_size *
                                                      m.vocab();
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
  return EmbeddingParams(model) + model.layers() * BlockParams(model) +
         HeadParams(model);
}

double ModelFlopsPerMicroBatch(const Model& model, const Batch& batch) {
  double flops = 0;
  for (const Layer& layer : ModelLayers(model, batch)) {
    flops += layer.forward_flops + layer.backward_flops;
  }
  return flops;
}

}  // namespace shardsim

#include "sim/model/kernels.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/model/model.h"

namespace shardsim {
namespace {

constexpr int64_t kFp8 = 1;
constexpr int64_t kBf16 = 2;
constexpr int64_t kFp32 = 4;

Kernel GemmKernel(const std::string& name, int64_t m, int64_t n, int64_t k,
                  Gemm::Layout layout, int64_t batch = 1) {
  Kernel kernel;
  kernel.set_name(name);
  Gemm* g = kernel.mutable_gemm();
  g->set_m(m);
  g->set_n(n);
  g->set_k(k);
  g->set_batch(batch);
  g->set_layout(layout);
  return kernel;
}

// A memory-bound kernel streaming its tensors: `vector` and `general` are
// bytes per element of a tensor of `elements`.
Kernel Streaming(const std::string& name, int64_t elements, int64_t vector,
                 int64_t general, int launches) {
  Kernel kernel;
  kernel.set_name(name);
  MemoryKernel* m = kernel.mutable_memory();
  m->set_vector_bytes(vector * elements);
  m->set_general_bytes(general * elements);
  m->set_launches(launches);
  return kernel;
}

// The shapes every kernel of a layer is cut from, as one GPU sees them:
// under tensor parallelism (tp) its share of the heads, MLP columns and
// vocabulary; under context parallelism (cp) its share of the sequence.
struct Shape {
  int64_t tokens;  // T = sequences x this GPU's queries per sequence
  // Tokens of the norms, residual adds and the residual stream's gradient
  // sums: T / tp in Megatron's sequence-parallel regions, else T.
  int64_t norm_tokens;
  int64_t b;
  int64_t s;       // queries per sequence: seq / cp
  int64_t kv_seq;  // keys each query attends: the whole sequence
  int64_t h;
  int64_t q_width;     // this GPU's query heads x head_dim
  int64_t kv_width;    // this GPU's k (or v) heads x head_dim in attention
  int64_t kv_proj;     // this GPU's columns of the k (or v) projection
  int64_t ffn, vocab;  // this GPU's MLP columns and vocabulary rows
  int heads, kv_heads, head_dim;  // heads on this GPU
  int tp;
  int cp;
  bool sp;          // Megatron's sequence parallelism
  bool gather_qkv;  // fewer kv heads than tp (KvHeadsPerGpu)
  bool eager, fused_qkv, flash, rmsnorm, swiglu, rotary;
  bool fp8;         // linear layers as torchao's Float8Linear (Float8 message)
  bool fp8_gather;  // their weights arrive in float8 (fsdp_all_gather)
  bool bias;        // on every linear layer
  bool qkv_bias;    // on the q, k and v projections (bias implies it)
  bool attention_dropout, hidden_dropout;  // > 0 (Model's)
};

Shape ShapeOf(const Model& m, const Batch& batch) {
  Shape sh;
  sh.tp = std::max(1, batch.tp);
  sh.sp = batch.sequence_parallel && sh.tp > 1;
  const int cp = std::max(1, batch.cp);
  sh.cp = cp;
  sh.b = batch.micro_batch_size;
  sh.kv_seq = batch.seq_len;
  // Megatron's context parallelism gives each rank seq/cp of every
  // sequence's tokens; its attention reads all the keys, which the ring
  // brings (ContextRing below).
  sh.s = batch.seq_len / cp;
  sh.tokens = sh.b * sh.s;
  sh.norm_tokens = sh.sp ? sh.tokens / sh.tp : sh.tokens;
  sh.h = m.hidden();
  sh.attention_dropout = m.attention_dropout() > 0;
  sh.hidden_dropout = m.hidden_dropout() > 0;
  const int kv_heads = m.kv_heads() > 0 ? m.kv_heads() : m.heads();
  sh.heads = m.heads() / sh.tp;
  sh.kv_heads = KvHeadsPerGpu(kv_heads, sh.tp);
  sh.gather_qkv = kv_heads < sh.tp;
  sh.head_dim = static_cast<int>(m.hidden() / m.heads());
  sh.q_width = int64_t{sh.heads} * sh.head_dim;
  sh.kv_width = int64_t{sh.kv_heads} * sh.head_dim;
  // Column-parallel: every projection's output columns split evenly
  // (ColumnParallelLinear, megatron/core/tensor_parallel/layers.py:
  // output_size_per_partition = divide(output_size, world_size)).
  sh.kv_proj = int64_t{kv_heads} * sh.head_dim / sh.tp;
  sh.ffn = m.ffn_hidden() / sh.tp;
  // VocabParallelEmbedding's rows; Megatron pads the vocabulary to a
  // multiple of tp (megatron/training/vocab_utils.py).
  sh.vocab = (m.vocab() + sh.tp - 1) / sh.tp;
  sh.eager = batch.kernels.style() != KernelOptions::FUSED;
  sh.fused_qkv = batch.kernels.fused_qkv();
  sh.fp8 = batch.kernels.float8().enabled();
  sh.fp8_gather = sh.fp8 && batch.kernels.float8().fsdp_all_gather();
  sh.flash = batch.flash_attention;
  sh.rmsnorm = m.norm() == Model::RMSNORM;
  sh.swiglu = m.mlp() == Model::SWIGLU;
  sh.rotary = m.learned_positions() == 0;
  sh.bias = m.linear_bias();
  sh.qkv_bias = m.linear_bias() || m.qkv_bias();
  return sh;
}

// ---- linear layers: y = x W^T, W is out x in ----

void LinearForward(const std::string& name, const Shape& sh, int64_t out,
                   int64_t in, std::vector<Kernel>* k) {
  k->push_back(GemmKernel(name, sh.tokens, out, in, Gemm::FORWARD));
}

void LinearBackward(const std::string& name, const Shape& sh, int64_t out,
                    int64_t in, std::vector<Kernel>* k) {
  k->push_back(GemmKernel(name + " dgrad", sh.tokens, in, out, Gemm::DGRAD));
  k->push_back(GemmKernel(name + " wgrad", out, in, sh.tokens, Gemm::WGRAD));
}

// ---- FP8 linear layers (torchao's Float8Linear, tensorwise dynamic) ----
//
// torchao/float8/float8_linear.py (matmul_with_hp_or_float8_args) casts
// every GEMM operand from bf16 to FP8 with a scale from the tensor's
// absolute maximum: the input and the weight for the forward GEMM, the
// output gradient and the weight for dgrad, the output gradient and the
// input in the transposed layout for wgrad. Compiled, as torchtitan runs it
// (torch.compile fuses the scaling and casting), the casts are the kernels
// of torchao's own roofline (torchao/testing/training/roofline_utils.py,
// get_tensor_memory_traffic_ovhd_s, tensorwise, at 36027d8): per tensor an
// amax in two stages (the first reads it, the second a few partials), then
//  - input, output gradient: one cast writing both layouts (reads 2 bytes
//    an element, writes 1 + 1);
//  - weight: one cast for forward, another for backward (2 + 1 each).
// The GEMMs run on FP8 operands, their outputs in bf16. With FSDP2's
// float8 all-gather the weight arrives cast (fsdp_utils.py): forward uses
// it as it is (weight.t() is the column-major operand _scaled_mm wants);
// dgrad's row-major weight is copied to column-major (float8_ops.py
// preprocess_addmm: 1 + 1 bytes).

void Fp8Amax(const std::string& tensor, int64_t elements,
             std::vector<Kernel>* k) {
  k->push_back(Streaming(tensor + " amax", elements, kBf16, 0, 2));
}

Kernel Fp8Gemm(Kernel gemm) {
  gemm.mutable_gemm()->set_fp8(true);
  return gemm;
}

void Fp8LinearForward(const std::string& name, const Shape& sh, int64_t out,
                      int64_t in, std::vector<Kernel>* k) {
  Fp8Amax(name + " input", sh.tokens * in, k);
  k->push_back(Streaming(name + " input to fp8", sh.tokens * in,
                         kBf16 + 2 * kFp8, 0, 1));
  if (!sh.fp8_gather) {
    Fp8Amax(name + " weight", out * in, k);
    k->push_back(
        Streaming(name + " weight to fp8", out * in, kBf16 + kFp8, 0, 1));
  }
  k->push_back(Fp8Gemm(GemmKernel(name, sh.tokens, out, in, Gemm::FORWARD)));
}

void Fp8LinearBackward(const std::string& name, const Shape& sh, int64_t out,
                       int64_t in, std::vector<Kernel>* k) {
  Fp8Amax(name + " output grad", sh.tokens * out, k);
  k->push_back(Streaming(name + " output grad to fp8", sh.tokens * out,
                         kBf16 + 2 * kFp8, 0, 1));
  k->push_back(sh.fp8_gather ? Streaming(name + " fp8 weight to column-major",
                                         out * in, 2 * kFp8, 0, 1)
                             : Streaming(name + " weight to fp8 t", out * in,
                                         kBf16 + kFp8, 0, 1));
  k->push_back(
      Fp8Gemm(GemmKernel(name + " dgrad", sh.tokens, in, out, Gemm::DGRAD)));
  k->push_back(
      Fp8Gemm(GemmKernel(name + " wgrad", out, in, sh.tokens, Gemm::WGRAD)));
}

// ---- normalisation over `x` = T x h elements ----

Kernel NormForward(const Shape& sh) {
  const int64_t x = sh.norm_tokens * sh.h;
  if (!sh.rmsnorm) {
    // PyTorch's layer_norm is one fused kernel in eager mode too: read x,
    // write y (the per-row statistics are T-sized).
    return Streaming("layernorm", x, 2 * kBf16, 0, 1);
  }
  if (!sh.eager) return Streaming("rmsnorm", x, 2 * kBf16, 0, 1);
  // x.to(fp32) 6 general; pow(2) 8 vector; mean 4 general (a row
  // reduction); + eps and rsqrt on T values; x * rsqrt 8 general
  // (broadcast); .to(bf16) 6 vector; weight * x 4 general (broadcast).
  return Streaming("rmsnorm", x, 8 + 6, 6 + 4 + 8 + 4, 8);
}

Kernel NormBackward(const Shape& sh) {
  const int64_t x = sh.norm_tokens * sh.h;
  if (!sh.rmsnorm || !sh.eager) {
    // One pass reading dy and x, writing dx; a second reduces the
    // weight (and bias) gradient's per-block partial sums.
    return Streaming(sh.rmsnorm ? "rmsnorm backward" : "layernorm backward", x,
                     3 * kBf16, 0, 2);
  }
  // Autograd of the eager chain, last op first:
  //   weight * x: dy * w 4 general; dw = sum_T(dy * x) 6 vector + 2 general;
  //   .to(bf16): the gradient cast to fp32 6 general;
  //   x * r: dy * r 8 general (broadcast); dr = sum_h(dy * x) 12 vector +
  //     4 general; mean: the expanded gradient 4 general;
  //   pow: dy * (2x) 8 + 12 vector; the two gradients of x added 12 vector;
  //   .to(fp32): the gradient cast to bf16 6 vector.
  // 14 launches (rsqrt's and add's gradients are T-sized).
  return Streaming("rmsnorm backward", x, 6 + 12 + 8 + 12 + 12 + 6,
                   4 + 2 + 6 + 8 + 4 + 4, 14);
}

// ---- rotary on q (or k): `x` = T x width elements ----

Kernel RotaryForward(const std::string& name, int64_t x, const Shape& sh) {
  if (!sh.eager) return Streaming(name, x, 2 * kBf16, 0, 1);
  // q * cos 4; -q[..., d/2:] 2 (half the tensor read and written);
  // cat((-x2, x1)) 4; rotate_half(q) * sin 4; the sum 6. All on the general
  // path: q and k are strided views of the projection's output, cos and
  // sin broadcast.
  return Streaming(name, x, 0, 4 + 2 + 4 + 4 + 6, 5);
}

Kernel RotaryBackward(const std::string& name, int64_t x, const Shape& sh) {
  if (!sh.eager) return Streaming(name, x, 2 * kBf16, 0, 1);
  // dy * cos and dy * sin 4 + 4 general; neg's gradient 2 general; each
  // slice's gradient is zeros (2 vector each) with the slice copied in (2
  // general each); cat's two halves summed 6 general; the two paths of q
  // summed 6 vector. 9 launches.
  return Streaming(name, x, 2 + 2 + 6, 4 + 4 + 2 + 2 + 2 + 6, 9);
}

// ---- attention ----

// FlashAttention of the GPU's queries against `kv_seq` keys.
Kernel FlashAttention(const Shape& sh, bool backward, int64_t kv_seq,
                      const std::string& name) {
  Kernel kernel;
  kernel.set_name(name);
  Attention* a = kernel.mutable_attention();
  a->set_batch(sh.b);
  a->set_heads(sh.heads);
  a->set_kv_heads(sh.kv_heads);
  a->set_seq(sh.s);
  if (kv_seq != sh.s) a->set_kv_seq(kv_seq);
  a->set_head_dim(sh.head_dim);
  a->set_causal(true);
  a->set_backward(backward);
  return kernel;
}

// The attention over every key. Under context parallelism it runs in two
// parts: over the GPU's own keys first, then over the keys the ring
// brings (Transformer Engine runs one kernel per ring step; the steps'
// work is summed here). Megatron's load-balanced causal split gives each
// rank chunks i and 2cp-1-i of every sequence, so each part does the
// causal half of its queries x keys: s x s over its own chunks, s x
// (cp-1)s over the others', 1/cp and (cp-1)/cp of the whole.
void FlashAttentions(const Shape& sh, bool backward, std::vector<Kernel>* k) {
  const std::string name = backward ? "attention backward" : "attention";
  if (sh.cp == 1) {
    k->push_back(FlashAttention(sh, backward, sh.kv_seq, name));
    return;
  }
  k->push_back(FlashAttention(sh, backward, sh.s, name));
  k->push_back(
      FlashAttention(sh, backward, sh.kv_seq - sh.s, name + " (ring)"));
}

// HF's eager attention, scores materialised: S = b x heads x s x kv_seq
// (s queries against kv_seq keys; the same length without context
// parallelism).
void MaterialisedForward(const Shape& sh, std::vector<Kernel>* k) {
  const int64_t bh = sh.b * sh.heads;
  const int64_t scores = bh * sh.s * sh.kv_seq;
  if (sh.kv_heads != sh.heads) {
    // repeat_kv: k and v expanded to every head and made contiguous, each
    // reading its kv_width and writing the query heads' width per key.
    k->push_back(Streaming("repeat_kv", 2 * sh.b * sh.kv_seq, 0,
                           kBf16 * (sh.kv_width + sh.q_width), 2));
  }
  k->push_back(
      GemmKernel("scores", sh.s, sh.kv_seq, sh.head_dim, Gemm::BATCHED, bh));
  if (sh.eager) {
    // * scaling 4 vector; + causal mask 4 general (broadcast over heads);
    // softmax in fp32: read bf16, write fp32, 6 general; .to(bf16) 6
    // vector.
    k->push_back(Streaming("softmax", scores, 4 + 6, 4 + 6, 4));
  } else {
    // Megatron-LM's fused scale, causal mask and softmax, one kernel that
    // reads the 16-bit scores and writes the 16-bit probabilities, fp32
    // inside (megatron/core/fusions/fused_softmax.py, FusedScaleMaskSoftmax
    // with scaled_upper_triang_masked_softmax; Transformer Engine's
    // unfused attention calls its own fused one alike).
    k->push_back(Streaming("scale mask softmax", scores, 2 + 2, 0, 1));
  }
  if (sh.attention_dropout) {
    // torch's native_dropout: reads the probabilities, writes them dropped
    // and the bool mask backward reads.
    k->push_back(Streaming("attention dropout", scores, 2 + 2 + 1, 0, 1));
  }
  k->push_back(
      GemmKernel("context", sh.s, sh.head_dim, sh.kv_seq, Gemm::BATCHED, bh));
}

// The context back to (b, s, heads x head_dim): transpose(1, 2).contiguous().
Kernel ContextLayout(const Shape& sh) {
  return Streaming("context layout", sh.tokens * sh.q_width, 0, 2 * kBf16, 1);
}

// Queries s, keys kv_seq: dP = dO V^T (s x kv_seq), dV = P^T dO
// (kv_seq x head_dim), dQ = dS K (s x head_dim), dK = dS^T Q (kv_seq x
// head_dim).
void MaterialisedBackward(const Shape& sh, std::vector<Kernel>* k) {
  const int64_t bh = sh.b * sh.heads;
  const int64_t scores = bh * sh.s * sh.kv_seq;
  k->push_back(Streaming("context layout backward", sh.tokens * sh.q_width, 0,
                         2 * kBf16, 1));
  k->push_back(GemmKernel("context dgrad", sh.s, sh.kv_seq, sh.head_dim,
                          Gemm::BATCHED, bh));
  k->push_back(GemmKernel("context wgrad", sh.kv_seq, sh.head_dim, sh.s,
                          Gemm::BATCHED, bh));
  if (sh.attention_dropout) {
    // native_dropout_backward: the gradient times the mask, scaled.
    k->push_back(
        Streaming("attention dropout backward", scores, 2 + 1 + 2, 0, 1));
  }
  if (sh.eager) {
    // The bf16 gradient cast to fp32 6 general; softmax backward reads the
    // fp32 output and gradient, writes bf16: 10 general; * scaling 4
    // vector.
    k->push_back(Streaming("softmax backward", scores, 4, 6 + 10, 3));
  } else {
    // The fused backward reads the probabilities and their gradient and
    // writes the scores' gradient, scaled, all 16-bit, in one kernel.
    k->push_back(Streaming("scale mask softmax backward", scores, 3 * 2, 0, 1));
  }
  k->push_back(GemmKernel("scores dgrad", sh.s, sh.head_dim, sh.kv_seq,
                          Gemm::BATCHED, bh));
  k->push_back(GemmKernel("scores wgrad", sh.kv_seq, sh.head_dim, sh.s,
                          Gemm::BATCHED, bh));
  if (sh.kv_heads != sh.heads) {
    // expand's backward sums each group of heads: reads the query heads'
    // width, writes kv_width per key, for k and for v.
    k->push_back(Streaming("repeat_kv backward", 2 * sh.b * sh.kv_seq, 0,
                           kBf16 * (sh.q_width + sh.kv_width), 2));
  }
}

// ---- the units of one block ----

Unit MakeUnit(std::string name, int64_t params) {
  Unit u;
  u.name = std::move(name);
  u.params = params;
  return u;
}

// A norm's unit: a weight of h, and for LayerNorm a bias of h.
Unit NormParamsUnit(std::string name, const Shape& sh) {
  const int tensors = sh.rmsnorm ? 1 : 2;
  Unit u = MakeUnit(std::move(name), tensors * sh.h);
  u.vectors.assign(tensors, sh.h);
  return u;
}

// A linear layer's unit: its GEMM forward, its two gradients backward;
// `bias` adds an out-wide bias vector.
Unit LinearUnit(const std::string& name, const Shape& sh, int64_t out,
                int64_t in, bool bias) {
  Unit u = MakeUnit(name, out * in + (bias ? out : 0));
  if (bias) u.vectors = {out};
  if (sh.fp8) {
    if (sh.fp8_gather) u.fp8_params = out * in;
    Fp8LinearForward(name, sh, out, in, &u.forward);
    Fp8LinearBackward(name, sh, out, in, &u.backward);
  } else {
    LinearForward(name, sh, out, in, &u.forward);
    LinearBackward(name, sh, out, in, &u.backward);
  }
  return u;
}

// x (`tokens` x h) feeds two consumers (a residual and a norm, or several
// projections): autograd adds their gradients.
Kernel GradientSum(const std::string& name, int64_t tokens, const Shape& sh) {
  return Streaming(name, tokens * sh.h, 3 * kBf16, 0, 1);
}

// With hidden dropout the branch is dropped before the add, in the same
// kernel (Megatron-LM's fused bias-dropout-add), which writes the mask too.
Kernel Residual(const Shape& sh) {
  return Streaming(sh.hidden_dropout ? "dropout residual add" : "residual add",
                   sh.norm_tokens * sh.h,
                   3 * kBf16 + (sh.hidden_dropout ? 1 : 0), 0, 1);
}

// Hidden dropout's backward over `tokens` x h: the gradient times the
// mask, scaled (none without dropout).
void HiddenDropoutBackward(const Shape& sh, int64_t tokens,
                           std::vector<Kernel>* k) {
  if (!sh.hidden_dropout) return;
  k->push_back(
      Streaming("hidden dropout backward", tokens * sh.h, 2 + 1 + 2, 0, 1));
}

Unit NormUnit(const std::string& name, const Shape& sh) {
  Unit u = NormParamsUnit(name, sh);
  u.forward.push_back(NormForward(sh));
  u.backward.push_back(NormBackward(sh));
  // The norm's input is also the residual's: their gradients meet here.
  u.backward.push_back(
      GradientSum("residual gradient sum", sh.norm_tokens, sh));
  return u;
}

// Attention after its projections: rotary on q and k, then the attention
// itself. Appended to the last projection's unit (forward) and run before
// its gradients (backward).
void AttentionForward(const Shape& sh, std::vector<Kernel>* k) {
  if (sh.rotary) {
    k->push_back(RotaryForward("rotary q", sh.tokens * sh.q_width, sh));
    k->push_back(RotaryForward("rotary k", sh.tokens * sh.kv_width, sh));
  }
  if (sh.flash) {
    FlashAttentions(sh, false, k);
  } else {
    MaterialisedForward(sh, k);
    k->push_back(ContextLayout(sh));
  }
}

void AttentionBackward(const Shape& sh, std::vector<Kernel>* k) {
  if (sh.flash) {
    FlashAttentions(sh, true, k);
  } else {
    MaterialisedBackward(sh, k);
  }
  if (sh.rotary) {
    k->push_back(
        RotaryBackward("rotary k backward", sh.tokens * sh.kv_width, sh));
    k->push_back(
        RotaryBackward("rotary q backward", sh.tokens * sh.q_width, sh));
  }
}

// ---- tensor parallelism: the collectives its modules issue ----

UnitCollective TpCollective(CollectiveOp kind, bool backward, int at,
                            int64_t bytes, std::string tensor,
                            DType dtype = BF16) {
  UnitCollective c;
  c.kind = kind;
  c.backward = backward;
  c.at = at;
  c.bytes = bytes;
  c.dtype = dtype;
  c.tensor = std::move(tensor);
  return c;
}

int Size(const std::vector<Kernel>& kernels) {
  return static_cast<int>(kernels.size());
}

// Where kernel `name` is in `kernels` (each linear's kernels are named
// after it, so it is there).
int IndexOf(const std::vector<Kernel>& kernels, const std::string& name) {
  for (int i = 0; i < Size(kernels); ++i) {
    if (kernels[i].name() == name) return i;
  }
  return Size(kernels);
}

// The residual stream's hidden states, T x h bf16: what each collective
// of a block carries whole (an all-reduce's buffer, an all-gather's
// gathered output, a reduce-scatter's input, as CollectiveCall.bytes
// counts them).
int64_t HiddenBytes(const Shape& sh) { return kBf16 * sh.tokens * sh.h; }

// Column-parallel linears reading the hidden states (Megatron's linear_qkv,
// linear_fc1, output_layer; HF's separate q/k/v or gate/up projections act
// as one): `first` in forward order completes the input gradient in
// backward, `last` starts backward. megatron/core/tensor_parallel/
// layers.py, LinearWithGradAccumulationAndAsyncCommunication:
//  - without sequence parallelism the input enters through
//    copy_to_tensor_model_parallel_region (mappings.py), whose backward
//    all-reduces the input gradient;
//  - with it, forward all-gathers the sequence-split input, and backward
//    gathers it again for the weight gradient (before the input gradient's
//    GEMM), then reduce-scatters the input gradient.
void ColumnParallel(const Shape& sh, Unit* first, Unit* last) {
  if (sh.tp == 1) return;
  const std::string tensor = first->name + " input";
  // Once the input gradient is complete: after the dgrad of a single
  // linear, after the gradient sum of split ones.
  const int grad_done =
      first == last ? IndexOf(first->backward, first->name + " dgrad") + 1
                    : Size(first->backward);
  if (!sh.sp) {
    first->comms.push_back(TpCollective(ALL_REDUCE, true, grad_done,
                                        HiddenBytes(sh), tensor + " grad"));
    return;
  }
  first->comms.push_back(
      TpCollective(ALL_GATHER, false, 0, HiddenBytes(sh), tensor));
  last->comms.push_back(TpCollective(
      ALL_GATHER, true, IndexOf(last->backward, last->name + " dgrad"),
      HiddenBytes(sh), tensor));
  first->comms.push_back(TpCollective(REDUCE_SCATTER, true, grad_done,
                                      HiddenBytes(sh), tensor + " grad"));
}

// A row-parallel linear writing the hidden states (linear_proj, linear_fc2):
// its partial sums all-reduced (reduce_from_tensor_model_parallel_region,
// backward the identity), or reduce-scattered along the sequence under
// sequence parallelism (reduce_scatter_to_sequence_parallel_region,
// backward an all-gather of the output gradient); after its GEMM, before
// the residual add.
void RowParallel(const Shape& sh, Unit* u) {
  if (sh.tp == 1) return;
  const std::string tensor = u->name + " output";
  if (!sh.sp) {
    u->comms.push_back(
        TpCollective(ALL_REDUCE, false, 1, HiddenBytes(sh), tensor));
    return;
  }
  u->comms.push_back(
      TpCollective(REDUCE_SCATTER, false, 1, HiddenBytes(sh), tensor));
  u->comms.push_back(
      TpCollective(ALL_GATHER, true, 0, HiddenBytes(sh), tensor + " grad"));
}

// Fewer kv heads than tp: each rank's slice of the qkv projection is
// gathered whole before its kv head and query heads are picked out
// (attention.py, get_query_key_value_tensors:
// all_gather_last_dim_from_tensor_parallel_region, whose backward
// reduce-scatters the gradient). `last` is the projection that ends the
// forward GEMMs (v, or the fused qkv); `gemm_end` the index after them.
void GatherQkv(const Shape& sh, int64_t columns, int gemm_end, Unit* last) {
  if (!sh.gather_qkv) return;
  const int64_t bytes = kBf16 * sh.tokens * columns * sh.tp;
  last->comms.push_back(
      TpCollective(ALL_GATHER, false, gemm_end, bytes, "qkv"));
  last->comms.push_back(TpCollective(
      REDUCE_SCATTER, true, IndexOf(last->backward, last->name + " dgrad"),
      bytes, "qkv grad"));
}

// Context parallelism's ring (Transformer Engine's AttnFuncWithCPAndKVP2P,
// Megatron's default cp_comm_type "p2p"): each of cp-1 steps passes the
// keys and values a rank holds to the next rank while the attention runs
// over those it has, the traffic of a ring all-gather of K and V; in
// backward K and V go round again and their gradients come back to their
// owner, summed on the way: a ring reduce-scatter. The all-gathers start
// with the attention over the GPU's own keys, the attention over the rest
// waits for them. The reduce-scatter blocks: Transformer Engine overlaps
// all but its last step with the attention's backward, which this leaves
// exposed (docs/parallelism.md). `u` holds the attention's kernels.
void ContextRing(const Shape& sh, Unit* u) {
  if (sh.cp == 1 || !sh.flash) return;  // validate.cc: cp needs flash
  const int64_t bytes = kBf16 * 2 * sh.b * sh.kv_seq * sh.kv_width;
  auto ring = [&](CollectiveOp kind, bool backward, int at, int wait,
                  const char* tensor) {
    UnitCollective c;
    c.dim = Dim::kCp;
    c.kind = kind;
    c.backward = backward;
    c.at = at;
    c.wait = wait;
    c.bytes = bytes;
    c.tensor = tensor;
    u->comms.push_back(c);
  };
  const int f = IndexOf(u->forward, "attention");
  ring(ALL_GATHER, false, f, f + 1, "kv");
  const int b = IndexOf(u->backward, "attention backward");
  ring(ALL_GATHER, true, b, b + 1, "kv");
  ring(REDUCE_SCATTER, true, b + 2, -1, "kv grad");
}

std::vector<Unit> AttentionUnits(const Shape& sh) {
  std::vector<Unit> units;
  const int64_t out = sh.q_width + 2 * sh.kv_proj;
  if (sh.fused_qkv) {
    Unit qkv = LinearUnit("qkv_proj", sh, out, sh.h, sh.qkv_bias);
    AttentionForward(sh, &qkv.forward);
    std::vector<Kernel> back;
    AttentionBackward(sh, &back);
    // q, k and v's gradients stacked back into the projection's output
    // (unbind's backward): a concatenation, read and written once.
    back.push_back(
        Streaming("qkv gradient stack", sh.tokens * out, 0, 2 * kBf16, 1));
    back.insert(back.end(), qkv.backward.begin(), qkv.backward.end());
    qkv.backward = std::move(back);
    // The gather's reduce-scatter comes first in backward: autograd meets
    // it before the linear (Unit::comms keep this order at one index).
    GatherQkv(sh, out, 1, &qkv);
    ContextRing(sh, &qkv);
    ColumnParallel(sh, &qkv, &qkv);
    units.push_back(std::move(qkv));
  } else {
    Unit q = LinearUnit("q_proj", sh, sh.q_width, sh.h, sh.qkv_bias);
    Unit k = LinearUnit("k_proj", sh, sh.kv_proj, sh.h, sh.qkv_bias);
    Unit v = LinearUnit("v_proj", sh, sh.kv_proj, sh.h, sh.qkv_bias);
    AttentionForward(sh, &v.forward);
    std::vector<Kernel> back;
    AttentionBackward(sh, &back);
    back.insert(back.end(), v.backward.begin(), v.backward.end());
    v.backward = std::move(back);
    // x feeds q, k and v: their input gradients are added.
    k.backward.push_back(GradientSum("k+v input gradient sum", sh.tokens, sh));
    q.backward.push_back(GradientSum("q input gradient sum", sh.tokens, sh));
    GatherQkv(sh, out, 1, &v);
    ContextRing(sh, &v);
    ColumnParallel(sh, &q, &v);
    units.push_back(std::move(q));
    units.push_back(std::move(k));
    units.push_back(std::move(v));
  }
  // Row-parallel: each GPU's heads' share of the rows; its bias is whole
  // (RowParallelLinear adds it once, after the reduction).
  Unit o = LinearUnit("o_proj", sh, sh.h, sh.q_width, sh.bias);
  o.forward.push_back(Residual(sh));
  HiddenDropoutBackward(sh, sh.norm_tokens, &o.backward);
  RowParallel(sh, &o);
  units.push_back(std::move(o));
  return units;
}

std::vector<Unit> MlpUnits(const Shape& sh) {
  const int64_t f = sh.tokens * sh.ffn;
  std::vector<Unit> units;
  if (sh.swiglu) {
    Unit gate = LinearUnit("gate_proj", sh, sh.ffn, sh.h, sh.bias);
    Unit up = LinearUnit("up_proj", sh, sh.ffn, sh.h, sh.bias);
    if (sh.eager) {
      // silu(gate) 4 vector; silu(gate) * up 6 vector.
      gate.forward.push_back(Streaming("silu", f, 2 * kBf16, 0, 1));
      up.forward.push_back(Streaming("swiglu mul", f, 3 * kBf16, 0, 1));
      // The product's two gradients 6 + 6 vector; silu's backward 6.
      up.backward.insert(up.backward.begin(),
                         Streaming("swiglu mul backward", f, 6 * kBf16, 0, 2));
      gate.backward.insert(gate.backward.begin(),
                           Streaming("silu backward", f, 3 * kBf16, 0, 1));
    } else {
      // One kernel: read gate and up, write the product; backward reads
      // the gradient, gate and up and writes both gradients.
      up.forward.push_back(Streaming("swiglu", f, 3 * kBf16, 0, 1));
      up.backward.insert(up.backward.begin(),
                         Streaming("swiglu backward", f, 5 * kBf16, 0, 1));
    }
    // Both projections read the norm's output: their gradients are added.
    gate.backward.push_back(
        GradientSum("gate+up input gradient sum", sh.tokens, sh));
    ColumnParallel(sh, &gate, &up);
    units.push_back(std::move(gate));
    units.push_back(std::move(up));
  } else {
    Unit fc1 = LinearUnit("fc1", sh, sh.ffn, sh.h, sh.bias);
    fc1.forward.push_back(Streaming("gelu", f, 2 * kBf16, 0, 1));
    fc1.backward.insert(fc1.backward.begin(),
                        Streaming("gelu backward", f, 3 * kBf16, 0, 1));
    ColumnParallel(sh, &fc1, &fc1);
    units.push_back(std::move(fc1));
  }
  Unit down =
      LinearUnit(sh.swiglu ? "down_proj" : "fc2", sh, sh.h, sh.ffn, sh.bias);
  down.forward.push_back(Residual(sh));
  HiddenDropoutBackward(sh, sh.norm_tokens, &down.backward);
  RowParallel(sh, &down);
  units.push_back(std::move(down));
  return units;
}

}  // namespace

namespace {

// Each GPU looks up the tokens of its vocabulary rows, zeros elsewhere:
// the output is summed over the group (layers.py, VocabParallelEmbedding:
// reduce_from_tensor_model_parallel_region), or reduce-scattered along the
// sequence under sequence parallelism (reduce_scatter_embeddings), whose
// backward all-gathers the output gradient.
void VocabParallelEmbedding(const Shape& sh, Unit* u) {
  if (sh.tp == 1) return;
  const int end = Size(u->forward);
  if (!sh.sp) {
    u->comms.push_back(TpCollective(ALL_REDUCE, false, end, HiddenBytes(sh),
                                    "embedding output"));
    return;
  }
  u->comms.push_back(TpCollective(REDUCE_SCATTER, false, end, HiddenBytes(sh),
                                  "embedding output"));
  u->comms.push_back(TpCollective(ALL_GATHER, true, 0, HiddenBytes(sh),
                                  "embedding output grad"));
}

// The loss over vocabulary-split logits (megatron/core/tensor_parallel/
// cross_entropy.py, VocabParallelCrossEntropy.forward): three all-reduces
// of one fp32 value per token, the logits' maximum, the target's logit and
// the sum of exponentials; its backward is local.
void VocabParallelCrossEntropy(const Shape& sh, Unit* head) {
  if (sh.tp == 1) return;
  const int end = Size(head->forward);
  for (const char* tensor : {"logits max", "target logit", "sum exp"}) {
    head->comms.push_back(
        TpCollective(ALL_REDUCE, false, end, kFp32 * sh.tokens, tensor, FP32));
  }
}

}  // namespace

std::vector<Unit> EmbeddingUnits(const Model& model, const Batch& batch) {
  const Shape sh = ShapeOf(model, batch);
  // This GPU's vocabulary rows (VocabParallelEmbedding); GPT's learned
  // positions are a plain embedding, whole on every GPU
  // (megatron/core/models/common/embeddings/language_model_embedding.py).
  const int64_t rows = sh.vocab + model.learned_positions();
  Unit u = MakeUnit("embed_tokens", rows * sh.h);
  const int64_t x = sh.tokens * sh.h;
  // A row gather: T rows of h read, written (positions added for GPT).
  u.forward.push_back(Streaming("embedding", x, 0,
                                (model.learned_positions() > 0 ? 3 : 2) * kBf16,
                                model.learned_positions() > 0 ? 2 : 1));
  // The dense gradient of the table: zeroed, then the T rows' gradients
  // added into it (sort, then a segmented add).
  if (sh.hidden_dropout) {
    // The embedding's output dropped (Megatron's embedding_dropout).
    // Under sequence parallelism after the scatter to the sequence-parallel
    // region, on 1/tp of the tokens.
    u.forward.push_back(
        Streaming("embedding dropout", sh.norm_tokens * sh.h, 2 + 2 + 1, 0, 1));
    HiddenDropoutBackward(sh, sh.norm_tokens, &u.backward);
  }
  Kernel backward = Streaming("embedding backward", x, 0, 3 * kBf16, 3);
  backward.mutable_memory()->set_vector_bytes(kBf16 * rows * sh.h);
  u.backward.push_back(backward);
  VocabParallelEmbedding(sh, &u);
  return {u};
}

std::vector<Unit> BlockUnits(const Model& model, const Batch& batch) {
  const Shape sh = ShapeOf(model, batch);
  std::vector<Unit> units;
  units.push_back(NormUnit("input_layernorm", sh));
  for (Unit& u : AttentionUnits(sh)) units.push_back(std::move(u));
  units.push_back(NormUnit("post_attention_layernorm", sh));
  for (Unit& u : MlpUnits(sh)) units.push_back(std::move(u));
  return units;
}

std::vector<Unit> HeadUnits(const Model& model, const Batch& batch) {
  const Shape sh = ShapeOf(model, batch);
  Unit norm = NormParamsUnit("norm", sh);
  norm.forward.push_back(NormForward(sh));
  norm.backward.push_back(NormBackward(sh));
  // The output projection runs whether or not its matrix is the
  // embedding's (tied): its parameters are counted there then.
  // No bias even where the blocks' linear layers have one (HF's
  // GPT2LMHeadModel: nn.Linear(n_embd, vocab_size, bias=False)), as
  // model.cc's HeadParams counts it.
  // torchtitan's float8 converter leaves it in bf16 (its filter_fqns
  // default, ["output"]).
  Shape head_sh = sh;
  head_sh.fp8 = false;
  Unit head = LinearUnit("lm_head", head_sh, sh.vocab, sh.h, /*bias=*/false);
  if (model.tied_embeddings()) {
    head.params = 0;
    head.vectors.clear();
  }
  const int64_t logits = sh.tokens * sh.vocab;
  // HF casts the logits to fp32 for the loss (6 general), whose
  // log-softmax reads and writes fp32 (8 general); nll_loss picks T values.
  head.forward.push_back(
      Streaming("cross entropy", logits, 0, kBf16 + kFp32 + 2 * kFp32, 3));
  // nll's gradient zeroed (4 vector); log-softmax's backward reads output
  // and gradient, writes the gradient (12 general); cast back to bf16 (6
  // vector).
  Kernel ce_back =
      Streaming("cross entropy backward", logits, kFp32 + 6, 3 * kFp32, 3);
  head.backward.insert(head.backward.begin(), ce_back);
  // Column-parallel over the vocabulary, its logits left split for the
  // loss (GPTModel's output_layer, parallel_output).
  ColumnParallel(sh, &head, &head);
  VocabParallelCrossEntropy(sh, &head);
  return {norm, head};
}

std::vector<Kernel> CoreAttentionKernels(const Model& model,
                                         const Batch& batch) {
  const Shape sh = ShapeOf(model, batch);
  std::vector<Kernel> kernels;
  if (!sh.flash) MaterialisedForward(sh, &kernels);
  return kernels;
}

int KvHeadsPerGpu(int kv_heads, int tp) {
  return kv_heads >= tp ? kv_heads / tp : 1;
}

std::vector<Kernel> OptimizerKernels(int64_t params, bool fp32_grads) {
  Kernel adam;
  adam.set_name("adam");
  adam.mutable_optimizer()->set_params(params);
  adam.mutable_optimizer()->set_bytes_per_param(7 * kFp32);
  std::vector<Kernel> out;
  if (!fp32_grads) {
    out.push_back(Streaming("gradient to fp32", params, kBf16 + kFp32, 0, 1));
  }
  out.push_back(adam);
  out.push_back(Streaming("weights to bf16", params, kFp32 + kBf16, 0, 1));
  return out;
}

std::vector<Kernel> OffloadGradientKernels(int64_t params) {
  Kernel copy;
  copy.set_name("gradient to host");
  copy.mutable_host_copy()->set_bytes(kFp32 * params);
  copy.mutable_host_copy()->set_to_host(true);
  return {Streaming("gradient to fp32", params, kBf16 + kFp32, 0, 1), copy};
}

Kernel HostOptimizerKernel(int64_t params, int sharers) {
  Kernel adam;
  adam.set_name("cpu adam");
  adam.mutable_host_optimizer()->set_params(params);
  adam.mutable_host_optimizer()->set_sharers(sharers);
  return adam;
}

Kernel OffloadParamsKernel(int64_t params) {
  Kernel copy;
  copy.set_name("weights to gpu");
  copy.mutable_host_copy()->set_bytes(kBf16 * params);
  return copy;
}

Kernel AccumulateKernel(int64_t elements) {
  return Streaming("gradient accumulate", elements, 3 * kBf16, 0, 1);
}

Kernel GradNormKernel(int64_t elements, int64_t bytes_per_element,
                      int launches) {
  return Streaming("gradient norm", elements, bytes_per_element, 0, launches);
}

Kernel GradScaleKernel(int64_t elements) {
  return Streaming("gradient scale", elements, 2 * kFp32, 0, 1);
}

Kernel OverflowCheckKernel(int64_t elements, int launches) {
  return Streaming("overflow check", elements, 28, 0, launches);
}

namespace {

// Keys per query: the whole sequence, unless context parallelism gave the
// kernel a part of the queries.
int64_t KvSeq(const Attention& a) {
  return a.kv_seq() > 0 ? a.kv_seq() : a.seq();
}

}  // namespace

int KernelLaunches(const Kernel& kernel) {
  if (kernel.has_host_optimizer()) return 0;
  return kernel.has_memory() ? std::max(1, kernel.memory().launches()) : 1;
}

double KernelFlops(const Kernel& kernel) {
  switch (kernel.body_case()) {
    case Kernel::kGemm: {
      const Gemm& g = kernel.gemm();
      return 2.0 * std::max<int64_t>(1, g.batch()) * g.m() * g.n() * g.k();
    }
    case Kernel::kAttention: {
      const Attention& a = kernel.attention();
      // QK^T and AV: 4 b heads s kv_seq d, half of it under a causal mask;
      // backward recomputes the scores and takes three more products.
      double f =
          4.0 * a.batch() * a.heads() * a.seq() * KvSeq(a) * a.head_dim();
      if (a.causal()) f /= 2;
      return a.backward() ? 2.5 * f : f;
    }
    default:
      return 0;
  }
}

int64_t KernelBytes(const Kernel& kernel) {
  switch (kernel.body_case()) {
    case Kernel::kGemm: {
      const Gemm& g = kernel.gemm();
      // FP8 operands are one byte; the output is bf16 either way.
      const int64_t in = g.fp8() ? kFp8 : kBf16;
      return std::max<int64_t>(1, g.batch()) *
             (in * (g.m() * g.k() + g.k() * g.n()) + kBf16 * g.m() * g.n());
    }
    case Kernel::kAttention: {
      const Attention& a = kernel.attention();
      const int64_t q = a.batch() * a.seq() * a.heads() * a.head_dim();
      const int64_t kv = a.batch() * KvSeq(a) * a.kv_heads() * a.head_dim();
      // Forward reads q, k, v and writes the output; backward reads those
      // and the output's gradient, writes q, k and v's gradients.
      return kBf16 * (a.backward() ? 3 * q + 4 * kv + q : 2 * q + 2 * kv);
    }
    case Kernel::kMemory:
      return kernel.memory().vector_bytes() + kernel.memory().general_bytes();
    case Kernel::kOptimizer:
      return kernel.optimizer().params() * kernel.optimizer().bytes_per_param();
    default:
      return 0;
  }
}

}  // namespace shardsim

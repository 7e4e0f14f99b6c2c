#include "sim/model/kernels.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/model/model.h"

namespace shardsim {
namespace {

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

// `vector` and `general` are bytes per element of a tensor of `elements`.
Kernel MemoryOp(const std::string& name, int64_t elements, int64_t vector,
                int64_t general, int launches) {
  Kernel kernel;
  kernel.set_name(name);
  MemoryKernel* m = kernel.mutable_memory();
  m->set_vector_bytes(vector * elements);
  m->set_general_bytes(general * elements);
  m->set_launches(launches);
  return kernel;
}

// The shapes every kernel of a layer is cut from.
struct Shape {
  int64_t tokens;  // T = sequences x sequence length
  int64_t b, s;
  int64_t h, kv_width, ffn, vocab;
  int heads, kv_heads, head_dim;
  bool eager, fused_qkv, flash, rmsnorm, swiglu, rotary;
  bool bias;      // on every linear layer
  bool qkv_bias;  // on the q, k and v projections (bias implies it)
};

Shape ShapeOf(const Model& m, const Batch& batch) {
  Shape sh;
  sh.b = batch.micro_batch_size;
  sh.s = batch.seq_len;
  sh.tokens = sh.b * sh.s;
  sh.h = m.hidden();
  sh.heads = m.heads();
  sh.kv_heads = m.kv_heads() > 0 ? m.kv_heads() : m.heads();
  sh.head_dim = static_cast<int>(m.hidden() / m.heads());
  sh.kv_width = int64_t{sh.kv_heads} * sh.head_dim;
  sh.ffn = m.ffn_hidden();
  sh.vocab = m.vocab();
  sh.eager = batch.kernels.style() != KernelOptions::FUSED;
  sh.fused_qkv = batch.kernels.fused_qkv();
  sh.flash = batch.flash_attention;
  sh.rmsnorm = m.norm() == Model::RMSNORM;
  sh.swiglu = m.mlp() == Model::SWIGLU;
  sh.rotary = m.learned_positions() == 0;
  sh.bias = m.linear_bias();
  sh.qkv_bias = m.linear_bias() || m.qkv_bias();
  return sh;
}

// ---- linear layers: y = x W^T, W is out x in ----

Kernel LinearForward(const std::string& name, const Shape& sh, int64_t out,
                     int64_t in) {
  return GemmKernel(name, sh.tokens, out, in, Gemm::FORWARD);
}

void LinearBackward(const std::string& name, const Shape& sh, int64_t out,
                    int64_t in, std::vector<Kernel>* k) {
  k->push_back(GemmKernel(name + " dgrad", sh.tokens, in, out, Gemm::DGRAD));
  k->push_back(GemmKernel(name + " wgrad", out, in, sh.tokens, Gemm::WGRAD));
}

// ---- normalisation over `x` = T x h elements ----

Kernel NormForward(const Shape& sh) {
  const int64_t x = sh.tokens * sh.h;
  if (!sh.rmsnorm) {
    // PyTorch's layer_norm is one fused kernel in eager mode too: read x,
    // write y (the per-row statistics are T-sized).
    return MemoryOp("layernorm", x, 2 * kBf16, 0, 1);
  }
  if (!sh.eager) return MemoryOp("rmsnorm", x, 2 * kBf16, 0, 1);
  // x.to(fp32) 6 general; pow(2) 8 vector; mean 4 general (a row
  // reduction); + eps and rsqrt on T values; x * rsqrt 8 general
  // (broadcast); .to(bf16) 6 vector; weight * x 4 general (broadcast).
  return MemoryOp("rmsnorm", x, 8 + 6, 6 + 4 + 8 + 4, 8);
}

Kernel NormBackward(const Shape& sh) {
  const int64_t x = sh.tokens * sh.h;
  if (!sh.rmsnorm || !sh.eager) {
    // One pass reading dy and x, writing dx; a second reduces the
    // weight (and bias) gradient's per-block partial sums.
    return MemoryOp(sh.rmsnorm ? "rmsnorm backward" : "layernorm backward", x,
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
  return MemoryOp("rmsnorm backward", x, 6 + 12 + 8 + 12 + 12 + 6,
                  4 + 2 + 6 + 8 + 4 + 4, 14);
}

// ---- rotary on q (or k): `x` = T x width elements ----

Kernel RotaryForward(const std::string& name, int64_t x, const Shape& sh) {
  if (!sh.eager) return MemoryOp(name, x, 2 * kBf16, 0, 1);
  // q * cos 4; -q[..., d/2:] 2 (half the tensor read and written);
  // cat((-x2, x1)) 4; rotate_half(q) * sin 4; the sum 6. All on the general
  // path: q and k are strided views of the projection's output, cos and
  // sin broadcast.
  return MemoryOp(name, x, 0, 4 + 2 + 4 + 4 + 6, 5);
}

Kernel RotaryBackward(const std::string& name, int64_t x, const Shape& sh) {
  if (!sh.eager) return MemoryOp(name, x, 2 * kBf16, 0, 1);
  // dy * cos and dy * sin 4 + 4 general; neg's gradient 2 general; each
  // slice's gradient is zeros (2 vector each) with the slice copied in (2
  // general each); cat's two halves summed 6 general; the two paths of q
  // summed 6 vector. 9 launches.
  return MemoryOp(name, x, 2 + 2 + 6, 4 + 4 + 2 + 2 + 2 + 6, 9);
}

// ---- attention ----

Kernel FlashAttention(const Shape& sh, bool backward) {
  Kernel kernel;
  kernel.set_name(backward ? "attention backward" : "attention");
  Attention* a = kernel.mutable_attention();
  a->set_batch(sh.b);
  a->set_heads(sh.heads);
  a->set_kv_heads(sh.kv_heads);
  a->set_seq(sh.s);
  a->set_head_dim(sh.head_dim);
  a->set_causal(true);
  a->set_backward(backward);
  return kernel;
}

// HF's eager attention, scores materialised: S = b x heads x s x s.
void MaterialisedForward(const Shape& sh, std::vector<Kernel>* k) {
  const int64_t bh = sh.b * sh.heads;
  const int64_t scores = bh * sh.s * sh.s;
  if (sh.kv_heads != sh.heads) {
    // repeat_kv: k and v expanded to every head and made contiguous, each
    // reading its kv_width and writing h per token.
    k->push_back(MemoryOp("repeat_kv", 2 * sh.tokens, 0,
                          kBf16 * (sh.kv_width + sh.h), 2));
  }
  k->push_back(
      GemmKernel("scores", sh.s, sh.s, sh.head_dim, Gemm::BATCHED, bh));
  // * scaling 4 vector; + causal mask 4 general (broadcast over heads);
  // softmax in fp32: read bf16, write fp32, 6 general; .to(bf16) 6 vector.
  k->push_back(MemoryOp("softmax", scores, 4 + 6, 4 + 6, 4));
  k->push_back(
      GemmKernel("context", sh.s, sh.head_dim, sh.s, Gemm::BATCHED, bh));
  // The context back to (b, s, h): transpose(1, 2).contiguous().
  k->push_back(MemoryOp("context layout", sh.tokens * sh.h, 0, 2 * kBf16, 1));
}

void MaterialisedBackward(const Shape& sh, std::vector<Kernel>* k) {
  const int64_t bh = sh.b * sh.heads;
  const int64_t scores = bh * sh.s * sh.s;
  k->push_back(
      MemoryOp("context layout backward", sh.tokens * sh.h, 0, 2 * kBf16, 1));
  k->push_back(
      GemmKernel("context dgrad", sh.s, sh.s, sh.head_dim, Gemm::BATCHED, bh));
  k->push_back(
      GemmKernel("context wgrad", sh.s, sh.head_dim, sh.s, Gemm::BATCHED, bh));
  // The bf16 gradient cast to fp32 6 general; softmax backward reads the
  // fp32 output and gradient, writes bf16: 10 general; * scaling 4 vector.
  k->push_back(MemoryOp("softmax backward", scores, 4, 6 + 10, 3));
  k->push_back(
      GemmKernel("scores dgrad", sh.s, sh.head_dim, sh.s, Gemm::BATCHED, bh));
  k->push_back(
      GemmKernel("scores wgrad", sh.s, sh.head_dim, sh.s, Gemm::BATCHED, bh));
  if (sh.kv_heads != sh.heads) {
    // expand's backward sums each group of heads: reads h, writes kv_width
    // per token, for k and for v.
    k->push_back(MemoryOp("repeat_kv backward", 2 * sh.tokens, 0,
                          kBf16 * (sh.h + sh.kv_width), 2));
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
  u.forward.push_back(LinearForward(name, sh, out, in));
  LinearBackward(name, sh, out, in, &u.backward);
  return u;
}

// x feeds two consumers (a residual and a norm, or several projections):
// autograd adds their gradients.
Kernel GradientSum(const std::string& name, const Shape& sh) {
  return MemoryOp(name, sh.tokens * sh.h, 3 * kBf16, 0, 1);
}

Kernel Residual(const Shape& sh) {
  return MemoryOp("residual add", sh.tokens * sh.h, 3 * kBf16, 0, 1);
}

Unit NormUnit(const std::string& name, const Shape& sh) {
  Unit u = NormParamsUnit(name, sh);
  u.forward.push_back(NormForward(sh));
  u.backward.push_back(NormBackward(sh));
  // The norm's input is also the residual's: their gradients meet here.
  u.backward.push_back(GradientSum("residual gradient sum", sh));
  return u;
}

// Attention after its projections: rotary on q and k, then the attention
// itself. Appended to the last projection's unit (forward) and run before
// its gradients (backward).
void AttentionForward(const Shape& sh, std::vector<Kernel>* k) {
  if (sh.rotary) {
    k->push_back(RotaryForward("rotary q", sh.tokens * sh.h, sh));
    k->push_back(RotaryForward("rotary k", sh.tokens * sh.kv_width, sh));
  }
  if (sh.flash) {
    k->push_back(FlashAttention(sh, false));
  } else {
    MaterialisedForward(sh, k);
  }
}

void AttentionBackward(const Shape& sh, std::vector<Kernel>* k) {
  if (sh.flash) {
    k->push_back(FlashAttention(sh, true));
  } else {
    MaterialisedBackward(sh, k);
  }
  if (sh.rotary) {
    k->push_back(
        RotaryBackward("rotary k backward", sh.tokens * sh.kv_width, sh));
    k->push_back(RotaryBackward("rotary q backward", sh.tokens * sh.h, sh));
  }
}

std::vector<Unit> AttentionUnits(const Shape& sh) {
  std::vector<Unit> units;
  if (sh.fused_qkv) {
    const int64_t out = sh.h + 2 * sh.kv_width;
    Unit qkv = LinearUnit("qkv_proj", sh, out, sh.h, sh.qkv_bias);
    AttentionForward(sh, &qkv.forward);
    std::vector<Kernel> back;
    AttentionBackward(sh, &back);
    // q, k and v's gradients stacked back into the projection's output
    // (unbind's backward): a concatenation, read and written once.
    back.push_back(
        MemoryOp("qkv gradient stack", sh.tokens * out, 0, 2 * kBf16, 1));
    back.insert(back.end(), qkv.backward.begin(), qkv.backward.end());
    qkv.backward = std::move(back);
    units.push_back(std::move(qkv));
  } else {
    Unit q = LinearUnit("q_proj", sh, sh.h, sh.h, sh.qkv_bias);
    Unit k = LinearUnit("k_proj", sh, sh.kv_width, sh.h, sh.qkv_bias);
    Unit v = LinearUnit("v_proj", sh, sh.kv_width, sh.h, sh.qkv_bias);
    AttentionForward(sh, &v.forward);
    std::vector<Kernel> back;
    AttentionBackward(sh, &back);
    back.insert(back.end(), v.backward.begin(), v.backward.end());
    v.backward = std::move(back);
    // x feeds q, k and v: their input gradients are added.
    k.backward.push_back(GradientSum("k+v input gradient sum", sh));
    q.backward.push_back(GradientSum("q input gradient sum", sh));
    units.push_back(std::move(q));
    units.push_back(std::move(k));
    units.push_back(std::move(v));
  }
  Unit o = LinearUnit("o_proj", sh, sh.h, sh.h, sh.bias);
  o.forward.push_back(Residual(sh));
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
      gate.forward.push_back(MemoryOp("silu", f, 2 * kBf16, 0, 1));
      up.forward.push_back(MemoryOp("swiglu mul", f, 3 * kBf16, 0, 1));
      // The product's two gradients 6 + 6 vector; silu's backward 6.
      up.backward.insert(up.backward.begin(),
                         MemoryOp("swiglu mul backward", f, 6 * kBf16, 0, 2));
      gate.backward.insert(gate.backward.begin(),
                           MemoryOp("silu backward", f, 3 * kBf16, 0, 1));
    } else {
      // One kernel: read gate and up, write the product; backward reads
      // the gradient, gate and up and writes both gradients.
      up.forward.push_back(MemoryOp("swiglu", f, 3 * kBf16, 0, 1));
      up.backward.insert(up.backward.begin(),
                         MemoryOp("swiglu backward", f, 5 * kBf16, 0, 1));
    }
    // Both projections read the norm's output: their gradients are added.
    gate.backward.push_back(GradientSum("gate+up input gradient sum", sh));
    units.push_back(std::move(gate));
    units.push_back(std::move(up));
  } else {
    Unit fc1 = LinearUnit("fc1", sh, sh.ffn, sh.h, sh.bias);
    fc1.forward.push_back(MemoryOp("gelu", f, 2 * kBf16, 0, 1));
    fc1.backward.insert(fc1.backward.begin(),
                        MemoryOp("gelu backward", f, 3 * kBf16, 0, 1));
    units.push_back(std::move(fc1));
  }
  Unit down =
      LinearUnit(sh.swiglu ? "down_proj" : "fc2", sh, sh.h, sh.ffn, sh.bias);
  down.forward.push_back(Residual(sh));
  units.push_back(std::move(down));
  return units;
}

}  // namespace

std::vector<Unit> EmbeddingUnits(const Model& model, const Batch& batch) {
  const Shape sh = ShapeOf(model, batch);
  const int64_t rows = model.vocab() + model.learned_positions();
  Unit u = MakeUnit("embed_tokens", rows * sh.h);
  const int64_t x = sh.tokens * sh.h;
  // A row gather: T rows of h read, written (positions added for GPT).
  u.forward.push_back(MemoryOp("embedding", x, 0,
                               (model.learned_positions() > 0 ? 3 : 2) * kBf16,
                               model.learned_positions() > 0 ? 2 : 1));
  // The dense gradient of the table: zeroed, then the T rows' gradients
  // added into it (sort, then a segmented add).
  Kernel backward = MemoryOp("embedding backward", x, 0, 3 * kBf16, 3);
  backward.mutable_memory()->set_vector_bytes(kBf16 * rows * sh.h);
  u.backward.push_back(backward);
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
  Unit head = LinearUnit("lm_head", sh, sh.vocab, sh.h, /*bias=*/false);
  if (model.tied_embeddings()) {
    head.params = 0;
    head.vectors.clear();
  }
  const int64_t logits = sh.tokens * sh.vocab;
  // HF casts the logits to fp32 for the loss (6 general), whose
  // log-softmax reads and writes fp32 (8 general); nll_loss picks T values.
  head.forward.push_back(
      MemoryOp("cross entropy", logits, 0, kBf16 + kFp32 + 2 * kFp32, 3));
  // nll's gradient zeroed (4 vector); log-softmax's backward reads output
  // and gradient, writes the gradient (12 general); cast back to bf16 (6
  // vector).
  Kernel ce_back =
      MemoryOp("cross entropy backward", logits, kFp32 + 6, 3 * kFp32, 3);
  head.backward.insert(head.backward.begin(), ce_back);
  return {norm, head};
}

std::vector<Kernel> OptimizerKernels(int64_t params) {
  Kernel adam;
  adam.set_name("adam");
  adam.mutable_optimizer()->set_params(params);
  adam.mutable_optimizer()->set_bytes_per_param(7 * kFp32);
  return {MemoryOp("gradient to fp32", params, kBf16 + kFp32, 0, 1), adam,
          MemoryOp("weights to bf16", params, kFp32 + kBf16, 0, 1)};
}

Kernel AccumulateKernel(int64_t elements) {
  return MemoryOp("gradient accumulate", elements, 3 * kBf16, 0, 1);
}

double KernelFlops(const Kernel& kernel) {
  switch (kernel.body_case()) {
    case Kernel::kGemm: {
      const Gemm& g = kernel.gemm();
      return 2.0 * std::max<int64_t>(1, g.batch()) * g.m() * g.n() * g.k();
    }
    case Kernel::kAttention: {
      const Attention& a = kernel.attention();
      // QK^T and AV: 4 b heads s^2 d, half of it under a causal mask;
      // backward recomputes the scores and takes three more products.
      double f = 4.0 * a.batch() * a.heads() * a.seq() * a.seq() * a.head_dim();
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
      return kBf16 * std::max<int64_t>(1, g.batch()) *
             (g.m() * g.k() + g.k() * g.n() + g.m() * g.n());
    }
    case Kernel::kAttention: {
      const Attention& a = kernel.attention();
      const int64_t q = a.batch() * a.seq() * a.heads() * a.head_dim();
      const int64_t kv = a.batch() * a.seq() * a.kv_heads() * a.head_dim();
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

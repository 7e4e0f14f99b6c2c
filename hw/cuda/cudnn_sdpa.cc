#include "hw/cuda/cudnn_sdpa.h"

#include <cudnn.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "hw/cuda/check.h"

#if !defined(CUDNN_MAJOR) || CUDNN_MAJOR < 9
#error "cudnn_sdpa.cc needs cuDNN 9 (the graph backend API of cudnn_graph.h)"
#endif

namespace shardsim::hw {
namespace {

using Dims = std::array<int64_t, 4>;

// Tensor ids of the variant pack. Virtual tensors are numbered from
// kFirstVirtual: they have no memory but still need unique ids.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kScale,       // by value: 1/sqrt(d)
  kNegInf,      // by value: the masked score
  kOne,         // by value: 1
  kSoftmaxSum,  // backward: rowsum(dO * O), fp32, in the workspace
  kDQAccum,     // backward: fp32 dQ the engine accumulates, in the workspace
  kFirstVirtual = 100,
};

// The backward's fp32 buffers sit in front of cuDNN's own workspace, as
// cudnn_frontend lays out its "fe workspace"; each part 256-byte aligned.
constexpr int64_t kAlign = 256;
int64_t AlignUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// cuDNN's status text plus its last error message, which names the
// offending attribute or engine constraint.
std::string LastError() {
  char last[1024] = {0};
  cudnnGetLastErrorString(last, sizeof(last));
  return last;
}
std::string Why(cudnnStatus_t s) {
  std::string why = cudnnGetErrorString(s);
  const std::string last = LastError();
  if (!last.empty()) absl::StrAppend(&why, " (", last, ")");
  return why;
}
// Why heuristics returned nothing: cuDNN's message if it left one.
std::string WhyNone(cudnnStatus_t s) {
  if (s != CUDNN_STATUS_SUCCESS) return ": " + Why(s);
  const std::string last = LastError();
  return last.empty() ? " (cuDNN gave no reason; CUDNN_LOGLEVEL_DBG=2 "
                        "CUDNN_LOGDEST_DBG=stderr logs its checks)"
                      : " (" + last + ")";
}

// Owns one backend descriptor.
class Descriptor {
 public:
  Descriptor() = default;
  explicit Descriptor(cudnnBackendDescriptor_t d) : d_(d) {}
  ~Descriptor() {
    if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
  }
  Descriptor(Descriptor&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Descriptor& operator=(Descriptor&& o) noexcept {
    if (this != &o) {
      if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
      d_ = std::exchange(o.d_, nullptr);
    }
    return *this;
  }
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// Descriptors kept alive in creation order and destroyed in reverse (the
// operation graph and plan refer to the tensors and operations).
class DescriptorSet {
 public:
  DescriptorSet() = default;
  DescriptorSet(DescriptorSet&&) = default;
  DescriptorSet& operator=(DescriptorSet&&) = default;
  ~DescriptorSet() { Clear(); }
  void Add(Descriptor d) { all_.push_back(std::move(d)); }
  // Takes `other`'s descriptors; they go before this set's own.
  void Absorb(DescriptorSet&& other) {
    for (Descriptor& d : other.all_) all_.push_back(std::move(d));
    other.all_.clear();
  }
  void Clear() {
    while (!all_.empty()) all_.pop_back();
  }

 private:
  std::vector<Descriptor> all_;
};

// Builds one operation graph. The first failing step is kept in status()
// and makes every later call a no-op returning nullptr, so the graph code
// reads as the list of operations it is; messages name the step.
class GraphBuilder {
 public:
  GraphBuilder(std::string what, DescriptorSet* keep)
      : what_(std::move(what)), keep_(keep) {}

  const absl::Status& status() const { return status_; }
  const std::vector<cudnnBackendDescriptor_t>& ops() const { return ops_; }

  cudnnBackendDescriptor_t Create(cudnnBackendDescriptorType_t type,
                                  const std::string& name) {
    if (!status_.ok()) return nullptr;
    cudnnBackendDescriptor_t d = nullptr;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(type, &d);
    if (s != CUDNN_STATUS_SUCCESS) {
      Fail(absl::StrCat(name, ": cudnnBackendCreateDescriptor"), s);
      return nullptr;
    }
    keep_->Add(Descriptor(d));
    return d;
  }

  void Set(cudnnBackendDescriptor_t d, const std::string& name,
           cudnnBackendAttributeName_t attr, const char* attr_text,
           cudnnBackendAttributeType_t type, int64_t count,
           const void* values) {
    if (!status_.ok()) return;
    cudnnStatus_t s = cudnnBackendSetAttribute(d, attr, type, count, values);
    if (s != CUDNN_STATUS_SUCCESS) {
      Fail(absl::StrCat(name, ": setting ", attr_text), s);
    }
  }

  void Finalize(cudnnBackendDescriptor_t d, const std::string& name) {
    if (!status_.ok()) return;
    cudnnStatus_t s = cudnnBackendFinalize(d);
    if (s != CUDNN_STATUS_SUCCESS) {
      Fail(absl::StrCat(name, ": cudnnBackendFinalize"), s);
    }
  }

  // A tensor with memory (uid given) or a virtual one (uid < 0: the next
  // free one). Alignment 16: what the fused engines require of I/O.
  cudnnBackendDescriptor_t Tensor(const std::string& name, cudnnDataType_t type,
                                  const Dims& dims, const Dims& strides,
                                  int64_t uid = -1, bool by_value = false) {
    const bool is_virtual = uid < 0;
    if (is_virtual) uid = next_virtual_++;
    cudnnBackendDescriptor_t t =
        Create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor " + name);
    const std::string n = "tensor " + name;
    const int64_t alignment = 16;
    Set(t, n, CUDNN_ATTR_TENSOR_DATA_TYPE, "CUDNN_ATTR_TENSOR_DATA_TYPE",
        CUDNN_TYPE_DATA_TYPE, 1, &type);
    Set(t, n, CUDNN_ATTR_TENSOR_DIMENSIONS, "CUDNN_ATTR_TENSOR_DIMENSIONS",
        CUDNN_TYPE_INT64, 4, dims.data());
    Set(t, n, CUDNN_ATTR_TENSOR_STRIDES, "CUDNN_ATTR_TENSOR_STRIDES",
        CUDNN_TYPE_INT64, 4, strides.data());
    Set(t, n, CUDNN_ATTR_TENSOR_UNIQUE_ID, "CUDNN_ATTR_TENSOR_UNIQUE_ID",
        CUDNN_TYPE_INT64, 1, &uid);
    Set(t, n, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT,
        "CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT", CUDNN_TYPE_INT64, 1, &alignment);
    if (is_virtual) {
      bool yes = true;
      Set(t, n, CUDNN_ATTR_TENSOR_IS_VIRTUAL, "CUDNN_ATTR_TENSOR_IS_VIRTUAL",
          CUDNN_TYPE_BOOLEAN, 1, &yes);
    }
    if (by_value) {
      bool yes = true;
      Set(t, n, CUDNN_ATTR_TENSOR_IS_BY_VALUE, "CUDNN_ATTR_TENSOR_IS_BY_VALUE",
          CUDNN_TYPE_BOOLEAN, 1, &yes);
    }
    Finalize(t, n);
    return t;
  }

  // An fp32 scalar passed by value at execution (a host pointer in the
  // variant pack), broadcast over all four dims.
  cudnnBackendDescriptor_t Scalar(const std::string& name, int64_t uid) {
    return Tensor(name, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, uid,
                  /*by_value=*/true);
  }

  // y = mode(x [, b [, t]]). `axis` only for GEN_INDEX.
  cudnnBackendDescriptor_t Pointwise(
      const std::string& name, cudnnPointwiseMode_t mode,
      cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
      cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y,
      cudnnDataType_t compute = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    const std::string dn = "pointwise descriptor " + name;
    cudnnBackendDescriptor_t pw =
        Create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, dn);
    Set(pw, dn, CUDNN_ATTR_POINTWISE_MODE, "CUDNN_ATTR_POINTWISE_MODE",
        CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    Set(pw, dn, CUDNN_ATTR_POINTWISE_MATH_PREC,
        "CUDNN_ATTR_POINTWISE_MATH_PREC", CUDNN_TYPE_DATA_TYPE, 1, &compute);
    if (mode == CUDNN_POINTWISE_GEN_INDEX) {
      Set(pw, dn, CUDNN_ATTR_POINTWISE_AXIS, "CUDNN_ATTR_POINTWISE_AXIS",
          CUDNN_TYPE_INT64, 1, &axis);
    }
    Finalize(pw, dn);

    const std::string on = "pointwise operation " + name;
    cudnnBackendDescriptor_t op =
        Create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, on);
    Set(op, on, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
        "CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR",
        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    Set(op, on, CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
        "CUDNN_ATTR_OPERATION_POINTWISE_XDESC", CUDNN_TYPE_BACKEND_DESCRIPTOR,
        1, &x);
    if (b != nullptr) {
      Set(op, on, CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
          "CUDNN_ATTR_OPERATION_POINTWISE_BDESC", CUDNN_TYPE_BACKEND_DESCRIPTOR,
          1, &b);
    }
    if (t != nullptr) {
      Set(op, on, CUDNN_ATTR_OPERATION_POINTWISE_TDESC,
          "CUDNN_ATTR_OPERATION_POINTWISE_TDESC", CUDNN_TYPE_BACKEND_DESCRIPTOR,
          1, &t);
    }
    Set(op, on, CUDNN_ATTR_OPERATION_POINTWISE_YDESC,
        "CUDNN_ATTR_OPERATION_POINTWISE_YDESC", CUDNN_TYPE_BACKEND_DESCRIPTOR,
        1, &y);
    Finalize(op, on);
    ops_.push_back(op);
    return y;
  }
  cudnnBackendDescriptor_t Unary(const std::string& name,
                                 cudnnPointwiseMode_t mode,
                                 cudnnBackendDescriptor_t x,
                                 cudnnBackendDescriptor_t y) {
    return Pointwise(name, mode, x, nullptr, nullptr, y);
  }
  cudnnBackendDescriptor_t Binary(const std::string& name,
                                  cudnnPointwiseMode_t mode,
                                  cudnnBackendDescriptor_t x,
                                  cudnnBackendDescriptor_t b,
                                  cudnnBackendDescriptor_t y,
                                  cudnnDataType_t compute = CUDNN_DATA_FLOAT) {
    return Pointwise(name, mode, x, b, nullptr, y, compute);
  }

  // c = a @ b over the last two dims, batched (and broadcast) over the rest.
  cudnnBackendDescriptor_t Matmul(const std::string& name,
                                  cudnnBackendDescriptor_t a,
                                  cudnnBackendDescriptor_t b,
                                  cudnnBackendDescriptor_t c) {
    const std::string dn = "matmul descriptor " + name;
    cudnnBackendDescriptor_t mm = Create(CUDNN_BACKEND_MATMUL_DESCRIPTOR, dn);
    cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    Set(mm, dn, CUDNN_ATTR_MATMUL_COMP_TYPE, "CUDNN_ATTR_MATMUL_COMP_TYPE",
        CUDNN_TYPE_DATA_TYPE, 1, &compute);
    Finalize(mm, dn);

    const std::string on = "matmul operation " + name;
    cudnnBackendDescriptor_t op =
        Create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, on);
    Set(op, on, CUDNN_ATTR_OPERATION_MATMUL_ADESC,
        "CUDNN_ATTR_OPERATION_MATMUL_ADESC", CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
        &a);
    Set(op, on, CUDNN_ATTR_OPERATION_MATMUL_BDESC,
        "CUDNN_ATTR_OPERATION_MATMUL_BDESC", CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
        &b);
    Set(op, on, CUDNN_ATTR_OPERATION_MATMUL_CDESC,
        "CUDNN_ATTR_OPERATION_MATMUL_CDESC", CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
        &c);
    Set(op, on, CUDNN_ATTR_OPERATION_MATMUL_DESC,
        "CUDNN_ATTR_OPERATION_MATMUL_DESC", CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
        &mm);
    Finalize(op, on);
    ops_.push_back(op);
    return c;
  }

  // y = reduce(x) over the dims where y is smaller (fp32 compute).
  cudnnBackendDescriptor_t Reduce(const std::string& name,
                                  cudnnReduceTensorOp_t reduce,
                                  cudnnBackendDescriptor_t x,
                                  cudnnBackendDescriptor_t y) {
    const std::string dn = "reduction descriptor " + name;
    cudnnBackendDescriptor_t rd =
        Create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, dn);
    cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    Set(rd, dn, CUDNN_ATTR_REDUCTION_OPERATOR, "CUDNN_ATTR_REDUCTION_OPERATOR",
        CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce);
    Set(rd, dn, CUDNN_ATTR_REDUCTION_COMP_TYPE,
        "CUDNN_ATTR_REDUCTION_COMP_TYPE", CUDNN_TYPE_DATA_TYPE, 1, &compute);
    Finalize(rd, dn);

    const std::string on = "reduction operation " + name;
    cudnnBackendDescriptor_t op =
        Create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, on);
    Set(op, on, CUDNN_ATTR_OPERATION_REDUCTION_XDESC,
        "CUDNN_ATTR_OPERATION_REDUCTION_XDESC", CUDNN_TYPE_BACKEND_DESCRIPTOR,
        1, &x);
    Set(op, on, CUDNN_ATTR_OPERATION_REDUCTION_YDESC,
        "CUDNN_ATTR_OPERATION_REDUCTION_YDESC", CUDNN_TYPE_BACKEND_DESCRIPTOR,
        1, &y);
    Set(op, on, CUDNN_ATTR_OPERATION_REDUCTION_DESC,
        "CUDNN_ATTR_OPERATION_REDUCTION_DESC", CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
        &rd);
    Finalize(op, on);
    ops_.push_back(op);
    return y;
  }

  // y = x seen through other dims/strides (here: a transpose, no copy).
  cudnnBackendDescriptor_t Reshape(const std::string& name,
                                   cudnnBackendDescriptor_t x,
                                   cudnnBackendDescriptor_t y) {
    const std::string on = "reshape operation " + name;
    cudnnBackendDescriptor_t op =
        Create(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, on);
    Set(op, on, CUDNN_ATTR_OPERATION_RESHAPE_XDESC,
        "CUDNN_ATTR_OPERATION_RESHAPE_XDESC", CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
        &x);
    Set(op, on, CUDNN_ATTR_OPERATION_RESHAPE_YDESC,
        "CUDNN_ATTR_OPERATION_RESHAPE_YDESC", CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
        &y);
    Finalize(op, on);
    ops_.push_back(op);
    return y;
  }

 private:
  void Fail(const std::string& step, cudnnStatus_t s) {
    status_ = absl::InternalError(
        absl::StrCat(what_, ": ", step, " failed: ", Why(s)));
  }

  std::string what_;
  DescriptorSet* keep_;
  absl::Status status_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  int64_t next_virtual_ = kFirstVirtual;
};

// The shape's dims and strides, (b, h, s, d) order over BSHD memory.
struct Layout {
  Dims q, q_str;      // Q, O, dQ, dO: [b, h, s, d]
  Dims kt, kt_str;    // K^T (and V^T): [b, hk, d, s]
  Dims kv, kv_str;    // K, V, dK, dV: [b, hk, s, d]
  Dims sc, sc_str;    // scores: [b, h, s, s], row-major
  Dims sct_str;       // scores seen transposed: [b, h, s(kv), s(q)]
  Dims row, row_str;  // per-row: [b, h, s, 1]
  Dims qh_str;        // [b, h, s, d] packed BHSD: dQ accumulator, GQA partials
};

Layout LayoutOf(const SdpaShape& sh) {
  const int64_t b = sh.batch, h = sh.heads, hk = sh.kv_heads, s = sh.seq,
                d = sh.head_dim;
  Layout l;
  l.q = {b, h, s, d};
  l.q_str = {s * h * d, d, h * d, 1};
  l.kt = {b, hk, d, s};
  l.kt_str = {s * hk * d, d, 1, hk * d};
  l.kv = {b, hk, s, d};
  l.kv_str = {s * hk * d, d, hk * d, 1};
  l.sc = {b, h, s, s};
  l.sc_str = {h * s * s, s * s, s, 1};
  l.sct_str = {h * s * s, s * s, 1, s};
  l.row = {b, h, s, 1};
  l.row_str = {h * s, s, 1, 1};
  l.qh_str = {h * s * d, s * d, d, 1};
  return l;
}

// Top-left causal mask as cudnn_frontend's diagonal_band_mask node expands
// it (right bound 0): keep = row index >= column index (GEN_INDEX along
// dims 2 and 3, int32; CMP_GE with boolean compute), then
// BINARY_SELECT(keep ? score : -inf).
cudnnBackendDescriptor_t CausalMask(GraphBuilder& g, const Layout& l,
                                    cudnnBackendDescriptor_t score,
                                    cudnnBackendDescriptor_t neg_inf) {
  auto row = g.Pointwise(
      "gen_row_index", CUDNN_POINTWISE_GEN_INDEX, score, nullptr, nullptr,
      g.Tensor("row_index", CUDNN_DATA_INT32, l.sc, l.sc_str), CUDNN_DATA_FLOAT,
      /*axis=*/2);
  auto col = g.Pointwise(
      "gen_col_index", CUDNN_POINTWISE_GEN_INDEX, score, nullptr, nullptr,
      g.Tensor("col_index", CUDNN_DATA_INT32, l.sc, l.sc_str), CUDNN_DATA_FLOAT,
      /*axis=*/3);
  auto keep = g.Binary("row>=col", CUDNN_POINTWISE_CMP_GE, row, col,
                       g.Tensor("keep", CUDNN_DATA_BOOLEAN, l.sc, l.sc_str),
                       CUDNN_DATA_BOOLEAN);
  return g.Pointwise("causal_select", CUDNN_POINTWISE_BINARY_SELECT, score,
                     neg_inf, keep,
                     g.Tensor("S_masked", CUDNN_DATA_FLOAT, l.sc, l.sc_str));
}

// CompositeSDPANode's expansion with the composite softmax (stats = max +
// log(sum)); P is bf16 before the second matmul, as the frontend sets
// bmm2's A type to the I/O type.
void BuildForward(GraphBuilder& g, const SdpaShape& sh) {
  const Layout l = LayoutOf(sh);
  const auto bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  auto q = g.Tensor("Q", bf16, l.q, l.q_str, kQ);
  auto kt = g.Tensor("K^T", bf16, l.kt, l.kt_str, kK);
  auto v = g.Tensor("V", bf16, l.kv, l.kv_str, kV);
  auto o = g.Tensor("O", bf16, l.q, l.q_str, kO);
  auto stats = g.Tensor("stats", f32, l.row, l.row_str, kStats);
  auto scale = g.Scalar("attn_scale", kScale);

  auto s = g.Matmul("bmm1", q, kt, g.Tensor("S", f32, l.sc, l.sc_str));
  s = g.Binary("attn_scale", CUDNN_POINTWISE_MUL, s, scale,
               g.Tensor("S_scaled", f32, l.sc, l.sc_str));
  if (sh.causal) s = CausalMask(g, l, s, g.Scalar("neg_inf", kNegInf));

  auto m = g.Reduce("max", CUDNN_REDUCE_TENSOR_MAX, s,
                    g.Tensor("M", f32, l.row, l.row_str));
  auto e = g.Binary("sub_M", CUDNN_POINTWISE_SUB, s, m,
                    g.Tensor("S-M", f32, l.sc, l.sc_str));
  e = g.Unary("exp", CUDNN_POINTWISE_EXP, e,
              g.Tensor("exp(S-M)", f32, l.sc, l.sc_str));
  auto z = g.Reduce("sum", CUDNN_REDUCE_TENSOR_ADD, e,
                    g.Tensor("Z", f32, l.row, l.row_str));
  auto log_z = g.Unary("log", CUDNN_POINTWISE_LOG, z,
                       g.Tensor("log(Z)", f32, l.row, l.row_str));
  g.Binary("stats", CUDNN_POINTWISE_ADD, m, log_z, stats);
  auto p = g.Binary("div", CUDNN_POINTWISE_DIV, e, z,
                    g.Tensor("P", bf16, l.sc, l.sc_str));
  g.Matmul("bmm2", p, v, o);
}

// CompositeSDPABackwardNode's expansion (no dropout, no bias, cuDNN >= 9:
// the dQ-accumulator path, not the dP workspace one):
//   softmax_sum = rowsum(dO * O)            (fp32, in the workspace)
//   P  = exp(mask(scale * Q K^T - stats))   (recomputed)
//   dV = P^T dO
//   dS = scale * P * (dO V^T - softmax_sum)
//   dK = dS^T Q,  dQ = dS K                 (dQ through an fp32 accumulator)
// With GQA, dK and dV are first computed per query head (virtual) and
// summed over each group by an ADD reduction over the head dim.
void BuildBackward(GraphBuilder& g, const SdpaShape& sh) {
  const Layout l = LayoutOf(sh);
  const auto bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  const bool gqa = sh.kv_heads != sh.heads;
  auto q = g.Tensor("Q", bf16, l.q, l.q_str, kQ);
  auto kt = g.Tensor("K^T", bf16, l.kt, l.kt_str, kK);
  auto vt = g.Tensor("V^T", bf16, l.kt, l.kt_str, kV);  // V's layout is K's
  auto o = g.Tensor("O", bf16, l.q, l.q_str, kO);
  auto d_o = g.Tensor("dO", bf16, l.q, l.q_str, kDO);
  auto stats = g.Tensor("stats", f32, l.row, l.row_str, kStats);
  auto d_q = g.Tensor("dQ", bf16, l.q, l.q_str, kDQ);
  auto d_k = g.Tensor("dK", bf16, l.kv, l.kv_str, kDK);
  auto d_v = g.Tensor("dV", bf16, l.kv, l.kv_str, kDV);
  auto scale = g.Scalar("attn_scale", kScale);
  auto one = g.Scalar("one", kOne);
  auto softmax_sum =
      g.Tensor("softmax_sum", f32, l.row, l.row_str, kSoftmaxSum);
  auto dq_accum = g.Tensor("dQ_accum", f32, l.q, l.qh_str, kDQAccum);

  // softmax_sum = rowsum(dO * O) (times 1: the frontend's dropout-scale
  // slot, which also makes the reduction's result a non-virtual output).
  auto r = g.Binary("mul_dO_O", CUDNN_POINTWISE_MUL, d_o, o,
                    g.Tensor("dO*O", f32, l.q, l.q_str));
  r = g.Reduce("reduce_dO_O", CUDNN_REDUCE_TENSOR_ADD, r,
               g.Tensor("rowsum(dO*O)", f32, l.row, l.row_str));
  g.Binary("scale_dropout_inv", CUDNN_POINTWISE_MUL, r, one, softmax_sum);

  // P, recomputed from the stats (mask after the subtraction, as the
  // frontend orders it).
  auto s = g.Matmul("matmul_Q_KT", q, kt, g.Tensor("S", f32, l.sc, l.sc_str));
  s = g.Binary("mul_s_attn_scale", CUDNN_POINTWISE_MUL, s, scale,
               g.Tensor("S_scaled", f32, l.sc, l.sc_str));
  s = g.Binary("sub_s_m", CUDNN_POINTWISE_SUB, s, stats,
               g.Tensor("S-stats", f32, l.sc, l.sc_str));
  if (sh.causal) s = CausalMask(g, l, s, g.Scalar("neg_inf", kNegInf));
  auto p = g.Unary("exp_s", CUDNN_POINTWISE_EXP, s,
                   g.Tensor("P", f32, l.sc, l.sc_str));

  // dV = P^T dO.
  auto pt = g.Reshape("reshape_p", p, g.Tensor("P^T", bf16, l.sc, l.sct_str));
  if (!gqa) {
    g.Matmul("matmul_pT_dO", pt, d_o, d_v);
  } else {
    auto full = g.Matmul("matmul_pT_dO", pt, d_o,
                         g.Tensor("dV_fullhead", bf16, l.q, l.qh_str));
    g.Reduce("red_dV_head", CUDNN_REDUCE_TENSOR_ADD, full, d_v);
  }

  // dS = scale * P * (dO V^T - softmax_sum).
  auto ds =
      g.Matmul("matmul_dO_VT", d_o, vt, g.Tensor("dP", f32, l.sc, l.sc_str));
  ds = g.Binary("sub_dP_softmax_sum", CUDNN_POINTWISE_SUB, ds, softmax_sum,
                g.Tensor("dP-sum", f32, l.sc, l.sc_str));
  ds = g.Binary("mul_dP_exp_s", CUDNN_POINTWISE_MUL, ds, p,
                g.Tensor("P*(dP-sum)", f32, l.sc, l.sc_str));
  ds = g.Binary("mul_dS_attn_scale", CUDNN_POINTWISE_MUL, ds, scale,
                g.Tensor("dS", f32, l.sc, l.sc_str));

  // dK = dS^T Q.
  auto dst =
      g.Reshape("reshape_dS", ds, g.Tensor("dS^T", bf16, l.sc, l.sct_str));
  if (!gqa) {
    g.Matmul("matmul_dST_Q", dst, q, d_k);
  } else {
    auto full = g.Matmul("matmul_dST_Q", dst, q,
                         g.Tensor("dK_fullhead", bf16, l.q, l.qh_str));
    g.Reduce("red_dK_head", CUDNN_REDUCE_TENSOR_ADD, full, d_k);
  }

  // dQ = dS K, accumulated in fp32 and then converted.
  auto k = g.Reshape("reshape_k", kt, g.Tensor("K", bf16, l.kv, l.kv_str));
  g.Matmul("matmul_dS_K", ds, k, dq_accum);
  g.Unary("identity_dQ", CUDNN_POINTWISE_IDENTITY, dq_accum, d_q);
}

absl::Status Validate(const SdpaShape& sh) {
  if (sh.batch <= 0 || sh.heads <= 0 || sh.kv_heads <= 0 || sh.seq <= 0 ||
      sh.head_dim <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuDNN SDPA: shape ", sh.ToString(), " has a dimension <= 0"));
  }
  if (sh.heads % sh.kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuDNN SDPA: shape ", sh.ToString(), ": kv_heads must divide heads"));
  }
  if (sh.head_dim % 8 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuDNN SDPA: shape ", sh.ToString(),
        ": head_dim must be a multiple of 8 (bf16 rows of 16 bytes)"));
  }
  return absl::OkStatus();
}

absl::Status CheckPointers(
    const char* what,
    std::initializer_list<std::pair<const char*, const void*>> ptrs) {
  for (const auto& [name, p] : ptrs) {
    if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuDNN SDPA ", what, ": ", name,
                       p == nullptr ? " is null" : " is not 16-byte aligned"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string SdpaShape::ToString() const {
  return absl::StrCat("b=", batch, " h=", heads, " kv_h=", kv_heads, " s=", seq,
                      " d=", head_dim, causal ? " causal" : " non-causal");
}

struct CudnnSdpa::Plan {
  DescriptorSet descriptors;  // tensors, operations, graph, configs
  Descriptor plan;            // destroyed before the descriptors above
  int64_t engine = -1;
  int64_t cudnn_workspace = 0;  // what the plan asks for
  // Backward: the fp32 buffers in front of cuDNN's part.
  int64_t dq_accum_offset = 0;
  int64_t softmax_sum_offset = 0;
  int64_t cudnn_offset = 0;
  int64_t workspace = 0;  // total
};

namespace {

// Heuristics (mode A, then FALLBACK) over a finalized graph; the first
// engine config whose execution plan finalizes wins.
absl::Status ChoosePlan(cudnnHandle_t handle, cudnnBackendDescriptor_t graph,
                        const std::string& what, CudnnSdpa::Plan& out) {
  std::string tried;
  int configs = 0;
  for (cudnnBackendHeurMode_t mode :
       {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    const char* mode_name = mode == CUDNN_HEUR_MODE_A ? "A" : "FALLBACK";
    DescriptorSet keep;
    GraphBuilder g(what, &keep);
    const std::string hn = absl::StrCat("heuristics (mode ", mode_name, ")");
    cudnnBackendDescriptor_t heur =
        g.Create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, hn);
    g.Set(heur, hn, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
          "CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH",
          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    g.Set(heur, hn, CUDNN_ATTR_ENGINEHEUR_MODE, "CUDNN_ATTR_ENGINEHEUR_MODE",
          CUDNN_TYPE_HEUR_MODE, 1, &mode);
    g.Finalize(heur, hn);
    if (!g.status().ok()) {
      absl::StrAppend(&tried, "\n  ", g.status().message());
      continue;
    }
    int64_t count = 0;
    cudnnStatus_t s = cudnnBackendGetAttribute(
        heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
        &count, nullptr);
    if (s != CUDNN_STATUS_SUCCESS || count <= 0) {
      absl::StrAppend(&tried, "\n  ", hn, ": no engine configs", WhyNone(s));
      continue;
    }
    std::vector<cudnnBackendDescriptor_t> cfgs(count);
    for (auto& c : cfgs) {
      c = g.Create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
    }
    if (!g.status().ok()) return g.status();
    int64_t got = 0;
    s = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                 cfgs.data());
    if (s != CUDNN_STATUS_SUCCESS || got <= 0) {
      absl::StrAppend(&tried, "\n  ", hn, ": no engine configs", WhyNone(s));
      continue;
    }
    for (int64_t i = 0; i < got; ++i) {
      ++configs;
      cudnnBackendDescriptor_t raw = nullptr;
      s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                       &raw);
      if (s != CUDNN_STATUS_SUCCESS) {
        return absl::InternalError(absl::StrCat(
            what,
            ": execution plan: cudnnBackendCreateDescriptor failed: ", Why(s)));
      }
      Descriptor plan(raw);
      s = cudnnBackendSetAttribute(raw, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                   CUDNN_TYPE_HANDLE, 1, &handle);
      if (s == CUDNN_STATUS_SUCCESS) {
        s = cudnnBackendSetAttribute(
            raw, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]);
      }
      if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(raw);
      if (s != CUDNN_STATUS_SUCCESS) {
        // Keep the first few reasons: they say why the graph did not fit.
        if (configs <= 4) {
          absl::StrAppend(&tried, "\n  ", hn, " config ", i, ": ", Why(s));
        }
        continue;
      }
      int64_t ws = 0, n = 0;
      s = cudnnBackendGetAttribute(raw,
                                   CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                   CUDNN_TYPE_INT64, 1, &n, &ws);
      if (s != CUDNN_STATUS_SUCCESS) {
        return absl::InternalError(absl::StrCat(
            what, ": reading the plan's workspace size failed: ", Why(s)));
      }
      // The engine's index, for logs; failing to read it is not an error.
      cudnnBackendDescriptor_t engine = nullptr;
      if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR,
                                       &engine) == CUDNN_STATUS_SUCCESS) {
        Descriptor own_engine(engine);
        int64_t index = -1;
        if (cudnnBackendGetAttribute(cfgs[i], CUDNN_ATTR_ENGINECFG_ENGINE,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                     &engine) == CUDNN_STATUS_SUCCESS &&
            cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                                     CUDNN_TYPE_INT64, 1, &n,
                                     &index) == CUDNN_STATUS_SUCCESS) {
          out.engine = index;
        }
      }
      out.plan = std::move(plan);
      out.cudnn_workspace = ws;
      // The heuristics and configs live as long as the plan made from them.
      out.descriptors.Absorb(std::move(keep));
      return absl::OkStatus();
    }
  }
  return absl::NotFoundError(
      absl::StrCat(what, ": no cuDNN engine runs this graph (", configs,
                   " engine configs tried)", tried));
}

}  // namespace

CudnnSdpa::CudnnSdpa(cudnnContext* handle, cudaStream_t stream, int rank)
    : handle_(handle),
      bound_stream_(stream),
      rank_(rank),
      workspace_stream_(stream) {}

CudnnSdpa::~CudnnSdpa() {
  plans_.clear();
  // Synchronous free: the stream of the last call may be gone by now.
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cudnnDestroy(handle_);
}

absl::StatusOr<std::unique_ptr<CudnnSdpa>> CudnnSdpa::Create(
    cudaStream_t stream, int rank) {
  // The graph backend API is cuDNN 9's; an older library at run time
  // (LD_LIBRARY_PATH) would fail later with less clear messages.
  const size_t version = cudnnGetVersion();
  if (version < 90000) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank, ": cuDNN ", version,
                     " loaded at run time; SDPA needs "
                     "cuDNN >= 9.0 (built against ",
                     CUDNN_VERSION, ")"));
  }
  cudnnHandle_t handle = nullptr;
  cudnnStatus_t s = cudnnCreate(&handle);
  if (s != CUDNN_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("rank ", rank, ": cudnnCreate failed: ", Why(s)));
  }
  std::unique_ptr<CudnnSdpa> sdpa(new CudnnSdpa(handle, stream, rank));
  s = cudnnSetStream(handle, stream);
  if (s != CUDNN_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("rank ", rank, ": cudnnSetStream failed: ", Why(s)));
  }
  return sdpa;
}

int64_t CudnnSdpa::engine_id(const SdpaShape& sh, bool backward) const {
  auto it = plans_.find(Key{sh.batch, sh.heads, sh.kv_heads, sh.seq,
                            sh.head_dim, sh.causal, backward});
  return it == plans_.end() ? -1 : it->second->engine;
}

absl::StatusOr<CudnnSdpa::Plan*> CudnnSdpa::GetPlan(const SdpaShape& sh,
                                                    bool backward) {
  const Key key{sh.batch,    sh.heads,  sh.kv_heads, sh.seq,
                sh.head_dim, sh.causal, backward};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();

  const std::string what =
      absl::StrCat("rank ", rank_, ": cuDNN SDPA ",
                   backward ? "backward" : "forward", " (", sh.ToString(), ")");
  auto plan = std::make_unique<Plan>();
  GraphBuilder g(what, &plan->descriptors);
  if (backward) {
    BuildBackward(g, sh);
  } else {
    BuildForward(g, sh);
  }
  cudnnBackendDescriptor_t graph =
      g.Create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
  cudnnHandle_t handle = handle_;
  g.Set(graph, "operation graph", CUDNN_ATTR_OPERATIONGRAPH_HANDLE,
        "CUDNN_ATTR_OPERATIONGRAPH_HANDLE", CUDNN_TYPE_HANDLE, 1, &handle);
  std::vector<cudnnBackendDescriptor_t> ops = g.ops();
  g.Set(graph, "operation graph", CUDNN_ATTR_OPERATIONGRAPH_OPS,
        "CUDNN_ATTR_OPERATIONGRAPH_OPS", CUDNN_TYPE_BACKEND_DESCRIPTOR,
        static_cast<int64_t>(ops.size()), ops.data());
  g.Finalize(graph, "operation graph");
  HW_RETURN_IF_ERROR(g.status());
  HW_RETURN_IF_ERROR(ChoosePlan(handle_, graph, what, *plan));

  if (backward) {
    const int64_t rows = sh.batch * sh.heads * sh.seq;
    plan->dq_accum_offset = 0;
    plan->softmax_sum_offset =
        AlignUp(rows * sh.head_dim * static_cast<int64_t>(sizeof(float)));
    plan->cudnn_offset = plan->softmax_sum_offset +
                         AlignUp(rows * static_cast<int64_t>(sizeof(float)));
  }
  plan->workspace = plan->cudnn_offset + plan->cudnn_workspace;
  Plan* raw = plan.get();
  plans_.emplace(key, std::move(plan));
  return raw;
}

absl::Status CudnnSdpa::EnsureWorkspace(int64_t bytes, cudaStream_t stream) {
  if (bytes > workspace_bytes_) {
    // Stream-ordered: the old buffer is released after its last user's
    // work, and the pool does not hand it out before that.
    if (workspace_ != nullptr) {
      CUDA_CHECK(cudaFreeAsync(workspace_, workspace_stream_));
      workspace_ = nullptr;
      workspace_bytes_ = 0;
    }
    const int64_t grown = AlignUp(bytes);
    CUDA_CHECK(cudaMallocAsync(&workspace_, grown, stream));
    workspace_bytes_ = grown;
  }
  workspace_stream_ = stream;
  return absl::OkStatus();
}

absl::Status CudnnSdpa::Bind(cudaStream_t stream) {
  if (stream == bound_stream_) return absl::OkStatus();
  cudnnStatus_t s = cudnnSetStream(handle_, stream);
  if (s != CUDNN_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("rank ", rank_, ": cudnnSetStream failed: ", Why(s)));
  }
  bound_stream_ = stream;
  return absl::OkStatus();
}

namespace {

absl::Status Execute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                     const std::string& what, std::vector<int64_t> uids,
                     std::vector<void*> ptrs, void* workspace) {
  DescriptorSet keep;
  GraphBuilder g(what, &keep);
  const std::string vn = "variant pack";
  cudnnBackendDescriptor_t pack =
      g.Create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, vn);
  g.Set(pack, vn, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
        "CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS", CUDNN_TYPE_INT64,
        static_cast<int64_t>(uids.size()), uids.data());
  g.Set(pack, vn, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
        "CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS", CUDNN_TYPE_VOID_PTR,
        static_cast<int64_t>(ptrs.size()), ptrs.data());
  g.Set(pack, vn, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
        "CUDNN_ATTR_VARIANT_PACK_WORKSPACE", CUDNN_TYPE_VOID_PTR, 1,
        &workspace);
  g.Finalize(pack, vn);
  HW_RETURN_IF_ERROR(g.status());
  cudnnStatus_t s = cudnnBackendExecute(handle, plan, pack);
  if (s != CUDNN_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat(what, ": cudnnBackendExecute failed: ", Why(s)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CudnnSdpa::Forward(const SdpaShape& sh, const void* q,
                                const void* k, const void* v, void* o,
                                float* stats, cudaStream_t stream) {
  HW_RETURN_IF_ERROR(Validate(sh));
  HW_RETURN_IF_ERROR(CheckPointers(
      "forward", {{"Q", q}, {"K", k}, {"V", v}, {"O", o}, {"stats", stats}}));
  absl::StatusOr<Plan*> plan = GetPlan(sh, /*backward=*/false);
  if (!plan.ok()) return plan.status();
  HW_RETURN_IF_ERROR(EnsureWorkspace((*plan)->workspace, stream));
  HW_RETURN_IF_ERROR(Bind(stream));

  // By-value scalars: read from these host variables during the call.
  float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
  float neg_inf = -INFINITY;
  std::vector<int64_t> uids = {kQ, kK, kV, kO, kStats, kScale};
  std::vector<void*> ptrs = {const_cast<void*>(q),
                             const_cast<void*>(k),
                             const_cast<void*>(v),
                             o,
                             stats,
                             &scale};
  if (sh.causal) {
    uids.push_back(kNegInf);
    ptrs.push_back(&neg_inf);
  }
  return Execute(handle_, (*plan)->plan.get(),
                 absl::StrCat("rank ", rank_, ": cuDNN SDPA forward (",
                              sh.ToString(), ")"),
                 std::move(uids), std::move(ptrs), workspace_);
}

absl::Status CudnnSdpa::Backward(const SdpaShape& sh, const void* q,
                                 const void* k, const void* v, const void* o,
                                 const void* d_o, const float* stats, void* d_q,
                                 void* d_k, void* d_v, cudaStream_t stream) {
  HW_RETURN_IF_ERROR(Validate(sh));
  HW_RETURN_IF_ERROR(CheckPointers("backward", {{"Q", q},
                                                {"K", k},
                                                {"V", v},
                                                {"O", o},
                                                {"dO", d_o},
                                                {"stats", stats},
                                                {"dQ", d_q},
                                                {"dK", d_k},
                                                {"dV", d_v}}));
  absl::StatusOr<Plan*> plan = GetPlan(sh, /*backward=*/true);
  if (!plan.ok()) return plan.status();
  const Plan& p = **plan;
  HW_RETURN_IF_ERROR(EnsureWorkspace(p.workspace, stream));
  HW_RETURN_IF_ERROR(Bind(stream));

  char* ws = static_cast<char*>(workspace_);
  float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
  float neg_inf = -INFINITY;
  float one = 1.0f;
  std::vector<int64_t> uids = {kQ,     kK,          kV,      kO,  kDO,
                               kStats, kDQ,         kDK,     kDV, kScale,
                               kOne,   kSoftmaxSum, kDQAccum};
  std::vector<void*> ptrs = {const_cast<void*>(q),
                             const_cast<void*>(k),
                             const_cast<void*>(v),
                             const_cast<void*>(o),
                             const_cast<void*>(d_o),
                             const_cast<float*>(stats),
                             d_q,
                             d_k,
                             d_v,
                             &scale,
                             &one,
                             ws + p.softmax_sum_offset,
                             ws + p.dq_accum_offset};
  if (sh.causal) {
    uids.push_back(kNegInf);
    ptrs.push_back(&neg_inf);
  }
  return Execute(handle_, p.plan.get(),
                 absl::StrCat("rank ", rank_, ": cuDNN SDPA backward (",
                              sh.ToString(), ")"),
                 std::move(uids), std::move(ptrs), ws + p.cudnn_offset);
}

}  // namespace shardsim::hw

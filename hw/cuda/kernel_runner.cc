#include "hw/cuda/kernel_runner.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "hw/cuda/check.h"
#include "hw/cuda/step_kernels.h"
#include "hw/runtime/kernel_work.h"

#if defined(SHARDSIM_HAVE_CUDNN)
#include "hw/cuda/cudnn_sdpa.h"
#endif

namespace shardsim::hw {
namespace {

constexpr int64_t kAlign = 256;
int64_t RoundUp(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// torch.optim.AdamW's defaults (lr 1e-3, betas (0.9, 0.999), eps 1e-8,
// weight_decay 1e-2); the values do not change the kernel's time.
constexpr float kLr = 1e-3f, kBeta1 = 0.9f, kBeta2 = 0.999f, kEps = 1e-8f,
                kWeightDecay = 1e-2f;

}  // namespace

absl::StatusOr<std::unique_ptr<KernelRunner>> KernelRunner::Create(
    cudaStream_t stream, cublasHandle_t cublas, int rank) {
  std::unique_ptr<KernelRunner> r(new KernelRunner(stream, cublas, rank));
  return r;
}

KernelRunner::KernelRunner(cudaStream_t stream, cublasHandle_t cublas, int rank)
    : stream_(stream), cublas_(cublas), rank_(rank) {}

KernelRunner::~KernelRunner() {
  if (workspace_ != nullptr) cudaFree(workspace_);
}

int64_t KernelRunner::held_bytes() const {
  int64_t held = workspace_bytes_;
#if defined(SHARDSIM_HAVE_CUDNN)
  if (sdpa_ != nullptr) held += sdpa_->workspace_bytes();
#endif
  return held;
}

absl::Status KernelRunner::Reserve(int64_t bytes) {
  if (bytes <= workspace_bytes_) return absl::OkStatus();
  if (workspace_ != nullptr) {
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    CUDA_CHECK(cudaFree(workspace_));
    workspace_ = nullptr;
    workspace_bytes_ = 0;
  }
  const cudaError_t e = cudaMalloc(&workspace_, bytes);
  if (e != cudaSuccess) {
    size_t free = 0, total = 0;
    cudaGetLastError();
    cudaMemGetInfo(&free, &total);
    workspace_ = nullptr;
    return absl::ResourceExhaustedError(absl::StrCat(
        "rank ", rank_, ": out of GPU memory allocating the kernel workspace: ",
        bytes, " bytes wanted, ", free, " free of ", total, " (",
        cudaGetErrorString(e), ")"));
  }
  workspace_bytes_ = bytes;
  CUDA_CHECK(LaunchFillBf16(workspace_, bytes / 2, 0x5eed + rank_, stream_));
  return absl::OkStatus();
}

void KernelRunner::SetOptimizerStates(void* states, int64_t bytes) {
  states_ = static_cast<char*>(states);
  states_bytes_ = bytes;
  optimizer_offset_ = 0;
}

absl::Status KernelRunner::Carve(std::initializer_list<int64_t> sizes,
                                 char** out) {
  int64_t at = 0;
  int i = 0;
  for (int64_t s : sizes) {
    out[i++] = static_cast<char*>(workspace_) + at;
    at += RoundUp(s);
  }
  if (at > workspace_bytes_) {
    return absl::InternalError(
        absl::StrCat("rank ", rank_, ": a kernel needs ", at,
                     " bytes of operands, the "
                     "workspace has ",
                     workspace_bytes_, " (Reserve it from the schedule)"));
  }
  return absl::OkStatus();
}

absl::Status KernelRunner::Run(const Kernel& kernel) {
  absl::Status s;
  switch (kernel.body_case()) {
    case Kernel::kGemm:
      s = RunGemm(kernel.gemm());
      break;
    case Kernel::kAttention:
      s = RunAttention(kernel.attention());
      break;
    case Kernel::kMemory:
      s = RunMemory(kernel.memory());
      break;
    case Kernel::kOptimizer:
      s = RunOptimizer(kernel.optimizer());
      break;
    default:
      s = absl::InvalidArgumentError("kernel has no body");
  }
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("kernel \"", kernel.name(),
                                               "\": ", s.message()));
  }
  return s;
}

// Row-major C (m x n) through column-major cuBLAS: C^T = op(B)^T op(A)^T,
// so cuBLAS's "A" is the row-major B and its "B" is the row-major A.
//  FORWARD  C = X W^T, X m x k, W n x k:  (T, N), lda k, ldb k
//  DGRAD    C = dY W,  dY m x k, W k x n: (N, N), lda n, ldb k
//  WGRAD    C = dY^T X, dY k x m, X k x n: (N, T), lda n, ldb m
//  BATCHED  as FORWARD per product (scores Q K^T; the context P V's
//           operands are the same sizes, and PyTorch's bmm picks the
//           layout by strides, not by cost).
absl::Status KernelRunner::RunGemm(const Gemm& g) {
  if (g.fp8()) {
    return absl::UnimplementedError(
        "FP8 GEMMs (kernels.float8) are simulated only: shardsim-hw runs "
        "bf16 GEMMs");
  }
  const int64_t batch = std::max<int64_t>(1, g.batch());
  char* p[3];
  const std::vector<int64_t> ops = KernelOperands([&] {
    Kernel k;
    *k.mutable_gemm() = g;
    return k;
  }());
  HW_RETURN_IF_ERROR(Carve({ops[0], ops[1], ops[2]}, p));
  const void* a = p[0];  // the row-major left operand
  const void* b = p[1];  // the row-major right operand
  void* c = p[2];
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  int64_t lda = g.k(), ldb = g.k();
  switch (g.layout()) {
    case Gemm::DGRAD:
      ta = CUBLAS_OP_N;
      tb = CUBLAS_OP_N;
      lda = g.n();
      ldb = g.k();
      break;
    case Gemm::WGRAD:
      ta = CUBLAS_OP_N;
      tb = CUBLAS_OP_T;
      lda = g.n();
      ldb = g.m();
      break;
    default:
      break;  // FORWARD, BATCHED
  }
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      cublas_, ta, tb, static_cast<int>(g.n()), static_cast<int>(g.m()),
      static_cast<int>(g.k()), &alpha, b, CUDA_R_16BF, static_cast<int>(lda),
      g.k() * g.n(), a, CUDA_R_16BF, static_cast<int>(ldb), g.m() * g.k(),
      &beta, c, CUDA_R_16BF, static_cast<int>(g.n()), g.m() * g.n(),
      static_cast<int>(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

absl::Status KernelRunner::RunAttention(const Attention& a) {
#if defined(SHARDSIM_HAVE_CUDNN)
  if (sdpa_ == nullptr) {
    absl::StatusOr<std::unique_ptr<CudnnSdpa>> s =
        CudnnSdpa::Create(stream_, rank_);
    if (!s.ok()) return s.status();
    sdpa_ = *std::move(s);
  }
  SdpaShape shape;
  shape.batch = a.batch();
  shape.heads = a.heads();
  shape.kv_heads = a.kv_heads() > 0 ? a.kv_heads() : a.heads();
  shape.seq = a.seq();
  shape.head_dim = a.head_dim();
  shape.causal = a.causal();
  Kernel k;
  *k.mutable_attention() = a;
  const std::vector<int64_t> s = KernelOperands(k);
  char* p[9];
  if (!a.backward()) {
    HW_RETURN_IF_ERROR(Carve({s[0], s[1], s[2], s[3], s[4]}, p));
    return sdpa_->Forward(shape, p[0], p[1], p[2], p[3],
                          reinterpret_cast<float*>(p[4]), stream_);
  }
  HW_RETURN_IF_ERROR(
      Carve({s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8]}, p));
  // The statistics are the forward's in a real step; a random workspace
  // would hold garbage there, so they are made by a forward first, outside
  // the timed kernel only on the first call of a shape.
  if (primed_.insert(shape.ToString()).second) {
    HW_RETURN_IF_ERROR(sdpa_->Forward(shape, p[0], p[1], p[2], p[3],
                                      reinterpret_cast<float*>(p[4]), stream_));
  }
  return sdpa_->Backward(shape, p[0], p[1], p[2], p[3], p[5],
                         reinterpret_cast<const float*>(p[4]), p[6], p[7], p[8],
                         stream_);
#else
  (void)a;
  return absl::FailedPreconditionError(
      "fused attention needs cuDNN >= 9, and this shardsim-hw was built "
      "without it (set CUDNN_HOME and rebuild), or run the scenario with "
      "flash_attention: false (materialised attention: GEMMs and softmax)");
#endif
}

absl::Status KernelRunner::RunMemory(const MemoryKernel& m) {
  Kernel k;
  *k.mutable_memory() = m;
  const std::vector<int64_t> s = KernelOperands(k);
  char* p[2];
  HW_RETURN_IF_ERROR(Carve({s[0], s[1]}, p));
  for (const MoveLaunch& l : MoveLaunches(m)) {
    CUDA_CHECK(LaunchMove(l.vector, p[0], p[1], l.bytes, stream_));
  }
  return absl::OkStatus();
}

// Adam over the next `params` of the OS shard: w, m, v as three fp32
// arrays side by side. A strategy whose OS shard is smaller than the
// optimizer ops ask for (none on this rank) is a plan error.
absl::Status KernelRunner::RunOptimizer(const OptimizerKernel& o) {
  const int64_t n = o.params();
  const int64_t need = 3 * 4 * n;
  if (states_ == nullptr || optimizer_offset_ + need > states_bytes_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank_, ": the optimizer steps ", n, " parameters at byte ",
        optimizer_offset_, " of an OS shard of ", states_bytes_,
        " bytes (12 bytes a parameter: w, m, v)"));
  }
  char* base = states_ + optimizer_offset_;
  optimizer_offset_ += need;
  char* g[1];
  HW_RETURN_IF_ERROR(Carve({n * 4}, g));
  if (optimizer_offset_ == need) ++step_;  // the first layer starts a step
  CUDA_CHECK(LaunchAdam(
      reinterpret_cast<float*>(base), reinterpret_cast<const float*>(g[0]),
      reinterpret_cast<float*>(base + 4 * n),
      reinterpret_cast<float*>(base + 8 * n), n, kLr, kBeta1, kBeta2, kEps,
      kWeightDecay, std::max(step_, 1), stream_));
  return absl::OkStatus();
}

}  // namespace shardsim::hw

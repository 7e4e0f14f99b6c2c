// Runs the kernels of the IR's compute ops (sim/schema/kernel.proto) on a
// GPU, each as the kernel it names with its shapes:
//  - Gemm: cuBLAS bf16 (fp32 accumulate) of the layer's m, n, k in its
//    layout (forward x W^T, data gradient dY W, weight gradient dY^T X,
//    batched attention products);
//  - Attention: cuDNN 9's fused SDPA, forward or backward (cudnn_sdpa.h);
//    a build without cuDNN refuses it with an error naming the fix;
//  - MemoryKernel: `launches` launches of step_kernels.h's mover, the
//    vector bytes on the vectorized path, the general bytes on the general
//    one;
//  - OptimizerKernel: fused Adam over this rank's real OS shard (fp32
//    master weights, m, v; the kernel's params, layer after layer through
//    the shard) and an fp32 gradient.
// Operands other than the OS shard live in one workspace, sized before the
// step to the largest kernel's operands (WorkspaceBytes), so no kernel
// allocates while the step is timed. Data is random; shapes and bytes are
// the model's.
#ifndef SHARDSIM_HW_CUDA_KERNEL_RUNNER_H_
#define SHARDSIM_HW_CUDA_KERNEL_RUNNER_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/schema/kernel.pb.h"

namespace shardsim::hw {

class CudnnSdpa;

class KernelRunner {
 public:
  // One per stream; `cublas` is bound to `stream`. `rank` labels errors.
  static absl::StatusOr<std::unique_ptr<KernelRunner>> Create(
      cudaStream_t stream, cublasHandle_t cublas, int rank);
  ~KernelRunner();
  KernelRunner(const KernelRunner&) = delete;
  KernelRunner& operator=(const KernelRunner&) = delete;

  // Allocates (once, growing only) a workspace of `bytes`, random-filled.
  absl::Status Reserve(int64_t bytes);
  int64_t workspace_bytes() const { return workspace_bytes_; }
  // Device memory the runner holds: the workspace, cuDNN's workspace.
  int64_t held_bytes() const;

  // The OS shard (fp32 w, m, v, 12 bytes a parameter) optimizer kernels
  // step through; nullptr when the strategy keeps none on this rank.
  void SetOptimizerStates(void* states, int64_t bytes);
  // Back to the first layer's states (each step).
  void Rewind() { optimizer_offset_ = 0; }

  absl::Status Run(const Kernel& kernel);

 private:
  KernelRunner(cudaStream_t stream, cublasHandle_t cublas, int rank);
  absl::Status RunGemm(const Gemm& g);
  absl::Status RunAttention(const Attention& a);
  absl::Status RunMemory(const MemoryKernel& m);
  absl::Status RunOptimizer(const OptimizerKernel& o);
  // `count` pieces of the workspace, each of its own size, 256-aligned.
  absl::Status Carve(std::initializer_list<int64_t> sizes, char** out);

  cudaStream_t stream_;
  cublasHandle_t cublas_;
  const int rank_;
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
  char* states_ = nullptr;
  int64_t states_bytes_ = 0;
  int64_t optimizer_offset_ = 0;
  int step_ = 0;
#if defined(SHARDSIM_HAVE_CUDNN)
  std::unique_ptr<CudnnSdpa> sdpa_;
  std::set<std::string> primed_;  // shapes whose statistics are real
#endif
};

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_CUDA_KERNEL_RUNNER_H_

// Fused scaled-dot-product attention (forward and backward) through the
// cuDNN 9 graph backend API (cudnn_backend.h: descriptors, heuristics,
// execution plans), with no cudnn_frontend. The graphs are the ones
// cudnn_frontend's CompositeSDPANode / CompositeSDPABackwardNode expand to
// (include/cudnn_frontend/node/scaled_dot_product_flash_attention.h), which
// cuDNN's heuristics map onto its fused flash-attention engines.
//
// Layout: Q, O, dQ, dO are [batch, seq, heads, head_dim] and K, V, dK, dV
// are [batch, seq, kv_heads, head_dim] (BSHD, what a fused QKV projection
// writes), bf16, 16-byte aligned; the graphs see them as (b, h, s, d)
// through strides. Softmax statistics (log-sum-exp of the scaled, masked
// scores) are fp32 [batch, heads, seq, 1], written by Forward for Backward.
// Scale 1/sqrt(head_dim); causal = top-left aligned (query i sees keys
// 0..i). kv_heads may divide heads (GQA/MQA): dK and dV are summed over
// the query heads that share a kv head.
//
// Plans are built once per (shape, direction) and cached. One workspace
// serves every call; it grows (stream-ordered) when a plan needs more, so
// calls on one instance must be ordered (one stream, or synchronized).
// Not thread-safe.
#ifndef SHARDSIM_HW_CUDA_CUDNN_SDPA_H_
#define SHARDSIM_HW_CUDA_CUDNN_SDPA_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct cudnnContext;

namespace shardsim::hw {

struct SdpaShape {
  int64_t batch = 0;
  int heads = 0;
  int kv_heads = 0;  // divides heads
  int64_t seq = 0;   // queries and keys
  int head_dim = 0;  // a multiple of 8 (16-byte rows)
  bool causal = true;

  std::string ToString() const;
};

class CudnnSdpa {
 public:
  // Makes the cuDNN handle (on the current CUDA device) bound to `stream`.
  // `rank` only labels error messages, as check.h's macros do.
  static absl::StatusOr<std::unique_ptr<CudnnSdpa>> Create(cudaStream_t stream,
                                                           int rank = 0);
  ~CudnnSdpa();
  CudnnSdpa(const CudnnSdpa&) = delete;
  CudnnSdpa& operator=(const CudnnSdpa&) = delete;

  // O = softmax(scale Q K^T [+ causal mask]) V; stats = the row log-sum-exp.
  absl::Status Forward(const SdpaShape& shape, const void* q, const void* k,
                       const void* v, void* o, float* stats,
                       cudaStream_t stream);

  // dQ, dK, dV from the forward's inputs, O and stats, and dO. Overwrites
  // dQ, dK, dV (no accumulation).
  absl::Status Backward(const SdpaShape& shape, const void* q, const void* k,
                        const void* v, const void* o, const void* d_o,
                        const float* stats, void* d_q, void* d_k, void* d_v,
                        cudaStream_t stream);

  // Device memory this instance holds (the workspace), for callers that
  // count memory.
  int64_t workspace_bytes() const { return workspace_bytes_; }
  // The cuDNN engine a shape's plan runs (its global index), or -1 when the
  // plan is not built yet: for logs.
  int64_t engine_id(const SdpaShape& shape, bool backward) const;

  struct Plan;  // a finalized graph: cudnn_sdpa.cc

 private:
  CudnnSdpa(cudnnContext* handle, cudaStream_t stream, int rank);
  absl::StatusOr<Plan*> GetPlan(const SdpaShape& shape, bool backward);
  absl::Status EnsureWorkspace(int64_t bytes, cudaStream_t stream);
  absl::Status Bind(cudaStream_t stream);

  using Key = std::tuple<int64_t, int, int, int64_t, int, bool, bool>;
  cudnnContext* handle_ = nullptr;
  cudaStream_t bound_stream_ = nullptr;
  int rank_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
  cudaStream_t workspace_stream_ = nullptr;  // its last user, for the free
};

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_CUDA_CUDNN_SDPA_H_

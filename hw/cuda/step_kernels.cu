#include <cuda_bf16.h>

#include "hw/cuda/step_kernels.h"

namespace shardsim::hw {
namespace {

constexpr int kThreads = 256;

// Enough blocks to fill the GPU several times over with a grid-stride loop.
int Blocks(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

__global__ void MoveVector(const uint4* src, uint4* dst, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    uint4 x = src[i];
    x.x ^= 0x00010001u;  // touch the data, as an op would
    dst[i] = x;
  }
}

// One bf16 at a time through a (row, column) offset computation, as
// TensorIterator's general path indexes each element.
__global__ void MoveGeneral(const __nv_bfloat16* src, __nv_bfloat16* dst,
                            int64_t n, int64_t cols) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    const int64_t row = i / cols, col = i - row * cols;
    const int64_t at = row * cols + col;
    dst[at] = __float2bfloat16(__bfloat162float(src[at]) * 1.0009765625f);
  }
}

__global__ void AdamKernel(float* w, const float* g, float* m, float* v,
                           int64_t n, float lr, float beta1, float beta2,
                           float eps, float weight_decay, float bc1,
                           float bc2) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    const float gi = g[i];
    const float mi = beta1 * m[i] + (1 - beta1) * gi;
    const float vi = beta2 * v[i] + (1 - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float update = (mi / bc1) / (sqrtf(vi / bc2) + eps);
    w[i] = w[i] - lr * (update + weight_decay * w[i]);
  }
}

__device__ uint32_t Hash(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__global__ void FillBf16(__nv_bfloat16* dst, int64_t n, uint32_t seed) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    const uint32_t h = Hash(static_cast<uint64_t>(i) * 2654435761u + seed);
    dst[i] =
        __float2bfloat16(static_cast<float>(h) * (2.0f / 4294967296.0f) - 1.0f);
  }
}

}  // namespace

cudaError_t LaunchMove(bool vector, const void* src, void* dst, int64_t bytes,
                       cudaStream_t stream) {
  const int64_t half = bytes / 2;
  if (half <= 0) return cudaSuccess;
  if (vector) {
    const int64_t n = half / 16;
    if (n > 0) {
      MoveVector<<<Blocks(n), kThreads, 0, stream>>>(
          static_cast<const uint4*>(src), static_cast<uint4*>(dst), n);
    }
  } else {
    const int64_t n = half / 2;
    if (n > 0) {
      MoveGeneral<<<Blocks(n), kThreads, 0, stream>>>(
          static_cast<const __nv_bfloat16*>(src),
          static_cast<__nv_bfloat16*>(dst), n, 4096);
    }
  }
  return cudaGetLastError();
}

cudaError_t LaunchAdam(float* w, const float* g, float* m, float* v, int64_t n,
                       float lr, float beta1, float beta2, float eps,
                       float weight_decay, int step, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const float bc1 = 1 - powf(beta1, static_cast<float>(step));
  const float bc2 = 1 - powf(beta2, static_cast<float>(step));
  AdamKernel<<<Blocks(n), kThreads, 0, stream>>>(
      w, g, m, v, n, lr, beta1, beta2, eps, weight_decay, bc1, bc2);
  return cudaGetLastError();
}

cudaError_t LaunchFillBf16(void* dst, int64_t count, uint32_t seed,
                           cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  FillBf16<<<Blocks(count), kThreads, 0, stream>>>(
      static_cast<__nv_bfloat16*>(dst), count, seed);
  return cudaGetLastError();
}

}  // namespace shardsim::hw

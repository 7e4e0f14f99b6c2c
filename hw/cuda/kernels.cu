#include <cuda_bf16.h>

#include "hw/cuda/kernels.h"

namespace shardsim::hw {
namespace {

template <typename T>
__global__ void AddKernel(T* dst, const T* src, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    dst[i] = dst[i] + src[i];
  }
}

// bf16: add in float, round once.
__global__ void AddBf16Kernel(__nv_bfloat16* dst, const __nv_bfloat16* src,
                              int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    dst[i] =
        __float2bfloat16(__bfloat162float(dst[i]) + __bfloat162float(src[i]));
  }
}

}  // namespace

cudaError_t LaunchAdd(ElemType type, void* dst, const void* src, int64_t count,
                      cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  int64_t blocks64 = (count + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(blocks64 < 4096 ? blocks64 : 4096);
  switch (type) {
    case ElemType::kFloat32:
      AddKernel<float><<<blocks, kThreads, 0, stream>>>(
          static_cast<float*>(dst), static_cast<const float*>(src), count);
      break;
    case ElemType::kBfloat16:
      AddBf16Kernel<<<blocks, kThreads, 0, stream>>>(
          static_cast<__nv_bfloat16*>(dst),
          static_cast<const __nv_bfloat16*>(src), count);
      break;
    case ElemType::kInt8:
      AddKernel<int8_t><<<blocks, kThreads, 0, stream>>>(
          static_cast<int8_t*>(dst), static_cast<const int8_t*>(src), count);
      break;
    case ElemType::kUint8:
      AddKernel<uint8_t><<<blocks, kThreads, 0, stream>>>(
          static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), count);
      break;
  }
  return cudaGetLastError();
}

}  // namespace shardsim::hw

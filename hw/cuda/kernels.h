// Device kernels of the CUDA backend, callable from host C++ (kernels.cu).
// No absl here: kernels.cu is compiled by nvcc alone.
#ifndef SHARDSIM_HW_CUDA_KERNELS_H_
#define SHARDSIM_HW_CUDA_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace shardsim::hw {

// Element types a plan's reduce adds.
enum class ElemType { kFloat32, kBfloat16, kInt8, kUint8 };

// dst[i] += src[i] for i < count, on `stream`. dst and src may not overlap.
cudaError_t LaunchAdd(ElemType type, void* dst, const void* src, int64_t count,
                      cudaStream_t stream);

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_CUDA_KERNELS_H_

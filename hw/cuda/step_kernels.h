// The training step's own device kernels (step_kernels.cu): the
// memory-bound ops of a layer and the optimizer. No absl here: nvcc alone
// compiles the .cu.
#ifndef SHARDSIM_HW_CUDA_STEP_KERNELS_H_
#define SHARDSIM_HW_CUDA_STEP_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace shardsim::hw {

// A memory-bound op's HBM traffic (kernel.proto's MemoryKernel): reads
// bytes / 2 from `src` and writes bytes / 2 to `dst`, as an elementwise op
// with its output the size of its input does.
//  - vector: PyTorch's vectorized elementwise path, 16-byte accesses of
//    contiguous bf16 (ATen's vectorized_elementwise_kernel, vec size 8);
//  - general: its TensorIterator path for strided, broadcast or cast
//    operands, one 2-byte element per access through a computed offset
//    (ATen's unrolled_elementwise_kernel with OffsetCalculator).
// `src` and `dst` hold at least bytes / 2 each.
cudaError_t LaunchMove(bool vector, const void* src, void* dst, int64_t bytes,
                       cudaStream_t stream);

// Fused Adam(W) over `n` fp32 master weights, as apex/torch's fused Adam:
// reads w, g, m, v, writes w, m, v (28 bytes a parameter).
cudaError_t LaunchAdam(float* w, const float* g, float* m, float* v, int64_t n,
                       float lr, float beta1, float beta2, float eps,
                       float weight_decay, int step, cudaStream_t stream);

// Random bf16 values in [-1, 1) (a hash of the index): data can be random,
// but not NaN, which would slow nothing down yet hide a broken kernel.
cudaError_t LaunchFillBf16(void* dst, int64_t count, uint32_t seed,
                           cudaStream_t stream);

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_CUDA_STEP_KERNELS_H_

// The CUDA backend's environment report (Backend::Environment): the GPU,
// CUDA driver and runtime, NCCL and cuBLAS versions, NCCL_* environment
// variables, peer access between local GPUs and their PCI bus ids.
#ifndef SHARDSIM_HW_CUDA_ENVIRONMENT_H_
#define SHARDSIM_HW_CUDA_ENVIRONMENT_H_

#include <cublas_v2.h>

#include <string>
#include <utility>
#include <vector>

#include "sim/base/group.h"

namespace shardsim::hw {

// Key-value pairs for `rank` of `world` driving CUDA device `device`.
// `cublas` may be null (no cublas.version then); `compute` describes how
// compute ops run.
std::vector<std::pair<std::string, std::string>> CudaEnvironment(
    int device, int rank, int world, const Mesh& mesh, cublasHandle_t cublas,
    const std::string& compute);

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_CUDA_ENVIRONMENT_H_

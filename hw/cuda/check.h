// Error checking for the CUDA backend: every CUDA, cuBLAS, NCCL and MPI
// call goes through one of the macros below, which turn a failure into an
// absl::Status naming the rank and the call as written, e.g.
//   "rank 3: ncclCommSplit(world_, color, rank_, &comm, nullptr) failed:
//    unhandled system error (run with NCCL_DEBUG=WARN for details)".
// The macros `return` the status from the enclosing function, which must
// return absl::Status or absl::StatusOr<T>. They need a variable or member
// `rank_` (int) in scope.
#ifndef SHARDSIM_HW_CUDA_CHECK_H_
#define SHARDSIM_HW_CUDA_CHECK_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace shardsim::hw::cuda_check {

inline absl::Status Fail(int rank, const char* call, const std::string& why) {
  return absl::InternalError(
      absl::StrCat("rank ", rank, ": ", call, " failed: ", why));
}

inline absl::Status Check(cudaError_t e, int rank, const char* call) {
  if (e == cudaSuccess) return absl::OkStatus();
  return Fail(
      rank, call,
      absl::StrCat(cudaGetErrorString(e), " (", cudaGetErrorName(e), ")"));
}

inline const char* CublasText(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "architecture mismatch";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "not supported";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "license error";
  }
  return "unknown cuBLAS status";
}

inline absl::Status Check(cublasStatus_t s, int rank, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return Fail(rank, call, CublasText(s));
}

inline absl::Status Check(ncclResult_t r, int rank, const char* call) {
  if (r == ncclSuccess) return absl::OkStatus();
  return Fail(rank, call,
              absl::StrCat(ncclGetErrorString(r),
                           " (run with NCCL_DEBUG=WARN for details)"));
}

// MPI calls return int; tagged so that overloads do not collide with int.
struct MpiResult {
  int code;
};
inline absl::Status Check(MpiResult r, int rank, const char* call) {
  if (r.code == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(r.code, text, &len) != MPI_SUCCESS) len = 0;
  return Fail(
      rank, call,
      len > 0 ? std::string(text, len) : absl::StrCat("MPI error ", r.code));
}

}  // namespace shardsim::hw::cuda_check

#define SHARDSIM_HW_CHECK_IMPL(expr, text)                      \
  do {                                                          \
    ::absl::Status shardsim_hw_status_ =                        \
        ::shardsim::hw::cuda_check::Check((expr), rank_, text); \
    if (!shardsim_hw_status_.ok()) return shardsim_hw_status_;  \
  } while (0)

#define CUDA_CHECK(call) SHARDSIM_HW_CHECK_IMPL(call, #call)
#define CUBLAS_CHECK(call) SHARDSIM_HW_CHECK_IMPL(call, #call)
#define NCCL_CHECK(call) SHARDSIM_HW_CHECK_IMPL(call, #call)
#define MPI_CHECK(call) \
  SHARDSIM_HW_CHECK_IMPL(::shardsim::hw::cuda_check::MpiResult{call}, #call)

// Propagates a Status from a helper.
#define HW_RETURN_IF_ERROR(expr)                               \
  do {                                                         \
    ::absl::Status shardsim_hw_status_ = (expr);               \
    if (!shardsim_hw_status_.ok()) return shardsim_hw_status_; \
  } while (0)

#endif  // SHARDSIM_HW_CUDA_CHECK_H_

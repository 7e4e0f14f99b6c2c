// Kernel measurements, and the fit of a platform's KernelModel to them.
//
// A sample is a list of kernels (kernel.proto) and the seconds they took
// together on one GPU: one GEMM, one attention, one memory-bound op, an
// optimizer step, one of a block's elementwise ops in a kernel style, or a
// whole block's forward or backward. Files:
//  - a PyTorch reference in the layout of
//    validate/reference/h100_calibration.json (layers, gemm, adam,
//    copy_gbps_rw) or of validate/reference/torch_reference.py's output
//    (blocks, gemm, attention, memory, adam): a block row becomes the
//    kernel list of sim/model/kernels.h for its shape (EAGER, fused q/k/v,
//    causal flash attention, as those files measure);
//  - ops (validate/reference/a100_liger_kernels.json): RMSNorm or rotary,
//    EAGER or FUSED, forward or backward, at tokens x h (rotary: heads
//    and kv_heads), each the kernels that op has in a block of that style;
//  - a Chrome trace whose events carry their kernels (args "kernels", the
//    Kernel messages in protobuf's JSON mapping), as shardsim-hw writes.
// `PATH:only=gemm,attention,...` keeps the samples of those families
// (gemm, attention, memory, optimizer, block, op).
//
// The fit, family by family, each on the samples of that family alone,
// minimising the squared log error of KernelSeconds:
//   vector_fraction (memory samples with vector bytes only),
//   optimizer_fraction, gemm_efficiency and gemm_k_overhead, attention
//   (forward and backward apart: efficiency and seq), then
//   general_fraction on the samples that move general bytes (blocks
//   included) with everything else as fitted. A parameter the samples
//   cannot identify (no samples, one k, one seq) keeps the base value, and
//   the report says so.
#ifndef SHARDSIM_VALIDATE_KERNELS_H_
#define SHARDSIM_VALIDATE_KERNELS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/schema/kernel.pb.h"
#include "sim/schema/platform.pb.h"
#include "validate/calibrate.h"

namespace shardsim {

struct KernelSample {
  std::string file;
  std::string what;    // "gemm 2048x4096x4096", "block 4096h 4x512 forward"
  std::string family;  // gemm, attention, memory, optimizer, block
  std::vector<Kernel> kernels;
  double seconds = 0;
};

// True when the file is kernel measurements (a reference JSON or a trace
// with kernels), not collectives.
bool IsKernelFile(const std::string& path);

// Reads PATH[:only=FAMILY,...]. Errors name the file and the entry.
absl::StatusOr<std::vector<KernelSample>> ReadKernelSamples(
    const std::string& spec);

struct KernelFitResult {
  KernelModel model;
  std::vector<FittedParameter> parameters;
};

absl::StatusOr<KernelFitResult> FitKernelModel(
    const Platform& base, const std::vector<KernelSample>& samples);

// Predicted against measured, per sample.
struct KernelCheck {
  const KernelSample* sample = nullptr;
  double predicted = 0;
  double error = 0;  // predicted / measured - 1
};
std::vector<KernelCheck> CheckKernels(const Platform& platform,
                                      const std::vector<KernelSample>& samples);
std::string KernelCheckTable(const std::vector<KernelCheck>& checks);

}  // namespace shardsim

#endif  // SHARDSIM_VALIDATE_KERNELS_H_

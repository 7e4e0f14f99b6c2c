// The limits of every number a user gives shardsim, from files and from
// flags, and the one checker they all go through. A value outside its
// limit is an error naming the file, the field, the value and the limit:
// never a silent default, a wrapped integer, or a NaN that reaches the
// engine.
//
// The limits sit far beyond any real cluster or model, and low enough
// that every product the simulator forms of them fits in 64 bits and
// every run finishes on one machine. The largest such product is a
// non-flash model's activations: layers x heads x seq_len^2 x
// micro_batch_size x 5 bytes <= 2^10 x 2^10 x 2^20 (tokens per
// micro-batch) x 2^20 x 5 ~ 2^62.3 < 2^63 (sim/model/model.cc).
#ifndef SHARDSIM_SIM_SCHEMA_LIMITS_H_
#define SHARDSIM_SIM_SCHEMA_LIMITS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace shardsim {
namespace limits {

// Cluster size. 16,384 GPUs is 2,048 DGX nodes, beyond the largest
// published data-parallel training runs, and the fabric and its flows
// stay within a few GB of memory.
inline constexpr int64_t kMaxGpus = 16384;
// GPUs sharing one NVLink domain: beyond GB200 NVL72's 72.
inline constexpr int64_t kMaxGpusPerNode = 1024;
// NICs per node (DGX H100: 8; 1 per GPU is the rule).
inline constexpr int64_t kMaxNicsPerNode = 1024;
// NCCL runs at most 64 channels (MAXCHANNELS, src/include/device.h).
inline constexpr int64_t kMaxChannels = 64;
inline constexpr int64_t kMaxProtocols = 16;

// Model shape: PaLM-540B has 118 layers, LLaMA-3.1-405B 126 layers,
// 128 heads and hidden 16,384; Gemma's vocabulary is 256k.
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxHidden = int64_t{1} << 18;
inline constexpr int64_t kMaxHeads = 1024;
inline constexpr int64_t kMaxFfnHidden = int64_t{1} << 20;
inline constexpr int64_t kMaxVocab = int64_t{1} << 22;

// Batch: a micro-batch of at most 2^20 tokens (a million-token context),
// and at most 4,096 micro-batches per step: every micro-batch's ops are
// lowered and replayed, and Lins' 4M-token batch at 8 GPUs needs 128.
inline constexpr int64_t kMaxSeqLen = int64_t{1} << 20;
inline constexpr int64_t kMaxTokensPerMicroBatch = int64_t{1} << 20;
inline constexpr int64_t kMaxMicroBatches = 4096;
inline constexpr int64_t kMaxGlobalBatchTokens = int64_t{1} << 40;
// Each alone is not enough: the lowered schedule holds every layer's
// passes of every micro-batch, about 1.5 kB of ops and kernels each
// (tests/fuzz/crashes/scenario: 1026 x 4096 passes took over 6 GB).
// (layers + 2) x micro-batches is at most 2^17, about 200 MB: LLaMA-65B
// at Lins' 128 micro-batches is 10,496, LLaMA-7B at 1,024 is 34,816, and
// Megatron's 1T model (128 layers) over a 64-stage pipeline at 512
// micro-batches (Narayanan et al. 2021, Table 1) is 66,560.
inline constexpr int64_t kMaxLayerPasses = int64_t{1} << 17;
// Optimizer-state bytes per parameter (mixed-precision Adam: 12).
inline constexpr double kMaxOptimizerBytesPerParam = 64;

// Collective sizes: 1 TiB, beyond any GPU's memory; a sweep of at most
// 1,000 sizes (nccl-tests' 8 B .. 8 GB by 2 is 31).
inline constexpr int64_t kMaxCollectiveBytes = int64_t{1} << 40;
inline constexpr int64_t kMaxSweepSizes = 1000;
// Element counts (buckets, thresholds): 2^50, beyond any model's
// parameter count.
inline constexpr int64_t kMaxElements = int64_t{1} << 50;

// Rates and times. Bandwidths from 1 MB/s to 1 PB/s per port, peak
// compute from 1 GFLOP/s to 1 EFLOP/s per GPU, latencies up to 1 s.
inline constexpr double kMinBandwidth = 1e6;
inline constexpr double kMaxBandwidth = 1e15;
inline constexpr double kMinFlops = 1e9;
inline constexpr double kMaxFlops = 1e18;
inline constexpr double kMaxLatencyS = 1;
// GPU memory: 1 MiB to 1 PiB.
inline constexpr int64_t kMinMemoryBytes = int64_t{1} << 20;
inline constexpr int64_t kMaxMemoryBytes = int64_t{1} << 50;

}  // namespace limits

// Checks a message's numeric fields one by one and keeps the first
// failure. Errors read "WHERE: field PREFIXFIELD: must be ..., got V", or
// "PREFIXFIELD: must be ..." when `where` is empty (the caller adds it).
//
//   FieldCheck check(path, "gpu.");
//   check.Real("peak_flops", g.peak_flops(), limits::kMinFlops,
//   limits::kMaxFlops)
//        .Count("sms", g.sms(), 1, 1024);
//   if (!check.ok()) return check.status();
class FieldCheck {
 public:
  explicit FieldCheck(absl::string_view where, absl::string_view prefix = "");

  // An integer in [lo, hi].
  FieldCheck& Count(absl::string_view field, int64_t value, int64_t lo,
                    int64_t hi);
  // A finite number in [lo, hi]; NaN and infinities fail.
  FieldCheck& Real(absl::string_view field, double value, double lo, double hi);
  // A finite share of a rate, in (0, 1].
  FieldCheck& Share(absl::string_view field, double value);
  // Text that protobuf can serialize: valid UTF-8 (a text-format escape
  // like "\377" is not), at most 4096 bytes.
  FieldCheck& Text(absl::string_view field, absl::string_view value);
  // Any other rule: fails with `why` where `holds` is false.
  FieldCheck& Rule(absl::string_view field, bool holds, absl::string_view why);

  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }

 private:
  void Fail(absl::string_view field, absl::string_view why);

  const std::string where_;
  const std::string prefix_;
  absl::Status status_;
};

// A number as messages print it: up to 10 significant digits, so that
// 1.0000001 does not read as 1.
std::string Num(double v);

// a x b, or an error naming `what` when it leaves [0, 2^63).
absl::Status CheckedMul(int64_t a, int64_t b, absl::string_view what,
                        int64_t* out);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEMA_LIMITS_H_

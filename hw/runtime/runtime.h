// What both backends share that is not CUDA: MPI setup, the mesh from the
// world, the step replay driver, the collective benchmark and its output.
#ifndef SHARDSIM_HW_RUNTIME_RUNTIME_H_
#define SHARDSIM_HW_RUNTIME_RUNTIME_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hw/backend.h"
#include "sim/collective/group.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim::hw {

// MPI_Init on construction, MPI_Finalize on destruction (unless aborted).
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
};

// Prints "shardsim-hw: error: rank R: MESSAGE" to stderr and aborts every
// rank with exit code 1: for errors some ranks may not share (they would
// hang the others in the next collective).
[[noreturn]] void AbortAll(int rank, const absl::Status& status);

// Setup errors that every rank may or may not share: the ranks agree
// (MPI_Allreduce) on whether any failed; the lowest failing rank prints its
// message. Returns true when any rank failed; then all should exit 1.
bool AnyFailed(int rank, const absl::Status& status);

// The mesh of `world` ranks at `gpus_per_node` per node (MeshOf's rule);
// errors name both numbers and the flag.
absl::StatusOr<Mesh> MeshFromWorld(int world, int gpus_per_node);

// Replays one step: Start(), then the IR's ops in order; before each op,
// WaitFor each dependency on another stream; compute, collective and memory
// ops are issued on their stream. Returns Finish()'s timings.
absl::StatusOr<std::vector<OpTiming>> ReplaySchedule(const Schedule& schedule,
                                                     Backend* backend);

struct SweepOptions {
  CollectiveOp op = ALL_GATHER;
  Algorithm algorithm = RING;
  int64_t min_bytes = 1024;
  int64_t max_bytes = 1024;
  double step_factor = 2;
  int channels = 1;
  int warmup = 2;
  int iters = 10;
  int root = 0;
};

struct SweepRow {
  int64_t size_bytes = 0;
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  int64_t checked = 0;
  int64_t wrong = 0;
};

// Per size: RunChecked, then TimeCollective over the global group.
absl::StatusOr<std::vector<SweepRow>> RunSweep(Backend* backend,
                                               const SweepOptions& options);

// nccl-tests' layout with a #wrong column.
std::string FormatSweepTable(const std::string& platform,
                             const std::string& transport,
                             const SweepOptions& options, int gpus,
                             const std::vector<SweepRow>& rows);

// JSON: {platform, transport, op, algorithm, gpus, channels, rows: [{
// size_bytes, time_us, algbw_gbps, busbw_gbps, wrong}], environment: {...}}
// written with google::protobuf::Struct.
absl::Status WriteSweepJson(
    const std::string& path, const std::string& platform,
    const std::string& transport, const SweepOptions& options, int gpus,
    const std::vector<SweepRow>& rows,
    const std::vector<std::pair<std::string, std::string>>& environment);

// The environment as a flat JSON object.
absl::Status WriteEnvironmentJson(
    const std::string& path,
    const std::vector<std::pair<std::string, std::string>>& environment);

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_RUNTIME_RUNTIME_H_

// What both backends share that is not CUDA: MPI setup, the mesh from the
// world, the step replay driver and the collective benchmark.
#ifndef SHARDSIM_HW_RUNTIME_RUNTIME_H_
#define SHARDSIM_HW_RUNTIME_RUNTIME_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hw/backend.h"
#include "sim/base/group.h"
#include "sim/results/trace.h"
#include "sim/schema/collective.pb.h"
#include "sim/schema/results.pb.h"
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

// Replays one step on this rank: Start(), then the ops of the rank's
// program (schedule.proto Program; every op where there is one program) in
// order, with the receive of each send to the program posted before the
// first op that depends on it (the ordering rule of rank_schedule.h, which
// refuses a schedule whose sends would deadlock under it, before Start()).
// Before each op, WaitFor each dependency on another stream and each
// received send; compute, collective, memory and send ops are issued on
// their stream, a send to the rank of the same index in its peer program.
// Returns Finish()'s timings.
absl::StatusOr<std::vector<OpTiming>> ReplaySchedule(const Schedule& schedule,
                                                     Backend* backend);

// Each world rank's planned peak (sim/memory/allocation.h), by rank: the
// allocation plan of the rank's program (PlanAllocations(schedule,
// program)), which is the whole schedule's where there is one program. A
// rank allocates and frees only its own program's memory ops.
absl::StatusOr<std::vector<int64_t>> PlannedPeaks(const Schedule& schedule,
                                                  const Mesh& mesh);

// One rank's replayed steps: `warmup` untimed ones first (cuBLAS and cuDNN
// pick and build their kernels on first use, and the pool grows to the
// step's size), then `steps` timed ones.
struct MeasuredSteps {
  double mean_step_s = 0;
  std::vector<OpTiming> last;  // the last step's ops
  TransferCounts counts;       // the last step's, with their data check
};
absl::StatusOr<MeasuredSteps> MeasureSteps(const Schedule& schedule,
                                           Backend* backend, int warmup,
                                           int steps);

// Every rank's measurements, brought to rank 0. Every rank calls it (it is
// collective); only rank 0's result holds the per-rank vectors.
struct StepOnRanks {
  double step_time_s = 0;  // the slowest rank's mean (all ranks get it)
  // Per rank: the measured op times by op id (0 where the op did not run
  // there), and rank 0's kernels one by one.
  std::vector<TraceProcess> timelines;
  std::vector<MemoryUse> memory;  // per rank
  // The last step's data check summed over the ranks (rank 0; -1 where the
  // backend does not check).
  TransferCounts counts;
};
StepOnRanks GatherSteps(const Schedule& schedule, const MeasuredSteps& mine,
                        const MemoryUse& memory, const MpiSession& mpi);

// Per size of the sweep (its channels resolved, iters >= 1): RunChecked,
// then TimeCollective over the global group. Returns the rows with their
// data check, and op, algorithm, gpus, channels and transport set; the
// caller adds the platform and the environment.
absl::StatusOr<CollectiveResults> RunSweep(Backend* backend,
                                           const CollectiveSweep& sweep);

// The environment as a flat JSON object.
absl::Status WriteEnvironmentJson(
    const std::string& path,
    const std::vector<std::pair<std::string, std::string>>& environment);

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_RUNTIME_RUNTIME_H_

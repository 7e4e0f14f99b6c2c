// A `shardsim run` sweep, or each wave of `shardsim plan`'s search, spread
// over the ranks of an MPI job started by mpirun or srun: point i runs on
// rank i % size, each rank runs its points with RunIsolated (--jobs
// children at a time, --time-limit per rank), and every rank then gathers
// every row, in point order, so that a search's ranks decide its next wave
// alike; rank 0 alone prints. The output is the serial run's, byte for
// byte, and so are its errors: rank 0 reports the first failing point in
// index order, and every rank exits non-zero.
//
// MPI starts only after a rank's first points are done, and only under a
// launcher with more than one rank: a serial run never touches MPI. A
// search's later waves fork their simulations after MPI_Init; the children
// never call MPI and leave by _exit. Before MPI_Init the ranks ask
// libibverbs for fork support (RDMAV_FORK_SAFE, ibv_fork_init(3)), which
// Open MPI's InfiniBand transports need for a child that only computes.
//
// Built into the shardsim binary only (not shardsim_core), so that the
// library, its tests and its fuzzers never link MPI.
#ifndef SHARDSIM_SIM_RUNNER_DISTRIBUTE_H_
#define SHARDSIM_SIM_RUNNER_DISTRIBUTE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/runner/isolate.h"

namespace shardsim {

struct Launch {
  int rank = 0;
  int size = 1;
};

// This process's rank and world size as its launcher announced them in the
// environment, read without starting MPI; {0, 1} when started by neither
// mpirun nor srun.
Launch DetectLaunch();

// One rank's part in a distributed sweep. Collective: every rank calls
// Run at most once and then Finish, whatever failed before.
class SweepRanks {
 public:
  explicit SweepRanks(Launch launch) : launch_(launch) {}
  ~SweepRanks();

  SweepRanks(const SweepRanks&) = delete;
  SweepRanks& operator=(const SweepRanks&) = delete;

  bool is_root() const { return launch_.rank == 0; }
  int size() const { return launch_.size; }

  // Runs this rank's share of `tasks` with RunIsolated (a progress line on
  // rank 0 only, counting its own points), then starts MPI if it has not
  // and gathers. Every rank gets every task's result in order, as
  // RunIsolated would have given them: a point that failed on another rank
  // fails with its error, and every point fails with a rank's error when
  // that rank could not run the sweep at all. Collective: every rank calls
  // it as often, with as many tasks (a search's waves, decided alike from
  // the same results).
  std::vector<absl::StatusOr<std::string>> Run(
      const std::vector<ChildTask>& tasks, const IsolateOptions& options);

  // Ends this rank's part: a rank that stopped before Run (a bad flag, a
  // file its node cannot read) still sends `status` to the others in Run's
  // gather, so that no rank waits forever; then rank 0's final status is
  // sent to every rank and MPI ends. Rank 0 prints its error before: no
  // other rank leaves before rank 0 enters, and mpirun ends every rank
  // once one exits non-zero. Returns `status` on rank 0; elsewhere OK or
  // an error (not to be printed) as rank 0's.
  absl::Status Finish(const absl::Status& status);

 private:
  // MPI_Init once, and a check that MPI sees the world the launcher
  // announced.
  absl::Status Start();
  // Every rank's `mine`, in rank order, on every rank; starts MPI.
  std::vector<std::string> Gather(const std::string& mine);

  const Launch launch_;
  bool gathered_ = false;
};

}  // namespace shardsim

#endif  // SHARDSIM_SIM_RUNNER_DISTRIBUTE_H_

// The CPU backend: every rank is one MPI process standing in for one GPU.
//
// Collectives run the simulator's own plans (sim/collective/plan.h) over host
// buffers with MPI point-to-point messages, so a run checks the plans on a
// real transport and on real concurrency. Scheme:
//   * Elements are int64_t of 8 bytes, whatever the call's dtype: sums stay
//     exact, so checked runs compare bit for bit. A call of `bytes` bytes
//     becomes a plan over ceil(bytes / 8) elements (the wire moves the
//     call's bytes, rounded up to 8).
//   * Messages go over MPI_COMM_WORLD with global ranks: member i of this
//     rank's group (GroupMembers, global-rank order) is world rank
//     members[i]. Groups of one shape are disjoint and every rank of a group
//     issues the same calls in the same order (a group stays within one
//     program of the schedule), so no per-group communicator is needed.
//   * Steps follow plan.h's semantics: every source range this rank sends in
//     a step is copied out (a snapshot) before any receive is applied; the
//     receives are applied after MPI_Waitall, in transfer order, copies
//     overwriting, reduces adding. The tag of a message is the transfer's
//     index within its step (mod 32000) plus 32000 x the collective run's
//     sequence number (mod what MPI_TAG_UB leaves): a run one rank skipped
//     never matches a later run's messages, so the others wait (and the
//     watchdog ends the job) instead of silently shifting by one. MPI's
//     non-overtaking order keeps several messages between one pair in one
//     step matched.
//   * The SHARP switch (kSwitch) is emulated on the group's member 0: it
//     holds the switch's zeroed buffer of `count` elements; transfers to the
//     switch are messages to member 0 that add into (or overwrite) that
//     buffer, transfers from the switch are messages from it.
//   * Point-to-point sends (schedule.proto PointToPoint) are MPI_Ssend /
//     MPI_Recv of the payload's bytes on a duplicate of MPI_COMM_WORLD,
//     tagged by the send's op id. Byte i of the payload is a hash of
//     (sender, op id, i); the receiver checks every byte (Transfers()).
//   * Compute ops cannot run meaningfully on a CPU: each sleeps for
//     ComputeOpCost(kernels, platform).seconds x `compute_scale` (0 =
//     instantaneous).
//   * Streams are serialized: ops run synchronously in the order enqueued,
//     so WaitFor only checks that the op it names was enqueued.
//   * Every blocking wait (a collective run, a barrier, a reduction) is
//     armed on a watchdog (hw/runtime/watchdog.h): a wait with no progress
//     for `watchdog_s` ends every rank with a message naming the wait.
#ifndef SHARDSIM_HW_CPU_CPU_BACKEND_H_
#define SHARDSIM_HW_CPU_CPU_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "hw/backend.h"
#include "hw/runtime/fault.h"
#include "sim/base/group.h"
#include "sim/schema/platform.pb.h"

namespace shardsim::hw {

struct CpuOptions {
  // Compute ops sleep their kernels' simulated time x this; 0 runs them
  // instantly.
  double compute_scale = 0;
  // Ring/tree channels used by Collective() (replay); 0 = the platform's.
  int channels = 0;
  // A blocking wait with no progress for this long aborts every rank.
  double watchdog_s = 300;
  // Testing aid (hw/runtime/fault.h).
  Fault fault;
};

// MPI must be initialized. Errors when the world size is not mesh.gpus().
absl::StatusOr<std::unique_ptr<Backend>> MakeCpuBackend(
    const Mesh& mesh, const Platform& platform,
    const CpuOptions& options = CpuOptions());

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_CPU_CPU_BACKEND_H_

// One rank's part of a schedule (schedule.proto: Program, PointToPoint):
// the ops of its own program, in order, with the receive of every send to
// it put where the rank posts it. No MPI and no CUDA here: the order is
// decided, and proven not to deadlock, on the host before a step runs.
//
// The ordering rule. A program issues its ops in the order they are
// listed. The receive of a send is posted just before the first op of the
// receiving program that lists the send in its deps; an op that depends
// on several sends posts their receives in op id order; the receive of a
// send that no op depends on is posted after the program's last op, in op
// id order. Where the program's last send before that op went to the
// program the receive comes from (and no op has taken receives since), the
// receive is posted in one group with that send instead, as Megatron-LM's
// 1F1B steady state pairs them (send_forward_recv_backward,
// send_backward_recv_forward in megatron/core/pipeline_parallel/
// schedules.py, batched by p2p_communication.py's batch_isend_irecv):
// without it, two neighbouring stages each sending to the other first
// would wait on each other. Every rank of a program issues the same steps
// (SPMD), so rank i of program P and rank i of program Q post their
// halves of every send between them in the order of their programs'
// steps.
//
// Why that cannot hang, or is refused: a transport may make a send wait
// until its receive is posted. NCCL's does: every ncclSend needs "a
// corresponding ncclRecv() on the other rank" and each is "blocking for
// the GPU"; two that must progress at once have to share one
// ncclGroupStart/ncclGroupEnd (NCCL user guide, api/p2p.html and
// usage/p2p.html, docs.nvidia.com/deeplearning/nccl/user-guide/docs/).
// Transfers in one group progress together, and the group is done when
// all of them are; any other transfer must be able to finish alone: the
// rendezvous below. The CPU transport uses MPI_Issend to be as strict.
// CheckSendOrder runs the programs' steps with exactly that rendezvous,
// every program one process (its ranks move in step: a collective stays
// within its program, and rank i only meets rank i of another program): a
// send completes only together with its receive, both posted; a program
// moves past a step (or a group) once its transfers are complete;
// anything else moves alone. If every program reaches its end, the real
// run, where streams only relax this serial order, completes too; if not,
// the schedule is refused with the steps each stuck program waits at.
#ifndef SHARDSIM_HW_RUNTIME_RANK_SCHEDULE_H_
#define SHARDSIM_HW_RUNTIME_RANK_SCHEDULE_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/base/group.h"
#include "sim/schedule/programs.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim::hw {

// One step a rank takes: issue an op of its program, or post the receive
// of another program's send.
struct RankStep {
  enum Kind { kOp, kRecv };
  Kind kind = kOp;
  int op = -1;  // index into Schedule.ops: the op issued, or the send
  // A receive posted in one group with the send step before it (and the
  // grouped receives between them).
  bool grouped = false;
};

// The steps of every rank of `program`, by the ordering rule above.
// `programs` is ReadPrograms(s, mesh)'s.
std::vector<RankStep> ProgramSteps(const Schedule& s, const Programs& programs,
                                   int program);

// Runs every program's steps (ProgramSteps) with rendezvous sends; an
// error naming each program that cannot reach its end, and the step it
// waits at, where they deadlock.
absl::Status CheckSendOrder(const Schedule& s, const Programs& programs,
                            const std::vector<std::vector<RankStep>>& steps);

struct RankSchedule {
  Programs programs;
  int program = 0;  // the rank's
  int index = 0;    // the rank's position in its program's ranks
  std::vector<RankStep> steps;
  // World rank of the other end of each step (-1: an op that is no send).
  std::vector<int> peers;
};

// World rank `rank`'s schedule on `mesh`: the contract of schedule.proto
// (ReadPrograms), every collective of the rank's program within the
// program (GroupWithinProgram), and CheckSendOrder over every program.
absl::StatusOr<RankSchedule> ScheduleOfRank(const Schedule& s, const Mesh& mesh,
                                            int rank);

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_RUNTIME_RANK_SCHEDULE_H_

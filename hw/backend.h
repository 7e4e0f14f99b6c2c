// What shardsim-hw runs the schedule IR on: one rank's view of a machine.
//
// Two backends implement it: the CPU backend (hw/cpu) moves host buffers
// between MPI ranks, the CUDA backend (hw/cuda) runs cuBLAS GEMMs and NCCL
// on a GPU. Both execute collectives from the simulator's own plans
// (sim/collective/plan.h): a collective algorithm is written once, there.
// Ops are enqueued on streams (the IR's COMPUTE, GATHER, REDUCE) and run in
// order per stream; cross-stream dependencies go through Record/WaitFor,
// like CUDA events. The CPU backend may run everything synchronously.
#ifndef SHARDSIM_HW_BACKEND_H_
#define SHARDSIM_HW_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/base/group.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim::hw {

// What one rank's point-to-point transfers moved over a step, and the data
// check of them and of its collectives where the backend checks it (the
// CPU transport): bytes received that differ from what the sender wrote,
// collective outputs that differ from the oracle's. -1: not counted.
struct TransferCounts {
  int64_t sent_bytes = 0;
  int64_t received_bytes = 0;
  int64_t checked_bytes = -1;
  int64_t wrong_bytes = -1;
  // The step's collectives, checked the same way: output elements this
  // rank compared with check_data.h's oracle, and those that differ.
  int64_t checked_elements = -1;
  int64_t wrong_elements = -1;
};

// Measured start and end of one op on this rank, seconds since Start().
struct OpTiming {
  int op_id = -1;
  double start_s = 0;
  double end_s = 0;
  // A compute op's kernels, in order, when the backend times each.
  std::vector<std::pair<double, double>> kernels;
};

// Device memory measured over one step (-1: not measured, e.g. the CPU
// transport, which allocates no device memory).
struct MemoryUse {
  // The step's buffers (the allocation plan's, stream-ordered pool) at their
  // high-water mark, plus what the backend holds besides them (kernel
  // operands, cuDNN's workspace, collective buffers).
  int64_t allocator_peak_bytes = -1;
  int64_t held_bytes = -1;  // of which held besides the plan's buffers
  // cudaMemGetInfo's used bytes (total - free) after the step, with the
  // pool keeping its high-water memory: also the CUDA context, cuBLAS,
  // cuDNN and NCCL's own memory.
  int64_t device_used_bytes = -1;
};

// A collective's data check: elements that differ from the expected result.
struct CheckResult {
  int64_t checked = 0;
  int64_t wrong = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;  // "cpu", "nccl"
  // This process's place in the job.
  virtual int rank() const = 0;
  virtual const Mesh& mesh() const = 0;

  // Before the first step: what the backend sizes once from the schedule
  // (the CUDA backend's kernel workspace), so no step allocates it.
  virtual absl::Status Prepare(const Schedule& /*schedule*/) {
    return absl::OkStatus();
  }

  // Begins timing; op timings are relative to this.
  virtual absl::Status Start() = 0;

  // Enqueues op `op_id` of the IR on its stream. Compute runs the op's
  // kernels (the CPU backend sleeps their simulated time); a
  // collective runs its plan over this rank's group of its shape on a
  // buffer of call.bytes() that the backend owns.
  virtual absl::Status Compute(int op_id, const KernelList& kernels,
                               Stream stream) = 0;
  virtual absl::Status Collective(int op_id, const CollectiveCall& call,
                                  Stream stream) = 0;
  // A memory op of the IR: allocates its bytes (delta_bytes > 0) or gives
  // back the allocation of op `op.frees()`, stream-ordered after what
  // `stream` has enqueued. Out of memory is a ResourceExhausted error that
  // names the buffer, the bytes wanted and the bytes free.
  virtual absl::Status Memory(int op_id, const MemoryOp& op, Stream stream) = 0;
  // Measured over the step since the last Start().
  virtual MemoryUse MeasuredMemory() const { return {}; }

  // Point-to-point (schedule.proto PointToPoint): Send enqueues send op
  // `op_id`'s send.bytes() to world rank `peer`, ordered after what `stream`
  // has enqueued and before what it enqueues next; Recv enqueues its
  // receive from world rank `peer` on the receiving rank, after which
  // WaitFor(op_id, s) orders stream s after the bytes arrived. Transfers
  // between two ranks are matched in the order each side posts them: the
  // caller posts both sides in one order (runtime.h, ReplaySchedule).
  virtual absl::Status Send(int op_id, const PointToPoint& send, int peer,
                            Stream stream) = 0;
  virtual absl::Status Recv(int op_id, const PointToPoint& send, int peer,
                            Stream stream) = 0;
  // A send and receives posted in one group, as Megatron's batched
  // point-to-point calls post them (send_forward_recv_backward,
  // send_backward_recv_forward: torch.distributed.batch_isend_irecv, one
  // ncclGroupStart/ncclGroupEnd): they progress together, so two programs
  // may each send to the other at once. The send as Send orders it, each
  // receive as Recv.
  struct PostedRecv {
    int op_id = -1;
    const PointToPoint* send = nullptr;
    int peer = -1;
  };
  virtual absl::Status SendRecv(int op_id, const PointToPoint& send, int peer,
                                Stream stream,
                                const std::vector<PostedRecv>& recvs) = 0;
  // Since the last Start().
  virtual TransferCounts Transfers() const { return {}; }

  // Cross-stream dependency: `stream` waits until op `op_id` is done.
  virtual absl::Status WaitFor(int op_id, Stream stream) = 0;

  // Waits for everything enqueued and returns each op's measured times;
  // gives back every allocation still live.
  virtual absl::StatusOr<std::vector<OpTiming>> Finish() = 0;

  // Runs one collective with data checking: fills the inputs with known
  // values, runs the plan, compares with the expected result (plan.h's
  // data contract). Used by `shardsim-hw collective` and verify mode.
  virtual absl::StatusOr<CheckResult> RunChecked(const CollectiveCall& call,
                                                 int channels) = 0;
  // Times `iters` runs of a collective after `warmup` (no checking),
  // returns the mean seconds per run, max over ranks.
  virtual absl::StatusOr<double> TimeCollective(const CollectiveCall& call,
                                                int channels, int warmup,
                                                int iters) = 0;

  // GPU, driver, library versions, NCCL_* variables, topology: what a
  // results file needs to say where it was measured.
  virtual std::vector<std::pair<std::string, std::string>> Environment()
      const = 0;
};

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_BACKEND_H_

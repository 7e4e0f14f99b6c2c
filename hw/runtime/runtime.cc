#include "hw/runtime/runtime.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "hw/runtime/rank_schedule.h"
#include "sim/collective/sweep.h"
#include "sim/memory/allocation.h"
#include "sim/results/results.h"
#include "sim/schedule/lower.h"
#include "sim/schedule/programs.h"
#include "sim/schema/limits.h"

namespace shardsim::hw {

MpiSession::MpiSession(int* argc, char*** argv) {
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void AbortAll(int rank, const absl::Status& status) {
  std::fprintf(stderr, "shardsim-hw: error: rank %d: %s\n", rank,
               std::string(status.message()).c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

bool AnyFailed(int rank, const absl::Status& status) {
  const int mine = status.ok() ? std::numeric_limits<int>::max() : rank;
  int first = 0;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first == std::numeric_limits<int>::max()) return false;
  if (first == rank) {
    std::fprintf(stderr, "shardsim-hw: error: rank %d: %s\n", rank,
                 std::string(status.message()).c_str());
    std::fflush(stderr);
  }
  return true;
}

absl::StatusOr<Mesh> MeshFromWorld(int world, int gpus_per_node) {
  if (gpus_per_node < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpus-per-node: must be >= 1, got ", gpus_per_node));
  }
  absl::StatusOr<Mesh> mesh = MeshOf(world, gpus_per_node);
  if (!mesh.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the MPI world has ", world, " ranks, which is not whole nodes of ",
        gpus_per_node, " GPUs (--gpus-per-node ", gpus_per_node,
        "); launch a multiple of ", gpus_per_node, " ranks"));
  }
  return mesh;
}

namespace {

// Stream of each op id (ids of the one program of a lowered schedule need
// not be indices; several programs' are).
absl::StatusOr<std::vector<Stream>> StreamsById(const Schedule& schedule) {
  std::vector<Stream> stream_of;
  for (const Op& op : schedule.ops()) {
    if (op.id() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule: negative op id ", op.id()));
    }
    if (op.stream() == OFFLOAD || op.stream() == HOST) {
      return absl::UnimplementedError(absl::StrCat(
          "schedule: op ", op.id(), " (", op.label(),
          ") is ZeRO-Offload's host side (offload_optimizer), which "
          "shardsim simulates but shardsim-hw does not run"));
    }
    if (op.id() >= static_cast<int>(stream_of.size())) {
      stream_of.resize(op.id() + 1, STREAM_UNSPECIFIED);
    }
    stream_of[op.id()] = op.stream();
  }
  return stream_of;
}

// Orders `op` after each dependency: on its own stream that is issue
// order; another stream's op, or a send received from another program
// (its receive runs on the backend's own terms), is waited for.
absl::Status WaitForDeps(const Op& op, const std::vector<Stream>& stream_of,
                         const std::vector<bool>& issued,
                         const std::vector<bool>& received, Backend* backend) {
  for (int dep : op.deps()) {
    if (dep < 0 || dep >= static_cast<int>(issued.size()) || !issued[dep]) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule: op ", op.id(), " depends on op ", dep,
                       ", which does not come before it"));
    }
    if (received[dep] || stream_of[dep] != op.stream()) {
      if (absl::Status s = backend->WaitFor(dep, op.stream()); !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

// Enqueues one op of the rank's program; `peer` is a send's receiver.
absl::Status IssueOp(const Schedule& schedule, const Op& op, int peer,
                     Backend* backend) {
  switch (op.body_case()) {
    case Op::kCompute:
      if (op.compute().kernel_list() < 0 ||
          op.compute().kernel_list() >= schedule.kernel_lists_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "schedule: op ", op.id(), " names kernel list ",
            op.compute().kernel_list(), " of ", schedule.kernel_lists_size()));
      }
      return backend->Compute(op.id(), KernelsOf(schedule, op.compute()),
                              op.stream());
    case Op::kCollective:
      return backend->Collective(op.id(), op.collective(), op.stream());
    case Op::kMemory:
      return backend->Memory(op.id(), op.memory(), op.stream());
    case Op::kSend:
      return backend->Send(op.id(), op.send(), peer, op.stream());
    default:
      return absl::OkStatus();
  }
}

// The stream of the first op after step `k` that needs the receive of
// send `send` (COMPUTE for a receive nothing waits for).
Stream ReceivingStream(const Schedule& schedule, const RankSchedule& mine,
                       size_t k, int send) {
  for (size_t j = k + 1; j < mine.steps.size(); ++j) {
    if (mine.steps[j].kind != RankStep::kOp) continue;
    const Op& op = schedule.ops(mine.steps[j].op);
    for (int d : op.deps()) {
      if (d == send) return op.stream();
    }
  }
  return COMPUTE;
}

}  // namespace

absl::StatusOr<std::vector<OpTiming>> ReplaySchedule(const Schedule& schedule,
                                                     Backend* backend) {
  // This rank's program, its receives placed and the order of every
  // program's sends proven not to deadlock (rank_schedule.h).
  absl::StatusOr<RankSchedule> mine =
      ScheduleOfRank(schedule, backend->mesh(), backend->rank());
  if (!mine.ok()) return mine.status();
  absl::StatusOr<std::vector<Stream>> stream_of = StreamsById(schedule);
  if (!stream_of.ok()) return stream_of.status();
  if (absl::Status s = backend->Start(); !s.ok()) return s;
  std::vector<bool> issued(stream_of->size(), false);
  std::vector<bool> received(stream_of->size(), false);
  for (size_t k = 0; k < mine->steps.size(); ++k) {
    const Op& op = schedule.ops(mine->steps[k].op);
    absl::Status s;
    // A send with the receives grouped with it (rank_schedule.h).
    std::vector<Backend::PostedRecv> group;
    for (size_t j = k + 1; j < mine->steps.size() && mine->steps[j].grouped;
         ++j) {
      const Op& r = schedule.ops(mine->steps[j].op);
      group.push_back({r.id(), &r.send(), mine->peers[j]});
    }
    if (mine->steps[k].kind == RankStep::kRecv) {
      s = backend->Recv(op.id(), op.send(), mine->peers[k],
                        ReceivingStream(schedule, *mine, k, op.id()));
      received[op.id()] = true;
    } else if (!group.empty()) {
      s = WaitForDeps(op, *stream_of, issued, received, backend);
      if (s.ok()) {
        s = backend->SendRecv(op.id(), op.send(), mine->peers[k], op.stream(),
                              group);
      }
      for (const Backend::PostedRecv& r : group) {
        received[r.op_id] = issued[r.op_id] = true;
      }
      k += group.size();
    } else {
      s = WaitForDeps(op, *stream_of, issued, received, backend);
      if (s.ok()) s = IssueOp(schedule, op, mine->peers[k], backend);
    }
    if (!s.ok()) {
      return absl::Status(
          s.code(),
          absl::StrCat("op ", op.id(), " (", op.label(), "): ", s.message()));
    }
    issued[op.id()] = true;
  }
  return backend->Finish();
}

absl::StatusOr<std::vector<int64_t>> PlannedPeaks(const Schedule& schedule,
                                                  const Mesh& mesh) {
  absl::StatusOr<Programs> programs = ReadPrograms(schedule, mesh);
  if (!programs.ok()) return programs.status();
  std::vector<int64_t> peaks(mesh.gpus(), 0);
  for (size_t k = 0; k < programs->list.size(); ++k) {
    absl::StatusOr<AllocationPlan> plan =
        PlanAllocations(schedule, static_cast<int>(k));
    if (!plan.ok()) return plan.status();
    for (int r : programs->list[k].ranks) peaks[r] = plan->peak_bytes;
  }
  return peaks;
}

absl::StatusOr<MeasuredSteps> MeasureSteps(const Schedule& schedule,
                                           Backend* backend, int warmup,
                                           int steps) {
  for (int i = 0; i < warmup; ++i) {
    absl::StatusOr<std::vector<OpTiming>> t = ReplaySchedule(schedule, backend);
    if (!t.ok()) return t.status();
  }
  MeasuredSteps out;
  double total = 0;
  for (int i = 0; i < steps; ++i) {
    const double start = MPI_Wtime();
    absl::StatusOr<std::vector<OpTiming>> t = ReplaySchedule(schedule, backend);
    if (!t.ok()) return t.status();
    total += MPI_Wtime() - start;
    out.last = *std::move(t);
    out.counts = backend->Transfers();
  }
  out.mean_step_s = steps > 0 ? total / steps : 0;
  return out;
}

StepOnRanks GatherSteps(const Schedule& schedule, const MeasuredSteps& mine,
                        const MemoryUse& memory, const MpiSession& mpi) {
  const int rank = mpi.rank(), world = mpi.size();
  StepOnRanks out;
  double mean = mine.mean_step_s;
  MPI_Allreduce(&mean, &out.step_time_s, 1, MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);

  // (start, end) per op id, -1 where the op did not run on this rank.
  int max_id = -1;
  for (const Op& op : schedule.ops()) max_id = std::max(max_id, op.id());
  std::vector<double> times(2 * (max_id + 1), -1.0);
  for (const OpTiming& t : mine.last) {
    if (t.op_id >= 0 && t.op_id <= max_id) {
      times[2 * t.op_id] = t.start_s;
      times[2 * t.op_id + 1] = t.end_s;
    }
  }
  std::vector<double> all_times(rank == 0 ? times.size() * world : 0);
  MPI_Gather(times.data(), static_cast<int>(times.size()), MPI_DOUBLE,
             all_times.data(), static_cast<int>(times.size()), MPI_DOUBLE, 0,
             MPI_COMM_WORLD);
  const int64_t bytes[3] = {memory.allocator_peak_bytes, memory.held_bytes,
                            memory.device_used_bytes};
  std::vector<int64_t> all_bytes(rank == 0 ? 3 * world : 0);
  MPI_Gather(bytes, 3, MPI_INT64_T, all_bytes.data(), 3, MPI_INT64_T, 0,
             MPI_COMM_WORLD);
  const TransferCounts& c = mine.counts;
  const int64_t checks[4] = {c.checked_bytes, c.wrong_bytes, c.checked_elements,
                             c.wrong_elements};
  int64_t sums[4] = {0, 0, 0, 0};
  MPI_Reduce(checks, sums, 4, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank != 0) return out;
  // Every rank runs the same backend: all count, or none does (-1 each).
  if (c.checked_elements >= 0) {
    out.counts.checked_bytes = sums[0];
    out.counts.wrong_bytes = sums[1];
    out.counts.checked_elements = sums[2];
    out.counts.wrong_elements = sums[3];
  } else {
    out.counts = TransferCounts{0, 0, -1, -1, -1, -1};
  }

  for (int r = 0; r < world; ++r) {
    TraceProcess proc;
    proc.name = absl::StrCat("rank ", r);
    for (int id = 0; id <= max_id; ++id) {
      const double* t = &all_times[r * times.size() + 2 * id];
      proc.times.push_back({std::max(t[0], 0.0), std::max(t[1], 0.0)});
    }
    if (r == 0) {  // rank 0's kernels, one by one
      proc.kernels.resize(max_id + 1);
      for (const OpTiming& t : mine.last) {
        if (t.op_id >= 0 && t.op_id <= max_id)
          proc.kernels[t.op_id] = t.kernels;
      }
    }
    out.timelines.push_back(std::move(proc));
    out.memory.push_back(
        {all_bytes[3 * r], all_bytes[3 * r + 1], all_bytes[3 * r + 2]});
  }
  return out;
}

absl::StatusOr<CollectiveResults> RunSweep(Backend* backend,
                                           const CollectiveSweep& sweep) {
  FieldCheck check("collective sweep");
  check.Rule("channels", sweep.channels() >= 1, "must be resolved (>= 1)")
      .Rule("iters", sweep.iters() >= 1, "must be >= 1 to time a size");
  if (!check.ok()) return check.status();
  if (absl::Status s = ValidateSweep(sweep, "collective sweep"); !s.ok()) {
    return s;
  }
  const int gpus = backend->mesh().gpus();
  CollectiveResults out;
  out.set_op(sweep.op());
  out.set_algorithm(sweep.algorithm());
  out.set_gpus(gpus);
  out.set_channels(sweep.channels());
  out.mutable_measured()->set_transport(backend->name());
  for (const CollectiveCall& call : SweepCalls(sweep, backend->mesh())) {
    absl::StatusOr<CheckResult> checked =
        backend->RunChecked(call, sweep.channels());
    if (!checked.ok()) return checked.status();
    absl::StatusOr<double> t = backend->TimeCollective(
        call, sweep.channels(), sweep.warmup(), sweep.iters());
    if (!t.ok()) return t.status();
    CollectiveRow* row = out.add_rows();
    row->set_size_bytes(call.bytes());
    row->set_time_us(*t * 1e6);
    row->set_algbw_gbps(*t > 0 ? call.bytes() / *t / 1e9 : 0);
    row->set_busbw_gbps(row->algbw_gbps() * BusFactor(sweep.op(), gpus));
    row->set_checked(checked->checked);
    row->set_wrong(checked->wrong);
  }
  return out;
}

absl::Status WriteEnvironmentJson(
    const std::string& path,
    const std::vector<std::pair<std::string, std::string>>& environment) {
  google::protobuf::Struct env;
  for (const auto& [key, value] : environment) {
    (*env.mutable_fields())[key].set_string_value(value);
  }
  return WriteJson(env, path);
}

}  // namespace shardsim::hw

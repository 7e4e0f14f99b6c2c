#include "hw/runtime/runtime.h"

#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "sim/collective/sweep.h"
#include "sim/results/results.h"
#include "sim/schedule/lower.h"
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

absl::StatusOr<std::vector<OpTiming>> ReplaySchedule(const Schedule& schedule,
                                                     Backend* backend) {
  std::vector<Stream> stream_of;
  for (const Op& op : schedule.ops()) {
    if (op.id() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule: negative op id ", op.id()));
    }
    if (op.id() >= static_cast<int>(stream_of.size())) {
      stream_of.resize(op.id() + 1, STREAM_UNSPECIFIED);
    }
    stream_of[op.id()] = op.stream();
  }
  if (absl::Status s = backend->Start(); !s.ok()) return s;
  std::vector<bool> issued(stream_of.size(), false);
  for (const Op& op : schedule.ops()) {
    for (int dep : op.deps()) {
      if (dep < 0 || dep >= static_cast<int>(issued.size()) || !issued[dep]) {
        return absl::InvalidArgumentError(
            absl::StrCat("schedule: op ", op.id(), " depends on op ", dep,
                         ", which does not come before it"));
      }
      if (stream_of[dep] != op.stream()) {
        if (absl::Status s = backend->WaitFor(dep, op.stream()); !s.ok()) {
          return s;
        }
      }
    }
    absl::Status s;
    switch (op.body_case()) {
      case Op::kCompute:
        if (op.compute().kernel_list() < 0 ||
            op.compute().kernel_list() >= schedule.kernel_lists_size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("schedule: op ", op.id(), " names kernel list ",
                           op.compute().kernel_list(), " of ",
                           schedule.kernel_lists_size()));
        }
        s = backend->Compute(op.id(), KernelsOf(schedule, op.compute()),
                             op.stream());
        break;
      case Op::kCollective:
        s = backend->Collective(op.id(), op.collective(), op.stream());
        break;
      case Op::kMemory:
        s = backend->Memory(op.id(), op.memory(), op.stream());
        break;
      default:
        break;
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

absl::StatusOr<std::vector<SweepRow>> RunSweep(Backend* backend,
                                               const SweepOptions& o) {
  if (absl::Status s = ValidateSweep(
          {o.op, o.algorithm, o.min_bytes, o.max_bytes, o.step_factor, 0},
          "collective sweep");
      !s.ok()) {
    return s;
  }
  FieldCheck check("collective sweep");
  check.Count("iters", o.iters, 1, 1000000)
      .Count("warmup", o.warmup, 0, 1000000)
      .Count("channels", o.channels, 1, limits::kMaxChannels);
  if (!check.ok()) return check.status();
  const int gpus = backend->mesh().gpus();
  std::vector<SweepRow> rows;
  for (const CollectiveCall& call : SweepCalls(
           {o.op, o.algorithm, o.min_bytes, o.max_bytes, o.step_factor, o.root},
           backend->mesh())) {
    absl::StatusOr<CheckResult> check = backend->RunChecked(call, o.channels);
    if (!check.ok()) return check.status();
    absl::StatusOr<double> t =
        backend->TimeCollective(call, o.channels, o.warmup, o.iters);
    if (!t.ok()) return t.status();
    SweepRow row;
    row.size_bytes = call.bytes();
    row.time_us = *t * 1e6;
    row.algbw_gbps = *t > 0 ? call.bytes() / *t / 1e9 : 0;
    row.busbw_gbps = row.algbw_gbps * BusFactor(o.op, gpus);
    row.checked = check->checked;
    row.wrong = check->wrong;
    rows.push_back(row);
  }
  return rows;
}

std::string FormatSweepTable(const std::string& platform,
                             const std::string& transport,
                             const SweepOptions& o, int gpus,
                             const std::vector<SweepRow>& rows) {
  std::string out = absl::StrFormat(
      "# %s %s on %d ranks of %s, %d channels (measured, %s transport)\n"
      "#%11s %12s %8s %10s %10s %10s %8s\n"
      "#%11s %12s %8s %10s %10s %10s\n",
      CollectiveOp_Name(o.op), Algorithm_Name(o.algorithm), gpus, platform,
      o.channels, transport, "size", "count", "type", "time", "algbw", "busbw",
      "#wrong", "(B)", "(elements)", "", "(us)", "(GB/s)", "(GB/s)");
  for (const SweepRow& row : rows) {
    absl::StrAppendFormat(&out, " %11d %12d %8s %10.1f %10.2f %10.2f %8d\n",
                          row.size_bytes, (row.size_bytes + 7) / 8, "int64",
                          row.time_us, row.algbw_gbps, row.busbw_gbps,
                          row.wrong);
  }
  int64_t wrong = 0;
  for (const SweepRow& row : rows) wrong += row.wrong;
  absl::StrAppendFormat(&out, "# Out of bounds values : %d %s\n", wrong,
                        wrong == 0 ? "OK" : "FAILED");
  return out;
}

namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

absl::Status WriteStruct(const Struct& s, const std::string& path) {
  return WriteJson(s, path);
}

Struct EnvStruct(
    const std::vector<std::pair<std::string, std::string>>& environment) {
  Struct env;
  for (const auto& [key, value] : environment) {
    (*env.mutable_fields())[key].set_string_value(value);
  }
  return env;
}

}  // namespace

absl::Status WriteSweepJson(
    const std::string& path, const std::string& platform,
    const std::string& transport, const SweepOptions& o, int gpus,
    const std::vector<SweepRow>& rows,
    const std::vector<std::pair<std::string, std::string>>& environment) {
  Struct s;
  auto& f = *s.mutable_fields();
  f["platform"].set_string_value(platform);
  f["transport"].set_string_value(transport);
  f["op"].set_string_value(CollectiveOp_Name(o.op));
  f["algorithm"].set_string_value(Algorithm_Name(o.algorithm));
  f["gpus"].set_number_value(gpus);
  f["channels"].set_number_value(o.channels);
  auto* list = f["rows"].mutable_list_value();
  for (const SweepRow& row : rows) {
    auto& r = *list->add_values()->mutable_struct_value()->mutable_fields();
    r["size_bytes"].set_number_value(static_cast<double>(row.size_bytes));
    r["time_us"].set_number_value(row.time_us);
    r["algbw_gbps"].set_number_value(row.algbw_gbps);
    r["busbw_gbps"].set_number_value(row.busbw_gbps);
    r["checked"].set_number_value(static_cast<double>(row.checked));
    r["wrong"].set_number_value(static_cast<double>(row.wrong));
  }
  *f["environment"].mutable_struct_value() = EnvStruct(environment);
  return WriteStruct(s, path);
}

absl::Status WriteEnvironmentJson(
    const std::string& path,
    const std::vector<std::pair<std::string, std::string>>& environment) {
  return WriteStruct(EnvStruct(environment), path);
}

}  // namespace shardsim::hw

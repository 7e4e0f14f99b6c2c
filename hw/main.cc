// shardsim-hw: the simulator's schedules and collective plans on a real
// machine, one MPI rank per GPU (or per CPU stand-in).
//
//   shardsim-hw collective   a collective over a size sweep, data-checked
//   shardsim-hw run SCENARIO one training step of the lowered schedule
//   shardsim-hw help
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "hw/backend.h"
#include "hw/cpu/cpu_backend.h"
#include "hw/runtime/fault.h"
#include "hw/runtime/runtime.h"
#include "sim/analyze/analyze.h"
#include "sim/collective/sweep.h"
#include "sim/results/results.h"
#include "sim/results/sink.h"
#include "sim/results/trace.h"
#include "sim/scenario/args.h"
#include "sim/scenario/flags.h"
#include "sim/scenario/overrides.h"
#include "sim/scenario/scenario.h"
#include "sim/schema/limits.h"

#if defined(SHARDSIM_HAVE_CUDA)
#include <cuda_runtime.h>

#include "hw/cuda/cuda_backend.h"
#define SHARDSIM_HW_NCCL 1
#endif

// The flags of this binary alone; the shared ones are in sim/scenario/flags.h.

// The machine: transport and mesh.
ABSL_FLAG(std::string, transport, "",
          "cpu or nccl (default: nccl when built with CUDA and a GPU is "
          "visible, else cpu)");
ABSL_FLAG(int, gpus_per_node, 0,
          "ranks per node of the mesh (0 = the platform's gpus_per_node)");
ABSL_FLAG(double, compute_scale, 0,
          "cpu transport: compute ops sleep their simulated time x this");

// run
ABSL_FLAG(int, steps, 1, "run: steps replayed (the mean is reported)");
ABSL_FLAG(bool, plan_only, false,
          "run: lower each strategy's step and report its allocation plan "
          "(planned peak per rank, the simulator's prediction beside it); "
          "nothing is allocated or replayed, and every strategy of the "
          "scenario (or --strategy list) is planned");

// Failures: the watchdog, and a fault to test it with.
ABSL_FLAG(double, watchdog_s, 300,
          "a rank whose collective, barrier or stream wait makes no progress "
          "for this many seconds aborts every rank (exit 3)");
ABSL_FLAG(std::string, fault, "",
          "testing aid: skip:RANK:N, die:RANK:N or corrupt:RANK:N (rank "
          "RANK skips, SIGKILLs itself before, or changes the result of its "
          "N-th collective run)");

namespace shardsim::hw {
namespace {

// Per rank: the plan's peak, the measured one, and the simulator's
// prediction (the row's peak_memory_bytes, reserve included) beside them.
std::string FormatRankMemory(const ResultRow& row) {
  auto gb = [](bool has, int64_t b) {
    return has ? absl::StrFormat("%.3f", b / 1e9) : std::string("-");
  };
  std::string out = absl::StrFormat(
      "per-rank memory, GB (1e9 bytes): planned = the allocation plan's "
      "peak; measured = allocator high-water + held; device = "
      "cudaMemGetInfo used\n%6s %10s %10s %10s %10s %10s\n",
      "rank", "planned", "measured", "held", "device", "predicted");
  for (const RankMemory& m : row.rank_memory()) {
    absl::StrAppendFormat(
        &out, "%6d %10s %10s %10s %10s %10.3f\n", m.rank(),
        gb(true, m.planned_peak_memory_bytes()),
        gb(m.has_measured_peak_memory_bytes(), m.measured_peak_memory_bytes()),
        gb(m.has_held_bytes(), m.held_bytes()),
        gb(m.has_device_used_bytes(), m.device_used_bytes()),
        row.peak_memory_bytes() / 1e9);
  }
  return out;
}

constexpr char kUsage[] =
    "shardsim-hw: run shardsim's schedules and collective plans on real "
    "machines\n"
    "\n"
    "launch one rank per GPU: mpirun -np N shardsim-hw COMMAND ...\n"
    "\n"
    "commands:\n"
    "  collective --platform P [sweep flags]: a data-checked collective\n"
    "            sweep over all ranks in nccl-tests' layout, with a #wrong\n"
    "            column\n"
    "  run SCENARIO --strategy X [--steps N --warmup W] [--trace FILE]\n"
    "            [overrides]: replay one lowered training step; the MPI\n"
    "            world size is the GPU count (--trace: every rank's\n"
    "            measured timeline, a process per rank)\n"
    "  run SCENARIO --plan-only [--strategy X,Y,...] [overrides]: each\n"
    "            strategy's allocation plan at the world size, nothing\n"
    "            allocated or replayed: planned peak per GPU beside the\n"
    "            simulator's (which adds the platform's reserve)\n"
    "  help      this text\n"
    "\n"
    "common: --transport cpu|nccl --gpus-per-node M --json FILE\n"
    "  --compute-scale S (cpu: compute ops sleep S x their simulated time)\n"
    "  --watchdog-s S (default 300): a rank whose collective, barrier or\n"
    "            stream wait makes no progress for S seconds prints what it\n"
    "            waits on and aborts every rank (exit 3); both transports\n"
    "\n"
    "testing aid (tests/hw_fault_test.sh):\n"
    "  --fault skip:R:N  rank R silently skips its N-th collective run (the\n"
    "            others wait on it: the watchdog ends the job)\n"
    "  --fault die:R:N   rank R raises SIGKILL on itself just before its\n"
    "            N-th collective run (a rank dying mid-collective)\n"
    "  --fault corrupt:R:N  rank R adds one to every element of its N-th\n"
    "            collective run's result (cpu: the data check reports it,\n"
    "            exit 3)\n"
    "  A collective run: one collective op of a step, one checked, warm-up\n"
    "  or timed run of `collective`; N counts from 1 over the whole "
    "process.\n" SHARDSIM_SCENARIO_FLAGS_HELP SHARDSIM_SWEEP_FLAGS_HELP;

int VisibleGpus() {
#if defined(SHARDSIM_HAVE_CUDA)
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
#else
  return 0;
#endif
}

// Picks the transport and makes the backend. Every rank decides alike
// except for GPU visibility and device setup, which AnyFailed then agrees on.
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const Mesh& mesh,
                                                     const Platform& platform) {
  absl::StatusOr<Fault> fault =
      ParseFault(absl::GetFlag(FLAGS_fault), mesh.gpus());
  if (!fault.ok()) return fault.status();
  std::string transport = absl::GetFlag(FLAGS_transport);
#if defined(SHARDSIM_HW_NCCL)
  const bool built_nccl = true;
#else
  const bool built_nccl = false;
#endif
  if (transport.empty()) {
    transport = built_nccl && VisibleGpus() > 0 ? "nccl" : "cpu";
  }
  if (transport == "cpu") {
    CpuOptions options;
    options.compute_scale = absl::GetFlag(FLAGS_compute_scale);
    options.channels = absl::GetFlag(FLAGS_channels);
    options.watchdog_s = absl::GetFlag(FLAGS_watchdog_s);
    options.fault = *fault;
    return MakeCpuBackend(mesh, platform, options);
  }
  if (transport != "nccl") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--transport: \"", transport, "\" is neither cpu nor nccl"));
  }
  if (!built_nccl) {
    return absl::FailedPreconditionError(
        "--transport nccl: this shardsim-hw was built without the CUDA/NCCL "
        "backend (needs nvcc, NCCL and hw/cuda at build time); use "
        "--transport cpu");
  }
  if (VisibleGpus() == 0) {
    return absl::FailedPreconditionError(
        "--transport nccl: no GPU is visible to this rank "
        "(CUDA_VISIBLE_DEVICES, driver)");
  }
#if defined(SHARDSIM_HW_NCCL)
  CudaOptions options;
  // A trace gets every kernel timed one by one (what `shardsim calibrate`
  // fits); without one only ops are, and no event sits between kernels.
  options.kernel_timeline = !absl::GetFlag(FLAGS_trace).empty();
  options.watchdog_s = absl::GetFlag(FLAGS_watchdog_s);
  options.fault = *fault;
  return MakeCudaBackend(mesh, platform, options);
#else
  return absl::InternalError("unreachable");
#endif
}

int GpusPerNode(const Platform& platform) {
  const int flag = absl::GetFlag(FLAGS_gpus_per_node);
  return flag > 0 ? flag : platform.gpus_per_node();
}

void PrintEnvironment(const Backend& backend) {
  for (const auto& [key, value] : backend.Environment()) {
    std::printf("# env %s: %s\n", key.c_str(), value.c_str());
  }
}

std::string EnvPath(const std::string& json) {
  return absl::StrCat(json, ".env.json");
}

// Returns the exit code.
int RunCollective(const MpiSession& mpi) {
  const int rank = mpi.rank();
  CollectiveSweep sweep;
  Platform platform;
  std::unique_ptr<Backend> backend;
  absl::Status setup = [&]() -> absl::Status {
    absl::StatusOr<CollectiveSweep> s = SweepFromFlags();
    if (!s.ok()) return s.status();
    sweep = *std::move(s);
    const std::optional<std::string> name = absl::GetFlag(FLAGS_platform);
    if (!name) return absl::InvalidArgumentError("--platform: required");
    absl::StatusOr<Platform> p = LoadPlatform(*name, ".");
    if (!p.ok()) return p.status();
    platform = *p;
    sweep.set_channels(SweepChannels(sweep, platform));
    if (mpi.size() < 2) {
      return absl::InvalidArgumentError(
          "collective: launch at least 2 ranks (mpirun -np N)");
    }
    absl::StatusOr<Mesh> mesh =
        MeshFromWorld(mpi.size(), GpusPerNode(platform));
    if (!mesh.ok()) return mesh.status();
    absl::StatusOr<std::unique_ptr<Backend>> b = MakeBackend(*mesh, platform);
    if (!b.ok()) return b.status();
    backend = *std::move(b);
    return absl::OkStatus();
  }();
  if (AnyFailed(rank, setup)) return 1;

  absl::StatusOr<CollectiveResults> results = RunSweep(backend.get(), sweep);
  // Plan errors (InvalidArgument: an algorithm that cannot run this op on
  // this shape) come before any message and are the same on every rank.
  // Any other (a device, NCCL or MPI error) may be this rank's alone, with
  // the others waiting on it in a collective: abort them all.
  if (!results.ok() && !absl::IsInvalidArgument(results.status())) {
    AbortAll(rank, results.status());
  }
  if (AnyFailed(rank, results.status())) return 1;
  results->set_platform(platform.name());
  for (const auto& [key, value] : backend->Environment()) {
    (*results->mutable_measured()->mutable_environment())[key] = value;
  }
  if (rank == 0) {
    PrintEnvironment(*backend);
    if (absl::Status s = Emit(FormatCollectiveTable(*results), *results,
                              {absl::GetFlag(FLAGS_json), ""});
        !s.ok()) {
      AbortAll(rank, s);
    }
  }
  for (const CollectiveRow& row : results->rows()) {
    if (row.wrong() != 0) return 3;  // data errors: a distinct exit code
  }
  return 0;
}

// run --plan-only: each strategy of `job` lowered at the world's mesh (the
// whole step, as `run` replays it; no traffic counted) and its allocation
// plan walked, as `run` does before it replays; rank 0 prints and writes
// the rows. Returns the exit code.
int PlanOnly(const MpiSession& mpi, const std::string& path, const Job& job,
             const std::vector<std::string>& specs) {
  const int rank = mpi.rank();
  Results results;
  results.set_scenario(path);
  absl::Status planned = [&]() -> absl::Status {
    for (const std::string& spec : specs) {
      absl::StatusOr<Point> p = LowerPoint(job, spec, mpi.size());
      if (!p.ok()) return p.status();
      // Per rank: its program's plan (one program: every rank's the same).
      absl::StatusOr<std::vector<int64_t>> peaks =
          PlannedPeaks(*p->schedule, p->mesh);
      if (!peaks.ok()) return peaks.status();
      ResultRow& row = *results.add_rows();
      row = p->row;
      for (int r = 0; r < mpi.size(); ++r) {
        RankMemory* m = row.add_rank_memory();
        m->set_rank(r);
        m->set_planned_peak_memory_bytes((*peaks)[r]);
      }
    }
    return absl::OkStatus();
  }();
  if (AnyFailed(rank, planned)) return 1;
  if (rank != 0) return 0;
  std::string table = absl::StrFormat(
      "# %s: allocation plans at %d GPUs (the MPI world size), nothing "
      "replayed\n",
      path, mpi.size());
  absl::StrAppendFormat(&table, "%-28s %6s %14s %14s %14s\n", "strategy",
                        "gpus", "planned (B)", "reserve (B)", "simulator (B)");
  for (const ResultRow& row : results.rows()) {
    absl::StrAppendFormat(&table, "%-28s %6d %14d %14d %14d\n", row.strategy(),
                          row.gpus(),
                          row.rank_memory(0).planned_peak_memory_bytes(),
                          row.reserved_bytes(), row.peak_memory_bytes());
  }
  if (absl::Status s = Emit(table, results, {absl::GetFlag(FLAGS_json), ""});
      !s.ok()) {
    std::fprintf(stderr, "shardsim-hw: error: rank 0: %s\n",
                 std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

int RunStep(const MpiSession& mpi, const std::string& path) {
  const int rank = mpi.rank();
  const bool plan_only = absl::GetFlag(FLAGS_plan_only);
  Job job;
  Point point;
  std::vector<int64_t> planned;  // per rank: its program's planned peak
  std::string spec;
  std::vector<std::string> specs;  // --plan-only: every one
  std::unique_ptr<Backend> backend;
  absl::Status setup = [&]() -> absl::Status {
    absl::StatusOr<Scenario> scenario = ReadScenario(path);
    if (!scenario.ok()) return scenario.status();
    const ScenarioOverrides o = OverridesFromFlags();
    if (absl::Status s = ApplyOverrides(o, &*scenario); !s.ok()) return s;
    if (o.gpus &&
        (scenario->gpus_size() != 1 || scenario->gpus(0) != mpi.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gpus: the GPU count is the MPI world size, ",
                       mpi.size(), "; got \"", *o.gpus, "\""));
    }
    if (scenario->strategies_size() != 1 && !plan_only) {
      return absl::InvalidArgumentError(
          absl::StrCat("run replays one strategy; the scenario has ",
                       scenario->strategies_size(), ": give one --strategy"));
    }
    spec = scenario->strategies(0);
    specs.assign(scenario->strategies().begin(), scenario->strategies().end());
    // The GPU count is the MPI world size, whatever the scenario says.
    scenario->clear_gpus();
    scenario->add_gpus(mpi.size());
    absl::StatusOr<Job> j = ResolveJob(path, *std::move(scenario));
    if (!j.ok()) return j.status();
    job = *std::move(j);
    // What --allow-unmodelled let through, said as shardsim says it.
    if (mpi.rank() == 0) {
      for (const std::string& warning : job.warnings) {
        std::fprintf(stderr, "shardsim-hw: warning: %s\n", warning.c_str());
      }
    }
    const int gpn = GpusPerNode(job.platform);
    absl::StatusOr<Mesh> mesh = MeshFromWorld(mpi.size(), gpn);
    if (!mesh.ok()) return mesh.status();
    job.platform.set_gpus_per_node(gpn);
    if (plan_only) return absl::OkStatus();
    absl::StatusOr<Point> p = AnalyzePoint(job, spec, mpi.size());
    if (!p.ok()) return p.status();
    point = *std::move(p);
    if (point.mesh.gpus() != mesh->gpus() ||
        point.mesh.gpus_per_node != mesh->gpus_per_node) {
      return absl::InternalError(
          absl::StrCat("the lowered schedule's mesh (", point.mesh.nodes, "x",
                       point.mesh.gpus_per_node, ") is not the world's (",
                       mesh->nodes, "x", mesh->gpus_per_node, ")"));
    }
    absl::StatusOr<std::vector<int64_t>> a =
        PlannedPeaks(*point.schedule, point.mesh);
    if (!a.ok()) return a.status();
    planned = *std::move(a);
    absl::StatusOr<std::unique_ptr<Backend>> b =
        MakeBackend(point.mesh, job.platform);
    if (!b.ok()) return b.status();
    backend = *std::move(b);
    return backend->Prepare(*point.schedule);
  }();
  if (AnyFailed(rank, setup)) return 1;
  if (plan_only) return PlanOnly(mpi, path, job, specs);
  if (rank == 0) {
    std::printf(
        "# %s: %s on %d ranks (the MPI world size is the GPU count), "
        "%d nodes x %d, %s transport\n",
        path.c_str(), spec.c_str(), mpi.size(), point.mesh.nodes,
        point.mesh.gpus_per_node, backend->name().c_str());
    if (point.row.oom()) {
      std::printf(
          "# note: the simulator predicts this point does not fit in "
          "GPU memory\n");
    }
  }

  absl::StatusOr<MeasuredSteps> mine =
      MeasureSteps(*point.schedule, backend.get(), absl::GetFlag(FLAGS_warmup),
                   absl::GetFlag(FLAGS_steps));
  if (!mine.ok()) AbortAll(rank, mine.status());
  const StepOnRanks all =
      GatherSteps(*point.schedule, *mine, backend->MeasuredMemory(), mpi);
  if (rank != 0) return 0;
  ResultRow row = point.row;
  for (int r = 0; r < mpi.size(); ++r) {
    const MemoryUse& use = all.memory[r];
    RankMemory* m = row.add_rank_memory();
    m->set_rank(r);
    m->set_planned_peak_memory_bytes(planned[r]);
    if (use.allocator_peak_bytes >= 0) {
      m->set_measured_peak_memory_bytes(use.allocator_peak_bytes);
    }
    if (use.held_bytes >= 0) m->set_held_bytes(use.held_bytes);
    if (use.device_used_bytes >= 0) {
      m->set_device_used_bytes(use.device_used_bytes);
    }
  }
  const TransferCounts& checked = all.counts;
  if (checked.checked_elements >= 0) {
    StepDataCheck* d = row.mutable_data_check();
    d->set_collective_elements(checked.checked_elements);
    d->set_collective_wrong(checked.wrong_elements);
    d->set_sent_bytes(checked.checked_bytes);
    d->set_sent_wrong(checked.wrong_bytes);
  }
  const double step_time = all.step_time_s;
  row.set_step_time_s(step_time);
  if (step_time > 0) {
    row.set_tokens_per_gpu_per_s(
        static_cast<double>(point.schedule->tokens_per_step()) /
        point.mesh.gpus() / step_time);
  }
  PrintEnvironment(*backend);
  std::string table = absl::StrFormat("%-24s %6s %14s %16s\n", "strategy",
                                      "gpus", "step time (s)", "tokens/s/GPU");
  absl::StrAppendFormat(&table, "%-24s %6d %14.6f %16.1f\n", spec,
                        point.mesh.gpus(), step_time,
                        row.tokens_per_gpu_per_s());
  table += FormatRankMemory(row);
  if (row.has_data_check()) {
    const StepDataCheck& d = row.data_check();
    absl::StrAppendFormat(
        &table,
        "data check over %d ranks: %d collective elements (%d wrong), %d "
        "sent bytes (%d wrong)\n",
        mpi.size(), d.collective_elements(), d.collective_wrong(),
        d.sent_bytes(), d.sent_wrong());
  }
  Results results;
  results.set_scenario(path);
  *results.add_rows() = row;
  const std::string json = absl::GetFlag(FLAGS_json);
  if (absl::Status s = Emit(table, results, {json, ""}); !s.ok()) {
    AbortAll(rank, s);
  }
  if (!json.empty()) {
    if (absl::Status s =
            WriteEnvironmentJson(EnvPath(json), backend->Environment());
        !s.ok()) {
      AbortAll(rank, s);
    }
  }
  if (const std::string trace = absl::GetFlag(FLAGS_trace); !trace.empty()) {
    if (absl::Status s = WriteChromeTrace(
            *point.schedule, all.timelines,
            absl::StrCat(spec, " on ", point.mesh.gpus(), " ranks (measured, ",
                         backend->name(), ")"),
            trace);
        !s.ok()) {
      AbortAll(rank, s);
    }
  }
  // Data errors: a distinct exit code, as the sweeps'.
  const StepDataCheck& d = row.data_check();
  return d.collective_wrong() != 0 || d.sent_wrong() != 0 ? 3 : 0;
}

}  // namespace
}  // namespace shardsim::hw

int main(int argc, char** argv) {
  shardsim::hw::MpiSession mpi(&argc, &argv);
  absl::SetProgramUsageMessage(shardsim::hw::kUsage);
  std::vector<std::string> keep;
  std::vector<char*> args_in = shardsim::Undash(argc, argv, &keep);
  std::vector<char*> args =
      absl::ParseCommandLine(static_cast<int>(args_in.size()), args_in.data());
  const std::string command = args.size() > 1 ? args[1] : "help";
  if (command == "help" || command == "--help") {
    if (mpi.rank() == 0) std::fputs(shardsim::hw::kUsage, stdout);
    return 0;
  }
  auto usage_error = [&](const std::string& message) {
    if (mpi.rank() == 0) {
      std::fprintf(stderr, "shardsim-hw: error: rank 0: %s\n\n%s",
                   message.c_str(), shardsim::hw::kUsage);
    }
    return 2;
  };
  // shardsim-hw's own numbers, checked like every other (the scenario's
  // are checked when it is read). Every rank sees the same flags.
  shardsim::FieldCheck flags("command line");
  flags
      .Count("gpus_per_node", absl::GetFlag(FLAGS_gpus_per_node), 0,
             shardsim::limits::kMaxGpusPerNode)
      .Count("steps", absl::GetFlag(FLAGS_steps), 1, 10000)
      .Count("warmup", absl::GetFlag(FLAGS_warmup), 0, 10000)
      .Real("compute_scale", absl::GetFlag(FLAGS_compute_scale), 0, 1e6)
      .Real("watchdog_s", absl::GetFlag(FLAGS_watchdog_s), 1e-3, 1e9);
  if (!flags.ok()) return usage_error(std::string(flags.status().message()));
  if (command == "collective") {
    if (args.size() != 2) return usage_error("collective takes flags only");
    return shardsim::hw::RunCollective(mpi);
  }
  if (command == "run") {
    if (args.size() != 3) return usage_error("run: give one scenario file");
    return shardsim::hw::RunStep(mpi, args[2]);
  }
  return usage_error("unknown command \"" + command + "\"");
}

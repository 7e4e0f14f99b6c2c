#include "sim/simulate/simulate.h"

#include <xbt/log.h>

#include <cmath>
#include <simgrid/s4u.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "sim/analyze/analyze.h"
#include "sim/collective/sweep.h"
#include "sim/engine/fabric.h"
#include "sim/engine/replay.h"
#include "sim/model/model.h"
#include "sim/results/results.h"
#include "sim/results/trace.h"
#include "sim/runner/isolate.h"
#include "sim/schema/limits.h"

namespace sg4 = simgrid::s4u;

namespace shardsim {
void StartSimGrid() {
  static int argc = 1;
  static char arg0[] = "shardsim";
  static char* argv[] = {arg0, nullptr};
  xbt_log_control_set("root.thresh:critical");
  auto* engine = new sg4::Engine(&argc, argv);
  engine->set_config("network/model:CM02");
  engine->set_config("network/crosstraffic:0");
  engine->set_config("network/TCP-gamma:1e18");
  // Actor stacks: SimGrid's default is 8 MiB each, taken from the heap,
  // whose first touch faults in a 2 MiB huge page per actor here
  // (cli/main.cc: SetUpHeap); 14 MB of a 1024-GPU ZeRO++ step's 54 MB, and
  // 25 ms. Our actors need under 8 KiB: 4 KiB overflows (SimGrid's guard
  // page: the point fails with signal 11), 16 KiB passes every test and
  // `reports/regenerate`. 256 KiB leaves a 32x margin.
  engine->set_config("contexts/stack-size:256");  // KiB
}

namespace {

// One process per program: one GPU stands for its class (schedule.proto
// Program), or for every GPU where the schedule has one program.
std::vector<TraceProcess> TraceProcesses(const Schedule& s,
                                         const StepTimes& times) {
  TraceProcess gpu;
  gpu.name = "GPU 0 (every GPU runs this program)";
  for (const OpTime& o : times) {
    gpu.times.push_back({o.start, o.end});
    gpu.host.push_back({o.host_start, o.host_end});
    gpu.causes.emplace_back(o.cause);
  }
  if (s.programs_size() <= 1) return {std::move(gpu)};
  std::vector<TraceProcess> out;
  for (int p = 0; p < s.programs_size(); ++p) {
    const Program& program = s.programs(p);
    TraceProcess& proc = out.emplace_back(gpu);
    proc.program = p;
    proc.name = absl::StrCat("program ", p, " (", program.role(), "), ranks ",
                             absl::StrJoin(program.ranks(), ","));
  }
  return out;
}

absl::StatusOr<std::string> SimulatePoint(const Job& job,
                                          const std::string& spec, int gpus,
                                          const EngineOptions& options,
                                          bool single) {
  // Folded where the engine collapses the step anyway: it never needs the
  // repeating micro-batches stored.
  absl::StatusOr<Point> point = AnalyzePoint(
      job, spec, gpus,
      options.collapse && options.mode == FlowMode::kFast ? Storage::kFolded
                                                          : Storage::kWhole);
  if (!point.ok()) return point.status();
  ResultRow& row = point->row;
  if (!row.oom()) {
    StartSimGrid();
    absl::StatusOr<std::unique_ptr<Fabric>> fabric =
        Fabric::Build(job.platform, point->mesh, options.drop_dominated);
    if (!fabric.ok()) return fabric.status();
    CollectiveEngine collectives(**fabric, options.mode,
                                 job.platform.channels(), options.prepared);
    collectives.set_replay_stages(options.replay_stages);
    collectives.set_network_symmetry(options.network_symmetry);
    const StepOps step = point->ops();
    absl::StatusOr<StepTiming> t =
        ReplayStep(step, fabric->get(), &collectives, options.collapse);
    if (!t.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(job.path, ": \"", spec, "\" at ", gpus,
                       " GPUs: ", t.status().message()));
    }
    SetStepTime(job, *point, t->step_time_s, &row);
    row.set_compute_s(t->compute_busy_s);
    // Every second of the critical path spent in a collective or a send,
    // whichever stream it ran on; a pipeline's bubble is not among them.
    double exposed = 0;
    for (const ExposedCollective& e : t->breakdown.by_collective()) {
      exposed += e.seconds();
    }
    row.set_exposed_comm_s(exposed);
    *row.mutable_breakdown() = t->breakdown;
    *row.mutable_replay() = t->replay;
    const CollectiveEngine::ReplayCounts counts = collectives.replay_counts();
    row.mutable_replay()->set_stages_recorded(counts.recorded);
    row.mutable_replay()->set_stages_replayed(counts.replayed);
    row.mutable_replay()->set_replays_disturbed(counts.disturbed);
    row.mutable_replay()->set_network_nodes(collectives.network_nodes());
    if (!options.trace_path.empty()) {
      const OwnedSchedule whole = Unfold(step);
      if (absl::Status s = WriteChromeTrace(
              *whole, TraceProcesses(*whole, t->ops),
              absl::StrCat(job.model.name(), " ", spec, " on ", gpus,
                           " GPUs of ", job.platform.name()),
              TracePathFor(options.trace_path, spec, gpus, single));
          !s.ok()) {
        return s;
      }
    }
  }
  return row.SerializeAsString();
}

}  // namespace

std::string TracePathFor(const std::string& path, const std::string& strategy,
                         int gpus, bool single) {
  if (single) return path;
  const std::string tag = absl::StrCat(
      ".", absl::StrReplaceAll(strategy, {{"/", "_"}, {":", "_"}, {"=", "-"}}),
      ".", gpus);
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
    return path + tag;
  }
  return path.substr(0, dot) + tag + path.substr(dot);
}

absl::StatusOr<Results> SimulateJob(const Job& job,
                                    const EngineOptions& options) {
  if (absl::Status s = ValidatePlatform(
          job.platform, absl::StrCat("platform ", job.platform.name()));
      !s.ok()) {
    return s;
  }
  // Every point resolved and checked first (nothing lowered: cheap), so
  // that a bad one fails before any other is simulated.
  if (absl::Status s = CheckPoints(job); !s.ok()) return s;
  std::vector<JobPoint> points;
  for (const std::string& spec : job.scenario.strategies()) {
    for (int gpus : job.scenario.gpus()) points.push_back({&job, spec, gpus});
  }
  absl::StatusOr<Results> results = SimulatePoints(points, options);
  if (results.ok()) results->set_scenario(job.path);
  return results;
}

ChildTask PointTask(const JobPoint& point, const EngineOptions& options,
                    bool single) {
  return [point, options, single] {
    return SimulatePoint(*point.job, point.spec, point.gpus, options, single);
  };
}

absl::StatusOr<Results> SimulatePoints(const std::vector<JobPoint>& points,
                                       const EngineOptions& options) {
  const bool single = points.size() == 1;
  std::vector<ChildTask> tasks;
  for (const JobPoint& p : points) {
    tasks.push_back(PointTask(p, options, single));
  }
  // A progress line (sim/runner/progress.h); under MPI,
  // rank 0 shows its own points (sim/runner/distribute.h).
  IsolateOptions isolate;
  isolate.jobs = options.jobs;
  isolate.time_limit_s = options.time_limit_s;
  isolate.progress = true;
  Results results;
  for (absl::StatusOr<std::string>& r : options.run_tasks
                                            ? options.run_tasks(tasks, isolate)
                                            : RunIsolated(tasks, isolate)) {
    if (!r.ok()) return r.status();
    if (!results.add_rows()->ParseFromString(*r)) {
      return absl::InternalError("a simulation returned an unreadable row");
    }
  }
  return results;
}

absl::StatusOr<CollectiveResults> SimulateCollective(
    const Platform& platform, int gpus, const CollectiveSweep& sweep,
    const EngineOptions& options) {
  if (absl::Status s = ValidatePlatform(
          platform, absl::StrCat("platform ", platform.name()));
      !s.ok()) {
    return s;
  }
  absl::StatusOr<Mesh> mesh = JobMesh(platform, gpus);
  if (!mesh.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "collective sweep: field gpus: ", mesh.status().message()));
  }
  if (absl::Status s = ValidateSweep(sweep, "collective sweep"); !s.ok()) {
    return s;
  }
  const int channels = SweepChannels(sweep, platform);
  auto task = [&]() -> absl::StatusOr<std::string> {
    StartSimGrid();
    absl::StatusOr<std::unique_ptr<Fabric>> fabric =
        Fabric::Build(platform, *mesh);
    if (!fabric.ok()) return fabric.status();
    CollectiveEngine engine(**fabric, options.mode, channels);
    engine.set_replay_stages(options.replay_stages);
    engine.set_network_symmetry(options.network_symmetry);
    CollectiveResults out;
    out.set_platform(platform.name());
    out.set_op(sweep.op());
    out.set_algorithm(sweep.algorithm());
    out.set_gpus(gpus);
    out.set_channels(channels);
    const std::vector<CollectiveCall> calls = SweepCalls(sweep, *mesh);
    for (const CollectiveCall& c : calls) {
      if (absl::Status s = engine.Prepare(c); !s.ok()) return s;
    }
    engine.UseSymmetry();
    // The sizes run one after another in one simulation, as nccl-tests does.
    sg4::Actor::create("sweep", (*fabric)->gpu(0), [&] {
      for (const CollectiveCall& c : calls) {
        const double start = sg4::Engine::get_clock();
        engine.Run(c);
        const double t = sg4::Engine::get_clock() - start;
        CollectiveRow* row = out.add_rows();
        row->set_size_bytes(c.bytes());
        row->set_time_us(t * 1e6);
        row->set_algbw_gbps(c.bytes() / t / 1e9);
        row->set_busbw_gbps(row->algbw_gbps() * BusFactor(c.op(), gpus));
        row->set_protocol(engine.protocol(c).name());
      }
    });
    sg4::Engine::get_instance()->run();
    return out.SerializeAsString();
  };
  std::vector<absl::StatusOr<std::string>> r =
      RunIsolated({task}, 1, options.time_limit_s);
  if (!r[0].ok()) return r[0].status();
  CollectiveResults out;
  if (!out.ParseFromString(*r[0])) {
    return absl::InternalError("the collective simulation returned garbage");
  }
  return out;
}

}  // namespace shardsim

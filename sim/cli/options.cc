#include "sim/cli/options.h"

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "sim/cli/commands.h"
#include "sim/scenario/flags.h"
#include "sim/schema/limits.h"

// Outputs beside --json (sim/scenario/flags.h).
ABSL_FLAG(std::string, csv, "",
          "write the results as CSV here: one header line, one row per "
          "point, the JSON's fields as columns (units in their names)");

// run
ABSL_FLAG(bool, breakdown, false,
          "run: also print why each step takes what it takes (critical path "
          "by cause)");
ABSL_FLAG(bool, collapse, true,
          "run: simulate repeating micro-batches until their state repeats, "
          "then extrapolate exactly (false: every micro-batch)");
ABSL_FLAG(bool, drop_dominated, true,
          "run: of GPUs that compute alike but slower (platform degraded), "
          "replay only the slowest class of each GPU model, exactly (false: "
          "every class)");
ABSL_FLAG(int, jobs, 2, "simulations run at once (1..256)");

// run and collective: the engine
ABSL_FLAG(bool, replay_stages, true,
          "network flows of a stage alone on the fat tree replay its first "
          "lone run, exactly (false: every flow runs)");
ABSL_FLAG(bool, network_symmetry, true,
          "where every node's network flows are another's shifted, only "
          "those of the nodes the rest mirror run, exactly (false: every "
          "node's run)");
ABSL_FLAG(std::string, mode, "fast",
          "engine flows: fast (one per hop) or per-step (one per message)");
ABSL_FLAG(double, time_limit, 0,
          "run, collective: stop with an error after this many seconds; "
          "plan: stop there and give the best points simulated so far "
          "(or, if none, the estimate's best of those bounded), marked "
          "incomplete; with several GPU counts, each count's search has "
          "this limit (0: no limit)");

// volume
ABSL_FLAG(bool, detail, false, "volume: one line per kind of collective");

// plan
ABSL_FLAG(std::optional<double>, memory_cap, std::nullopt,
          "plan: peak memory per GPU a point may reach, GiB (unset: the "
          "GPU's memory)");
ABSL_FLAG(int, top, 10, "plan: rows of the best points shown");
ABSL_FLAG(std::string, figure, "",
          "plan: draw the Pareto front here (PNG or PDF; needs Debian's "
          "python3 with python3-matplotlib)");
ABSL_FLAG(bool, exhaustive, false,
          "plan: simulate every point that fits, none pruned by the lower "
          "bound");
ABSL_FLAG(bool, algorithms, true,
          "plan: search every algorithm for each group kind "
          "(--noalgorithms: rings only)");
ABSL_FLAG(bool, settings, true,
          "plan: search recomputation on and off, each framework's "
          "execution knobs and, where the scenario gives "
          "global_batch_tokens, every micro-batch size that divides it "
          "(--nosettings: the scenario's own)");
ABSL_FLAG(bool, search_parallelism, false,
          "plan: search the parallel layouts too (--search-parallelism: "
          "tensor-parallel sizes, pipeline stages and chunks)");
ABSL_FLAG(bool, deployable, false,
          "plan: search only the points a mainstream framework runs as "
          "configured (DeepSpeed, PyTorch DDP or FSDP, with NCCL's "
          "algorithms): no PaRO, Lins or research algorithm");

// calibrate and validate
ABSL_FLAG(std::string, measurements, "",
          "calibrate, validate: comma-separated measurement files "
          "(nccl-tests text or -J JSON, shardsim-hw JSON); PATH:op=...");
ABSL_FLAG(std::string, out, "", "calibrate: the calibrated platform file");
ABSL_FLAG(double, max_median_error, -1,
          "validate: exit non-zero when a file's median error exceeds this");
ABSL_FLAG(bool, published, false,
          "validate: simulate published training runs (the files or "
          "directories given, else the shipped validate/published/) and "
          "compare their measured throughput");

namespace shardsim {
namespace {

absl::StatusOr<FlowMode> ParseMode() {
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "fast") return FlowMode::kFast;
  if (mode == "per-step") return FlowMode::kPerStep;
  return absl::InvalidArgumentError(
      absl::StrCat("--mode: \"", mode, "\" is neither fast nor per-step"));
}

// --jobs and --time-limit, checked like every other number.
absl::Status CheckEngineFlags() {
  FieldCheck check("command line");
  return check.Count("jobs", absl::GetFlag(FLAGS_jobs), 1, 256)
      .Real("time_limit", absl::GetFlag(FLAGS_time_limit), 0, 1e9)
      .status();
}

}  // namespace

absl::StatusOr<EngineOptions> EngineOptionsFromFlags(SweepRanks* ranks) {
  absl::StatusOr<EngineOptions> options = CollectiveEngineOptions();
  if (!options.ok()) return options;
  options->jobs = absl::GetFlag(FLAGS_jobs);
  options->collapse = absl::GetFlag(FLAGS_collapse);
  options->drop_dominated = absl::GetFlag(FLAGS_drop_dominated);
  options->trace_path = absl::GetFlag(FLAGS_trace);
  if (ranks != nullptr) {
    options->ranks = ranks->size();
    options->run_tasks = [ranks](const std::vector<ChildTask>& tasks,
                                 const IsolateOptions& isolate) {
      return ranks->Run(tasks, isolate);
    };
  }
  return options;
}

absl::StatusOr<EngineOptions> CollectiveEngineOptions() {
  absl::StatusOr<FlowMode> mode = ParseMode();
  if (!mode.ok()) return mode.status();
  if (absl::Status s = CheckEngineFlags(); !s.ok()) return s;
  EngineOptions options;
  options.mode = *mode;
  options.replay_stages = absl::GetFlag(FLAGS_replay_stages);
  options.network_symmetry = absl::GetFlag(FLAGS_network_symmetry);
  options.time_limit_s = absl::GetFlag(FLAGS_time_limit);
  return options;
}

OutputFiles OutputFilesFromFlags() {
  return {absl::GetFlag(FLAGS_json), absl::GetFlag(FLAGS_csv)};
}

const std::string& UsageText() {
  static const std::string* const text = new std::string(Usage());
  return *text;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "shardsim: error: %s\n",
               std::string(status.message()).c_str());
  return 1;
}

}  // namespace shardsim

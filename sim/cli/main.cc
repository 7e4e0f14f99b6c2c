// shardsim: one binary, one subcommand per question (sim/cli/commands.h
// lists them with the flags each reads; `shardsim help COMMAND`).
#include <malloc.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sim/analyze/analyze.h"
#include "sim/cli/commands.h"
#include "sim/scenario/flags.h"
#include "sim/cli/revision.h"  // generated: SHARDSIM_VERSION, SHARDSIM_REVISION
#include "sim/simulate/simulate.h"
#include "sim/results/csv.h"
#include "sim/results/results.h"
#include "sim/runner/distribute.h"
#include "sim/scenario/args.h"
#include "sim/scenario/data_dir.h"
#include "sim/scenario/overrides.h"
#include "sim/scenario/platform_file.h"
#include "sim/scenario/scenario.h"
#include "sim/schedule/lower.h"
#include "sim/schema/limits.h"
#include "sim/search/search.h"
#include "sim/strategy/strategy.h"
#include "validate/cli.h"

// The flags of this binary alone; the shared ones are in sim/scenario/flags.h.

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
          "plan: stop there and give the best points simulated so far, "
          "marked incomplete (0: no limit)");

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

namespace shardsim {
namespace {

// A point lowers, folds and copies schedules of tens of MB one after
// another. With glibc's defaults (mallopt(3): blocks over a dynamic
// threshold of at most 32 MiB are mmap'd, and free memory above 128 KiB
// goes back to the OS) each of them faults its pages in anew: 10% of a
// ZeRO-3 step of 128 micro-batches (tests/bench/engine_bench.py). Kept
// on the heap and not trimmed, freed pages are reused; untouched heap
// is not resident.
//
// Faults are dear in virtual machines: on the 2-core VM of the benchmarks
// one costs about 12 us (40 MiB touched page by page: 120 ms), and that
// step still took 7,100 of them. So the heap a point is about to grow
// into asks for transparent huge pages, which a first touch faults in 2
// MiB at a time: what glibc's tunable glibc.malloc.hugetlb=1 does, which
// only the environment can set. Best effort: where the kernel gives huge
// pages never (or always), the request changes nothing.
void SetUpHeap() {
  constexpr int kThreshold = 32 << 20;  // glibc's largest (64-bit)
  constexpr int kTopPad = 64 << 20;     // fewer, larger heap extensions
  mallopt(M_MMAP_THRESHOLD, kThreshold);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);  // above a point's schedules
  mallopt(M_TOP_PAD, kTopPad);
  // Below the threshold, so taken from the heap, which grows by it and
  // the pad; freed, it stays there for the point to use.
  constexpr uintptr_t kHuge = 2 << 20;  // x86-64's PMD page
  constexpr uintptr_t kBlock = kThreshold - kHuge;
  void* block = std::malloc(kBlock);
  if (block == nullptr) return;
  const uintptr_t lo =
      (reinterpret_cast<uintptr_t>(block) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t hi = reinterpret_cast<uintptr_t>(sbrk(0)) & ~(kHuge - 1);
  std::free(block);
  // Only a block the heap's end lies just past: one that glibc had to map
  // on its own (no room to grow the heap) is left as it is.
  if (hi > lo && hi - lo <= kBlock + kTopPad) {
    madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
  }
}

const std::string& UsageText() {
  static const std::string* const text = new std::string(Usage());
  return *text;
}

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

// A collective sweep's engine: --mode and --time-limit.
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

// --json and --csv: the results whole, and their rows one per line.
absl::Status WriteOutputs(const google::protobuf::Message& results,
                          const std::vector<CsvRow>& rows) {
  if (const std::string json = absl::GetFlag(FLAGS_json); !json.empty()) {
    if (absl::Status s = WriteJson(results, json); !s.ok()) return s;
  }
  if (const std::string csv = absl::GetFlag(FLAGS_csv); !csv.empty()) {
    return WriteCsv(rows, csv);
  }
  return absl::OkStatus();
}

std::vector<CsvRow> CsvRowsOf(const Results& results) {
  std::vector<CsvRow> rows;
  for (const ResultRow& row : results.rows()) rows.push_back({{}, &row});
  return rows;
}

// A plan's rows, each led by the list it is in (the JSON's field).
std::vector<CsvRow> CsvRowsOf(const SearchResults& plan) {
  std::vector<CsvRow> rows;
  for (const auto& [list, entries] :
       {std::pair<const char*,
                  const google::protobuf::RepeatedPtrField<ResultRow>*>{
            "best", &plan.best()},
        {"presets", &plan.presets()},
        {"pruned_presets", &plan.pruned_presets()},
        {"pareto", &plan.pareto()}}) {
    for (const ResultRow& row : *entries)
      rows.push_back({{{"list", list}}, &row});
  }
  return rows;
}

// A sweep's rows, each led by what the sweep ran.
void AddCsvRows(const CollectiveResults& results, std::vector<CsvRow>* rows) {
  for (const CollectiveRow& row : results.rows()) {
    rows->push_back({{{"platform", results.platform()},
                      {"op", CollectiveOp_Name(results.op())},
                      {"algorithm", Algorithm_Name(results.algorithm())},
                      {"gpus", absl::StrCat(results.gpus())},
                      {"channels", absl::StrCat(results.channels())}},
                     &row});
  }
}

// `shardsim collective`: no scenario, a platform and a size sweep.
// `shardsim collective FILE`: a CollectiveScenario, one sweep per algorithm.
absl::Status RunCollectiveScenario(const std::string& path) {
  absl::StatusOr<CollectiveScenario> sc = ReadCollectiveScenario(path);
  if (!sc.ok()) return sc.status();
  auto field_error = [&](const char* field, absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": field ", field, ": ", why));
  };
  absl::StatusOr<Platform> platform = LoadPlatform(sc->platform(), DirOf(path));
  if (!platform.ok())
    return field_error("platform", platform.status().message());
  if (sc->op() == OP_UNSPECIFIED) return field_error("op", "none given");
  if (sc->algorithms().empty()) return field_error("algorithms", "none given");
  if (sc->gpus() < 2) return field_error("gpus", "must be >= 2");
  absl::StatusOr<EngineOptions> options = CollectiveEngineOptions();
  if (!options.ok()) return options.status();
  CollectiveBenchmark out;
  out.set_scenario(path);
  for (int algorithm : sc->algorithms()) {
    CollectiveSweep sweep;
    sweep.set_op(sc->op());
    sweep.set_algorithm(static_cast<Algorithm>(algorithm));
    sweep.set_channels(sc->channels());
    sweep.set_min_bytes(sc->min_bytes());
    sweep.set_max_bytes(sc->max_bytes());
    // 0 means a factor of 2; anything else is checked as given.
    sweep.set_step_factor(sc->step_factor() == 0 ? 2 : sc->step_factor());
    absl::StatusOr<CollectiveResults> results =
        SimulateCollective(*platform, sc->gpus(), sweep, *options);
    if (!results.ok())
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", results.status().message()));
    std::fputs(FormatCollectiveTable(*results).c_str(), stdout);
    *out.add_runs() = *std::move(results);
  }
  std::vector<CsvRow> rows;
  for (const CollectiveResults& run : out.runs()) AddCsvRows(run, &rows);
  return WriteOutputs(out, rows);
}

absl::Status RunCollective() {
  absl::StatusOr<CollectiveSweep> sweep = SweepFromFlags();
  if (!sweep.ok()) return sweep.status();
  absl::StatusOr<EngineOptions> options = CollectiveEngineOptions();
  if (!options.ok()) return options.status();
  const std::optional<std::string> gpus_flag = absl::GetFlag(FLAGS_gpus);
  int gpus = 0;
  if (!gpus_flag || !absl::SimpleAtoi(*gpus_flag, &gpus) || gpus < 2) {
    return absl::InvalidArgumentError("--gpus: give one GPU count >= 2");
  }
  const std::optional<std::string> name = absl::GetFlag(FLAGS_platform);
  if (!name) return absl::InvalidArgumentError("--platform: required");
  absl::StatusOr<Platform> platform = LoadPlatform(*name, ".");
  if (!platform.ok()) return platform.status();
  // The engine names the sweep's field; here the user gave a flag.
  if (absl::StatusOr<Mesh> mesh = JobMesh(*platform, gpus); !mesh.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpus: ", mesh.status().message()));
  }
  absl::StatusOr<CollectiveResults> results =
      SimulateCollective(*platform, gpus, *sweep, *options);
  if (!results.ok()) return results.status();
  std::fputs(FormatCollectiveTable(*results).c_str(), stdout);
  std::vector<CsvRow> rows;
  AddCsvRows(*results, &rows);
  return WriteOutputs(*results, rows);
}

// A scenario from the flags alone: they must name what a scenario file
// would. The micro-batch size, which a first look at a model leaves
// open, is one sequence unless given, and the note says so.
absl::StatusOr<Scenario> ScenarioFromFlags(const std::string& command) {
  Scenario s;
  if (absl::Status st = ApplyOverrides(OverridesFromFlags(), &s); !st.ok()) {
    return st;
  }
  std::vector<std::string> missing;
  if (s.model().empty()) missing.push_back("--model");
  if (s.platform().empty()) missing.push_back("--platform");
  // plan searches the strategies itself.
  if (s.strategies().empty() && command != "plan") {
    missing.push_back("--strategy");
  }
  if (s.gpus().empty()) missing.push_back("--gpus");
  if (s.seq_len() == 0) missing.push_back("--seq-len");
  if (s.micro_batches() == 0 && s.global_batch_tokens() == 0) {
    missing.push_back("--micro-batches or --global-batch-tokens");
  }
  // plan's candidates are its own search space; the scenario's strategies
  // are only its named presets.
  if (s.strategies().empty() && command == "plan") {
    for (const std::string& spec : NamedStrategies()) s.add_strategies(spec);
  }
  if (!missing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        command, " without a scenario file needs ",
        absl::StrJoin(missing, ", "), " (shardsim help ", command, ")"));
  }
  // Defaults a scenario file would have to state, said out loud.
  std::vector<std::string> taken;
  if (s.micro_batch_size() == 0) {
    s.set_micro_batch_size(1);
    taken.push_back("--micro-batch-size 1");
  }
  if (s.optimizer_bytes_per_param() == 0) {
    // Mixed-precision Adam: an fp32 master copy and two fp32 moments.
    s.set_optimizer_bytes_per_param(12);
    taken.push_back("--optimizer-bytes-per-param 12 (mixed-precision Adam)");
  }
  if (!taken.empty()) {
    std::fprintf(stderr, "shardsim: note: not given, so taken as %s\n",
                 absl::StrJoin(taken, ", ").c_str());
  }
  s.set_name("command line");
  return s;
}

// `path` empty: the scenario the flags give.
absl::StatusOr<Job> LoadJob(const std::string& command,
                            const std::string& path) {
  if (path.empty()) {
    absl::StatusOr<Scenario> scenario = ScenarioFromFlags(command);
    if (!scenario.ok()) return scenario.status();
    return ResolveJob("command line", *std::move(scenario));
  }
  absl::StatusOr<Scenario> scenario = ReadScenario(path);
  if (!scenario.ok()) return scenario.status();
  if (absl::Status s = ApplyOverrides(OverridesFromFlags(), &*scenario);
      !s.ok()) {
    return s;
  }
  return ResolveJob(path, *std::move(scenario));
}

// Runs reports/plan_figure (shipped data, sim/scenario/data_dir.h) with
// Debian's python3, which python3-matplotlib installs into, and waits.
absl::Status DrawPlanFigure(const std::string& json,
                            const std::string& figure) {
  absl::StatusOr<std::string> data = DataDir();
  if (!data.ok()) return data.status();
  const std::string python = "/usr/bin/python3";
  const std::string script = *data + "/reports/plan_figure";
  std::vector<std::string> argv_s = {python, script, json, figure};
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("--figure: fork failed");
  if (pid == 0) {
    // It dies with shardsim, as every child of a run does (isolate.h).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    execv(python.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError("--figure: waitpid failed");
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "--figure ", figure, ": ", python, " ", script, " failed (exit ",
      WIFEXITED(status) ? WEXITSTATUS(status) : -1,
      "; it needs python3-matplotlib)"));
}

// `shardsim plan`: the search of sim/search/search.h, printed and written.
absl::Status Plan(const Job& job, const EngineOptions& engine,
                  SweepRanks* ranks) {
  SearchOptions options;
  options.engine = engine;
  options.top = absl::GetFlag(FLAGS_top);
  options.exhaustive = absl::GetFlag(FLAGS_exhaustive);
  options.algorithms = absl::GetFlag(FLAGS_algorithms);
  options.settings = absl::GetFlag(FLAGS_settings);
  options.deployable = absl::GetFlag(FLAGS_deployable);
  FieldCheck check("command line");
  check.Count("top", options.top, 1, 100000);
  if (const std::optional<double> cap = absl::GetFlag(FLAGS_memory_cap)) {
    check.Real("memory_cap", *cap, 1.0 / 1024, 1 << 20);
    options.memory_cap_bytes =
        static_cast<int64_t>(*cap * 1024.0 * 1024.0 * 1024.0);
  }
  if (!check.ok()) return check.status();
  absl::StatusOr<SearchResults> plan = SearchStrategies(job, options);
  if (!plan.ok()) return plan.status();
  if (ranks != nullptr && !ranks->is_root()) return absl::OkStatus();
  *plan->mutable_warnings() = {job.warnings.begin(), job.warnings.end()};
  std::fputs(FormatPlanTable(*plan).c_str(), stdout);
  std::fflush(stdout);
  std::string json = absl::GetFlag(FLAGS_json);
  const std::string figure = absl::GetFlag(FLAGS_figure);
  if (json.empty() && !figure.empty()) json = figure + ".json";
  if (!json.empty()) {
    if (absl::Status s = WriteJson(*plan, json); !s.ok()) return s;
  }
  if (const std::string csv = absl::GetFlag(FLAGS_csv); !csv.empty()) {
    if (absl::Status s = WriteCsv(CsvRowsOf(*plan), csv); !s.ok()) return s;
  }
  if (figure.empty()) return absl::OkStatus();
  return DrawPlanFigure(json, figure);
}

// `ranks`: this rank's part in a `run` or `plan` spread over MPI ranks, or
// null.
absl::Status Run(const std::string& command, const std::string& path,
                 SweepRanks* ranks) {
  absl::StatusOr<Job> job = LoadJob(command, path);
  if (!job.ok()) return job.status();
  if (ranks == nullptr || ranks->is_root()) {
    for (const std::string& warning : job->warnings) {
      std::fprintf(stderr, "shardsim: warning: %s\n", warning.c_str());
    }
  }

  if (command == "schedule") {
    const Scenario& s = job->scenario;
    if (s.strategies_size() != 1 || s.gpus_size() != 1) {
      return absl::InvalidArgumentError(
          "schedule prints one point: give one --strategy and one --gpus");
    }
    absl::StatusOr<Point> point =
        AnalyzePoint(*job, s.strategies(0), s.gpus(0));
    if (!point.ok()) return point.status();
    std::fputs(FormatSchedule(*point->schedule).c_str(), stdout);
    return absl::OkStatus();
  }

  absl::StatusOr<FlowMode> mode = ParseMode();
  if (!mode.ok()) return mode.status();
  if (command == "run" || command == "plan") {
    if (absl::Status s = CheckEngineFlags(); !s.ok()) return s;
    EngineOptions options;
    options.mode = *mode;
    options.jobs = absl::GetFlag(FLAGS_jobs);
    options.collapse = absl::GetFlag(FLAGS_collapse);
    options.replay_stages = absl::GetFlag(FLAGS_replay_stages);
    options.network_symmetry = absl::GetFlag(FLAGS_network_symmetry);
    options.time_limit_s = absl::GetFlag(FLAGS_time_limit);
    options.trace_path = absl::GetFlag(FLAGS_trace);
    if (ranks != nullptr) {
      options.ranks = ranks->size();
      options.run_tasks = [ranks](const std::vector<ChildTask>& tasks,
                                  const IsolateOptions& isolate) {
        return ranks->Run(tasks, isolate);
      };
    }
    if (command == "plan") return Plan(*job, options, ranks);
    absl::StatusOr<Results> results = SimulateJob(*job, options);
    if (!results.ok()) return results.status();
    // Only rank 0 has the rows, and only it prints.
    if (ranks != nullptr && !ranks->is_root()) return absl::OkStatus();
    std::fputs(FormatRunTable(*results).c_str(), stdout);
    if (absl::GetFlag(FLAGS_breakdown)) {
      std::fputs(("\n" + FormatBreakdownTable(*results)).c_str(), stdout);
    }
    *results->mutable_warnings() = {job->warnings.begin(), job->warnings.end()};
    return WriteOutputs(*results, CsvRowsOf(*results));
  }

  // `memory` needs no schedule; `volume` counts the lowered schedule's.
  absl::StatusOr<Results> results =
      AnalyzeJob(*job, command == "memory" ? Analysis::kMemory
                                           : Analysis::kMemoryAndTraffic);
  if (!results.ok()) return results.status();
  if (command == "memory") {
    std::fputs(FormatMemoryTable(*results).c_str(), stdout);
  } else {
    std::fputs(FormatVolumeTable(*results, absl::GetFlag(FLAGS_detail)).c_str(),
               stdout);
  }
  *results->mutable_warnings() = {job->warnings.begin(), job->warnings.end()};
  return WriteOutputs(*results, CsvRowsOf(*results));
}

}  // namespace
}  // namespace shardsim

int main(int argc, char** argv) {
  shardsim::SetUpHeap();
  absl::SetProgramUsageMessage(shardsim::UsageText().c_str());
  // --version (absl's own flag): the version and the git revision it was
  // built from (sim/cli/revision.cmake).
  absl::FlagsUsageConfig usage;
  usage.version_string = [] {
    return std::string("shardsim " SHARDSIM_VERSION " (git " SHARDSIM_REVISION
                       ")\n");
  };
  absl::SetFlagsUsageConfig(usage);
  std::vector<std::string> keep, names;
  std::vector<char*> args_in = shardsim::Undash(argc, argv, &keep, &names);
  if (argc < 2) {
    std::fputs(shardsim::UsageText().c_str(), stderr);
    return 2;
  }
  // The command, as far as can be told before parsing: the first word
  // that is not a flag.
  const shardsim::Command* guess = nullptr;
  for (int i = 1; i < argc && guess == nullptr; ++i) {
    if (argv[i][0] != '-') guess = shardsim::FindCommand(argv[i]);
  }
  // --help and -h print the command's help and succeed (Abseil's own
  // --help would list every flag of the binary and exit 1).
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "-help") {
      std::fputs(guess != nullptr && std::string(guess->name) != "help"
                     ? shardsim::CommandHelp(*guess).c_str()
                     : shardsim::UsageText().c_str(),
                 stdout);
      return 0;
    }
  }
  if (absl::Status s = shardsim::CheckFlags(names, guess); !s.ok()) {
    std::fprintf(stderr, "shardsim: error: %s\n",
                 std::string(s.message()).c_str());
    return 2;
  }
  std::vector<char*> args =
      absl::ParseCommandLine(static_cast<int>(args_in.size()), args_in.data());
  const std::string command = args.size() > 1 ? args[1] : "help";
  // Under mpirun or srun with several ranks (sim/runner/distribute.h), `run`
  // and `plan` spread their points over them. Every other command is cheap:
  // rank 0 runs it
  // alone, and the others leave at once, silently and with 0, never
  // starting MPI.
  const shardsim::Launch launch = shardsim::DetectLaunch();
  if (launch.size > 1 && command != "run" && command != "plan" &&
      launch.rank != 0) {
    return 0;
  }
  if (command == "help") {
    if (args.size() > 3) {
      std::fputs(shardsim::UsageText().c_str(), stderr);
      return 2;
    }
    if (args.size() == 3) {
      const shardsim::Command* c = shardsim::FindCommand(args[2]);
      if (c == nullptr) {
        std::fprintf(stderr, "shardsim help: unknown command \"%s\"%s\n",
                     args[2], shardsim::CommandHint(args[2]).c_str());
        return 2;
      }
      std::fputs(shardsim::CommandHelp(*c).c_str(), stdout);
      return 0;
    }
    std::fputs(shardsim::UsageText().c_str(), stdout);
    return 0;
  }
  if (command == "calibrate" || command == "validate") {
    if (args.size() != 2) {
      std::fprintf(stderr, "shardsim %s takes flags only\n\n%s",
                   command.c_str(), shardsim::UsageText().c_str());
      return 2;
    }
    const std::optional<std::string> platform = absl::GetFlag(FLAGS_platform);
    const std::vector<std::string> files = absl::StrSplit(
        absl::GetFlag(FLAGS_measurements), ',', absl::SkipEmpty());
    absl::Status s;
    if (!platform) {
      s = absl::InvalidArgumentError("--platform: required");
    } else if (files.empty()) {
      s = absl::InvalidArgumentError("--measurements: give at least one file");
    } else if (const double e = absl::GetFlag(FLAGS_max_median_error);
               !(e >= 0 && e <= 1e6) && e != -1) {
      s = absl::InvalidArgumentError(absl::StrCat(
          "--max-median-error: must be a finite number >= 0, got ", e));
    } else if (command == "calibrate") {
      s = absl::GetFlag(FLAGS_out).empty()
              ? absl::InvalidArgumentError("--out: required")
              : shardsim::RunCalibrateCommand(*platform, files,
                                              absl::GetFlag(FLAGS_out));
    } else {
      s = shardsim::RunValidateCommand(*platform, files,
                                       absl::GetFlag(FLAGS_max_median_error),
                                       absl::GetFlag(FLAGS_json));
    }
    if (!s.ok()) {
      std::fprintf(stderr, "shardsim: error: %s\n",
                   std::string(s.message()).c_str());
      return 1;
    }
    return 0;
  }
  if (command == "platform") {
    if (args.size() != 3) {
      std::fprintf(stderr, "shardsim platform: give one platform\n\n%s",
                   shardsim::UsageText().c_str());
      return 2;
    }
    const absl::StatusOr<std::string> text = shardsim::PlatformText(args[2]);
    if (!text.ok()) {
      std::fprintf(stderr, "shardsim: error: %s\n",
                   std::string(text.status().message()).c_str());
      return 1;
    }
    std::fputs(text->c_str(), stdout);
    return 0;
  }
  if (command == "collective") {
    if (args.size() > 3) {
      std::fprintf(stderr,
                   "shardsim collective takes flags or one "
                   "collective scenario\n\n%s",
                   shardsim::UsageText().c_str());
      return 2;
    }
    const absl::Status s = args.size() == 3
                               ? shardsim::RunCollectiveScenario(args[2])
                               : shardsim::RunCollective();
    if (!s.ok()) {
      std::fprintf(stderr, "shardsim: error: %s\n",
                   std::string(s.message()).c_str());
      return 1;
    }
    return 0;
  }
  if (command != "run" && command != "plan" && command != "memory" &&
      command != "volume" && command != "schedule") {
    std::fprintf(stderr, "shardsim: unknown command \"%s\"%s\n\n%s",
                 command.c_str(), shardsim::CommandHint(command).c_str(),
                 shardsim::UsageText().c_str());
    return 2;
  }
  // No scenario file: the flags give the scenario (ScenarioFromFlags).
  if (args.size() > 3) {
    if (launch.rank == 0) {
      std::fprintf(
          stderr, "shardsim %s: give at most one scenario file\n\n%s",
          command.c_str(),
          shardsim::CommandHelp(*shardsim::FindCommand(command)).c_str());
    }
    return 2;
  }
  // Neither a file nor a model: the user has not begun to say what to run.
  if (args.size() == 2 && !absl::GetFlag(FLAGS_model).has_value()) {
    if (launch.rank == 0) {
      std::fprintf(
          stderr,
          "shardsim %s: give a scenario file, or the scenario as "
          "flags\n\n%s",
          command.c_str(),
          shardsim::CommandHelp(*shardsim::FindCommand(command)).c_str());
    }
    return 2;
  }
  const std::string scenario = args.size() == 3 ? args[2] : "";
  std::optional<shardsim::SweepRanks> ranks;
  if ((command == "run" || command == "plan") && launch.size > 1) {
    ranks.emplace(launch);
  }
  const absl::Status s =
      shardsim::Run(command, scenario, ranks ? &*ranks : nullptr);
  // Only rank 0 says why, and before the ranks part: once one rank exits
  // non-zero mpirun ends the others, so a message written after Finish
  // could be lost. The others leave Finish only after rank 0 enters it.
  if (!s.ok() && (!ranks || ranks->is_root())) {
    std::fprintf(stderr, "shardsim: error: %s\n",
                 std::string(s.message()).c_str());
  }
  // Every rank exits as rank 0 does.
  const absl::Status end = ranks ? ranks->Finish(s) : s;
  return end.ok() ? 0 : 1;
}

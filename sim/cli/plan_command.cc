// `shardsim plan`: the strategy search of sim/search/search.h, ranked,
// printed and written; with --figure its Pareto front drawn.
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/cli/commands.h"
#include "sim/cli/options.h"
#include "sim/cli/scenario_command.h"
#include "sim/results/results.h"
#include "sim/results/sink.h"
#include "sim/scenario/data_dir.h"
#include "sim/scenario/flags.h"
#include "sim/schema/limits.h"
#include "sim/search/search.h"

namespace shardsim {
namespace {

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

// A search per GPU count, in the order given, each under the time limit;
// each count's table, then the best of each.
absl::Status PlanEachCount(const Job& job, const SearchOptions& options,
                           SweepRanks* ranks) {
  PlanSweep sweep;
  std::string table;
  std::string summary = "\nthe best point at each GPU count:\n";
  for (int gpus : job.scenario.gpus()) {
    Job one = job;
    one.scenario.clear_gpus();
    one.scenario.add_gpus(gpus);
    absl::StatusOr<SearchResults> plan = SearchStrategies(one, options);
    if (!plan.ok()) return plan.status();
    if (ranks != nullptr && !ranks->is_root()) continue;
    AddJobWarnings(job, plan->mutable_warnings());
    absl::StrAppend(&table, table.empty() ? "" : "\n", FormatPlanTable(*plan));
    if (plan->best().empty()) {
      absl::StrAppend(&summary, "  ", gpus, " GPUs: no point\n");
    } else {
      const ResultRow& best = plan->best(0);
      absl::StrAppendFormat(&summary,
                            "  %d GPUs: %s, %.4f s a step, %.0f tokens/s per "
                            "GPU, MFU %.1f%%%s\n",
                            gpus, PlanPointName(best), best.step_time_s(),
                            best.tokens_per_gpu_per_s(), 100 * best.mfu(),
                            best.estimate() ? " (estimate)" : "");
    }
    *sweep.add_plans() = *std::move(plan);
  }
  if (ranks != nullptr && !ranks->is_root()) return absl::OkStatus();
  return Emit(table + summary, sweep, OutputFilesFromFlags());
}

absl::Status PlanBody(const Job& job, SweepRanks* ranks) {
  absl::StatusOr<EngineOptions> engine = EngineOptionsFromFlags(ranks);
  if (!engine.ok()) return engine.status();
  SearchOptions options;
  options.engine = *engine;
  options.top = absl::GetFlag(FLAGS_top);
  options.exhaustive = absl::GetFlag(FLAGS_exhaustive);
  options.algorithms = absl::GetFlag(FLAGS_algorithms);
  options.settings = absl::GetFlag(FLAGS_settings);
  options.parallelism = absl::GetFlag(FLAGS_search_parallelism);
  options.deployable = absl::GetFlag(FLAGS_deployable);
  FieldCheck check("command line");
  check.Count("top", options.top, 1, 100000);
  if (const std::optional<double> cap = absl::GetFlag(FLAGS_memory_cap)) {
    check.Real("memory_cap", *cap, 1.0 / 1024, 1 << 20);
    options.memory_cap_bytes =
        static_cast<int64_t>(*cap * 1024.0 * 1024.0 * 1024.0);
  }
  if (!check.ok()) return check.status();
  const std::string figure = absl::GetFlag(FLAGS_figure);
  if (job.scenario.gpus_size() > 1) {
    if (!figure.empty()) {
      return absl::InvalidArgumentError(
          "--figure draws one GPU count's plan: give one --gpus");
    }
    return PlanEachCount(job, options, ranks);
  }
  absl::StatusOr<SearchResults> plan = SearchStrategies(job, options);
  if (!plan.ok()) return plan.status();
  if (ranks != nullptr && !ranks->is_root()) return absl::OkStatus();
  AddJobWarnings(job, plan->mutable_warnings());
  OutputFiles files = OutputFilesFromFlags();
  // The figure is drawn from the JSON: written beside it unless asked for.
  if (files.json.empty() && !figure.empty()) files.json = figure + ".json";
  if (absl::Status s = Emit(FormatPlanTable(*plan), *plan, files); !s.ok()) {
    return s;
  }
  if (figure.empty()) return absl::OkStatus();
  return DrawPlanFigure(files.json, figure);
}

}  // namespace

int PlanMain(const Invocation& invocation) {
  return RunScenarioCommand(invocation, PlanBody);
}

}  // namespace shardsim

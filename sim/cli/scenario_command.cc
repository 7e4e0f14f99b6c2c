#include "sim/cli/scenario_command.h"

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/cli/options.h"
#include "sim/scenario/flags.h"
#include "sim/scenario/framework_inputs.h"
#include "sim/scenario/overrides.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace {

// A scenario from the flags alone: they must name what a scenario file
// would, or give a framework file (--megatron-args, --torchtitan-config)
// that sets it. The micro-batch size, which a first look at a model
// leaves open, is one sequence unless given, and the note says so.
absl::StatusOr<Scenario> ScenarioFromFlags(const std::string& command) {
  Scenario s;
  if (absl::Status st = ApplyOverrides(OverridesFromFlags(), &s); !st.ok()) {
    return st;
  }
  // What the framework files set counts as given. They are read here into
  // a copy, to know what they set; ResolveJob reads them into the scenario
  // itself, with the same errors, and reports what they leave unmodelled.
  Scenario given = s;
  if (!s.megatron_args().empty() || !s.torchtitan_config().empty()) {
    std::vector<std::string> unused;
    if (absl::Status st =
            ApplyFrameworkInputs("command line", "", &given, &unused);
        !st.ok()) {
      return st;
    }
  }
  std::vector<std::string> missing;
  if (given.model().empty() && !given.has_model_def()) {
    missing.push_back("--model");
  }
  if (given.platform().empty()) missing.push_back("--platform");
  // plan searches the strategies itself.
  if (given.strategies().empty() && command != "plan") {
    missing.push_back("--strategy");
  }
  if (given.gpus().empty()) missing.push_back("--gpus");
  if (given.seq_len() == 0) missing.push_back("--seq-len");
  if (given.micro_batches() == 0 && given.global_batch_tokens() == 0) {
    missing.push_back("--micro-batches or --global-batch-tokens");
  }
  // plan's candidates are its own search space; the scenario's strategies
  // are only its named presets.
  if (given.strategies().empty() && command == "plan") {
    for (const std::string& spec : NamedStrategies()) s.add_strategies(spec);
  }
  if (!missing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        command, " without a scenario file needs ",
        absl::StrJoin(missing, ", "), " (shardsim help ", command, ")"));
  }
  // Defaults a scenario file would have to state, said out loud.
  std::vector<std::string> taken;
  if (given.micro_batch_size() == 0) {
    s.set_micro_batch_size(1);
    taken.push_back("--micro-batch-size 1");
  }
  if (given.optimizer_bytes_per_param() == 0) {
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

}  // namespace

int RunScenarioCommand(const Invocation& inv, ScenarioBody body) {
  const std::string& command = inv.command;
  const bool root = inv.launch.rank == 0;
  // No scenario file: the flags give the scenario (ScenarioFromFlags).
  if (inv.args.size() > 1) {
    if (root) {
      std::fprintf(stderr, "shardsim %s: give at most one scenario file\n\n%s",
                   command.c_str(), CommandHelp(*FindCommand(command)).c_str());
    }
    return 2;
  }
  // Neither a file nor a model: the user has not begun to say what to run.
  if (inv.args.empty() && !absl::GetFlag(FLAGS_model).has_value() &&
      !absl::GetFlag(FLAGS_megatron_args).has_value() &&
      !absl::GetFlag(FLAGS_torchtitan_config).has_value()) {
    if (root) {
      std::fprintf(stderr,
                   "shardsim %s: give a scenario file, or the scenario as "
                   "flags\n\n%s",
                   command.c_str(), CommandHelp(*FindCommand(command)).c_str());
    }
    return 2;
  }
  std::optional<SweepRanks> ranks;
  if ((command == "run" || command == "plan") && inv.launch.size > 1) {
    ranks.emplace(inv.launch);
  }
  absl::Status s = [&]() -> absl::Status {
    absl::StatusOr<Job> job =
        LoadJob(command, inv.args.empty() ? "" : inv.args[0]);
    if (!job.ok()) return job.status();
    if (!ranks || ranks->is_root()) {
      for (const std::string& warning : job->warnings) {
        std::fprintf(stderr, "shardsim: warning: %s\n", warning.c_str());
      }
    }
    return body(*job, ranks ? &*ranks : nullptr);
  }();
  // Only rank 0 says why, and before the ranks part: once one rank exits
  // non-zero mpirun ends the others, so a message written after Finish
  // could be lost. The others leave Finish only after rank 0 enters it.
  if (!s.ok() && (!ranks || ranks->is_root())) Fail(s);
  // Every rank exits as rank 0 does.
  const absl::Status end = ranks ? ranks->Finish(s) : s;
  return end.ok() ? 0 : 1;
}

void AddJobWarnings(const Job& job,
                    google::protobuf::RepeatedPtrField<std::string>* warnings) {
  for (const std::string& warning : *warnings) {
    std::fprintf(stderr, "shardsim: warning: %s\n", warning.c_str());
  }
  google::protobuf::RepeatedPtrField<std::string> all(job.warnings.begin(),
                                                      job.warnings.end());
  all.MergeFrom(*warnings);
  *warnings = std::move(all);
}

}  // namespace shardsim

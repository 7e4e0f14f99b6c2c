#include "sim/cli/commands.h"

#include <algorithm>

#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "sim/base/did_you_mean.h"

namespace shardsim {
namespace {

// The scenario's fields as flags, the engine's, and the outputs.
const std::vector<const char*> kScenario = {"model",
                                            "platform",
                                            "strategy",
                                            "gpus",
                                            "micro_batches",
                                            "global_batch_tokens",
                                            "micro_batch_size",
                                            "seq_len",
                                            "recompute",
                                            "flash_attention",
                                            "optimizer_bytes_per_param",
                                            "allow_unmodelled",
                                            "what_if",
                                            "tp",
                                            "pp",
                                            "vpp",
                                            "cp",
                                            "sequence_parallel",
                                            "pipeline_schedule",
                                            "parallel_order",
                                            "recompute_granularity",
                                            "megatron_args",
                                            "torchtitan_config"};
const std::vector<const char*> kEngine = {
    "jobs", "collapse",  "drop_dominated", "replay_stages", "network_symmetry",
    "mode", "time_limit"};

std::vector<const char*> Join(std::vector<std::vector<const char*>> parts) {
  std::vector<const char*> all;
  for (const auto& part : parts)
    all.insert(all.end(), part.begin(), part.end());
  return all;
}

std::string Dashed(absl::string_view name) {
  return absl::StrReplaceAll(name, {{"_", "-"}});
}

// Our flags are defined under sim/cli/ and in sim/scenario/flags.cc (those
// shardsim-hw shares); Abseil's (help, version, flagfile, ...) under absl/.
bool IsOurs(const absl::CommandLineFlag& flag) {
  return absl::StrContains(flag.Filename(), "sim/cli/") ||
         absl::StrContains(flag.Filename(), "sim/scenario/flags.cc");
}

bool Reads(const Command& command, absl::string_view name) {
  for (const char* flag : command.flags) {
    if (name == flag) return true;
  }
  return false;
}

bool IsAbseils(absl::string_view name) {
  for (const char* flag : {"help", "helpfull", "helpshort", "helppackage",
                           "helpon", "helpmatch", "version", "only_check_args",
                           "flagfile", "fromenv", "tryfromenv", "undefok"}) {
    if (name == flag) return true;
  }
  return false;
}

}  // namespace

const std::vector<Command>& Commands() {
  static const std::vector<Command>* const commands = new std::vector<Command>{
      {"run", "run [SCENARIO] [flags]",
       "simulate one training step per strategy and GPU count: step time, "
       "tokens/s per GPU, TFLOP/s, MFU, exposed communication, traffic, "
       "memory. Without SCENARIO the flags give the whole scenario "
       "(--model --platform --strategy --gpus --seq-len, and "
       "--micro-batches or --global-batch-tokens).",
       Join({kScenario, kEngine, {"breakdown", "json", "csv", "trace"}}),
       RunMain},
      {"estimate", "estimate [SCENARIO] [flags]",
       "run's rows with each step's times estimated from the same kernel, "
       "collective and pipeline models without the simulation engine (a "
       "walk of the step in issue order; no breakdown): milliseconds a "
       "point, each row marked as an estimate.",
       Join({kScenario, {"json", "csv"}}), EstimateMain},
      {"plan", "plan [SCENARIO] --gpus N [flags]",
       "search the strategies (presets, PaRO, Lins, each with every "
       "algorithm per group kind and every setting) that fit in memory, "
       "simulate them and rank them by tokens/s per GPU, with the presets "
       "and the Pareto front of memory against speed.",
       Join({kScenario,
             kEngine,
             {"memory_cap", "top", "figure", "exhaustive", "algorithms",
              "settings", "search_parallelism", "deployable", "json", "csv"}}),
       PlanMain},
      {"goodput", "goodput [SCENARIO] --days D | --tokens N [flags]",
       "the training run on parts that fail: each point's step simulated, "
       "then the expected wall time of D days of steps (or N tokens) with "
       "the platform's failure rates, restarts and checkpoints (interval by "
       "the Young-Daly rule unless given), the goodput, the lost time by "
       "cause (checkpoints, rework, restarts, stragglers) and with --trials "
       "its distribution.",
       Join({kScenario,
             kEngine,
             {"days", "tokens", "checkpoint_interval", "async_checkpoint",
              "trials", "seed", "json", "csv"}}),
       GoodputMain},
      {"memory", "memory [SCENARIO] [flags]",
       "per-GPU memory (parameters, gradients, optimizer states, "
       "activations, buffers, reserve) and whether it fits.",
       Join({kScenario, {"json", "csv"}}), MemoryMain},
      {"volume", "volume [SCENARIO] [flags]",
       "bytes sent per step, inside nodes and between them, totals over "
       "all GPUs.",
       Join({kScenario, {"detail", "json", "csv"}}), VolumeMain},
      {"schedule", "schedule [SCENARIO] --strategy S --gpus N",
       "one step's schedule IR, op by op.", kScenario, ScheduleMain},
      {"collective",
       "collective [COLLECTIVE_SCENARIO] [flags]",
       "a simulated collective over a size sweep, in nccl-tests' layout: "
       "from the flags (--platform --gpus and the sweep) or from a "
       "collective scenario file (one sweep per algorithm).",
       {"platform", "gpus", "op", "algorithm", "min_bytes", "max_bytes",
        "step_factor", "channels", "mode", "time_limit", "replay_stages",
        "network_symmetry", "json", "csv"},
       CollectiveMain},
      {"calibrate",
       "calibrate --platform P --measurements F1,F2 --out FILE",
       "fit a platform's latencies and reachable bandwidths to nccl-tests "
       "or shardsim-hw measurements.",
       {"platform", "measurements", "out"},
       CalibrateMain},
      {"validate",
       "validate --platform P --measurements F1,F2 | validate --published "
       "[FILE|DIR ...]",
       "predicted against measured, per file, with the median error: "
       "collectives and kernels on a platform, or published training runs "
       "(--published).",
       {"platform", "measurements", "max_median_error", "json", "published",
        "jobs"},
       ValidateMain},
      {"platform",
       "platform NAME|FILE",
       "the platform as the simulator reads it (bases merged, GPU model "
       "filled in), in text format.",
       {},
       PlatformMain},
      {"help",
       "help [COMMAND]",
       "this overview, or one command's flags.",
       {},
       HelpMain},
  };
  return *commands;
}

const Command* FindCommand(absl::string_view name) {
  for (const Command& c : Commands()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

std::string CommandHint(absl::string_view name) {
  std::vector<std::string> names;
  for (const Command& c : Commands()) names.push_back(c.name);
  return DidYouMean(name, names);
}

std::string Usage() {
  std::string out =
      "shardsim: simulate sharded data-parallel LLM training\n\n"
      "usage: shardsim COMMAND [SCENARIO.textproto] [flags]\n\ncommands:\n";
  for (const Command& c : Commands()) {
    // The summary's first sentence, under the synopsis.
    absl::string_view summary = c.summary;
    summary = summary.substr(0, summary.find(". ") == summary.npos
                                    ? summary.size()
                                    : summary.find(". ") + 1);
    absl::StrAppend(&out, "  ", c.synopsis, "\n      ", summary, "\n");
  }
  absl::StrAppend(&out,
                  "\nshardsim help COMMAND (or COMMAND --help) prints a "
                  "command's flags; --version the version.\n");
  return out;
}

std::string CommandHelp(const Command& command) {
  std::string out = absl::StrCat("usage: shardsim ", command.synopsis, "\n\n",
                                 command.summary, "\n");
  if (command.flags.empty()) return out;
  absl::StrAppend(&out, "\nflags:\n");
  for (const char* name : command.flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) continue;
    absl::StrAppend(&out, "  --", Dashed(name), "  ", flag->Help());
    const std::string fallback = flag->DefaultValue();
    if (!fallback.empty()) absl::StrAppend(&out, " (default: ", fallback, ")");
    absl::StrAppend(&out, "\n");
  }
  return out;
}

absl::Status CheckFlags(const std::vector<std::string>& names,
                        const Command* command) {
  const auto all = absl::GetAllFlags();
  std::vector<std::string> known;
  for (const auto& [name, flag] : all) {
    if (command == nullptr || !IsOurs(*flag) || Reads(*command, name)) {
      known.push_back(absl::StrCat("--", Dashed(name)));
    }
  }
  std::sort(known.begin(), known.end());
  for (const std::string& given : names) {
    std::string name = given;
    auto it = all.find(name);
    // --noX sets a bool X to false.
    if (it == all.end() && absl::StartsWith(name, "no")) {
      auto bool_flag = all.find(name.substr(2));
      if (bool_flag != all.end() && bool_flag->second->IsOfType<bool>()) {
        it = bool_flag;
        name = name.substr(2);
      }
    }
    // Abseil's own: usage flags (GetAllFlags leaves them out) and the
    // flags that read other flags.
    if (it == all.end() && IsAbseils(name)) continue;
    if (it == all.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", Dashed(given),
                       DidYouMean(absl::StrCat("--", Dashed(given)), known)));
    }
    if (command == nullptr || !IsOurs(*it->second)) continue;
    if (!Reads(*command, name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", Dashed(name), " is not a flag of ", command->name,
                       " (shardsim help ", command->name, " lists them)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace shardsim

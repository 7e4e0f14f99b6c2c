// shardsim: one binary, one subcommand per question.
//
//   shardsim memory   SCENARIO   per-GPU memory per strategy and GPU count
//   shardsim volume   SCENARIO   bytes on the wire per step, intra/inter
//   shardsim schedule SCENARIO   one step's schedule IR, op by op
//   shardsim help
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sim/results/results.h"
#include "sim/scenario/scenario.h"
#include "sim/schedule/lower.h"

ABSL_FLAG(std::optional<std::string>, model, std::nullopt,
          "built-in model name or model .textproto (overrides the scenario)");
ABSL_FLAG(std::optional<std::string>, platform, std::nullopt,
          "shipped platform name or platform .textproto");
ABSL_FLAG(std::optional<std::string>, strategy, std::nullopt,
          "comma-separated strategy specs (zero3,paro-IGG,lins:p=1x1:g=1x1:"
          "os=8x1,...)");
ABSL_FLAG(std::optional<std::string>, gpus, std::nullopt,
          "comma-separated GPU counts");
ABSL_FLAG(std::optional<int>, micro_batches, std::nullopt,
          "micro-batches per step (--micro-batches)");
ABSL_FLAG(std::optional<int>, micro_batch_size, std::nullopt,
          "sequences per micro-batch per GPU (--micro-batch-size)");
ABSL_FLAG(std::optional<int>, seq_len, std::nullopt,
          "sequence length (--seq-len)");
ABSL_FLAG(bool, recompute, false,
          "full activation recomputation (--recompute, --norecompute)");
ABSL_FLAG(std::string, json, "", "write results as JSON to this file");
ABSL_FLAG(bool, detail, false, "volume: one line per kind of collective");

namespace shardsim {
namespace {

constexpr char kUsage[] =
    "shardsim: simulate sharded data-parallel LLM training\n"
    "\n"
    "usage: shardsim COMMAND SCENARIO.textproto [flags]\n"
    "\n"
    "commands:\n"
    "  memory    per-GPU memory (P, G, OS, activations, buffers) and OOM\n"
    "  volume    bytes sent per step, intra-/inter-node, from the plans\n"
    "            (--detail: per collective and phase)\n"
    "  schedule  one step's schedule IR (needs one --strategy and --gpus)\n"
    "  help      this text\n"
    "\n"
    "scenario overrides: --model --platform --strategy --gpus "
    "--micro-batches\n"
    "  --micro-batch-size --seq-len --recompute; --json FILE writes results\n";

// Abseil flag names are identifiers; accept the dashed spellings too. A bool
// flag has no "unset" state, so note here whether --recompute was given.
std::vector<char*> Undash(int argc, char** argv, std::vector<std::string>* keep,
                          bool* recompute_given) {
  keep->reserve(argc);
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0) {
      const size_t end = std::min(arg.find('='), arg.size());
      for (size_t k = 2; k < end; ++k) {
        if (arg[k] == '-') arg[k] = '_';
      }
      const std::string name = arg.substr(2, end - 2);
      if (name == "recompute" || name == "norecompute") *recompute_given = true;
    }
    keep->push_back(std::move(arg));
  }
  std::vector<char*> out;
  for (std::string& s : *keep) out.push_back(s.data());
  return out;
}

absl::Status ApplyOverrides(Scenario* s, bool recompute_given) {
  if (auto v = absl::GetFlag(FLAGS_model)) {
    s->clear_model_def();
    s->set_model(*v);
  }
  if (auto v = absl::GetFlag(FLAGS_platform)) {
    s->clear_platform_def();
    s->set_platform(*v);
  }
  if (auto v = absl::GetFlag(FLAGS_strategy)) {
    s->clear_strategies();
    for (absl::string_view spec : absl::StrSplit(*v, ',', absl::SkipEmpty())) {
      s->add_strategies(std::string(spec));
    }
  }
  if (auto v = absl::GetFlag(FLAGS_gpus)) {
    s->clear_gpus();
    for (absl::string_view n : absl::StrSplit(*v, ',', absl::SkipEmpty())) {
      int gpus;
      if (!absl::SimpleAtoi(n, &gpus)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--gpus: \"", n, "\" is not a number"));
      }
      s->add_gpus(gpus);
    }
  }
  if (auto v = absl::GetFlag(FLAGS_micro_batches)) s->set_micro_batches(*v);
  if (auto v = absl::GetFlag(FLAGS_micro_batch_size)) {
    s->set_micro_batch_size(*v);
  }
  if (auto v = absl::GetFlag(FLAGS_seq_len)) s->set_seq_len(*v);
  if (recompute_given) s->set_recompute(absl::GetFlag(FLAGS_recompute));
  return absl::OkStatus();
}

absl::StatusOr<Job> LoadJob(const std::string& path, bool recompute_given) {
  absl::StatusOr<Scenario> scenario = ReadScenario(path);
  if (!scenario.ok()) return scenario.status();
  if (absl::Status s = ApplyOverrides(&*scenario, recompute_given); !s.ok()) {
    return s;
  }
  return ResolveJob(path, *std::move(scenario));
}

absl::Status Run(const std::string& command, const std::string& path,
                 bool recompute_given) {
  absl::StatusOr<Job> job = LoadJob(path, recompute_given);
  if (!job.ok()) return job.status();

  if (command == "schedule") {
    const Scenario& s = job->scenario;
    if (s.strategies_size() != 1 || s.gpus_size() != 1) {
      return absl::InvalidArgumentError(
          "schedule prints one point: give one --strategy and one --gpus");
    }
    absl::StatusOr<Point> point =
        AnalyzePoint(*job, s.strategies(0), s.gpus(0));
    if (!point.ok()) return point.status();
    std::fputs(FormatSchedule(point->schedule).c_str(), stdout);
    return absl::OkStatus();
  }

  absl::StatusOr<Results> results = AnalyzeJob(*job);
  if (!results.ok()) return results.status();
  if (command == "memory") {
    std::fputs(FormatMemoryTable(*results).c_str(), stdout);
  } else {
    std::fputs(FormatVolumeTable(*results, absl::GetFlag(FLAGS_detail)).c_str(),
               stdout);
  }
  if (const std::string json = absl::GetFlag(FLAGS_json); !json.empty()) {
    return WriteJson(*results, json);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace shardsim

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(shardsim::kUsage);
  std::vector<std::string> keep;
  bool recompute_given = false;
  std::vector<char*> args_in =
      shardsim::Undash(argc, argv, &keep, &recompute_given);
  std::vector<char*> args =
      absl::ParseCommandLine(static_cast<int>(args_in.size()), args_in.data());
  const std::string command = args.size() > 1 ? args[1] : "help";
  if (command == "help" || command == "--help") {
    std::fputs(shardsim::kUsage, stdout);
    return 0;
  }
  if (command != "memory" && command != "volume" && command != "schedule") {
    std::fprintf(stderr, "shardsim: unknown command \"%s\"\n\n%s",
                 command.c_str(), shardsim::kUsage);
    return 2;
  }
  if (args.size() != 3) {
    std::fprintf(stderr, "shardsim %s: give one scenario file\n\n%s",
                 command.c_str(), shardsim::kUsage);
    return 2;
  }
  if (absl::Status s = shardsim::Run(command, args[2], recompute_given); !s.ok()) {
    std::fprintf(stderr, "shardsim: error: %s\n",
                 std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

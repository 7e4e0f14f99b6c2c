// `shardsim collective`: a simulated collective over a size sweep, from
// the flags or from a collective scenario file, in nccl-tests' layout.
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sim/cli/commands.h"
#include "sim/cli/options.h"
#include "sim/results/results.h"
#include "sim/results/sink.h"
#include "sim/scenario/flags.h"
#include "sim/scenario/platform_file.h"
#include "sim/scenario/scenario.h"
#include "sim/simulate/simulate.h"

namespace shardsim {
namespace {

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
  // Each sweep's table is printed as it ends.
  return Emit("", out, OutputFilesFromFlags());
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
  return Emit(FormatCollectiveTable(*results), *results,
              OutputFilesFromFlags());
}

}  // namespace

int CollectiveMain(const Invocation& inv) {
  if (inv.args.size() > 1) {
    std::fprintf(stderr,
                 "shardsim collective takes flags or one "
                 "collective scenario\n\n%s",
                 UsageText().c_str());
    return 2;
  }
  const absl::Status s = inv.args.size() == 1
                             ? RunCollectiveScenario(inv.args[0])
                             : RunCollective();
  return s.ok() ? 0 : Fail(s);
}

}  // namespace shardsim

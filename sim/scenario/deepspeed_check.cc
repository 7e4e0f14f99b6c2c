#include "sim/scenario/deepspeed_check.h"

#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/strategy/deepspeed_config.h"

namespace shardsim {
namespace {

absl::Status Disagree(const Job& job, const DeepSpeedZero& config,
                      absl::string_view key, int64_t theirs,
                      absl::string_view field, int64_t ours, int gpus) {
  return absl::InvalidArgumentError(absl::StrCat(
      job.path, ": field strategies: DeepSpeed config ", config.path, ": ", key,
      " is ", theirs, " but the scenario's ", field, " is ", ours, " at ", gpus,
      " GPUs"));
}

absl::Status CheckBatch(const Job& job, const DeepSpeedZero& config) {
  for (int gpus : job.scenario.gpus()) {
    absl::StatusOr<Scenario> at = ScenarioAt(job.scenario, gpus);
    if (!at.ok()) return at.status();  // CheckGpuCount named it already
    const int64_t micro = at->micro_batch_size();
    const int64_t steps = at->micro_batches();
    if (config.micro_batch_size && *config.micro_batch_size != micro) {
      return Disagree(job, config, "train_micro_batch_size_per_gpu",
                      *config.micro_batch_size, "micro_batch_size", micro,
                      gpus);
    }
    if (config.gradient_accumulation_steps &&
        *config.gradient_accumulation_steps != steps) {
      return Disagree(job, config, "gradient_accumulation_steps",
                      *config.gradient_accumulation_steps,
                      "micro-batches per step (micro_batches)", steps, gpus);
    }
    if (config.train_batch_size &&
        *config.train_batch_size != micro * steps * gpus) {
      return Disagree(job, config, "train_batch_size", *config.train_batch_size,
                      "batch (micro_batch_size x micro-batches x GPUs)",
                      micro * steps * gpus, gpus);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckDeepSpeedConfigs(Job* job) {
  for (const std::string& spec : job->scenario.strategies()) {
    const absl::string_view trimmed = absl::StripAsciiWhitespace(spec);
    if (!absl::EndsWithIgnoreCase(trimmed, ".json")) continue;
    absl::StatusOr<DeepSpeedZero> config =
        ReadDeepSpeedConfig(trimmed, job->base_dir);
    if (!config.ok()) {
      return absl::Status(config.status().code(),
                          absl::StrCat(job->path, ": field strategies: ",
                                       config.status().message()));
    }
    if (absl::Status s = CheckBatch(*job, *config); !s.ok()) return s;
    if (config->unmodelled.empty()) continue;
    if (!job->scenario.allow_unmodelled()) {
      return absl::InvalidArgumentError(absl::StrCat(
          job->path, ": field strategies: DeepSpeed config ", config->path,
          ": not modelled: ", absl::StrJoin(config->unmodelled, "; "),
          " (--allow-unmodelled simulates the config without them)"));
    }
    for (const std::string& key : config->unmodelled) {
      job->warnings.push_back(absl::StrCat("DeepSpeed config ", config->path,
                                           ": not modelled: ", key));
    }
  }
  return absl::OkStatus();
}

}  // namespace shardsim

#include "sim/scenario/overrides.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace shardsim {
namespace {

absl::Status AtLeast(const char* flag, double value, double min) {
  if (value >= min) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": must be >= ", min, ", got ", value));
}

// What LoadModel and LoadPlatform take for a file, not a name.
bool IsTextprotoPath(absl::string_view name_or_path) {
  return absl::EndsWith(name_or_path, ".textproto");
}

// A model given as a Hugging Face config, "hf:PATH/config.json", with
// its path made absolute; anything else as it is.
std::string ModelFromWorkingDirectory(const std::string& model) {
  if (IsTextprotoPath(model)) return FromWorkingDirectory(model);
  constexpr absl::string_view kHf = "hf:";
  if (!absl::StartsWith(model, kHf)) return model;
  return absl::StrCat(
      kHf, FromWorkingDirectory(absl::string_view(model).substr(kHf.size())));
}

// What the strategy parser takes for a DeepSpeed config, not a spec.
std::string StrategyFromWorkingDirectory(const std::string& spec) {
  const absl::string_view trimmed = absl::StripAsciiWhitespace(spec);
  if (!absl::EndsWithIgnoreCase(trimmed, ".json")) return spec;
  return FromWorkingDirectory(trimmed);
}

}  // namespace

std::string FromWorkingDirectory(absl::string_view path) {
  if (path.empty() || absl::StartsWith(path, "/")) return std::string(path);
  std::error_code error;
  const std::filesystem::path cwd = std::filesystem::current_path(error);
  if (error) return std::string(path);  // then the loader's error names it
  return (cwd / std::string(path)).lexically_normal().string();
}

namespace {

absl::Status ApplyParallelism(const ScenarioOverrides& o, Scenario* s) {
  const bool any = o.tp || o.pp || o.vpp || o.cp || o.sequence_parallel ||
                   o.parallel_order || o.pipeline_schedule;
  // Touched only when given: an empty message would serialize differently.
  Parallelism scratch;
  Parallelism* p = any ? s->mutable_parallelism() : &scratch;
  const std::pair<const char*, const std::optional<int>*> sizes[] = {
      {"tp", &o.tp}, {"pp", &o.pp}, {"vpp", &o.vpp}, {"cp", &o.cp}};
  for (const auto& [flag, value] : sizes) {
    if (!value->has_value()) continue;
    if (absl::Status st = AtLeast(flag, **value, 1); !st.ok()) return st;
  }
  if (o.tp) p->set_tp(*o.tp);
  if (o.pp) p->set_pp(*o.pp);
  if (o.vpp) p->set_vpp(*o.vpp);
  if (o.cp) p->set_cp(*o.cp);
  if (o.sequence_parallel) p->set_sequence_parallel(*o.sequence_parallel);
  if (o.parallel_order) p->set_order(*o.parallel_order);
  if (o.pipeline_schedule) {
    const std::pair<const char*, PipelineSchedule> names[] = {
        {"gpipe", GPIPE},
        {"1f1b", ONE_F_ONE_B},
        {"interleaved", INTERLEAVED_1F1B}};
    bool found = false;
    for (const auto& [name, value] : names) {
      if (*o.pipeline_schedule == name) {
        p->set_pipeline_schedule(value);
        found = true;
      }
    }
    if (!found) {
      return absl::InvalidArgumentError(
          absl::StrCat("--pipeline-schedule: \"", *o.pipeline_schedule,
                       "\" is none of gpipe, 1f1b, interleaved"));
    }
  }
  if (o.recompute_granularity) {
    const std::string& g = *o.recompute_granularity;
    int every = 0;
    if (g == "none") {
      s->set_recompute_granularity(RECOMPUTE_NONE);
    } else if (g == "full") {
      s->set_recompute_granularity(RECOMPUTE_FULL);
    } else if (g == "selective") {
      s->set_recompute_granularity(RECOMPUTE_SELECTIVE);
    } else if (absl::StartsWith(g, "selective-layer:") &&
               absl::SimpleAtoi(g.substr(16), &every) && every >= 1) {
      s->set_recompute_granularity(RECOMPUTE_SELECTIVE_LAYER);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--recompute-granularity: \"", g,
          "\" is none of none, full, selective, selective-layer:K (K >= 1)"));
    }
    s->set_recompute_every_layers(every);
    // The finer setting replaces the scenario's full-or-nothing one.
    s->clear_recompute();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyOverrides(const ScenarioOverrides& o, Scenario* s) {
  if (o.micro_batches && o.global_batch_tokens) {
    return absl::InvalidArgumentError(
        "--micro-batches, --global-batch-tokens: give one, not both");
  }
  if (o.model) {
    s->clear_model_def();
    s->set_model(ModelFromWorkingDirectory(*o.model));
  }
  if (o.platform) {
    s->clear_platform_def();
    s->set_platform(IsTextprotoPath(*o.platform)
                        ? FromWorkingDirectory(*o.platform)
                        : *o.platform);
  }
  if (o.strategies) {
    if (o.strategies->empty()) {
      return absl::InvalidArgumentError("--strategy: give at least one");
    }
    s->clear_strategies();
    for (const std::string& spec : *o.strategies) {
      s->add_strategies(StrategyFromWorkingDirectory(spec));
    }
  }
  if (o.gpus) {
    s->clear_gpus();
    for (absl::string_view n :
         absl::StrSplit(*o.gpus, ',', absl::SkipEmpty())) {
      int gpus;
      if (!absl::SimpleAtoi(n, &gpus)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--gpus: \"", n, "\" is not a number"));
      }
      if (absl::Status st = AtLeast("gpus", gpus, 1); !st.ok()) return st;
      s->add_gpus(gpus);
    }
    if (s->gpus().empty()) {
      return absl::InvalidArgumentError("--gpus: give at least one count");
    }
  }
  if (o.micro_batches) {
    if (absl::Status st = AtLeast("micro-batches", *o.micro_batches, 1);
        !st.ok()) {
      return st;
    }
    s->set_micro_batches(*o.micro_batches);
    s->clear_global_batch_tokens();
  }
  if (o.global_batch_tokens) {
    if (absl::Status st =
            AtLeast("global-batch-tokens",
                    static_cast<double>(*o.global_batch_tokens), 1);
        !st.ok()) {
      return st;
    }
    s->set_global_batch_tokens(*o.global_batch_tokens);
    s->clear_micro_batches();
  }
  if (o.micro_batch_size) {
    if (absl::Status st = AtLeast("micro-batch-size", *o.micro_batch_size, 1);
        !st.ok()) {
      return st;
    }
    s->set_micro_batch_size(*o.micro_batch_size);
  }
  if (o.seq_len) {
    if (absl::Status st = AtLeast("seq-len", *o.seq_len, 1); !st.ok()) {
      return st;
    }
    s->set_seq_len(*o.seq_len);
  }
  if (absl::Status st = ApplyParallelism(o, s); !st.ok()) return st;
  if (o.megatron_args) {
    if (o.megatron_args->empty()) {
      return absl::InvalidArgumentError(
          "--megatron-args: give the file of Megatron-LM arguments");
    }
    s->set_megatron_args(FromWorkingDirectory(*o.megatron_args));
  }
  if (o.torchtitan_config) {
    if (o.torchtitan_config->empty()) {
      return absl::InvalidArgumentError(
          "--torchtitan-config: give the torchtitan .toml file");
    }
    s->set_torchtitan_config(FromWorkingDirectory(*o.torchtitan_config));
  }
  if (o.recompute) s->set_recompute(*o.recompute);
  if (o.allow_unmodelled) s->set_allow_unmodelled(*o.allow_unmodelled);
  if (o.what_if) s->set_what_if(*o.what_if);
  if (o.flash_attention) s->set_flash_attention(*o.flash_attention);
  if (o.optimizer_bytes_per_param) {
    if (!(*o.optimizer_bytes_per_param > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--optimizer-bytes-per-param: must be > 0, got ",
                       *o.optimizer_bytes_per_param));
    }
    s->set_optimizer_bytes_per_param(*o.optimizer_bytes_per_param);
  }
  return absl::OkStatus();
}

}  // namespace shardsim

#include "sim/scenario/torchtitan_config.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/base/did_you_mean.h"
#include "toml++/toml.h"

namespace shardsim {
namespace {

// Sources: pytorch/torchtitan commit e347b1e (2026-02-15), the last with
// TOML configs: torchtitan/config/job_config.py (JobConfig's sections,
// keys and defaults), torchtitan/models/llama3/__init__.py (the flavors),
// torchtitan/distributed/pipeline_parallel.py (stages per rank and the
// layers of each stage).
enum class TKind {
  kModelled,    // read below
  kSection,     // a table whose keys are listed under "PATH."
  kNoCost,      // changes no step time, memory or traffic: any value
  kUnmodelled,  // changes what shardsim does not model, unless at default
};

struct TKey {
  absl::string_view path;
  TKind kind;
  // kUnmodelled: the default as Show() writes it; "" when any value given
  // is unmodelled (a default TOML cannot write, such as None).
  absl::string_view default_value;
  absl::string_view what;
};

std::vector<TKey> MakeKeys() {
  using K = TKind;
  return {
      {"job", K::kSection, "", ""},
      {"job.config_file", K::kNoCost, "", ""},
      {"job.dump_folder", K::kNoCost, "", ""},
      {"job.description", K::kNoCost, "", ""},
      {"job.print_config", K::kNoCost, "", ""},
      {"job.save_config_file", K::kNoCost, "", ""},
      {"job.custom_config_module", K::kUnmodelled, "\"\"",
       "registers other config keys"},
      // Profiling and metrics: what is recorded, not what runs.
      {"profiling", K::kSection, "", ""},
      {"profiling.enable_profiling", K::kNoCost, "", ""},
      {"profiling.save_traces_folder", K::kNoCost, "", ""},
      {"profiling.profile_freq", K::kNoCost, "", ""},
      {"profiling.profiler_active", K::kNoCost, "", ""},
      {"profiling.profiler_warmup", K::kNoCost, "", ""},
      {"profiling.enable_memory_snapshot", K::kNoCost, "", ""},
      {"profiling.save_memory_snapshot_folder", K::kNoCost, "", ""},
      {"metrics", K::kSection, "", ""},
      {"metrics.log_freq", K::kNoCost, "", ""},
      {"metrics.enable_tensorboard", K::kNoCost, "", ""},
      {"metrics.disable_color_printing", K::kNoCost, "", ""},
      {"metrics.save_tb_folder", K::kNoCost, "", ""},
      {"metrics.save_for_all_ranks", K::kNoCost, "", ""},
      {"metrics.enable_wandb", K::kNoCost, "", ""},
      {"model", K::kSection, "", ""},
      {"model.name", K::kModelled, "", ""},
      {"model.flavor", K::kModelled, "", ""},
      {"model.hf_assets_path", K::kNoCost, "", ""},
      {"model.tokenizer_path", K::kNoCost, "", ""},
      // "quantize.linear.float8" is kernels.float8; others unmodelled
      // (TitanMapper::Float8).
      {"model.converters", K::kModelled, "", ""},
      {"model.print_after_conversion", K::kNoCost, "", ""},
      // Optimizer: AdamW's states are the scenario's
      // optimizer_bytes_per_param; the name is read.
      {"optimizer", K::kSection, "", ""},
      {"optimizer.name", K::kModelled, "", ""},
      {"optimizer.lr", K::kNoCost, "", ""},
      {"optimizer.beta1", K::kNoCost, "", ""},
      {"optimizer.beta2", K::kNoCost, "", ""},
      {"optimizer.eps", K::kNoCost, "", ""},
      {"optimizer.weight_decay", K::kNoCost, "", ""},
      {"optimizer.implementation", K::kUnmodelled, "\"fused\"",
       "runs the optimizer step as other kernels"},
      {"optimizer.early_step_in_backward", K::kUnmodelled, "false",
       "steps each parameter during backward"},
      {"lr_scheduler", K::kSection, "", ""},
      {"lr_scheduler.warmup_steps", K::kNoCost, "", ""},
      {"lr_scheduler.total_steps", K::kNoCost, "", ""},
      {"lr_scheduler.decay_ratio", K::kNoCost, "", ""},
      {"lr_scheduler.decay_type", K::kNoCost, "", ""},
      {"lr_scheduler.min_lr_factor", K::kNoCost, "", ""},
      {"training", K::kSection, "", ""},
      {"training.dataset", K::kNoCost, "", ""},
      {"training.dataset_path", K::kNoCost, "", ""},
      {"training.local_batch_size", K::kModelled, "", ""},
      {"training.global_batch_size", K::kModelled, "", ""},
      {"training.seq_len", K::kModelled, "", ""},
      // The norm is taken at any value (clip_grad_norm_ runs every step):
      // the value changes only the coefficient.
      {"training.max_norm", K::kNoCost, "", ""},
      {"training.steps", K::kNoCost, "", ""},
      {"training.enable_cpu_offload", K::kUnmodelled, "false",
       "offloads parameters, gradients and optimizer states to the CPU"},
      {"training.dtype", K::kModelled, "", ""},
      {"training.mixed_precision_param", K::kModelled, "", ""},
      {"training.mixed_precision_reduce", K::kModelled, "", ""},
      {"training.gc_freq", K::kNoCost, "", ""},
      {"training.gc_debug", K::kNoCost, "", ""},
      {"training.dataloader", K::kSection, "", ""},
      {"training.dataloader.num_workers", K::kNoCost, "", ""},
      {"training.dataloader.persistent_workers", K::kNoCost, "", ""},
      {"training.dataloader.pin_memory", K::kNoCost, "", ""},
      {"training.dataloader.prefetch_factor", K::kNoCost, "", ""},
      {"parallelism", K::kSection, "", ""},
      {"parallelism.data_parallel_replicate_degree", K::kModelled, "", ""},
      {"parallelism.data_parallel_shard_degree", K::kModelled, "", ""},
      {"parallelism.fsdp_reshard_after_forward", K::kModelled, "", ""},
      {"parallelism.tensor_parallel_degree", K::kModelled, "", ""},
      {"parallelism.disable_loss_parallel", K::kUnmodelled, "false",
       "gathers the logits instead of computing the loss on their shards"},
      {"parallelism.enable_async_tensor_parallel", K::kUnmodelled, "false",
       "overlaps tensor-parallel collectives with GEMMs (micro-pipelining)"},
      {"parallelism.pipeline_parallel_degree", K::kModelled, "", ""},
      {"parallelism.module_fqns_per_model_part", K::kUnmodelled, "",
       "places modules on stages by name"},
      {"parallelism.pipeline_parallel_first_stage_less_layers", K::kModelled,
       "", ""},
      {"parallelism.pipeline_parallel_last_stage_less_layers", K::kModelled, "",
       ""},
      {"parallelism.pipeline_parallel_layers_per_stage", K::kModelled, "", ""},
      {"parallelism.pipeline_parallel_schedule", K::kModelled, "", ""},
      {"parallelism.pipeline_parallel_schedule_csv", K::kUnmodelled, "\"\"",
       "runs a pipeline schedule read from a file"},
      {"parallelism.pipeline_parallel_microbatch_size", K::kModelled, "", ""},
      // Only with expert parallelism, itself not modelled.
      {"parallelism.pipeline_parallel_expert_parallel_overlap", K::kNoCost, "",
       ""},
      {"parallelism.context_parallel_degree", K::kModelled, "", ""},
      {"parallelism.context_parallel_load_balancer", K::kUnmodelled,
       "\"headtail\"", "balances the causal mask's work over cp otherwise"},
      {"parallelism.context_parallel_rotate_method", K::kUnmodelled,
       "\"allgather\"", "exchanges keys and values by all-to-all"},
      {"parallelism.expert_parallel_degree", K::kUnmodelled, "1",
       "expert parallelism"},
      {"parallelism.expert_tensor_parallel_degree", K::kUnmodelled, "1",
       "expert tensor parallelism"},
      {"parallelism.expert_parallel_comm_backend", K::kUnmodelled,
       "\"standard\"", "DeepEP's all-to-all"},
      // Checkpoint files are written between steps, not in one.
      {"checkpoint", K::kSection, "", ""},
      {"checkpoint.enable", K::kNoCost, "", ""},
      {"checkpoint.enable_ft_dataloader_checkpoints", K::kNoCost, "", ""},
      {"checkpoint.folder", K::kNoCost, "", ""},
      {"checkpoint.interval", K::kNoCost, "", ""},
      {"checkpoint.initial_load_path", K::kNoCost, "", ""},
      {"checkpoint.initial_load_model_only", K::kNoCost, "", ""},
      {"checkpoint.initial_load_in_hf", K::kNoCost, "", ""},
      {"checkpoint.initial_load_in_hf_quantized", K::kNoCost, "", ""},
      {"checkpoint.last_save_model_only", K::kNoCost, "", ""},
      {"checkpoint.last_save_in_hf", K::kNoCost, "", ""},
      {"checkpoint.export_dtype", K::kNoCost, "", ""},
      {"checkpoint.async_mode", K::kNoCost, "", ""},
      {"checkpoint.keep_latest_k", K::kNoCost, "", ""},
      {"checkpoint.load_step", K::kNoCost, "", ""},
      {"checkpoint.exclude_from_loading", K::kNoCost, "", ""},
      {"checkpoint.enable_first_step_checkpoint", K::kNoCost, "", ""},
      {"checkpoint.create_seed_checkpoint", K::kNoCost, "", ""},
      {"checkpoint.load_only", K::kNoCost, "", ""},
      {"activation_checkpoint", K::kSection, "", ""},
      {"activation_checkpoint.mode", K::kModelled, "", ""},
      {"activation_checkpoint.selective_ac_option", K::kModelled, "", ""},
      // Per-op selective checkpointing's list: MoE routers only.
      {"activation_checkpoint.per_op_sac_force_recompute_mm_shapes_by_fqns",
       K::kNoCost, "", ""},
      {"activation_checkpoint.early_stop", K::kUnmodelled, "false",
       "stops recomputation once the saved tensors are rebuilt"},
      // Only with mode = "memory_budget", itself not modelled.
      {"activation_checkpoint.memory_budget", K::kNoCost, "", ""},
      {"activation_checkpoint.visualize_memory_budget_pareto", K::kNoCost, "",
       ""},
      {"activation_checkpoint.preserve_rng_state", K::kNoCost, "", ""},
      {"activation_checkpoint.determinism_check", K::kNoCost, "", ""},
      {"activation_checkpoint.debug", K::kNoCost, "", ""},
      {"compile", K::kSection, "", ""},
      {"compile.enable", K::kUnmodelled, "false",
       "compiles the model with torch.compile (fused kernels)"},
      {"compile.components", K::kNoCost, "", ""},
      {"compile.backend", K::kNoCost, "", ""},
      // Read by TitanMapper::Float8 where model.converters converts the
      // linear layers to float8; otherwise they change nothing.
      {"quantize", K::kSection, "", ""},
      {"quantize.linear", K::kSection, "", ""},
      {"quantize.linear.float8", K::kSection, "", ""},
      {"quantize.linear.float8.enable_fsdp_float8_all_gather", K::kModelled, "",
       ""},
      // Read with the float8 all-gather: off, its per-gather all-reduces of
      // each weight's amax are reported unmodelled.
      {"quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp",
       K::kModelled, "", ""},
      {"quantize.linear.float8.recipe_name", K::kModelled, "", ""},
      {"quantize.linear.float8.filter_fqns", K::kModelled, "", ""},
      {"quantize.linear.float8.emulate", K::kModelled, "", ""},
      {"quantize.linear.mx", K::kSection, "", ""},
      {"quantize.linear.mx.mxfp8_dim1_cast_kernel_choice", K::kNoCost, "", ""},
      {"quantize.linear.mx.recipe_name", K::kNoCost, "", ""},
      {"quantize.linear.mx.filter_fqns", K::kNoCost, "", ""},
      {"quantize.grouped_mm", K::kSection, "", ""},
      {"quantize.grouped_mm.float8", K::kSection, "", ""},
      {"quantize.grouped_mm.float8.fqns", K::kNoCost, "", ""},
      {"quantize.grouped_mm.mx", K::kSection, "", ""},
      {"quantize.grouped_mm.mx.recipe_name", K::kNoCost, "", ""},
      {"quantize.grouped_mm.mx.fqns", K::kNoCost, "", ""},
      {"comm", K::kSection, "", ""},
      {"comm.init_timeout_seconds", K::kNoCost, "", ""},
      {"comm.train_timeout_seconds", K::kNoCost, "", ""},
      {"comm.trace_buf_size", K::kNoCost, "", ""},
      {"comm.save_traces_folder", K::kNoCost, "", ""},
      {"comm.save_traces_file_prefix", K::kNoCost, "", ""},
      {"comm.mode", K::kUnmodelled, "\"default\"",
       "runs without real collectives"},
      {"memory_estimation", K::kSection, "", ""},
      {"memory_estimation.enable", K::kNoCost, "", ""},
      {"memory_estimation.disable_fake_mode", K::kNoCost, "", ""},
      {"fault_tolerance", K::kSection, "", ""},
      {"fault_tolerance.enable", K::kUnmodelled, "false",
       "torchft's replica groups and their synchronization"},
      {"fault_tolerance.process_group", K::kNoCost, "", ""},
      {"fault_tolerance.process_group_timeout_ms", K::kNoCost, "", ""},
      {"fault_tolerance.replica_id", K::kNoCost, "", ""},
      {"fault_tolerance.group_size", K::kNoCost, "", ""},
      {"fault_tolerance.min_replica_size", K::kNoCost, "", ""},
      {"fault_tolerance.semi_sync_method", K::kNoCost, "", ""},
      {"experimental", K::kSection, "", ""},
      {"experimental.custom_import", K::kUnmodelled, "\"\"",
       "imports other model code"},
      {"experimental.custom_args_module", K::kUnmodelled, "\"\"",
       "registers other config keys"},
      // Validation runs between steps.
      {"validation", K::kSection, "", ""},
      {"validation.enable", K::kNoCost, "", ""},
      {"validation.dataset", K::kNoCost, "", ""},
      {"validation.dataset_path", K::kNoCost, "", ""},
      {"validation.local_batch_size", K::kNoCost, "", ""},
      {"validation.seq_len", K::kNoCost, "", ""},
      {"validation.freq", K::kNoCost, "", ""},
      {"validation.steps", K::kNoCost, "", ""},
      {"validation.dataloader", K::kSection, "", ""},
      {"validation.dataloader.num_workers", K::kNoCost, "", ""},
      {"validation.dataloader.persistent_workers", K::kNoCost, "", ""},
      {"validation.dataloader.pin_memory", K::kNoCost, "", ""},
      {"validation.dataloader.prefetch_factor", K::kNoCost, "", ""},
      {"debug", K::kSection, "", ""},
      {"debug.seed", K::kNoCost, "", ""},
      {"debug.deterministic", K::kUnmodelled, "false",
       "runs deterministic (slower) kernels"},
      {"debug.deterministic_warn_only", K::kNoCost, "", ""},
      {"debug.moe_force_load_balance", K::kNoCost, "", ""},
  };
}

const std::vector<TKey>& Keys() {
  static const auto* const keys = new std::vector<TKey>(MakeKeys());
  return *keys;
}

const TKey* FindKey(absl::string_view path) {
  for (const TKey& k : Keys()) {
    if (k.path == path) return &k;
  }
  return nullptr;
}

std::string Show(const toml::node& v) {
  if (const auto* s = v.as_string()) return absl::StrCat("\"", s->get(), "\"");
  if (const auto* i = v.as_integer()) return absl::StrCat(i->get());
  if (const auto* f = v.as_floating_point()) return absl::StrCat(f->get());
  if (const auto* b = v.as_boolean()) return b->get() ? "true" : "false";
  if (const auto* a = v.as_array()) {
    std::vector<std::string> items;
    for (const toml::node& n : *a) items.push_back(Show(n));
    return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
  }
  return v.is_table() ? "a table" : "a date or time";
}

absl::Status KeyError(const toml::node& v, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(uint64_t{v.source().begin.line}, ": ", why));
}

// " (did you mean ...)": a sibling close to it, or the same name in
// another section.
std::string Suggest(absl::string_view section, absl::string_view key) {
  std::vector<std::string> siblings;
  const std::string prefix = section.empty() ? "" : absl::StrCat(section, ".");
  for (const TKey& k : Keys()) {
    if (!absl::StartsWith(k.path, prefix)) continue;
    const absl::string_view rest = k.path.substr(prefix.size());
    if (!absl::StrContains(rest, '.')) siblings.emplace_back(rest);
  }
  std::string hint = DidYouMean(key, siblings);
  if (!hint.empty()) return hint;
  for (const TKey& k : Keys()) {
    if (absl::EndsWith(k.path, absl::StrCat(".", key))) {
      return absl::StrCat(" (did you mean \"", k.path, "\"?)");
    }
  }
  return "";
}

// The keys of `table` in file order.
std::vector<std::pair<std::string, const toml::node*>> InFileOrder(
    const toml::table& table) {
  std::vector<std::pair<std::string, const toml::node*>> items;
  for (auto&& [key, value] : table) {
    items.emplace_back(std::string(key.str()), &value);
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) {
                     return a.second->source().begin < b.second->source().begin;
                   });
  return items;
}

absl::Status CheckKeys(const toml::table& table, const std::string& section,
                       std::vector<std::string>* unmodelled) {
  for (const auto& [key, value] : InFileOrder(table)) {
    const std::string path = section.empty() ? key : section + "." + key;
    const TKey* k = FindKey(path);
    if (k == nullptr) {
      return KeyError(*value, absl::StrCat("unknown key ", path,
                                           ": not in torchtitan's JobConfig",
                                           Suggest(section, key)));
    }
    if (k->kind == TKind::kSection) {
      if (!value->is_table()) {
        return KeyError(*value, absl::StrCat(path, " must be a table"));
      }
      if (absl::Status s = CheckKeys(*value->as_table(), path, unmodelled);
          !s.ok()) {
        return s;
      }
    } else if (value->is_table()) {
      return KeyError(*value, absl::StrCat(path, " is a key, not a table"));
    } else if (k->kind == TKind::kUnmodelled &&
               (k->default_value.empty() || Show(*value) != k->default_value)) {
      unmodelled->push_back(
          absl::StrCat(path, " = ", Show(*value), ": ", k->what));
    }
  }
  return absl::OkStatus();
}

// ---- typed reads ----

class Config {
 public:
  explicit Config(const toml::table& root) : root_(root) {}

  const toml::node* Find(absl::string_view path) const {
    return root_.at_path(std::string(path)).node();
  }

  absl::StatusOr<std::optional<int64_t>> Int(absl::string_view path) const {
    const toml::node* v = Find(path);
    if (v == nullptr) return std::optional<int64_t>();
    if (!v->is_integer()) {
      return KeyError(
          *v, absl::StrCat(path, " must be an integer, got ", Show(*v)));
    }
    return std::optional<int64_t>(v->as_integer()->get());
  }

  // An integer with torchtitan's default; >= `min`.
  absl::StatusOr<int64_t> IntOr(absl::string_view path, int64_t fallback,
                                int64_t min) const {
    absl::StatusOr<std::optional<int64_t>> v = Int(path);
    if (!v.ok()) return v.status();
    const int64_t got = v->value_or(fallback);
    if (got < min || got > (int64_t{1} << 30)) {
      return KeyError(*Find(path), absl::StrCat(path, " must be in [", min,
                                                ", 2^30], got ", got));
    }
    return got;
  }

  absl::StatusOr<std::string> StrOr(absl::string_view path,
                                    absl::string_view fallback) const {
    const toml::node* v = Find(path);
    if (v == nullptr) return std::string(fallback);
    if (!v->is_string()) {
      return KeyError(*v,
                      absl::StrCat(path, " must be a string, got ", Show(*v)));
    }
    return std::string(v->as_string()->get());
  }

 private:
  const toml::table& root_;
};

struct Degrees {
  int64_t replicate = 1, shard = -1, tp = 1, pp = 1, cp = 1;
};

class TitanMapper {
 public:
  TitanMapper(const Config& c, FrameworkInput* out) : c_(c), out_(out) {}

  absl::Status Map() {
    if (absl::Status s = ReadDegrees(); !s.ok()) return s;
    if (absl::Status s = Strategy(); !s.ok()) return s;
    if (absl::Status s = ModelDef(); !s.ok()) return s;
    if (absl::Status s = Pipeline(); !s.ok()) return s;
    if (absl::Status s = Batch(); !s.ok()) return s;
    if (absl::Status s = Checkpointing(); !s.ok()) return s;
    if (absl::Status s = Float8(); !s.ok()) return s;
    return Precision();
  }

 private:
  void Unmodelled(absl::string_view path, absl::string_view what) {
    const toml::node* v = c_.Find(path);
    out_->unmodelled.push_back(absl::StrCat(
        path, v != nullptr ? absl::StrCat(" = ", Show(*v)) : " (default)", ": ",
        what));
  }

  absl::Status ReadDegrees() {
    struct {
      const char* path;
      int64_t* out;
      int64_t fallback, min;
    } const reads[] = {
        {"parallelism.data_parallel_replicate_degree", &d_.replicate, 1, 1},
        {"parallelism.data_parallel_shard_degree", &d_.shard, -1, -1},
        {"parallelism.tensor_parallel_degree", &d_.tp, 1, 1},
        {"parallelism.pipeline_parallel_degree", &d_.pp, 1, 1},
        {"parallelism.context_parallel_degree", &d_.cp, 1, 1}};
    for (const auto& r : reads) {
      absl::StatusOr<int64_t> v = c_.IntOr(r.path, r.fallback, r.min);
      if (!v.ok()) return v.status();
      *r.out = *v;
    }
    if (d_.shard == 0) {
      return KeyError(*c_.Find("parallelism.data_parallel_shard_degree"),
                      "parallelism.data_parallel_shard_degree is -1 (the "
                      "rest of the GPUs) or >= 1");
    }
    Parallelism* p = out_->scenario.mutable_parallelism();
    if (d_.tp > 1) {
      p->set_tp(static_cast<int32_t>(d_.tp));
      // torchtitan's tensor parallelism shards the norms along the
      // sequence (SequenceParallel in its parallelize_llama).
      p->set_sequence_parallel(true);
    }
    if (d_.pp > 1) p->set_pp(static_cast<int32_t>(d_.pp));
    if (d_.cp > 1) p->set_cp(static_cast<int32_t>(d_.cp));
    return absl::OkStatus();
  }

  // Sharding over data parallelism: FSDP2 (fully_shard) over the shard
  // degree, replicated over the replicate degree (HSDP); DDP when nothing
  // is sharded. shardsim's HYBRID_SHARD shards within a node: torchtitan's
  // shard group is data_parallel_shard_degree GPUs.
  absl::Status Strategy() {
    absl::StatusOr<std::string> reshard =
        c_.StrOr("parallelism.fsdp_reshard_after_forward", "default");
    if (!reshard.ok()) return reshard.status();
    if (*reshard != "default" && *reshard != "always" && *reshard != "never") {
      return KeyError(*c_.Find("parallelism.fsdp_reshard_after_forward"),
                      "parallelism.fsdp_reshard_after_forward is default, "
                      "always or never");
    }
    // "default" is reshard_after_forward = not pp_enabled
    // (parallelize.py apply_fsdp). Under a pipeline the stage also turns
    // reshard_after_backward and the gradient sync off for every backward
    // but the last (torch.distributed.pipelining stage.py,
    // backward_maybe_with_nosync): without resharding after forward, the
    // parameters are gathered once a step and the gradients
    // reduce-scattered once, after the last micro-batch.
    const bool pp = d_.pp > 1;
    if (pp && *reshard == "always") {
      Unmodelled("parallelism.fsdp_reshard_after_forward",
                 "always, with a pipeline: resharded after each forward but "
                 "not after backward (simulated: gathered for every forward "
                 "and backward)");
    }
    const bool hold = pp && *reshard != "always";
    if (pp) {
      out_->scenario.mutable_execution()->set_reduce_every_micro_batch(false);
      if (hold) {
        out_->scenario.mutable_execution()->set_hold_params_through_step(true);
      }
    }
    const bool keep = *reshard == "never" && !hold;
    std::string spec;
    if (d_.shard == 1) {
      spec = "ddp";
    } else if (d_.replicate > 1) {
      spec = keep ? "fsdp:_HYBRID_SHARD_ZERO2" : "fsdp:HYBRID_SHARD";
    } else {
      spec = keep ? "fsdp:SHARD_GRAD_OP" : "fsdp:FULL_SHARD";
    }
    out_->scenario.add_strategies(spec);
    absl::StatusOr<std::string> opt = c_.StrOr("optimizer.name", "AdamW");
    if (!opt.ok()) return opt.status();
    if (*opt != "AdamW" && *opt != "Adam") {
      Unmodelled("optimizer.name",
                 "keeps other states than Adam's (simulated: Adam's 12 bytes "
                 "per parameter)");
    }
    out_->scenario.set_optimizer_bytes_per_param(12);
    // Every step takes the global gradient norm and scales the gradients
    // by it, whatever training.max_norm is (train.py:
    // dist_utils.clip_grad_norm_(..., foreach=True)).
    out_->scenario.mutable_execution()->set_grad_norm(FOREACH_NORM);
    return absl::OkStatus();
  }

  absl::Status ModelDef();
  absl::Status Pipeline();
  absl::Status Batch();
  absl::Status Checkpointing();
  absl::Status Precision();
  absl::Status Float8();

  const Config& c_;
  FrameworkInput* out_;
  Degrees d_;
  int vpp_ = 1;
};

// A llama3 flavor's TransformerModelArgs (models/llama3/__init__.py;
// defaults in model/args.py: vocab_size 128256, multiple_of 256).
struct Flavor {
  const char* name;
  int layers, dim, heads, kv_heads, vocab, multiple_of;
  double ffn_dim_multiplier;  // 0: None
};

constexpr Flavor kLlama3[] = {
    {"debugmodel", 6, 256, 16, 0, 2048, 256, 0},
    {"8B", 32, 4096, 32, 8, 128256, 1024, 1.3},
    {"70B", 80, 8192, 64, 8, 128256, 4096, 1.3},
    {"405B", 126, 16384, 128, 8, 128256, 4096, 1.2},
};

// FeedForward's hidden size (llama3/model/model.py): 4 x dim, two thirds
// of it, times the multiplier, rounded up to multiple_of.
int64_t FfnHidden(const Flavor& f) {
  int64_t h = int64_t{2} * (4 * int64_t{f.dim}) / 3;
  if (f.ffn_dim_multiplier > 0) {
    h = static_cast<int64_t>(f.ffn_dim_multiplier * static_cast<double>(h));
  }
  return (h + f.multiple_of - 1) / f.multiple_of * f.multiple_of;
}

absl::Status TitanMapper::ModelDef() {
  absl::StatusOr<std::string> name = c_.StrOr("model.name", "llama3");
  absl::StatusOr<std::string> flavor = c_.StrOr("model.flavor", "debugmodel");
  if (!name.ok()) return name.status();
  if (!flavor.ok()) return flavor.status();
  std::vector<std::string> known;
  for (const Flavor& f : kLlama3) {
    known.push_back(f.name);
    if (*name != "llama3" || *flavor != f.name) continue;
    Model& m = *out_->scenario.mutable_model_def();
    m.set_name(absl::StrCat("torchtitan:llama3/", f.name));
    m.set_layers(f.layers);
    m.set_hidden(f.dim);
    m.set_heads(f.heads);
    m.set_kv_heads(f.kv_heads);
    m.set_ffn_hidden(FfnHidden(f));
    m.set_vocab(f.vocab);
    m.set_mlp(Model::SWIGLU);
    m.set_norm(Model::RMSNORM);
    m.set_tied_embeddings(false);
    // attn_type "sdpa": PyTorch's flash or memory-efficient kernel, which
    // keep no score matrix.
    out_->scenario.set_flash_attention(true);
    return absl::OkStatus();
  }
  const toml::node* at =
      c_.Find(*name == "llama3" ? "model.flavor" : "model.name");
  const std::string what = absl::StrCat("model ", *name, " flavor ", *flavor);
  const std::string msg =
      absl::StrCat(what, ": shardsim knows torchtitan's llama3 flavors ",
                   absl::StrJoin(known, ", "),
                   *name == "llama3" ? DidYouMean(*flavor, known) : "");
  if (at == nullptr) return absl::InvalidArgumentError(msg);
  return KeyError(*at, msg);
}

// Stages per rank as pipeline_parallel.py derives them: from
// pipeline_parallel_layers_per_stage, else 1 for single-stage schedules
// and 2 for the others. Layers per stage as
// generate_llm_fqn_per_model_part splits them, the embedding and the
// output counted as first_less and last_less layers.
absl::Status TitanMapper::Pipeline() {
  absl::StatusOr<std::string> schedule =
      c_.StrOr("parallelism.pipeline_parallel_schedule", "1F1B");
  if (!schedule.ok()) return schedule.status();
  bool single = true;
  PipelineSchedule ps = ONE_F_ONE_B;
  if (*schedule == "GPipe") {
    ps = GPIPE;
  } else if (*schedule == "Interleaved1F1B") {
    ps = INTERLEAVED_1F1B;
    single = false;
  } else if (*schedule != "1F1B") {
    Unmodelled("parallelism.pipeline_parallel_schedule",
               "another pipeline schedule (simulated: 1F1B)");
  }
  if (d_.pp == 1) return absl::OkStatus();
  out_->scenario.mutable_parallelism()->set_pipeline_schedule(ps);
  absl::StatusOr<int64_t> first =
      c_.IntOr("parallelism.pipeline_parallel_first_stage_less_layers", 1, 0);
  absl::StatusOr<int64_t> last =
      c_.IntOr("parallelism.pipeline_parallel_last_stage_less_layers", 1, 0);
  absl::StatusOr<std::optional<int64_t>> per_stage =
      c_.Int("parallelism.pipeline_parallel_layers_per_stage");
  for (const absl::Status& s :
       {first.status(), last.status(), per_stage.status()}) {
    if (!s.ok()) return s;
  }
  const int64_t layers = out_->scenario.model_def().layers();
  const int64_t effective = layers + *first + *last;
  int64_t stages = d_.pp * (single ? 1 : 2);
  if (per_stage->has_value()) {
    if (**per_stage < 1) {
      return KeyError(
          *c_.Find("parallelism.pipeline_parallel_layers_per_stage"),
          "parallelism.pipeline_parallel_layers_per_stage must be "
          ">= 1");
    }
    stages = (effective + **per_stage - 1) / **per_stage;
    if (stages % d_.pp != 0 || (single && stages != d_.pp) ||
        (!single && stages < 2 * d_.pp)) {
      return KeyError(
          *c_.Find("parallelism.pipeline_parallel_layers_per_stage"),
          absl::StrCat("makes ", stages, " stages, which ", *schedule,
                       " cannot run on ", d_.pp, " pipeline ranks"));
    }
  }
  vpp_ = static_cast<int>(stages / d_.pp);
  if (vpp_ > 1) out_->scenario.mutable_parallelism()->set_vpp(vpp_);
  if (effective < stages || *first > effective / stages ||
      *last > effective / stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        layers, " layers with first_less ", *first, " and last_less ", *last,
        " do not fill ", stages, " pipeline stages"));
  }
  std::vector<int> split;
  for (int64_t i = 0; i < stages; ++i) {
    int64_t n = effective / stages + (i < effective % stages ? 1 : 0);
    if (i == 0) n -= *first;
    if (i == stages - 1) n -= *last;
    split.push_back(static_cast<int>(n));
  }
  const bool even = std::all_of(split.begin(), split.end(),
                                [&](int n) { return n == split[0]; });
  if (even) return absl::OkStatus();
  if (vpp_ > 1) {
    Unmodelled("parallelism.pipeline_parallel_first_stage_less_layers",
               absl::StrCat("uneven virtual stages ", absl::StrJoin(split, ","),
                            " (simulated: even)"));
    return absl::OkStatus();
  }
  for (int n : split) out_->scenario.mutable_parallelism()->add_stage_layers(n);
  return absl::OkStatus();
}

// local_batch_size is each data-parallel rank's batch per step (one
// forward, or pipeline_parallel_microbatch_size-sized micro-batches under
// pp); global_batch_size, when given, is accumulated over steps of it.
absl::Status TitanMapper::Batch() {
  absl::StatusOr<int64_t> local = c_.IntOr("training.local_batch_size", 8, 1);
  absl::StatusOr<int64_t> global =
      c_.IntOr("training.global_batch_size", -1, -1);
  absl::StatusOr<int64_t> seq = c_.IntOr("training.seq_len", 2048, 1);
  absl::StatusOr<int64_t> pp_mbs =
      c_.IntOr("parallelism.pipeline_parallel_microbatch_size", 1, 1);
  for (const absl::Status& s :
       {local.status(), global.status(), seq.status(), pp_mbs.status()}) {
    if (!s.ok()) return s;
  }
  const int64_t micro = d_.pp > 1 ? *pp_mbs : *local;
  if (*local % micro != 0) {
    return KeyError(*c_.Find("training.local_batch_size"),
                    absl::StrCat("training.local_batch_size ", *local,
                                 " is no whole number of pipeline "
                                 "micro-batches of ",
                                 micro));
  }
  Scenario& s = out_->scenario;
  s.set_micro_batch_size(static_cast<int32_t>(micro));
  s.set_seq_len(static_cast<int32_t>(*seq));
  if (*global > 0) {
    s.set_global_batch_tokens(*global * *seq);
  } else {
    s.set_micro_batches(static_cast<int32_t>(*local / micro));
  }
  return absl::OkStatus();
}

// mode: none, full, selective (selective_ac_option "op": per-op, the
// attention's core kept from recomputation as Megatron's selective;
// an integer k: every k-th block in full), memory_budget (not modelled).
absl::Status TitanMapper::Checkpointing() {
  absl::StatusOr<std::string> mode =
      c_.StrOr("activation_checkpoint.mode", "selective");
  if (!mode.ok()) return mode.status();
  Scenario& s = out_->scenario;
  if (*mode == "none") {
    s.set_recompute_granularity(RECOMPUTE_NONE);
    return absl::OkStatus();
  }
  if (*mode == "full" || *mode == "memory_budget") {
    if (*mode == "memory_budget") {
      Unmodelled("activation_checkpoint.mode",
                 "recomputes what a memory budget leaves (simulated: full)");
    }
    s.set_recompute_granularity(RECOMPUTE_FULL);
    return absl::OkStatus();
  }
  if (*mode != "selective") {
    return KeyError(*c_.Find("activation_checkpoint.mode"),
                    "activation_checkpoint.mode is none, full, selective or "
                    "memory_budget");
  }
  const toml::node* opt = c_.Find("activation_checkpoint.selective_ac_option");
  const std::string option =
      opt == nullptr ? "2" : (opt->is_string() ? opt->as_string()->get() : "");
  if (option == "op") {
    s.set_recompute_granularity(RECOMPUTE_SELECTIVE);
    return absl::OkStatus();
  }
  int k = 0;
  if (option.empty() || !absl::SimpleAtoi(option, &k) || k < 1) {
    return KeyError(*opt,
                    "activation_checkpoint.selective_ac_option is \"op\" or "
                    "a positive integer as a string");
  }
  // Every block checkpointed is full recomputation.
  if (k == 1) {
    s.set_recompute_granularity(RECOMPUTE_FULL);
  } else {
    s.set_recompute_granularity(RECOMPUTE_SELECTIVE_LAYER);
    s.set_recompute_every_layers(k);
  }
  return absl::OkStatus();
}

// FSDP2 keeps fp32 parameters and computes in mixed_precision_param;
// DDP and single-GPU runs compute under autocast in the same type. Its
// gradients are reduced in mixed_precision_reduce (float32, the only
// value), where shardsim's collectives carry 16-bit gradients.
absl::Status TitanMapper::Precision() {
  absl::StatusOr<std::string> param =
      c_.StrOr("training.mixed_precision_param", "bfloat16");
  absl::StatusOr<std::string> dtype = c_.StrOr("training.dtype", "float32");
  if (!param.ok()) return param.status();
  if (!dtype.ok()) return dtype.status();
  if (*param != "bfloat16") {
    Unmodelled("training.mixed_precision_param",
               "computes in fp32 (simulated: 16-bit)");
  }
  if (*dtype != "float32") {
    Unmodelled("training.dtype",
               "keeps bf16 parameters and optimizer states (simulated: fp32 "
               "master copy)");
  }
  Unmodelled("training.mixed_precision_reduce",
             "reduces gradients in fp32 (simulated: 16-bit)");
  return absl::OkStatus();
}

// model.converters (components/quantization: "quantize.linear.float8", or
// "float8" in older torchtitan) turns the blocks' linear layers into
// torchao's Float8Linear: kernels.float8, which models tensorwise dynamic
// scaling with compiled casts and the output projection left in bf16;
// enable_fsdp_float8_all_gather is kernels.float8.fsdp_all_gather, with the
// scales precomputed once a step (precompute_float8_dynamic_scale_for_fsdp,
// as torchtitan's float8 recipes set it). Settings away from that are
// unmodelled.
absl::Status TitanMapper::Float8() {
  const toml::node* v = c_.Find("model.converters");
  if (v == nullptr) return absl::OkStatus();
  const toml::array* list = v->as_array();
  if (list == nullptr) {
    return KeyError(*v, absl::StrCat("model.converters must be a list of "
                                     "strings, got ",
                                     Show(*v)));
  }
  bool float8 = false;
  for (const toml::node& n : *list) {
    const auto* name = n.as_string();
    if (name == nullptr) {
      return KeyError(n, absl::StrCat("model.converters must be a list of "
                                      "strings, got ",
                                      Show(*v)));
    }
    if (name->get() == "quantize.linear.float8" || name->get() == "float8") {
      float8 = true;
    } else {
      out_->unmodelled.push_back(
          absl::StrCat("model.converters \"", name->get(),
                       "\": converts layers to another GEMM data type (MX, "
                       "grouped float8; simulated: bf16)"));
    }
  }
  if (!float8) return absl::OkStatus();
  out_->scenario.mutable_kernels()->mutable_float8()->set_enabled(true);
  const std::string f8 = "quantize.linear.float8.";
  absl::StatusOr<std::string> recipe = c_.StrOr(f8 + "recipe_name", "");
  if (!recipe.ok()) return recipe.status();
  if (!recipe->empty() && *recipe != "tensorwise") {
    Unmodelled(f8 + "recipe_name",
               "scales by row or by block (simulated: tensorwise)");
  }
  auto flag = [&](const char* key) -> absl::StatusOr<bool> {
    const toml::node* b = c_.Find(f8 + key);
    if (b == nullptr) return false;
    if (!b->is_boolean()) {
      return KeyError(
          *b, absl::StrCat(f8, key, " must be true or false, got ", Show(*b)));
    }
    return b->as_boolean()->get();
  };
  absl::StatusOr<bool> emulate = flag("emulate");
  if (!emulate.ok()) return emulate.status();
  if (*emulate) {
    Unmodelled(f8 + "emulate",
               "emulates float8 in bf16 (simulated: FP8 tensor cores)");
  }
  absl::StatusOr<bool> gather = flag("enable_fsdp_float8_all_gather");
  if (!gather.ok()) return gather.status();
  absl::StatusOr<bool> precompute =
      flag("precompute_float8_dynamic_scale_for_fsdp");
  if (!precompute.ok()) return precompute.status();
  out_->scenario.mutable_kernels()->mutable_float8()->set_fsdp_all_gather(
      *gather);
  if (*gather && !*precompute) {
    // fsdp_pre_all_gather then takes each weight's amax at every gather,
    // all-reduced over the mesh (hp_tensor_to_float8_dynamic, reduce_amax).
    Unmodelled(f8 + "precompute_float8_dynamic_scale_for_fsdp",
               "each float8 weight's scale is all-reduced at every gather "
               "(simulated: once a step)");
  }
  // filter_fqns: torchtitan always leaves "output" (the LM head) in bf16,
  // as modelled; any other name keeps more layers in bf16.
  if (const toml::node* f = c_.Find(f8 + "filter_fqns")) {
    const toml::array* names = f->as_array();
    bool other = names == nullptr;
    if (names != nullptr) {
      for (const toml::node& n : *names) {
        const auto* s = n.as_string();
        other = other || s == nullptr || s->get() != "output";
      }
    }
    if (other) {
      Unmodelled(f8 + "filter_fqns",
                 "keeps more linear layers in bf16 (simulated: only the "
                 "output projection)");
    }
  }
  // Float8Linear's casts are the compiled ones modelled only under
  // torch.compile.
  const toml::node* compiled = c_.Find("compile.enable");
  if (compiled == nullptr || !compiled->is_boolean() ||
      !compiled->as_boolean()->get()) {
    Unmodelled("compile.enable",
               "float8 without torch.compile: torchao's casts run eager "
               "(simulated: compiled)");
  }
  return absl::OkStatus();
}

absl::StatusOr<FrameworkInput> ReadTitanText(const std::string& text,
                                             const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    // "LINE:COLUMN: " is made the file's position by the caller.
    return absl::InvalidArgumentError(absl::StrCat(
        uint64_t{e.source().begin.line}, ":", uint64_t{e.source().begin.column},
        ": not valid TOML: ", std::string(e.description())));
  }
  FrameworkInput in;
  in.path = path;
  if (absl::Status s = CheckKeys(root, "", &in.unmodelled); !s.ok()) return s;
  const Config config(root);
  if (absl::Status s = TitanMapper(config, &in).Map(); !s.ok()) return s;
  return in;
}

}  // namespace

absl::StatusOr<FrameworkInput> ReadTorchtitanConfig(
    absl::string_view spec, absl::string_view base_dir) {
  return ReadFrameworkFile("torchtitan config", spec, base_dir, ReadTitanText);
}

}  // namespace shardsim

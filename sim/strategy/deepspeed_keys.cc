#include "sim/strategy/deepspeed_keys.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace shardsim {
namespace {

using K = DeepSpeedKeyKind;

// Paths of the modelled keys are read by deepspeed_config.cc; the rest
// carry DeepSpeed's default (kUnmodelled) and what shardsim leaves out.
std::vector<DeepSpeedKey> MakeKeys() {
  const char* const kOffload =
      "offloads parameters to CPU or NVMe (their host copies are not "
      "simulated)";
  return {
      // Batch: checked against the scenario (deepspeed_check.h).
      {"train_batch_size", K::kModelled, "", ""},
      {"train_micro_batch_size_per_gpu", K::kModelled, "", ""},
      {"gradient_accumulation_steps", K::kModelled, "", ""},
      // Precision: shardsim models 16-bit mixed precision (2-byte
      // parameters, gradients and collectives).
      {"bf16", K::kSection, "", ""},
      {"bf16.enabled", K::kModelled, "", ""},
      {"bf16.immediate_grad_update", K::kUnmodelled, "false",
       "applies gradients as they arrive"},
      {"bf16.check_grad_overflow", K::kModelled, "", ""},
      {"bf16.bf16_master_weights_and_grads", K::kUnmodelled, "false",
       "keeps bf16 master weights and gradients (other memory)"},
      {"bf16.bf16_optimizer_states", K::kUnmodelled, "false",
       "keeps optimizer states in bf16 (other memory)"},
      {"fp16", K::kSection, "", ""},
      {"fp16.enabled", K::kModelled, "", ""},
      {"fp16.auto_cast", K::kUnmodelled, "false", "casts inputs to fp16"},
      {"fp16.loss_scale", K::kNoCost, "", ""},
      {"fp16.initial_scale_power", K::kNoCost, "", ""},
      {"fp16.loss_scale_window", K::kNoCost, "", ""},
      {"fp16.hysteresis", K::kNoCost, "", ""},
      {"fp16.consecutive_hysteresis", K::kNoCost, "", ""},
      {"fp16.min_loss_scale", K::kNoCost, "", ""},
      {"fp16.fp16_master_weights_and_grads", K::kUnmodelled, "false",
       "keeps fp16 master weights and gradients (other memory)"},
      {"amp", K::kOpaqueUnmodelled, "", "runs NVIDIA Apex AMP"},
      {"torch_autocast", K::kOpaqueUnmodelled, "",
       "runs torch.autocast (other data types)"},
      {"data_types", K::kSection, "", ""},
      {"data_types.grad_accum_dtype", K::kUnmodelled, "null",
       "accumulates gradients in another data type"},
      {"data_types.param_dtype", K::kUnmodelled, "null",
       "keeps parameters in another data type"},
      {"data_types.buffer_dtype", K::kNoCost, "", ""},
      {"communication_data_type", K::kUnmodelled, "null",
       "runs collectives in another data type (other traffic)"},
      // Only with sequence parallelism, which shardsim does not model.
      {"seq_parallel_communication_data_type", K::kNoCost, "", ""},
      // Optimizer: Adam's states are the scenario's
      // optimizer_bytes_per_param; the type is read.
      {"optimizer", K::kSection, "", ""},
      {"optimizer.type", K::kModelled, "", ""},
      {"optimizer.params", K::kOpaqueNoCost, "", ""},
      {"optimizer.legacy_fusion", K::kNoCost, "", ""},
      {"scheduler", K::kOpaqueNoCost, "", ""},
      {"zero_allow_untested_optimizer", K::kNoCost, "", ""},
      {"zero_force_ds_cpu_optimizer", K::kNoCost, "", ""},
      // The ZeRO optimizers take the gradient norm and scale the gradients
      // every step at any value (Execution.grad_norm): the key changes only
      // the coefficient.
      {"gradient_clipping", K::kNoCost, "", ""},
      {"prescale_gradients", K::kUnmodelled, "false",
       "scales gradients before their reduction"},
      {"gradient_predivide_factor", K::kNoCost, "", ""},
      {"gradient_allreduce_op", K::kNoCost, "", ""},
      {"sparse_gradients", K::kUnmodelled, "false",
       "reduces sparse embedding gradients"},
      {"disable_allgather", K::kUnmodelled, "false",
       "broadcasts parameters instead of all-gathering them"},
      {"managed_gradient_accumulation", K::kUnmodelled, "true",
       "leaves gradient accumulation to the user"},
      {"graph_harvesting", K::kUnmodelled, "false", "captures CUDA graphs"},
      {"activation_checkpointing", K::kSection, "", ""},
      {"activation_checkpointing.partition_activations", K::kUnmodelled,
       "false", "partitions checkpointed activations across GPUs"},
      {"activation_checkpointing.cpu_checkpointing", K::kUnmodelled, "false",
       "keeps checkpointed activations on the CPU"},
      {"activation_checkpointing.contiguous_memory_optimization",
       K::kUnmodelled, "false", "copies checkpoints into one buffer"},
      {"activation_checkpointing.synchronize_checkpoint_boundary",
       K::kUnmodelled, "false", "synchronizes at each checkpoint"},
      {"activation_checkpointing.number_checkpoints", K::kNoCost, "", ""},
      {"activation_checkpointing.profile", K::kNoCost, "", ""},
      // Logging, monitoring, checkpoint files: nothing a step costs.
      {"steps_per_print", K::kNoCost, "", ""},
      {"wall_clock_breakdown", K::kNoCost, "", ""},
      {"memory_breakdown", K::kNoCost, "", ""},
      {"dump_state", K::kNoCost, "", ""},
      {"log_level", K::kNoCost, "", ""},
      {"dataloader_drop_last", K::kNoCost, "", ""},
      {"vocabulary_size", K::kNoCost, "", ""},
      {"use_data_before_expert_parallelism", K::kNoCost, "", ""},
      {"tensorboard", K::kOpaqueNoCost, "", ""},
      {"wandb", K::kOpaqueNoCost, "", ""},
      {"csv_monitor", K::kOpaqueNoCost, "", ""},
      {"comet", K::kOpaqueNoCost, "", ""},
      {"flops_profiler", K::kOpaqueNoCost, "", ""},
      {"checkpoint", K::kOpaqueNoCost, "", ""},
      {"nebula", K::kOpaqueNoCost, "", ""},
      {"datastates_ckpt", K::kOpaqueNoCost, "", ""},
      {"aio", K::kOpaqueNoCost, "", ""},  // NVMe offload's, reported itself
      {"comms_logger", K::kOpaqueUnmodelled, "",
       "logs every collective (synchronizing with prof_all)"},
      {"timers", K::kOpaqueUnmodelled, "", "times steps with synchronization"},
      {"autotuning", K::kOpaqueUnmodelled, "",
       "tunes the config while running"},
      {"elasticity", K::kOpaqueUnmodelled, "",
       "changes the batch with the GPUs"},
      {"sparse_attention", K::kOpaqueUnmodelled, "", "runs sparse attention"},
      {"pipeline", K::kOpaqueUnmodelled, "", "configures pipeline parallelism"},
      {"tensor_parallel", K::kOpaqueUnmodelled, "",
       "runs tensor parallelism (AutoTP)"},
      {"expert_parallel", K::kOpaqueUnmodelled, "",
       "runs mixture-of-experts parallelism"},
      {"hybrid_engine", K::kOpaqueUnmodelled, "",
       "runs the RLHF hybrid engine"},
      {"compile", K::kOpaqueUnmodelled, "", "compiles the model (DeepCompile)"},
      {"weight_quantization", K::kOpaqueUnmodelled, "", "quantizes weights"},
      {"quantize_training", K::kOpaqueUnmodelled, "", "quantizes training"},
      {"compression_training", K::kOpaqueUnmodelled, "",
       "compresses the model while training"},
      {"data_efficiency", K::kOpaqueUnmodelled, "",
       "samples and routes data (other sequence lengths)"},
      {"curriculum_learning", K::kOpaqueUnmodelled, "",
       "grows sequence lengths over training"},
      {"eigenvalue", K::kOpaqueUnmodelled, "", "computes eigenvalues"},
      {"progressive_layer_drop", K::kOpaqueUnmodelled, "", "drops layers"},
      // ZeRO (DeepSpeedZeroConfig; both a field's name and its alias).
      {"zero_optimization", K::kSection, "", ""},
      {"zero_optimization.stage", K::kModelled, "", ""},
      {"zero_optimization.reduce_scatter", K::kModelled, "", ""},
      {"zero_optimization.reduce_bucket_size", K::kModelled, "", ""},
      {"zero_optimization.overlap_comm", K::kModelled, "", ""},
      {"zero_optimization.prefetch_bucket_size", K::kModelled, "", ""},
      {"zero_optimization.stage3_prefetch_bucket_size", K::kModelled, "", ""},
      {"zero_optimization.param_persistence_threshold", K::kModelled, "", ""},
      {"zero_optimization.stage3_param_persistence_threshold", K::kModelled, "",
       ""},
      {"zero_optimization.max_live_parameters", K::kModelled, "", ""},
      {"zero_optimization.stage3_max_live_parameters", K::kModelled, "", ""},
      {"zero_optimization.zero_hpz_partition_size", K::kModelled, "", ""},
      {"zero_optimization.zero_quantized_weights", K::kModelled, "", ""},
      {"zero_optimization.zero_quantized_gradients", K::kModelled, "", ""},
      {"zero_optimization.mics_shard_size", K::kModelled, "", ""},
      {"zero_optimization.mics_hierarchical_params_gather", K::kModelled, "",
       ""},
      {"zero_optimization.contiguous_gradients", K::kUnmodelled, "true",
       "leaves gradients where autograd put them"},
      {"zero_optimization.use_multi_rank_bucket_allreduce", K::kUnmodelled,
       "true", "reduces each gradient to its owner"},
      {"zero_optimization.allgather_partitions", K::kUnmodelled, "true",
       "broadcasts updated partitions one by one"},
      {"zero_optimization.allgather_bucket_size", K::kUnmodelled, "500000000",
       "all-gathers updated parameters in buckets of that size"},
      {"zero_optimization.load_from_fp32_weights", K::kNoCost, "", ""},
      {"zero_optimization.elastic_checkpoint", K::kNoCost, "", ""},
      {"zero_optimization.offload_param", K::kSection, "", ""},
      {"zero_optimization.offload_param.device", K::kUnmodelled, "\"none\"",
       kOffload},
      {"zero_optimization.offload_param.nvme_path", K::kNoCost, "", ""},
      {"zero_optimization.offload_param.buffer_count", K::kNoCost, "", ""},
      {"zero_optimization.offload_param.buffer_size", K::kNoCost, "", ""},
      {"zero_optimization.offload_param.max_in_cpu", K::kNoCost, "", ""},
      {"zero_optimization.offload_param.pin_memory", K::kNoCost, "", ""},
      {"zero_optimization.offload_optimizer", K::kSection, "", ""},
      // "cpu": ZeRO-Offload (Execution.offload_optimizer); "nvme" is refused.
      {"zero_optimization.offload_optimizer.device", K::kModelled, "", ""},
      {"zero_optimization.offload_optimizer.nvme_path", K::kNoCost, "", ""},
      {"zero_optimization.offload_optimizer.buffer_count", K::kNoCost, "", ""},
      {"zero_optimization.offload_optimizer.pin_memory", K::kNoCost, "", ""},
      {"zero_optimization.offload_optimizer.pipeline_read", K::kNoCost, "", ""},
      {"zero_optimization.offload_optimizer.pipeline_write", K::kNoCost, "",
       ""},
      {"zero_optimization.offload_optimizer.fast_init", K::kNoCost, "", ""},
      // DeepSpeedZeroOffloadOptimizerConfig's defaults (offload_config.py);
      // cpuadam_cores_perc acts only with super_offload.
      {"zero_optimization.offload_optimizer.ratio", K::kUnmodelled, "1.0",
       "offloads only part of the optimizer states (stage 3)"},
      {"zero_optimization.offload_optimizer.super_offload", K::kUnmodelled,
       "false", "runs SuperOffload's optimizer"},
      {"zero_optimization.offload_optimizer.cpuadam_cores_perc", K::kNoCost, "",
       ""},
      {"zero_optimization.zenflow", K::kOpaqueUnmodelled, "",
       "offloads with ZenFlow"},
      {"zero_optimization.sub_group_size", K::kUnmodelled, "1000000000",
       "steps the optimizer in sub-groups of that size"},
      {"zero_optimization.cpu_offload", K::kUnmodelled, "null",
       "offloads the optimizer by its deprecated key (give "
       "offload_optimizer.device \"cpu\", which is modelled)"},
      {"zero_optimization.cpu_offload_param", K::kUnmodelled, "null", kOffload},
      {"zero_optimization.cpu_offload_use_pin_memory", K::kNoCost, "", ""},
      {"zero_optimization.model_persistence_threshold", K::kUnmodelled,
       "9223372036854775807", "caps the persistent parameters"},
      {"zero_optimization.stage3_model_persistence_threshold", K::kUnmodelled,
       "9223372036854775807", "caps the persistent parameters"},
      {"zero_optimization.max_reuse_distance", K::kUnmodelled, "1000000000",
       "keeps gathered parameters for reuse"},
      {"zero_optimization.stage3_max_reuse_distance", K::kUnmodelled,
       "1000000000", "keeps gathered parameters for reuse"},
      {"zero_optimization.gather_16bit_weights_on_model_save", K::kNoCost, "",
       ""},
      {"zero_optimization.stage3_gather_16bit_weights_on_model_save",
       K::kNoCost, "", ""},
      {"zero_optimization.stage3_gather_fp16_weights_on_model_save", K::kNoCost,
       "", ""},
      {"zero_optimization.module_granularity_threshold", K::kUnmodelled, "0",
       "gathers small modules together"},
      {"zero_optimization.stage3_module_granularity_threshold", K::kUnmodelled,
       "0", "gathers small modules together"},
      {"zero_optimization.use_all_reduce_for_fetch_params", K::kUnmodelled,
       "false", "fetches parameters with all-reduce"},
      {"zero_optimization.stage3_use_all_reduce_for_fetch_params",
       K::kUnmodelled, "false", "fetches parameters with all-reduce"},
      {"zero_optimization.allgather_sequential", K::kUnmodelled, "false",
       "all-gathers parameters one at a time"},
      {"zero_optimization.stage3_allgather_sequential", K::kUnmodelled, "false",
       "all-gathers parameters one at a time"},
      {"zero_optimization.ignore_unused_parameters", K::kNoCost, "", ""},
      {"zero_optimization.legacy_stage1", K::kUnmodelled, "false",
       "runs the legacy stage 1"},
      {"zero_optimization.round_robin_gradients", K::kUnmodelled, "false",
       "copies gradients to the CPU round robin"},
      {"zero_optimization.zero_quantized_nontrainable_weights", K::kUnmodelled,
       "false", "quantizes frozen weights"},
      {"zero_optimization.zeropp_loco_param", K::kUnmodelled, "null",
       "compensates quantized gradients (LoCo)"},
      {"zero_optimization.memory_efficient_linear", K::kUnmodelled, "true",
       "keeps linear inputs another way"},
      {"zero_optimization.pipeline_loading_checkpoint", K::kNoCost, "", ""},
      {"zero_optimization.override_module_apply", K::kNoCost, "", ""},
      {"zero_optimization.log_trace_cache_warnings", K::kNoCost, "", ""},
      {"zero_optimization.enable_sanity_checks", K::kUnmodelled, "false",
       "checks parameters each step"},
      {"zero_optimization.save_muon_momentum_buffer_in_memory", K::kNoCost, "",
       ""},
      {"zero_optimization.leaf_module", K::kOpaqueUnmodelled, "",
       "gathers whole leaf modules"},
  };
}

}  // namespace

const std::vector<DeepSpeedKey>& DeepSpeedKeys() {
  static const std::vector<DeepSpeedKey>* const keys =
      new std::vector<DeepSpeedKey>(MakeKeys());
  return *keys;
}

const DeepSpeedKey* FindDeepSpeedKey(absl::string_view path) {
  for (const DeepSpeedKey& key : DeepSpeedKeys()) {
    if (key.path == path) return &key;
  }
  return nullptr;
}

std::vector<std::string> DeepSpeedKeysUnder(absl::string_view section) {
  const std::string prefix = section.empty() ? "" : absl::StrCat(section, ".");
  std::vector<std::string> names;
  for (const DeepSpeedKey& key : DeepSpeedKeys()) {
    if (!absl::StartsWith(key.path, prefix)) continue;
    absl::string_view rest = key.path.substr(prefix.size());
    if (absl::StrContains(rest, '.')) continue;
    names.emplace_back(rest);
  }
  return names;
}

}  // namespace shardsim

#include "sim/strategy/execution.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "sim/schema/limits.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace {

// Host time of one c10d collective call (ProcessGroupNCCL's enqueue: work
// object, events, stream waits), measured with PyTorch 2.11 on an H100
// host: all_gather_into_tensor 50 us, reduce_scatter_tensor 77 us,
// all_reduce 32 us per call (validate/reference/h100_torch.json,
// "dispatch"). pytorch/pytorch#138773 reports 89-131 us with PyTorch 2.4.
constexpr double kC10dCallS = 50e-6;

// DeepSpeed ZeRO-3's per-fetch host work before the call (hooks, the
// partition bookkeeping, the flat buffer's torch.cat): "pre_launch
// typically takes 130us" per parameter all-gather on A100
// (deepspeedai/DeepSpeed#1069, 2021). The only published figure; the code
// has been reworked since, so it is an estimate.
constexpr double kDeepSpeedFetchS = 130e-6;

// DeepSpeed 0.19.6, deepspeed/runtime/zero/config.py (commit edaa722):
// sizes count elements.
Execution DeepSpeed(int stage) {
  Execution e;
  e.set_gather_unit(SUBMODULE);  // ZeRO-3 hooks fetch each module's own
                                 // parameters (partitioned_param_coordinator)
  e.set_prefetch_bucket_elements(
      50'000'000);                         // stage3_prefetch_bucket_size 5e7
  e.set_max_live_elements(1'000'000'000);  // stage3_max_live_parameters 1e9
  e.set_persistence_threshold(
      100'000);             // stage3_param_persistence_threshold 1e5
  e.set_prefetch_units(0);  // prefetching is the bucket's
  e.set_forward_prefetch(true);
  e.set_max_gathered_units(0);                // no unit count limit
  e.set_reduce_bucket_elements(500'000'000);  // reduce_bucket_size 5e8
  // overlap_comm: None means "stage == 3" (config.py L383-385).
  e.set_overlap_comm(stage == 3);
  // Stage 1 reduces only at the accumulation boundary
  // (stage_1_and_2.py L1767-1769); stages 2 and 3 after every micro-batch
  // (engine.py L2902).
  e.set_reduce_every_micro_batch(stage >= 2);
  // Stages 1 and 2 all-reduce each bucket whole and copy out their slices
  // (use_multi_rank_bucket_allreduce, default True); stage 3 reduce-scatters.
  e.set_all_reduce_buckets(stage < 3);
  e.set_launch_overhead_s(kC10dCallS);
  e.set_fetch_overhead_s(stage == 3 ? kDeepSpeedFetchS : 0);
  // Stage 3 synchronizes the reduce stream at the end of every backward
  // (stage3.py L1357-1364).
  e.set_sync_after_backward(stage == 3);
  // At most 2 fetch events outstanding before the host blocks
  // (__max_ongoing_fetch_events, partitioned_param_coordinator.py L140).
  e.set_max_inflight_fetches(stage == 3 ? 2 : 0);
  // Stages 1-2 rebuild parameters after the step with one
  // all_gather_into_tensor of the whole flat group (runtime/utils.py
  // L1005-1018; allgather_bucket_size no longer splits it).
  e.set_rebuild_per_layer(false);
  e.set_offload_optimizer(false);  // offload_optimizer.device "none"
  // Every step, whatever gradient_clipping says: the norm of each gradient
  // tensor of the partition as .double() (a Python loop), summed and
  // all-reduced over the data-parallel group, then the fp32 partition
  // multiplied by 1 / (loss scale x clip) (stage_1_and_2.py step(),
  // get_grad_norm_direct, unscale_and_clip_grads; stage3.py the same).
  e.set_grad_norm(PER_TENSOR_FP64_NORM);
  // Stages 1-2 check the gradients for inf and NaN before that, in bf16
  // too: bf16.check_grad_overflow defaults to true (precision_config.py;
  // engine.py _configure_zero_optimizer passes it). Stage 3 checks only
  // in fp16 (stage3.py _overflow_check_and_loss_scale_update).
  e.set_overflow_check(stage < 3);
  e.set_grad_fp32(false);  // bf16 gradients (communication_data_type unset)
  e.set_hold_params_through_step(false);
  e.set_reduce_bucket_elements_per_rank(0);
  e.set_pipeline_scatter_gather(false);
  return e;
}

// PyTorch FSDP1 (torch.distributed.fsdp, FullyShardedDataParallel):
// one flat parameter per wrapped unit (a transformer block under the usual
// auto-wrap policy), one all-gather and one reduce-scatter per unit.
Execution Fsdp() {
  Execution e;
  e.set_gather_unit(LAYER);
  e.set_prefetch_bucket_elements(0);
  e.set_max_live_elements(0);
  e.set_persistence_threshold(0);  // flat parameters: everything sharded
  // backward_prefetch=BACKWARD_PRE, forward_prefetch=False,
  // backward_prefetch_limit = 1.
  e.set_prefetch_units(1);
  e.set_forward_prefetch(false);
  // limit_all_gathers=True: _max_num_inflight_all_gathers = 2
  // (_limiter_utils.py), so two unsharded units at most.
  e.set_max_gathered_units(2);
  e.set_reduce_bucket_elements(0);  // one reduce-scatter per unit
  e.set_overlap_comm(true);         // the post-backward stream
  // Without no_sync() every backward reduce-scatters (and HSDP
  // all-reduces: _reduce_grad).
  e.set_reduce_every_micro_batch(true);
  e.set_all_reduce_buckets(false);
  e.set_launch_overhead_s(kC10dCallS);
  e.set_fetch_overhead_s(0);  // hooks' own time not measured: left out
  e.set_sync_after_backward(false);
  e.set_max_inflight_fetches(0);
  e.set_rebuild_per_layer(true);
  e.set_offload_optimizer(false);
  // optimizer.step() runs nothing before the update unless the training
  // loop calls clip_grad_norm_ (scenario execution.grad_norm: FOREACH_NORM;
  // torchtitan's training.max_norm sets it).
  e.set_grad_norm(NO_GRAD_NORM);
  // In bf16 PyTorch runs no GradScaler, so nothing checks for overflow.
  e.set_overflow_check(false);
  e.set_grad_fp32(false);  // gradients in the parameters' bf16
  e.set_hold_params_through_step(false);
  e.set_reduce_bucket_elements_per_rank(0);
  e.set_pipeline_scatter_gather(false);
  return e;
}

// PyTorch DDP: gradients all-reduced in buckets of bucket_cap_mb = 25 MiB
// (12.5 Mi bf16 elements) on its own stream, after the last micro-batch
// (no_sync() on the others, as gradient accumulation is run with DDP).
Execution Ddp() {
  Execution e = Fsdp();
  // Gradient hooks per parameter; a small one (a norm's) shares the next
  // one's bucket, never fills one alone.
  e.set_gather_unit(SUBMODULE);
  e.set_persistence_threshold(100'000);
  e.set_max_gathered_units(0);
  e.set_prefetch_units(0);
  e.set_reduce_bucket_elements(25 * 1024 * 1024 / 2);
  e.set_reduce_every_micro_batch(false);
  e.set_all_reduce_buckets(true);
  return e;
}

// PaRO's paper: layer-wise gathers with the next layer prefetched,
// reduce-scatters per layer overlapping backward (docs/strategies.md §3). Its
// code is not public; its calls are c10d's.
Execution Paro() {
  Execution e = Fsdp();
  e.set_forward_prefetch(true);  // "prefetch of the next layer's parameters"
  return e;
}

// InternEvo (Lins' framework): parameters fetched per module with the next
// one prefetched; gradients reduced in buckets of reduce_bucket_size =
// 512 Mi elements with overlap_sync_grad (InternEvo configs/7B_sft.py).
Execution InternEvo() {
  Execution e = Fsdp();
  e.set_gather_unit(SUBMODULE);
  e.set_forward_prefetch(true);
  e.set_reduce_bucket_elements(512 * 1024 * 1024);
  // Its norm is taken bucket by bucket as each is reduced, beside backward
  // (hybrid_zero_optim.py _compute_norm_with_stage): not on the path, and
  // left out (NO_GRAD_NORM, from Fsdp()).
  return e;
}

// Megatron-LM's DistributedDataParallel (megatron/core/distributed/,
// NVIDIA/Megatron-LM d98e8a6), with or without the distributed optimizer
// (the strategy's factors say which), at pretrain_gpt.py's defaults:
// every parameter's gradient in one contiguous buffer, in fp32 under bf16
// (validate_args sets accumulate_allreduce_grads_in_fp32 with --bf16 and
// the default --main-grads-dtype fp32; training.py passes it as
// grad_reduce_in_fp32). Without --overlap-grad-reduce the buffer is one
// bucket (distributed_data_parallel.py: bucket_size None when
// overlap_grad_reduce is False), reduced after the last micro-batch's
// backward (no_sync on the others; finalize_model_grads) by a blocking call
// on the compute stream (param_and_grad_buffer.py start_grad_sync:
// async_op = overlap_grad_reduce): reduce-scattered onto the optimizer's
// shards with the distributed optimizer, all-reduced without. Without
// --overlap-param-gather the updated bf16 parameters are all-gathered in
// one call after the step (distrib_optimizer.py: start_param_sync when not
// overlap_param_gather). --clip-grad defaults to 1.0: the norm over the
// fp32 main gradients every step (clip_grads.py, multi_tensor_l2norm).
Execution Megatron() {
  Execution e = Fsdp();
  e.set_gather_unit(LAYER);
  e.set_prefetch_units(0);
  e.set_max_gathered_units(0);
  e.set_reduce_bucket_elements(limits::kMaxElements);  // one bucket
  e.set_overlap_comm(false);
  e.set_reduce_every_micro_batch(false);
  e.set_all_reduce_buckets(false);
  e.set_rebuild_per_layer(false);
  e.set_grad_norm(FOREACH_NORM);
  e.set_grad_fp32(true);
  // Megatron-Core's p2p_communication.py sends the whole boundary.
  e.set_pipeline_scatter_gather(false);
  return e;
}

int ZeroStage(const Strategy& s) {
  if (FactorSize(s.p()) > 1) return 3;
  if (FactorSize(s.g()) > 1) return 2;
  return 1;
}

}  // namespace

const char* FrameworkName(Framework f) {
  switch (f) {
    case DEEPSPEED:
      return "DeepSpeed";
    case FSDP:
      return "FSDP";
    case TORCH_DDP:
      return "DDP";
    case PARO_PAPER:
      return "PaRO";
    case INTERNEVO:
      return "InternEvo";
    case MEGATRON:
      return "Megatron-LM";
    default:
      return "unknown";
  }
}

absl::Status ResolveExecution(const Execution& o, int64_t hidden, Strategy* s) {
  const Framework framework = s->execution().framework();
  Execution e;
  switch (framework) {
    case DEEPSPEED:
      e = DeepSpeed(ZeroStage(*s));
      break;
    case FSDP:
      e = Fsdp();
      break;
    case TORCH_DDP:
      e = Ddp();
      break;
    case PARO_PAPER:
      e = Paro();
      break;
    case INTERNEVO:
      e = InternEvo();
      break;
    case MEGATRON:
      e = Megatron();
      break;
    default:
      return absl::InternalError(
          absl::StrCat("strategy \"", s->name(), "\" has no framework"));
  }
  // What the strategy itself carries (a DeepSpeed config's keys), then the
  // scenario's overrides.
  e.MergeFrom(s->execution());
  for (const std::string& key : s->execution().hf_auto()) {
    if (key == "reduce_bucket_size") {
      e.set_reduce_bucket_elements(hidden * hidden);
    } else if (key == "stage3_prefetch_bucket_size") {
      e.set_prefetch_bucket_elements(
          static_cast<int64_t>(0.9 * hidden * hidden));
    } else if (key == "stage3_param_persistence_threshold") {
      e.set_persistence_threshold(10 * hidden);
    }
  }
  e.clear_hf_auto();
  e.MergeFrom(o);
  e.set_framework(framework);
  if (o.gather_unit() != GATHER_UNIT_UNSPECIFIED)
    e.set_gather_unit(o.gather_unit());
  using limits::kMaxElements;
  using limits::kMaxLatencyS;
  FieldCheck c("", "execution.");
  c.Count("prefetch_bucket_elements", e.prefetch_bucket_elements(), 0,
          kMaxElements)
      .Count("max_live_elements", e.max_live_elements(), 0, kMaxElements)
      .Count("persistence_threshold", e.persistence_threshold(), 0,
             kMaxElements)
      .Count("reduce_bucket_elements", e.reduce_bucket_elements(), 0,
             kMaxElements)
      .Count("reduce_bucket_elements_per_rank",
             e.reduce_bucket_elements_per_rank(), 0, kMaxElements)
      // Units: at most one per layer, plus the embedding and the head.
      .Count("prefetch_units", e.prefetch_units(), 0, limits::kMaxLayers + 2)
      .Count("max_gathered_units", e.max_gathered_units(), 0,
             limits::kMaxLayers + 2)
      .Rule("max_gathered_units", e.max_gathered_units() != 1,
            "must be 0 (no limit) or >= 2: the unit computing and the one "
            "being gathered")
      .Count("max_inflight_fetches", e.max_inflight_fetches(), 0,
             limits::kMaxLayers + 2)
      .Real("launch_overhead_s", e.launch_overhead_s(), 0, kMaxLatencyS)
      .Real("fetch_overhead_s", e.fetch_overhead_s(), 0, kMaxLatencyS)
      .Rule("offload_optimizer",
            !e.offload_optimizer() || framework == DEEPSPEED,
            absl::StrCat("ZeRO-Offload is DeepSpeed's; ",
                         FrameworkName(framework),
                         " does not offload the optimizer this way"))
      .Rule("offload_optimizer",
            !e.offload_optimizer() || !s->has_deepspeed_stage() ||
                s->deepspeed_stage() > 0,
            "needs ZeRO stage 1, 2 or 3: the DeepSpeed config's stage 0 "
            "builds no ZeRO optimizer to offload");
  if (!c.ok()) return c.status();
  *s->mutable_execution() = e;
  return absl::OkStatus();
}

}  // namespace shardsim

// The strategies `shardsim plan` searches: every sharding of the named
// systems and every per-state triple Lins' rule allows on a mesh.
#ifndef SHARDSIM_SIM_SEARCH_SPACE_H_
#define SHARDSIM_SIM_SEARCH_SPACE_H_

#include <set>
#include <string>
#include <vector>

#include "sim/base/group.h"
#include "sim/scenario/scenario.h"
#include "sim/schema/results.pb.h"
#include "sim/schema/schedule.pb.h"
#include "sim/strategy/strategy.h"

namespace shardsim {

// Factors a state may be sharded over on `mesh`, smallest first: intra x 1
// for every divisor of the node, then a whole node x inter for every
// divisor of the node count (Lins: a shard that spans nodes fills them).
std::vector<std::string> ShardFactors(const Mesh& mesh);

// Every strategy spec valid on `mesh`, each once, in this order: the named
// presets (NamedStrategies), every PaRO code paro-XYZ, then every
// lins:p=..:g=..:os=.. triple. Validity is ParseStrategy's: Lins'
// dependency rule (s_p <= s_g <= s_os on both axes, s_g in {s_p, s_os})
// is not written here again.
std::vector<std::string> CandidateSpecs(const Mesh& mesh);

// The specs of `base` (parsed: `strategy`) with every choice of algorithm
// (AlgorithmChoices) for each group kind in `kinds`, `base` itself first
// with its own choices (AlgorithmOf); the others add @KIND=ALGO for each
// kind where they differ from it. SHARP only where the platform has it
// (`sharp`).
std::vector<std::string> AlgorithmVariants(const std::string& base,
                                           const Strategy& strategy,
                                           const std::set<GroupKind>& kinds,
                                           bool sharp);

// The settings `plan` runs each candidate spec with on `gpus` GPUs, the
// scenario's own first. Activation recomputation on and off. Where the
// scenario fixes global_batch_tokens, every micro-batch size that divides
// the sequences each GPU runs per step, the scenario's first and then
// smallest first, each with the micro-batch count that follows; those
// CheckGpuCount refuses (too many micro-batches to hold, a count the
// interleaved schedule cannot run) are left out. Otherwise the scenario's
// micro-batch size and count alone. The first is the scenario's own only
// where CheckGpuCount(job, gpus) holds (as it does for a job loaded).
std::vector<SearchSettings> SettingsChoices(const Job& job, int gpus);

// The same for each layout of `layouts` in turn (SearchSettings.
// parallelism set): the micro-batch counts follow from each layout's
// data-parallel replicas.
std::vector<SearchSettings> SettingsChoices(
    const Job& job, int gpus, const std::vector<Parallelism>& layouts);

// The parallel layouts `plan --search-parallelism` tries on `gpus` GPUs,
// the scenario's own first: tensor parallelism over 1, 2, 4, ... GPUs of a
// node, pipelines of every stage count up to 16 that splits the model's
// blocks evenly, each 1F1B and, where the blocks split over twice as many
// chunks, interleaved with 2 chunks a stage; context parallelism over 1,
// 2, 4 or 8 GPUs; sequence parallelism as the scenario gives it. Only
// layouts the scenario's checks accept (ValidateScenario: cp needs flash
// attention) at some batch setting (SettingsChoices) are listed.
std::vector<Parallelism> LayoutChoices(const Job& job, int gpus);

// The execution knobs `plan` tries for `strategy`'s framework, as the
// overrides each choice sets, the framework's defaults (no override)
// first: DeepSpeed's reduce bucket and, where parameters are sharded, its
// prefetch bucket, each at its default or at HF Trainer's "auto" value
// from the model's `hidden` size (h^2, 0.9 h^2), and both; FSDP's
// prefetch as BACKWARD_PRE (default), none, or forward too. DDP, PaRO
// and InternEvo run as given. A knob the strategy itself (a DeepSpeed
// config's keys) or `fixed` (the scenario's execution) sets is not varied.
std::vector<Execution> KnobChoices(const Strategy& strategy, int64_t hidden,
                                   const Execution& fixed);

// Deployable points: those a mainstream framework runs as configured, so
// that a user can take the row to a cluster today (ResultRow.deployable,
// `plan --deployable`). A point is deployable when
// - its strategy is one such a framework offers (DeployableFramework):
//   DeepSpeed's ZeRO stages 1-3 (zero_optimization.stage), MiCS
//   (mics_shard_size, mics_hierarchical_params_gather) and ZeRO++
//   (zero_hpz_partition_size, zero_quantized_weights,
//   zero_quantized_gradients), from the DeepSpeed config documentation
//   (deepspeed.ai/docs/config-json); PyTorch DDP and FSDP's sharding
//   strategies FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD and
//   _HYBRID_SHARD_ZERO2 (torch.distributed.fsdp.ShardingStrategy). PaRO
//   (its own schedule, framework PARO_PAPER) and Lins' triples (INTERNEVO,
//   Lins' own fork) are research systems. Megatron-LM's distributed
//   optimizer would count too, but the space (CandidateSpecs) has no spec
//   for it;
// - its knobs are that framework's: KnobChoices varies only the knobs each
//   framework exposes (DeepSpeed's reduce_bucket_size and
//   stage3_prefetch_bucket_size, FSDP's backward_prefetch and
//   forward_prefetch), and micro-batch size and activation recomputation
//   are settings of all of them, so every setting qualifies;
// - every collective runs an algorithm NCCL runs for its op (NCCL's
//   src/device/all_reduce.h, all_gather.h, reduce_scatter.h,
//   broadcast.h; NCCL_ALGO in src/include/nccl_common.h: Ring, Tree,
//   CollnetDirect, CollnetChain, NVLS, NVLSTree, PAT): RING for every op;
//   TREE for ALL_REDUCE only; SHARP (CollNet with SHARP switches, NVLS)
//   for ALL_REDUCE, ALL_GATHER and REDUCE_SCATTER, and only where the
//   platform has it (AlgorithmVariants offers it nowhere else). HRING,
//   TORUS2D, HORING and DIRECT are not NCCL algorithms - except where the
//   framework itself composes its calls so, which its preset's own
//   algorithm says: MiCS's hierarchical all-gather (TORUS2D, DeepSpeed's
//   mics_hierarchical_params_gather) and qgZ's all-to-all reduce-scatter
//   (DIRECT, DeepSpeed's all_to_all_quant_reduce over NCCL send/recv).
//   Only an algorithm a spec's @KIND=ALGO picks away from its preset's is
//   held to NCCL's list.
bool DeployableFramework(const Strategy& strategy);

// Whether the point of `schedule` is deployable (above): `base` is its
// spec without @KIND=ALGO, the schedule's calls carry the point's own
// algorithms (UseAlgorithms).
bool Deployable(const Strategy& base, const Schedule& schedule);

// `job` with `settings` in its scenario (its execution overrides merged
// into the scenario's).
Job JobWith(const Job& job, const SearchSettings& settings);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SEARCH_SPACE_H_

#include "sim/search/space.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "sim/schema/limits.h"
#include "sim/strategy/strategy.h"

namespace shardsim {

std::vector<std::string> ShardFactors(const Mesh& mesh) {
  std::vector<std::string> out;
  for (int intra = 1; intra <= mesh.gpus_per_node; ++intra) {
    if (mesh.gpus_per_node % intra == 0)
      out.push_back(absl::StrCat(intra, "x1"));
  }
  for (int inter = 2; inter <= mesh.nodes; ++inter) {
    if (mesh.nodes % inter == 0) {
      out.push_back(absl::StrCat(mesh.gpus_per_node, "x", inter));
    }
  }
  return out;
}

std::vector<std::string> CandidateSpecs(const Mesh& mesh) {
  std::vector<std::string> specs;
  std::set<std::string> seen;
  auto keep = [&](const std::string& spec) {
    if (!seen.insert(spec).second) return;
    if (ParseStrategy(spec, mesh).ok()) specs.push_back(spec);
  };
  for (const std::string& named : NamedStrategies()) keep(named);
  for (char p : {'N', 'I', 'G'}) {
    for (char g : {'N', 'I', 'G'}) {
      for (char os : {'N', 'I', 'G'}) {
        keep(absl::StrCat("paro-", std::string{p, g, os}));
      }
    }
  }
  const std::vector<std::string> factors = ShardFactors(mesh);
  for (const std::string& p : factors) {
    for (const std::string& g : factors) {
      for (const std::string& os : factors) {
        keep(absl::StrCat("lins:p=", p, ":g=", g, ":os=", os));
      }
    }
  }
  return specs;
}

std::vector<std::string> AlgorithmVariants(const std::string& base,
                                           const Strategy& strategy,
                                           const std::set<GroupKind>& kinds,
                                           bool sharp) {
  std::vector<std::string> specs = {base};
  for (GroupKind kind : kinds) {
    std::vector<std::string> more;
    for (Algorithm a : AlgorithmChoices(kind)) {
      if (a == AlgorithmOf(strategy, kind) || (a == SHARP && !sharp)) continue;
      for (const std::string& spec : specs) {
        more.push_back(absl::StrCat(spec, "@", GroupKindName(kind), "=",
                                    absl::AsciiStrToLower(Algorithm_Name(a))));
      }
    }
    specs.insert(specs.end(), more.begin(), more.end());
  }
  return specs;
}

std::vector<SearchSettings> SettingsChoices(const Job& job, int gpus) {
  const Scenario& s = job.scenario;
  std::vector<int64_t> sizes = {s.micro_batch_size()};
  if (s.global_batch_tokens() > 0) {
    // Sequences per data-parallel replica per step (whole: CheckGpuCount
    // holds), in micro-batches of at most kMaxTokensPerMicroBatch tokens.
    const Parallelism& l = s.parallelism();
    const int replicas =
        std::max(1, gpus / (std::max(1, l.tp()) * std::max(1, l.cp()) *
                            std::max(1, l.pp())));
    const int64_t sequences = s.global_batch_tokens() / replicas / s.seq_len();
    const int64_t largest = limits::kMaxTokensPerMicroBatch / s.seq_len();
    for (int64_t d = 1; d <= sequences && d <= largest; ++d) {
      if (sequences % d == 0 && d != s.micro_batch_size()) sizes.push_back(d);
    }
  }
  std::vector<SearchSettings> out;
  for (const int64_t size : sizes) {
    for (const bool recompute : {s.recompute(), !s.recompute()}) {
      SearchSettings p;
      p.set_micro_batch_size(static_cast<int32_t>(size));
      p.set_recompute(recompute);
      const Job at = JobWith(job, p);
      if (!CheckGpuCount(at, gpus).ok()) continue;
      p.set_micro_batches(ScenarioAt(at.scenario, gpus)->micro_batches());
      out.push_back(p);
    }
  }
  return out;
}

std::vector<SearchSettings> SettingsChoices(
    const Job& job, int gpus, const std::vector<Parallelism>& layouts) {
  std::vector<SearchSettings> out;
  for (const Parallelism& l : layouts) {
    Job at = job;
    *at.scenario.mutable_parallelism() = l;
    for (SearchSettings p : SettingsChoices(at, gpus)) {
      *p.mutable_parallelism() = l;
      out.push_back(std::move(p));
    }
  }
  return out;
}

std::vector<Parallelism> LayoutChoices(const Job& job, int gpus) {
  const Parallelism& own = job.scenario.parallelism();
  std::vector<Parallelism> out = {own};
  const int per_node = job.platform.gpus_per_node();
  const int blocks = job.model.layers();
  // A layout some batch setting runs: the scenario's own micro-batch size
  // may give a count its pipeline schedule refuses where others do not.
  auto accepted = [&](const Parallelism& l) {
    Job at = job;
    *at.scenario.mutable_parallelism() = l;
    return ValidateScenario(at.scenario, job.path).ok() &&
           !SettingsChoices(at, gpus).empty();
  };
  for (int tp = 1; tp <= per_node && tp <= gpus; tp *= 2) {
    // Context parallelism over up to 8 GPUs, where the scenario allows it
    // (flash attention, a sequence that splits: ValidateScenario).
    for (int cp = 1; cp <= 8 && tp * cp <= gpus; cp *= 2) {
      for (int pp = 1; pp <= 16 && tp * cp * pp <= gpus; ++pp) {
        if (blocks % pp != 0) continue;
        for (int vpp : {1, 2}) {
          if (vpp > 1 && (pp == 1 || blocks % (pp * vpp) != 0)) continue;
          // A size of 1 is left unset, as a scenario leaves it: one
          // layout, one name.
          Parallelism l = own;
          l.set_tp(tp > 1 ? tp : 0);
          l.set_cp(cp > 1 ? cp : 0);
          l.set_pp(pp > 1 ? pp : 0);
          l.set_vpp(vpp > 1 ? vpp : 0);
          l.clear_pipeline_schedule();
          l.clear_stage_layers();
          if (l.SerializeAsString() == own.SerializeAsString()) continue;
          if (accepted(l)) out.push_back(l);
        }
      }
    }
  }
  return out;
}

std::vector<Execution> KnobChoices(const Strategy& strategy, int64_t hidden,
                                   const Execution& fixed) {
  // Each knob's alternatives to the framework's default, as (field set on
  // an Execution) choices; a knob the strategy (a DeepSpeed config) or the
  // scenario sets is not varied.
  Execution given = strategy.execution();
  given.MergeFrom(fixed);
  std::vector<std::vector<Execution>> knobs;
  auto knob = [&](bool fixed_by_scenario, std::vector<Execution> choices) {
    if (!fixed_by_scenario) knobs.push_back(std::move(choices));
  };
  Execution e;
  switch (strategy.execution().framework()) {
    case DEEPSPEED:
      // HF Trainer's "auto" values (transformers/integrations/deepspeed.py):
      // reduce_bucket_size h^2, stage3_prefetch_bucket_size 0.9 h^2.
      e.set_reduce_bucket_elements(hidden * hidden);
      knob(given.has_reduce_bucket_elements(), {e});
      if (FactorSize(strategy.p()) > 1) {  // stage 3: parameters fetched
        e.Clear();
        e.set_prefetch_bucket_elements(
            static_cast<int64_t>(0.9 * hidden * hidden));
        knob(given.has_prefetch_bucket_elements(), {e});
      }
      break;
    case FSDP: {
      // backward_prefetch=None (no unit ahead), or forward_prefetch=True
      // beside the default BACKWARD_PRE (torch.distributed.fsdp docs).
      e.set_prefetch_units(0);
      Execution forward;
      forward.set_forward_prefetch(true);
      knob(given.has_prefetch_units() || given.has_forward_prefetch(),
           {e, forward});
      break;
    }
    default:  // DDP's bucket, PaRO's and InternEvo's schedules: as given
      break;
  }
  // Every combination: the defaults first, each knob's choices on top.
  std::vector<Execution> out = {Execution()};
  for (const std::vector<Execution>& choices : knobs) {
    const size_t n = out.size();
    for (const Execution& c : choices) {
      for (size_t i = 0; i < n; ++i) {
        Execution both = out[i];
        both.MergeFrom(c);
        out.push_back(both);
      }
    }
  }
  return out;
}

bool DeployableFramework(const Strategy& strategy) {
  switch (strategy.execution().framework()) {
    case DEEPSPEED:
    case FSDP:
    case TORCH_DDP:
    case MEGATRON:
      return true;
    default:  // PARO_PAPER, INTERNEVO
      return false;
  }
}

bool Deployable(const Strategy& base, const Schedule& schedule) {
  if (!DeployableFramework(base)) return false;
  for (const Op& op : schedule.ops()) {
    if (!op.has_collective()) continue;
    const CollectiveCall& c = op.collective();
    const Algorithm a = c.algorithm();
    // The framework's own composition (its preset's algorithm; a direct
    // call is never re-chosen: UseAlgorithms).
    if (a == DIRECT || a == AlgorithmFor(base, c.group())) continue;
    switch (a) {
      case RING:
        break;
      case TREE:
        if (c.op() != ALL_REDUCE) return false;
        break;
      case SHARP:
        if (c.op() == BROADCAST) return false;
        break;
      default:  // HRING, TORUS2D, HORING
        return false;
    }
  }
  return true;
}

Job JobWith(const Job& job, const SearchSettings& settings) {
  Job out = job;
  if (settings.has_parallelism()) {
    *out.scenario.mutable_parallelism() = settings.parallelism();
  }
  out.scenario.set_micro_batch_size(settings.micro_batch_size());
  out.scenario.set_recompute(settings.recompute());
  out.scenario.mutable_execution()->MergeFrom(settings.execution());
  return out;
}

}  // namespace shardsim

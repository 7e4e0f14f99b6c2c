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

std::vector<PlanSettings> SettingsChoices(const Job& job, int gpus) {
  const Scenario& s = job.scenario;
  std::vector<int64_t> sizes = {s.micro_batch_size()};
  if (s.global_batch_tokens() > 0) {
    // Sequences per GPU per step (whole: CheckGpuCount holds), in
    // micro-batches of at most kMaxTokensPerMicroBatch tokens.
    const int64_t sequences = s.global_batch_tokens() / gpus / s.seq_len();
    const int64_t largest = limits::kMaxTokensPerMicroBatch / s.seq_len();
    for (int64_t d = 1; d <= sequences && d <= largest; ++d) {
      if (sequences % d == 0 && d != s.micro_batch_size()) sizes.push_back(d);
    }
  }
  std::vector<PlanSettings> out;
  for (const int64_t size : sizes) {
    for (const bool recompute : {s.recompute(), !s.recompute()}) {
      PlanSettings p;
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

Job JobWith(const Job& job, const PlanSettings& settings) {
  Job out = job;
  out.scenario.set_micro_batch_size(settings.micro_batch_size());
  out.scenario.set_recompute(settings.recompute());
  return out;
}

}  // namespace shardsim

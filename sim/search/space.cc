#include "sim/search/space.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
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

}  // namespace shardsim

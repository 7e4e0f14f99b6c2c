#include "sim/strategy/strategy.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sim/base/did_you_mean.h"
#include "sim/strategy/deepspeed_config.h"

namespace shardsim {
namespace {

using Options = std::map<std::string, std::string>;

constexpr char kKnownSpecs[] =
    "ddp, zero1, zero2, zero3, "
    "fsdp:FULL_SHARD|SHARD_GRAD_OP|HYBRID_SHARD|_HYBRID_SHARD_ZERO2, "
    "mics[:shard_size=S][:hierarchical_params_gather=true|false], "
    "zeropp[:hpz=S][:qwz=true|false][:qgz=true|false], "
    "paro-XYZ (X, Y, Z in N, I, G for P, G, OS), "
    "lins:p=AxB:g=CxD:os=ExF, megatron:DDP|DISTRIBUTED_OPTIMIZER, or a "
    "DeepSpeed config *.json";

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(what);
}

// Prefixes an error with the spec it came from, so that a message read far
// from the command line still says which strategy is wrong.
absl::Status InSpec(absl::string_view spec, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("strategy \"", spec,
                                                  "\": ", status.message()));
}

// ---- factors and strategies ----

Factor MakeFactor(int intra, int inter) {
  Factor f;
  f.set_intra(intra);
  f.set_inter(inter);
  return f;
}

// PaRO's granularities: N (no sharding), I (one node), G (every GPU).
Factor NoShard() { return MakeFactor(1, 1); }
Factor NodeShard(const Mesh& mesh) { return MakeFactor(mesh.gpus_per_node, 1); }
Factor GlobalShard(const Mesh& mesh) {
  return MakeFactor(mesh.gpus_per_node, mesh.nodes);
}

Strategy MakeStrategy(const Factor& p, const Factor& g, const Factor& os,
                      Lowering lowering = PARO, Algorithm algorithm = RING,
                      Framework framework = DEEPSPEED) {
  Strategy s;
  s.mutable_execution()->set_framework(framework);
  *s.mutable_p() = p;
  *s.mutable_g() = g;
  *s.mutable_os() = os;
  s.set_lowering(lowering);
  s.set_algorithm(algorithm);
  return s;
}

bool SameFactor(const Factor& a, const Factor& b) {
  return a.intra() == b.intra() && a.inter() == b.inter();
}

// ---- option syntax: name:key=value:key=value ----

absl::StatusOr<Options> ParseOptions(absl::string_view system,
                                     const std::vector<std::string>& parts,
                                     const std::vector<std::string>& known) {
  Options options;
  for (const std::string& part : parts) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(part, absl::MaxSplits('=', 1));
    if (part.find('=') == std::string::npos || kv.first.empty()) {
      return Invalid(absl::StrCat("option \"", part, "\" of ", system,
                                  " is not key=value"));
    }
    if (std::find(known.begin(), known.end(), kv.first) == known.end()) {
      return Invalid(absl::StrCat("unknown option \"", kv.first, "\" for ",
                                  system,
                                  "; known: ", absl::StrJoin(known, ", ")));
    }
    if (!options.emplace(kv.first, kv.second).second) {
      return Invalid(absl::StrCat("option \"", kv.first, "\" of ", system,
                                  " given twice"));
    }
  }
  return options;
}

absl::StatusOr<bool> BoolOption(const Options& options, const std::string& key,
                                bool fallback) {
  auto it = options.find(key);
  if (it == options.end()) return fallback;
  if (it->second == "true") return true;
  if (it->second == "false") return false;
  return Invalid(
      absl::StrCat(key, "=", it->second, " is not a boolean (true or false)"));
}

absl::StatusOr<int> IntOption(const Options& options, const std::string& key,
                              int fallback) {
  auto it = options.find(key);
  if (it == options.end()) return fallback;
  int value = 0;
  if (!absl::SimpleAtoi(it->second, &value)) {
    return Invalid(absl::StrCat(key, "=", it->second, " is not an integer"));
  }
  return value;
}

// ---- the systems ----

// Systems that are a fixed point of the space and take no options.
absl::StatusOr<Strategy> PlainPreset(absl::string_view name, const Mesh& mesh) {
  const Factor n = NoShard(), g = GlobalShard(mesh);
  if (name == "ddp") return MakeStrategy(n, n, n, PARO, RING, TORCH_DDP);
  if (name == "zero1") return MakeStrategy(n, n, g);
  if (name == "zero2") return MakeStrategy(n, g, g);
  if (name == "zero3") return MakeStrategy(g, g, g);
  return absl::NotFoundError(name);
}

absl::StatusOr<Strategy> ParseFsdp(const std::vector<std::string>& parts,
                                   const Mesh& mesh) {
  constexpr char kModes[] =
      "FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD, _HYBRID_SHARD_ZERO2";
  if (parts.size() != 1) {
    return Invalid(absl::StrCat("fsdp takes one sharding strategy: ", kModes));
  }
  const std::string& mode = parts[0];
  const Factor i = NodeShard(mesh), g = GlobalShard(mesh);
  Strategy s;
  if (mode == "full_shard") {
    s = MakeStrategy(g, g, g, PARO, RING, FSDP);
  } else if (mode == "shard_grad_op") {
    // SHARD_GRAD_OP keeps parameters unsharded from the forward all-gather
    // through backward, but sharded outside a micro-batch. Modelled as P = G
    // (what memory holds at rest and what the forward all-gather moves) plus
    // keep_params_through_backward (no second gather in backward), not as
    // P = N, which would hide the per-micro-batch gather.
    s = MakeStrategy(g, g, g, PARO, RING, FSDP);
    s.set_keep_params_through_backward(true);
  } else if (mode == "hybrid_shard") {
    s = MakeStrategy(i, i, i, PARO, RING, FSDP);
  } else if (mode == "_hybrid_shard_zero2") {
    s = MakeStrategy(i, i, i, PARO, RING, FSDP);
    s.set_keep_params_through_backward(true);
  } else {
    return Invalid(absl::StrCat("unknown fsdp sharding strategy \"", mode,
                                "\"; known: ", kModes));
  }
  return s;
}

// Megatron-LM's data parallelism (execution.cc Megatron): its DDP keeps
// every state whole and all-reduces the gradient buffer; its distributed
// optimizer (--use-distributed-optimizer) shards the fp32 master weights
// and Adam's states over the data-parallel group, reduce-scatters the
// gradient buffer onto those shards and all-gathers the updated bf16
// parameters, while parameters and the gradient buffer stay whole on every
// GPU (distrib_optimizer.py; docs/source/api-guide/dist_optimizer.md:
// 6 + 12/d bytes a parameter with bf16 parameters and fp32 gradients).
absl::StatusOr<Strategy> ParseMegatron(const std::vector<std::string>& parts,
                                       const Mesh& mesh) {
  constexpr char kModes[] = "DDP, DISTRIBUTED_OPTIMIZER";
  if (parts.size() != 1) {
    return Invalid(absl::StrCat("megatron takes one mode: ", kModes));
  }
  const Factor n = NoShard(), g = GlobalShard(mesh);
  if (parts[0] == "ddp") return MakeStrategy(n, n, n, PARO, RING, MEGATRON);
  if (parts[0] == "distributed_optimizer") {
    return MakeStrategy(n, n, g, PARO, RING, MEGATRON);
  }
  return Invalid(absl::StrCat("unknown megatron mode \"", parts[0],
                              "\"; known: ", kModes));
}

// MiCS shards everything over a partition group of `size` GPUs: part of a
// node, or whole nodes (MiCS groups never split nodes unevenly).
absl::StatusOr<Factor> MicsFactor(int size, const Mesh& mesh) {
  const int m = mesh.gpus_per_node;
  if (size < 1) {
    return Invalid(absl::StrCat("shard_size ", size, " must be >= 1"));
  }
  if (size <= m) {
    if (m % size != 0) {
      return Invalid(absl::StrCat("shard_size ", size, " does not divide ", m,
                                  " GPUs per node"));
    }
    return MakeFactor(size, 1);
  }
  if (size % m != 0) {
    return Invalid(absl::StrCat("shard_size ", size,
                                " is neither at most nor a multiple of the ", m,
                                " GPUs per node"));
  }
  if (mesh.nodes % (size / m) != 0) {
    return Invalid(absl::StrCat("shard_size ", size, " spans ", size / m,
                                " nodes, which does not divide ", mesh.nodes,
                                " nodes"));
  }
  return MakeFactor(m, size / m);
}

Strategy MicsStrategy(const Factor& f, bool hierarchical_gather) {
  // MiCS' hierarchical all-gather is an intra phase then every GPU in its
  // own inter ring: the 2D-torus scheme.
  return MakeStrategy(f, f, f, PARO, hierarchical_gather ? TORUS2D : RING);
}

absl::StatusOr<Strategy> ParseMics(const std::vector<std::string>& parts,
                                   const Mesh& mesh) {
  absl::StatusOr<Options> options =
      ParseOptions("mics", parts, {"shard_size", "hierarchical_params_gather"});
  if (!options.ok()) return options.status();
  absl::StatusOr<int> size =
      IntOption(*options, "shard_size", mesh.gpus_per_node);
  if (!size.ok()) return size.status();
  absl::StatusOr<bool> hierarchical =
      BoolOption(*options, "hierarchical_params_gather", false);
  if (!hierarchical.ok()) return hierarchical.status();
  absl::StatusOr<Factor> f = MicsFactor(*size, mesh);
  if (!f.ok()) return f.status();
  return MicsStrategy(*f, *hierarchical);
}

// hpZ partition sizes 0 and 1 both mean "no secondary copy" (DeepSpeed's
// default is 1).
int SecondaryIntra(int hpz) { return hpz <= 1 ? 0 : hpz; }

absl::StatusOr<Strategy> ParseZeroPP(const std::vector<std::string>& parts,
                                     const Mesh& mesh) {
  absl::StatusOr<Options> options =
      ParseOptions("zeropp", parts, {"hpz", "qwz", "qgz"});
  if (!options.ok()) return options.status();
  const Factor g = GlobalShard(mesh);
  // Defaults follow the ZeRO++ paper (hpZ over a node, qwZ and qgZ on), but
  // only where they mean something: on one node a node-wide secondary copy
  // is the primary one again, and on one GPU there is nothing to quantize.
  // Options given explicitly are taken as written and validated.
  const bool sharded = FactorSize(g) > 1;
  const int default_hpz =
      FactorSize(g) > mesh.gpus_per_node ? mesh.gpus_per_node : 0;
  absl::StatusOr<int> hpz = IntOption(*options, "hpz", default_hpz);
  if (!hpz.ok()) return hpz.status();
  if (*hpz < 0) return Invalid(absl::StrCat("hpz=", *hpz, " must be >= 0"));
  absl::StatusOr<bool> qwz = BoolOption(*options, "qwz", sharded);
  if (!qwz.ok()) return qwz.status();
  absl::StatusOr<bool> qgz = BoolOption(*options, "qgz", sharded);
  if (!qgz.ok()) return qgz.status();
  Strategy s = MakeStrategy(g, g, g);
  s.set_secondary_params_intra(SecondaryIntra(*hpz));
  s.set_quantized_weights(*qwz);
  s.set_quantized_gradients(*qgz);
  return s;
}

absl::StatusOr<Strategy> ParsePaRO(absl::string_view code, const Mesh& mesh) {
  auto granularity = [&](char c, Factor* f) {
    switch (c) {
      case 'n':
        *f = NoShard();
        return true;
      case 'i':
        *f = NodeShard(mesh);
        return true;
      case 'g':
        *f = GlobalShard(mesh);
        return true;
      default:
        return false;
    }
  };
  Factor p, g, os;
  if (code.size() != 3 || !granularity(code[0], &p) ||
      !granularity(code[1], &g) || !granularity(code[2], &os)) {
    return Invalid(absl::StrCat("PaRO code \"", absl::AsciiStrToUpper(code),
                                "\" is not three of N, I, G (for P, G, OS)"));
  }
  // PaRO runs its global reduce-scatters and the NIG all-gather with HO-Ring.
  return MakeStrategy(p, g, os, PARO, HORING, PARO_PAPER);
}

absl::StatusOr<Factor> ParseFactor(const std::string& key,
                                   const std::string& text) {
  std::vector<std::string> sides = absl::StrSplit(text, 'x');
  int intra = 0, inter = 0;
  if (sides.size() != 2 || !absl::SimpleAtoi(sides[0], &intra) ||
      !absl::SimpleAtoi(sides[1], &inter)) {
    return Invalid(
        absl::StrCat(key, " factor \"", text, "\" is not AxB (intra x inter)"));
  }
  return MakeFactor(intra, inter);
}

absl::StatusOr<Strategy> ParseLins(const std::vector<std::string>& parts) {
  absl::StatusOr<Options> options =
      ParseOptions("lins", parts, {"p", "g", "os"});
  if (!options.ok()) return options.status();
  Factor factors[3];
  const char* keys[3] = {"p", "g", "os"};
  for (int k = 0; k < 3; ++k) {
    auto it = options->find(keys[k]);
    if (it == options->end()) {
      return Invalid(
          absl::StrCat("lins needs ", keys[k], "=AxB (all of p, g, os)"));
    }
    absl::StatusOr<Factor> f = ParseFactor(keys[k], it->second);
    if (!f.ok()) return f.status();
    factors[k] = *f;
  }
  return MakeStrategy(factors[0], factors[1], factors[2], LINS, RING,
                      INTERNEVO);
}

// ---- DeepSpeed configs (read by deepspeed_config.h) ----

absl::StatusOr<Strategy> FromZeroKeys(const DeepSpeedZero& k,
                                      const Mesh& mesh) {
  Strategy s;
  if (k.mics_shard_size > 0) {
    // DeepSpeed runs MiCS only as a ZeRO-3 variant.
    if (k.stage != 3) {
      return Invalid(absl::StrCat(
          "zero_optimization.mics_shard_size needs stage 3, got stage ",
          k.stage));
    }
    absl::StatusOr<Factor> f = MicsFactor(k.mics_shard_size, mesh);
    if (!f.ok()) {
      return Invalid(
          absl::StrCat("zero_optimization.mics_", f.status().message()));
    }
    s = MicsStrategy(*f, k.mics_hierarchical);
  } else {
    // The optimizers that offload are ZeRO's (stage_1_and_2.py, stage3.py):
    // at stage 0 DeepSpeed builds none, and the key would do nothing.
    if (k.stage == 0 && k.execution.offload_optimizer()) {
      return Invalid(
          "zero_optimization.offload_optimizer needs stage 1, 2 or 3, got "
          "stage 0");
    }
    // Stage 0 is plain data parallelism; stages 1-3 are the ZeRO presets.
    s = *PlainPreset(k.stage == 0 ? "ddp" : absl::StrCat("zero", k.stage),
                     mesh);
  }
  // hpZ and quantization are taken as written; ValidateStrategy rejects them
  // where P is not sharded rather than let them silently do nothing.
  s.set_secondary_params_intra(SecondaryIntra(k.hpz));
  s.set_quantized_weights(k.qwz);
  s.set_quantized_gradients(k.qgz);
  s.set_deepspeed_stage(k.stage);
  // DeepSpeed runs even stage 0 (plain data parallelism).
  *s.mutable_execution() = k.execution;
  s.mutable_execution()->set_framework(DEEPSPEED);
  return s;
}

absl::StatusOr<Strategy> ParseDeepSpeedConfig(absl::string_view spec,
                                              const Mesh& mesh,
                                              absl::string_view base_dir) {
  absl::StatusOr<DeepSpeedZero> keys = ReadDeepSpeedConfig(spec, base_dir);
  if (!keys.ok()) return keys.status();
  absl::StatusOr<Strategy> s = FromZeroKeys(*keys, mesh);
  if (!s.ok()) {
    return absl::Status(s.status().code(),
                        absl::StrCat("DeepSpeed config ", keys->path, ": ",
                                     s.status().message()));
  }
  return s;
}

// ---- dispatch ----

// The names a spec starts with, for "did you mean".
std::vector<std::string> SpecHeads() {
  std::vector<std::string> heads = {"ddp",    "zero1", "zero2",
                                    "zero3",  "fsdp",  "mics",
                                    "zeropp", "lins",  "megatron"};
  for (char p : {'N', 'I', 'G'}) {
    for (char g : {'N', 'I', 'G'}) {
      for (char os : {'N', 'I', 'G'}) {
        heads.push_back(absl::StrCat("paro-", std::string{p, g, os}));
      }
    }
  }
  return heads;
}

absl::StatusOr<Strategy> ParseSpec(absl::string_view spec, const Mesh& mesh,
                                   absl::string_view base_dir) {
  const absl::string_view trimmed = absl::StripAsciiWhitespace(spec);
  // A file path keeps its case; only names are case-insensitive.
  if (absl::EndsWithIgnoreCase(trimmed, ".json")) {
    return ParseDeepSpeedConfig(trimmed, mesh, base_dir);
  }
  const std::string lower = absl::AsciiStrToLower(trimmed);
  std::vector<std::string> parts = absl::StrSplit(lower, ':');
  const std::string head = parts[0];
  parts.erase(parts.begin());
  if (head == "fsdp") return ParseFsdp(parts, mesh);
  if (head == "mics") return ParseMics(parts, mesh);
  if (head == "zeropp") return ParseZeroPP(parts, mesh);
  if (head == "lins") return ParseLins(parts);
  if (head == "megatron") return ParseMegatron(parts, mesh);
  if (absl::StartsWith(head, "paro-")) {
    if (!parts.empty()) return Invalid("paro-XYZ takes no options");
    return ParsePaRO(absl::string_view(head).substr(5), mesh);
  }
  absl::StatusOr<Strategy> plain = PlainPreset(head, mesh);
  if (plain.ok() && !parts.empty()) {
    return Invalid(absl::StrCat(head, " takes no options"));
  }
  if (plain.ok()) return plain;
  return Invalid(absl::StrCat("unknown strategy", DidYouMean(head, SpecHeads()),
                              "; known: ", kKnownSpecs));
}

// ---- Lins' rule ----

absl::Status ValidateMesh(const Mesh& mesh) {
  if (mesh.gpus_per_node < 1 || mesh.nodes < 1) {
    return Invalid(absl::StrCat("mesh of ", mesh.nodes, " nodes x ",
                                mesh.gpus_per_node, " GPUs per node is empty"));
  }
  return absl::OkStatus();
}

absl::Status CheckFactor(absl::string_view what, const Factor& f,
                         const Mesh& mesh) {
  const int m = mesh.gpus_per_node;
  if (f.intra() < 1 || f.inter() < 1) {
    return Invalid(absl::StrCat(what, " factor ", FactorName(f),
                                " must be >= 1 on both axes"));
  }
  if (m % f.intra() != 0) {
    return Invalid(absl::StrCat(what, " intra factor ", f.intra(),
                                " does not divide ", m, " GPUs per node"));
  }
  if (mesh.nodes % f.inter() != 0) {
    return Invalid(absl::StrCat(what, " inter factor ", f.inter(),
                                " does not divide ", mesh.nodes, " nodes"));
  }
  // A shard group that spans nodes but only part of each would leave the
  // rest of the node replicating across nodes: more traffic, no less memory.
  if (f.inter() > 1 && f.intra() != m) {
    return Invalid(
        absl::StrCat("Lins' rule s^0 = R when s^1 > 1 broken: ", what, " = ",
                     FactorName(f), " spans ", f.inter(), " nodes but only ",
                     f.intra(), " of the ", m, " GPUs per node"));
  }
  return absl::OkStatus();
}

absl::Status OrderBroken(absl::string_view a, absl::string_view b,
                         absl::string_view axis, int va, int vb) {
  return Invalid(absl::StrCat("Lins' rule ", a, " <= ", b, " broken on the ",
                              axis, " axis: ", a, " = ", va, ", ", b, " = ",
                              vb));
}

// s_a <= s_b on both axes: sharding a later state less than an earlier one
// only adds traffic (e.g. gathering gradients the optimizer does not need).
absl::Status CheckOrder(absl::string_view a, const Factor& fa,
                        absl::string_view b, const Factor& fb) {
  if (fa.intra() > fb.intra()) {
    return OrderBroken(a, b, "intra", fa.intra(), fb.intra());
  }
  if (fa.inter() > fb.inter()) {
    return OrderBroken(a, b, "inter", fa.inter(), fb.inter());
  }
  return absl::OkStatus();
}

// Lins' lowering only knows two gradient scopes: reduced over the P shard
// group or over the OS shard group.
absl::Status CheckLinsGradient(const Strategy& s) {
  if (s.lowering() != LINS || SameFactor(s.g(), s.p()) ||
      SameFactor(s.g(), s.os())) {
    return absl::OkStatus();
  }
  return Invalid(absl::StrCat(
      "Lins' rule s_g in {s_p, s_os} broken: s_p = ", FactorName(s.p()),
      ", s_g = ", FactorName(s.g()), ", s_os = ", FactorName(s.os())));
}

absl::Status CheckSecondary(const Strategy& s, const Mesh& mesh) {
  const int sec = s.secondary_params_intra();
  if (sec == 0) return absl::OkStatus();
  if (sec < 0 || mesh.gpus_per_node % sec != 0) {
    return Invalid(absl::StrCat("hpZ secondary partition ", sec,
                                " (secondary_params_intra) does not divide ",
                                mesh.gpus_per_node, " GPUs per node"));
  }
  // The secondary copy only saves traffic if P is sharded more widely.
  if (FactorSize(s.p()) <= sec) {
    return Invalid(absl::StrCat(
        "hpZ secondary partition over ", sec,
        " GPUs needs P sharded over more: s_p = ", FactorName(s.p())));
  }
  return absl::OkStatus();
}

absl::Status CheckQuantized(const Strategy& s) {
  if (!s.quantized_weights() && !s.quantized_gradients()) {
    return absl::OkStatus();
  }
  if (s.lowering() == PARO && FactorSize(s.p()) > 1) return absl::OkStatus();
  std::vector<std::string> which;
  if (s.quantized_weights()) which.push_back("qwZ");
  if (s.quantized_gradients()) which.push_back("qgZ");
  return Invalid(
      absl::StrCat("ZeRO++ quantization (", absl::StrJoin(which, ", "),
                   ") needs lowering PARO and sharded P: lowering ",
                   Lowering_Name(s.lowering()), ", s_p = ", FactorName(s.p())));
}

absl::Status ValidateUnnamed(const Strategy& s, const Mesh& mesh) {
  if (absl::Status st = ValidateMesh(mesh); !st.ok()) return st;
  for (const auto& [what, f] :
       {std::pair<const char*, const Factor*>{"p", &s.p()},
        {"g", &s.g()},
        {"os", &s.os()}}) {
    if (absl::Status st = CheckFactor(what, *f, mesh); !st.ok()) return st;
  }
  if (absl::Status st = CheckOrder("s_p", s.p(), "s_g", s.g()); !st.ok()) {
    return st;
  }
  if (absl::Status st = CheckOrder("s_g", s.g(), "s_os", s.os()); !st.ok()) {
    return st;
  }
  if (absl::Status st = CheckLinsGradient(s); !st.ok()) return st;
  if (absl::Status st = CheckSecondary(s, mesh); !st.ok()) return st;
  return CheckQuantized(s);
}

// ---- algorithms by group kind ----

// "both=horing@intra=tree" onto `s`.
absl::Status ParseAlgorithms(absl::string_view list, Strategy* s) {
  std::map<GroupKind, Algorithm> chosen;
  for (absl::string_view item : absl::StrSplit(list, '@')) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(absl::AsciiStrToLower(absl::StripAsciiWhitespace(item)),
                       absl::MaxSplits('=', 1));
    std::optional<GroupKind> kind;
    for (GroupKind k :
         {GroupKind::kIntra, GroupKind::kInter, GroupKind::kBoth}) {
      if (kv.first == GroupKindName(k)) kind = k;
    }
    if (!kind) {
      return Invalid(absl::StrCat("\"", item,
                                  "\" after @ is not KIND=ALGORITHM with KIND "
                                  "intra, inter or both"));
    }
    const std::vector<Algorithm> choices = AlgorithmChoices(*kind);
    Algorithm a = ALGORITHM_UNSPECIFIED;
    if (!Algorithm_Parse(absl::AsciiStrToUpper(kv.second), &a) ||
        std::find(choices.begin(), choices.end(), a) == choices.end()) {
      return Invalid(absl::StrCat(
          "algorithm \"", kv.second, "\" for ", kv.first, " groups; known: ",
          absl::StrJoin(choices, ", ", [](std::string* out, Algorithm c) {
            out->append(absl::AsciiStrToLower(Algorithm_Name(c)));
          })));
    }
    if (!chosen.emplace(*kind, a).second) {
      return Invalid(absl::StrCat("@", kv.first, "= given twice"));
    }
  }
  for (const auto& [kind, a] : chosen) {
    switch (kind) {
      case GroupKind::kIntra:
        s->set_intra_algorithm(a);
        break;
      case GroupKind::kInter:
        s->set_inter_algorithm(a);
        break;
      case GroupKind::kBoth:
        s->set_algorithm(a);
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace

GroupKind KindOf(const Group& group) {
  if (group.inter_size() <= 1) return GroupKind::kIntra;
  return group.intra_size() <= 1 ? GroupKind::kInter : GroupKind::kBoth;
}

const char* GroupKindName(GroupKind kind) {
  switch (kind) {
    case GroupKind::kIntra:
      return "intra";
    case GroupKind::kInter:
      return "inter";
    case GroupKind::kBoth:
      return "both";
  }
  return "?";
}

std::vector<Algorithm> AlgorithmChoices(GroupKind kind) {
  switch (kind) {
    case GroupKind::kIntra:
      return {RING, TREE};
    case GroupKind::kInter:
      return {RING, TREE, SHARP};
    case GroupKind::kBoth:
      return {RING, HRING, TORUS2D, HORING, TREE, SHARP};
  }
  return {RING};
}

Algorithm AlgorithmOf(const Strategy& strategy, GroupKind kind) {
  Algorithm a = ALGORITHM_UNSPECIFIED;
  switch (kind) {
    case GroupKind::kIntra:
      a = strategy.intra_algorithm();
      break;
    case GroupKind::kInter:
      a = strategy.inter_algorithm();
      break;
    case GroupKind::kBoth:
      a = strategy.algorithm();
      break;
  }
  return a == ALGORITHM_UNSPECIFIED ? RING : a;
}

absl::StatusOr<Strategy> ParseStrategy(absl::string_view spec, const Mesh& mesh,
                                       absl::string_view base_dir) {
  // Presets are sized from the mesh, so an empty one is rejected first.
  if (absl::Status st = ValidateMesh(mesh); !st.ok()) return InSpec(spec, st);
  const size_t at = spec.find('@');
  absl::StatusOr<Strategy> s = ParseSpec(spec.substr(0, at), mesh, base_dir);
  if (s.ok() && at != absl::string_view::npos) {
    if (absl::Status st = ParseAlgorithms(spec.substr(at + 1), &*s); !st.ok()) {
      s = st;
    }
  }
  if (!s.ok()) return InSpec(spec, s.status());
  s->set_name(std::string(spec));
  if (absl::Status st = ValidateStrategy(*s, mesh); !st.ok()) return st;
  return s;
}

absl::Status ValidateStrategy(const Strategy& strategy, const Mesh& mesh) {
  absl::Status st = ValidateUnnamed(strategy, mesh);
  if (st.ok() || strategy.name().empty()) return st;
  return InSpec(strategy.name(), st);
}

std::vector<std::string> NamedStrategies() {
  return {"ddp",
          "zero1",
          "zero2",
          "zero3",
          "fsdp:FULL_SHARD",
          "fsdp:SHARD_GRAD_OP",
          "fsdp:HYBRID_SHARD",
          "fsdp:_HYBRID_SHARD_ZERO2",
          "mics",
          "zeropp",
          "paro-IGG",
          "paro-IIG",
          "paro-NIG",
          "lins:p=1x1:g=1x1:os=8x1"};
}

std::string FactorName(const Factor& f) {
  return absl::StrCat(f.intra(), "x", f.inter());
}

}  // namespace shardsim

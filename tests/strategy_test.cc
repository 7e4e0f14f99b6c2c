#include "sim/strategy/strategy.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/strategy/execution.h"

namespace shardsim {
namespace {

using ::testing::HasSubstr;

const Mesh kMesh{8, 4};     // 4 nodes of 8: M = 8, g = 4, N = 32
const Mesh kOneNode{8, 1};  // I and G coincide

std::string Factors(const Strategy& s) {
  return absl::StrCat(FactorName(s.p()), " ", FactorName(s.g()), " ",
                      FactorName(s.os()));
}

// The error text of a spec that must not parse ("" if it parsed).
std::string ParseError(absl::string_view spec, const Mesh& mesh = kMesh,
                       absl::string_view base_dir = "") {
  absl::StatusOr<Strategy> s = ParseStrategy(spec, mesh, base_dir);
  return s.ok() ? "" : std::string(s.status().message());
}

Strategy MustParse(absl::string_view spec, const Mesh& mesh = kMesh,
                   absl::string_view base_dir = "") {
  absl::StatusOr<Strategy> s = ParseStrategy(spec, mesh, base_dir);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : Strategy();
}

// ---- presets
// ------------------------------------------------------------------

struct Expected {
  std::string spec;
  std::string factors;  // "s_p s_g s_os"
  Lowering lowering;
  Algorithm algorithm;
  bool keep_params = false;
  int secondary = 0;
  bool quantized = false;  // both qwZ and qgZ
};

// Every named system on 4 nodes of 8, written out from docs/strategies.md §1:
// N = 1x1, I = 8x1, G = 8x4.
const std::vector<Expected>& NamedOn8x4() {
  static const auto* table = new std::vector<Expected>{
      {"ddp", "1x1 1x1 1x1", PARO, RING},
      {"zero1", "1x1 1x1 8x4", PARO, RING},
      {"zero2", "1x1 8x4 8x4", PARO, RING},
      {"zero3", "8x4 8x4 8x4", PARO, RING},
      {"fsdp:FULL_SHARD", "8x4 8x4 8x4", PARO, RING},
      // P sharded at rest, kept whole through backward (see strategy.cc).
      {"fsdp:SHARD_GRAD_OP", "8x4 8x4 8x4", PARO, RING, true},
      {"fsdp:HYBRID_SHARD", "8x1 8x1 8x1", PARO, RING},
      {"fsdp:_HYBRID_SHARD_ZERO2", "8x1 8x1 8x1", PARO, RING, true},
      {"mics", "8x1 8x1 8x1", PARO, RING},
      {"zeropp", "8x4 8x4 8x4", PARO, RING, false, 8, true},
      {"paro-IGG", "8x1 8x4 8x4", PARO, HORING},
      {"paro-IIG", "8x1 8x1 8x4", PARO, HORING},
      {"paro-NIG", "1x1 8x1 8x4", PARO, HORING},
      {"lins:p=1x1:g=1x1:os=8x1", "1x1 1x1 8x1", LINS, RING},
  };
  return *table;
}

TEST(StrategyPresets, EveryNamedSystemOn8x4) {
  for (const Expected& e : NamedOn8x4()) {
    SCOPED_TRACE(e.spec);
    const Strategy s = MustParse(e.spec);
    EXPECT_EQ(s.name(), e.spec);
    EXPECT_EQ(Factors(s), e.factors);
    EXPECT_EQ(s.lowering(), e.lowering);
    EXPECT_EQ(s.algorithm(), e.algorithm);
    EXPECT_EQ(s.keep_params_through_backward(), e.keep_params);
    EXPECT_EQ(s.secondary_params_intra(), e.secondary);
    EXPECT_EQ(s.quantized_weights(), e.quantized);
    EXPECT_EQ(s.quantized_gradients(), e.quantized);
  }
}

TEST(StrategyPresets, NamedStrategiesAreTheTable) {
  std::vector<std::string> table;
  for (const Expected& e : NamedOn8x4()) table.push_back(e.spec);
  EXPECT_EQ(NamedStrategies(), table);
}

TEST(StrategyPresets, NamesAreCaseInsensitiveAndKeptAsWritten) {
  EXPECT_EQ(Factors(MustParse("ZeRO3")), "8x4 8x4 8x4");
  EXPECT_EQ(MustParse("ZeRO3").name(), "ZeRO3");
  EXPECT_EQ(Factors(MustParse("FSDP:hybrid_shard")), "8x1 8x1 8x1");
  EXPECT_EQ(Factors(MustParse("PaRO-igg")), "8x1 8x4 8x4");
  EXPECT_EQ(Factors(MustParse("MiCS:Shard_Size=16")), "8x2 8x2 8x2");
  EXPECT_EQ(Factors(MustParse("LINS:P=4X1:G=4X1:OS=8X1")), "4x1 4x1 8x1");
}

TEST(StrategyPresets, OneNodeMesh) {
  // Fewer GPUs than a node arrive as {N, 1}: I and G are both the node.
  EXPECT_EQ(Factors(MustParse("zero3", kOneNode)), "8x1 8x1 8x1");
  EXPECT_EQ(Factors(MustParse("zero2", Mesh{4, 1})), "1x1 4x1 4x1");
  EXPECT_EQ(Factors(MustParse("paro-IGG", kOneNode)), "8x1 8x1 8x1");
}

TEST(StrategyPresets, UnknownSpecsListTheKnownOnes) {
  // zero4 is one letter from each of zero1, zero2 and zero3.
  EXPECT_THAT(ParseError("zero4"),
              HasSubstr("strategy \"zero4\": unknown strategy (did you mean "
                        "\"zero1\", \"zero2\" or \"zero3\"?); known: ddp, "
                        "zero1, zero2, zero3, fsdp:"));
  EXPECT_THAT(ParseError("zero3:stage=2"),
              HasSubstr("strategy \"zero3:stage=2\": zero3 takes no options"));
  EXPECT_THAT(ParseError("fsdp:NO_SHARD"),
              HasSubstr("unknown fsdp sharding strategy \"no_shard\""));
  EXPECT_THAT(ParseError("fsdp"), HasSubstr("fsdp takes one sharding"));
  EXPECT_THAT(ParseError("paro-IGG:x=1"), HasSubstr("takes no options"));
  EXPECT_THAT(ParseError("paro-IGGG"),
              HasSubstr("PaRO code \"IGGG\" is not three of N, I, G"));
  EXPECT_THAT(ParseError("paro-IXG"), HasSubstr("PaRO code \"IXG\""));
}

TEST(StrategyPresets, EmptyMeshIsRejected) {
  EXPECT_THAT(ParseError("zero3", Mesh{0, 4}), HasSubstr("is empty"));
}

// ---- PaRO's code space
// ----------------------------------------------------------

TEST(StrategyParo, TenOfTheTwentySevenCodesPassTheRule) {
  // On 4 nodes of 8, N = 1x1, I = 8x1, G = 8x4. On each axis these are
  // ordered N <= I <= G (intra 1, 8, 8; inter 1, 1, 4), and on at least one
  // axis strictly, so s_p <= s_g <= s_os on both axes is exactly
  // "X <= Y <= Z in the order N < I < G". Every such factor divides its axis
  // and fills the node when it spans nodes, so nothing else rejects a code.
  // Non-decreasing sequences of length 3 over 3 ordered values: choose a
  // multiset of 3 from 3 = C(3 + 3 - 1, 3) = C(5, 3) = 10.
  const std::string letters = "NIG";
  std::vector<std::string> passed;
  for (char x : letters) {
    for (char y : letters) {
      for (char z : letters) {
        const std::string code = {x, y, z};
        if (ParseStrategy("paro-" + code, kMesh).ok()) passed.push_back(code);
      }
    }
  }
  EXPECT_EQ(passed.size(), 10u);
  EXPECT_EQ(passed,
            (std::vector<std::string>{"NNN", "NNI", "NNG", "NII", "NIG", "NGG",
                                      "III", "IIG", "IGG", "GGG"}));
}

TEST(StrategyParo, OnOneNodeFifteenCodesPass) {
  // With one node I = G = 8x1, so the order is N < {I, G} with I and G
  // equal: a code passes iff its N's come first. j leading N's leave 3 - j
  // letters free in {I, G}: 2^3 + 2^2 + 2^1 + 2^0 = 15.
  int passed = 0;
  for (char x : std::string("NIG")) {
    for (char y : std::string("NIG")) {
      for (char z : std::string("NIG")) {
        passed +=
            ParseStrategy(std::string("paro-") + x + y + z, kOneNode).ok();
      }
    }
  }
  EXPECT_EQ(passed, 15);
}

TEST(StrategyParo, InvalidCodesGiveTheRule) {
  EXPECT_THAT(ParseError("paro-GNN"),
              HasSubstr("strategy \"paro-GNN\": Lins' rule s_p <= s_g broken "
                        "on the intra axis: s_p = 8, s_g = 1"));
  // OS less sharded than G: only the inter axis tells G from I.
  EXPECT_THAT(ParseError("paro-NGI"),
              HasSubstr("Lins' rule s_g <= s_os broken on the inter axis: "
                        "s_g = 4, s_os = 1"));
}

// ---- Lins
// -----------------------------------------------------------------------

TEST(StrategyLins, ThePapersStrategies) {
  // Lins §VI: 7B 1, 1, 8x1; 13B 4x1, 4x1, 8x1; 30B 8x1 everywhere.
  EXPECT_EQ(Factors(MustParse("lins:p=1x1:g=1x1:os=8x1")), "1x1 1x1 8x1");
  EXPECT_EQ(Factors(MustParse("lins:p=4x1:g=4x1:os=8x1")), "4x1 4x1 8x1");
  EXPECT_EQ(Factors(MustParse("lins:p=8x1:g=8x1:os=8x1")), "8x1 8x1 8x1");
  // Keys in any order; s_g = s_os is the other allowed gradient scope.
  EXPECT_EQ(Factors(MustParse("lins:os=8x4:g=8x4:p=2x1")), "2x1 8x4 8x4");
  EXPECT_EQ(MustParse("lins:p=1x1:g=1x1:os=8x1").lowering(), LINS);
}

TEST(StrategyLins, SyntaxErrors) {
  EXPECT_THAT(ParseError("lins:p=1x1:g=1x1"), HasSubstr("lins needs os=AxB"));
  EXPECT_THAT(ParseError("lins:p=8:g=8x1:os=8x1"),
              HasSubstr("p factor \"8\" is not AxB (intra x inter)"));
  EXPECT_THAT(ParseError("lins:p=1x1:g=1x1:os=8x1:dp=32x1"),
              HasSubstr("unknown option \"dp\" for lins; known: p, g, os"));
  EXPECT_THAT(ParseError("lins:p=1x1:p=1x1:g=1x1:os=8x1"),
              HasSubstr("option \"p\" of lins given twice"));
  EXPECT_THAT(ParseError("lins:p:g=1x1:os=8x1"),
              HasSubstr("option \"p\" of lins is not key=value"));
}

TEST(StrategyLins, EachRuleViolation) {
  EXPECT_EQ(ParseError("lins:p=3x1:g=8x1:os=8x1"),
            "strategy \"lins:p=3x1:g=8x1:os=8x1\": p intra factor 3 does not "
            "divide 8 GPUs per node");
  EXPECT_EQ(ParseError("lins:p=1x1:g=8x1:os=8x3"),
            "strategy \"lins:p=1x1:g=8x1:os=8x3\": os inter factor 3 does not "
            "divide 4 nodes");
  EXPECT_THAT(ParseError("lins:p=0x1:g=8x1:os=8x1"),
              HasSubstr("p factor 0x1 must be >= 1 on both axes"));
  EXPECT_THAT(ParseError("lins:p=1x1:g=4x2:os=8x2"),
              HasSubstr("Lins' rule s^0 = R when s^1 > 1 broken: g = 4x2 "
                        "spans 2 nodes but only 4 of the 8 GPUs per node"));
  EXPECT_THAT(ParseError("lins:p=8x1:g=4x1:os=8x1"),
              HasSubstr("Lins' rule s_p <= s_g broken on the intra axis: "
                        "s_p = 8, s_g = 4"));
  EXPECT_THAT(ParseError("lins:p=1x1:g=8x1:os=4x1"),
              HasSubstr("Lins' rule s_g <= s_os broken on the intra axis: "
                        "s_g = 8, s_os = 4"));
  EXPECT_THAT(ParseError("lins:p=1x1:g=8x4:os=8x2"),
              HasSubstr("Lins' rule s_g <= s_os broken on the inter axis: "
                        "s_g = 4, s_os = 2"));
  EXPECT_THAT(ParseError("lins:p=1x1:g=4x1:os=8x1"),
              HasSubstr("Lins' rule s_g in {s_p, s_os} broken: s_p = 1x1, "
                        "s_g = 4x1, s_os = 8x1"));
}

TEST(StrategyLins, GradientScopeRuleOnlyForLinsLowering) {
  // The same factors lowered PaRO-style are fine (PaRO-NIG is one).
  Strategy s = MustParse("lins:p=1x1:g=1x1:os=8x1");
  s.mutable_g()->set_intra(4);
  EXPECT_FALSE(ValidateStrategy(s, kMesh).ok());
  s.set_lowering(PARO);
  EXPECT_TRUE(ValidateStrategy(s, kMesh).ok());
}

// ---- ValidateStrategy on hand-built strategies
// -----------------------------------

TEST(StrategyValidate, MessagesNameTheStrategyWhenItHasOne) {
  Strategy s = MustParse("zero1");
  s.mutable_p()->set_intra(8);  // 8x1 over gradients at 1x1
  EXPECT_EQ(std::string(ValidateStrategy(s, kMesh).message()),
            "strategy \"zero1\": Lins' rule s_p <= s_g broken on the intra "
            "axis: s_p = 8, s_g = 1");
  s.clear_name();
  EXPECT_EQ(std::string(ValidateStrategy(s, kMesh).message()),
            "Lins' rule s_p <= s_g broken on the intra axis: s_p = 8, "
            "s_g = 1");
}

TEST(StrategyValidate, UnsetFactorsAreRejected) {
  EXPECT_THAT(ValidateStrategy(Strategy(), kMesh).message(),
              HasSubstr("p factor 0x0 must be >= 1"));
}

TEST(StrategyValidate, QuantizationNeedsParoAndShardedParameters) {
  Strategy s = MustParse("zero2");
  s.set_quantized_weights(true);
  EXPECT_THAT(ValidateStrategy(s, kMesh).message(),
              HasSubstr("ZeRO++ quantization (qwZ) needs lowering PARO and "
                        "sharded P: lowering PARO, s_p = 1x1"));
  Strategy lins = MustParse("lins:p=8x1:g=8x1:os=8x1");
  lins.set_quantized_gradients(true);
  EXPECT_THAT(ValidateStrategy(lins, kMesh).message(),
              HasSubstr("(qgZ) needs lowering PARO and sharded P: lowering "
                        "LINS, s_p = 8x1"));
}

// ---- MiCS
// -------------------------------------------------------------------------

TEST(StrategyMics, ShardSizes) {
  EXPECT_EQ(Factors(MustParse("mics:shard_size=4")), "4x1 4x1 4x1");
  EXPECT_EQ(Factors(MustParse("mics:shard_size=8")), "8x1 8x1 8x1");
  EXPECT_EQ(Factors(MustParse("mics:shard_size=16")), "8x2 8x2 8x2");
  EXPECT_EQ(Factors(MustParse("mics:shard_size=32")), "8x4 8x4 8x4");
  EXPECT_EQ(ParseError("mics:shard_size=12"),
            "strategy \"mics:shard_size=12\": shard_size 12 is neither at "
            "most nor a multiple of the 8 GPUs per node");
  EXPECT_THAT(ParseError("mics:shard_size=3"),
              HasSubstr("shard_size 3 does not divide 8 GPUs per node"));
  EXPECT_THAT(ParseError("mics:shard_size=24"),
              HasSubstr("shard_size 24 spans 3 nodes, which does not divide "
                        "4 nodes"));
  EXPECT_THAT(ParseError("mics:shard_size=0"),
              HasSubstr("shard_size 0 must be >= 1"));
  EXPECT_THAT(ParseError("mics:shard_size=big"),
              HasSubstr("shard_size=big is not an integer"));
}

TEST(StrategyMics, HierarchicalGatherIsTheTorus) {
  EXPECT_EQ(MustParse("mics").algorithm(), RING);
  EXPECT_EQ(MustParse("mics:hierarchical_params_gather=false").algorithm(),
            RING);
  const Strategy s =
      MustParse("mics:shard_size=16:hierarchical_params_gather=true");
  EXPECT_EQ(Factors(s), "8x2 8x2 8x2");
  EXPECT_EQ(s.algorithm(), TORUS2D);
  EXPECT_THAT(ParseError("mics:hierarchical_params_gather=yes"),
              HasSubstr("hierarchical_params_gather=yes is not a boolean"));
}

// ---- ZeRO++
// -----------------------------------------------------------------------

TEST(StrategyZeroPP, Options) {
  Strategy s = MustParse("zeropp:hpz=4");
  EXPECT_EQ(s.secondary_params_intra(), 4);
  EXPECT_TRUE(s.quantized_weights());
  EXPECT_EQ(MustParse("zeropp:hpz=0").secondary_params_intra(), 0);
  EXPECT_EQ(MustParse("zeropp:hpz=1").secondary_params_intra(), 0);
  s = MustParse("zeropp:qwz=false:qgz=false");
  EXPECT_EQ(Factors(s), "8x4 8x4 8x4");
  EXPECT_EQ(s.secondary_params_intra(), 8);
  EXPECT_FALSE(s.quantized_weights());
  EXPECT_FALSE(s.quantized_gradients());
  s = MustParse("zeropp:qgz=false");
  EXPECT_TRUE(s.quantized_weights());
  EXPECT_FALSE(s.quantized_gradients());
}

TEST(StrategyZeroPP, BadOptions) {
  EXPECT_THAT(ParseError("zeropp:hpz=16"),
              HasSubstr("hpZ secondary partition 16 (secondary_params_intra) "
                        "does not divide 8 GPUs per node"));
  EXPECT_THAT(ParseError("zeropp:hpz=-2"), HasSubstr("hpz=-2 must be >= 0"));
  EXPECT_THAT(ParseError("zeropp:qwz=1"), HasSubstr("qwz=1 is not a boolean"));
  EXPECT_THAT(ParseError("zeropp:hpZ=8:qwz=true:qpz=true"),
              HasSubstr("unknown option \"qpz\" for zeropp; known: hpz, qwz, "
                        "qgz"));
}

TEST(StrategyZeroPP, OneNodeDropsTheSecondaryCopyByDefault) {
  // On one node the node-wide secondary copy would be the primary again.
  EXPECT_EQ(MustParse("zeropp", kOneNode).secondary_params_intra(), 0);
  EXPECT_THAT(ParseError("zeropp:hpz=8", kOneNode),
              HasSubstr("hpZ secondary partition over 8 GPUs needs P sharded "
                        "over more: s_p = 8x1"));
  EXPECT_EQ(MustParse("zeropp:hpz=4", kOneNode).secondary_params_intra(), 4);
  // On one GPU nothing is sharded, so nothing is quantized by default.
  EXPECT_FALSE(MustParse("zeropp", Mesh{1, 1}).quantized_weights());
}

// ---- DeepSpeed configs
// ----------------------------------------------------------

constexpr char kSourceDir[] = SHARDSIM_SOURCE_DIR;

std::string Fixture(absl::string_view name) {
  return absl::StrCat("tests/data/", name);
}

// @KIND=ALGO picks the algorithm of each group kind; kinds left out ring.
// On 4 nodes of 8: a node's 8 GPUs are intra, one GPU on each of the 4
// nodes is inter, all 32 are both.
TEST(StrategyAlgorithms, EachKindTakesItsOwn) {
  const Group node = MakeGroup(8, 1, 1, 8), column = MakeGroup(1, 1, 4, 8),
              all = MakeGroup(8, 1, 4, 8);
  EXPECT_EQ(KindOf(node), GroupKind::kIntra);
  EXPECT_EQ(KindOf(column), GroupKind::kInter);
  EXPECT_EQ(KindOf(all), GroupKind::kBoth);

  const Strategy plain = MustParse("zero3");
  for (const Group& g : {node, column, all}) {
    EXPECT_EQ(AlgorithmFor(plain, g), RING);
  }
  const Strategy s = MustParse("paro-NIG@both=horing@inter=Tree");
  EXPECT_EQ(s.name(), "paro-NIG@both=horing@inter=Tree");
  EXPECT_EQ(Factors(s), Factors(MustParse("paro-NIG")));
  EXPECT_EQ(AlgorithmFor(s, node), RING);
  EXPECT_EQ(AlgorithmFor(s, column), TREE);
  EXPECT_EQ(AlgorithmFor(s, all), HORING);
}

TEST(StrategyAlgorithms, ErrorsNameTheKindAndTheChoices) {
  EXPECT_THAT(ParseError("zero3@intra=horing"),
              HasSubstr("algorithm \"horing\" for intra groups; known: ring, "
                        "tree"));
  EXPECT_THAT(ParseError("zero3@inter=hring"),
              HasSubstr("known: ring, tree, sharp"));
  EXPECT_THAT(ParseError("zero3@both=ring@both=tree"),
              HasSubstr("@both= given twice"));
  EXPECT_THAT(ParseError("zero3@rail=ring"),
              HasSubstr("\"rail=ring\" after @ is not KIND=ALGORITHM"));
  EXPECT_THAT(ParseError("zero3@"), HasSubstr("after @ is not KIND=ALGORITHM"));
}

TEST(StrategyDeepSpeed, Stages) {
  EXPECT_EQ(
      Factors(MustParse(Fixture("ds_config_stage1.json"), kMesh, kSourceDir)),
      "1x1 1x1 8x4");
  EXPECT_EQ(
      Factors(MustParse(Fixture("ds_config_stage2.json"), kMesh, kSourceDir)),
      "1x1 8x4 8x4");
  const Strategy s3 =
      MustParse(Fixture("ds_config_stage3.json"), kMesh, kSourceDir);
  EXPECT_EQ(Factors(s3), "8x4 8x4 8x4");
  EXPECT_EQ(s3.name(), Fixture("ds_config_stage3.json"));
  EXPECT_EQ(s3.lowering(), PARO);
  EXPECT_EQ(s3.secondary_params_intra(), 0);
  EXPECT_FALSE(s3.quantized_weights());
}

TEST(StrategyDeepSpeed, ConfigSetsHowTheStepRuns) {
  // ds_config_stage3.json: overlap_comm true, stage3_param_persistence_
  // threshold 100000, stage3_prefetch_bucket_size "auto", which HF's
  // Trainer fills with 0.9 h^2: 0.9 x 4096^2 = 15,099,494 for LLaMA-7B.
  // The keys it leaves out take DeepSpeed's defaults (reduce_bucket_size
  // 5e8, stage3_max_live_parameters 1e9).
  Strategy s3 = MustParse(Fixture("ds_config_stage3.json"), kMesh, kSourceDir);
  ASSERT_TRUE(ResolveExecution({}, 4096, &s3).ok());
  const Execution& e = s3.execution();
  EXPECT_EQ(e.framework(), DEEPSPEED);
  EXPECT_EQ(e.gather_unit(), SUBMODULE);
  EXPECT_TRUE(e.overlap_comm());
  EXPECT_EQ(e.persistence_threshold(), 100'000);
  EXPECT_EQ(e.prefetch_bucket_elements(), 15'099'494);
  EXPECT_EQ(e.reduce_bucket_elements(), 500'000'000);
  EXPECT_EQ(e.max_live_elements(), 1'000'000'000);
  // A scenario's override wins over the file and the defaults.
  Strategy again =
      MustParse(Fixture("ds_config_stage3.json"), kMesh, kSourceDir);
  Execution o;
  o.set_prefetch_bucket_elements(7);
  ASSERT_TRUE(ResolveExecution(o, 4096, &again).ok());
  EXPECT_EQ(again.execution().prefetch_bucket_elements(), 7);
  // A negative one is refused, naming the field.
  o.set_prefetch_bucket_elements(-1);
  const absl::Status bad = ResolveExecution(o, 4096, &again);
  EXPECT_THAT(std::string(bad.message()),
              HasSubstr("execution.prefetch_bucket_elements"));
}

TEST(StrategyDeepSpeed, ZeroStagesTakeTheirDefaults) {
  // DeepSpeed 0.19: overlap_comm is stage == 3; stage 1 reduces only at
  // the accumulation boundary; stages 1-2 all-reduce their buckets.
  Strategy z1 = MustParse("zero1", kMesh, "");
  Strategy z2 = MustParse("zero2", kMesh, "");
  Strategy z3 = MustParse("zero3", kMesh, "");
  for (Strategy* s : {&z1, &z2, &z3})
    ASSERT_TRUE(ResolveExecution({}, 4096, s).ok());
  EXPECT_FALSE(z1.execution().overlap_comm());
  EXPECT_FALSE(z1.execution().reduce_every_micro_batch());
  EXPECT_TRUE(z1.execution().all_reduce_buckets());
  EXPECT_FALSE(z2.execution().overlap_comm());
  EXPECT_TRUE(z2.execution().reduce_every_micro_batch());
  EXPECT_TRUE(z3.execution().overlap_comm());
  EXPECT_FALSE(z3.execution().all_reduce_buckets());
  EXPECT_EQ(z3.execution().max_inflight_fetches(), 2);
  // FSDP: one unit a layer, two alive; PaRO and InternEvo prefetch forward.
  Strategy fsdp = MustParse("fsdp:FULL_SHARD", kMesh, "");
  ASSERT_TRUE(ResolveExecution({}, 4096, &fsdp).ok());
  EXPECT_EQ(fsdp.execution().gather_unit(), LAYER);
  EXPECT_EQ(fsdp.execution().max_gathered_units(), 2);
  EXPECT_FALSE(fsdp.execution().forward_prefetch());
}

TEST(StrategyDeepSpeed, AbsolutePathIgnoresBaseDir) {
  const std::string path =
      absl::StrCat(kSourceDir, "/", Fixture("ds_config_stage1.json"));
  EXPECT_EQ(Factors(MustParse(path, kMesh, "/nonexistent")), "1x1 1x1 8x4");
}

TEST(StrategyDeepSpeed, Mics) {
  const Strategy s =
      MustParse(Fixture("ds_config_mics.json"), kMesh, kSourceDir);
  EXPECT_EQ(Factors(s), "8x2 8x2 8x2");
  EXPECT_EQ(s.algorithm(), TORUS2D);
}

TEST(StrategyDeepSpeed, ZeroPP) {
  const Strategy s =
      MustParse(Fixture("ds_config_zeropp.json"), kMesh, kSourceDir);
  EXPECT_EQ(Factors(s), "8x4 8x4 8x4");
  EXPECT_EQ(s.secondary_params_intra(), 8);
  EXPECT_TRUE(s.quantized_weights());
  EXPECT_TRUE(s.quantized_gradients());
}

TEST(StrategyDeepSpeed, ErrorsNameTheFile) {
  const std::string dir = absl::StrCat(kSourceDir, "/tests/data/");
  std::string error =
      ParseError(Fixture("ds_config_malformed.json"), kMesh, kSourceDir);
  EXPECT_THAT(error, HasSubstr("strategy \"tests/data/ds_config_malformed."
                               "json\": DeepSpeed config "));
  EXPECT_THAT(error, HasSubstr(dir + "ds_config_malformed.json: not valid "
                                     "JSON"));

  error = ParseError(Fixture("ds_config_no_zero.json"), kMesh, kSourceDir);
  EXPECT_THAT(error, HasSubstr(dir + "ds_config_no_zero.json: no "
                                     "zero_optimization section"));

  error = ParseError(Fixture("ds_config_bad_type.json"), kMesh, kSourceDir);
  EXPECT_THAT(error, HasSubstr(dir + "ds_config_bad_type.json: "
                                     "zero_optimization.zero_quantized_"
                                     "weights must be true or false, got "
                                     "string \"yes\""));

  error = ParseError(Fixture("ds_config_stage4.json"), kMesh, kSourceDir);
  EXPECT_THAT(error, HasSubstr(dir + "ds_config_stage4.json: "
                                     "zero_optimization.stage must be 0, 1, "
                                     "2 or 3, got 4"));

  error = ParseError(Fixture("ds_config_missing.json"), kMesh, kSourceDir);
  EXPECT_THAT(error,
              HasSubstr(dir + "ds_config_missing.json: cannot open the file"));
}

}  // namespace
}  // namespace shardsim

// Tensor (Megatron-LM), sequence and context parallelism and selective
// recomputation: one GPU's parameters, FLOPs and activation bytes, and the
// tensor-parallel collectives the lowering puts inside each layer. Expected
// values are written from the matrix shapes and from Korthikanti et al.
// 2022 ("Reducing Activation Recomputation in Large Transformer Models").
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/base/group.h"
#include "sim/model/kernels.h"
#include "sim/model/model.h"
#include "sim/schedule/lower.h"
#include "sim/strategy/execution.h"
#include "sim/strategy/strategy.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

// GPT-style: 4h GELU MLP, multi-head attention, LayerNorm, biases on every
// linear layer, learned positions: the model Korthikanti et al. derive
// their activation formulas for, where they are exact.
constexpr int64_t kH = 1024;
constexpr int kHeads = 16;
constexpr int64_t kVocab = 51200;
constexpr int64_t kPositions = 1024;

Model Gpt(int layers = 2) {
  Model m;
  m.set_name("gpt-test");
  m.set_layers(layers);
  m.set_hidden(kH);
  m.set_heads(kHeads);
  m.set_ffn_hidden(4 * kH);
  m.set_vocab(kVocab);
  m.set_mlp(Model::GELU);
  m.set_norm(Model::LAYERNORM);
  m.set_linear_bias(true);
  m.set_learned_positions(kPositions);
  return m;
}

constexpr int64_t kB = 2;    // sequences per micro-batch
constexpr int64_t kS = 256;  // tokens per sequence

Batch Sharded(int tp, bool sp = false, int cp = 1) {
  Batch b = test::Sequences(kB, kS);
  b.tp = tp;
  b.sequence_parallel = sp;
  b.cp = cp;
  return b;
}

int64_t UnitParams(const Layer& layer) {
  int64_t n = 0;
  for (const Unit& u : layer.units) n += u.params;
  return n;
}

TEST(TensorParallel, BlockParamsPerGpuFollowTheMatrixShapes) {
  const int64_t h = kH;
  const int64_t t = 4;
  const Layer block = ModelLayers(Gpt(), Sharded(t))[1];
  // Column-parallel q, k, v: h/t output columns of h inputs, bias h/t.
  const int64_t qkv = 3 * (h / t * h + h / t);
  // Row-parallel o: h outputs of h/t input rows; its bias whole.
  const int64_t o = h * (h / t) + h;
  // fc1 column-parallel (4h/t columns and bias), fc2 row-parallel (4h/t
  // rows, bias h whole).
  const int64_t fc1 = 4 * h / t * h + 4 * h / t;
  const int64_t fc2 = h * (4 * h / t) + h;
  // Two LayerNorms, weight and bias of h each, whole on every GPU.
  const int64_t norms = 2 * 2 * h;
  EXPECT_EQ(block.params, qkv + o + fc1 + fc2 + norms);
  EXPECT_EQ(UnitParams(block), block.params);
}

TEST(TensorParallel, EmbeddingAndHeadSplitTheVocabulary) {
  const int t = 4;
  const std::vector<Layer> layers = ModelLayers(Gpt(), Sharded(t));
  // VocabParallelEmbedding keeps vocab/t rows; learned positions whole.
  EXPECT_EQ(layers.front().params, (kVocab / t + kPositions) * kH);
  // The final LayerNorm whole, the output layer's vocab/t rows (untied).
  EXPECT_EQ(layers.back().params, 2 * kH + kVocab / t * kH);
  EXPECT_EQ(UnitParams(layers.front()), layers.front().params);
  EXPECT_EQ(UnitParams(layers.back()), layers.back().params);
}

// LLaMA-style grouped-query attention, head_dim 64.
Model Gqa(int kv_heads) {
  Model m = Gpt();
  m.set_mlp(Model::SWIGLU);
  m.set_norm(Model::RMSNORM);
  m.set_linear_bias(false);
  m.set_learned_positions(0);
  m.set_ffn_hidden(2816);
  m.set_kv_heads(kv_heads);
  return m;
}

const Unit& UnitNamed(const Layer& layer, const std::string& name) {
  for (const Unit& u : layer.units) {
    if (u.name == name) return u;
  }
  ADD_FAILURE() << "no unit " << name;
  return layer.units.front();
}

const Attention& AttentionOf(const Layer& layer) {
  for (const Unit& u : layer.units) {
    for (const Kernel& k : u.forward) {
      if (k.has_attention()) return k.attention();
    }
  }
  ADD_FAILURE() << "no attention kernel";
  return Attention::default_instance();
}

TEST(TensorParallel, KvHeadsAreDividedWhenTheyAreAtLeastTp) {
  Batch batch = Sharded(4);
  batch.flash_attention = true;
  const Layer block = ModelLayers(Gqa(8), batch)[1];
  // 8 kv heads of 64 over 4 GPUs: 2 heads, 128 columns of k and of v.
  EXPECT_EQ(UnitNamed(block, "k_proj").params, 8 * 64 / 4 * kH);
  EXPECT_EQ(AttentionOf(block).heads(), kHeads / 4);
  EXPECT_EQ(AttentionOf(block).kv_heads(), 2);
  for (const Unit& u : block.units) {
    for (const UnitCollective& c : u.comms) EXPECT_NE(c.tensor, "qkv");
  }
}

TEST(TensorParallel, FewerKvHeadsThanTpKeepOneAndGatherTheProjection) {
  Batch batch = Sharded(4);
  batch.flash_attention = true;
  const Layer block = ModelLayers(Gqa(2), batch)[1];
  // Megatron (attention.py): num_query_groups < tp gives each rank one kv
  // head; the projection's columns still split evenly, 2*64/4 = 32 each of
  // k and v, and the whole projection is gathered before the heads are
  // picked out.
  EXPECT_EQ(UnitNamed(block, "k_proj").params, 2 * 64 / 4 * kH);
  EXPECT_EQ(AttentionOf(block).kv_heads(), 1);
  EXPECT_EQ(AttentionOf(block).heads(), kHeads / 4);
  // Gathered: T tokens x (h + 2 * 2 * 64) columns, bf16.
  const int64_t gathered = kB * kS * (kH + 2 * 2 * 64) * 2;
  int gathers = 0;
  for (const UnitCollective& c : UnitNamed(block, "v_proj").comms) {
    if (c.tensor != "qkv" && c.tensor != "qkv grad") continue;
    EXPECT_EQ(c.bytes, gathered);
    EXPECT_EQ(c.kind, c.backward ? REDUCE_SCATTER : ALL_GATHER);
    ++gathers;
  }
  EXPECT_EQ(gathers, 2);
}

// Korthikanti et al. 2022, eq. 2-5, one block on one GPU, bytes.
int64_t Sbh() { return kS * kB * kH; }
int64_t Scores() { return 5 * kHeads * kS * kS * kB; }  // 5*a*s^2*b

TEST(TensorParallel, ActivationsFollowKorthikanti) {
  const int64_t t = 4;
  const Model m = Gpt();
  // eq. 2, no tensor parallelism: sbh(34 + 5as/h).
  EXPECT_EQ(ModelLayers(m, Sharded(1))[1].activation_bytes,
            34 * Sbh() + Scores());
  // eq. 4, tensor parallel: sbh(10 + 24/t + 5as/(ht)).
  EXPECT_EQ(ModelLayers(m, Sharded(t))[1].activation_bytes,
            10 * Sbh() + 24 * Sbh() / t + Scores() / t);
  // eq. 5, with sequence parallelism: sbh(34/t + 5as/(ht)).
  EXPECT_EQ(ModelLayers(m, Sharded(t, true))[1].activation_bytes,
            34 * Sbh() / t + Scores() / t);
}

TEST(TensorParallel, SelectiveRecomputationDropsTheScores) {
  const int64_t t = 4;
  Batch batch = Sharded(t, true);
  batch.recompute_granularity = RECOMPUTE_SELECTIVE;
  const Layer block = ModelLayers(Gpt(), batch)[1];
  // Section 5 with tensor and sequence parallelism: 34sbh/t.
  EXPECT_EQ(block.activation_bytes, 34 * Sbh() / t);
  // The scores live again while the block's backward runs.
  EXPECT_EQ(block.backward_working_bytes, Scores() / t);
  // QK^T and AV again: 2 * 2bs^2h/t, causality not discounted.
  EXPECT_DOUBLE_EQ(block.recompute_flops,
                   2.0 * 2.0 * kB * kS * kS * kH / static_cast<double>(t));
  // The recomputation runs the core attention only: no projection.
  ASSERT_FALSE(block.recompute_kernels.empty());
  for (const Kernel& k : block.recompute_kernels) {
    EXPECT_EQ(k.name().find("proj"), std::string::npos) << k.name();
  }
}

TEST(TensorParallel, SelectiveRecomputationHasNothingToDoWithFlash) {
  Batch batch = Sharded(1);
  batch.flash_attention = true;
  batch.recompute_granularity = RECOMPUTE_SELECTIVE;
  const Layer block = ModelLayers(Gpt(), batch)[1];
  EXPECT_EQ(block.recompute_flops, 0.0);
  EXPECT_EQ(block.activation_bytes, 34 * Sbh());
}

TEST(TensorParallel, SelectiveLayerRecomputesEveryKthBlock) {
  Batch batch = Sharded(1);
  batch.recompute_granularity = RECOMPUTE_SELECTIVE_LAYER;
  batch.recompute_every_layers = 2;
  const std::vector<Layer> layers = ModelLayers(Gpt(4), batch);
  // torchtitan counts blocks from 1 and wraps every 2nd: blocks 1 and 3.
  for (int i = 0; i < 4; ++i) {
    const Layer& block = layers[1 + i];
    if (i % 2 == 1) {
      EXPECT_EQ(block.activation_bytes, 2 * Sbh()) << i;  // its bf16 input
      EXPECT_EQ(block.recompute_flops, block.forward_flops) << i;
    } else {
      EXPECT_EQ(block.activation_bytes, 34 * Sbh() + Scores()) << i;
      EXPECT_EQ(block.recompute_flops, 0.0) << i;
    }
  }
}

TEST(TensorParallel, ContextParallelAttendsAllKeysFromItsQueries) {
  Batch batch = Sharded(1, false, 2);
  batch.flash_attention = true;
  const Layer block = ModelLayers(Gpt(), batch)[1];
  // Its s/2 queries against its own s/2 keys, then against the s/2 the
  // ring brings (tests/context_parallel_test.cc).
  EXPECT_EQ(AttentionOf(block).seq(), kS / 2);
  EXPECT_EQ(AttentionOf(block).kv_seq(), 0);
  // Matmuls on half the tokens (12h^2 weights, 2 FLOPs each), attention
  // s/2 queries x s keys: half of everything.
  const Layer whole = ModelLayers(Gpt(), Sharded(1))[1];
  EXPECT_DOUBLE_EQ(block.forward_flops, whole.forward_flops / 2);
}

// ---- the collectives in the lowered step ----

// One step on 2 GPUs, tp 2 (dp 1: no strategy collectives).
Schedule Lower(const Model& m, const Batch& batch) {
  const Mesh mesh{2, 1};
  Scenario sc = test::Training(1, static_cast<int>(kS));
  sc.mutable_parallelism()->set_tp(batch.tp);
  sc.mutable_parallelism()->set_sequence_parallel(batch.sequence_parallel);
  absl::StatusOr<Strategy> st = ParseStrategy("ddp", Mesh{1, 1});
  EXPECT_TRUE(st.ok()) << st.status();
  EXPECT_TRUE(ResolveExecution(sc.execution(), 4096, &*st).ok());
  absl::StatusOr<OwnedSchedule> s =
      LowerStep(ModelLayers(m, batch), *st, mesh, sc);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? **s : Schedule();
}

// Collectives of `layer`, "OP PHASE" -> count; each checked to be over
// the 2 GPUs of the tensor-parallel group and of `bytes`.
std::map<std::string, int> Census(const Schedule& s, int layer, int64_t bytes) {
  std::map<std::string, int> n;
  for (const Op& op : s.ops()) {
    if (op.body_case() != Op::kCollective || op.layer() != layer) continue;
    const CollectiveCall& c = op.collective();
    EXPECT_EQ(GroupSize(c.group()), 2) << op.label();
    EXPECT_EQ(op.stream(), COMPUTE) << op.label();
    if (c.dtype() == BF16) {
      EXPECT_EQ(c.bytes(), bytes) << op.label();
    }
    ++n[CollectiveOp_Name(c.op()) + " " + Phase_Name(op.phase())];
  }
  return n;
}

// b*s*h bf16: the hidden states each of a block's collectives carries.
constexpr int64_t kHidden = kB * kS * kH * 2;

TEST(TensorParallelLowering, TwoAllReducesEachWayPerBlock) {
  const Schedule s = Lower(Gpt(), Sharded(2));
  // Forward: after o_proj and after fc2 (row-parallel); backward: the
  // input gradients of qkv and fc1 (column-parallel).
  EXPECT_EQ(Census(s, 1, kHidden),
            (std::map<std::string, int>{{"ALL_REDUCE FORWARD", 2},
                                        {"ALL_REDUCE BACKWARD", 2}}));
}

TEST(TensorParallelLowering, SequenceParallelGathersAndScatters) {
  const Schedule s = Lower(Gpt(), Sharded(2, true));
  // Forward: all-gather before qkv and fc1, reduce-scatter after o_proj
  // and fc2. Backward: the output gradients of o_proj and fc2 gathered,
  // qkv's and fc1's inputs gathered again for their weight gradients,
  // their input gradients reduce-scattered.
  EXPECT_EQ(Census(s, 1, kHidden),
            (std::map<std::string, int>{{"ALL_GATHER FORWARD", 2},
                                        {"REDUCE_SCATTER FORWARD", 2},
                                        {"ALL_GATHER BACKWARD", 4},
                                        {"REDUCE_SCATTER BACKWARD", 2}}));
}

TEST(TensorParallelLowering, FullRecomputationRunsTheForwardCollectivesAgain) {
  Batch batch = Sharded(2);
  batch.recompute = true;
  batch.recompute_granularity = RECOMPUTE_FULL;
  const Schedule s = Lower(Gpt(), batch);
  // The recompute (a backward-phase op) all-reduces o_proj's and fc2's
  // outputs again, beside the backward's two.
  EXPECT_EQ(Census(s, 1, kHidden),
            (std::map<std::string, int>{{"ALL_REDUCE FORWARD", 2},
                                        {"ALL_REDUCE BACKWARD", 4}}));
}

TEST(TensorParallelLowering, EmbeddingAndHead) {
  const Model m = Gpt();
  const Schedule s = Lower(m, Sharded(2));
  // The embedding's output summed over the vocabulary split.
  EXPECT_EQ(Census(s, 0, kHidden),
            (std::map<std::string, int>{{"ALL_REDUCE FORWARD", 1}}));
  // Head: the output layer's input gradient; the loss's three fp32
  // all-reduces (max, target logit, sum of exponentials) of b*s values.
  EXPECT_EQ(Census(s, m.layers() + 1, kHidden),
            (std::map<std::string, int>{{"ALL_REDUCE FORWARD", 3},
                                        {"ALL_REDUCE BACKWARD", 1}}));
  int fp32 = 0;
  for (const Op& op : s.ops()) {
    if (op.body_case() == Op::kCollective && op.collective().dtype() == FP32) {
      EXPECT_EQ(op.collective().bytes(), kB * kS * 4);
      ++fp32;
    }
  }
  EXPECT_EQ(fp32, 3);
}

bool Waits(const Op& op, const Op& on) {
  return std::find(op.deps().begin(), op.deps().end(), on.id()) !=
         op.deps().end();
}

TEST(TensorParallelLowering, ACollectiveCutsItsVisitsComputeOp) {
  const Schedule s = Lower(Gpt(), Sharded(2));
  // Forward of block 0 (layer 1) on the compute stream. Each all-reduce
  // sits inside its row-parallel unit's visit, between its GEMM and the
  // residual add: compute, AR, compute of the same segment, each waiting
  // for the one before.
  std::vector<const Op*> ops;
  for (const Op& op : s.ops()) {
    if (op.layer() == 1 && op.phase() == FORWARD && op.stream() == COMPUTE &&
        op.body_case() != Op::kMemory) {
      ops.push_back(&op);
    }
  }
  int collectives = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i]->body_case() != Op::kCollective) continue;
    ++collectives;
    ASSERT_GT(i, 0u);
    ASSERT_LT(i + 1, ops.size());
    EXPECT_TRUE(ops[i - 1]->has_compute());
    EXPECT_TRUE(ops[i + 1]->has_compute());
    EXPECT_EQ(ops[i - 1]->label(), ops[i + 1]->label());
    EXPECT_TRUE(Waits(*ops[i], *ops[i - 1])) << ops[i]->label();
    EXPECT_TRUE(Waits(*ops[i + 1], *ops[i])) << ops[i + 1]->label();
  }
  EXPECT_EQ(collectives, 2);
}

TEST(TensorParallelLowering, SelectiveRecomputeRunsTheCoreAttentionOnly) {
  Batch batch = Sharded(2);
  batch.recompute_granularity = RECOMPUTE_SELECTIVE;
  const Schedule s = Lower(Gpt(), batch);
  int recomputes = 0;
  for (const Op& op : s.ops()) {
    if (op.layer() != 1) continue;
    if (op.has_memory() && op.memory().buffer() == "recompute" &&
        op.memory().delta_bytes() > 0) {
      // The scores of a/t heads: 5*a*s^2*b/t.
      EXPECT_EQ(op.memory().delta_bytes(), Scores() / 2);
    }
    if (!op.has_compute() || op.compute().kind() != "recompute") continue;
    ++recomputes;
    std::vector<std::string> names;
    for (const Kernel& k :
         s.kernel_lists(op.compute().kernel_list()).kernels()) {
      names.push_back(k.name());
    }
    // HF's eager attention between its projections (kernels.cc).
    EXPECT_EQ(names,
              (std::vector<std::string>{"scores", "softmax", "context"}));
  }
  EXPECT_EQ(recomputes, 1);
  // No collective runs again: the core attention is local to the heads.
  EXPECT_EQ(Census(s, 1, kHidden),
            (std::map<std::string, int>{{"ALL_REDUCE FORWARD", 2},
                                        {"ALL_REDUCE BACKWARD", 2}}));
}

// ---- properties ----

TEST(TensorParallelProperty, TpNeverRaisesWhatOneGpuHolds) {
  for (const std::string& name : BuiltinModelNames()) {
    const Model m = test::BuiltinOrFail(name);
    for (const bool sp : {false, true}) {
      std::vector<Layer> prev = ModelLayers(m, Sharded(1));
      for (const int tp : {2, 4, 8}) {
        if (!ValidateTensorParallel(m, tp).ok()) continue;
        const std::vector<Layer> layers = ModelLayers(m, Sharded(tp, sp));
        for (size_t i = 0; i < layers.size(); ++i) {
          EXPECT_LE(layers[i].params, prev[i].params) << name << " " << tp;
          EXPECT_LE(layers[i].forward_flops, prev[i].forward_flops)
              << name << " " << tp;
          EXPECT_LE(layers[i].activation_bytes, prev[i].activation_bytes)
              << name << " " << tp << " " << layers[i].name;
        }
        prev = layers;
      }
    }
  }
}

TEST(TensorParallelProperty, NoCollectivesWithoutTp) {
  for (const Layer& layer : ModelLayers(Gpt(), Sharded(1))) {
    for (const Unit& u : layer.units) EXPECT_TRUE(u.comms.empty()) << u.name;
  }
}

TEST(TensorParallel, ValidateNamesTheFieldTpCannotSplit) {
  Model m = Gpt();
  m.set_heads(12);
  const absl::Status s = ValidateTensorParallel(m, 8);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.heads"), std::string::npos) << s;
  EXPECT_TRUE(ValidateTensorParallel(Gpt(), 8).ok());
}

}  // namespace
}  // namespace shardsim

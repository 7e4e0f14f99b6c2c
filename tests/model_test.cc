#include "sim/model/model.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

TEST(ModelBuiltin, EveryBuiltinIsValidAndNamesAreCaseInsensitive) {
  for (const std::string& name : BuiltinModelNames()) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(ValidateModel(test::BuiltinOrFail(name)).ok());
  }
  absl::StatusOr<Model> model = BuiltinModel("LLaMA-7B");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->name(), "llama-7b");
  EXPECT_EQ(model->hidden(), 4096);
}

TEST(ModelBuiltin, UnknownNameListsTheKnownOnes) {
  absl::StatusOr<Model> model = BuiltinModel("llama-8b");
  ASSERT_FALSE(model.ok());
  const std::string message(model.status().message());
  EXPECT_NE(message.find("llama-8b"), std::string::npos) << message;
  for (const std::string& name : BuiltinModelNames()) {
    EXPECT_NE(message.find(name), std::string::npos) << message;
  }
}

// LLaMA (SwiGLU, RMSNorm, no biases, untied, rotary), per block:
//   attention 4*h^2, MLP 3*h*ffn, two RMSNorms 2*h;
// plus embedding V*h and head V*h + h (final norm), V = 32000.
TEST(ModelParams, Llama7bIsExact) {
  // h = 4096, ffn = 11008, L = 32:
  //   block = 4*16,777,216 + 3*4096*11008 + 8192
  //         = 67,108,864 + 135,266,304 + 8,192 = 202,383,360
  //   blocks = 32 * 202,383,360 = 6,476,267,520
  //   embedding = 32000*4096 = 131,072,000; head = 131,076,096
  //   total = 6,476,267,520 + 131,072,000 + 131,076,096 = 6,738,415,616
  EXPECT_EQ(TotalParams(test::BuiltinOrFail("llama-7b")), 6'738'415'616);
}

TEST(ModelParams, LargerLlamas) {
  // 13B: h = 5120, ffn = 13824, L = 40.
  //   block = 4*26,214,400 + 3*5120*13824 + 10240
  //         = 104,857,600 + 212,336,640 + 10,240 = 317,204,480
  //   blocks = 40 * 317,204,480 = 12,688,179,200
  //   embedding = 163,840,000; head = 163,845,120
  //   total = 13,015,864,320
  EXPECT_EQ(TotalParams(test::BuiltinOrFail("llama-13b")), 13'015'864'320);
  // 30B (33B): h = 6656, ffn = 17920, L = 60.
  //   block = 4*44,302,336 + 3*6656*17920 + 13312
  //         = 177,209,344 + 357,826,560 + 13,312 = 535,049,216
  //   blocks = 60 * 535,049,216 = 32,102,952,960
  //   embedding = 212,992,000; head = 212,998,656
  //   total = 32,528,943,616
  EXPECT_EQ(TotalParams(test::BuiltinOrFail("llama-30b")), 32'528'943'616);
  // 65B: h = 8192, ffn = 22016, L = 80.
  //   block = 4*67,108,864 + 3*8192*22016 + 16384
  //         = 268,435,456 + 541,065,216 + 16,384 = 809,517,056
  //   blocks = 80 * 809,517,056 = 64,761,364,480
  //   embedding = 262,144,000; head = 262,152,192
  //   total = 65,285,660,672
  EXPECT_EQ(TotalParams(test::BuiltinOrFail("llama-65b")), 65'285'660'672);
}

TEST(ModelParams, Gpt3TiesTheHeadAndLearnsPositions) {
  // h = 12288, ffn = 49152, L = 96, V = 50257, 2048 positions.
  //   block = attention 4*150,994,944 = 603,979,776
  //         + q,k,v,o biases 4*12288 = 49,152
  //         + MLP 2*12288*49152 = 1,207,959,552
  //         + MLP biases 49152 + 12288 = 61,440
  //         + two LayerNorms 2*2*12288 = 49,152
  //         = 1,812,099,072
  //   blocks = 96 * 1,812,099,072 = 173,961,510,912
  //   embedding = (50257 + 2048) * 12288 = 642,723,840
  //   head = final LayerNorm only (tied) = 24,576
  //   total = 174,604,259,328
  const Model gpt3 = test::BuiltinOrFail("gpt3-175b");
  EXPECT_EQ(TotalParams(gpt3), 174'604'259'328);
  const std::vector<Layer> layers = ModelLayers(gpt3, Batch{});
  EXPECT_EQ(layers.back().params, 24'576);
  // The tied projection still runs: 2*T*h*V with T = 1 token.
  EXPECT_DOUBLE_EQ(layers.back().forward_flops, 2.0 * 12288 * 50257);
}

TEST(ModelParams, LayersSumToTotalInForwardOrder) {
  const Model m = test::BuiltinOrFail("llama-7b");
  const std::vector<Layer> layers = ModelLayers(m, Batch{});
  ASSERT_EQ(layers.size(), 34u);
  EXPECT_EQ(layers.front().name, "embedding");
  EXPECT_EQ(layers[1].name, "block 0");
  EXPECT_EQ(layers[32].name, "block 31");
  EXPECT_EQ(layers.back().name, "head");
  int64_t sum = 0;
  for (const Layer& l : layers) sum += l.params;
  EXPECT_EQ(sum, TotalParams(m));
}

TEST(ModelParams, GroupedQueryAttentionShrinksKeyAndValue) {
  Model m = test::BuiltinOrFail("llama-7b");
  m.set_kv_heads(8);  // k and v: 4096 x 1024 instead of 4096 x 4096
  EXPECT_EQ(TotalParams(test::BuiltinOrFail("llama-7b")) - TotalParams(m),
            32 * 2 * 4096 * (4096 - 1024));
}

// One LLaMA-7B block, T = b*s = 4096 tokens (s = 4096, b = 1).
//   matmul weights W = 4*4096^2 + 3*4096*11008 = 202,375,168 (norms are
//   not matmuls)
//   2*T*W = 8192 * 202,375,168 = 1,657,857,376,256
//   attention QK^T + AV = 2 * 2*b*s^2*h = 4 * 4096^3 = 274,877,906,944
//   forward = 1,932,735,283,200; backward = 2x = 3,865,470,566,400
TEST(ModelFlops, Llama7bBlockByHand) {
  const Batch batch = test::Sequences(1, 4096);
  const std::vector<Layer> layers =
      ModelLayers(test::BuiltinOrFail("llama-7b"), batch);
  const Layer& block = layers[1];
  EXPECT_DOUBLE_EQ(block.forward_flops, 1'932'735'283'200.0);
  EXPECT_DOUBLE_EQ(block.backward_flops, 3'865'470'566'400.0);
  EXPECT_EQ(block.recompute_flops, 0.0);
  // The embedding is a lookup; the head projects onto the vocabulary:
  // 2*T*h*V = 2*4096*4096*32000 = 1,073,741,824,000.
  EXPECT_EQ(layers.front().forward_flops, 0.0);
  EXPECT_EQ(layers.front().backward_flops, 0.0);
  EXPECT_DOUBLE_EQ(layers.back().forward_flops, 1'073'741'824'000.0);
}

TEST(ModelFlops, RecomputeRepeatsOnlyTheBlocksForward) {
  Batch batch = test::Sequences(1, 4096);
  batch.recompute = true;
  const std::vector<Layer> layers =
      ModelLayers(test::BuiltinOrFail("llama-7b"), batch);
  EXPECT_EQ(layers.front().recompute_flops, 0.0);
  EXPECT_EQ(layers.back().recompute_flops, 0.0);
  EXPECT_DOUBLE_EQ(layers[5].recompute_flops, layers[5].forward_flops);
  // Recomputation is hardware work, not model FLOPs.
  EXPECT_DOUBLE_EQ(
      ModelFlopsPerMicroBatch(test::BuiltinOrFail("llama-7b"), batch),
      ModelFlopsPerMicroBatch(test::BuiltinOrFail("llama-7b"),
                              test::Sequences(1, 4096)));
}

// The 6*T*psi rule: every weight is used in one forward matmul (2 FLOPs per
// token) and two backward ones (4), so forward + backward = 6*T*W for the
// matmul weights W, plus the attention term 3 * 4*b*s^2*h per block. psi
// is W plus the embedding table (a lookup, 0 FLOPs) and the norms
// (elementwise, not counted), so 6*T*psi + attention overcounts by exactly
// 6*T*(V*h + norm params): about 2% for LLaMA-7B.
TEST(ModelFlops, CloseToSixTPsiPlusAttention) {
  const Model m = test::BuiltinOrFail("llama-7b");
  const double b = 1, s = 4096, t = b * s, h = 4096, layers = 32;
  const double psi = static_cast<double>(TotalParams(m));
  const double attention = layers * 3 * 4 * b * s * s * h;
  const double rule = 6 * t * psi + attention;
  const double flops = ModelFlopsPerMicroBatch(m, test::Sequences(1, 4096));
  EXPECT_LT(std::abs(rule - flops) / flops, 0.03);
  const double norms = 2 * h * layers + h;
  EXPECT_DOUBLE_EQ(rule - flops, 6 * t * (32000 * h + norms));
}

// For a GPT block (4h^2 attention + 8h^2 MLP = 12h^2 matmul weights) the
// count reduces exactly to Megatron's 72*B*s*L*h^2*(1 + s/(6h) + V/(12hL)):
// 3 * (2*T*12h^2*L + 4*B*s^2*h*L + 2*T*h*V) with T = B*s.
TEST(ModelFlops, Gpt3MatchesMegatronFormula) {
  const double b = 2, s = 2048, h = 12288, layers = 96, vocab = 50257;
  const double megatron = 72 * b * s * layers * h * h *
                          (1 + s / (6 * h) + vocab / (12 * h * layers));
  const double flops = ModelFlopsPerMicroBatch(test::BuiltinOrFail("gpt3-175b"),
                                               test::Sequences(2, 2048));
  EXPECT_NEAR(flops / megatron, 1.0, 1e-12);
}

TEST(ModelActivations, HeadKeepsInputAndFp32Logits) {
  const Batch batch = test::Sequences(10, 512);
  const std::vector<Layer> layers =
      ModelLayers(test::BuiltinOrFail("llama-7b"), batch);
  EXPECT_EQ(layers.front().activation_bytes, 0);
  EXPECT_EQ(layers.back().activation_bytes,
            2 * 512 * 10 * 4096 + 4 * 512 * 10 * 32000);
}

TEST(ModelActivations, FlashAttentionDropsTheScoreTerm) {
  Batch batch = test::Sequences(10, 512);
  batch.flash_attention = true;
  const std::vector<Layer> layers =
      ModelLayers(test::BuiltinOrFail("llama-7b"), batch);
  EXPECT_EQ(layers[1].activation_bytes, 512 * 10 * 4096 * 34);
}

TEST(ModelValidate, ErrorNamesTheField) {
  Model m = test::BuiltinOrFail("llama-7b");
  m.set_hidden(0);
  absl::Status status = ValidateModel(m);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "model.hidden: must be in [1, 262144], got 0");

  m = test::BuiltinOrFail("llama-7b");
  m.set_heads(30);  // 4096 % 30 != 0
  status = ValidateModel(m);
  EXPECT_NE(status.message().find("model.heads"), absl::string_view::npos)
      << status;

  m = test::BuiltinOrFail("llama-7b");
  m.set_kv_heads(5);  // 32 % 5 != 0
  status = ValidateModel(m);
  EXPECT_NE(status.message().find("model.kv_heads"), absl::string_view::npos)
      << status;

  m = test::BuiltinOrFail("llama-7b");
  m.clear_mlp();
  status = ValidateModel(m);
  EXPECT_NE(status.message().find("model.mlp"), absl::string_view::npos)
      << status;

  m = test::BuiltinOrFail("llama-7b");
  m.clear_norm();
  status = ValidateModel(m);
  EXPECT_NE(status.message().find("model.norm"), absl::string_view::npos)
      << status;

  EXPECT_NE(ValidateModel(Model()).message().find("model.layers"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace shardsim

// Grouped-query attention in activations and kernels, the LLaMA-2/3
// built-ins, and models read from Hugging Face config.json files.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "sim/model/hf_config.h"
#include "sim/model/kernels.h"
#include "sim/model/model.h"
#include "sim/scenario/scenario.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

using ::testing::HasSubstr;

Model LlamaShape(int kv_heads) {
  Model m;
  m.set_name("gqa");
  m.set_layers(2);
  m.set_hidden(4096);
  m.set_heads(32);
  m.set_kv_heads(kv_heads);
  m.set_ffn_hidden(11008);
  m.set_vocab(32000);
  m.set_mlp(Model::SWIGLU);
  m.set_norm(Model::RMSNORM);
  return m;
}

const Layer& FirstBlock(const std::vector<Layer>& layers) {
  return layers[1];  // embedding, block 0, ...
}

const Kernel* FindKernel(const std::vector<Unit>& units,
                         const std::string& name) {
  for (const Unit& u : units) {
    for (const std::vector<Kernel>* list : {&u.forward, &u.backward}) {
      for (const Kernel& k : *list) {
        if (k.name() == name) return &k;
      }
    }
  }
  return nullptr;
}

// Without flash attention the FUSED style runs Megatron-LM's fused
// scale-mask-softmax: one kernel of 2 + 2 bytes a score forward and 3 x 2
// backward, where EAGER's fp32 softmax is four kernels of 4 + 6 vector and
// 4 + 6 general bytes, and three backward. b 2, 32 heads, s 16: 16,384
// scores.
TEST(ModelKernels, FusedStyleRunsMegatronsFusedSoftmax) {
  Batch batch;
  batch.seq_len = 16;
  batch.micro_batch_size = 2;
  batch.kernels.set_style(KernelOptions::FUSED);
  const std::vector<Unit> fused = BlockUnits(LlamaShape(0), batch);
  const int64_t scores = 2 * 32 * 16 * 16;
  const Kernel* f = FindKernel(fused, "scale mask softmax");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(KernelBytes(*f), 4 * scores);
  EXPECT_EQ(f->memory().launches(), 1);
  const Kernel* b = FindKernel(fused, "scale mask softmax backward");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(KernelBytes(*b), 6 * scores);
  EXPECT_EQ(FindKernel(fused, "softmax"), nullptr);
  batch.kernels.set_style(KernelOptions::EAGER);
  const std::vector<Unit> eager = BlockUnits(LlamaShape(0), batch);
  const Kernel* e = FindKernel(eager, "softmax");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(KernelBytes(*e), 20 * scores);
  EXPECT_EQ(e->memory().launches(), 4);
}

// Dropout's kernels, counted by hand (torch's native_dropout and Megatron's
// fused bias-dropout-add): b 2, s 16, 32 heads: 16,384 scores and T = 32
// tokens of h 4096. Attention dropout reads and writes 2 bytes a score and
// writes its 1-byte mask, 5 bytes; its backward reads the gradient and the
// mask and writes 2: 5. Hidden dropout writes its mask in each residual
// add, 3 x 2 + 1 = 7 bytes an element, and its backward is 5; the
// embedding's output is dropped in a kernel of its own, 5 and 5. No
// dropout, none of them; with FlashAttention the attention's is inside
// the kernel.
TEST(ModelKernels, DropoutWritesItsMaskAndBackwardReadsIt) {
  Batch batch;
  batch.seq_len = 16;
  batch.micro_batch_size = 2;
  batch.kernels.set_style(KernelOptions::FUSED);
  Model m = LlamaShape(0);
  m.set_attention_dropout(0.1);
  m.set_hidden_dropout(0.1);
  const int64_t scores = 2 * 32 * 16 * 16, x = 2 * 16 * 4096;
  const std::vector<Unit> block = BlockUnits(m, batch);
  auto bytes = [](const std::vector<Unit>& units, const std::string& name) {
    const Kernel* k = FindKernel(units, name);
    return k == nullptr ? int64_t{-1} : KernelBytes(*k);
  };
  EXPECT_EQ(bytes(block, "attention dropout"), 5 * scores);
  EXPECT_EQ(bytes(block, "attention dropout backward"), 5 * scores);
  EXPECT_EQ(bytes(block, "dropout residual add"), 7 * x);
  EXPECT_EQ(bytes(block, "hidden dropout backward"), 5 * x);
  EXPECT_EQ(bytes(block, "residual add"), -1);
  int backward = 0;
  for (const Unit& u : block) {
    for (const Kernel& k : u.backward) {
      backward += k.name() == "hidden dropout backward";
    }
  }
  EXPECT_EQ(backward, 2);  // after attention and after the MLP
  const std::vector<Unit> embedding = EmbeddingUnits(m, batch);
  EXPECT_EQ(bytes(embedding, "embedding dropout"), 5 * x);
  EXPECT_EQ(bytes(embedding, "hidden dropout backward"), 5 * x);
  const std::vector<Unit> none = BlockUnits(LlamaShape(0), batch);
  EXPECT_EQ(bytes(none, "attention dropout"), -1);
  EXPECT_EQ(bytes(none, "hidden dropout backward"), -1);
  EXPECT_EQ(bytes(none, "residual add"), 6 * x);
  batch.flash_attention = true;
  EXPECT_EQ(bytes(BlockUnits(m, batch), "attention dropout"), -1);
}

// Korthikanti et al. 2022 §4.1: of the attention block's 11*s*b*h bytes,
// K and V are 2*s*b*h each under MHA. With kv = 8 heads of d = 4096/32 =
// 128, each is 2*s*b*kv*d. With s = 16, b = 2:
//   MHA  K + V = 2 * 2*16*2*4096 = 524,288
//   GQA  K + V = 2 * 2*16*2*1024 = 131,072
//   difference = 2*2*s*b*(h - kv*d) = 2*2*16*2*(4096 - 1024)
//              = 128 * 3072 = 393,216.
// MHA block total without flash attention:
//   34*s*b*h + 5*a*s^2*b = 34*16*2*4096 + 5*32*256*2
//                        = 4,456,448 + 81,920 = 4,538,368.
TEST(ModelGqa, ActivationsKeepSmallerKeysAndValues) {
  Batch batch;
  batch.seq_len = 16;
  batch.micro_batch_size = 2;
  const Layer mha = FirstBlock(ModelLayers(LlamaShape(0), batch));
  const Layer gqa = FirstBlock(ModelLayers(LlamaShape(8), batch));
  EXPECT_EQ(mha.activation_bytes, 4'538'368);
  EXPECT_EQ(mha.activation_bytes - gqa.activation_bytes, 393'216);
  // kv_heads == heads is MHA, as 0 is.
  EXPECT_EQ(FirstBlock(ModelLayers(LlamaShape(32), batch)).activation_bytes,
            mha.activation_bytes);

  // With flash attention only the 34*s*b*h term stays; the K/V saving is
  // the same. Recomputing, the full activations are the backward working
  // set and only the block's input (2*s*b*h = 2*16*2*4096 = 262,144) is
  // kept.
  batch.flash_attention = true;
  batch.recompute = true;
  const Layer mha_flash = FirstBlock(ModelLayers(LlamaShape(0), batch));
  const Layer gqa_flash = FirstBlock(ModelLayers(LlamaShape(8), batch));
  EXPECT_EQ(mha_flash.backward_working_bytes, 4'456'448);
  EXPECT_EQ(gqa_flash.backward_working_bytes, 4'456'448 - 393'216);
  EXPECT_EQ(gqa_flash.activation_bytes, 262'144);
}

// T = s*b = 32 tokens. k_proj: T x kv*d = 32 x 1024 from 4096; eager
// attention's repeat_kv reads k and v (1024 wide) and writes them expanded
// (4096 wide): 2 tensors * 32 tokens * (1024 + 4096) * 2 bytes = 655,360.
TEST(ModelGqa, KernelsUseKeyValueWidth) {
  Batch batch;
  batch.seq_len = 16;
  batch.micro_batch_size = 2;
  const std::vector<Unit> units = BlockUnits(LlamaShape(8), batch);
  const Kernel* k_proj = FindKernel(units, "k_proj");
  ASSERT_NE(k_proj, nullptr);
  EXPECT_EQ(k_proj->gemm().m(), 32);
  EXPECT_EQ(k_proj->gemm().n(), 1024);
  EXPECT_EQ(k_proj->gemm().k(), 4096);
  const Kernel* repeat = FindKernel(units, "repeat_kv");
  ASSERT_NE(repeat, nullptr);
  EXPECT_EQ(KernelBytes(*repeat), 655'360);
  const Kernel* repeat_back = FindKernel(units, "repeat_kv backward");
  ASSERT_NE(repeat_back, nullptr);
  EXPECT_EQ(KernelBytes(*repeat_back), 655'360);
  EXPECT_EQ(FindKernel(BlockUnits(LlamaShape(0), batch), "repeat_kv"), nullptr);

  batch.flash_attention = true;
  const std::vector<Unit> flash = BlockUnits(LlamaShape(8), batch);
  const Kernel* attention = FindKernel(flash, "attention");
  ASSERT_NE(attention, nullptr);
  EXPECT_EQ(attention->attention().heads(), 32);
  EXPECT_EQ(attention->attention().kv_heads(), 8);
  EXPECT_EQ(attention->attention().head_dim(), 128);
}

absl::StatusOr<Model> Hf(const std::string& relative) {
  return LoadModel(absl::StrCat("hf:", relative), SHARDSIM_SOURCE_DIR);
}

// Meta-Llama-3-8B (h = 4096, L = 32, 32 heads, 8 KV heads of 128,
// ffn = 14336, V = 128256, untied):
//   embeddings 128256*4096                  =   525,336,576
//   per layer: q 4096^2                     =    16,777,216
//              k, v 2*4096*1024             =     8,388,608
//              o 4096^2                     =    16,777,216
//              MLP 3*4096*14336             =   176,160,768
//              2 RMSNorms 2*4096            =         8,192
//              sum                          =   218,112,000
//   32 layers                               = 6,979,584,000
//   final norm                              =         4,096
//   untied head 128256*4096                 =   525,336,576
//   total                                   = 8,030,261,248
TEST(HfConfig, Llama3_8bHas8030261248Parameters) {
  absl::StatusOr<Model> m = Hf("tests/data/hf/llama-3-8b/config.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name(), "llama-3-8b");
  EXPECT_EQ(m->kv_heads(), 8);
  EXPECT_FALSE(m->tied_embeddings());
  EXPECT_EQ(TotalParams(*m), 8'030'261'248);
  // The built-in of the same name is the same model.
  absl::StatusOr<Model> builtin = BuiltinModel("llama-3-8b");
  ASSERT_TRUE(builtin.ok()) << builtin.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*m, *builtin))
      << m->DebugString() << "\nvs\n"
      << builtin->DebugString();
}

// GPT-2 small (h = 768, L = 12, 12 heads, n_inner null -> 3072,
// V = 50257, 1024 positions, tied; Conv1D layers with biases):
//   wte 50257*768 = 38,597,376; wpe 1024*768 = 786,432
//   per layer: ln_1 2*768 = 1,536; c_attn 768*2304 + 2304 = 1,771,776;
//     attn c_proj 768*768 + 768 = 590,592; ln_2 1,536;
//     c_fc 768*3072 + 3072 = 2,362,368; mlp c_proj 3072*768 + 768 =
//     2,360,064; sum 7,087,872; 12 layers 85,054,464
//   ln_f 1,536; lm_head tied: 0
//   total 38,597,376 + 786,432 + 85,054,464 + 1,536 = 124,439,808
TEST(HfConfig, Gpt2SmallHas124439808Parameters) {
  absl::StatusOr<Model> m = Hf("tests/data/hf/gpt2/config.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->mlp(), Model::GELU);
  EXPECT_EQ(m->norm(), Model::LAYERNORM);
  EXPECT_EQ(m->ffn_hidden(), 3072);
  EXPECT_EQ(m->learned_positions(), 1024);
  EXPECT_TRUE(m->tied_embeddings());
  EXPECT_TRUE(m->linear_bias());
  EXPECT_EQ(TotalParams(*m), 124'439'808);
}

TEST(HfConfig, UnknownArchitectureNamesKeyValueAndSupportedList) {
  absl::StatusOr<Model> m = Hf("tests/data/hf/unknown-arch/config.json");
  ASSERT_FALSE(m.ok());
  const std::string e(m.status().message());
  EXPECT_THAT(e, HasSubstr("unknown-arch/config.json"));
  EXPECT_THAT(e, HasSubstr("\"architectures\""));
  EXPECT_THAT(e, HasSubstr("MixtralForCausalLM"));
  for (const std::string& arch : SupportedHfArchitectures()) {
    EXPECT_THAT(e, HasSubstr(arch));
  }
}

TEST(HfConfig, MalformedJsonGivesLineAndColumn) {
  absl::StatusOr<Model> m = ModelFromHfConfigText(
      "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"hidden_size\": "
      ",\n}",
      "x", "bad.json");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("bad.json"));
  EXPECT_THAT(m.status().message(), HasSubstr("line 3, column"));
}

std::string LlamaJson(const std::string& extra) {
  return absl::StrCat(
      "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 4096,"
      " \"num_hidden_layers\": 32, \"num_attention_heads\": 32,"
      " \"intermediate_size\": 11008, \"vocab_size\": 32000",
      extra, "}");
}

// Dropouts as the config classes give them: GPT2Config's three 0.1s
// (tests/data's gpt2 config writes them out), Llama's attention_dropout
// (0.0 when absent); a value out of [0, 1), or GPT-2's embedding dropout
// without its residual one, is an error naming the key.
TEST(HfConfig, DropoutsAreReadOrRefusedByKey) {
  absl::StatusOr<Model> gpt2 = Hf("tests/data/hf/gpt2/config.json");
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  EXPECT_EQ(gpt2->attention_dropout(), 0.1);
  EXPECT_EQ(gpt2->hidden_dropout(), 0.1);
  absl::StatusOr<Model> llama =
      ModelFromHfConfigText(LlamaJson(""), "x", "cfg.json");
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_EQ(llama->attention_dropout(), 0);
  llama = ModelFromHfConfigText(LlamaJson(", \"attention_dropout\": 0.2"), "x",
                                "cfg.json");
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_EQ(llama->attention_dropout(), 0.2);
  EXPECT_EQ(llama->hidden_dropout(), 0);
  absl::StatusOr<Model> bad = ModelFromHfConfigText(
      LlamaJson(", \"attention_dropout\": 1.5"), "x", "cfg.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("\"attention_dropout\""));
  const std::string gpt2_text =
      "{\"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": 768,"
      " \"n_layer\": 2, \"n_head\": 12, \"vocab_size\": 50257,"
      " \"n_positions\": 1024, \"embd_pdrop\": 0}";
  bad = ModelFromHfConfigText(gpt2_text, "x", "g.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("\"embd_pdrop\""));
}

TEST(HfConfig, ShapeKeysNotModelledAreErrorsNamingTheKey) {
  struct Case {
    std::string extra;
    std::string key;
  };
  const std::vector<Case> cases = {
      {", \"num_local_experts\": 8", "\"num_local_experts\""},
      {", \"head_dim\": 64", "\"head_dim\""},
      {", \"attention_bias\": true", "\"attention_bias\""},
      {", \"hidden_act\": \"relu\"", "\"hidden_act\""},
      {", \"hidden_size\": 4096.5", "\"hidden_size\""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Model> m =
        ModelFromHfConfigText(LlamaJson(c.extra), "x", "cfg.json");
    ASSERT_FALSE(m.ok()) << c.extra;
    EXPECT_THAT(m.status().message(), HasSubstr(c.key)) << c.extra;
    EXPECT_THAT(m.status().message(), HasSubstr("cfg.json")) << c.extra;
  }
  // LLaMA-1 configs have no num_key_value_heads (MHA), and a head_dim of
  // hidden_size / num_attention_heads changes nothing.
  absl::StatusOr<Model> m =
      ModelFromHfConfigText(LlamaJson(", \"head_dim\": 128"), "x", "cfg.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->kv_heads(), 0);
  // A missing shape key is an error, not a default.
  absl::StatusOr<Model> missing = ModelFromHfConfigText(
      "{\"architectures\": [\"LlamaForCausalLM\"]}", "x", "cfg.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("\"hidden_size\""));
}

// Qwen2's q, k and v projections carry biases: h + 2*kv*d per layer more
// than the same shape without. h = 4096, kv*d = 8*128 = 1024: 6,144 per
// layer, 12,288 over 2 layers; the kernels' units own every one of them.
TEST(HfConfig, Qwen2HasQkvBiases) {
  const std::string json =
      "{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 4096,"
      " \"num_hidden_layers\": 2, \"num_attention_heads\": 32,"
      " \"num_key_value_heads\": 8, \"intermediate_size\": 11008,"
      " \"vocab_size\": 32000, \"use_sliding_window\": false}";
  absl::StatusOr<Model> qwen = ModelFromHfConfigText(json, "qwen", "q.json");
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  EXPECT_TRUE(qwen->qkv_bias());
  EXPECT_FALSE(qwen->linear_bias());
  EXPECT_EQ(TotalParams(*qwen) - TotalParams(LlamaShape(8)), 12'288);
  for (const Layer& layer : ModelLayers(*qwen, test::Sequences(1, 64))) {
    int64_t params = 0;
    for (const Unit& u : layer.units) params += u.params;
    EXPECT_EQ(params, layer.params) << layer.name;
  }
  // Mistral needs num_key_value_heads written out.
  std::string mistral = json;
  mistral.replace(mistral.find("Qwen2"), 5, "Mistral");
  mistral.replace(mistral.find(" \"num_key_value_heads\": 8,"), 26, "");
  absl::StatusOr<Model> m = ModelFromHfConfigText(mistral, "m", "m.json");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("\"num_key_value_heads\""));
}

// Mistral's sliding_window: as given, none when null, and
// MistralConfig's default of 4096 when the file leaves it out. A scenario
// whose sequence runs past it is refused (attention beyond the window is
// not modelled); within it, it runs as any model.
TEST(HfConfig, MistralsSlidingWindowIsReadAndASequencePastItRefused) {
  const std::string base =
      "{\"architectures\": [\"MistralForCausalLM\"], \"hidden_size\": 4096,"
      " \"num_hidden_layers\": 2, \"num_attention_heads\": 32,"
      " \"num_key_value_heads\": 8, \"intermediate_size\": 14336,"
      " \"vocab_size\": 32000";
  auto window = [&](const std::string& extra) {
    absl::StatusOr<Model> m =
        ModelFromHfConfigText(base + extra + "}", "mistral", "m.json");
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? m->sliding_window() : -1;
  };
  EXPECT_EQ(window(", \"sliding_window\": 2048"), 2048);
  EXPECT_EQ(window(", \"sliding_window\": null"), 0);
  EXPECT_EQ(window(""), 4096);
  EXPECT_FALSE(
      ModelFromHfConfigText(base + ", \"sliding_window\": 0}", "m", "m.json")
          .ok());
  Scenario sc;
  sc.set_name("window");
  *sc.mutable_model_def() = LlamaShape(8);  // 2 blocks
  sc.mutable_model_def()->set_sliding_window(4096);
  sc.set_platform("dgx_a100");
  sc.add_strategies("zero1");
  sc.add_gpus(8);
  sc.set_micro_batch_size(1);
  sc.set_micro_batches(1);
  sc.set_optimizer_bytes_per_param(12);
  // The job's error, "" when it resolves.
  auto error = [&sc] {
    absl::StatusOr<Job> job = ResolveJob("w.textproto", sc);
    return job.ok() ? std::string() : std::string(job.status().message());
  };
  sc.set_seq_len(4096);
  EXPECT_EQ(error(), "");
  sc.set_seq_len(16384);
  EXPECT_THAT(error(),
              HasSubstr("w.textproto: field seq_len: 16384 runs past model"));
  // selective-layer:K with K beyond the blocks recomputes nothing.
  sc.set_seq_len(4096);
  sc.set_recompute_granularity(RECOMPUTE_SELECTIVE_LAYER);
  sc.set_recompute_every_layers(2);
  EXPECT_EQ(error(), "");
  sc.set_recompute_every_layers(3);
  EXPECT_THAT(error(),
              HasSubstr("field recompute_every_layers: 3 is more than"));
}

// Llama-3-70B: h = 8192, L = 80, 64 heads, 8 KV heads of 128,
// ffn = 28672, V = 128256, untied. Per layer: q, o 2*8192^2 =
// 134,217,728; k, v 2*8192*1024 = 16,777,216; MLP 3*8192*28672 =
// 704,643,072; norms 16,384; sum 855,654,400; 80 layers 68,452,352,000.
// Embedding and head 2*128256*8192 = 2,101,346,304; final norm 8,192.
// Total 70,553,706,496. Llama-2-70B: the same with V = 32000: embedding
// and head 2*32000*8192 = 524,288,000; total 68,976,648,192.
TEST(ModelBuiltin, Llama3And2At70b) {
  absl::StatusOr<Model> l3 = BuiltinModel("llama-3-70b");
  ASSERT_TRUE(l3.ok()) << l3.status();
  EXPECT_EQ(TotalParams(*l3), 70'553'706'496);
  absl::StatusOr<Model> l2 = BuiltinModel("llama-2-70b");
  ASSERT_TRUE(l2.ok()) << l2.status();
  EXPECT_EQ(TotalParams(*l2), 68'976'648'192);
}

TEST(ModelBuiltin, UnknownNameSuggestsTheNearest) {
  absl::StatusOr<Model> m = LoadModel("llama-3-8", "");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("did you mean \"llama-3-8b\""));
  EXPECT_THAT(m.status().message(), HasSubstr("llama-3-70b"));
}

}  // namespace
}  // namespace shardsim

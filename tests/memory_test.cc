#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/model/model.h"
#include "tests/memory_estimate.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

Factor F(int intra, int inter) {
  Factor f;
  f.set_intra(intra);
  f.set_inter(inter);
  return f;
}

// s_p, s_g, s_os as intra x inter factors.
Strategy MakeStrategy(const std::string& name, Factor p, Factor g, Factor os,
                      int secondary_params_intra = 0) {
  Strategy s;
  s.set_name(name);
  *s.mutable_p() = p;
  *s.mutable_g() = g;
  *s.mutable_os() = os;
  s.set_secondary_params_intra(secondary_params_intra);
  return s;
}

// `size` sequences of `seq_len` tokens, everything else the default.
Platform A100x80(int64_t reserved_bytes = int64_t{2} << 30) {
  Platform p;
  p.set_name("test_a100");
  p.set_gpus_per_node(8);
  p.mutable_gpu()->set_memory_bytes(80'000'000'000);
  p.mutable_gpu()->set_reserved_bytes(reserved_bytes);
  return p;
}

// docs/strategies.md §2 at psi = 7e9, N = 64 GPUs in g = 8 nodes of M = 8,
// K = 12.
constexpr int64_t kPsi = 7'000'000'000;
constexpr int64_t kN = 64;
constexpr int64_t kM = 8;
constexpr double kK = 12;

// The table's entries, checked against their values by the compiler.
constexpr int64_t kFull = 2 * kPsi;            // 2Ψ
constexpr int64_t kGlobal = 2 * kPsi / kN;     // 2Ψ/N
constexpr int64_t kIntra = 2 * kPsi / kM;      // 2Ψ/M
constexpr int64_t kOsGlobal = 12 * kPsi / kN;  // KΨ/N
constexpr int64_t kOsIntra = 12 * kPsi / kM;   // KΨ/M
static_assert(kFull == 14'000'000'000);
static_assert(kGlobal == 218'750'000);
static_assert(kIntra == 1'750'000'000);
static_assert(kOsGlobal == 1'312'500'000);
static_assert(kOsIntra == 10'500'000'000);

struct TableRow {
  Strategy strategy;
  int64_t params, grads, optimizer;
};

TEST(MemoryStates, SpecSection3Table) {
  const std::vector<TableRow> rows = {
      {MakeStrategy("ZeRO-1", F(1, 1), F(1, 1), F(8, 8)),  //
       kFull, kFull, kOsGlobal},
      {MakeStrategy("ZeRO-2", F(1, 1), F(8, 8), F(8, 8)),  //
       kFull, kGlobal, kOsGlobal},
      {MakeStrategy("ZeRO-3", F(8, 8), F(8, 8), F(8, 8)),  //
       kGlobal, kGlobal, kOsGlobal},
      {MakeStrategy("MiCS", F(8, 1), F(8, 1), F(8, 1)),  //
       kIntra, kIntra, kOsIntra},
      // hpZ: 2Ψ/N primary + 2Ψ/M secondary = 218,750,000 + 1,750,000,000.
      {MakeStrategy("ZeRO++", F(8, 8), F(8, 8), F(8, 8),
                    /*secondary_params_intra=*/8),
       kGlobal + kIntra, kGlobal, kOsGlobal},
      {MakeStrategy("PaRO-IGG", F(8, 1), F(8, 8), F(8, 8)),  //
       kIntra, kGlobal, kOsGlobal},
      {MakeStrategy("PaRO-IIG", F(8, 1), F(8, 1), F(8, 8)),  //
       kIntra, kIntra, kOsGlobal},
      {MakeStrategy("PaRO-NIG", F(1, 1), F(8, 1), F(8, 8)),  //
       kFull, kIntra, kOsGlobal},
  };
  for (const TableRow& row : rows) {
    SCOPED_TRACE(row.strategy.name());
    const ModelStates states = ModelStateBytes(kPsi, kK, row.strategy);
    EXPECT_EQ(states.params, row.params);
    EXPECT_EQ(states.grads, row.grads);
    EXPECT_EQ(states.optimizer, row.optimizer);
  }
}

TEST(MemoryStates, UnevenShardsRoundUp) {
  // 2*(1e9 + 1)/64 = 31,250,000.03: the largest shard holds 31,250,001.
  const Strategy zero3 = MakeStrategy("ZeRO-3", F(8, 8), F(8, 8), F(8, 8));
  const ModelStates states = ModelStateBytes(1'000'000'001, 16, zero3);
  EXPECT_EQ(states.params, 31'250'001);
  EXPECT_EQ(states.grads, 31'250'001);
  // 16*(1e9 + 1)/64 = 250,000,000.25 -> 250,000,001.
  EXPECT_EQ(states.optimizer, 250'000'001);
  // A fractional K: 12.5 * 64 / 64 = 12.5 -> 13.
  EXPECT_EQ(ModelStateBytes(64, 12.5, zero3).optimizer, 13);
}

// Korthikanti et al.: s*b*h*(34 + 5*a*s/h) bytes per block.
TEST(MemoryActivations, Llama7bWithAndWithoutRecompute) {
  const Model m = test::BuiltinOrFail("llama-7b");
  const Strategy ddp = MakeStrategy("DDP", F(1, 1), F(1, 1), F(1, 1));
  Scenario scenario;
  scenario.set_optimizer_bytes_per_param(12);
  Batch batch = test::Sequences(/*micro_batch_size=*/10, /*seq_len=*/512);

  // 5*32*512/4096 = 20: 20,971,520 * 54 = 1,132,462,080 bytes per block.
  const int64_t block = int64_t{512} * 10 * 4096 * (34 + 5 * 32 * 512 / 4096);
  // Head: its input 2*s*b*h plus fp32 logits 4*s*b*V.
  const int64_t head = int64_t{2} * 512 * 10 * 4096 + 4 * 512 * 10 * 32000;
  std::vector<Layer> layers = ModelLayers(m, batch);
  for (int i = 1; i <= 32; ++i) {
    EXPECT_EQ(layers[i].activation_bytes, block);
    EXPECT_EQ(layers[i].backward_working_bytes, 0);
  }
  MemoryBreakdown mem =
      EstimateMemory(layers, ddp, Mesh{8, 8}, scenario, A100x80());
  EXPECT_EQ(mem.activations, 32 * block + head);

  // Recompute: only the block input 2*s*b*h is kept; the recomputed full
  // activation of one block is live during its backward.
  batch.recompute = true;
  layers = ModelLayers(m, batch);
  const int64_t input = int64_t{2} * 512 * 10 * 4096;  // 41,943,040
  for (int i = 1; i <= 32; ++i) {
    EXPECT_EQ(layers[i].activation_bytes, input);
    EXPECT_EQ(layers[i].backward_working_bytes, block);
  }
  mem = EstimateMemory(layers, ddp, Mesh{8, 8}, scenario, A100x80());
  EXPECT_EQ(mem.activations, 32 * input + head + block);
}

// An FSDP-like profile: whole layers, two alive, one bucket per layer.
Execution PerLayer() {
  Execution e;
  e.set_gather_unit(LAYER);
  e.set_max_gathered_units(2);
  e.set_reduce_bucket_elements(0);
  return e;
}

// DeepSpeed ZeRO-3's defaults (stage3_prefetch_bucket_size 5e7,
// stage3_max_live_parameters 1e9, persistence 1e5, reduce_bucket_size 5e8).
Execution DeepSpeedStage3() {
  Execution e;
  e.set_gather_unit(SUBMODULE);
  e.set_prefetch_bucket_elements(50'000'000);
  e.set_max_live_elements(1'000'000'000);
  e.set_persistence_threshold(100'000);
  e.set_reduce_bucket_elements(500'000'000);
  return e;
}

TEST(MemoryBuffers, GatheredParamsAndGradientBuffers) {
  // LLaMA-7B's largest layer is a block: 202,383,360 params, 2 bytes each.
  const Model m = test::BuiltinOrFail("llama-7b");
  const std::vector<Layer> layers = ModelLayers(m, test::Sequences(1, 512));
  const int64_t layer = 2 * int64_t{202'383'360};
  const Platform platform = A100x80();
  Scenario scenario;
  scenario.set_optimizer_bytes_per_param(12);

  // DDP without buckets: nothing sharded, no buffers.
  Strategy ddp = MakeStrategy("DDP", F(1, 1), F(1, 1), F(1, 1));
  *ddp.mutable_execution() = PerLayer();
  EXPECT_EQ(EstimateMemory(layers, ddp, Mesh{8, 8}, scenario, platform).buffers,
            0);
  // ZeRO-3 layer by layer, two alive: 2 gathered layers + 2 gradient ones.
  Strategy zero3 = MakeStrategy("ZeRO-3", F(8, 8), F(8, 8), F(8, 8));
  *zero3.mutable_execution() = PerLayer();
  EXPECT_EQ(
      EstimateMemory(layers, zero3, Mesh{8, 8}, scenario, platform).buffers,
      2 * layer + 2 * layer);
  // DeepSpeed ZeRO-3: the largest module gathered on its own is the
  // embedding table (32000 x 4096 = 131,072,000 parameters); it, the 5e7
  // prefetched after it and the module crossing the bucket's end:
  // 131,072,000 x 2 + 50,000,000 = 312,144,000 elements. Gradients: two
  // buckets of 5e8. All bf16: 2 x 1,312,144,000 bytes.
  *zero3.mutable_execution() = DeepSpeedStage3();
  EXPECT_EQ(
      EstimateMemory(layers, zero3, Mesh{8, 8}, scenario, platform).buffers,
      int64_t{2} * (312'144'000 + 1'000'000'000));
  // ZeRO-2: parameters replicated, only the two gradient buckets.
  Strategy zero2 = MakeStrategy("ZeRO-2", F(1, 1), F(8, 8), F(8, 8));
  *zero2.mutable_execution() = DeepSpeedStage3();
  EXPECT_EQ(
      EstimateMemory(layers, zero2, Mesh{8, 8}, scenario, platform).buffers,
      int64_t{2} * 1'000'000'000);
}

TEST(MemoryTotal, SumsTheParts) {
  const Model m = test::BuiltinOrFail("llama-7b");
  const std::vector<Layer> layers = ModelLayers(m, test::Sequences(10, 512));
  Strategy mics = MakeStrategy("MiCS", F(8, 1), F(8, 1), F(8, 1));
  *mics.mutable_execution() = PerLayer();
  Scenario scenario;
  scenario.set_optimizer_bytes_per_param(12);
  const Platform platform = A100x80(/*reserved_bytes=*/1'000'000'000);
  const MemoryBreakdown mem =
      EstimateMemory(layers, mics, Mesh{8, 8}, scenario, platform);
  const int64_t psi = TotalParams(m);
  EXPECT_EQ(mem.states.params, (2 * psi + 7) / 8);
  EXPECT_EQ(mem.reserved, 1'000'000'000);
  EXPECT_EQ(mem.total, mem.states.params + mem.states.grads +
                           mem.states.optimizer + mem.activations +
                           mem.buffers + mem.reserved);
  EXPECT_EQ(mem.oom, mem.total > platform.gpu().memory_bytes());
}

// LLaMA-65B as PaRO runs it: s = 512, micro-batch 10, recomputation.
TEST(MemoryOom, Llama65bDdpDoesNotFitZero3On128Does) {
  const Model m = test::BuiltinOrFail("llama-65b");
  Batch batch = test::Sequences(/*micro_batch_size=*/10, /*seq_len=*/512);
  batch.recompute = true;
  const std::vector<Layer> layers = ModelLayers(m, batch);
  Scenario scenario;
  scenario.set_optimizer_bytes_per_param(12);
  const Platform platform = A100x80();
  const Mesh mesh{8, 16};

  // DDP: (2 + 2 + 12) * 65,285,660,672 ≈ 1.04 TB of states alone.
  const Strategy ddp = MakeStrategy("DDP", F(1, 1), F(1, 1), F(1, 1));
  const MemoryBreakdown ddp_mem =
      EstimateMemory(layers, ddp, mesh, scenario, platform);
  EXPECT_EQ(
      ddp_mem.states.params + ddp_mem.states.grads + ddp_mem.states.optimizer,
      16 * TotalParams(m));
  EXPECT_TRUE(ddp_mem.oom);

  // ZeRO-3 over 128: 16 * 65.3e9 / 128 ≈ 8.2 GB of states; activations
  // 80 block inputs (6.7 GB) + one recomputed block (2.3 GB) + head
  // (0.7 GB); buffers 4 layers of 1.6 GB; ≈ 24 GB + reserve.
  Strategy zero3 = MakeStrategy("ZeRO-3", F(8, 16), F(8, 16), F(8, 16));
  *zero3.mutable_execution() = PerLayer();
  const MemoryBreakdown zero3_mem =
      EstimateMemory(layers, zero3, mesh, scenario, platform);
  EXPECT_FALSE(zero3_mem.oom) << zero3_mem.total;
  EXPECT_LT(zero3_mem.total, 30'000'000'000);
}

}  // namespace
}  // namespace shardsim

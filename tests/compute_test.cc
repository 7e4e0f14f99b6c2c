// Kernel times from shapes (sim/compute/kernel_time.h) and the kernels of a
// layer (sim/model/kernels.h), each derived here by hand.
#include "gtest/gtest.h"
#include "sim/compute/kernel_time.h"
#include "sim/model/kernels.h"
#include "sim/model/model.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

// Round numbers: 1e15 FLOP/s, 100 SMs, 3e12 B/s of HBM.
Platform Gpu() {
  Platform p;
  p.mutable_gpu()->set_peak_flops(1e15);
  p.mutable_gpu()->set_sms(100);
  p.mutable_gpu()->set_hbm_bytes_per_s(3e12);
  KernelModel* k = p.mutable_kernels();
  k->set_gemm_efficiency(0.8);
  k->set_gemm_k_overhead(256);
  k->set_gemm_tile_m(128);
  k->set_gemm_tile_n(128);
  k->set_attention_fwd_efficiency(0.6);
  k->set_attention_fwd_seq(500);
  k->set_attention_bwd_efficiency(0.5);
  k->set_attention_bwd_seq(1000);
  k->set_vector_fraction(0.9);   // 2.7e12 B/s
  k->set_general_fraction(0.5);  // 1.5e12 B/s
  k->set_optimizer_fraction(0.75);
  k->set_launch_s(1e-6);
  return p;
}

Kernel G(int64_t m, int64_t n, int64_t k) {
  Kernel kernel;
  kernel.mutable_gemm()->set_m(m);
  kernel.mutable_gemm()->set_n(n);
  kernel.mutable_gemm()->set_k(k);
  return kernel;
}

TEST(KernelTime, LargeGemmRunsAtTheEfficiencyOfItsDepth) {
  // 4096 x 8192 x 4096: 32 x 64 = 2048 tiles of 128 x 128 fill all 100 SMs
  // and whole tiles; depth 4096 keeps 4096 / (4096 + 256) of e = 0.8:
  //   2 x 4096 x 8192 x 4096 = 2.748779e11 FLOPs / (1e15 x 0.752941)
  //   = 365.072 us; its operands, 2 x (4096 x 4096 + 2 x 4096 x 8192)
  //   = 167.77 MB, need 62.1 us at 2.7e12: bound by math. Plus 1 us.
  EXPECT_NEAR(KernelSeconds(G(4096, 8192, 4096), Gpu()), 366.072e-6, 1e-9);
  EXPECT_FALSE(KernelMemoryBound(G(4096, 8192, 4096), Gpu()));
}

TEST(KernelTime, ThinGemmLosesTilesAndSmsThenHbmBindsIt) {
  // m = 100: a 128-row tile is 100/128 = 0.78125 full; 1 x 64 tiles leave
  // 36 of 100 SMs idle (k = 4096 is too short to split: 100 / 64 = 1):
  //   e = 0.8 x 0.78125 x 0.64 x 4096/4352 = 0.376471,
  //   math 2 x 100 x 8192 x 4096 / (1e15 x 0.376471) = 17.826 us;
  // but its operands, 2 x (100 x 4096 + 4096 x 8192 + 100 x 8192)
  //   = 69,566,464 bytes, take 25.7654 us at 2.7e12. Plus 1 us.
  EXPECT_NEAR(KernelSeconds(G(100, 8192, 4096), Gpu()),
              69'566'464 / 2.7e12 + 1e-6, 1e-12);
  EXPECT_TRUE(KernelMemoryBound(G(100, 8192, 4096), Gpu()));
}

TEST(KernelTime, OneTileGemmIsSplitAlongK) {
  // 128 x 128 x 65536: one tile, so cuBLAS splits k into min(100 SMs,
  // 65536 / 256) = 100 slices of 655.36: e = 0.8 x 655.36 / 911.36
  // = 0.575281, math 2.147484e9 / 5.75281e14 = 3.733 us. The slices write
  // and read back fp32 partials: bytes 2 x (2 x 128 x 65536 + 128 x 128)
  // + 8 x 128 x 128 x 100 = 46.6944 MB, 17.294 us at 2.7e12. Plus 1 us.
  EXPECT_NEAR(KernelSeconds(G(128, 128, 65536), Gpu()), 18.294e-6, 1e-9);
}

TEST(KernelTime, CausalAttentionRunsHalfTheScoresAtItsSequenceEfficiency) {
  // b 2, 32 heads, s 2048, head dim 128, causal: 4 x 2 x 32 x 2048^2 x 128
  // / 2 = 3.436e10 FLOPs at 1e15 x 0.6 x 2048 / 2548 = 4.8226e14:
  // 71.247 us (its 134 MB of q, k, v and output take 49.7 us). Backward:
  // 2.5 x the FLOPs at 0.5 x 2048 / 3048: 255.73 us. Plus 1 us each.
  Kernel a;
  Attention* at = a.mutable_attention();
  at->set_batch(2);
  at->set_heads(32);
  at->set_kv_heads(32);
  at->set_seq(2048);
  at->set_head_dim(128);
  at->set_causal(true);
  const double flops = 4.0 * 2 * 32 * 2048.0 * 2048 * 128 / 2;
  EXPECT_NEAR(KernelSeconds(a, Gpu()),
              flops / (1e15 * 0.6 * 2048 / 2548) + 1e-6, 1e-12);
  at->set_backward(true);
  EXPECT_NEAR(KernelSeconds(a, Gpu()),
              2.5 * flops / (1e15 * 0.5 * 2048 / 3048) + 1e-6, 1e-12);
}

TEST(KernelTime, MemoryKernelsMoveTheirBytesAtTwoSpeeds) {
  // 27 MB vectorized at 2.7e12 and 15 MB on the general path at 1.5e12:
  // 10 + 10 us, and 3 launches.
  Kernel m;
  m.mutable_memory()->set_vector_bytes(27'000'000);
  m.mutable_memory()->set_general_bytes(15'000'000);
  m.mutable_memory()->set_launches(3);
  EXPECT_NEAR(KernelSeconds(m, Gpu()), 23e-6, 1e-12);
  // Adam over 1e8 parameters: 28 bytes each at 0.75 x 3e12.
  Kernel adam;
  adam.mutable_optimizer()->set_params(100'000'000);
  adam.mutable_optimizer()->set_bytes_per_param(28);
  EXPECT_NEAR(KernelSeconds(adam, Gpu()), 2.8e9 / 2.25e12 + 1e-6, 1e-12);
}

TEST(KernelTime, Fp8GemmRunsAtTheFp8RateOnOneByteOperands) {
  // FP8 tensor cores at 2e15 FLOP/s and e = 0.7 (against bf16's 1e15 and
  // 0.8). 4096 x 8192 x 4096 fills every SM and whole tiles as in
  // LargeGemmRunsAtTheEfficiencyOfItsDepth; depth 4096 keeps 4096 / 4352:
  //   2.748779e11 FLOPs / (2e15 x 0.7 x 4096 / 4352) = 208.6127 us;
  // its operands: 1 byte each, (4096 x 4096 + 4096 x 8192) = 50.33 MB,
  // and the bf16 output 2 x 4096 x 8192 = 67.11 MB, 43.5 us at 2.7e12:
  // bound by math. Plus 1 us: 209.6127 us against bf16's 366.072 us.
  Platform p = Gpu();
  p.mutable_gpu()->set_fp8_peak_flops(2e15);
  p.mutable_kernels()->set_fp8_gemm_efficiency(0.7);
  Kernel g = G(4096, 8192, 4096);
  g.mutable_gemm()->set_fp8(true);
  const double flops = 2.0 * 4096 * 8192 * 4096;
  EXPECT_NEAR(KernelSeconds(g, p), flops / (2e15 * 0.7 * 4096 / 4352) + 1e-6,
              1e-12);
  EXPECT_NEAR(KernelSeconds(g, p), 209.6127e-6, 1e-10);
  EXPECT_EQ(KernelBytes(g), 4096 * 4096 + 4096 * 8192 + 2 * 4096 * 8192);
  // A thin FP8 GEMM is bound by its bytes: m = 100 as in
  // ThinGemmLosesTilesAndSmsThenHbmBindsIt, operands of one byte:
  //   100 x 4096 + 4096 x 8192 + 2 x 100 x 8192 = 35,602,432 bytes.
  Kernel thin = G(100, 8192, 4096);
  thin.mutable_gemm()->set_fp8(true);
  EXPECT_NEAR(KernelSeconds(thin, p), 35'602'432 / 2.7e12 + 1e-6, 1e-12);
}

TEST(LayerKernels, Fp8LinearCastsEachOperandWhereItIsUsed) {
  // torchao's roofline of a compiled tensorwise Float8Linear, per linear of
  // W (out x in) on T tokens: the input's amax (2 bytes an element) and
  // one cast to both layouts (2 + 1 + 1) forward; the weight's amax (2) and
  // cast (3) forward and another cast (3) backward; the output gradient's
  // amax (2) and cast to both layouts (4) backward. LLaMA-7B's block at
  // T = 1024: q/k/v/o (4096 x 4096), gate/up (11008 x 4096), down
  // (4096 x 11008); its GEMMs are FP8, lm_head's not.
  const Model m = *BuiltinModel("llama-7b");
  Batch batch = test::Sequences(1, 1024);
  batch.flash_attention = true;
  batch.kernels.mutable_float8()->set_enabled(true);
  Batch bf16 = batch;
  bf16.kernels.clear_float8();
  constexpr int64_t T = 1024, H = 4096, F = 11008;
  struct Linear {
    int64_t out, in;
  };
  const Linear linears[] = {{H, H}, {H, H}, {H, H}, {H, H},
                            {F, H}, {F, H}, {H, F}};
  int64_t fwd = 0, bwd = 0;
  for (const Linear& l : linears) {
    fwd += 6 * T * l.in + 5 * l.out * l.in;
    bwd += 6 * T * l.out + 3 * l.out * l.in;
  }
  auto cast_bytes = [](const std::vector<Unit>& units, bool backward) {
    int64_t bytes = 0, gemms = 0;
    for (const Unit& u : units) {
      for (const Kernel& k : backward ? u.backward : u.forward) {
        if (k.has_gemm()) gemms += k.gemm().fp8();
        if (k.has_memory()) bytes += k.memory().vector_bytes();
      }
    }
    return std::pair<int64_t, int64_t>(bytes, gemms);
  };
  const auto f8 = BlockUnits(m, batch), b16 = BlockUnits(m, bf16);
  EXPECT_EQ(cast_bytes(f8, false).first - cast_bytes(b16, false).first, fwd);
  EXPECT_EQ(cast_bytes(f8, true).first - cast_bytes(b16, true).first, bwd);
  EXPECT_EQ(cast_bytes(f8, false).second, 7);
  EXPECT_EQ(cast_bytes(f8, true).second, 14);
  for (const Unit& u : HeadUnits(m, batch)) {
    for (const Kernel& k : u.forward) EXPECT_FALSE(k.gemm().fp8()) << k.name();
  }
}

TEST(LayerKernels, EagerLlamaBlockForwardFromItsKernels) {
  // LLaMA-7B, micro-batch 4 x 512: T = 2048 tokens, h = 4096, ffn 11008,
  // E = T h = 8,388,608 and F = T ffn = 22,544,384 elements; q, k, v
  // apart (HF), causal flash attention.
  const Model m = *BuiltinModel("llama-7b");
  Batch batch = test::Sequences(4, 512);
  batch.flash_attention = true;
  const std::vector<Unit> units = BlockUnits(m, batch);
  std::vector<std::string> names;
  KernelList op;
  for (const Unit& u : units) {
    for (const Kernel& k : u.forward) {
      names.push_back(k.name());
      *op.add_kernels() = k;
    }
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "rmsnorm", "q_proj", "k_proj", "v_proj", "rotary q", "rotary k",
                "attention", "o_proj", "residual add", "rmsnorm", "gate_proj",
                "silu", "up_proj", "swiglu mul", "down_proj", "residual add"}));
  constexpr double E = 2048.0 * 4096, F = 2048.0 * 11008;
  // Memory-bound bytes, counted op by op (kernels.cc):
  //   two eager RMSNorms, vector 14 E and general 22 E each, 8 launches;
  //   rotary on q and k, general 20 E each, 5 launches;
  //   residual adds 6 E vector; silu 4 F and the product 6 F vector.
  const double vector = 2 * 14 * E + 2 * 6 * E + 10 * F;
  const double general = 2 * 22 * E + 2 * 20 * E;
  const int launches = 2 * 8 + 2 * 5 + 2 + 2;
  int64_t v = 0, g = 0, n = 0;
  for (const Kernel& k : op.kernels()) {
    if (!k.has_memory()) continue;
    v += k.memory().vector_bytes();
    g += k.memory().general_bytes();
    n += k.memory().launches();
  }
  EXPECT_EQ(v, vector);
  EXPECT_EQ(g, general);
  EXPECT_EQ(n, launches);
  // Its time on Gpu(): every GEMM by the model above (whole tiles, all SMs:
  // e = 0.8 k / (k + 256)), attention (4 x 4 x 32 x 512^2 x 128 / 2 FLOPs
  // at 0.6 x 512 / 1012), memory bytes at their speeds, 1 us a launch.
  const Platform p = Gpu();
  auto gemm = [](double m, double n, double k) {
    return 2 * m * n * k / (1e15 * 0.8 * k / (k + 256)) + 1e-6;
  };
  const double gemms = 4 * gemm(2048, 4096, 4096) +
                       2 * gemm(2048, 11008, 4096) + gemm(2048, 4096, 11008);
  const double attention =
      4.0 * 4 * 32 * 512 * 512 * 128 / 2 / (1e15 * 0.6 * 512 / 1012) + 1e-6;
  const double memory = vector / 2.7e12 + general / 1.5e12 + launches * 1e-6;
  const OpCost cost = ComputeOpCost(op, p);
  EXPECT_NEAR(cost.seconds, gemms + attention + memory, 1e-12);
  EXPECT_NEAR(cost.compute_bound_s, gemms + attention, 1e-12);
  EXPECT_NEAR(cost.memory_bound_s, memory, 1e-12);
}

TEST(LayerKernels, UnitsOwnEveryParameterOfTheLayer) {
  for (const char* name : {"llama-7b", "llama-65b", "gpt3-175b"}) {
    const Model m = *BuiltinModel(name);
    for (const Layer& layer : ModelLayers(m, test::Sequences(1, 512))) {
      int64_t params = 0;
      for (const Unit& u : layer.units) params += u.params;
      EXPECT_EQ(params, layer.params) << name << " " << layer.name;
    }
  }
}

TEST(LayerKernels, FusedStyleReadsAndWritesOncePerOp) {
  // FUSED: one RMSNorm kernel (read x, write y: 4 bytes an element), rotary
  // 4 bytes, SwiGLU in one kernel (read gate and up, write the product).
  const Model m = *BuiltinModel("llama-7b");
  Batch batch = test::Sequences(1, 1024);
  batch.flash_attention = true;
  batch.kernels.set_style(KernelOptions::FUSED);
  int64_t bytes = 0;
  int launches = 0;
  for (const Unit& u : BlockUnits(m, batch)) {
    for (const Kernel& k : u.forward) {
      if (!k.has_memory()) continue;
      bytes += k.memory().vector_bytes() + k.memory().general_bytes();
      launches += k.memory().launches();
    }
  }
  constexpr int64_t E = 1024 * 4096, F = 1024 * 11008;
  // 2 norms x 4 E + rotary q and k 4 E each + 2 residual adds x 6 E
  // + SwiGLU 6 F; 2 + 2 + 2 + 1 launches.
  EXPECT_EQ(bytes, 2 * 4 * E + 2 * 4 * E + 2 * 6 * E + 6 * F);
  EXPECT_EQ(launches, 7);
}

}  // namespace
}  // namespace shardsim

#include "hw/runtime/kernel_work.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "sim/model/kernels.h"
#include "sim/model/model.h"
#include "tests/util/test_util.h"

namespace shardsim::hw {
namespace {

Kernel Memory(int64_t vector, int64_t general, int launches) {
  Kernel k;
  k.mutable_memory()->set_vector_bytes(vector);
  k.mutable_memory()->set_general_bytes(general);
  k.mutable_memory()->set_launches(launches);
  return k;
}

TEST(MoveLaunches, SplitsBytesOverPathsAndLaunches) {
  // 8 launches, 14 vector and 22 general bytes an element of 1,000,000:
  // vector gets round(8 x 14 / 36) = 3 launches, general 5.
  const Kernel k = Memory(14'000'000, 22'000'000, 8);
  const auto l = MoveLaunches(k.memory());
  ASSERT_EQ(l.size(), 8u);
  int64_t vector = 0, general = 0;
  for (const MoveLaunch& m : l) (m.vector ? vector : general) += m.bytes;
  EXPECT_EQ(vector, 14'000'000);
  EXPECT_EQ(general, 22'000'000);
  EXPECT_TRUE(l[0].vector && l[2].vector && !l[3].vector);
  // Vector: 14e6 / 3 = 4,666,666 r 2, the first launch takes the
  // remainder (4,666,668); each launch moves whole 16-byte vectors each
  // way: 2,333,334 and 2,333,333 both round down to 2,333,328, so 3
  // launches move 6 x 2,333,328. General: 22e6 / 5 = 4.4e6 a launch, in
  // 2-byte elements: exact.
  EXPECT_EQ(MovedBytes(k.memory()),
            2 * 2'333'328 + 2 * 2 * 2'333'328 + 22'000'000);
}

TEST(MoveLaunches, OneLaunchWithBothPathsBecomesTwo) {
  const auto l = MoveLaunches(Memory(64, 32, 1).memory());
  ASSERT_EQ(l.size(), 2u);
  EXPECT_TRUE(l[0].vector);
  EXPECT_EQ(l[0].bytes, 64);
  EXPECT_FALSE(l[1].vector);
  EXPECT_EQ(l[1].bytes, 32);
}

TEST(KernelOperands, Llama7bBlockAt10x512) {
  // The block's kernels for 10 x 512 tokens, flash attention, fused q/k/v:
  // T = 5120 tokens, h = 4096, ffn 11008, 32 heads of 128.
  absl::StatusOr<Model> m = BuiltinModel("llama-7b");
  ASSERT_TRUE(m.ok());
  Batch batch = test::Sequences(10, 512);
  batch.flash_attention = true;
  batch.kernels.set_fused_qkv(true);
  const std::vector<Unit> units = BlockUnits(*m, batch);
  bool saw_qkv = false, saw_down_wgrad = false, saw_attention = false;
  for (const Unit& u : units) {
    for (const auto* list : {&u.forward, &u.backward}) {
      for (const Kernel& k : *list) {
        if (k.name() == "qkv_proj") {
          // x (5120 x 4096) W^T (12288 x 4096): A, B, C in bf16.
          saw_qkv = true;
          EXPECT_EQ(k.gemm().m(), 5120);
          EXPECT_EQ(k.gemm().n(), 3 * 4096);
          EXPECT_EQ(k.gemm().k(), 4096);
          EXPECT_EQ(KernelOperands(k),
                    (std::vector<int64_t>{5120LL * 4096 * 2, 4096LL * 12288 * 2,
                                          5120LL * 12288 * 2}));
        }
        if (k.name() == "down_proj wgrad") {
          // dY^T (4096 x 5120) X (5120 x 11008) = dW (4096 x 11008).
          saw_down_wgrad = true;
          EXPECT_EQ(k.gemm().layout(), Gemm::WGRAD);
          EXPECT_EQ(k.gemm().m(), 4096);
          EXPECT_EQ(k.gemm().n(), 11008);
          EXPECT_EQ(k.gemm().k(), 5120);
        }
        if (k.has_attention() && k.attention().backward()) {
          // q, k, v, o, dO, dQ, dK, dV: 10 x 512 x 32 x 128 bf16 each
          // (41,943,040 bytes); statistics 10 x 32 x 512 fp32 (655,360).
          saw_attention = true;
          const std::vector<int64_t> ops = KernelOperands(k);
          ASSERT_EQ(ops.size(), 9u);
          EXPECT_EQ(ops[0], 41'943'040);
          EXPECT_EQ(ops[4], 655'360);
          EXPECT_EQ(WorkspaceBytes(k), 8 * 41'943'040 + 655'360);
        }
      }
    }
  }
  EXPECT_TRUE(saw_qkv && saw_down_wgrad && saw_attention);
}

TEST(KernelOperands, OptimizerNeedsOnlyItsFp32Gradient) {
  Kernel k;
  k.mutable_optimizer()->set_params(1000);
  k.mutable_optimizer()->set_bytes_per_param(28);
  EXPECT_EQ(KernelOperands(k), std::vector<int64_t>{4000});
  EXPECT_EQ(WorkspaceBytes(k), 4096);  // rounded up to 256
}

}  // namespace
}  // namespace shardsim::hw

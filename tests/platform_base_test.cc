// Platform and GPU model files that start from another one (`base`).
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "sim/scenario/platform_file.h"
#include "sim/scenario/scenario.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Data(const std::string& file) {
  return absl::StrCat(SHARDSIM_SOURCE_DIR, "/tests/data/platform_base/", file);
}

// four_nics.textproto is five lines: a comment, base: "dgx_h100" and
// network { nics_per_node: 4 }.
TEST(PlatformBase, FileOverShippedEqualsTheShippedOneEditedInCode) {
  absl::StatusOr<Platform> loaded =
      LoadPlatform(Data("four_nics.textproto"), "");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  Platform want = test::ShippedPlatform("dgx_h100");
  want.mutable_network()->set_nics_per_node(4);
  EXPECT_TRUE(MessageDifferencer::Equals(*loaded, want))
      << loaded->DebugString() << "\nvs\n"
      << want.DebugString();
  EXPECT_FALSE(loaded->has_base());
}

// Chained bases; a written false replaces the base's true (MergeFrom alone
// would keep true); a repeated field appends.
TEST(PlatformBase, ChainsScalarsReplaceRepeatedAppend) {
  absl::StatusOr<Platform> loaded =
      LoadPlatform(Data("no_sharp.textproto"), "");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  Platform want = test::ShippedPlatform("dgx_h100");
  want.set_name("dgx_h100_no_sharp");
  want.mutable_network()->set_nics_per_node(4);
  want.mutable_network()->set_sharp(false);
  Protocol* slow = want.add_protocols();
  slow->set_name("Slow");
  slow->set_base_latency_s(20e-6);
  slow->set_intra_alpha_s(5e-6);
  slow->set_inter_alpha_s(20e-6);
  slow->set_bandwidth_fraction(0.5);
  EXPECT_TRUE(MessageDifferencer::Equals(*loaded, want))
      << loaded->DebugString() << "\nvs\n"
      << want.DebugString();
  ASSERT_EQ(loaded->protocols_size(),
            test::ShippedPlatform("dgx_h100").protocols_size() + 1);
}

TEST(PlatformBase, LoopErrorsNamingItsFiles) {
  absl::StatusOr<Platform> loaded = LoadPlatform(Data("loop_a.textproto"), "");
  ASSERT_FALSE(loaded.ok());
  const std::string e(loaded.status().message());
  EXPECT_THAT(e, HasSubstr("loop"));
  EXPECT_THAT(e, HasSubstr("loop_a.textproto -> "));
  EXPECT_THAT(e, HasSubstr("loop_b.textproto -> "));
}

TEST(PlatformBase, UnknownBaseSuggestsTheNearestShippedName) {
  absl::StatusOr<Platform> loaded =
      LoadPlatform(Data("unknown_base.textproto"), "");
  ASSERT_FALSE(loaded.ok());
  const std::string e(loaded.status().message());
  EXPECT_THAT(e, HasSubstr("unknown_base.textproto: field base: \"dgx_h10\""));
  EXPECT_THAT(e, HasSubstr("did you mean \"dgx_h100\""));
}

TEST(PlatformBase, UnknownShippedPlatformSuggestsTheNearest) {
  absl::StatusOr<Platform> loaded = LoadPlatform("dgx_a10", "");
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(
      loaded.status().message(),
      HasSubstr("no such shipped platform (did you mean \"dgx_a100\"?)"));
}

// h100_96gb.textproto: base "h100_sxm5_80gb" with a new name and 96 GiB;
// sub/h100_96gb_node.textproto names it relative to sub/ (../), and
// on_sub.textproto takes that platform from the directory above.
TEST(PlatformBase, GpuModelBaseAndPathsRelativeToTheirFile) {
  absl::StatusOr<Platform> loaded = LoadPlatform(Data("on_sub.textproto"), "");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Platform h100 = test::ShippedPlatform("dgx_h100");
  EXPECT_EQ(loaded->name(), "dgx_h100_96gb");
  EXPECT_EQ(loaded->gpu().name(), "H100-96GB");
  EXPECT_EQ(loaded->gpu().memory_bytes(), int64_t{96} << 30);
  EXPECT_EQ(loaded->gpu().peak_flops(), h100.gpu().peak_flops());
  EXPECT_TRUE(MessageDifferencer::Equals(loaded->kernels(), h100.kernels()));
  EXPECT_TRUE(
      MessageDifferencer::Equals(loaded->interference(), h100.interference()));
}

TEST(PlatformBase, UnknownGpuModelBaseSuggestsTheNearest) {
  absl::StatusOr<Platform> loaded =
      LoadPlatform(Data("uses_gpu_unknown_base.textproto"), "");
  ASSERT_FALSE(loaded.ok());
  const std::string e(loaded.status().message());
  EXPECT_THAT(e, HasSubstr("gpu_unknown_base.textproto: field base"));
  EXPECT_THAT(e, HasSubstr("no such shipped GPU model"));
  EXPECT_THAT(e, HasSubstr("did you mean \"h100_sxm5_80gb\""));
}

TEST(PlatformBase, PlatformTextRoundTrips) {
  absl::StatusOr<std::string> text = PlatformText(Data("four_nics.textproto"));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("nics_per_node: 4"));
  EXPECT_THAT(*text, Not(HasSubstr("base:")));
  // What it prints loads back to the same platform.
  Platform reread;
  ASSERT_TRUE(MergeSetFields(*text, &reread).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(
      reread, *LoadPlatform(Data("four_nics.textproto"), "")));
}

}  // namespace
}  // namespace shardsim

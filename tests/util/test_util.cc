#include "tests/util/test_util.h"

#include <filesystem>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/scenario/scenario.h"

namespace shardsim::test {

std::string SourcePath(absl::string_view relative) {
  return absl::StrCat(SHARDSIM_SOURCE_DIR, "/", relative);
}

std::string TestTempDir() {
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string dir =
      info == nullptr
          ? ::testing::TempDir()
          : absl::StrCat(::testing::TempDir(), "/", info->test_suite_name(),
                         ".", info->name());
  std::filesystem::create_directories(dir);
  return dir;
}

std::string TinyModelPath() {
  return SourcePath("tests/data/tiny_model.textproto");
}

Platform ShippedPlatform(const std::string& name) {
  absl::StatusOr<Platform> p = LoadPlatform(name, "");
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Platform();
}

Model BuiltinOrFail(const std::string& name) {
  absl::StatusOr<Model> model = BuiltinModel(name);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : Model();
}

Batch Sequences(int64_t size, int64_t seq_len) {
  Batch batch;
  batch.micro_batch_size = size;
  batch.seq_len = seq_len;
  return batch;
}

Scenario Training(int micro_batches, int seq_len) {
  Scenario s;
  s.set_micro_batch_size(1);
  s.set_micro_batches(micro_batches);
  s.set_seq_len(seq_len);
  s.set_optimizer_bytes_per_param(12);
  return s;
}

}  // namespace shardsim::test

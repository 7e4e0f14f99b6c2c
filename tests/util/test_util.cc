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

Platform TestPlatform(const Knobs& k) {
  Platform p;
  p.set_name("test");
  p.set_gpus_per_node(k.gpus_per_node);
  p.set_nodes(0);
  p.mutable_gpu()->set_name("test-gpu");
  p.mutable_gpu()->set_peak_flops(1e15);
  p.mutable_gpu()->set_memory_bytes(int64_t{80} << 30);
  p.mutable_gpu()->set_hbm_bytes_per_s(2e12);
  p.mutable_nvswitch()->set_bandwidth(k.nvlink);
  Network* n = p.mutable_network();
  n->set_nics_per_node(k.nics_per_node);
  n->set_nic_bandwidth(k.nic);
  n->set_nics_per_leaf(0);  // one switch for every NIC
  n->set_oversubscription(1);
  Protocol* proto = p.add_protocols();
  proto->set_name("Only");
  proto->set_base_latency_s(k.base);
  proto->set_intra_alpha_s(k.alpha_intra);
  proto->set_inter_alpha_s(k.alpha_inter);
  proto->set_bandwidth_fraction(1.0);
  Efficiency* e = p.mutable_efficiency();
  e->set_nvlink_fraction(1);
  e->set_network_fraction(1);
  e->set_nvlink_direct_fraction(1);
  p.set_channels(k.channels);
  // Kernels at peak, no launch costs, no interference: the engine's
  // collectives alone.
  p.mutable_gpu()->set_sms(100);
  KernelModel* km = p.mutable_kernels();
  km->set_gemm_efficiency(1);
  km->set_gemm_tile_m(1);
  km->set_gemm_tile_n(1);
  km->set_attention_fwd_efficiency(1);
  km->set_attention_bwd_efficiency(1);
  km->set_vector_fraction(1);
  km->set_general_fraction(1);
  km->set_optimizer_fraction(1);
  p.mutable_interference()->set_nvlink_under_compute(1);
  return p;
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

Scenario TinyStep(const std::string& strategy, int gpus) {
  Scenario s;
  Model* m = s.mutable_model_def();
  m->set_name("tiny");
  m->set_layers(2);
  m->set_hidden(1024);
  m->set_heads(8);
  m->set_ffn_hidden(4096);
  m->set_vocab(32000);
  m->set_mlp(Model::SWIGLU);
  m->set_norm(Model::RMSNORM);
  s.set_platform("dgx_a100");
  s.add_strategies(strategy);
  s.add_gpus(gpus);
  s.set_micro_batch_size(1);
  s.set_micro_batches(1);
  s.set_seq_len(512);
  s.set_flash_attention(true);
  s.set_optimizer_bytes_per_param(12);
  return s;
}

}  // namespace shardsim::test

// What tests of every area share: the checkout's files, the shipped
// platforms and models, and the small inputs many tests start from.
#ifndef SHARDSIM_TESTS_UTIL_TEST_UTIL_H_
#define SHARDSIM_TESTS_UTIL_TEST_UTIL_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "sim/model/model.h"
#include "sim/schema/model.pb.h"
#include "sim/schema/platform.pb.h"
#include "sim/schema/scenario.pb.h"

namespace shardsim::test {

// `relative` under the checkout's root (the sources the tests read).
std::string SourcePath(absl::string_view relative);

// A folder of the running test's own under gtest's temporary folder,
// created: ctest runs tests in parallel processes, so a fixed file name in
// the shared folder would be written by two tests at once.
std::string TestTempDir();

// A platform written in the test, so that every number below is in sight:
// efficiencies 1, one wire protocol with payload fraction 1.
struct Knobs {
  int gpus_per_node = 8;
  int nics_per_node = 8;
  double nvlink = 100e9;       // B/s per GPU per direction
  double nic = 10e9;           // B/s per NIC per direction
  double base = 0;             // s, once per call
  double alpha_intra = 5e-6;   // s per step over NVSwitch
  double alpha_inter = 20e-6;  // s per step over the network
  int channels = 1;
};

Platform TestPlatform(const Knobs& k);

// tests/data/tiny_model.textproto: a model small enough to lower and
// simulate in milliseconds.
std::string TinyModelPath();

// A shipped platform (platforms/) or built-in model; a failure to load is
// a test failure, and an empty message is returned.
Platform ShippedPlatform(const std::string& name);
Model BuiltinOrFail(const std::string& name);

// A micro-batch of `size` sequences of `seq_len` tokens, every other
// setting at its default (no recomputation, no flash attention, EAGER
// kernels).
Batch Sequences(int64_t size, int64_t seq_len);

// Training of `micro_batches` micro-batches of one sequence of `seq_len`
// tokens with mixed-precision Adam (12 optimizer bytes per parameter):
// the scenario fields a lowering reads, nothing else set.
Scenario Training(int micro_batches, int seq_len = 512);

// One step of `strategy` on `gpus` GPUs of dgx_a100: a 2-block model of
// hidden 1024 (SwiGLU, RMSNorm), one micro-batch of one sequence of 512
// tokens, flash attention, 12 optimizer bytes per parameter.
Scenario TinyStep(const std::string& strategy, int gpus);

}  // namespace shardsim::test

#endif  // SHARDSIM_TESTS_UTIL_TEST_UTIL_H_

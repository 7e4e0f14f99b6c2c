// Helpers the fuzz targets share: quiet text-proto parsing, the fixed
// inputs (a tiny model, a shipped platform) the targets combine with the
// fuzzed one, and the bounds that keep one input cheap.
#ifndef SHARDSIM_TESTS_FUZZ_FUZZ_UTIL_H_
#define SHARDSIM_TESTS_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "sim/model/model.h"
#include "sim/scenario/scenario.h"
#include "sim/schema/model.pb.h"
#include "sim/schema/platform.pb.h"

namespace shardsim::fuzz {

// Files a fuzzed scenario names resolve from here: tests/data holds a model
// file and DeepSpeed configs to reach. Nothing is ever written there; the
// scenario file itself does not exist.
inline constexpr char kDataDir[] = SHARDSIM_SOURCE_DIR "/tests/data";
inline constexpr char kScenarioPath[] =
    SHARDSIM_SOURCE_DIR "/tests/data/fuzz.textproto";

// Memory rows per scenario: a bound on work, not on values (a user may
// list a thousand strategies and wait; the fuzzer must not).
inline constexpr int kMaxPoints = 64;

// The parser's messages would go to stderr on every bad input (slow, noisy).
class NoErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int, int, const std::string&) override {}
  void AddWarning(int, int, const std::string&) override {}
};

template <typename Message>
bool ParseText(const uint8_t* data, size_t size, Message* message) {
  google::protobuf::TextFormat::Parser parser;
  NoErrors errors;
  parser.RecordErrorsTo(&errors);
  return parser.ParseFromString(
      std::string(reinterpret_cast<const char*>(data), size), message);
}

// tests/data/tiny_model.textproto, inline: 2 layers, hidden 256.
inline Model TinyModel() {
  Model m;
  m.set_name("tiny");
  m.set_layers(2);
  m.set_hidden(256);
  m.set_heads(4);
  m.set_ffn_hidden(688);
  m.set_vocab(1024);
  m.set_mlp(Model::SWIGLU);
  m.set_norm(Model::RMSNORM);
  return m;
}

// A shipped platform, loaded once; a broken checkout is not a finding.
inline const Platform& ShippedPlatform() {
  static const Platform* platform = [] {
    absl::StatusOr<Platform> p = LoadPlatform("dgx_a100", "");
    if (!p.ok()) {
      std::fprintf(stderr, "fuzz: %s\n",
                   std::string(p.status().message()).c_str());
      std::abort();
    }
    return new Platform(*std::move(p));
  }();
  return *platform;
}

// Keeps the optimizer from dropping a result it cannot see used.
template <typename T>
void Use(const T& value) {
  asm volatile("" : : "r"(&value) : "memory");
}

}  // namespace shardsim::fuzz

#endif  // SHARDSIM_TESTS_FUZZ_FUZZ_UTIL_H_

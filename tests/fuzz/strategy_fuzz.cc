// A strategy spec as --strategy or a scenario's strategies give it (zero3,
// mics:shard_size=16, lins:p=1x1:g=1x1:os=8x1, x.json, ...), the whole
// input. A *.json spec names a file under tests/data, as in a scenario
// there; fuzzed names simply fail to open.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/strategy_run.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardsim::fuzz;
  const std::string spec(reinterpret_cast<const char*>(data), size);
  for (const shardsim::Mesh& mesh : kMeshes) RunStrategy(spec, kDataDir, mesh);
  return 0;
}

// A `shardsim-hw collective --json` results file: op, algorithm, gpus and
// rows[] of size_bytes, time_us, algbw_gbps, busbw_gbps, checked, wrong.
// ParseMeasurementText tells it from nccl-tests JSON by its "rows".
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/measurements_run.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  shardsim::fuzz::RunMeasurements("hw_collective.json", data, size);
  return 0;
}

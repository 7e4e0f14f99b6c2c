// An nccl-tests -J JSON file (version 2: args, env, config.devices,
// results[].out_of_place / in_place, average_bus_bandwidth). The file name
// gives no op: args[0] or experiment_name must.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/measurements_run.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  shardsim::fuzz::RunMeasurements("nccl_tests.json", data, size);
  return 0;
}

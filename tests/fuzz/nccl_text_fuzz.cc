// An nccl-tests text log (all_reduce_perf ... > log): the table, "# Rank"
// lines, the "Collective test starting" and "Avg bus bandwidth" lines.
// The file name gives no op, so the log must.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/measurements_run.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  shardsim::fuzz::RunMeasurements("nccl_tests.log", data, size);
  return 0;
}

// What the nccl_text, nccl_json and hw_results targets do with a file:
// ParseMeasurementText as calibrate and validate read it, then what they
// compute from the rows before simulating (which forks: not here).
#ifndef SHARDSIM_TESTS_FUZZ_MEASUREMENTS_RUN_H_
#define SHARDSIM_TESTS_FUZZ_MEASUREMENTS_RUN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/collective/sweep.h"
#include "sim/scenario/scenario.h"
#include "tests/fuzz/fuzz_util.h"
#include "validate/measurements.h"
#include "validate/validate.h"

namespace shardsim::fuzz {

// `path` decides the op where the file does not (all_gather_perf.txt).
inline void RunMeasurements(const std::string& path, const uint8_t* data,
                            size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<MeasurementSet> set = ParseMeasurementText(path, text);
  if (!set.ok()) return;
  // Validate(): measured busbw per out-of-place size, and the median.
  const std::vector<MeasurementRow> rows = set->Primary();
  const double bus = BusFactor(set->op, set->gpus);
  std::vector<double> busbw;
  for (const MeasurementRow& r : rows) {
    busbw.push_back(r.size_bytes / (r.time_us * 1e-6) / 1e9 * bus);
  }
  Use(Median(busbw));
  // SimulateSizes(): the platform and the mesh the set would run on.
  absl::StatusOr<Platform> platform = PlatformForSet(ShippedPlatform(), *set);
  if (!platform.ok()) return;
  Use(JobMesh(*platform, set->gpus));
}

}  // namespace shardsim::fuzz

#endif  // SHARDSIM_TESTS_FUZZ_MEASUREMENTS_RUN_H_

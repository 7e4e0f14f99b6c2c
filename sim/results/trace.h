// A step's timeline as Chrome-trace JSON (opens in Perfetto and
// chrome://tracing): one track per stream of GPU 0, compute and every
// collective as a slice with its bytes, group and algorithm. Every GPU runs
// the same program, so GPU 0's tracks are every GPU's.
#ifndef SHARDSIM_SIM_RESULTS_TRACE_H_
#define SHARDSIM_SIM_RESULTS_TRACE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

// times[id] = (start, end) in seconds of op `id`.
absl::Status WriteChromeTrace(const Schedule& schedule,
                              const std::vector<std::pair<double, double>>& times,
                              const std::string& title, const std::string& path);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_RESULTS_TRACE_H_

// A step's timeline as Chrome-trace JSON (opens in Perfetto and
// chrome://tracing): one process per GPU given, one track per stream,
// compute and every collective as a slice with its bytes, group and
// algorithm. The simulator gives one GPU (every GPU runs the same program);
// shardsim-hw gives every rank's measured times.
#ifndef SHARDSIM_SIM_RESULTS_TRACE_H_
#define SHARDSIM_SIM_RESULTS_TRACE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

struct TraceProcess {
  std::string name;  // "GPU 0 (every GPU)", "rank 3"
  // times[id] = (start, end) in seconds of op `id`.
  std::vector<std::pair<double, double>> times;
};

absl::Status WriteChromeTrace(const Schedule& schedule,
                              const std::vector<TraceProcess>& processes,
                              const std::string& title, const std::string& path);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_RESULTS_TRACE_H_

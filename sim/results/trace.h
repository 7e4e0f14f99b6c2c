// A step's timeline as Chrome-trace JSON (opens in Perfetto and
// chrome://tracing): one process per GPU given, one track per stream (and
// the host's, when given), compute and every collective as a slice with its
// bytes, group and algorithm, its kernels, and on the critical path the
// cause its time was charged to (args "critical_path"). The simulator gives one
// process per program (schedule.proto Program: one GPU stands for all of
// its class; a schedule of one program, one for every GPU); shardsim-hw
// gives every rank's measured times.
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
  // Optional, by op id: when the host issued it (a "host" track), and the
  // cause its time was charged to on the critical path ("" if not on it).
  std::vector<std::pair<double, double>> host;
  std::vector<std::string> causes;
  // Optional, by op id: a compute op's kernels as measured one by one, in
  // its kernel order (a "kernels" track, each event carrying its kernel).
  std::vector<std::vector<std::pair<double, double>>> kernels;
  // If >= 0, the ops of this program only (Op.program); else every op.
  int program = -1;
};

absl::Status WriteChromeTrace(const Schedule& schedule,
                              const std::vector<TraceProcess>& processes,
                              const std::string& title,
                              const std::string& path);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_RESULTS_TRACE_H_

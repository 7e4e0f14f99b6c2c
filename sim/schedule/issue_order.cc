#include "sim/schedule/issue_order.h"

#include <algorithm>

namespace shardsim {

absl::StatusOr<Walk> WalkSchedule(const Schedule& schedule,
                                  const std::vector<double>& host_cost,
                                  const std::vector<double>& seconds) {
  const int n = schedule.ops_size();
  const int programs = std::max(1, schedule.programs_size());
  Walk w;
  w.start.assign(n, 0);
  w.end.assign(n, 0);
  w.held_by.assign(n, -1);
  // Per program and stream: its last op so far, -1 for none.
  std::vector<int> stream_last(programs * Stream_ARRAYSIZE, -1);
  std::vector<double> hosts(programs, 0);    // when each host is free
  std::vector<int> host_held(programs, -1);  // the wait that set it, if any
  auto earlier = [&](int ref, int id) { return ref >= 0 && ref < id; };
  for (const Op& op : schedule.ops()) {
    const int id = op.id();
    if (id < 0 || id >= n) {
      return absl::InvalidArgumentError("schedule: op ids are not 0..n-1");
    }
    const int program = op.program();
    if (program < 0 || program >= programs) {
      return absl::InvalidArgumentError("schedule: an op of no program");
    }
    double& host = hosts[program];
    int& held = host_held[program];
    for (int h : op.host_waits()) {
      if (!earlier(h, id)) {
        return absl::InvalidArgumentError(
            "schedule: a host wait does not come before its op");
      }
      if (w.end[h] > host) held = h;
      host = std::max(host, w.end[h]);
    }
    const double host_start = host;
    host += host_cost[id];
    if (host_cost[id] > 0) held = -1;
    if (!Stream_IsValid(op.stream())) {
      return absl::InvalidArgumentError("schedule: an op on no stream");
    }
    int& last = stream_last[program * Stream_ARRAYSIZE + op.stream()];
    double start = op.has_compute() ? host_start : host;
    int by = held;
    if (last >= 0 && w.end[last] > start) {
      start = w.end[last];
      by = last;
    }
    for (int d : op.deps()) {
      if (!earlier(d, id)) {
        return absl::InvalidArgumentError(
            "schedule: a dependency does not come before its op");
      }
      if (w.end[d] > start) by = d;
      start = std::max(start, w.end[d]);
    }
    double end = start + seconds[id];
    if (op.has_compute()) end = std::max(end, host);
    w.start[id] = start;
    w.end[id] = end;
    w.held_by[id] = by;
    last = id;
  }
  return w;
}

}  // namespace shardsim

#include "sim/schedule/issue_order.h"

#include <algorithm>

namespace shardsim {
namespace {

// A whole schedule read as StepOps reads a folded one, with no copy of
// each op's references (a walk of a whole step reads them in place).
class WholeOps {
 public:
  explicit WholeOps(const Schedule& s) : s_(s) {}
  int size() const { return s_.ops_size(); }
  const Op& op(int id) const { return s_.ops(id); }
  const google::protobuf::RepeatedField<int32_t>& deps(int id) const {
    return s_.ops(id).deps();
  }
  const google::protobuf::RepeatedField<int32_t>& host_waits(int id) const {
    return s_.ops(id).host_waits();
  }
  const Schedule& base() const { return s_; }
  bool folded() const { return false; }

 private:
  const Schedule& s_;
};

// A folded step (WalkSchedule dispatches a whole one to WholeOps).
class FoldedOps {
 public:
  explicit FoldedOps(const StepOps& s) : s_(s) {}
  int size() const { return s_.size(); }
  const Op& op(int id) const { return s_.op(id); }
  StepOps::Refs deps(int id) const { return s_.deps(id); }
  StepOps::Refs host_waits(int id) const { return s_.host_waits(id); }
  const Schedule& base() const { return s_.base(); }
  bool folded() const { return true; }

 private:
  const StepOps& s_;
};

template <typename Ops>
absl::StatusOr<Walk> WalkOps(const Ops& ops,
                             const std::vector<double>& host_cost,
                             const std::vector<double>& seconds) {
  const int n = ops.size();
  const int programs = std::max(1, ops.base().programs_size());
  Walk w;
  w.start.assign(n, 0);
  w.end.assign(n, 0);
  w.held_by.assign(n, -1);
  // Per program and stream: its last op so far, -1 for none.
  std::vector<int> stream_last(programs * Stream_ARRAYSIZE, -1);
  std::vector<double> hosts(programs, 0);    // when each host is free
  std::vector<int> host_held(programs, -1);  // the wait that set it, if any
  auto earlier = [&](int ref, int id) { return ref >= 0 && ref < id; };
  for (int id = 0; id < n; ++id) {
    const Op& op = ops.op(id);
    // A folded step's ops are its base's, with the base's ids.
    if (!ops.folded() && op.id() != id) {
      return absl::InvalidArgumentError("schedule: op ids are not 0..n-1");
    }
    const int program = op.program();
    if (program < 0 || program >= programs) {
      return absl::InvalidArgumentError("schedule: an op of no program");
    }
    double& host = hosts[program];
    int& held = host_held[program];
    for (int h : ops.host_waits(id)) {
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
    for (int d : ops.deps(id)) {
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

}  // namespace

absl::StatusOr<Walk> WalkSchedule(const StepOps& ops,
                                  const std::vector<double>& host_cost,
                                  const std::vector<double>& seconds) {
  if (!ops.fold()) return WalkOps(WholeOps(ops.base()), host_cost, seconds);
  return WalkOps(FoldedOps(ops), host_cost, seconds);
}

absl::StatusOr<Walk> WalkSchedule(const Schedule& schedule,
                                  const std::vector<double>& host_cost,
                                  const std::vector<double>& seconds) {
  return WalkOps(WholeOps(schedule), host_cost, seconds);
}

}  // namespace shardsim

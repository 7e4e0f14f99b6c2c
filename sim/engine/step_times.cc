// StepTimes (replay.h): a step's op times, stored or expanded from a
// collapsed replay's, and the cause each was charged to.
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string_view>

#include "sim/engine/replay.h"

namespace shardsim {

namespace {

// Every cause the critical path charges (PathWalk); index 0: none.
constexpr std::string_view kCauses[] = {"",
                                        "compute",
                                        "optimizer",
                                        "launch overhead",
                                        "waiting on prefetch",
                                        "memory-limited prefetch depth",
                                        "bandwidth",
                                        "latency",
                                        "pipeline bubble",
                                        "point-to-point",
                                        "tensor parallel",
                                        "context parallel",
                                        "offload"};

}  // namespace

StepTimes::StepTimes(std::vector<OpTime> all)
    : simulated_(std::move(all)),
      size_(static_cast<int>(simulated_.size())),
      cause_(size_, 0) {}

StepTimes::StepTimes(std::vector<OpTime> simulated, int size,
                     const Repeat& repeat)
    : simulated_(std::move(simulated)),
      repeat_(repeat),
      size_(size),
      cause_(size, 0) {}

OpTime StepTimes::operator[](int id) const {
  OpTime t;
  if (!repeat_ || id < repeat_->near_end) {
    t = simulated_[id];
  } else {
    const Repeat& r = *repeat_;
    int blocks = r.dropped;  // the last blocks and the tail
    if (id < r.far_end) {
      blocks = r.lo + (id - r.first_op) / r.period_ops - r.first_repeated;
    }
    t = simulated_[id - blocks * r.period_ops];
    const double by = blocks * r.period_s;
    t.start += by;
    t.end += by;
    t.host_start += by;
    t.host_end += by;
  }
  if (!host_.empty()) {
    t.host_start = host_[id].first;
    t.host_end = host_[id].second;
  }
  t.cause = kCauses[cause_[id]];
  return t;
}

int StepTimes::LastToEnd() const {
  int last = -1;
  double end = 0;
  auto read = [&](int from, int to) {
    for (int id = from; id < to; ++id) {
      const double e = (*this)[id].end;
      if (last < 0 || e >= end) {
        last = id;
        end = e;
      }
    }
  };
  if (!repeat_) {
    read(0, size_);
    return last;
  }
  // An op of an earlier far block ends no later than its image in the
  // last (x + k p grows with k), which comes later: it is never the one.
  const Repeat& r = *repeat_;
  read(0, r.near_end);
  read(std::max(r.near_end, r.far_end - r.period_ops), size_);
  return last;
}

std::string_view StepTimes::cause(int id) const { return kCauses[cause_[id]]; }

void StepTimes::set_cause(int id, std::string_view cause) {
  for (size_t i = 0; i < std::size(kCauses); ++i) {
    if (kCauses[i] == cause) {
      cause_[id] = static_cast<uint8_t>(i);
      return;
    }
  }
  std::fprintf(stderr, "shardsim: StepTimes: cause \"%.*s\" is not listed\n",
               static_cast<int>(cause.size()), cause.data());
  std::abort();
}

}  // namespace shardsim

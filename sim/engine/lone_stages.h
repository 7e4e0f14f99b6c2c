// The lone-stage replays of the fast mode (collective_engine.h,
// set_replay_stages): what a stage's lone run recorded, and the domains
// (the fat tree, the NVSwitch ports) that know whether they are idle.
// Internal to the collective engine: collective_engine.cc and
// lone_stages.cc include it.
//
// Inter-node flows share only the fat tree's links: NVSwitch ports are other
// links, and the only ones whose bandwidth ever changes (SetNvlinkScale). So
// a stage's flows on the fat tree (all of an inter-node stage, the network
// hops of a ring across nodes) unfold the same way, flow for flow, every
// time they run while nothing else is on the tree. Their first lone run is
// recorded: each flow's bytes left at every instant one of them ends.
// Max-min rates change only when a flow on the tree starts or ends, so
// between two such instants every rate is constant and the bytes left are
// linear in time. Later lone runs replay the record without flows: each
// flow ends when it did. Flows reaching the tree during a replay disturb
// it: every replayed flow not yet done starts then as a real one with the
// bytes the record leaves it (rounded to whole bytes), so that from that
// instant SimGrid shares the links as it would have. Direct all-to-alls
// (qgZ) need this shortcut to be affordable: a 1024-GPU inter-node
// all-to-all is 127 steps of 1024 flows per call, the same steps call
// after call.
#ifndef SHARDSIM_SIM_ENGINE_LONE_STAGES_H_
#define SHARDSIM_SIM_ENGINE_LONE_STAGES_H_

#include <algorithm>
#include <cstdint>
#include <simgrid/s4u.hpp>
#include <utility>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "sim/engine/collective_engine.h"

namespace shardsim {

// A lone run, from its start: when each flow ended, and at each instant a
// flow ended (at[0] = 0), every flow's bytes left.
struct CollectiveEngine::LoneRecord {
  std::vector<double> finish;
  std::vector<double> at;
  std::vector<std::vector<double>> left;

  // Flow i's bytes left `t` seconds after the start.
  double Left(size_t i, double t) const {
    const size_t k = std::upper_bound(at.begin(), at.end(), t) - at.begin();
    if (k == at.size()) return 0;
    const double x = (t - at[k - 1]) / (at[k] - at[k - 1]);
    return left[k - 1][i] + (left[k][i] - left[k - 1][i]) * x;
  }
  // Appends it as the flows' state, `t` seconds after the start.
  void Snap(double t, const std::vector<Flow>& flows) {
    if (!at.empty() && at.back() == t) return;
    at.push_back(t);
    left.emplace_back();
    for (const Flow& f : flows) {
      left.back().push_back(f.comm != nullptr ? f.comm->get_remaining()
                                              : static_cast<double>(f.bytes));
    }
  }
};

// A step-by-step stage (an all-to-all's) whose steps all run on the fat
// tree alone and are all recorded replays as one wait, not a wait per step
// and one per alpha: 127 steps per call of qgZ's all-to-all at 1024 GPUs.
// Its run is theirs one after the other, each step from the end of the
// previous one's alphas (as RunFlows ends it), and the tree is idle between
// a step's last flow and the next step, as it is step by step.
struct CollectiveEngine::LoneChain {
  bool chains = false;  // false: a step has flows of both domains, or none
  LoneStages* lone = nullptr;              // the steps' domain
  std::vector<const LoneRecord*> records;  // per step
  std::vector<double> last;                // per step: its last flow's end
  std::vector<double> length;   // per step: until its last alpha is done
  std::vector<double> latency;  // per step: that alpha (RunFlows' return)
};

// A chain's replay from step `first`: when each step starts.
struct CollectiveEngine::ChainRun {
  const LoneChain* chain;
  size_t first;
  int part;                    // the caller's Progress::part before it
  std::vector<double> starts;  // of steps first.., then the chain's end

  // The index in `starts` of the step under way at `now`.
  size_t At(double now) const {
    const size_t i =
        std::upper_bound(starts.begin(), starts.end(), now) - starts.begin();
    return std::min(i, starts.size() - 1) - 1;
  }
  // Whether flows of the step under way are still on the tree.
  bool Busy(double now) const {
    const size_t i = At(now);
    return now < starts[i] + chain->last[first + i];
  }
  // As Progress::AppendState would step by step.
  void AppendState(double now, std::vector<double>* out,
                   std::vector<double>* bytes) const {
    const size_t i = At(now);
    const LoneRecord& r = *chain->records[first + i];
    const double t = now - starts[i];
    const bool alphas = t >= chain->last[first + i];
    out->push_back(part + 2 * static_cast<double>(i) + (alphas ? 2 : 1));
    if (alphas) {
      out->push_back(starts[i + 1] - now);
      return;
    }
    out->push_back(static_cast<double>(r.finish.size()));
    for (size_t f = 0; f < r.finish.size(); ++f) bytes->push_back(r.Left(f, t));
  }
};

class CollectiveEngine::LoneStages {
 public:
  // `scale`: as Rescale's, now.
  explicit LoneStages(double scale)
      : mutex_(simgrid::s4u::Mutex::create()),
        wake_(simgrid::s4u::ConditionVariable::create()),
        scale_(scale) {}

  // Records (and chains) are kept per stage and per bandwidth scale of
  // the domain's links, and never move.
  const LoneRecord* Find(const std::vector<Hop>* stage) const {
    auto it = records_.find({stage, scale_});
    return it == records_.end() ? nullptr : &it->second;
  }
  void Keep(const std::vector<Hop>* stage, LoneRecord record) {
    ++counts_.recorded;
    records_.try_emplace({stage, scale_}, std::move(record));
  }
  // Chains are made once their steps are all recorded.
  const LoneChain* FindChain(const Stage* stage) const {
    auto it = chains_.find({stage, scale_});
    return it == chains_.end() ? nullptr : &it->second;
  }
  const LoneChain* KeepChain(const Stage* stage, LoneChain chain) {
    return &chains_.try_emplace({stage, scale_}, std::move(chain))
                .first->second;
  }

  // The domain's links change bandwidth by `scale` (x their own) from
  // now: a replay under way turns real, a run under way is not lone.
  // (Its flows' rates are bounded by no link's bandwidth at their start:
  // Fabric::OpenNvlink.)
  void Rescale(double scale) {
    Disturb();
    ++starts_;
    scale_ = scale;
  }

  // Nothing in the domain: no real flows, no replay.
  bool Idle() const { return real_ == 0 && replay_ == nullptr; }

  // Before flows reach the domain: a replay under way turns real (its
  // owner starts its flows at this same instant, and counts as real). A
  // chain between two steps is cut instead: its owner goes on step by step
  // from the next one, and the domain is idle till then.
  void Disturb() {
    if (replay_ == nullptr) return;
    Replay* r = replay_;
    replay_ = nullptr;
    const double now = simgrid::s4u::Engine::get_clock();
    if (now >= r->end) return;  // its flows end now
    if (r->chain != nullptr && !r->chain->Busy(now)) {
      r->cut_at = now;
    } else {
      r->disturbed_at = now;
      ++counts_.disturbed;
      ++real_;
    }
    wake_->notify_all();
  }

  // Real flows in the domain from now until Stop(). Returns the number of
  // starts so far: a run was alone if it is unchanged at its end.
  uint64_t Start() {
    ++real_;
    return ++starts_;
  }
  void Stop() { --real_; }
  uint64_t starts() const { return starts_; }
  const ReplayCounts& counts() const { return counts_; }
  // Stages replayed, in whole or in part.
  void CountReplays(int64_t stages) { counts_.replayed += stages; }

  struct Replay {
    double end = 0;  // its last flow's end (a chain's: its last alpha's)
    const ChainRun* chain = nullptr;  // a chain's steps
    double disturbed_at = -1;         // when it turned real, if it did
    double cut_at = -1;               // a chain: when it was cut, if it was
  };
  // From an Idle() domain: waits until `r` ends, is disturbed (its owner
  // then starts its flows and calls Stop()) or cut.
  void Wait(Replay* r) {
    replay_ = r;
    ++starts_;
    std::unique_lock<simgrid::s4u::Mutex> lock(*mutex_);
    while (r->disturbed_at < 0 && r->cut_at < 0 &&
           simgrid::s4u::Engine::get_clock() < r->end) {
      wake_->wait_until(lock, r->end);
    }
    if (replay_ == r) replay_ = nullptr;
  }

 private:
  simgrid::s4u::MutexPtr mutex_;
  simgrid::s4u::ConditionVariablePtr wake_;
  absl::node_hash_map<std::pair<const std::vector<Hop>*, double>, LoneRecord>
      records_;
  absl::node_hash_map<std::pair<const Stage*, double>, LoneChain> chains_;
  double scale_;
  int real_ = 0;  // flow sets in the domain now (RunFlows calls)
  uint64_t starts_ = 0;
  Replay* replay_ = nullptr;
  ReplayCounts counts_;
};

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ENGINE_LONE_STAGES_H_

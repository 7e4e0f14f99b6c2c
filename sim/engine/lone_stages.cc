// The collective engine's lone-stage replays (lone_stages.h): a stage's
// flows of one domain recorded on their first lone run, replayed on later
// ones, and turned real where other flows disturb them.
#include "sim/engine/lone_stages.h"

#include <algorithm>
#include <memory>
#include <simgrid/s4u.hpp>
#include <utility>
#include <vector>

#include "sim/engine/collective_engine.h"
#include "sim/engine/flow_workers.h"

namespace sg4 = simgrid::s4u;

namespace shardsim {

void CollectiveEngine::set_replay_stages(bool on) {
  const bool replays = on && mode_ == FlowMode::kFast;
  // The fat tree's links never change bandwidth.
  lone_tree_ = replays ? std::make_unique<LoneStages>(1) : nullptr;
  lone_nvswitch_.clear();
  const size_t domains = std::max<size_t>(1, programs_.size());
  for (size_t p = 0; replays && p < domains; ++p) {
    lone_nvswitch_.push_back(
        std::make_unique<LoneStages>(fabric_.nvlink_scale()));
  }
  stage_flows_.clear();  // built to run together or apart (FlowsOf)
}

CollectiveEngine::ReplayCounts CollectiveEngine::replay_counts() const {
  if (lone_tree_ == nullptr) return ReplayCounts();
  ReplayCounts c = lone_tree_->counts();
  for (const std::unique_ptr<LoneStages>& ports : lone_nvswitch_) {
    const ReplayCounts& n = ports->counts();
    c.recorded += n.recorded;
    c.replayed += n.replayed;
    c.disturbed += n.disturbed;
  }
  return c;
}

void CollectiveEngine::RunLone(LoneStages* lone, const std::vector<Hop>* stage,
                               double start, const std::vector<Flow>& flows,
                               std::vector<Flow>* net,
                               std::vector<double>* finish, Progress* progress,
                               const Resume* resume) {
  if (resume != nullptr) {
    RunRest(lone, start, *resume->record, resume->at - start, flows, net,
            progress);
    for (const Flow& f : *net) finish->push_back(f.finish);
    return;
  }
  lone->Disturb();
  const bool alone = lone->Idle();
  const LoneRecord* record = alone ? lone->Find(stage) : nullptr;
  if (record != nullptr &&
      ReplayLone(lone, start, *record, flows, net, progress)) {
    finish->resize(flows.size());
    for (size_t i = 0; i < flows.size(); ++i) {
      (*finish)[i] = start + record->finish[i];
    }
    return;
  }
  if (record == nullptr) {
    *net = flows;
    progress->net = net;
    const uint64_t starts = lone->Start();
    if (!alone) {
      Workers().Run(net);
      lone->Stop();
    } else {
      LoneRecord r;
      r.Snap(0, *net);
      Workers().Run(net,
                    [&] { r.Snap(sg4::Engine::get_clock() - start, *net); });
      lone->Stop();
      if (lone->starts() == starts) {  // nothing else reached the domain
        for (const Flow& f : *net) r.finish.push_back(f.finish - start);
        lone->Keep(stage, std::move(r));
      }
    }
  }
  for (const Flow& f : *net) finish->push_back(f.finish);
}

bool CollectiveEngine::ReplayLone(LoneStages* lone, double start,
                                  const LoneRecord& record,
                                  const std::vector<Flow>& flows,
                                  std::vector<Flow>* net, Progress* progress) {
  LoneStages::Replay r;
  r.end = start + *std::max_element(record.finish.begin(), record.finish.end());
  progress->net = &flows;  // none started: the record says what is left
  progress->replay = &record;
  progress->replay_start = start;
  lone->CountReplays(1);
  lone->Wait(&r);
  progress->replay = nullptr;
  if (r.disturbed_at < 0) return true;
  RunRest(lone, start, record, r.disturbed_at - start, flows, net, progress);
  return false;
}

void CollectiveEngine::RunRest(LoneStages* lone, double start,
                               const LoneRecord& record, double t,
                               const std::vector<Flow>& flows,
                               std::vector<Flow>* net, Progress* progress) {
  // Flows done by then run as empty ones: the collapse sees 0 bytes left,
  // as it would, and they are one list of flows with the rest.
  *net = flows;
  progress->net = net;
  for (size_t i = 0; i < net->size(); ++i) {
    Flow& f = (*net)[i];
    f.bytes = record.finish[i] <= t
                  ? 0
                  : static_cast<uint64_t>(std::llround(record.Left(i, t)));
  }
  Workers().Run(net);
  lone->Stop();
  for (size_t i = 0; i < net->size(); ++i) {
    if (record.finish[i] <= t) (*net)[i].finish = start + record.finish[i];
  }
}

const CollectiveEngine::LoneChain* CollectiveEngine::ChainOf(const Entry& e,
                                                             const Stage& stage,
                                                             int program) {
  // The domain of its first step's flows.
  const bool on_tree = !FlowsOf(e, stage.by_step[0]).net.empty();
  LoneStages* lone = on_tree ? lone_tree_.get() : Nvswitch(program);
  if (const LoneChain* c = lone->FindChain(&stage); c != nullptr) {
    return c->chains ? c : nullptr;
  }
  LoneChain c;
  c.lone = lone;
  for (const std::vector<Hop>& step : stage.by_step) {
    const StageFlows& flows = FlowsOf(e, step);
    const std::vector<Flow>& other = on_tree ? flows.local : flows.net;
    if (!other.empty() || flows.alpha.empty()) {
      lone->KeepChain(&stage, LoneChain());  // never chains
      return nullptr;
    }
    const LoneRecord* r = lone->Find(&step);
    if (r == nullptr) return nullptr;  // not yet
    // The step's end as RunFlows finds it (no floor).
    double length = 0;
    double latency = 0;
    for (size_t i = 0; i < r->finish.size(); ++i) {
      const double done = r->finish[i] + flows.alpha[i];
      if (done > length) {
        length = done;
        latency = flows.alpha[i];
      }
    }
    c.records.push_back(r);
    c.last.push_back(*std::max_element(r->finish.begin(), r->finish.end()));
    c.length.push_back(length);
    c.latency.push_back(latency);
  }
  c.chains = true;
  return lone->KeepChain(&stage, std::move(c));
}

size_t CollectiveEngine::RunChain(const Entry& e, const Stage& stage,
                                  const LoneChain& chain, size_t first,
                                  Progress* progress, int program,
                                  double* latency) {
  const size_t steps = stage.by_step.size();
  ChainRun run{&chain, first, progress->part, {}};
  double t = sg4::Engine::get_clock();
  run.starts.push_back(t);
  for (size_t j = first; j < steps; ++j)
    run.starts.push_back(t += chain.length[j]);
  LoneStages::Replay r;
  r.end = run.starts.back();
  r.chain = &run;
  progress->chain = &run;
  chain.lone->Wait(&r);
  progress->chain = nullptr;
  const bool stopped = r.disturbed_at >= 0 || r.cut_at >= 0;
  const size_t stop =
      stopped ? first + run.At(sg4::Engine::get_clock()) : steps;
  chain.lone->CountReplays(static_cast<int64_t>(stop - first) +
                           (stopped ? 1 : 0));
  for (size_t j = first; j < stop; ++j) *latency += chain.latency[j];
  progress->part += 2 * static_cast<int>(stop - first);
  if (!stopped) return steps;
  const double start = run.starts[stop - first];
  if (r.disturbed_at >= 0) {
    const Resume resume{chain.records[stop], start, r.disturbed_at};
    *latency +=
        RunFlows(e, stage.by_step[stop], 0, 0, progress, program, &resume);
  } else {  // cut after this step's flows: its alphas run out
    progress->part += 2;
    progress->until = run.starts[stop - first + 1];
    sg4::this_actor::sleep_until(progress->until);
    progress->until = -1;
    *latency += chain.latency[stop];
  }
  return stop + 1;
}

}  // namespace shardsim

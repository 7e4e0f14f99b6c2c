// Point-to-point sends between programs (collective_engine.h, RunSend):
// a pipeline's activations, one flow per rank pair on the links a
// collective's hop between the same two ranks would take.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <simgrid/s4u.hpp>
#include <vector>

#include "sim/collective/estimate.h"
#include "sim/collective/wire_bytes.h"
#include "sim/engine/collective_engine.h"
#include "sim/engine/flow_workers.h"
#include "sim/engine/lone_stages.h"

namespace sg4 = simgrid::s4u;

namespace shardsim {

CollectiveEngine::CallTime CollectiveEngine::RunSend(
    const PointToPoint& send, const std::vector<int>& from,
    const std::vector<int>& to, Progress* progress) {
  Progress unused;
  if (progress == nullptr) progress = &unused;
  bool across = false;
  for (size_t i = 0; i < from.size(); ++i) {
    across = across || !fabric_.SameNode(from[i], to[i]);
  }
  const Protocol* best =
      SendProtocol(fabric_.platform(), send.bytes(), across,
                   across ? fabric_.NicBandwidth() : fabric_.NvlinkBandwidth());
  if (best == nullptr) {  // ValidatePlatform requires one at least
    std::fprintf(stderr, "shardsim: a send on a platform without protocols\n");
    std::abort();
  }
  const Protocol& proto = *best;
  const double start = sg4::Engine::get_clock();
  ++progress->part;
  progress->until = start + proto.base_latency_s();
  sg4::this_actor::sleep_for(proto.base_latency_s());
  progress->until = -1;
  const uint64_t bytes = WireBytes(static_cast<double>(send.bytes()), proto);
  std::vector<Flow> flows;
  std::vector<double> alpha;
  for (size_t i = 0; i < from.size(); ++i) {
    if (fabric_.SameNode(from[i], to[i])) {
      flows.push_back(
          {fabric_.gpu(from[i]), fabric_.gpu(to[i]), bytes, nullptr, 0, true});
      alpha.push_back(proto.intra_alpha_s());
    } else {
      flows.push_back(
          {fabric_.nic(from[i]), fabric_.nic(to[i]), bytes, nullptr, 0, false});
      alpha.push_back(proto.inter_alpha_s());
    }
  }
  // The domains the flows reach (lone_stages.h) run no replay meanwhile:
  // the fat tree, and the NVSwitch ports of both programs inside a node.
  std::vector<LoneStages*> domains;
  if (lone_tree_ != nullptr) {
    for (size_t i = 0; i < from.size(); ++i) {
      if (!flows[i].nvswitch) {
        domains.push_back(lone_tree_.get());
      } else {
        domains.push_back(Nvswitch(program_of_[from[i]]));
        domains.push_back(Nvswitch(program_of_[to[i]]));
      }
    }
    std::sort(domains.begin(), domains.end());
    domains.erase(std::unique(domains.begin(), domains.end()), domains.end());
  }
  for (LoneStages* d : domains) {
    d->Disturb();
    d->Start();
  }
  ++progress->part;
  progress->flows = &flows;
  Workers().Run(&flows);
  progress->flows = nullptr;
  for (LoneStages* d : domains) d->Stop();
  double end = sg4::Engine::get_clock();
  double step_alpha = 0;
  for (size_t i = 0; i < flows.size(); ++i) {
    if (flows[i].finish + alpha[i] > end) {
      end = flows[i].finish + alpha[i];
      step_alpha = alpha[i];
    }
  }
  ++progress->part;
  progress->until = end;
  sg4::this_actor::sleep_until(end);
  progress->until = -1;
  CallTime t;
  t.seconds = sg4::Engine::get_clock() - start;
  t.latency_s = std::min(t.seconds, proto.base_latency_s() + step_alpha);
  return t;
}

}  // namespace shardsim

// Node and network symmetry (collective_engine.h, UseSymmetry): which
// flows stand for others, judged on every call the engine prepared.
#include <algorithm>
#include <simgrid/s4u.hpp>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "sim/collective/wire_bytes.h"
#include "sim/engine/collective_engine.h"

namespace sg4 = simgrid::s4u;

namespace shardsim {

bool CollectiveEngine::AllIntraSymmetric() const {
  bool all = true;
  for (const Entry* e : used_) all = all && e->summary.intra_symmetric;
  return all;
}

int CollectiveEngine::NetworkPeriod() const {
  const int nodes = fabric_.mesh().nodes;
  // NICs at different speeds (platform.proto Degraded): the twins of a
  // flow would not run alike.
  if (!fabric_.nics_alike()) return nodes;
  const int per_node = fabric_.platform().network().nics_per_node();
  const int nics = nodes * per_node;
  // A flow as the network sees it from its sending node n: the NIC it
  // leaves by and the one it enters, both counted from n's first NIC
  // (wrapping), its wire bytes and alpha. Node n's flows shifted by P
  // nodes are node n + P's exactly when n's relative flows are n + P's,
  // so a stage's flows repeat every P nodes when every node's relative
  // flows, sorted, equal those P nodes on.
  using NetFlow = std::tuple<int, int, uint64_t, double>;
  std::vector<std::vector<NetFlow>> from(nodes);  // by sending node
  auto repeats = [&](int by) {
    for (int n = 0; n < nodes; ++n) {
      if (from[n] != from[(n + by) % nodes]) return false;
    }
    return true;
  };
  // Periods of a set of flows are the multiples of its least one (they
  // form a subgroup of the shifts), so each stage only moves P up to the
  // next multiple of P, dividing the job's nodes, under which it repeats.
  int period = 1;
  absl::flat_hash_set<std::pair<int, int>> pairs;
  auto add = [&](const Entry& e, const std::vector<Hop>& hops) {
    for (std::vector<NetFlow>& f : from) f.clear();
    for (const Hop& h : hops) {  // each node's flows are sorted below
      if (!h.inter) continue;
      const uint64_t bytes = WireBytes(h.elements, *e.protocol);
      for (const std::vector<int>& group : e.groups) {
        const Route r = RouteOf(e, group, h.src, h.dst);
        const int n = r.from_nic / per_node;
        const int first = n * per_node;
        from[n].emplace_back(r.from_nic - first,
                             (r.to_nic - first + nics) % nics, bytes,
                             h.steps * r.alpha);
        if (!fabric_.one_switch()) pairs.insert({r.from_nic, r.to_nic});
      }
    }
    for (std::vector<NetFlow>& f : from) std::sort(f.begin(), f.end());
    while (period < nodes && !repeats(period)) {
      int next = period * 2;
      while (nodes % next != 0) next += period;
      period = next;
    }
  };
  for (const Entry* e : used_) {
    for (const Stage& stage : e->summary.stages) {
      if (period == nodes) break;
      if (stage.by_step.empty()) add(*e, stage.hops);
      for (const std::vector<Hop>& step : stage.by_step) add(*e, step);
    }
  }
  if (period == nodes) return nodes;
  // A link that only ever carries flows of one sending NIC (or one
  // receiving NIC), at a NIC's speed, never carries more than that NIC's
  // link does: under the max-min shares found without it, it is never over
  // its capacity, so those shares are the max-min ones with it too. One
  // switch has no such link (no pair is listed then). An up-link slower
  // than a NIC (an oversubscription that does not divide the leaf's ports,
  // fat_tree.h) can hold back even one NIC's flows: no symmetry then.
  struct Users {
    int from;
    int to;  // -1: several
  };
  absl::flat_hash_map<const sg4::Link*, Users> users;
  std::vector<sg4::Link*> links;
  for (const auto& [from, to] : pairs) {
    links.clear();
    fabric_.nic_host(from)->route_to(fabric_.nic_host(to), links, nullptr);
    for (size_t i = 1; i + 1 < links.size(); ++i) {
      if (links[i]->get_bandwidth() < fabric_.NicBandwidth()) return nodes;
      auto [it, fresh] = users.try_emplace(links[i], Users{from, to});
      Users& u = it->second;
      if (u.from != from) u.from = -1;
      if (u.to != to) u.to = -1;
      if (u.from < 0 && u.to < 0) return nodes;
    }
  }
  return period;
}

bool CollectiveEngine::ProgramsOwnNodes() const {
  const int per_node = fabric_.mesh().gpus_per_node;
  std::vector<int> count(fabric_.mesh().nodes, 0);
  for (const std::vector<int>& ranks : programs_) {
    std::fill(count.begin(), count.end(), 0);
    for (int rank : ranks) ++count[rank / per_node];
    for (int c : count) {
      if (c != 0 && c != per_node) return false;
    }
  }
  return true;
}

void CollectiveEngine::UseSymmetry() {
  // Several programs: each program's first node stands for its others,
  // where programs hold whole nodes (a node's ports then carry one
  // program's calls, and sends run NIC to NIC). Ports at different speeds:
  // one node's flows stand for no other node's.
  node_symmetry_ = node_symmetry_on_ &&
                   (programs_.empty() || ProgramsOwnNodes()) &&
                   AllIntraSymmetric() && fabric_.ports_alike();
  net_period_ = network_symmetry_ && mode_ == FlowMode::kFast
                    ? NetworkPeriod()
                    : fabric_.mesh().nodes;
  stage_flows_.clear();  // built for this period
}

}  // namespace shardsim

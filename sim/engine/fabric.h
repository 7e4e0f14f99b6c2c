// Stage 5 (engine): a Platform built in SimGrid.
//
// Every GPU has two network endpoints (docs/engine.md §4): a host in the
// NVSwitch star zone, whose private split-duplex link is its switch port,
// and the host of the NIC it uses, a leaf of one fat-tree zone. Transfers
// inside a node go GPU host to GPU host, transfers between nodes NIC host to
// NIC host, so no route crosses zones. Links have no latency: the per-step
// alpha of the wire protocol is added by the collective engine, because
// SimGrid's CM02 model would otherwise share bandwidth by route latency.
#ifndef SHARDSIM_SIM_ENGINE_FABRIC_H_
#define SHARDSIM_SIM_ENGINE_FABRIC_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/fat_tree.h"
#include "sim/base/group.h"
#include "sim/engine/degraded.h"
#include "sim/schema/platform.pb.h"

namespace simgrid::s4u {
class Host;
class Link;
}  // namespace simgrid::s4u

namespace shardsim {

class Fabric {
 public:
  // Builds the platform for `mesh` into this process's SimGrid engine, which
  // must exist and be empty. Errors name the platform field at fault.
  // `drop_dominated`: the classes of degraded GPUs as ComputeClasses
  // keeps them (false: every class, for checking).
  static absl::StatusOr<std::unique_ptr<Fabric>> Build(
      const Platform& platform, const Mesh& mesh, bool drop_dominated = true);

  const Platform& platform() const { return platform_; }
  const Mesh& mesh() const { return mesh_; }

  bool SameNode(int a, int b) const {
    return a / mesh_.gpus_per_node == b / mesh_.gpus_per_node;
  }
  // NVSwitch endpoint of GPU `rank`.
  simgrid::s4u::Host* gpu(int rank) const { return gpus_[rank]; }
  // Network endpoint GPU `rank` sends and receives through.
  simgrid::s4u::Host* nic(int rank) const { return nics_[NicOf(rank)]; }
  int NicOf(int rank) const;  // node * nics_per_node + its NIC there
  simgrid::s4u::Host* nic_host(int nic) const { return nics_[nic]; }
  // The network is one switch (adaptive routing, or nics_per_leaf 0):
  // every route between two NICs is their own two links.
  bool one_switch() const { return tree_.one_switch(); }

  // Network symmetry (docs/engine.md §8): NIC `nic`'s sending and
  // receiving halves as hosts of their own. A route from an out host to an
  // in host crosses the first's up link and the second's down link, each
  // at a NIC's speed, and nothing else; two hosts, so that a NIC sending
  // to its own twin is never a self-send. For the NICs of the first
  // nodes / 2 nodes: network symmetry runs at most that many.
  simgrid::s4u::Host* nic_out(int nic) const { return nic_halves_[2 * nic]; }
  simgrid::s4u::Host* nic_in(int nic) const { return nic_halves_[2 * nic + 1]; }

  // Bytes/s a flow can reach on one NVSwitch port and on one NIC, as the
  // platform gives them; a degraded one (platform.proto Degraded) reaches
  // its share of that.
  double NvlinkBandwidth() const;
  double NicBandwidth() const;

  // The classes of ranks that compute alike (degraded.h), those replayed:
  // one class of every rank where no GPU is degraded.
  const std::vector<RankClass>& classes() const { return classes_; }
  // Degraded links: every NVSwitch port, and every NIC, at one speed.
  bool ports_alike() const { return shares_.ports_alike; }
  bool nics_alike() const { return shares_.nics_alike; }

  // From a SimGrid actor: every NVSwitch port (or node 0's only) runs at
  // `scale` x NvlinkBandwidth(): NCCL's copies slow while compute runs.
  void SetNvlinkScale(double scale, bool node0_only);
  // Several programs (each its own compute): the ports of `ranks` only,
  // each port keeping its own scale from then on.
  void SetNvlinkScale(double scale, const std::vector<int>& ranks);
  double nvlink_scale() const { return nvlink_scale_; }

  // SimGrid 3.32 bounds a flow's rate, for good, by the least bandwidth on
  // its route when it starts (NetworkCm02Model::comm_action_set_bounds in
  // src/surf/network_cm02.cpp): a flow started while compute slows the
  // ports would keep that rate after compute ends. So NVSwitch flows start
  // between OpenNvlink() and CloseNvlink(), which give the ports their
  // full bandwidth meanwhile; no simulated time passes in between, so the
  // scale still holds every port's capacity, but bounds no flow. Calls
  // nest (other actors run during a start's simcalls).
  void OpenNvlink();
  void CloseNvlink();

 private:
  Fabric(const Platform& platform, const Mesh& mesh)
      : platform_(platform), mesh_(mesh), tree_(platform, mesh.nodes) {}
  absl::Status BuildNodes();
  absl::Status BuildNetwork();
  void BuildNicHalves();
  absl::Status DegradeNics();

  const Platform platform_;
  const Mesh mesh_;
  const FatTreeLayout tree_;  // where the NICs sit
  std::vector<simgrid::s4u::Host*> gpus_;
  std::vector<simgrid::s4u::Host*> nics_;        // by NIC index node*nics + i
  std::vector<simgrid::s4u::Host*> nic_halves_;  // out, in, by NIC index
  std::vector<simgrid::s4u::Link*> ports_;       // NVSwitch port of each GPU
  std::vector<RankClass> classes_;
  LinkShares shares_;  // each port's and NIC's share of its bandwidth
  double PortBandwidth(size_t rank) const {
    return NvlinkBandwidth() * shares_.port[rank];
  }
  double nvlink_scale_ = 1;  // SetNvlinkScale's
  size_t scaled_ports_ = 0;  // ports it scaled
  int nvlink_open_ = 0;      // OpenNvlink()s not closed
  void ScalePorts(double scale);
  // Per port, once the per-rank SetNvlinkScale is used (else empty).
  std::vector<double> rank_scale_;
  // Ports of a scale other than 1 at full bandwidth, or back at theirs.
  void RankPorts(bool full);
};

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ENGINE_FABRIC_H_

#include "sim/engine/fabric.h"

#include <algorithm>
#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sim/base/bandwidth.h"
#include "sim/base/fat_tree.h"
#include "sim/compute/kernel_time.h"

namespace sg4 = simgrid::s4u;

namespace shardsim {

int Fabric::NicOf(int rank) const {
  return NicOfRank(platform_, mesh_.gpus_per_node, rank);
}

double Fabric::NvlinkBandwidth() const {
  return shardsim::NvlinkBandwidth(platform_);
}

void Fabric::SetNvlinkScale(double scale, bool node0_only) {
  nvlink_scale_ = scale;
  scaled_ports_ = node0_only
                      ? std::min<size_t>(ports_.size(), mesh_.gpus_per_node)
                      : ports_.size();
  if (nvlink_open_ == 0) ScalePorts(scale);
}

void Fabric::SetNvlinkScale(double scale, const std::vector<int>& ranks) {
  if (rank_scale_.empty()) rank_scale_.assign(ports_.size(), 1);
  for (int r : ranks) rank_scale_[r] = scale;
  if (nvlink_open_ > 0) return;  // CloseNvlink applies it
  for (int r : ranks) ports_[r]->set_bandwidth(PortBandwidth(r) * scale);
}

void Fabric::OpenNvlink() {
  if (nvlink_open_++ > 0) return;
  if (!rank_scale_.empty()) {
    RankPorts(true);
  } else if (nvlink_scale_ != 1) {
    ScalePorts(1);
  }
}

void Fabric::CloseNvlink() {
  if (--nvlink_open_ > 0) return;
  if (!rank_scale_.empty()) {
    RankPorts(false);
  } else if (nvlink_scale_ != 1) {
    ScalePorts(nvlink_scale_);
  }
}

void Fabric::RankPorts(bool full) {
  for (size_t i = 0; i < ports_.size(); ++i) {
    if (rank_scale_[i] != 1) {
      ports_[i]->set_bandwidth(PortBandwidth(i) * (full ? 1 : rank_scale_[i]));
    }
  }
}

void Fabric::ScalePorts(double scale) {
  for (size_t i = 0; i < scaled_ports_; ++i) {
    ports_[i]->set_bandwidth(PortBandwidth(i) * scale);
  }
}

double Fabric::NicBandwidth() const {
  return shardsim::NicBandwidth(platform_);
}

absl::StatusOr<std::unique_ptr<Fabric>> Fabric::Build(const Platform& platform,
                                                      const Mesh& mesh,
                                                      bool drop_dominated) {
  std::unique_ptr<Fabric> f(new Fabric(platform, mesh));
  absl::StatusOr<std::vector<RankClass>> classes =
      ComputeClasses(platform, mesh, drop_dominated);
  if (!classes.ok()) return classes.status();
  f->classes_ = *std::move(classes);
  absl::StatusOr<LinkShares> shares = ComputeLinkShares(platform, mesh);
  if (!shares.ok()) return shares.status();
  f->shares_ = *std::move(shares);
  sg4::create_full_zone("cluster");
  if (absl::Status s = f->BuildNodes(); !s.ok()) return s;
  if (absl::Status s = f->BuildNetwork(); !s.ok()) return s;
  if (absl::Status s = f->DegradeNics(); !s.ok()) return s;
  f->BuildNicHalves();
  sg4::Engine::get_instance()->get_netzone_root()->seal();
  return f;
}

// One star zone holds every GPU's NVSwitch port. A node's switch is
// non-blocking, so a port is all a GPU-to-GPU route crosses; routes between
// GPUs of different nodes are never asked for (those go NIC to NIC). One
// zone rather than one per node: SimGrid 3.32 checks each new link's name
// against every zone, which made 2048 zones cost seconds.
absl::Status Fabric::BuildNodes() {
  sg4::NetZone* zone = sg4::create_star_zone("nvswitch");
  zone->set_parent(sg4::Engine::get_instance()->get_netzone_root());
  for (int rank = 0; rank < mesh_.gpus(); ++rank) {
    sg4::Host* host = zone->create_host(absl::StrCat("gpu", rank), 1)->seal();
    sg4::Link* port =
        zone->create_split_duplex_link(absl::StrCat("nvswitch", rank),
                                       PortBandwidth(rank))
            ->set_latency(0)
            ->seal();
    ports_.push_back(port);
    zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr,
                    {{port, sg4::LinkInRoute::Direction::UP}}, true);
    gpus_.push_back(host);
  }
  zone->seal();
  return absl::OkStatus();
}

// A two-level fat tree: leaves of the job's NICs (FatTreeLayout), each leaf
// with the up-links of its switch (LeafUplinks, fat_tree.h) to as many
// spines. A leaf's up-links are its switch's, not the job's: a job that
// fills part of a leaf still has all of them, and a ratio that does not
// divide the leaf's ports gives up-links of less than a NIC's speed, so
// that they carry exactly nics_per_leaf / oversubscription NICs' worth.
// Upper tiers of a real Clos are taken as non-blocking, which a single
// spine tier of the same total bandwidth models for bandwidth; their hop
// latency is in alpha.
// With adaptive routing (non-blocking only, validate.cc) it is one switch:
// a leaf's up-links, used as one pool, carry at most what its NICs send,
// so no link past a NIC's own ever limits a flow.
absl::Status Fabric::BuildNetwork() {
  const int nics = mesh_.nodes * platform_.network().nics_per_node();
  const int per_leaf = tree_.per_leaf();
  const int leaves = tree_.leaves();
  const LeafUplinks uplinks = LeafUplinksOf(platform_);
  const unsigned up = static_cast<unsigned>(uplinks.count);
  sg4::FatTreeParams params =
      leaves == 1
          ? sg4::FatTreeParams(1, {static_cast<unsigned>(per_leaf)}, {1}, {1})
          : sg4::FatTreeParams(2,
                               {static_cast<unsigned>(per_leaf),
                                static_cast<unsigned>(leaves)},
                               {1, up}, {1, 1});
  nics_.assign(nics, nullptr);
  auto netpoint = [&](sg4::NetZone* zone, const std::vector<unsigned long>&,
                      unsigned long id) {
    const int nic = tree_.NicAt(static_cast<int>(id));
    sg4::Host* host = zone->create_host(nic >= 0 ? absl::StrCat("nic", nic)
                                                 : absl::StrCat("spare", id),
                                        1)
                          ->seal();
    if (nic >= 0) nics_[nic] = host;
    return std::make_pair(
        host->get_netpoint(),
        static_cast<simgrid::kernel::routing::NetPoint*>(nullptr));
  };
  sg4::NetZone* tree = sg4::create_fatTree_zone(
      "network", sg4::Engine::get_instance()->get_netzone_root(), params,
      sg4::ClusterCallbacks(netpoint), NicBandwidth(), 0,
      sg4::Link::SharingPolicy::SPLITDUPLEX);
  tree->seal();
  // SimGrid builds every fat-tree link at one bandwidth. The up-links are
  // the links whose lower end is a switch: FatTreeZone names a link
  // "link_from_CHILD_PARENT_N[_UP|_DOWN]", where CHILD is a leaf position
  // (0 .. positions - 1, a host) or a switch's id, numbered past them
  // (add_processing_node, generate_switches and add_link in SimGrid 3.32's
  // FatTreeZone.cpp). tests/engine_test.cc holds a flow to these rates.
  if (leaves > 1 && uplinks.bandwidth != NicBandwidth()) {
    const long positions = tree_.positions();
    int changed = 0;
    for (sg4::Link* link : sg4::Engine::get_instance()->get_all_links()) {
      const std::vector<absl::string_view> parts =
          absl::StrSplit(link->get_name(), '_');
      long child = 0;
      if (parts.size() >= 5 && parts[0] == "link" && parts[1] == "from" &&
          absl::SimpleAtoi(parts[2], &child) && child >= positions) {
        link->set_bandwidth(uplinks.bandwidth);
        ++changed;
      }
    }
    // Two directions of `up` links from each leaf.
    if (changed != 2 * static_cast<int>(up) * leaves) {
      return absl::InternalError(
          absl::StrCat("network: found ", changed, " fat-tree up-links, not ",
                       2 * up * leaves, " (SimGrid's link names changed?)"));
    }
  }
  for (int i = 0; i < nics; ++i) {
    if (nics_[i] == nullptr) {
      return absl::InternalError(
          absl::StrCat("network: NIC ", i, " not placed"));
    }
  }
  return absl::OkStatus();
}

// A degraded NIC's own link, both ways, at its share: the first link of a
// route out of it and the last of a route into it.
absl::Status Fabric::DegradeNics() {
  const int nics = static_cast<int>(nics_.size());
  for (int i = 0; i < nics; ++i) {
    const double share = shares_.nic[i];
    if (share == 1) continue;
    if (nics < 2) break;  // one NIC carries nothing
    sg4::Host* other = nics_[i == 0 ? 1 : 0];
    std::vector<sg4::Link*> out, in;
    nics_[i]->route_to(other, out, nullptr);
    other->route_to(nics_[i], in, nullptr);
    if (out.empty() || in.empty()) {
      return absl::InternalError(
          absl::StrCat("network: NIC ", i, " has no route to degrade"));
    }
    out.front()->set_bandwidth(NicBandwidth() * share);
    in.back()->set_bandwidth(NicBandwidth() * share);
  }
  return absl::OkStatus();
}

// One star zone of two hosts per NIC of the first nodes / 2 nodes, each
// with a split-duplex link of a NIC's speed: a route from an `out` host to
// an `in` host crosses the first's link up and the second's down, which
// stand for the NIC's two directions of its fat-tree link.
void Fabric::BuildNicHalves() {
  const int nics = mesh_.nodes / 2 * platform_.network().nics_per_node();
  if (nics == 0) return;
  sg4::NetZone* zone = sg4::create_star_zone("nic halves");
  zone->set_parent(sg4::Engine::get_instance()->get_netzone_root());
  // Only used where every NIC is alike: at their one share.
  const double bw = NicBandwidth() * shares_.nic[0];
  for (int nic = 0; nic < nics; ++nic) {
    for (const char* half : {"out", "in"}) {
      sg4::Host* host =
          zone->create_host(absl::StrCat("nic", nic, "_", half), 1)->seal();
      sg4::Link* link = zone->create_split_duplex_link(
                                absl::StrCat("nic", nic, "_", half), bw)
                            ->set_latency(0)
                            ->seal();
      zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr,
                      {{link, sg4::LinkInRoute::Direction::UP}}, true);
      nic_halves_.push_back(host);
    }
  }
  zone->seal();
}

}  // namespace shardsim

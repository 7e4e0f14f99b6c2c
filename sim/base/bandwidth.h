// What a collective's flows can reach on a platform's links: the engine
// builds its links at these rates (sim/engine/fabric.cc) and plan's lower
// bound (sim/search/bound.h) takes them as the fastest a byte can go.
#ifndef SHARDSIM_SIM_BASE_BANDWIDTH_H_
#define SHARDSIM_SIM_BASE_BANDWIDTH_H_

#include <set>

#include "sim/schema/platform.pb.h"

namespace shardsim {

// Bytes/s on one NVSwitch port: the datasheet's, times the share a ring
// reaches (efficiency.nvlink_fraction).
inline double NvlinkBandwidth(const Platform& p) {
  return p.nvswitch().bandwidth() * p.efficiency().nvlink_fraction();
}

// Bytes/s through one NIC: its signalling rate times the share collectives
// reach (efficiency.network_fraction).
inline double NicBandwidth(const Platform& p) {
  return p.network().nic_bandwidth() * p.efficiency().network_fraction();
}

// The NIC of its node that the GPU of local index `local` sends through,
// on nodes of `gpus_per_node` GPUs: several GPUs share a NIC (a800: 2 per
// NIC), or a GPU uses the first of its NICs (more NICs than GPUs: bonding
// is not modelled). The platform has NICs.
inline int NicOfLocal(const Platform& p, int gpus_per_node, int local) {
  const int m = gpus_per_node;
  const int nics = p.network().nics_per_node();
  return nics >= m ? local * (nics / m) : local / (m / nics);
}

// The NIC (node * nics_per_node + NicOfLocal) that global rank `rank`
// sends through.
inline int NicOfRank(const Platform& p, int gpus_per_node, int rank) {
  return rank / gpus_per_node * p.network().nics_per_node() +
         NicOfLocal(p, gpus_per_node, rank % gpus_per_node);
}

// GPUs of a node that share each NIC in use, on nodes of `gpus_per_node`
// (1 within one node, or on a platform without NICs).
inline double GpusPerNic(const Platform& p, int gpus_per_node, int nodes) {
  if (nodes <= 1 || p.network().nics_per_node() <= 0) return 1;
  std::set<int> nics;
  for (int local = 0; local < gpus_per_node; ++local) {
    nics.insert(NicOfLocal(p, gpus_per_node, local));
  }
  return static_cast<double>(gpus_per_node) / nics.size();
}

}  // namespace shardsim

#endif  // SHARDSIM_SIM_BASE_BANDWIDTH_H_

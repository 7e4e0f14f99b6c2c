// What a collective's flows can reach on a platform's links: the engine
// builds its links at these rates (sim/engine/fabric.cc) and plan's lower
// bound (sim/search/bound.h) takes them as the fastest a byte can go.
#ifndef SHARDSIM_SIM_SCENARIO_BANDWIDTH_H_
#define SHARDSIM_SIM_SCENARIO_BANDWIDTH_H_

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

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCENARIO_BANDWIDTH_H_

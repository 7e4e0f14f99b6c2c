// Bytes on the wire for a payload under a wire protocol: what every flow
// the engine starts carries (collectives and sends alike).
#ifndef SHARDSIM_SIM_COLLECTIVE_WIRE_BYTES_H_
#define SHARDSIM_SIM_COLLECTIVE_WIRE_BYTES_H_

#include <cmath>
#include <cstdint>

#include "sim/schema/platform.pb.h"

namespace shardsim {

inline uint64_t WireBytes(double payload, const Protocol& proto) {
  return static_cast<uint64_t>(
      std::llround(payload / proto.bandwidth_fraction()));
}

}  // namespace shardsim

#endif  // SHARDSIM_SIM_COLLECTIVE_WIRE_BYTES_H_

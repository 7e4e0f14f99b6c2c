// A platform's degraded parts (platform.proto Degraded) on one job's mesh:
// the classes of ranks that compute alike, and each link's share of its
// bandwidth.
//
// Classes. The engine replays one timeline per class (step_actors.h). A
// collective starts when the last class reaches it, and every group of a
// call runs at once (collective_engine.h), so each call waits for the
// slowest class. A class of a GPU model that computes faster than another
// replayed class of that model reaches each collective no later, so it
// holds nothing up, and it is not replayed: 8 slow GPUs among 1024 replay
// as one class, and a lognormal draw for every GPU as its slowest one.
// Exact where collectives hold no SMs. Where they do, the faster class's
// NCCL kernels spin while it waits for the slow one, slowing its compute
// beside them; left out, that can end some of its ops a little earlier
// than replayed (docs/goodput.md gives the measured difference).
#ifndef SHARDSIM_SIM_ENGINE_DEGRADED_H_
#define SHARDSIM_SIM_ENGINE_DEGRADED_H_

#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/group.h"
#include "sim/schema/platform.pb.h"

namespace shardsim {

// Ranks that compute alike.
struct RankClass {
  std::vector<int> ranks;  // ascending
  double speed = 1;        // share of the speed of `platform`'s GPU kept
  // The platform as these ranks compute: the platform's own, or with the
  // gpu, kernels and interference of Degraded.Gpus.model.
  Platform platform;
  bool other_model = false;  // of a model other than the platform's
};

// The job's ranks by class. First the slowest class of the platform's GPU
// model (else of the first other model): its compute slows every
// NVSwitch port (step_actors.cc), the same class with or without
// `drop_dominated`. Then the rest by first rank. With `drop_dominated`
// (the engine's default), a class another replayed class dominates
// (above) is left out; its ranks are in no class.
// Errors name the Degraded field (a rank or node outside the job, a rail
// past nics_per_node).
absl::StatusOr<std::vector<RankClass>> ComputeClasses(const Platform& platform,
                                                      const Mesh& mesh,
                                                      bool drop_dominated);

// Whether the platform degrades any GPU (Degraded.gpus, drawn speeds), and
// any part at all (GPUs or links).
bool DegradesGpus(const Platform& platform);
bool Degrades(const Platform& platform);

// Each link's share of its bandwidth, 1 where not degraded.
struct LinkShares {
  std::vector<double> port;  // NVSwitch port, by rank
  std::vector<double> nic;   // NIC, by node * nics_per_node + rail
  bool ports_alike = true;   // every port at the same share
  bool nics_alike = true;    // every NIC at the same share
};
absl::StatusOr<LinkShares> ComputeLinkShares(const Platform& platform,
                                             const Mesh& mesh);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ENGINE_DEGRADED_H_

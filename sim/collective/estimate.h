// A collective's alpha-beta time on a platform, from its plan's stages
// (plan_summary.h). The engine picks each call's wire protocol by it, as
// NCCL's tuner does, and `shardsim plan` bounds a call's time by it
// (sim/search/bound.h): the engine never runs a call faster.
//
// A stage takes the longest of its floor (every step waits for its slowest
// message, then its alpha), its busiest hop (all its bytes, then steps x
// alpha) and its busiest endpoints (StageLoad: a GPU's NVSwitch port, a
// NIC with every GPU on it, a leaf's up-links, each with all the bytes of
// its hops, then the fewest steps' alphas); the call adds the protocol's
// base latency. Links run at their full rates (sim/base/bandwidth.h,
// fat_tree.h): in the engine NVSwitch ports only slow (under compute) and
// flows only share. NCCL's tuner likewise costs a channel at the bandwidth
// its topology search reserved on the links it crosses (ncclTopoTuneModel,
// src/graph/tuning.cc), so channels that share a NIC split it.
#ifndef SHARDSIM_SIM_COLLECTIVE_ESTIMATE_H_
#define SHARDSIM_SIM_COLLECTIVE_ESTIMATE_H_

#include <cstdint>

#include "sim/collective/plan_summary.h"
#include "sim/schema/platform.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

// Intra-node wire bytes per payload byte beyond a ring's. Algorithms that
// copy to several peers at once (HO-Ring's intra part, direct all-to-all)
// rather than run NCCL's ring kernels reach less of NVSwitch:
// nvlink_fraction / nvlink_direct_fraction; 1 for the rest.
double IntraInflation(Algorithm algorithm, const Platform& platform);

// The least time `stage` takes: its steps one by one, each as long as its
// busiest endpoint (StepLoad) takes.
// `alpha` (optional) gets the latency part of it.
double StageFloor(const Stage& stage, const Protocol& protocol,
                  const Platform& platform, double* alpha = nullptr);

// Seconds for the call `summary` describes with `protocol` on `platform`.
double EstimateCall(const PlanSummary& summary, const Protocol& protocol,
                    const Platform& platform, double intra_inflation);

// The platform's protocol with the least estimate (the first of equals),
// and that estimate; nullptr when no estimate is finite.
const Protocol* FastestProtocol(const PlanSummary& summary,
                                const Platform& platform,
                                double intra_inflation, double* estimate);

// The protocol a send of `bytes` (per rank pair) between two programs'
// ranks runs with over links of `rate` B/s (a NIC's `across` nodes, an
// NVSwitch port's inside): the platform's protocol with the least
// alpha-beta time for one step of those bytes, as a collective's is chosen
// for its slowest hop; ties go to the first listed. nullptr on a platform
// without protocols. `seconds` (optional) gets that time.
const Protocol* SendProtocol(const Platform& platform, int64_t bytes,
                             bool across, double rate,
                             double* seconds = nullptr);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_COLLECTIVE_ESTIMATE_H_

#include "sim/collective/estimate.h"

#include <algorithm>
#include <limits>

#include "sim/base/bandwidth.h"
#include "sim/base/fat_tree.h"
#include "sim/collective/wire_bytes.h"

namespace shardsim {

double IntraInflation(Algorithm algorithm, const Platform& platform) {
  if (algorithm != HORING && algorithm != DIRECT) return 1;
  const Efficiency& eff = platform.efficiency();
  return eff.nvlink_fraction() / eff.nvlink_direct_fraction();
}

double StageFloor(const Stage& stage, const Protocol& proto,
                  const Platform& platform, double* alpha) {
  const double nic = NicBandwidth(platform) * proto.bandwidth_fraction();
  const double nvlink = NvlinkBandwidth(platform) * proto.bandwidth_fraction();
  const double sharp = platform.efficiency().sharp_latency_s();
  double t = 0, a = 0;
  for (const StepLoad& s : stage.steps) {
    double step = 0, step_alpha = 0;
    auto consider = [&](double seconds, double latency) {
      if (seconds > step) {
        step = seconds;
        step_alpha = latency;
      }
    };
    if (s.intra > 0)
      consider(s.intra / nvlink + proto.intra_alpha_s(), proto.intra_alpha_s());
    if (s.inter > 0)
      consider(s.inter / nic + proto.inter_alpha_s(), proto.inter_alpha_s());
    if (s.via_switch > 0) consider(s.via_switch / nic + sharp, sharp);
    t += step;
    a += step_alpha;
  }
  if (alpha != nullptr) *alpha = a;
  return t;
}

double EstimateCall(const PlanSummary& summary, const Protocol& proto,
                    const Platform& platform, double intra_inflation) {
  const double sharp = platform.efficiency().sharp_latency_s();
  const LeafUplinks uplinks = LeafUplinksOf(platform);
  double t = proto.base_latency_s();
  for (const Stage& stage : summary.stages) {
    double longest = StageFloor(stage, proto, platform);
    // The busiest endpoints: a NIC that two GPUs share carries both their
    // hops, as a GPU's NVSwitch port carries every hop it sends.
    auto endpoint = [&](const EndpointLoad& l, double bw, double alpha) {
      if (l.elements == 0) return;
      longest =
          std::max(longest, l.elements / (bw * proto.bandwidth_fraction()) +
                                l.steps * alpha);
    };
    endpoint(stage.busiest.intra, NvlinkBandwidth(platform) / intra_inflation,
             proto.intra_alpha_s());
    endpoint(stage.busiest.inter, NicBandwidth(platform),
             proto.inter_alpha_s());
    endpoint(stage.busiest.via_switch, NicBandwidth(platform), sharp);
    endpoint(stage.busiest.uplinks, uplinks.count * uplinks.bandwidth,
             proto.inter_alpha_s());
    for (const Hop& h : stage.hops) {
      const bool via_switch = h.src == kSwitch || h.dst == kSwitch;
      const double bw = h.inter ? NicBandwidth(platform)
                                : NvlinkBandwidth(platform) / intra_inflation;
      const double alpha = via_switch ? sharp
                           : h.inter  ? proto.inter_alpha_s()
                                      : proto.intra_alpha_s();
      longest =
          std::max(longest, h.elements / (bw * proto.bandwidth_fraction()) +
                                h.steps * alpha);
    }
    t += longest;
  }
  return t;
}

const Protocol* FastestProtocol(const PlanSummary& summary,
                                const Platform& platform,
                                double intra_inflation, double* estimate) {
  const Protocol* fastest = nullptr;
  double best = std::numeric_limits<double>::infinity();
  for (const Protocol& proto : platform.protocols()) {
    const double t = EstimateCall(summary, proto, platform, intra_inflation);
    if (t < best) {
      best = t;
      fastest = &proto;
    }
  }
  if (estimate != nullptr) *estimate = best;
  return fastest;
}

const Protocol* SendProtocol(const Platform& platform, int64_t bytes,
                             bool across, double rate, double* seconds) {
  const Protocol* best = nullptr;
  double least = 0;
  for (const Protocol& q : platform.protocols()) {
    const double alpha = across ? q.inter_alpha_s() : q.intra_alpha_s();
    const double t = q.base_latency_s() + alpha +
                     static_cast<double>(WireBytes(bytes, q)) / rate;
    if (best == nullptr || t < least) {
      best = &q;
      least = t;
    }
  }
  if (seconds != nullptr) *seconds = least;
  return best;
}

}  // namespace shardsim

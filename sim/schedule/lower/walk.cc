#include "sim/schedule/lower/walk.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace shardsim {
namespace lower {

std::vector<Segment> BuildSegments(const std::vector<Layer>& layers,
                                   const Execution& ex, bool params_sharded) {
  const bool per_module = ex.gather_unit() == SUBMODULE;
  std::vector<Segment> segments;
  for (int i = 0; i < static_cast<int>(layers.size()); ++i) {
    std::vector<Segment> mine;
    Segment pending;
    pending.layer = i;
    for (const Unit& u : layers[i].units) {
      pending.units.push_back(&u);
      pending.params += u.params;
      if (u.params > ex.persistence_threshold() && params_sharded) {
        pending.gathered += u.params;
        pending.gathered_bytes += 2 * u.params - u.fp8_params;
      }
      const bool closes =
          per_module ? u.params > ex.persistence_threshold() : false;
      if (closes) {
        pending.name = absl::StrCat(layers[i].name, " ", u.name);
        mine.push_back(std::move(pending));
        pending = Segment();
        pending.layer = i;
      }
    }
    if (!pending.units.empty()) {
      if (mine.empty()) {
        pending.name = layers[i].name;
        mine.push_back(std::move(pending));
      } else {
        // Trailing small modules run with the last gathered one.
        Segment& last = mine.back();
        for (const Unit* u : pending.units) last.units.push_back(u);
        last.params += pending.params;
        last.gathered += pending.gathered;
        last.gathered_bytes += pending.gathered_bytes;
      }
    }
    mine.front().first_of_layer = true;
    for (Segment& s : mine) segments.push_back(std::move(s));
  }
  return segments;
}

std::vector<Visit> WalkMicroBatches(const std::vector<Segment>& segments,
                                    int micro_batches) {
  std::vector<Visit> visits;
  const int n = static_cast<int>(segments.size());
  for (int mb = 0; mb < micro_batches; ++mb) {
    for (int q = 0; q < n; ++q) {
      visits.push_back({FORWARD, mb, q, segments[q].layer});
    }
    for (int q = n - 1; q >= 0; --q) {
      visits.push_back({BACKWARD, mb, q, segments[q].layer});
    }
  }
  return visits;
}

}  // namespace lower
}  // namespace shardsim

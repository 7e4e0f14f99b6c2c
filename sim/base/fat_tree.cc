#include "sim/base/fat_tree.h"

#include <algorithm>
#include <cmath>

#include "sim/base/bandwidth.h"

namespace shardsim {

LeafUplinks LeafUplinksOf(const Platform& p) {
  LeafUplinks up;
  up.bandwidth = NicBandwidth(p);
  // One switch has no up-links to size (and a platform not yet validated
  // may have no ratio at all).
  if (p.network().nics_per_leaf() <= 0 ||
      !(p.network().oversubscription() > 0)) {
    return up;
  }
  const double worth =
      p.network().nics_per_leaf() / p.network().oversubscription();
  up.count = std::max(1, static_cast<int>(std::ceil(worth)));
  // worth / count is exactly 1 where the ratio divides the ports.
  up.bandwidth = NicBandwidth(p) * (worth / up.count);
  return up;
}

FatTreeLayout::FatTreeLayout(const Platform& platform, int nodes)
    : nodes_(nodes), per_node_(platform.network().nics_per_node()) {
  const Network& n = platform.network();
  const int nics = nodes * per_node_;
  one_switch_ = n.nics_per_leaf() == 0 || n.adaptive_routing();
  rails_ = n.rail_optimized() && !one_switch_;
  per_leaf_ = one_switch_ ? nics
              : rails_    ? std::min(n.nics_per_leaf(), nodes)
                          : std::min(n.nics_per_leaf(), nics);
  per_leaf_ = std::max(per_leaf_, 1);
  per_rail_ = (nodes + per_leaf_ - 1) / per_leaf_ * per_leaf_;
  leaves_ = rails_ ? per_node_ * per_rail_ / per_leaf_
                   : (nics + per_leaf_ - 1) / per_leaf_;
  leaves_ = std::max(leaves_, 1);
}

int FatTreeLayout::NicAt(int position) const {
  if (!rails_) return position < nodes_ * per_node_ ? position : -1;
  const int node = position % per_rail_;
  return node < nodes_ ? node * per_node_ + position / per_rail_ : -1;
}

int FatTreeLayout::LeafOfNic(int nic) const {
  const int position =
      rails_ ? nic % per_node_ * per_rail_ + nic / per_node_ : nic;
  return position / per_leaf_;
}

}  // namespace shardsim

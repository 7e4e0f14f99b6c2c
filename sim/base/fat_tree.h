// Where a job's NICs sit on the leaf/spine fat tree, and what a leaf's
// up-links carry: the engine builds its fabric from this
// (sim/engine/fabric.cc), and a collective's estimate counts the load on
// each leaf's up-links from it (sim/collective/estimate.h), so that the two
// cannot disagree.
#ifndef SHARDSIM_SIM_BASE_FAT_TREE_H_
#define SHARDSIM_SIM_BASE_FAT_TREE_H_

#include "sim/schema/platform.pb.h"

namespace shardsim {

// The up-links of one leaf switch to the spines: as many as its
// nics_per_leaf down-ports over the oversubscription, rounded up, each at
// the rate that makes them carry nics_per_leaf / oversubscription NICs'
// worth in all (a NIC's speed where the ratio divides the ports; less
// where it does not: 2 NICs at 4:1 have one up-link of half a NIC). A
// property of the switch, whatever share of its ports a job uses. No
// leaves (nics_per_leaf 0, one switch): one up-link of a NIC, never used.
struct LeafUplinks {
  int count = 1;
  double bandwidth = 0;  // bytes/s each, per direction
};
LeafUplinks LeafUplinksOf(const Platform& platform);

// The leaves of a job of `nodes` nodes. Rail-optimised, a leaf holds one
// rail's NICs (NIC i of as many nodes): each rail starts on a leaf of its
// own, its last leaf's spare ports unused, as in a DGX SuperPOD's scalable
// units (a leaf per rail per SU). Otherwise NICs fill leaves in order,
// node by node. A leaf's ports are positions per_leaf * leaf onwards.
class FatTreeLayout {
 public:
  FatTreeLayout(const Platform& platform, int nodes);

  // The network is one switch (adaptive routing, or nics_per_leaf 0):
  // every route between two NICs is their own two links.
  bool one_switch() const { return one_switch_; }
  // Whether a leaf's up-links can hold a flow back: static routing over
  // several leaves.
  bool has_uplinks() const { return !one_switch_ && leaves_ > 1; }
  int leaves() const { return leaves_; }
  int per_leaf() const { return per_leaf_; }  // the job's ports per leaf
  int positions() const { return leaves_ * per_leaf_; }

  // The NIC (node * nics_per_node + its index there) at leaf port
  // `position`, or -1 for a spare port.
  int NicAt(int position) const;
  // The leaf NIC `nic` hangs off.
  int LeafOfNic(int nic) const;

 private:
  int nodes_ = 0;
  int per_node_ = 0;  // NICs per node
  bool one_switch_ = true;
  bool rails_ = false;
  int per_leaf_ = 1;
  int per_rail_ = 0;  // ports a rail spans, rails only
  int leaves_ = 1;
};

}  // namespace shardsim

#endif  // SHARDSIM_SIM_BASE_FAT_TREE_H_

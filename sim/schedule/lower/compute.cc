#include "sim/schedule/lower/compute.h"

#include <utility>

#include "sim/model/kernels.h"

namespace shardsim {
namespace lower {
namespace {

void AddForwardKernels(const Segment& seg, KernelList* list) {
  for (const Unit* u : seg.units) {
    for (const Kernel& k : u->forward) *list->add_kernels() = k;
  }
}

}  // namespace

int ComputeOf(Step* step, int v, std::vector<int> deps) {
  const Visit& visit = step->visits[v];
  if (visit.recompute()) {
    // The layer's forward again, every segment of it.
    const int layer = visit.layer;
    const int list =
        step->KernelListOf({"recompute", layer, false}, [&](KernelList* l) {
          for (const Segment& s : step->segments) {
            if (s.layer == layer) AddForwardKernels(s, l);
          }
        });
    return step->Compute(BACKWARD, visit.mb, layer, "recompute",
                         step->layers()[layer].name, list, std::move(deps));
  }
  const Segment& seg = step->segments[visit.seg];
  if (visit.phase == FORWARD) {
    const int list =
        step->KernelListOf({"forward", visit.seg, false},
                           [&](KernelList* l) { AddForwardKernels(seg, l); });
    return step->Compute(FORWARD, visit.mb, seg.layer, "forward", seg.name,
                         list, std::move(deps));
  }
  // Whole gradients kept across micro-batches: autograd adds each new one
  // into .grad.
  const bool accumulates =
      visit.mb > 0 && !step->ex().reduce_every_micro_batch() && seg.params > 0;
  const int list = step->KernelListOf(
      {"backward", visit.seg, accumulates}, [&](KernelList* l) {
        for (auto u = seg.units.rbegin(); u != seg.units.rend(); ++u) {
          for (const Kernel& k : (*u)->backward) *l->add_kernels() = k;
        }
        if (accumulates) *l->add_kernels() = AccumulateKernel(seg.params);
      });
  return step->Compute(BACKWARD, visit.mb, seg.layer, "backward", seg.name,
                       list, std::move(deps));
}

}  // namespace lower
}  // namespace shardsim

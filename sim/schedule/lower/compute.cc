#include "sim/schedule/lower/compute.h"

#include <algorithm>
#include <string>
#include <utility>

#include "sim/base/layout.h"
#include "sim/model/kernels.h"

namespace shardsim {
namespace lower {
namespace {

// One step of a visit's run on the compute stream: a kernel, or a
// tensor-parallel collective between two kernels.
struct Item {
  const Kernel* kernel = nullptr;
  const UnitCollective* comm = nullptr;
};

// Unit `u`'s forward (or backward) kernels, its collectives of that list
// at their places (Unit::comms: before kernel `at`, in their order).
void AddUnit(const Unit& u, bool backward, std::vector<Item>* items) {
  const std::vector<Kernel>& kernels = backward ? u.backward : u.forward;
  std::vector<const UnitCollective*> comms;
  for (const UnitCollective& c : u.comms) {
    if (c.backward == backward) comms.push_back(&c);
  }
  std::stable_sort(comms.begin(), comms.end(),
                   [](const UnitCollective* a, const UnitCollective* b) {
                     return a->at < b->at;
                   });
  size_t next = 0;
  for (int i = 0; i <= static_cast<int>(kernels.size()); ++i) {
    while (next < comms.size() && comms[next]->at <= i) {
      items->push_back({nullptr, comms[next++]});
    }
    if (i < static_cast<int>(kernels.size())) {
      items->push_back({&kernels[i], nullptr});
    }
  }
}

void AddForward(const Segment& seg, std::vector<Item>* items) {
  for (const Unit* u : seg.units) AddUnit(*u, false, items);
}

// What a visit runs, and how its ops are named.
struct Run {
  Phase phase;
  int mb, layer;
  std::string kind, where;
  int index;                 // the segment (or, recomputing, the layer)
  bool accumulates = false;  // a gradient accumulation ends it
  int64_t accumulated = 0;   // its elements
};

// The compute op of part `part`, kernels items[begin, end), after `deps`;
// -1 when it has none next to a collective (a visit without collectives
// always has its one op, empty or not).
int PartOp(Step* step, const Run& run, const std::vector<Item>& items,
           size_t begin, size_t end, int part, bool last,
           std::vector<int> deps) {
  const bool accumulate = last && run.accumulates;
  const bool sole = last && part == 0;
  if (begin == end && !accumulate && !sole) return -1;
  const int list = step->KernelListOf(
      {run.kind, run.index, run.accumulates, part}, [&](KernelList* l) {
        for (size_t i = begin; i < end; ++i) {
          *l->add_kernels() = *items[i].kernel;
        }
        if (accumulate) *l->add_kernels() = AccumulateKernel(run.accumulated);
      });
  return step->Compute(run.phase, run.mb, run.layer, run.kind, run.where, list,
                       std::move(deps));
}

// The kernels of `items` as compute ops cut at their collectives, each
// over its dimension's group of the job's mesh, on the compute stream
// (Megatron without TP communication overlap: the next kernel waits for
// it). Returns the last op; the first waits for `deps`.
int Emit(Step* step, const Run& run, const std::vector<Item>& items,
         std::vector<int> deps) {
  int last = -1;
  int part = 0;
  size_t begin = 0;
  for (size_t i = 0; i <= items.size(); ++i) {
    if (i < items.size() && items[i].comm == nullptr) continue;
    const bool end = i == items.size();
    const int op = PartOp(step, run, items, begin, i, part, end, deps);
    if (op >= 0) deps = {op};
    last = op >= 0 ? op : last;
    if (end) break;
    const UnitCollective& c = *items[i].comm;
    const Group group = step->layout().GroupOf(c.dim);
    last = step->MeshCollective(COMPUTE, run.phase, run.mb, run.layer, c.kind,
                                group, c.bytes, c.dtype,
                                step->AlgorithmFor(group), c.tensor, deps);
    deps = {last};
    begin = i + 1;
    ++part;
  }
  return last;
}

int RecomputeOf(Step* step, const Visit& visit, std::vector<int> deps) {
  // The layer's forward again, every segment of it, its collectives
  // included (Megatron's checkpointed forward runs the same modules), or
  // only the kernels its recomputation names.
  const Layer& layer = step->layers()[visit.layer];
  std::vector<Item> items;
  for (const Kernel& k : layer.recompute_kernels)
    items.push_back({&k, nullptr});
  if (layer.recompute_kernels.empty()) {
    for (const Segment& s : step->segments) {
      if (s.layer == visit.layer) AddForward(s, &items);
    }
  }
  const Run run{BACKWARD,    visit.mb,   visit.layer,
                "recompute", layer.name, visit.layer};
  return Emit(step, run, items, std::move(deps));
}

}  // namespace

int ComputeOf(Step* step, int v, std::vector<int> deps) {
  const Visit& visit = step->visits[v];
  if (visit.recompute()) return RecomputeOf(step, visit, std::move(deps));
  const Segment& seg = step->segments[visit.seg];
  std::vector<Item> items;
  if (visit.phase == FORWARD) {
    AddForward(seg, &items);
    const Run run{FORWARD, visit.mb, seg.layer, "forward", seg.name, visit.seg};
    return Emit(step, run, items, std::move(deps));
  }
  for (auto u = seg.units.rbegin(); u != seg.units.rend(); ++u) {
    AddUnit(**u, true, &items);
  }
  // Whole gradients kept across micro-batches: autograd adds each new one
  // into .grad.
  const bool accumulates =
      visit.mb > 0 && !step->ex().reduce_every_micro_batch() && seg.params > 0;
  const Run run{BACKWARD, visit.mb,  seg.layer,   "backward",
                seg.name, visit.seg, accumulates, seg.params};
  return Emit(step, run, items, std::move(deps));
}

}  // namespace lower
}  // namespace shardsim

#include "sim/schedule/lower/compute.h"

#include <algorithm>
#include <string>
#include <utility>

#include "sim/base/layout.h"
#include "sim/model/kernels.h"

namespace shardsim {
namespace lower {
namespace {

// One step of a visit's run on the compute stream: a kernel, a collective
// between two kernels, or the wait for an overlapped collective started
// earlier (UnitCollective::wait).
struct Item {
  const Kernel* kernel = nullptr;
  const UnitCollective* comm = nullptr;
  const UnitCollective* wait = nullptr;
};

// Unit `u`'s forward (or backward) kernels, its collectives of that list
// at their places (Unit::comms: before kernel `at`, in their order), and
// before kernel `wait` the waits for those that overlap.
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
    for (const UnitCollective* c : comms) {
      if (c->wait == i) items->push_back({nullptr, nullptr, c});
    }
    while (next < comms.size() && comms[next]->at <= i) {
      items->push_back({nullptr, comms[next++], nullptr});
    }
    if (i < static_cast<int>(kernels.size())) {
      items->push_back({&kernels[i], nullptr, nullptr});
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
// over its dimension's group of the job's mesh. A blocking one runs on the
// compute stream (Megatron without TP communication overlap: the next
// kernel waits for it); an overlapped one on the CONTEXT stream, and the
// kernel at its wait item waits for it. Returns the last op; the first
// waits for `deps`.
int Emit(Step* step, const Run& run, const std::vector<Item>& items,
         std::vector<int> deps) {
  int last = -1;
  int part = 0;
  size_t begin = 0;
  std::vector<std::pair<const UnitCollective*, int>> started;
  for (size_t i = 0; i <= items.size(); ++i) {
    if (i < items.size() && items[i].kernel != nullptr) continue;
    const bool end = i == items.size();
    const int op = PartOp(step, run, items, begin, i, part, end, deps);
    if (op >= 0) deps = {op};
    last = op >= 0 ? op : last;
    if (end) break;
    begin = i + 1;
    ++part;
    if (const UnitCollective* w = items[i].wait) {
      for (const auto& [c, id] : started) {
        if (c == w) deps.push_back(id);
      }
      continue;
    }
    const UnitCollective& c = *items[i].comm;
    const bool overlapped = c.wait >= 0;
    const int id = step->DimCollective(
        overlapped ? CONTEXT : COMPUTE, run.phase, run.mb, run.layer, c.dim,
        c.kind, c.bytes, c.dtype, c.tensor, deps);
    if (overlapped) {
      started.emplace_back(&c, id);
    } else {
      last = id;
      deps = {id};
    }
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
    items.push_back({&k, nullptr, nullptr});
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

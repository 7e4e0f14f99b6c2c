#include "sim/schedule/lower/fetch.h"

#include <algorithm>

#include "sim/schedule/lower.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace lower {

FetchPass::FetchPass(Step* step)
    : step_(*step),
      own_(step->visits.size()),
      users_(step->visits.size()),
      pending_(step->segments.size()) {
  const std::vector<Segment>& segments = step_.segments;
  const bool hold = step_.HoldsParams();
  const bool keep = step_.KeepsParams() || hold;
  std::vector<bool> held(segments.size(), false);
  for (int v = 0; v < static_cast<int>(step_.visits.size()); ++v) {
    const Visit& visit = step_.visits[v];
    if (visit.forward()) {
      // Held through the step: only the first forward gathers.
      if (segments[visit.seg].gathered > 0 && !held[visit.seg]) {
        Add(v, visit.seg, FORWARD);
        held[visit.seg] = hold;
      }
    } else if (visit.recompute()) {
      // The layer's segments, in backward order: its recompute needs them
      // all, and its backward runs on what the recompute gathered.
      if (keep) continue;
      int last = static_cast<int>(segments.size()) - 1;
      while (segments[last].layer != visit.layer) --last;
      for (int r = last; r >= 0 && segments[r].layer == visit.layer; --r) {
        if (segments[r].gathered > 0) Add(v, r, BACKWARD);
      }
    } else {
      const int q = visit.seg;
      // Gathered again unless kept since forward, or gathered already by
      // the layer's recompute (without keep, the only fetch pending here).
      if (segments[q].gathered > 0 && !keep && pending_[q].empty()) {
        Add(v, q, BACKWARD);
      }
      // Backward frees what this segment used: its own fetch, a
      // recompute's, or (SHARD_GRAD_OP) the one kept since forward; one
      // held through the step, its last backward.
      for (int f : pending_[q]) fetches_[f].user = v;
      if (!hold) pending_[q].clear();
    }
  }
  for (int f = 0; f < static_cast<int>(fetches_.size()); ++f) {
    users_[fetches_[f].user].push_back(f);
  }
}

void FetchPass::Add(int v, int seg, Phase phase) {
  Fetch f;
  f.seg = seg;
  f.visit = v;
  f.user = v;
  f.phase = phase;
  f.mb = step_.visits[v].mb;
  const int id = static_cast<int>(fetches_.size());
  own_[v].push_back(id);
  // A backward fetch, or a forward one kept through backward, is freed by
  // its segment's backward.
  if (phase == BACKWARD || step_.KeepsParams() || step_.HoldsParams()) {
    pending_[seg].push_back(id);
  }
  fetches_.push_back(f);
}

void FetchPass::BeforeCompute(int v, std::vector<int>* deps) {
  Hook(v);
  for (int f : own_[v]) deps->push_back(fetches_[f].op);
}

void FetchPass::AfterCompute(int v, int op) { Release(v, op); }

// At visit `v`'s hook: its own fetches not yet in flight (one call), then
// the prefetch. DeepSpeed pops its trace queue from where the last hook
// stopped and issues new fetches until they hold the prefetch bucket (or
// what the live budget leaves), all in one call: the depth it runs ahead
// grows hook by hook until the live budget stops it
// (partitioned_param_coordinator.py, fetch_sub_module). FSDP and PaRO
// gather a fixed number of units ahead, one call each.
void FetchPass::Hook(int v) {
  const Execution& ex = step_.ex();
  const Visit& visit = step_.visits[v];
  std::vector<int> own;
  for (int f : own_[v]) {
    if (fetches_[f].op < 0) own.push_back(f);
  }
  if (!own.empty()) EmitCall(own, fetches_[own[0]].limit);
  const bool prefetching = visit.phase == BACKWARD || ex.forward_prefetch();
  if (!prefetching) return;
  const int next = FirstFetchAfter(v);
  const int n = static_cast<int>(fetches_.size());
  if (ex.prefetch_bucket_elements() > 0) {
    const int64_t room = ex.max_live_elements() > 0
                             ? ex.max_live_elements() - live_
                             : ex.prefetch_bucket_elements();
    const int64_t budget = std::min(room, ex.prefetch_bucket_elements());
    std::vector<int> ahead;
    int64_t numel = 0;
    int f = std::max(frontier_, next);
    for (; f < n && numel < budget; ++f) {
      if (fetches_[f].op >= 0) continue;
      ahead.push_back(f);
      numel += step_.segments[fetches_[f].seg].gathered;
    }
    // The bucket would have gone on; the live budget stopped it.
    if (budget < ex.prefetch_bucket_elements() && f < n && fetches_[f].op < 0) {
      fetches_[f].limit = MEMORY_LIMIT;
    }
    frontier_ = f;
    // One call per kind of gather (hpZ's backward ones use their group).
    std::vector<int> forward, backward;
    for (int g : ahead) {
      (fetches_[g].phase == BACKWARD ? backward : forward).push_back(g);
    }
    if (!forward.empty()) EmitCall(forward, NO_LIMIT);
    if (!backward.empty()) EmitCall(backward, NO_LIMIT);
  } else {
    for (int f = next; f < n && f < next + ex.prefetch_units(); ++f) {
      if (fetches_[f].op < 0) EmitCall({f}, NO_LIMIT);
    }
  }
}

// Fetches are listed in visit order.
int FetchPass::FirstFetchAfter(int v) const {
  return static_cast<int>(std::upper_bound(fetches_.begin(), fetches_.end(), v,
                                           [](int visit, const Fetch& f) {
                                             return visit < f.visit;
                                           }) -
                          fetches_.begin());
}

// One all-gather call bringing the parameters of `fetches` (all of one
// phase). The host first blocks until older gathered units are freed
// (FSDP's rate limiter) or older calls are done (DeepSpeed's
// back-pressure).
void FetchPass::EmitCall(const std::vector<int>& fetches, Limit limit) {
  const Strategy& strategy = step_.strategy();
  const Execution& ex = step_.ex();
  const Fetch& first = fetches_[fetches[0]];
  // ZeRO++: a gather uses the node's secondary copy (hpZ) whenever one
  // exists, that is once the parameters were released after a use in this
  // step: every backward (and recompute) gather, and the forward of every
  // micro-batch after the first (partition_parameters.py
  // use_secondary_tensor; the copy is dropped after the step). qwZ
  // quantizes every gather, the secondary's too
  // (partitioned_param_coordinator.py: quantize=zero_quantized_weights).
  const bool hpz = strategy.secondary_params_intra() > 0 &&
                   (first.phase == BACKWARD || first.mb > 0);
  const bool qwz = strategy.quantized_weights();
  const Group group =
      hpz ? MakeGroup(strategy.secondary_params_intra(), 1, 1, 1)
          : FactorGroup(strategy.p());
  int64_t params = 0, bytes = 0;
  for (int f : fetches) {
    params += step_.segments[fetches_[f].seg].gathered;
    bytes += step_.segments[fetches_[f].seg].gathered_bytes;
  }
  std::vector<int> waits;
  Limit why = limit;
  const int k = static_cast<int>(calls_.size());
  if (!step_.KeepsParams() && !step_.HoldsParams() &&
      ex.max_gathered_units() > 0 && k >= ex.max_gathered_units()) {
    const Fetch& old = fetches_[calls_[k - ex.max_gathered_units()]];
    if (old.user < static_cast<int>(step_.visit_ops.size())) {
      waits.push_back(step_.visit_ops[old.user]);
      why = MEMORY_LIMIT;
    }
  }
  if (ex.max_inflight_fetches() > 0 && k >= ex.max_inflight_fetches()) {
    waits.push_back(fetches_[calls_[k - ex.max_inflight_fetches()]].op);
    if (why == NO_LIMIT) why = PREFETCH_LIMIT;
  }
  const int layer = step_.segments[first.seg].layer;
  for (int f : fetches) {
    fetches_[f].alloc =
        step_.Alloc(GATHER, first.phase, first.mb, layer,
                    step_.segments[fetches_[f].seg].gathered_bytes, "P full");
  }
  const int id =
      step_.Collective(GATHER, first.phase, first.mb, layer, ALL_GATHER, group,
                       qwz ? QuantizedBytes(params, 8) : bytes,
                       qwz ? INT8 : BF16, step_.AlgorithmFor(group),
                       qwz ? "P int8" : "P", {}, 0, ex.fetch_overhead_s());
  Op* op = step_.mutable_op(id);
  for (int w : waits) op->add_host_waits(w);
  op->set_limited_by(why);
  for (int f : fetches) fetches_[f].op = id;
  calls_.push_back(fetches[0]);
  live_ += params;
}

// Frees the fetches whose last user is visit `v` (op `op`).
void FetchPass::Release(int v, int op) {
  const Visit& visit = step_.visits[v];
  for (int i : users_[v]) {
    const Fetch& f = fetches_[i];
    if (f.op < 0) continue;
    const Segment& seg = step_.segments[f.seg];
    step_.Free(COMPUTE, visit.phase, visit.mb, seg.layer, f.alloc, {op});
    live_ -= seg.gathered;
  }
}

}  // namespace lower
}  // namespace shardsim

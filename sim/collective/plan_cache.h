// One cache of collective plans for every user of them: the engine, the
// traffic counter and both hardware backends. Each keeps what it derives
// from a plan (flows and a protocol, a volume, a rank's program) in a
// PlanCache of its own type, keyed alike, and every call is checked against
// the mesh and the platform here, once, before it is planned.
#ifndef SHARDSIM_SIM_COLLECTIVE_PLAN_CACHE_H_
#define SHARDSIM_SIM_COLLECTIVE_PLAN_CACHE_H_

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/container/node_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "sim/base/group.h"
#include "sim/collective/plan.h"
#include "sim/schema/platform.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

// What a call's plan, and all that is derived from the plan and the
// group's members, depends on: the request, and where the group's members
// sit (its strides). Calls that differ only in phase, tensor, dtype or
// label share a key.
struct PlanKey {
  PlanRequest request;
  int intra_stride = 1;
  int inter_stride = 1;

  friend bool operator==(const PlanKey& a, const PlanKey& b) {
    return a.request == b.request && a.intra_stride == b.intra_stride &&
           a.inter_stride == b.inter_stride;
  }
  template <typename H>
  friend H AbslHashValue(H h, const PlanKey& k) {
    return H::combine(std::move(h), k.request, k.intra_stride, k.inter_stride);
  }
};

// The key of `call` moving `count` elements per member on `channels` rings.
PlanKey KeyOf(const CollectiveCall& call, int64_t count, int channels);

// Checks `call` against the mesh (its group fits) and the platform (SHARP
// needs SHARP-capable switches), then plans it. Errors: "group G: ...",
// "algorithm SHARP: platform P has no SHARP-capable switches
// (network.sharp)", or the planner's.
absl::StatusOr<Plan> PlanCall(const CollectiveCall& call, const PlanKey& key,
                              const Mesh& mesh, const Platform& platform);

// Entries of type T, one per key, each made once from its call's plan by
// `derive`. Entries never move once made: pointers stay valid for the
// cache's life. Threads may share a cache: a key's entry is made by the
// first thread to ask, outside the lock (a 1024-GPU plan takes a while),
// and the others asking for it wait for it. `derive` may Get other keys.
template <typename T>
class PlanCache {
 public:
  using Derive =
      absl::AnyInvocable<absl::StatusOr<T>(const CollectiveCall&, Plan)>;

  // `mesh` and `platform` must outlive the cache. `derive` is any callable
  // Derive can hold, taken in place (no AnyInvocable is moved).
  template <typename F>
  PlanCache(const Mesh& mesh, const Platform& platform, F&& derive)
      : mesh_(mesh), platform_(platform), derive_(std::forward<F>(derive)) {}
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  // The entry for `call`, made on its key's first request (PlanCall, then
  // derive). A failed request leaves nothing behind: a thread that waited
  // for it makes the entry itself, and fails alike.
  absl::StatusOr<const T*> Get(const CollectiveCall& call, int64_t count,
                               int channels) {
    const PlanKey key = KeyOf(call, count, channels);
    absl::MutexLock lock(&mutex_);
    for (;;) {
      auto [it, fresh] = entries_.try_emplace(key);
      if (fresh) break;  // this thread makes it
      if (it->second.has_value()) return &*it->second;
      made_.Wait(&mutex_);  // another thread is making it
    }
    absl::StatusOr<T> entry = Make(call, key);
    auto it = entries_.find(key);
    made_.SignalAll();
    if (!entry.ok()) {
      entries_.erase(it);
      return entry.status();
    }
    return &it->second.emplace(*std::move(entry));
  }

  // The entry made for this call, or null.
  const T* Find(const CollectiveCall& call, int64_t count, int channels) const {
    absl::MutexLock lock(&mutex_);
    auto it = entries_.find(KeyOf(call, count, channels));
    return it == entries_.end() || !it->second.has_value() ? nullptr
                                                           : &*it->second;
  }

 private:
  // PlanCall, then derive, with the lock released meanwhile.
  absl::StatusOr<T> Make(const CollectiveCall& call, const PlanKey& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    mutex_.Unlock();
    absl::StatusOr<T> entry = [&]() -> absl::StatusOr<T> {
      absl::StatusOr<Plan> plan = PlanCall(call, key, mesh_, platform_);
      if (!plan.ok()) return plan.status();
      return derive_(call, *std::move(plan));
    }();
    mutex_.Lock();
    return entry;
  }

  const Mesh& mesh_;
  const Platform& platform_;
  Derive derive_;
  mutable absl::Mutex mutex_;
  absl::CondVar made_;
  // Empty while a thread makes it.
  absl::node_hash_map<PlanKey, std::optional<T>> entries_
      ABSL_GUARDED_BY(mutex_);
};

}  // namespace shardsim

#endif  // SHARDSIM_SIM_COLLECTIVE_PLAN_CACHE_H_

// Parameter fetch (sharding P): the all-gathers that bring a segment's
// parameters where P is sharded, when the framework's host issues them
// (at the hook of the visit that needs them, or prefetched at an earlier
// one), the host's waits on rate limiters and back-pressure, and the free
// of each gathered copy after its last user.
//
// A fetch is one gather of a segment's parameters and the visit that first
// needs it: each forward, and each backward unless P is kept from forward
// (SHARD_GRAD_OP) or a recompute of the layer gathered it already; held
// through the step (Execution.hold_params_through_step), the first forward
// only, freed after the step's last backward of the segment.
#ifndef SHARDSIM_SIM_SCHEDULE_LOWER_FETCH_H_
#define SHARDSIM_SIM_SCHEDULE_LOWER_FETCH_H_

#include <cstdint>
#include <vector>

#include "sim/schedule/lower/pass.h"
#include "sim/schedule/lower/step.h"

namespace shardsim {
namespace lower {

class FetchPass : public Pass {
 public:
  // Plans every fetch over `step->visits`, which must be final.
  explicit FetchPass(Step* step);

  // Issues the visit's gathers (and prefetches); the compute op waits for
  // its own.
  void BeforeCompute(int v, std::vector<int>* deps) override;
  // Frees the copies visit `v` used last.
  void AfterCompute(int v, int op) override;

 private:
  struct Fetch {
    int seg = 0;
    int visit = 0;  // first needed by
    int user = 0;   // the visit after which it is freed
    Phase phase = FORWARD;
    int mb = 0;
    int op = -1;                   // the gather, once emitted
    int alloc = -1;                // its full-size buffer
    Limit limit = PREFETCH_LIMIT;  // why, if issued at its own hook
  };

  void Add(int v, int seg, Phase phase);
  void Hook(int v);
  int FirstFetchAfter(int v) const;
  void EmitCall(const std::vector<int>& fetches, Limit limit);
  void Release(int v, int op);

  Step& step_;
  std::vector<Fetch> fetches_;           // the step's gathers, by first need
  std::vector<std::vector<int>> own_;    // per visit: the fetches it needs
  std::vector<std::vector<int>> users_;  // per visit: fetches it frees
  // Per segment: its fetches still to be freed by its next backward.
  std::vector<std::vector<int>> pending_;
  std::vector<int> calls_;  // gather calls in issue order (first fetch)
  int frontier_ = 0;        // where DeepSpeed's prefetch resumes
  int64_t live_ = 0;        // gathered parameters not yet freed
};

}  // namespace lower
}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_LOWER_FETCH_H_

// Stage 4: a scenario's points analysed without timing them. Each
// (strategy, GPU count) is resolved and checked, its step lowered to the
// schedule IR, its memory read off the step's allocation plan
// (sim/memory/allocation.h) and its traffic counted; the engine
// (sim/simulate/simulate.h) times what this gives it.
#ifndef SHARDSIM_SIM_ANALYZE_ANALYZE_H_
#define SHARDSIM_SIM_ANALYZE_ANALYZE_H_

#include <string>

#include "absl/status/statusor.h"
#include "sim/memory/allocation.h"
#include "sim/scenario/scenario.h"
#include "sim/schedule/lower.h"
#include "sim/schedule/periodic.h"
#include "sim/schema/results.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

// Everything about one (strategy, GPU count) point that needs no timing.
struct Point {
  Scenario scenario;  // as it runs at this GPU count (ScenarioAt)
  Strategy strategy;
  Mesh mesh;
  OwnedSchedule schedule;    // the whole step, or the base of `fold`
  std::optional<Fold> fold;  // set only for Storage::kFolded
  ResultRow row;             // memory and traffic filled in

  // The step's ops, whether folded or not.
  StepOps ops() const {
    return fold ? StepOps(*schedule, *fold) : StepOps(*schedule);
  }
};

enum class Storage {
  kWhole,  // every op of the step stored
  // A step of many micro-batches lowered at kFoldAt and folded
  // (sim/schedule/periodic.h) where that fold is checked to hold; the
  // whole step otherwise. For users that read the step through ops().
  kFolded,
};

// Micro-batches a folded step of one stage is lowered at: the fewest at
// which every named strategy has the two repeating blocks a Fold needs.
// DeepSpeed stage 3's (ZeRO-3, MiCS, ZeRO++) repeat from the fourth
// micro-batch on and the last is the tail's, so 6 (tests/collapse_test.cc).
// The engine's collapse reads the blocks it keeps past these through the
// fold (DropBlocks).
inline constexpr int kFoldAt = 6;

// Micro-batches a block of the step repeats by (periodic.h): interleaved
// 1F1B runs them in groups of as many as there are stages (order.h).
inline int FoldStride(int pp, int vpp) { return pp > 1 && vpp > 1 ? pp : 1; }

// Micro-batches the step of `pp` stages of `vpp` chunks is lowered at to
// be folded (the fold is checked either way; this sets only where it is
// tried). 1F1B's blocks repeat once every stage runs its steady state,
// from block 2 (pp - 1) on, and its cool-down reads forwards pp - 1 blocks
// back, which must be repeating blocks for the tail to shift with the
// copies: the fewest that fold are 3 pp - 2 at 4 to 16 stages (measured,
// tests/pipeline_test.cc), so kFoldAt + 3 (pp - 1). Interleaved 1F1B
// repeats by groups of pp and folds from 5 to 7 groups on at 2 to 8
// stages: kFoldAt + 2 groups.
int FoldBase(int pp, int vpp);

// A pipeline's base is long (3 (pp - 1) micro-batches past kFoldAt), and
// lowering it twice and checking the fold costs about as much as lowering
// 3 bases' worth whole (`shardsim memory`, 8 stages, measured): it is
// folded from kFoldGain bases on.
inline constexpr int kFoldGain = 4;

// Whether Storage::kFolded folds a step of `scenario`'s micro-batches:
// more than one block past FoldBase (fewer are stored whole), in whole
// blocks, and a pipeline's at kFoldGain bases or more.
bool FoldsAt(const Scenario& scenario);

// Resolves, validates and lowers one point; fills memory (the allocation
// plan of the step, SetNameAndMemory) and traffic.
// Errors name the scenario file and the field at fault.
absl::StatusOr<Point> AnalyzePoint(const Job& job, const std::string& spec,
                                   int gpus, Storage storage = Storage::kWhole);

// AnalyzePoint without counting traffic (which plans every call): for
// users that plan the calls their own way (plan's lower bound) and for
// memory alone.
absl::StatusOr<Point> LowerPoint(const Job& job, const std::string& spec,
                                 int gpus, Storage storage = Storage::kWhole);

// Sets `row`'s step time and what follows from it, whoever timed the step
// (the engine, the estimate tier): tokens/s per GPU, and model TFLOP/s and
// MFU per GPU from the model's FLOPs of every micro-batch of the step,
// whichever GPUs run them (tensor, context and pipeline parallel ranks
// share theirs), over the GPUs.
void SetStepTime(const Job& job, const Point& point, double step_time_s,
                 ResultRow* row);

// "FILE: field strategies: "SPEC" at N GPUs: ", the prefix of a point's
// errors.
std::string PointName(const Job& job, const std::string& spec, int gpus);

// What a point's row says of the point itself, whatever ran it: its name
// (spec, GPUs, model, platform) and its memory, StepMemoryOf(plan): the
// plan's lines at its peak (param, grad, optimizer, activation and buffer
// bytes), the platform's reserve, their sum as the peak, and OOM when the
// peak exceeds the GPU's memory. The lines are those live at the peak
// moment, not each line's own highest point: they sum to the peak.
void SetNameAndMemory(const Job& job, const std::string& spec, int gpus,
                      const AllocationPlan& plan, ResultRow* row);

// `row`, which another point of the same replayed schedule ran, made the
// row of (spec, gpus): its name and memory (from its own step's
// allocation plan: ReplayDigest leaves memory ops out, so two points
// replayed alike may allocate differently) replace the other's; times and
// traffic, which the replay decides, stay. Errors: as AnalyzeJob's.
absl::Status RenamePoint(const Job& job, const std::string& spec, int gpus,
                         ResultRow* row);

enum class Analysis {
  // Memory only: the schedule lowered (folded where that holds) and its
  // allocation plan walked; no traffic counted.
  kMemory,
  kMemoryAndTraffic,  // the schedule lowered, its traffic counted
};

// Every strategy x GPU count of the job resolved and checked, nothing
// lowered: the errors a point gives before its step is lowered (mesh,
// strategy, execution, batch), cheaply, in scenario order.
absl::Status CheckPoints(const Job& job);

// Every strategy x GPU count of the job, in scenario order.
absl::StatusOr<Results> AnalyzeJob(const Job& job, Analysis what);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ANALYZE_ANALYZE_H_

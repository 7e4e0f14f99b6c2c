#include "sim/search/search.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "sim/analyze/analyze.h"
#include "sim/base/layout.h"
#include "sim/engine/replay.h"
#include "sim/estimate/estimate.h"
#include "sim/memory/allocation.h"
#include "sim/results/results.h"
#include "sim/runner/isolate.h"
#include "sim/runner/progress.h"
#include "sim/schedule/lower.h"
#include "sim/search/bound.h"
#include "sim/search/space.h"
#include "sim/strategy/composition.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// The job with `specs` as its strategies.
Job WithStrategies(const Job& job, const std::vector<std::string>& specs) {
  Job out = job;
  out.scenario.clear_strategies();
  for (const std::string& s : specs) out.scenario.add_strategies(s);
  return out;
}

// Faster first; equal speeds keep the candidates' order (stable sort).
void RankBySpeed(std::vector<ResultRow>* rows) {
  std::stable_sort(rows->begin(), rows->end(),
                   [](const ResultRow& a, const ResultRow& b) {
                     return a.tokens_per_gpu_per_s() > b.tokens_per_gpu_per_s();
                   });
}

// Rows that are one outcome: the same step time, peak memory and traffic
// to the last bit, and both deployable or neither (knobs that change
// nothing on this step, such as a prefetch depth the schedule never
// reaches).
bool Same(const ResultRow& a, const ResultRow& b) {
  return a.step_time_s() == b.step_time_s() &&
         a.peak_memory_bytes() == b.peak_memory_bytes() &&
         a.intra_node_bytes() == b.intra_node_bytes() &&
         a.inter_node_bytes() == b.inter_node_bytes() &&
         a.deployable() == b.deployable() && a.estimate() == b.estimate();
}

// True when `bound` proves a point of peak memory `peak` is neither the
// best nor on the Pareto front: a point already simulated runs strictly
// faster than it can, with no more memory. Strictly, so that ties rank as
// they would with every point simulated.
bool Dominated(double bound, int64_t peak,
               const std::vector<const ResultRow*>& done) {
  for (const ResultRow* q : done) {
    if (q->has_step_time_s() && q->step_time_s() < bound &&
        q->peak_memory_bytes() <= peak) {
      return true;
    }
  }
  return false;
}

// Whether a point's simulation failed because the models refuse the point
// (a schedule the lowering cannot build, a plan a collective cannot make),
// as opposed to a fault: the search reports such a point and goes on.
bool IsRefusal(const absl::Status& s) {
  return absl::IsInvalidArgument(s) || absl::IsFailedPrecondition(s) ||
         absl::IsUnimplemented(s) || absl::IsOutOfRange(s);
}

// The warning that names point `spec` at `settings`, which the models
// refuse for `why` (IsRefusal) at `stage` ("simulated", "searched").
std::string RefusedWarning(const std::string& spec,
                           const SearchSettings& settings, const char* stage,
                           const absl::Status& why) {
  ResultRow named;
  named.set_strategy(spec);
  *named.mutable_settings() = settings;
  return absl::StrCat(PlanPointName(named), ": not ", stage,
                      ", the models refuse it: ", why.message());
}

// Runs the search's waves of points, each point in a child as
// SimulatePoints runs it. Which points a wave simulates is decided only
// once the waves before it are done, so the search's choices never depend
// on timing. But a wave waits for its slowest point, and on 2 cores a
// 1024-GPU Lins point with a tree across nodes takes 1.3 s where most take
// 0.1 s: the cores it leaves idle start, ahead of their wave, the points
// `guess` names (the next in order that nothing simulated prunes yet).
// A point started ahead that its wave prunes or shares after all is
// dropped (killed, or its row forgotten): the results are the waves' own,
// only sooner. The 1024-GPU Lins plan (LLaMA-7B, FUSED kernels) on a
// 2-core machine: 58-64 s waiting for each wave, 49-52 s starting ahead
// (118 points ahead, none dropped). Under MPI (EngineOptions::run_tasks) each
// wave runs through SimulatePoints, spread over the ranks, nothing ahead: every
// rank gets every row of the wave, so all decide the next one alike.
class WaveRunner {
 public:
  // `guess`: the next point to start ahead, or -1; called only while a core
  // is idle. `tick`, if set, is called at least once a second while a wave
  // runs, with the points finished and not yet returned (a progress line).
  WaveRunner(std::vector<JobPoint> points, const EngineOptions& engine,
             absl::Time deadline, std::function<int()> guess,
             std::function<void(size_t)> tick)
      : points_(std::move(points)),
        engine_(engine),
        deadline_(deadline),
        guess_(std::move(guess)),
        tick_(std::move(tick)),
        pool_(engine.jobs) {}

  // The wave decided against `point`: it is not simulated.
  void Drop(int point) {
    if (started_.erase(point) == 0) return;
    pool_.Kill(point);
    rows_.erase(point);
  }

  // The rows of `wave`'s points, in order. A point the simulator refuses
  // (IsRefusal) has an empty row and its error in `*refused`, by point;
  // other errors: the first of theirs, in order. Once the deadline has
  // passed, `*stopped` is set and the points not finished by then have
  // empty rows (no step time); under MPI all of the wave's, so that every
  // rank has the same rows.
  absl::StatusOr<std::vector<ResultRow>> Run(
      const std::vector<int>& wave, bool* stopped,
      std::map<int, absl::Status>* refused) {
    if (engine_.run_tasks) return RunDistributed(wave, stopped);
    for (;;) {
      size_t ended = 0;
      for (int i : wave) ended += rows_.count(i);
      if (ended == wave.size()) break;
      for (int i : wave) {  // the wave's own first
        if (!pool_.full() && !started(i)) Start(i);
      }
      // Started and not of this wave: at most a wave's worth ahead.
      auto ahead = [&] {
        size_t mine = 0;
        for (int i : wave) mine += started_.count(i);
        return started_.size() - mine;
      };
      while (!pool_.full() && ahead() < 2 * static_cast<size_t>(engine_.jobs)) {
        const int g = guess_();
        if (g < 0) break;
        Start(g);
      }
      const absl::Duration left = deadline_ - absl::Now();
      if (left <= absl::ZeroDuration()) {
        *stopped = true;
        break;
      }
      int wait_ms = deadline_ == absl::InfiniteFuture()
                        ? -1
                        : static_cast<int>(std::min<int64_t>(
                              absl::ToInt64Milliseconds(left) + 1, 1 << 30));
      // Wake once a second to redraw the time elapsed.
      if (tick_ && (wait_ms < 0 || wait_ms > 1000)) wait_ms = 1000;
      if (auto r = pool_.Wait(wait_ms)) rows_[r->first] = std::move(r->second);
      if (tick_) tick_(rows_.size());
    }
    std::vector<ResultRow> out;
    for (int i : wave) {
      auto it = rows_.find(i);
      if (it == rows_.end()) {  // past the deadline
        out.emplace_back();
        continue;
      }
      absl::StatusOr<std::string> r = std::move(it->second);
      rows_.erase(it);
      started_.erase(i);
      if (!r.ok() && IsRefusal(r.status())) {
        out.emplace_back();
        refused->emplace(i, r.status());
        continue;
      }
      if (!r.ok()) return r.status();
      if (!out.emplace_back().ParseFromString(*r)) {
        return absl::InternalError("a simulation returned an unreadable row");
      }
    }
    return out;
  }

 private:
  bool started(int point) const { return started_.count(point) > 0; }

  void Start(int point) {
    started_.insert(point);
    const JobPoint& p = points_[point];
    if (absl::Status s =
            pool_.Start(point, point, PointTask(p, engine_, false));
        !s.ok()) {
      rows_[point] = s;
    }
  }

  absl::StatusOr<std::vector<ResultRow>> RunDistributed(
      const std::vector<int>& wave, bool* stopped) {
    std::vector<JobPoint> run;
    for (int i : wave) run.push_back(points_[i]);
    EngineOptions engine = engine_;
    // Every rank runs the wave, whatever its own clock says: the ranks
    // gather in it (distribute.h). One past its deadline kills its points
    // at once, and every rank then sees them fail alike.
    if (engine.time_limit_s > 0) {
      engine.time_limit_s =
          std::max(1e-3, absl::ToDoubleSeconds(deadline_ - absl::Now()));
    }
    absl::StatusOr<Results> rows = SimulatePoints(run, engine);
    if (absl::IsDeadlineExceeded(rows.status())) {
      *stopped = true;
      return std::vector<ResultRow>(wave.size());
    }
    if (!rows.ok()) return rows.status();
    return std::vector<ResultRow>(rows->rows().begin(), rows->rows().end());
  }

  const std::vector<JobPoint> points_;
  const EngineOptions engine_;
  const absl::Time deadline_;
  const std::function<int()> guess_;
  const std::function<void(size_t)> tick_;
  ChildPool pool_;
  std::set<int> started_;  // with a child, or its row, and not yet decided
  std::map<int, absl::StatusOr<std::string>> rows_;  // serialized
};

// The points of `spec` (its algorithm variants), each with its
// StepLowerBound and, where a time limit may stop the search, its estimate
// (EstimateStep, on the calls the bound prepared), from one lowering, and
// its ReplayDigest unless it is
// one stage's folded step (never shared), and
// whether it is deployable in `deployable`, by variant. A variant whose
// plans refuse a call gets no bound; the spec itself must plan. With
// options.deployable, the variants that are not deployable are left out.
// Past `deadline` no further variant is bounded, and `stopped` is set.
absl::Status BoundVariants(const Job& job, const std::string& spec,
                           const SearchSettings& settings,
                           const SearchOptions& options, StepBounder* bounder,
                           PreparedCalls* calls, absl::Time deadline,
                           SearchBounds* out,
                           std::map<std::string, bool>* deployable,
                           std::atomic<bool>* stopped) {
  // Folded where that holds (analyze.h): the bound, the estimate and the
  // digest read the step through its fold, the same as of the whole step
  // (a 70B pipeline's whole step is 10^5 to 10^6 ops, its fold 10^4).
  absl::StatusOr<Point> p =
      LowerPoint(job, spec, job.scenario.gpus(0), Storage::kFolded);
  if (!p.ok()) return p.status();
  std::set<GroupKind> kinds;  // none: the spec's own algorithms only
  for (const Op& op : p->schedule->ops()) {
    if (options.algorithms && op.has_collective() &&
        op.collective().algorithm() != DIRECT) {
      kinds.insert(KindOf(op.collective().group()));
    }
  }
  // The lowering itself for every variant: UseAlgorithms sets each
  // algorithm the variant picks (every collective's but a direct one's)
  // afresh, on the base ops a fold's copies read. (A copy, and freeing it,
  // was a quarter of a 3D plan's bounds.)
  Schedule& schedule = *p->schedule.mutable_schedule();
  const StepOps ops = p->ops();
  // Variants parse on the data-parallel mesh the strategy shards over.
  absl::StatusOr<Layout> layout =
      Layout::Make(p->mesh, p->scenario.parallelism());
  if (!layout.ok()) return layout.status();
  const Mesh dp_mesh = layout->DpMesh();
  for (const std::string& variant : AlgorithmVariants(
           spec, p->strategy, kinds, job.platform.network().sharp())) {
    if (absl::Now() > deadline) {
      *stopped = true;
      break;
    }
    absl::StatusOr<Strategy> strategy = ParseStrategy(variant, dp_mesh);
    if (!strategy.ok()) return strategy.status();
    UseAlgorithms(*strategy, &schedule);
    const bool can_deploy = Deployable(p->strategy, schedule);
    if (options.deployable && !can_deploy) continue;
    (*deployable)[variant] = can_deploy;
    absl::StatusOr<double> b = bounder->Bound(ops);
    if (absl::IsDeadlineExceeded(b.status())) {
      *stopped = true;
      break;
    }
    if (!b.ok() && variant == spec) return b.status();
    SearchBound* bound = out->add_bounds();
    bound->set_strategy(variant);
    *bound->mutable_settings() = settings;
    if (b.ok()) bound->set_step_lower_bound_s(*b);
    // Only a search that may stop early gains by the estimate: run to its
    // end, the bounds' order simulates the best point before every point
    // it could prune, and the estimate would cost a quarter of the bounds.
    if (b.ok() && deadline != absl::InfiniteFuture()) {
      absl::StatusOr<StepEstimate> e = EstimateStep(ops, calls);
      if (e.ok()) bound->set_step_estimate_s(e->step_time_s);
    }
    // One stage's folded steps are never shared; a pipeline's are, folded
    // or not (a folded step's digest is of its fold).
    if (p->scenario.parallelism().pp() > 1 || !FoldsAt(p->scenario)) {
      bound->set_step_digest(ReplayDigest(ops));
    }
  }
  return absl::OkStatus();
}

// A spec with one of the settings (an index into them).
struct Candidate {
  int setting = 0;
  std::string spec;
};

// BoundVariants of every candidate, per candidate in order, in --jobs
// threads that share `calls`: specs share most calls (a call's size
// follows the parameters, not the batch, and a Lins triple differs from
// the next in one factor), and a large group's plan takes a while to
// build and summarize, so each is prepared once for the whole search, and
// the simulations forked later inherit them (EngineOptions::prepared). Each
// thread takes the next spec when it is done with one: specs differ in
// cost a hundredfold (a Lins triple broadcasting over 1024 GPUs against a
// flat ring). A spec's candidates, whatever their settings, go to one
// thread. Past `deadline` the threads bound no further candidate and set
// `stopped`: the specs not bound have no bounds. A candidate the models
// refuse (IsRefusal) has none either: it goes into `refused` with why, in
// spec order. Whether each point is deployable goes into
// `deployable`, by its strategy; the progress line, if any, says how many
// specs are bound.
absl::StatusOr<std::vector<SearchBounds>> LowerBounds(
    const std::vector<Job>& jobs, const std::vector<SearchSettings>& settings,
    const std::vector<Candidate>& candidates, PreparedCalls* calls,
    const SearchOptions& options, absl::Time deadline, Progress* progress,
    std::map<std::string, bool>* deployable, std::atomic<bool>* stopped,
    std::vector<std::pair<Candidate, absl::Status>>* refused) {
  std::vector<std::string> specs;  // in the candidates' order
  std::map<std::string, std::vector<const Candidate*>> of_spec;
  for (const Candidate& c : candidates) {
    std::vector<const Candidate*>& list = of_spec[c.spec];
    if (list.empty()) specs.push_back(c.spec);
    list.push_back(&c);
  }
  const int n = static_cast<int>(specs.size());
  // One thread more than --jobs: a thread often waits for a call another
  // is preparing (PlanCache makes each once), and the spare one keeps the
  // cores busy meanwhile. The 1024-GPU Lins plan's bounds (LLaMA-7B, FUSED
  // kernels) on a 2-core machine took 24.1 s with 2 threads, 18.1 s with 3
  // and 17.7 s with 4 (peak memory 0.5, 0.74 and 0.89 GB).
  const int threads = std::max(1, std::min(options.engine.jobs + 1, n));
  StepBounder bounder(calls);
  bounder.set_deadline(deadline);
  std::vector<SearchBounds> of(n);  // per spec
  std::vector<std::map<std::string, bool>> deployable_of(n);
  std::vector<absl::Status> status(n);
  std::vector<std::vector<std::pair<Candidate, absl::Status>>> refused_of(n);
  std::atomic<int> next = 0;
  std::atomic<int> bound = 0;             // specs done, for the progress line
  std::atomic<int> candidates_bound = 0;  // and their candidates
  absl::Mutex progress_mutex;             // one progress line written at a time
  // A spec's candidates (its layouts and settings) can take minutes: a
  // line for each candidate bounded, as often as Progress draws them.
  auto show = [&](int candidates_done, int specs_done) {
    if (progress == nullptr) return;
    absl::MutexLock lock(&progress_mutex);
    progress->Show(absl::StrFormat(
        "plan: lower bounds of %d of %d candidates (%d of %d specs)",
        candidates_done, candidates.size(), specs_done, n));
  };
  std::atomic<bool> failed = false;
  // Neighbouring specs share calls (Lins triples a factor apart): taken
  // from the two halves of the list in turn, so that two threads seldom
  // wait for one call being prepared.
  std::vector<int> order;
  for (int i = 0; i < (n + 1) / 2; ++i) {
    order.push_back(i);
    if (i + (n + 1) / 2 < n) order.push_back(i + (n + 1) / 2);
  }
  auto work = [&] {
    for (int k; !failed && !*stopped && (k = next.fetch_add(1)) < n;) {
      const int i = order[k];
      for (const Candidate* c : of_spec.at(specs[i])) {
        if (absl::Now() > deadline) {
          *stopped = true;
          break;
        }
        const int before = of[i].bounds_size();
        status[i] = BoundVariants(
            jobs[c->setting], c->spec, settings[c->setting], options, &bounder,
            calls, deadline, &of[i], &deployable_of[i], stopped);
        if (IsRefusal(status[i])) {  // its variants bounded so far dropped
          of[i].mutable_bounds()->DeleteSubrange(before,
                                                 of[i].bounds_size() - before);
          refused_of[i].push_back({*c, std::move(status[i])});
          status[i] = absl::OkStatus();
        }
        if (!status[i].ok() || *stopped) break;
        show(++candidates_bound, bound);
      }
      if (!status[i].ok()) failed = true;
      if (*stopped) break;
      show(candidates_bound, ++bound);
    }
  };
  std::vector<std::thread> others;
  for (int k = 1; k < threads; ++k) others.emplace_back(work);
  work();
  for (std::thread& t : others) t.join();
  for (int i = 0; i < n; ++i) {
    if (!status[i].ok()) return status[i];  // the first in spec order
    deployable->insert(deployable_of[i].begin(), deployable_of[i].end());
  }
  for (const auto& of_spec_i : refused_of) {
    refused->insert(refused->end(), of_spec_i.begin(), of_spec_i.end());
  }
  // A row's candidate: its settings, and its strategy up to its first '@'.
  std::map<std::string, int> setting_index;
  for (size_t k = 0; k < settings.size(); ++k) {
    setting_index[settings[k].SerializeAsString()] = static_cast<int>(k);
  }
  auto setting_of = [&](const SearchSettings& p) {
    return setting_index.at(p.SerializeAsString());
  };
  std::map<std::pair<int, std::string>, SearchBounds> by_candidate;
  for (SearchBounds& bounds : of) {
    for (SearchBound& b : *bounds.mutable_bounds()) {
      const std::string& name = b.strategy();
      *by_candidate[{setting_of(b.settings()), name.substr(0, name.find('@'))}]
           .add_bounds() = std::move(b);
    }
  }
  std::vector<SearchBounds> out;
  for (const Candidate& c : candidates) {
    out.push_back(by_candidate[{c.setting, c.spec}]);
  }
  return out;
}

// The settings the search runs, the scenario's own first, and the specs
// each runs with: every batch setting (SettingsChoices) with every knob
// choice, each spec with its own framework's knobs (KnobChoices) only.
// `vary` false: the scenario's own settings alone.
struct Space {
  std::vector<SearchSettings> settings;
  std::vector<std::vector<std::string>> specs;  // per setting
};

// The candidate specs of one layout: valid on its data-parallel mesh, run
// as configured by their framework there (composition.h) unless the
// scenario asks for what-ifs, and deployable ones alone where asked.
std::vector<std::string> LayoutSpecs(const Job& job, const Mesh& mesh,
                                     const Parallelism& layout,
                                     bool deployable) {
  absl::StatusOr<Layout> l = Layout::Make(mesh, layout);
  if (!l.ok()) return {};
  std::vector<std::string> specs;
  for (const std::string& spec : CandidateSpecs(l->DpMesh())) {
    absl::StatusOr<Strategy> s = ParseStrategy(spec, l->DpMesh());
    if (!s.ok() || (deployable && !DeployableFramework(*s))) continue;
    if (!job.scenario.what_if() &&
        !UnsupportedComposition(*s, layout).empty()) {
      continue;
    }
    specs.push_back(spec);
  }
  return specs;
}

absl::StatusOr<Space> SpaceOf(const Job& job, const Mesh& mesh, int gpus,
                              const SearchOptions& options) {
  const bool vary = options.settings;
  std::vector<SearchSettings> batches =
      options.parallelism ? SettingsChoices(job, gpus, LayoutChoices(job, gpus))
                          : SettingsChoices(job, gpus);
  if (!vary) {
    // The scenario's own batch settings alone: each layout's first.
    std::vector<SearchSettings> own;
    std::set<std::string> seen;
    for (const SearchSettings& b : batches) {
      if (seen.insert(b.parallelism().SerializeAsString()).second) {
        own.push_back(b);
      }
    }
    batches = std::move(own);
  }
  // The specs of each layout, by its serialized Parallelism.
  std::map<std::string, std::vector<std::string>> specs_of;
  for (const SearchSettings& b : batches) {
    const Parallelism& layout =
        b.has_parallelism() ? b.parallelism() : job.scenario.parallelism();
    auto [it, added] = specs_of.try_emplace(layout.SerializeAsString());
    if (added) it->second = LayoutSpecs(job, mesh, layout, options.deployable);
  }
  // The distinct knob choices, numbered as first met; 0 is every
  // framework's defaults, which every spec runs.
  std::vector<Execution> knobs = {Execution()};
  std::map<std::string, std::set<int>> knobs_of;  // by spec
  std::map<std::string, int> index = {{"", 0}};
  for (const auto& [layout, specs] : specs_of) {
    Parallelism p;
    p.ParseFromString(layout);
    const Mesh dp = Layout::Make(mesh, p)->DpMesh();
    for (const std::string& spec : specs) {
      std::set<int>& mine = knobs_of[spec];
      mine.insert(0);
      if (!vary) continue;
      absl::StatusOr<Strategy> strategy = ParseStrategy(spec, dp, job.base_dir);
      if (!strategy.ok()) return strategy.status();
      for (const Execution& e : KnobChoices(*strategy, job.model.hidden(),
                                            job.scenario.execution())) {
        auto [it, added] = index.emplace(e.SerializeAsString(),
                                         static_cast<int>(knobs.size()));
        if (added) knobs.push_back(e);
        mine.insert(it->second);
      }
    }
  }
  Space out;
  for (const SearchSettings& b : batches) {
    const std::vector<std::string>& specs =
        specs_of[(b.has_parallelism() ? b.parallelism()
                                      : job.scenario.parallelism())
                     .SerializeAsString()];
    for (size_t k = 0; k < knobs.size(); ++k) {
      std::vector<std::string> run;
      for (const std::string& spec : specs) {
        if (knobs_of[spec].count(static_cast<int>(k))) run.push_back(spec);
      }
      if (run.empty()) continue;
      out.settings.push_back(b);
      *out.settings.back().mutable_execution() = knobs[k];
      out.specs.push_back(std::move(run));
    }
  }
  return out;
}

}  // namespace

std::vector<ResultRow> ParetoFront(const std::vector<ResultRow>& rows) {
  std::vector<ResultRow> sorted = rows;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const ResultRow& a, const ResultRow& b) {
                     if (a.peak_memory_bytes() != b.peak_memory_bytes()) {
                       return a.peak_memory_bytes() < b.peak_memory_bytes();
                     }
                     return a.tokens_per_gpu_per_s() > b.tokens_per_gpu_per_s();
                   });
  std::vector<ResultRow> front;
  for (const ResultRow& r : sorted) {
    if (front.empty() ||
        r.tokens_per_gpu_per_s() > front.back().tokens_per_gpu_per_s()) {
      front.push_back(r);
    }
  }
  return front;
}

namespace {

// The candidates that fit in memory (under the cap, if given), each with
// its peak, of all `space` holds, and those the models refuse; an error
// naming the smallest peak when none fits (the first refusal's when every
// candidate is refused). `progress` shows how many are checked.
struct Fitting {
  int candidates = 0;          // searched in all
  std::vector<Candidate> fit;  // those that fit
  std::vector<int64_t> peak;   // peak bytes of each that fits
  // Those the models refuse (IsRefusal: an offloaded optimizer under a
  // framework that does not offload, ...), each with why: reported and
  // left out, never the end of the search.
  std::vector<std::pair<Candidate, absl::Status>> refused;
};
absl::StatusOr<Fitting> FitInMemory(const Job& job,
                                    const std::vector<Job>& jobs,
                                    const Space& space, int gpus,
                                    const SearchOptions& options,
                                    absl::Time deadline, Progress* progress) {
  const std::vector<SearchSettings>& settings = space.settings;
  // Each candidate's step lowered (folded where that holds,
  // sim/analyze/analyze.h) and its allocation plan walked: the peak the
  // simulation and shardsim-hw would report. No traffic is counted. The
  // candidates are lowered in --jobs + 1 threads, as the bounds are
  // (LowerBounds): lowering hundreds of steps is most of this phase.
  std::vector<Job> memory_jobs;  // per setting, its candidates named
  std::vector<std::pair<int, std::string>> todo;  // (setting, spec)
  int candidates = 0;
  for (size_t k = 0; k < settings.size(); ++k) {
    candidates += static_cast<int>(space.specs[k].size());
    memory_jobs.push_back(WithStrategies(jobs[k], space.specs[k]));
    for (const std::string& spec : space.specs[k]) {
      todo.push_back({static_cast<int>(k), spec});
    }
  }
  std::vector<absl::StatusOr<ResultRow>> memory(todo.size(), ResultRow());
  {
    std::atomic<size_t> next_todo = 0;
    std::atomic<size_t> checked = 0;  // for the progress line
    absl::Mutex progress_mutex;       // one progress line written at a time
    auto work = [&] {
      for (size_t i; (i = next_todo++) < todo.size();) {
        // --time-limit holds here too: lowering every candidate is seconds.
        if (absl::Now() > deadline) {
          memory[i] = absl::DeadlineExceededError(absl::StrCat(
              "time limit of ", options.engine.time_limit_s,
              " s reached (--time-limit) while checking memory, at candidate ",
              i + 1, " of ", todo.size()));
          continue;
        }
        absl::StatusOr<Point> p = LowerPoint(
            memory_jobs[todo[i].first], todo[i].second, gpus, Storage::kFolded);
        memory[i] = p.ok() ? absl::StatusOr<ResultRow>(std::move(p->row))
                           : absl::StatusOr<ResultRow>(p.status());
        const size_t done = ++checked;
        absl::MutexLock lock(&progress_mutex);
        progress->Show(absl::StrFormat("plan: memory of %d of %d candidates",
                                       done, todo.size()));
      }
    };
    const int threads = static_cast<int>(std::max<size_t>(
        1, std::min<size_t>(options.engine.jobs + 1, todo.size())));
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (std::thread& t : pool) t.join();
  }
  Fitting out;
  out.candidates = candidates;
  std::optional<ResultRow> smallest;
  for (size_t i = 0; i < todo.size(); ++i) {
    const int k = todo[i].first;
    if (!memory[i].ok() && IsRefusal(memory[i].status())) {
      out.refused.push_back({{k, todo[i].second}, memory[i].status()});
      continue;
    }
    if (!memory[i].ok()) return memory[i].status();
    ResultRow& r = *memory[i];
    *r.mutable_settings() = settings[k];
    if (!smallest || r.peak_memory_bytes() < smallest->peak_memory_bytes()) {
      smallest = r;
    }
    const bool under_cap = !options.memory_cap_bytes ||
                           r.peak_memory_bytes() <= *options.memory_cap_bytes;
    if (!r.oom() && under_cap) {
      out.fit.push_back({k, r.strategy()});
      out.peak.push_back(r.peak_memory_bytes());
    }
  }
  if (!smallest && !out.refused.empty()) return out.refused[0].second;
  if (out.fit.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: no strategy fits at %d GPUs%s: the smallest peak is %.2f GiB "
        "(%s)",
        job.path, gpus,
        options.memory_cap_bytes
            ? absl::StrFormat(" under the cap of %.2f GiB",
                              *options.memory_cap_bytes / kGiB)
            : std::string(" in GPU memory"),
        smallest ? smallest->peak_memory_bytes() / kGiB : 0.0,
        smallest ? PlanPointName(*smallest) : "none"));
  }
  return out;
}

// Point `spec`'s row as `shardsim estimate` gives it (memory and traffic
// analysed, the step's times estimated), on the search's calls.
absl::StatusOr<ResultRow> EstimatedRow(const Job& job, const std::string& spec,
                                       int gpus, PreparedCalls* calls) {
  absl::StatusOr<Point> point = AnalyzePoint(job, spec, gpus, Storage::kFolded);
  if (!point.ok()) return point.status();
  absl::StatusOr<StepEstimate> e = EstimateStep(point->ops(), calls);
  if (!e.ok()) return e.status();
  ResultRow row = point->row;
  SetStepTime(job, *point, e->step_time_s, &row);
  row.set_compute_s(e->compute_s);
  row.set_exposed_comm_s(e->exposed_comm_s);
  row.set_estimate(true);
  return row;
}

}  // namespace

absl::StatusOr<SearchResults> SearchStrategies(const Job& job,
                                               const SearchOptions& options) {
  if (job.scenario.gpus_size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(job.path,
                     ": field gpus: plan searches one GPU count, the scenario "
                     "has ",
                     job.scenario.gpus_size(), " (give --gpus N)"));
  }
  if (options.parallelism && job.scenario.global_batch_tokens() == 0) {
    // Steps are compared by their time, which only ranks layouts at one
    // batch: micro_batches fixed, fewer replicas would run fewer tokens.
    return absl::InvalidArgumentError(absl::StrCat(
        job.path,
        ": field global_batch_tokens: plan --search-parallelism compares "
        "layouts at one global batch; give global_batch_tokens "
        "(--global-batch-tokens), not micro_batches"));
  }
  // --time-limit holds for the whole search: the bounds and every wave.
  const absl::Time deadline =
      options.engine.time_limit_s > 0
          ? absl::Now() + absl::Seconds(options.engine.time_limit_s)
          : absl::InfiniteFuture();
  const int gpus = job.scenario.gpus(0);
  absl::StatusOr<Mesh> mesh = JobMesh(job.platform, gpus);
  if (!mesh.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(job.path, ": field gpus: ", mesh.status().message()));
  }
  absl::StatusOr<Space> space = SpaceOf(job, *mesh, gpus, options);
  if (!space.ok()) return space.status();
  const std::vector<SearchSettings>& settings = space->settings;
  std::vector<Job> jobs;
  for (const SearchSettings& p : settings) jobs.push_back(JobWith(job, p));

  // One line over the whole search: memory, the bounds, then the waves.
  // Erased when the search returns, before anything is printed.
  Progress progress;

  // 1. Memory.
  absl::StatusOr<Fitting> fitting =
      FitInMemory(job, jobs, *space, gpus, options, deadline, &progress);
  if (!fitting.ok()) return fitting.status();
  const int candidates = fitting->candidates;
  const std::vector<Candidate>& fit = fitting->fit;
  const std::vector<int64_t>& fit_peak = fitting->peak;

  // 2. Every algorithm choice of what fits is a point with its lower
  // bound; the points in order of their bounds, a wave at a time, each
  // wave pruning the rest. Their calls are prepared once, here, for the
  // bounds and the simulations both (every job has the scenario's mesh
  // and platform).
  PreparedCalls calls(*mesh, job.platform, options.engine.mode,
                      job.platform.channels(), /*volumes=*/true);
  EngineOptions engine = options.engine;
  engine.prepared = &calls;
  std::map<std::string, bool> deployable_of;  // by point
  std::atomic<bool> stopped_bounding = false;
  // The candidates the models refuse, in memory or in the bounds: each is
  // one point, unplannable, named in the warnings.
  std::vector<std::pair<Candidate, absl::Status>> refused_candidates =
      fitting->refused;
  absl::StatusOr<std::vector<SearchBounds>> variants =
      LowerBounds(jobs, settings, fit, &calls, options, deadline, &progress,
                  &deployable_of, &stopped_bounding, &refused_candidates);
  if (!variants.ok()) return variants.status();
  // Each simulation is a fork, which copies the page tables of every page
  // this process maps: the bounds' garbage, which SetUpHeap (main.cc) keeps
  // mapped for reuse, goes back first. 285 forks of the 1024-GPU Lins plan
  // (LLaMA-7B, FUSED kernels) on a 2-core machine took 2.2 s without this
  // and 1.0 s with it.
  malloc_trim(0);
  std::vector<Candidate> points;
  std::vector<double> bounds;
  std::vector<double> estimates;  // infinite: none (no time limit)
  std::vector<int64_t> peaks;
  std::vector<bool> deployable;
  // The step each point runs where it may be shared: its batch and its
  // ReplayDigest.
  using Step = std::pair<std::string, uint64_t>;
  std::vector<std::optional<Step>> steps;
  int unplannable = 0;  // of the bounds
  for (size_t b = 0; b < fit.size(); ++b) {
    SearchSettings batch = settings[fit[b].setting];
    batch.clear_execution();
    for (const SearchBound& v : (*variants)[b].bounds()) {
      if (!v.has_step_lower_bound_s()) {
        ++unplannable;
        continue;
      }
      points.push_back({fit[b].setting, v.strategy()});
      bounds.push_back(v.step_lower_bound_s());
      estimates.push_back(v.has_step_estimate_s()
                              ? v.step_estimate_s()
                              : std::numeric_limits<double>::infinity());
      peaks.push_back(fit_peak[b]);
      deployable.push_back(deployable_of.at(v.strategy()));
      steps.push_back(v.has_step_digest()
                          ? std::optional<Step>(Step(batch.SerializeAsString(),
                                                     v.step_digest()))
                          : std::nullopt);
    }
  }
  const std::vector<std::string> named = NamedStrategies();
  const std::set<std::string> presets(named.begin(), named.end());
  // The named presets as the scenario runs them: its own settings.
  auto is_preset = [&](const Candidate& c) {
    return c.setting == 0 && presets.count(c.spec) > 0;
  };
  const bool prune = !options.exhaustive;
  // Twice the simulations that run at once, on every rank together: an
  // MPI run decides as the serial run with as many --jobs does.
  const size_t wave =
      std::max(2, 2 * options.engine.jobs * options.engine.ranks);
  // The first wave is the points the estimate ranks best, so that a good
  // point is simulated first whenever the time limit comes; then the rest
  // in order of their bounds, which prunes as much as any order: a point
  // is simulated before every point whose bound is above its step. With
  // no estimates (no time limit), every wave in order of the bounds.
  std::vector<int> by_estimate(points.size());
  std::iota(by_estimate.begin(), by_estimate.end(), 0);
  std::stable_sort(by_estimate.begin(), by_estimate.end(), [&](int a, int b) {
    return std::pair(estimates[a], bounds[a]) <
           std::pair(estimates[b], bounds[b]);
  });
  std::vector<int> order(
      by_estimate.begin(),
      by_estimate.begin() + std::min(wave, by_estimate.size()));
  std::vector<int> rest(by_estimate.begin() + order.size(), by_estimate.end());
  std::stable_sort(rest.begin(), rest.end(),
                   [&](int a, int b) { return bounds[a] < bounds[b]; });
  order.insert(order.end(), rest.begin(), rest.end());
  SearchResults out;
  for (const auto& [c, why] : refused_candidates) {
    out.add_warnings(
        RefusedWarning(c.spec, settings[c.setting], "searched", why));
  }
  std::vector<std::optional<ResultRow>> timed(points.size());
  // The rows simulated so far, and of them the deployable ones.
  std::vector<const ResultRow*> done;
  std::vector<const ResultRow*> done_deployable;
  // A deployable point is pruned only by a deployable row, so that the
  // fastest deployable point is simulated whatever else beats it.
  auto pruned_by_bound = [&](int i) {
    return prune && Dominated(bounds[i], peaks[i],
                              deployable[i] ? done_deployable : done);
  };
  // The point simulated for each step, and each point that took another's.
  std::map<Step, int> simulated_for;
  std::vector<int> same_as(points.size(), -1);
  int pruned = 0;
  int same_step = 0;
  // The points the simulator refused (IsRefusal): counted unplannable,
  // each named in the warnings with the reason.
  std::map<int, absl::Status> refused_points;
  auto refuse = [&](int i, absl::Status why) {
    refused_points.emplace(i, why);
    out.add_warnings(RefusedWarning(points[i].spec, settings[points[i].setting],
                                    "simulated", why));
  };
  size_t next = 0;
  // Where guesses go on from: the points before it were started ahead, or
  // are pruned (and stay so: `done` only grows), or share a step begun.
  // Waves start points before `next` only, so none from here on runs.
  size_t guessed = 0;
  std::set<Step> guessed_steps;
  std::vector<JobPoint> run;
  for (const Candidate& p : points) {
    run.push_back({&jobs[p.setting], p.spec, gpus});
  }
  auto guess = [&]() -> int {
    if (!options.start_ahead) return -1;
    for (guessed = std::max(guessed, next); guessed < order.size();) {
      const int i = order[guessed++];
      if (pruned_by_bound(i)) continue;
      if (steps[i] && options.share_steps &&
          (simulated_for.count(*steps[i]) > 0 ||
           !guessed_steps.insert(*steps[i]).second)) {
        continue;
      }
      return i;
    }
    return -1;
  };
  int simulated = 0;                   // points with a row, their own or shared
  const ResultRow* fastest = nullptr;  // of the rows with a step
  // The progress line: points simulated (finished, not yet returned by the
  // runner included) and pruned so far, of them all, and the fastest step
  // simulated so far.
  auto show = [&](size_t finished) {
    std::string line = absl::StrFormat(
        "plan: %d of %d points simulated, %d pruned",
        simulated + static_cast<int>(finished), order.size(), pruned);
    if (fastest != nullptr) {
      absl::StrAppendFormat(&line, ", best so far %s at %.4g s a step",
                            PlanPointName(*fastest), fastest->step_time_s());
    }
    progress.Show(line);
  };
  WaveRunner runner(std::move(run), engine, deadline, guess, show);
  bool stopped = stopped_bounding;  // by the time limit
  while (next < order.size() && !stopped) {
    std::vector<int> batch;
    std::vector<int> shared;
    for (; next < order.size() && batch.size() < wave; ++next) {
      const int i = order[next];
      if (pruned_by_bound(i)) {
        ++pruned;
        runner.Drop(i);
        if (is_preset(points[i])) {
          ResultRow* r = out.add_pruned_presets();
          r->set_strategy(points[i].spec);
          r->set_gpus(gpus);
          r->set_peak_memory_bytes(peaks[i]);
          r->set_step_lower_bound_s(bounds[i]);
          *r->mutable_settings() = settings[points[i].setting];
          r->set_deployable(deployable[i]);
        }
        continue;
      }
      if (steps[i] && options.share_steps) {
        auto [first, added] = simulated_for.emplace(*steps[i], i);
        if (!added) {
          same_as[i] = first->second;
          shared.push_back(i);
          runner.Drop(i);
          continue;
        }
      }
      batch.push_back(i);
    }
    // The row of point `i`, now simulated or shared.
    auto keep = [&](int i, ResultRow r) {
      r.set_step_lower_bound_s(bounds[i]);
      *r.mutable_settings() = settings[points[i].setting];
      r.set_deployable(deployable[i]);
      timed[i] = std::move(r);
      done.push_back(&*timed[i]);
      if (deployable[i]) done_deployable.push_back(&*timed[i]);
      if (timed[i]->has_step_time_s() &&
          (fastest == nullptr ||
           timed[i]->step_time_s() < fastest->step_time_s())) {
        fastest = &*timed[i];
      }
      ++simulated;
    };
    if (!batch.empty()) {
      std::map<int, absl::Status> refused;
      absl::StatusOr<std::vector<ResultRow>> rows =
          runner.Run(batch, &stopped, &refused);
      if (!rows.ok()) return rows.status();
      for (const auto& [i, why] : refused) refuse(i, why);
      if (rows->size() != batch.size()) {
        return absl::InternalError(absl::StrCat("a wave of ", batch.size(),
                                                " points returned ",
                                                rows->size(), " rows"));
      }
      for (size_t k = 0; k < batch.size(); ++k) {
        // Past the time limit, a point not finished has an empty row.
        if ((*rows)[k].ByteSizeLong() == 0) continue;
        keep(batch[k], std::move((*rows)[k]));
      }
    }
    for (int i : shared) {
      // Its twin refused: so is it, with the same schedule.
      if (refused_points.count(same_as[i]) > 0) {
        refuse(i, refused_points.at(same_as[i]));
        continue;
      }
      if (!timed[same_as[i]]) continue;  // its twin not finished in time
      const ResultRow& twin = *timed[same_as[i]];
      ResultRow r = twin;
      if (absl::Status s =
              RenamePoint(jobs[points[i].setting], points[i].spec, gpus, &r);
          !s.ok()) {
        return s;
      }
      r.set_same_step_as(PlanPointName(twin));
      keep(i, std::move(r));
      ++same_step;
    }
    show(0);
  }
  if (stopped && simulated == 0) {
    // Nothing simulated in time: the estimate's best rows of the points
    // bounded instead, each marked.
    if (order.empty()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "time limit of ", options.engine.time_limit_s,
          " s reached (--time-limit) before any point was bounded"));
    }
    // The first n of `from`, and its first deployable point if not among
    // them; points with no estimate left out.
    auto first = [&](const std::vector<int>& from, int n) {
      std::vector<int> out;
      bool has_deployable = false;
      for (int i : from) {
        if (std::isinf(estimates[i])) break;  // the rest have none either
        if (static_cast<int>(out.size()) < n ||
            (deployable[i] && !has_deployable)) {
          out.push_back(i);
          has_deployable = has_deployable || deployable[i];
        }
      }
      return out;
    };
    const std::vector<int> picked = first(by_estimate, options.top);
    for (int i : picked) {
      absl::StatusOr<ResultRow> r =
          EstimatedRow(jobs[points[i].setting], points[i].spec, gpus, &calls);
      if (!r.ok() && IsRefusal(r.status())) {
        refuse(i, r.status());
        continue;
      }
      if (!r.ok()) return r.status();
      r->set_step_lower_bound_s(bounds[i]);
      *r->mutable_settings() = settings[points[i].setting];
      r->set_deployable(deployable[i]);
      timed[i] = *std::move(r);
    }
    out.add_warnings(absl::StrCat(
        "time limit of ", options.engine.time_limit_s,
        " s reached (--time-limit) while ",
        stopped_bounding ? "bounding" : "simulating", ", ", order.size(),
        " points bounded, none simulated: the rows are the estimate tier's "
        "(marked estimate), the best ",
        picked.size(), " by it"));
    if (std::string caveat = EstimateCaveat(job.platform); !caveat.empty()) {
      out.add_warnings(std::move(caveat));
    }
  }
  out.set_complete(!stopped);
  out.set_scenario(job.path);
  out.set_gpus(gpus);
  out.set_memory_cap_bytes(options.memory_cap_bytes
                               ? *options.memory_cap_bytes
                               : TightestGpu(job.platform).memory_bytes());
  std::set<std::string> specs;  // every layout's
  for (const std::vector<std::string>& run : space->specs) {
    specs.insert(run.begin(), run.end());
  }
  out.set_specs(static_cast<int>(specs.size()));
  out.set_settings(static_cast<int>(settings.size()));
  out.set_candidates(candidates);
  const int refused = static_cast<int>(refused_candidates.size());
  out.set_filtered(candidates - static_cast<int>(fit.size()) -
                   static_cast<int>(fitting->refused.size()));
  out.set_points(static_cast<int>(points.size()) + unplannable + refused);
  out.set_unplannable(unplannable + refused +
                      static_cast<int>(refused_points.size()));
  out.set_pruned(pruned);
  out.set_simulated(simulated);
  out.set_same_step(same_step);
  std::vector<ResultRow> rows;  // in candidate order
  std::vector<bool> row_is_preset;
  for (size_t i = 0; i < timed.size(); ++i) {
    if (timed[i] && timed[i]->has_step_time_s()) {
      rows.push_back(*timed[i]);
      row_is_preset.push_back(is_preset(points[i]));
    }
  }
  if (rows.empty()) return out;

  // 3. Ranked, the presets beside them, and the front.
  for (size_t i = 0; i < rows.size(); ++i) {
    if (row_is_preset[i]) *out.add_presets() = rows[i];
  }
  for (const ResultRow& r : ParetoFront(rows)) *out.add_pareto() = r;
  RankBySpeed(&rows);
  // One rank per distinct outcome: a point the same as a ranked one is
  // listed beside it, not ranked again.
  std::vector<const ResultRow*> ranked;
  std::map<int, std::vector<std::string>> twins;  // by rank, within the top
  for (const ResultRow& row : rows) {
    auto same = std::find_if(ranked.begin(), ranked.end(), [&](auto* r) {
      return options.merge_same && Same(*r, row);
    });
    const int rank = static_cast<int>(same - ranked.begin()) + 1;
    if (same != ranked.end()) {
      if (rank <= options.top) twins[rank].push_back(PlanPointName(row));
      continue;
    }
    ranked.push_back(&row);
    if (rank <= options.top) {
      ResultRow* r = out.add_best();
      *r = row;
      r->set_rank(rank);
    }
    if (row.deployable() && !out.has_best_deployable()) {
      ResultRow* r = out.mutable_best_deployable();
      *r = row;
      r->set_rank(rank);
    }
  }
  for (const auto& [rank, points] : twins) {
    SearchResults::Equivalent* e = out.add_equivalents();
    e->set_rank(rank);
    for (const std::string& p : points) e->add_points(p);
  }
  const double tie = out.best(0).step_time_s() * (1 + kTie);
  int ties = 0;
  while (ties < out.best_size() && out.best(ties).step_time_s() <= tie) ++ties;
  out.set_ties(ties);
  out.set_tie_fraction(kTie);
  return out;
}

}  // namespace shardsim

#include "sim/search/search.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/analyze/analyze.h"
#include "sim/search/space.h"
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

absl::StatusOr<PlanResults> SearchStrategies(const Job& job,
                                             const SearchOptions& options) {
  if (job.scenario.gpus_size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(job.path,
                     ": field gpus: plan searches one GPU count, the scenario "
                     "has ",
                     job.scenario.gpus_size(), " (give --gpus N)"));
  }
  const int gpus = job.scenario.gpus(0);
  absl::StatusOr<Mesh> mesh = JobMesh(job.platform, gpus);
  if (!mesh.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(job.path, ": field gpus: ", mesh.status().message()));
  }
  const std::vector<std::string> candidates = CandidateSpecs(*mesh);

  // 1. Memory: the model's estimate, no schedule lowered.
  absl::StatusOr<Results> memory =
      AnalyzeJob(WithStrategies(job, candidates), Analysis::kMemory);
  if (!memory.ok()) return memory.status();
  std::vector<std::string> fit;
  const ResultRow* smallest = nullptr;
  for (const ResultRow& r : memory->rows()) {
    if (smallest == nullptr ||
        r.peak_memory_bytes() < smallest->peak_memory_bytes()) {
      smallest = &r;
    }
    const bool under_cap = !options.memory_cap_bytes ||
                           r.peak_memory_bytes() <= *options.memory_cap_bytes;
    if (!r.oom() && under_cap) fit.push_back(r.strategy());
  }
  if (fit.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: no strategy fits at %d GPUs%s: the smallest peak is %.2f GiB "
        "(%s)",
        job.path, gpus,
        options.memory_cap_bytes
            ? absl::StrFormat(" under the cap of %.2f GiB",
                              *options.memory_cap_bytes / kGiB)
            : std::string(" in GPU memory"),
        smallest == nullptr ? 0.0 : smallest->peak_memory_bytes() / kGiB,
        smallest == nullptr ? "none" : smallest->strategy()));
  }

  // 2. Every point that fits, simulated.
  absl::StatusOr<Results> timed =
      SimulateJob(WithStrategies(job, fit), options.engine);
  if (!timed.ok()) return timed.status();
  PlanResults out;
  out.set_scenario(job.path);
  out.set_gpus(gpus);
  out.set_memory_cap_bytes(options.memory_cap_bytes
                               ? *options.memory_cap_bytes
                               : job.platform.gpu().memory_bytes());
  out.set_candidates(static_cast<int>(candidates.size()));
  out.set_filtered(static_cast<int>(candidates.size() - fit.size()));
  out.set_simulated(timed->rows_size());
  if (timed->rows().empty()) return out;  // an MPI rank other than 0

  // 3. Ranked, the presets beside them, and the front.
  std::vector<ResultRow> rows(timed->rows().begin(), timed->rows().end());
  const std::vector<std::string> named = NamedStrategies();
  const std::set<std::string> presets(named.begin(), named.end());
  for (const ResultRow& r : rows) {
    if (presets.count(r.strategy())) *out.add_presets() = r;
  }
  for (const ResultRow& r : ParetoFront(rows)) *out.add_pareto() = r;
  RankBySpeed(&rows);
  for (int i = 0; i < static_cast<int>(rows.size()) && i < options.top; ++i) {
    ResultRow* r = out.add_best();
    *r = rows[i];
    r->set_rank(i + 1);
  }
  return out;
}

}  // namespace shardsim

#include "validate/calibrate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace shardsim {

namespace {

constexpr int kRounds = 4;
constexpr int64_t kLargeBytes = 1 << 20;  // below: latency-bound sizes

int Steps(CollectiveOp op, int gpus) {
  switch (op) {
    case ALL_GATHER:
    case REDUCE_SCATTER:
      return gpus - 1;
    case ALL_REDUCE:
      return 2 * (gpus - 1);
    default:
      return 0;
  }
}

// One measured size as the fit sees it.
struct Sample {
  const MeasurementSet* set;
  int64_t size;
  double t;        // measured, s
  double base;     // base latency + steps x alpha on the current platform
  double bw_part;  // simulated time minus `base`
  int steps;
  std::string protocol;
};

// One observation of a linear model t ~= sum(known) + x . coef. The known
// terms stay apart rather than pre-summed: target and prediction then
// round exactly as they always have, so calibrated platforms do not drift.
struct Observation {
  double t;
  std::vector<double> known;
  std::vector<double> x;
};

struct LinearFit {
  std::vector<double> coef;
  std::vector<double> std_error;  // per coefficient, from the covariance
};

// Gauss-Jordan on [a | I | b]: the solution and a's inverse at once (the
// inverse gives the fit's covariance); returns false when singular.
bool SolveNormalEquations(std::vector<std::vector<double>> a,
                          std::vector<double> b, std::vector<double>* x,
                          std::vector<std::vector<double>>* inv) {
  const int n = b.size();
  std::vector<std::vector<double>> m(n, std::vector<double>(2 * n + 1, 0));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) m[i][j] = a[i][j];
    m[i][n + i] = 1;
    m[i][2 * n] = b[i];
  }
  for (int c = 0; c < n; ++c) {
    int piv = c;
    for (int r = c + 1; r < n; ++r) {
      if (std::abs(m[r][c]) > std::abs(m[piv][c])) piv = r;
    }
    if (std::abs(m[piv][c]) < 1e-300) return false;
    std::swap(m[c], m[piv]);
    const double d = m[c][c];
    for (double& v : m[c]) v /= d;
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = m[r][c];
      if (f == 0) continue;
      for (int k = 0; k <= 2 * n; ++k) m[r][k] -= f * m[c][k];
    }
  }
  x->assign(n, 0);
  inv->assign(n, std::vector<double>(n, 0));
  for (int i = 0; i < n; ++i) {
    (*x)[i] = m[i][2 * n];
    for (int j = 0; j < n; ++j) (*inv)[i][j] = m[i][n + j];
  }
  return true;
}

// The one least-squares solve of the calibration. Weights are 1/t^2, so
// every point counts by its relative error (a 1 GB size must not drown a
// 1 KB one); standard errors scale the covariance by the residual
// variance, 0 when no point is spare.
absl::StatusOr<LinearFit> WeightedLeastSquares(
    const std::vector<Observation>& observations, int unknowns) {
  const int k = unknowns;
  std::vector<std::vector<double>> ata(k, std::vector<double>(k, 0));
  std::vector<double> atb(k, 0);
  for (const Observation& o : observations) {
    double y = o.t;
    for (double v : o.known) y -= v;
    const double w = 1 / (o.t * o.t);
    for (int i = 0; i < k; ++i) {
      atb[i] += w * o.x[i] * y;
      for (int j = 0; j < k; ++j) ata[i][j] += w * o.x[i] * o.x[j];
    }
  }
  LinearFit fit;
  std::vector<std::vector<double>> inv;
  if (!SolveNormalEquations(ata, atb, &fit.coef, &inv)) {
    return absl::InvalidArgumentError("singular normal equations");
  }
  double rss = 0;
  for (const Observation& o : observations) {
    double pred = 0;
    for (double v : o.known) pred += v;
    for (int i = 0; i < k; ++i) pred += o.x[i] * fit.coef[i];
    rss += (o.t - pred) * (o.t - pred) / (o.t * o.t);
  }
  const double sigma2 = observations.size() > static_cast<size_t>(k)
                            ? rss / (observations.size() - k)
                            : 0;
  for (int i = 0; i < k; ++i) {
    fit.std_error.push_back(std::sqrt(std::max(0.0, sigma2 * inv[i][i])));
  }
  return fit;
}

Protocol* FindProtocol(Platform* p, const std::string& name) {
  for (Protocol& proto : *p->mutable_protocols()) {
    if (proto.name() == name) return &proto;
  }
  return nullptr;
}

const Protocol* FindProtocol(const Platform& p, const std::string& name) {
  for (const Protocol& proto : p.protocols()) {
    if (proto.name() == name) return &proto;
  }
  return nullptr;
}

struct Tier {
  bool inter;
  std::vector<const MeasurementSet*> sets;
  std::string name() const { return inter ? "network" : "NVSwitch"; }
  std::string fraction_name() const {
    return inter ? "efficiency.network_fraction" : "efficiency.nvlink_fraction";
  }
  std::string alpha_field() const {
    return inter ? "inter_alpha_s" : "intra_alpha_s";
  }
  std::string alpha_name(const Protocol& proto) const {
    return absl::StrCat("protocols[", proto.name(), "].", alpha_field());
  }
  double fraction(const Platform& p) const {
    return inter ? p.efficiency().network_fraction()
                 : p.efficiency().nvlink_fraction();
  }
  void set_fraction(Platform* p, double f) const {
    if (inter) {
      p->mutable_efficiency()->set_network_fraction(f);
    } else {
      p->mutable_efficiency()->set_nvlink_fraction(f);
    }
  }
  double alpha(const Protocol& proto) const {
    return inter ? proto.inter_alpha_s() : proto.intra_alpha_s();
  }
  void set_alpha(Protocol* proto, double a) const {
    if (inter) {
      proto->set_inter_alpha_s(a);
    } else {
      proto->set_intra_alpha_s(a);
    }
  }
};

// The sizes a tier's measurements cover: two distinct sizes at least
// separate latency from bandwidth, and only sizes >= 1 MB pin bandwidth.
struct TierCoverage {
  std::vector<std::string> files;
  size_t distinct_sizes = 0;
  int64_t min_size = INT64_MAX;
  int64_t max_size = 0;
};

TierCoverage Coverage(const Tier& tier) {
  TierCoverage coverage;
  std::set<int64_t> sizes;
  for (const MeasurementSet* s : tier.sets) {
    coverage.files.push_back(s->file);
    for (const MeasurementRow& r : s->Primary()) {
      sizes.insert(r.size_bytes);
      coverage.min_size = std::min(coverage.min_size, r.size_bytes);
      coverage.max_size = std::max(coverage.max_size, r.size_bytes);
    }
  }
  coverage.distinct_sizes = sizes.size();
  return coverage;
}

// Point collection: every measured size with the engine's split of its
// time on the current platform. Re-read every round, because the
// protocol the engine picks moves with the parameters being fitted.
absl::StatusOr<std::vector<Sample>> CollectSamples(const Tier& tier,
                                                   const Platform& platform) {
  std::vector<Sample> samples;
  for (const MeasurementSet* s : tier.sets) {
    const std::vector<MeasurementRow> rows = s->Primary();
    std::vector<int64_t> sizes;
    for (const MeasurementRow& r : rows) sizes.push_back(r.size_bytes);
    absl::StatusOr<std::vector<CollectiveRow>> sim =
        SimulateSizes(platform, *s, sizes);
    if (!sim.ok()) return sim.status();
    for (size_t i = 0; i < rows.size(); ++i) {
      const Protocol* proto = FindProtocol(platform, (*sim)[i].protocol());
      if (proto == nullptr) {
        return absl::InternalError("engine protocol unknown");
      }
      Sample p;
      p.set = s;
      p.size = rows[i].size_bytes;
      p.t = rows[i].time_us * 1e-6;
      p.steps = Steps(s->op, s->gpus);
      p.base = proto->base_latency_s() + p.steps * tier.alpha(*proto);
      p.bw_part = (*sim)[i].time_us() * 1e-6 - p.base;
      p.protocol = proto->name();
      samples.push_back(p);
    }
  }
  return samples;
}

// What the rounds learned about one protocol's alpha, for the report. A
// protocol the engine stops picking keeps what an earlier round found.
struct AlphaRecord {
  int points = 0;  // distinct sizes the engine runs with the protocol
  double std_error = 0;
  bool identified = false;
  std::string why;  // empty: the engine never picked it
};

// The fit's state across rounds.
struct TierRounds {
  int points = 0;  // samples of the last round
  double fraction_std_error = 0;
  std::map<std::string, AlphaRecord> alphas;  // by protocol name
};

// An alpha shift is identifiable only from two or more distinct sizes the
// engine runs with that protocol; the rest are left out of the fit and
// say why.
std::vector<std::string> FittableProtocols(
    const std::vector<Sample>& samples,
    std::map<std::string, AlphaRecord>* alphas) {
  std::map<std::string, std::set<int64_t>> sizes;
  for (const Sample& p : samples) sizes[p.protocol].insert(p.size);
  std::vector<std::string> protos;
  for (const auto& [name, s] : sizes) {
    AlphaRecord& alpha = (*alphas)[name];
    alpha.points = s.size();
    if (s.size() >= 2) {
      protos.push_back(name);
    } else {
      alpha.why = absl::StrCat("not identified: the engine picks ", name,
                               " at ", s.size(), " measured size(s) only");
    }
  }
  return protos;
}

// The samples as a linear model. Unknowns: the bandwidth scale g (if
// fitted), then one alpha shift per protocol of `protos`; without g the
// engine's bandwidth part is taken as known.
std::vector<Observation> ToObservations(
    const std::vector<Sample>& samples, bool fit_bandwidth,
    const std::vector<std::string>& protos) {
  std::vector<Observation> observations;
  for (const Sample& p : samples) {
    Observation o;
    o.t = p.t;
    o.known.push_back(p.base);
    if (fit_bandwidth) {
      o.x.push_back(p.bw_part);
    } else {
      o.known.push_back(p.bw_part);
    }
    for (const std::string& name : protos) {
      o.x.push_back(p.protocol == name ? p.steps : 0);
    }
    observations.push_back(std::move(o));
  }
  return observations;
}

// Moves `platform` to one round's solution. An alpha is taken only when
// the fit pins it to within +-50%: a looser one would carry the noise of
// the measurements into the platform.
absl::Status ApplyFit(const Tier& tier, const LinearFit& fit,
                      bool fit_bandwidth,
                      const std::vector<std::string>& protos,
                      Platform* platform, TierRounds* rounds) {
  int c = 0;
  if (fit_bandwidth) {
    const double g = fit.coef[0];
    if (!(g > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(tier.name(), " tier: fitted bandwidth scale ", g,
                       " is not positive"));
    }
    const double f = tier.fraction(*platform) / g;
    rounds->fraction_std_error = fit.std_error[0] / g * f;
    tier.set_fraction(platform, std::min(f, 1.0));
    ++c;
  }
  for (const std::string& name : protos) {
    Protocol* proto = FindProtocol(platform, name);
    const double a = tier.alpha(*proto) + fit.coef[c];
    AlphaRecord& alpha = rounds->alphas[name];
    alpha.std_error = fit.std_error[c];
    ++c;
    const double value = std::max(a, 0.0);
    if (value > 0 && alpha.std_error < 0.5 * value) {
      tier.set_alpha(proto, value);
      alpha.identified = true;
      alpha.why = "fitted";
    } else {
      alpha.identified = false;
      alpha.why = absl::StrFormat(
          "not identified: fit gives %.3g +- %.2g s (latency is too small a "
          "share of the measured times)",
          a, alpha.std_error);
    }
  }
  return absl::OkStatus();
}

// Reporting: the bandwidth fraction, with the evidence behind it.
FittedParameter ReportFraction(const Tier& tier, const Platform& base,
                               const Platform& platform,
                               const TierCoverage& coverage, bool fit_bandwidth,
                               const TierRounds& rounds) {
  FittedParameter fp;
  fp.name = tier.fraction_name();
  fp.base = tier.fraction(base);
  fp.value = tier.fraction(platform);
  fp.identified = fit_bandwidth;
  fp.std_error = fit_bandwidth ? rounds.fraction_std_error : 0;
  fp.why = fit_bandwidth
               ? (fp.value >= 1.0 ? "fitted; clamped to 1 (measured "
                                    "faster than the datasheet bandwidth)"
                                  : "fitted: slope of t(S)")
               : "not identified: no size >= 1 MB";
  fp.files = coverage.files;
  fp.points = rounds.points;
  fp.min_size = coverage.min_size;
  fp.max_size = coverage.max_size;
  return fp;
}

// Reporting: one protocol's alpha, fitted or kept at the base value.
FittedParameter ReportAlpha(const Tier& tier, const Platform& base,
                            const Protocol& proto, const TierCoverage& coverage,
                            const TierRounds& rounds) {
  FittedParameter a;
  a.name = tier.alpha_name(proto);
  const Protocol* b = nullptr;
  for (const Protocol& bp : base.protocols()) {
    if (bp.name() == proto.name()) b = &bp;
  }
  a.base = b ? tier.alpha(*b) : 0;
  a.files = coverage.files;
  a.min_size = coverage.min_size;
  a.max_size = coverage.max_size;
  AlphaRecord alpha;  // the engine never picked it
  if (auto it = rounds.alphas.find(proto.name()); it != rounds.alphas.end()) {
    alpha = it->second;
  }
  a.points = alpha.points;
  if (alpha.identified) {
    a.identified = true;
    a.value = tier.alpha(proto);
    a.std_error = alpha.std_error;
    a.why = "fitted: intercept of t(S) minus base latency, / steps";
  } else {
    a.value = a.base;
    a.why = alpha.why.empty()
                ? "not identified: the engine picks it at no measured size"
                : alpha.why;
  }
  return a;
}

struct TierFit {
  std::vector<FittedParameter> params;
  std::vector<std::string> notes;
};

// Reporting: every parameter of the tier, and a note for each one kept, so
// the calibrated file says what the measurements could not decide.
TierFit ReportTier(const Tier& tier, const Platform& base,
                   const Platform& platform, const TierCoverage& coverage,
                   bool fit_bandwidth, const TierRounds& rounds) {
  TierFit out;
  if (!fit_bandwidth) {
    out.notes.push_back(
        absl::StrCat(tier.fraction_name(),
                     ": bandwidth not identified: every size is below 1 MB "
                     "(largest ",
                     coverage.max_size, " B); kept the base platform's ",
                     tier.fraction(base)));
  }
  out.params.push_back(
      ReportFraction(tier, base, platform, coverage, fit_bandwidth, rounds));
  for (const Protocol& proto : platform.protocols()) {
    FittedParameter a = ReportAlpha(tier, base, proto, coverage, rounds);
    if (!a.identified) {
      out.notes.push_back(absl::StrCat(a.name, ": ", a.why, "; kept ", a.base));
    }
    out.params.push_back(std::move(a));
  }
  return out;
}

// Unidentified alphas go back to the base values: a round's tentative
// value must not outlive a fit that could not confirm it.
void RestoreUnidentifiedAlphas(const Tier& tier,
                               const std::vector<FittedParameter>& params,
                               Platform* platform) {
  for (const FittedParameter& a : params) {
    if (a.identified || a.name == tier.fraction_name()) continue;
    for (Protocol& proto : *platform->mutable_protocols()) {
      if (a.name == tier.alpha_name(proto)) tier.set_alpha(&proto, a.base);
    }
  }
}

// Fits one tier in place on `platform`: kRounds rounds of collect, solve
// and apply, since the engine's protocol choice follows the parameters.
absl::StatusOr<TierFit> FitTier(const Tier& tier, const Platform& base,
                                Platform* platform) {
  const TierCoverage coverage = Coverage(tier);
  if (coverage.distinct_sizes < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        tier.name(), " tier (", absl::StrJoin(coverage.files, ", "),
        "): cannot separate latency from bandwidth: ", coverage.distinct_sizes,
        " size(s); measure a sweep (nccl-tests -b 8 -e 1G -f 2)"));
  }
  const bool fit_bandwidth = coverage.max_size >= kLargeBytes;
  TierRounds rounds;
  for (int round = 0; round < kRounds; ++round) {
    absl::StatusOr<std::vector<Sample>> samples =
        CollectSamples(tier, *platform);
    if (!samples.ok()) return samples.status();
    rounds.points = samples->size();
    const std::vector<std::string> protos =
        FittableProtocols(*samples, &rounds.alphas);
    const int unknowns = (fit_bandwidth ? 1 : 0) + protos.size();
    if (unknowns == 0) break;
    absl::StatusOr<LinearFit> fit = WeightedLeastSquares(
        ToObservations(*samples, fit_bandwidth, protos), unknowns);
    if (!fit.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          tier.name(), " tier (", absl::StrJoin(coverage.files, ", "),
          "): the fit is singular: latency and bandwidth cannot be separated"));
    }
    absl::Status applied =
        ApplyFit(tier, *fit, fit_bandwidth, protos, platform, &rounds);
    if (!applied.ok()) return applied;
  }
  TierFit out =
      ReportTier(tier, base, *platform, coverage, fit_bandwidth, rounds);
  RestoreUnidentifiedAlphas(tier, out.params, platform);
  return out;
}

std::string Bucket(int64_t size) {
  if (size < (64 << 10)) return "< 64 KB";
  if (size < (1 << 20)) return "64 KB - 1 MB";
  if (size < (16 << 20)) return "1 - 16 MB";
  if (size < (256 << 20)) return "16 - 256 MB";
  return ">= 256 MB";
}

}  // namespace

absl::StatusOr<CalibrationResult> Calibrate(
    const Platform& base, const std::vector<MeasurementSet>& sets) {
  if (sets.empty()) return absl::InvalidArgumentError("no measurement files");
  CalibrationResult result;
  result.platform = base;
  Tier intra{false, {}};
  Tier inter{true, {}};
  for (const MeasurementSet& s : sets) {
    const Algorithm a =
        s.algorithm == ALGORITHM_UNSPECIFIED ? RING : s.algorithm;
    if (a != RING || Steps(s.op, s.gpus) == 0) {
      result.notes.push_back(absl::StrCat(
          s.file, ": ", CollectiveOp_Name(s.op), " ", Algorithm_Name(a),
          " not used for fitting (only ring all-gather, reduce-scatter, "
          "all-reduce); validated only"));
      continue;
    }
    if (s.gpus < 2) {
      result.notes.push_back(
          absl::StrCat(s.file, ": 1 GPU, no communication; skipped"));
      continue;
    }
    (s.gpus <= base.gpus_per_node() ? intra : inter).sets.push_back(&s);
  }
  for (Tier* tier : {&intra, &inter}) {
    if (tier->sets.empty()) {
      result.notes.push_back(absl::StrCat(
          tier->name(), " parameters (", tier->fraction_name(), ", protocols' ",
          tier->alpha_field(), ") not identified: no ",
          tier->inter ? "inter-node (gpus > gpus_per_node)" : "intra-node",
          " measurements; kept the base platform's"));
      continue;
    }
    absl::StatusOr<TierFit> fit = FitTier(*tier, base, &result.platform);
    if (!fit.ok()) return fit.status();
    for (FittedParameter& p : fit->params) result.parameters.push_back(p);
    for (std::string& n : fit->notes) result.notes.push_back(n);
  }
  absl::StatusOr<ValidationReport> check = Validate(result.platform, sets);
  if (!check.ok()) return check.status();
  result.fit_errors = check->files;
  // Efficiency over message size: measured / simulated time per bucket.
  std::map<std::pair<std::string, std::string>, std::vector<double>> buckets;
  std::vector<std::pair<std::string, std::string>> order;
  for (const ValidationRow& r : check->rows) {
    // busbw ratio inverted = time ratio measured / simulated.
    const auto key = std::make_pair(r.file, Bucket(r.size_bytes));
    if (!buckets.count(key)) order.push_back(key);
    buckets[key].push_back(r.predicted_busbw_gbps / r.measured_busbw_gbps);
  }
  for (const auto& key : order) {
    result.efficiency_curve.push_back(absl::StrFormat(
        "%s %-14s measured/simulated time %.3f (%d sizes)", key.first,
        key.second, Median(buckets[key]), buckets[key].size()));
  }
  // The comment block.
  std::string& c = result.comment;
  absl::StrAppend(&c, "# Calibrated by `shardsim calibrate` from platform ",
                  base.name(), " and ", sets.size(), " measurement file(s):\n");
  for (const MeasurementSet& s : sets) {
    absl::StrAppend(
        &c, "#   ", s.file, " (", s.format, "): ", CollectiveOp_Name(s.op),
        " on ", s.gpus, " GPUs",
        s.protocol.empty() ? "" : absl::StrCat(", NCCL_PROTO=", s.protocol),
        ", ", s.Primary().size(), " sizes\n");
  }
  absl::StrAppend(
      &c,
      "# Model per tier and protocol: t(S) = base + steps*alpha + "
      "hop_bytes(S)/(bw*fraction), weighted (1/t^2) least squares.\n");
  absl::StrAppend(&c, "# Fitted parameters:\n");
  for (const FittedParameter& p : result.parameters) {
    if (p.identified) {
      absl::StrAppendFormat(
          &c,
          "#   %s = %.4g (base %.4g, +- %.2g): %s; %d points, "
          "%d..%d B, from %s\n",
          p.name, p.value, p.base, p.std_error, p.why, p.points, p.min_size,
          p.max_size, absl::StrJoin(p.files, ", "));
    }
  }
  absl::StrAppend(&c, "# Not identified (base values kept):\n");
  for (const std::string& n : result.notes)
    absl::StrAppend(&c, "#   ", n, "\n");
  absl::StrAppend(&c,
                  "#   gpu.*, kernels.*: not calibrated from collectives "
                  "(kernel measurements fit kernels.*)\n");
  absl::StrAppend(
      &c, "# Fit error after calibration (busbw, simulated vs measured):\n");
  for (const FileError& e : result.fit_errors) {
    absl::StrAppendFormat(&c, "#   %s: median %.1f%%, max %.1f%%\n", e.file,
                          100 * e.median_relative_error,
                          100 * e.max_relative_error);
  }
  absl::StrAppend(
      &c, "# Efficiency over message size (residual, median per bucket):\n");
  for (const std::string& l : result.efficiency_curve)
    absl::StrAppend(&c, "#   ", l, "\n");
  return result;
}

}  // namespace shardsim

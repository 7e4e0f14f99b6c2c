#include "validate/calibrate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

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

// Solves the weighted normal equations; returns false when singular.
bool Solve(std::vector<std::vector<double>> a, std::vector<double> b,
           std::vector<double>* x, std::vector<std::vector<double>>* inv) {
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

Protocol* FindProtocol(Platform* p, const std::string& name) {
  for (Protocol& proto : *p->mutable_protocols()) {
    if (proto.name() == name) return &proto;
  }
  return nullptr;
}

struct Tier {
  bool inter;
  std::vector<const MeasurementSet*> sets;
  std::string fraction_name() const {
    return inter ? "efficiency.network_fraction" : "efficiency.nvlink_fraction";
  }
  std::string alpha_field() const {
    return inter ? "inter_alpha_s" : "intra_alpha_s";
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

struct TierFit {
  std::vector<FittedParameter> params;
  std::vector<std::string> notes;
};

// Fits one tier in place on `platform`.
absl::StatusOr<TierFit> FitTier(const Tier& tier, const Platform& base,
                                Platform* platform) {
  TierFit out;
  const std::string tier_name = tier.inter ? "network" : "NVSwitch";
  std::set<int64_t> sizes;
  std::vector<std::string> files;
  int64_t min_size = INT64_MAX, max_size = 0;
  for (const MeasurementSet* s : tier.sets) {
    files.push_back(s->file);
    for (const MeasurementRow& r : s->Primary()) {
      sizes.insert(r.size_bytes);
      min_size = std::min(min_size, r.size_bytes);
      max_size = std::max(max_size, r.size_bytes);
    }
  }
  if (sizes.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        tier_name, " tier (", absl::StrJoin(files, ", "),
        "): cannot separate latency from bandwidth: ", sizes.size(),
        " size(s); measure a sweep (nccl-tests -b 8 -e 1G -f 2)"));
  }
  bool fit_bandwidth = max_size >= kLargeBytes;
  if (!fit_bandwidth) {
    out.notes.push_back(absl::StrCat(
        tier.fraction_name(),
        ": bandwidth not identified: every size is below 1 MB "
        "(largest ",
        max_size, " B); kept the base platform's ", tier.fraction(base)));
  }
  std::map<std::string, double> alpha_err;  // protocol -> std error
  std::map<std::string, int> alpha_points;
  std::set<std::string> alpha_identified;
  std::map<std::string, std::string> alpha_why;
  double g_err = 0;
  int points_used = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<Sample> pts;
    for (const MeasurementSet* s : tier.sets) {
      const std::vector<MeasurementRow> rows = s->Primary();
      std::vector<int64_t> sz;
      for (const MeasurementRow& r : rows) sz.push_back(r.size_bytes);
      absl::StatusOr<std::vector<CollectiveRow>> sim =
          SimulateSizes(*platform, *s, sz);
      if (!sim.ok()) return sim.status();
      for (size_t i = 0; i < rows.size(); ++i) {
        const Protocol* proto = FindProtocol(platform, (*sim)[i].protocol());
        if (proto == nullptr)
          return absl::InternalError("engine protocol unknown");
        Sample p;
        p.set = s;
        p.size = rows[i].size_bytes;
        p.t = rows[i].time_us * 1e-6;
        p.steps = Steps(s->op, s->gpus);
        p.base = proto->base_latency_s() + p.steps * tier.alpha(*proto);
        p.bw_part = (*sim)[i].time_us() * 1e-6 - p.base;
        p.protocol = proto->name();
        pts.push_back(p);
      }
    }
    points_used = pts.size();
    // Unknowns: g (if fitted), then one alpha shift per protocol with >= 2
    // points of distinct sizes.
    std::map<std::string, std::set<int64_t>> by_proto;
    for (const Sample& p : pts) by_proto[p.protocol].insert(p.size);
    std::vector<std::string> protos;
    for (const auto& [name, s] : by_proto) {
      alpha_points[name] = s.size();
      if (s.size() >= 2) {
        protos.push_back(name);
      } else {
        alpha_why[name] =
            absl::StrCat("not identified: the engine picks ", name, " at ",
                         s.size(), " measured size(s) only");
      }
    }
    const int k = (fit_bandwidth ? 1 : 0) + protos.size();
    if (k == 0) break;
    std::vector<std::vector<double>> ata(k, std::vector<double>(k, 0));
    std::vector<double> atb(k, 0);
    auto row_of = [&](const Sample& p) {
      std::vector<double> x(k, 0);
      int c = 0;
      if (fit_bandwidth) x[c++] = p.bw_part;
      for (const std::string& name : protos) {
        x[c++] = p.protocol == name ? p.steps : 0;
      }
      return x;
    };
    for (const Sample& p : pts) {
      const std::vector<double> x = row_of(p);
      const double y = p.t - p.base - (fit_bandwidth ? 0 : p.bw_part);
      const double w = 1 / (p.t * p.t);
      for (int i = 0; i < k; ++i) {
        atb[i] += w * x[i] * y;
        for (int j = 0; j < k; ++j) ata[i][j] += w * x[i] * x[j];
      }
    }
    std::vector<double> sol;
    std::vector<std::vector<double>> inv;
    if (!Solve(ata, atb, &sol, &inv)) {
      return absl::InvalidArgumentError(absl::StrCat(
          tier_name, " tier (", absl::StrJoin(files, ", "),
          "): the fit is singular: latency and bandwidth cannot be separated"));
    }
    double rss = 0;
    for (const Sample& p : pts) {
      const std::vector<double> x = row_of(p);
      double pred = p.base + (fit_bandwidth ? 0 : p.bw_part);
      for (int i = 0; i < k; ++i) pred += x[i] * sol[i];
      rss += (p.t - pred) * (p.t - pred) / (p.t * p.t);
    }
    const double sigma2 =
        pts.size() > static_cast<size_t>(k) ? rss / (pts.size() - k) : 0;
    int c = 0;
    if (fit_bandwidth) {
      const double g = sol[0];
      if (!(g > 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat(tier_name, " tier: fitted bandwidth scale ", g,
                         " is not positive"));
      }
      const double f = tier.fraction(*platform) / g;
      g_err = std::sqrt(std::max(0.0, sigma2 * inv[0][0])) / g * f;
      tier.set_fraction(platform, std::min(f, 1.0));
      ++c;
    }
    for (const std::string& name : protos) {
      Protocol* proto = FindProtocol(platform, name);
      const double a = tier.alpha(*proto) + sol[c];
      alpha_err[name] = std::sqrt(std::max(0.0, sigma2 * inv[c][c]));
      ++c;
      const double value = std::max(a, 0.0);
      // Identified only if the fit pins it to within +-50%.
      if (value > 0 && alpha_err[name] < 0.5 * value) {
        tier.set_alpha(proto, value);
        alpha_identified.insert(name);
        alpha_why[name] = "fitted";
      } else {
        alpha_identified.erase(name);
        alpha_why[name] = absl::StrFormat(
            "not identified: fit gives %.3g +- %.2g s (latency is too small a "
            "share of the measured times)",
            a, alpha_err[name]);
      }
    }
  }
  FittedParameter fp;
  fp.name = tier.fraction_name();
  fp.base = tier.fraction(base);
  fp.value = tier.fraction(*platform);
  fp.identified = fit_bandwidth;
  fp.std_error = fit_bandwidth ? g_err : 0;
  fp.why = fit_bandwidth
               ? (fp.value >= 1.0 ? "fitted; clamped to 1 (measured "
                                    "faster than the datasheet bandwidth)"
                                  : "fitted: slope of t(S)")
               : "not identified: no size >= 1 MB";
  fp.files = files;
  fp.points = points_used;
  fp.min_size = min_size;
  fp.max_size = max_size;
  out.params.push_back(fp);
  for (const Protocol& proto : platform->protocols()) {
    FittedParameter a;
    a.name = absl::StrCat("protocols[", proto.name(), "].", tier.alpha_field());
    const Protocol* b = nullptr;
    for (const Protocol& bp : base.protocols()) {
      if (bp.name() == proto.name()) b = &bp;
    }
    a.base = b ? tier.alpha(*b) : 0;
    a.files = files;
    a.points =
        alpha_points.count(proto.name()) ? alpha_points[proto.name()] : 0;
    a.min_size = min_size;
    a.max_size = max_size;
    if (alpha_identified.count(proto.name())) {
      a.identified = true;
      a.value = tier.alpha(proto);
      a.std_error = alpha_err[proto.name()];
      a.why = "fitted: intercept of t(S) minus base latency, / steps";
    } else {
      a.value = a.base;
      a.why = alpha_why.count(proto.name())
                  ? alpha_why[proto.name()]
                  : "not identified: the engine picks it at no measured size";
      out.notes.push_back(absl::StrCat(a.name, ": ", a.why, "; kept ", a.base));
    }
    out.params.push_back(a);
  }
  // Unidentified alphas go back to the base values.
  for (const FittedParameter& a : out.params) {
    if (a.identified || a.name == fp.name) continue;
    for (Protocol& proto : *platform->mutable_protocols()) {
      if (a.name ==
          absl::StrCat("protocols[", proto.name(), "].", tier.alpha_field())) {
        tier.set_alpha(&proto, a.base);
      }
    }
  }
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
    const std::string what = tier->inter ? "network" : "NVSwitch";
    if (tier->sets.empty()) {
      result.notes.push_back(absl::StrCat(
          what, " parameters (", tier->fraction_name(), ", protocols' ",
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

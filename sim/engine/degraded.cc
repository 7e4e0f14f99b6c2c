#include "sim/engine/degraded.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/base/bandwidth.h"

namespace shardsim {
namespace {

// Draws from a seed, the same with every standard library: std::
// mt19937_64's sequence is fixed by the standard, its distributions are
// not (log and cos may still differ in their last bit between C math
// libraries).
class Draws {
 public:
  explicit Draws(uint64_t seed) : gen_(seed) {}
  double Uniform() {  // in [0, 1), 53 bits
    return static_cast<double>(gen_() >> 11) * 0x1.0p-53;
  }
  double Normal() {                  // Box-Muller, one of the pair
    const double u = 1 - Uniform();  // (0, 1]: log(u) is finite
    return std::sqrt(-2 * std::log(u)) * std::cos(2 * M_PI * Uniform());
  }

 private:
  std::mt19937_64 gen_;
};

absl::Status OutOfJob(absl::string_view field, int value, absl::string_view of,
                      int count) {
  return absl::InvalidArgumentError(absl::StrCat(
      "platform field degraded.", field, ": ", value,
      " is not one of the job's ", count, " ", of, " (0 to ", count - 1, ")"));
}

// Calls `visit(rank)` for every rank named by `ranks` and `nodes`.
template <typename Visit>
absl::Status EachRank(const google::protobuf::RepeatedField<int32_t>& ranks,
                      const google::protobuf::RepeatedField<int32_t>& nodes,
                      const Mesh& mesh, const std::string& at, Visit visit) {
  for (int r : ranks) {
    if (r >= mesh.gpus()) return OutOfJob(at + "ranks", r, "GPUs", mesh.gpus());
    visit(r);
  }
  for (int n : nodes) {
    if (n >= mesh.nodes) return OutOfJob(at + "nodes", n, "nodes", mesh.nodes);
    for (int l = 0; l < mesh.gpus_per_node; ++l) {
      visit(n * mesh.gpus_per_node + l);
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool DegradesGpus(const Platform& platform) {
  const Degraded& d = platform.degraded();
  return d.gpus_size() > 0 || d.drawn().gpu_speed_sigma() > 0;
}

bool Degrades(const Platform& platform) {
  const Degraded& d = platform.degraded();
  return DegradesGpus(platform) || d.nvlink_size() > 0 || d.nics_size() > 0 ||
         d.drawn().nic_fraction() > 0;
}

absl::StatusOr<std::vector<RankClass>> ComputeClasses(const Platform& platform,
                                                      const Mesh& mesh,
                                                      bool drop_dominated) {
  const Degraded& d = platform.degraded();
  const int gpus = mesh.gpus();
  // Per rank: its speed and its model (0: the platform's, i: gpus[i - 1]'s).
  std::vector<double> speed(gpus, 1);
  std::vector<int> model(gpus, 0);
  if (d.drawn().gpu_speed_sigma() > 0) {
    Draws draws(d.drawn().seed());
    for (double& s : speed)
      s = std::exp(d.drawn().gpu_speed_sigma() * draws.Normal());
  }
  std::vector<int> named_by(gpus, -1);
  for (int i = 0; i < d.gpus_size(); ++i) {
    const Degraded::Gpus& g = d.gpus(i);
    const std::string at = absl::StrCat("gpus[", i, "].");
    absl::Status clash;
    absl::Status s = EachRank(g.ranks(), g.nodes(), mesh, at, [&](int r) {
      if (named_by[r] >= 0 && clash.ok()) {
        clash = absl::InvalidArgumentError(
            absl::StrCat("platform field degraded.", at, "ranks/nodes: rank ",
                         r, " is named twice (also by degraded.gpus[",
                         named_by[r], "]): give each GPU one speed or model"));
      }
      named_by[r] = i;
      if (g.speed() > 0) speed[r] *= g.speed();
      if (g.has_model()) model[r] = i + 1;
    });
    if (!s.ok()) return s;
    if (!clash.ok()) return clash;
  }
  // Classes by (model, speed), in order of their first rank.
  std::map<std::pair<int, double>, int> index;
  std::vector<RankClass> classes;
  for (int r = 0; r < gpus; ++r) {
    auto [it, fresh] = index.try_emplace({model[r], speed[r]}, classes.size());
    if (fresh) {
      RankClass& c = classes.emplace_back();
      c.speed = speed[r];
      c.platform = platform;
      if (model[r] > 0) {
        const GpuModel& m = d.gpus(model[r] - 1).model();
        *c.platform.mutable_gpu() = m.gpu();
        *c.platform.mutable_kernels() = m.kernels();
        *c.platform.mutable_interference() = m.interference();
        c.other_model = true;
      }
    }
    classes[it->second].ranks.push_back(r);
  }
  // Of each model, the slowest class: `index` runs by model, then speed.
  std::map<int, int> slowest;  // model -> class
  for (const auto& [key, c] : index) slowest.try_emplace(key.first, c);
  // First the class whose compute slows the NVSwitch ports (step_actors.cc):
  // the slowest of the platform's model (else of the first other model),
  // which is replayed with or without drop_dominated.
  const int first = slowest.begin()->second;
  std::vector<RankClass> out;
  out.push_back(std::move(classes[first]));
  for (int c = 0; c < static_cast<int>(classes.size()); ++c) {
    bool kept = !drop_dominated;
    for (const auto& [m, k] : slowest) kept = kept || k == c;
    if (c != first && kept) out.push_back(std::move(classes[c]));
  }
  return out;
}

absl::StatusOr<LinkShares> ComputeLinkShares(const Platform& platform,
                                             const Mesh& mesh) {
  const Degraded& d = platform.degraded();
  const int per_node = platform.network().nics_per_node();
  LinkShares out;
  out.port.assign(mesh.gpus(), 1);
  out.nic.assign(mesh.nodes * per_node, 1);
  // Each entry's share once per link it names, however often it names it;
  // two entries naming one link multiply.
  for (int i = 0; i < d.nvlink_size(); ++i) {
    const Degraded::Links& l = d.nvlink(i);
    std::set<int> ports;
    absl::Status s =
        EachRank(l.ranks(), l.nodes(), mesh, absl::StrCat("nvlink[", i, "]."),
                 [&](int r) { ports.insert(r); });
    if (!s.ok()) return s;
    for (int r : ports) out.port[r] *= l.bandwidth();
  }
  for (int i = 0; i < d.nics_size(); ++i) {
    const Degraded::Links& l = d.nics(i);
    const std::string at = absl::StrCat("nics[", i, "].");
    for (int rail : l.rails()) {
      if (rail >= per_node) {
        return absl::InvalidArgumentError(absl::StrCat(
            "platform field degraded.", at, "rails: ", rail,
            " is past the node's ", per_node, " NICs (network.nics_per_node)"));
      }
    }
    // Ranks name the NIC they use; nodes with rails those nodes' rails;
    // nodes alone every NIC of theirs; rails alone every node's.
    std::set<int> nics;
    for (int r : l.ranks()) {
      if (r >= mesh.gpus()) {
        return OutOfJob(at + "ranks", r, "GPUs", mesh.gpus());
      }
      nics.insert(NicOfRank(platform, mesh.gpus_per_node, r));
    }
    std::vector<int> nodes(l.nodes().begin(), l.nodes().end());
    for (int n : nodes) {
      if (n >= mesh.nodes)
        return OutOfJob(at + "nodes", n, "nodes", mesh.nodes);
    }
    if (nodes.empty() && !l.rails().empty()) {
      for (int n = 0; n < mesh.nodes; ++n) nodes.push_back(n);
    }
    for (int n : nodes) {
      if (l.rails().empty()) {
        for (int k = 0; k < per_node; ++k) nics.insert(n * per_node + k);
      }
      for (int rail : l.rails()) nics.insert(n * per_node + rail);
    }
    for (int nic : nics) out.nic[nic] *= l.bandwidth();
  }
  if (d.drawn().nic_fraction() > 0) {
    // A stream of its own: the GPUs' draws do not move the NICs'.
    Draws draws(d.drawn().seed() ^ 0x9e3779b97f4a7c15ULL);
    for (double& s : out.nic) {
      if (draws.Uniform() < d.drawn().nic_fraction()) {
        s *= d.drawn().nic_bandwidth();
      }
    }
  }
  for (double s : out.port)
    out.ports_alike = out.ports_alike && s == out.port[0];
  for (double s : out.nic) out.nics_alike = out.nics_alike && s == out.nic[0];
  return out;
}

}  // namespace shardsim

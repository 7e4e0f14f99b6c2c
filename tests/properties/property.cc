#include "tests/properties/property.h"

#include "absl/strings/str_cat.h"
#include "sim/model/model.h"
#include "sim/strategy/strategy.h"

namespace shardsim::property {

const std::vector<std::string>& ShippedPlatforms() {
  static const std::vector<std::string> names = {"dgx_a100", "dgx_h100",
                                                 "a800_lins", "cloud_a100"};
  return names;
}

Platform Shipped(const std::string& name) {
  absl::StatusOr<Platform> p = LoadPlatform(name, "");
  RC_ASSERT(p.ok());
  return *p;
}

Platform AnyPlatform() {
  Platform p = Shipped(*rc::gen::elementOf(ShippedPlatforms()));
  if (*rc::gen::arbitrary<bool>()) {
    Network* n = p.mutable_network();
    n->set_adaptive_routing(false);
    n->set_nics_per_leaf(*rc::gen::element(4, 8, 16, 20, 32));
    n->set_oversubscription(*rc::gen::element(1.0, 1.5, 2.0, 3.0, 4.0, 8.0));
    n->set_rail_optimized(*rc::gen::arbitrary<bool>());
  }
  return p;
}

namespace {

// Knobs whose value is a rate (higher is faster), a share of a peak (moved
// towards 1), or a cost (lower is faster).
enum class Kind { kRate, kShare, kCost };

struct Knob {
  const char* name;
  Kind kind;
  bool step_only;  // no effect on a collective alone
  double (*get)(const Platform&);
  void (*set)(Platform*, double);
};

#define SHARDSIM_KNOB(name, kind, step_only, path, setter)             \
  Knob {                                                               \
    name, kind, step_only, [](const Platform& p) { return p.path(); }, \
        [](Platform* p, double v) { p->setter(v); }                    \
  }

const std::vector<Knob>& Knobs() {
  static const std::vector<Knob> knobs = {
      SHARDSIM_KNOB("network.nic_bandwidth", Kind::kRate, false,
                    network().nic_bandwidth,
                    mutable_network()->set_nic_bandwidth),
      SHARDSIM_KNOB("nvswitch.bandwidth", Kind::kRate, false,
                    nvswitch().bandwidth, mutable_nvswitch()->set_bandwidth),
      SHARDSIM_KNOB("efficiency.network_fraction", Kind::kShare, false,
                    efficiency().network_fraction,
                    mutable_efficiency()->set_network_fraction),
      SHARDSIM_KNOB("efficiency.nvlink_fraction", Kind::kShare, false,
                    efficiency().nvlink_fraction,
                    mutable_efficiency()->set_nvlink_fraction),
      SHARDSIM_KNOB("efficiency.nvlink_direct_fraction", Kind::kShare, false,
                    efficiency().nvlink_direct_fraction,
                    mutable_efficiency()->set_nvlink_direct_fraction),
      SHARDSIM_KNOB("gpu.peak_flops", Kind::kRate, true, gpu().peak_flops,
                    mutable_gpu()->set_peak_flops),
      SHARDSIM_KNOB("gpu.hbm_bytes_per_s", Kind::kRate, true,
                    gpu().hbm_bytes_per_s, mutable_gpu()->set_hbm_bytes_per_s),
      SHARDSIM_KNOB("kernels.gemm_efficiency", Kind::kShare, true,
                    kernels().gemm_efficiency,
                    mutable_kernels()->set_gemm_efficiency),
      SHARDSIM_KNOB("kernels.attention_fwd_efficiency", Kind::kShare, true,
                    kernels().attention_fwd_efficiency,
                    mutable_kernels()->set_attention_fwd_efficiency),
      SHARDSIM_KNOB("kernels.attention_bwd_efficiency", Kind::kShare, true,
                    kernels().attention_bwd_efficiency,
                    mutable_kernels()->set_attention_bwd_efficiency),
      SHARDSIM_KNOB("kernels.vector_fraction", Kind::kShare, true,
                    kernels().vector_fraction,
                    mutable_kernels()->set_vector_fraction),
      SHARDSIM_KNOB("kernels.general_fraction", Kind::kShare, true,
                    kernels().general_fraction,
                    mutable_kernels()->set_general_fraction),
      SHARDSIM_KNOB("kernels.optimizer_fraction", Kind::kShare, true,
                    kernels().optimizer_fraction,
                    mutable_kernels()->set_optimizer_fraction),
      SHARDSIM_KNOB("kernels.launch_s", Kind::kCost, true, kernels().launch_s,
                    mutable_kernels()->set_launch_s),
      SHARDSIM_KNOB("kernels.host_launch_s", Kind::kCost, true,
                    kernels().host_launch_s,
                    mutable_kernels()->set_host_launch_s),
      SHARDSIM_KNOB("interference.nvlink_under_compute", Kind::kShare, true,
                    interference().nvlink_under_compute,
                    mutable_interference()->set_nvlink_under_compute),
  };
  return knobs;
}

#undef SHARDSIM_KNOB

const Knob& KnobNamed(const std::string& name) {
  for (const Knob& k : Knobs()) {
    if (name == k.name) return k;
  }
  RC_FAIL("no knob " + name);
}

}  // namespace

rc::Gen<Speedup> AnySpeedup(bool step) {
  std::vector<std::string> names;
  for (const Knob& k : Knobs()) {
    if (step || !k.step_only) names.push_back(k.name);
  }
  return rc::gen::build<Speedup>(
      rc::gen::set(&Speedup::knob, rc::gen::elementOf(names)),
      rc::gen::set(&Speedup::factor,
                   rc::gen::element(1.1, 1.25, 1.5, 2.0, 4.0)));
}

Platform Faster(const Platform& p, const Speedup& s) {
  const Knob& k = KnobNamed(s.knob);
  Platform out = p;
  const double v = k.get(p);
  switch (k.kind) {
    case Kind::kRate:
      k.set(&out, v * s.factor);
      break;
    case Kind::kShare:  // the gap to 1 shrunk by the factor
      k.set(&out, 1 - (1 - v) / s.factor);
      break;
    case Kind::kCost:
      k.set(&out, v / s.factor);
      break;
  }
  return out;
}

absl::StatusOr<Job> SmallJob(const Platform& platform,
                             const std::string& strategy, int gpus,
                             int micro_batch_size, int micro_batches,
                             int seq_len) {
  absl::StatusOr<Model> model = BuiltinModel("llama-7b");
  if (!model.ok()) return model.status();
  Scenario sc;
  sc.set_name("property");
  *sc.mutable_model_def() = *model;
  sc.mutable_model_def()->set_layers(2);
  *sc.mutable_platform_def() = platform;
  sc.add_strategies(strategy);
  sc.add_gpus(gpus);
  sc.set_micro_batch_size(micro_batch_size);
  sc.set_micro_batches(micro_batches);
  sc.set_seq_len(seq_len);
  sc.set_flash_attention(true);
  sc.set_optimizer_bytes_per_param(12);
  return ResolveJob("property.textproto", sc);
}

rc::Gen<std::string> AnyNamedStrategy() {
  return rc::gen::elementOf(NamedStrategies());
}

std::string Describe(const Platform& p) {
  const Network& n = p.network();
  return absl::StrCat(p.name(), ": nics_per_leaf ", n.nics_per_leaf(),
                      ", oversubscription ", n.oversubscription(), ", rails ",
                      n.rail_optimized(), ", adaptive ", n.adaptive_routing());
}

}  // namespace shardsim::property

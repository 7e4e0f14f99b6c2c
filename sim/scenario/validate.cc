// Every numeric field of a platform and a scenario, checked in one place
// per message against sim/schema/limits.h.
#include <algorithm>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "sim/scenario/scenario.h"
#include "sim/schema/limits.h"

namespace shardsim {
namespace {

using namespace limits;  // NOLINT: the limits read as a table

void CheckGpu(const Gpu& g, FieldCheck& c) {
  c.Real("gpu.peak_flops", g.peak_flops(), kMinFlops, kMaxFlops)
      .Count("gpu.memory_bytes", g.memory_bytes(), kMinMemoryBytes,
             kMaxMemoryBytes)
      .Real("gpu.hbm_bytes_per_s", g.hbm_bytes_per_s(), kMinBandwidth,
            kMaxBandwidth)
      .Count("gpu.reserved_bytes", g.reserved_bytes(), 0, g.memory_bytes())
      .Count("gpu.sms", g.sms(), 1, 1024)
      .Real("gpu.fp8_peak_flops", g.fp8_peak_flops(), 0, kMaxFlops);
}

void CheckNetwork(const Platform& p, FieldCheck& c) {
  const Network& n = p.network();
  c.Real("nvswitch.bandwidth", p.nvswitch().bandwidth(), kMinBandwidth,
         kMaxBandwidth)
      .Count("network.nics_per_node", n.nics_per_node(), 1, kMaxNicsPerNode)
      .Real("network.nic_bandwidth", n.nic_bandwidth(), kMinBandwidth,
            kMaxBandwidth)
      .Count("network.nics_per_leaf", n.nics_per_leaf(), 0, kMaxGpus)
      .Real("network.oversubscription", n.oversubscription(), 1, 1024);
  const int gpus = p.gpus_per_node(), nics = n.nics_per_node();
  c.Rule(
      "network.nics_per_node",
      gpus < 1 || nics < 1 || gpus % nics == 0 || nics % gpus == 0,
      absl::StrCat(nics, " NICs cannot be shared evenly by ", gpus, " GPUs"));
  c.Rule("network.adaptive_routing",
         !n.adaptive_routing() || n.oversubscription() == 1,
         absl::StrCat("adaptive routing is modelled on a non-blocking fabric "
                      "only (oversubscription 1, not ",
                      n.oversubscription(), ")"));
}

void CheckProtocols(const Platform& p, FieldCheck& c) {
  c.Rule("protocols", !p.protocols().empty(),
         "at least one wire protocol needed");
  c.Count("protocols", p.protocols_size(), 0, kMaxProtocols);
  for (int i = 0; i < p.protocols_size(); ++i) {
    const Protocol& proto = p.protocols(i);
    const std::string at = absl::StrCat("protocols[", i, "].");
    c.Share(at + "bandwidth_fraction", proto.bandwidth_fraction())
        .Real(at + "base_latency_s", proto.base_latency_s(), 0, kMaxLatencyS)
        .Real(at + "intra_alpha_s", proto.intra_alpha_s(), 0, kMaxLatencyS)
        .Real(at + "inter_alpha_s", proto.inter_alpha_s(), 0, kMaxLatencyS);
  }
}

void CheckEfficiency(const Efficiency& e, FieldCheck& c) {
  c.Share("efficiency.nvlink_fraction", e.nvlink_fraction())
      .Share("efficiency.network_fraction", e.network_fraction())
      .Share("efficiency.nvlink_direct_fraction", e.nvlink_direct_fraction())
      .Real("efficiency.sharp_latency_s", e.sharp_latency_s(), 0, kMaxLatencyS);
}

void CheckKernels(const KernelModel& k, FieldCheck& c) {
  c.Share("kernels.gemm_efficiency", k.gemm_efficiency())
      .Share("kernels.attention_fwd_efficiency", k.attention_fwd_efficiency())
      .Share("kernels.attention_bwd_efficiency", k.attention_bwd_efficiency())
      .Share("kernels.vector_fraction", k.vector_fraction())
      .Share("kernels.general_fraction", k.general_fraction())
      .Share("kernels.optimizer_fraction", k.optimizer_fraction())
      .Real("kernels.gemm_k_overhead", k.gemm_k_overhead(), 0, 1e6)
      .Real("kernels.attention_fwd_seq", k.attention_fwd_seq(), 0, 1e9)
      .Real("kernels.attention_bwd_seq", k.attention_bwd_seq(), 0, 1e9)
      .Real("kernels.launch_s", k.launch_s(), 0, kMaxLatencyS)
      .Real("kernels.host_launch_s", k.host_launch_s(), 0, kMaxLatencyS)
      .Count("kernels.gemm_tile_m", k.gemm_tile_m(), 1, 4096)
      .Count("kernels.gemm_tile_n", k.gemm_tile_n(), 1, 4096)
      .Real("kernels.fp8_gemm_efficiency", k.fp8_gemm_efficiency(), 0, 1);
}

void CheckHost(const Host& h, FieldCheck& c) {
  c.Real("host.pcie_bytes_per_s", h.pcie_bytes_per_s(), 0, kMaxBandwidth)
      .Real("host.cpu_adam_params_per_s", h.cpu_adam_params_per_s(), 0, 1e15)
      .Count("host.memory_bytes", h.memory_bytes(), 0, int64_t{1} << 50);
}

void CheckInterference(const Interference& in, int sms, FieldCheck& c) {
  c.Count("interference.collective_sms", in.collective_sms(), 0, sms)
      .Real("interference.compute_slowdown", in.compute_slowdown(), 0, 100)
      .Real("interference.memory_slowdown", in.memory_slowdown(), 0, 100)
      .Share("interference.nvlink_under_compute", in.nvlink_under_compute());
}

// The numbers of Degraded; ranks and nodes against the job's are checked
// when the engine builds its classes (sim/engine/degraded.h).
absl::Status CheckDegraded(const Degraded& d, absl::string_view where) {
  FieldCheck c(where, "degraded.");
  for (int i = 0; i < d.gpus_size(); ++i) {
    const Degraded::Gpus& g = d.gpus(i);
    const std::string at = absl::StrCat("gpus[", i, "].");
    c.Real(at + "speed", g.speed(), 0, 1)
        .Rule(at + "speed", g.speed() > 0 || g.has_model(),
              "must be > 0 (a share of the GPU's speed), or give gpu_model")
        .Rule(at + "ranks", !g.ranks().empty() || !g.nodes().empty(),
              "give the ranks or nodes these GPUs are");
    for (int r : g.ranks()) c.Count(at + "ranks", r, 0, kMaxGpus - 1);
    for (int n : g.nodes()) c.Count(at + "nodes", n, 0, kMaxGpus - 1);
    if (!c.ok() || !g.has_model()) continue;
    FieldCheck m(where, absl::StrCat("degraded.", at, "model."));
    CheckGpu(g.model().gpu(), m);
    CheckKernels(g.model().kernels(), m);
    CheckInterference(g.model().interference(), g.model().gpu().sms(), m);
    if (!m.ok()) return m.status();
  }
  for (const char* kind : {"nvlink", "nics"}) {
    const auto& links =
        std::string_view(kind) == "nvlink" ? d.nvlink() : d.nics();
    for (int i = 0; i < links.size(); ++i) {
      const Degraded::Links& l = links[i];
      const std::string at = absl::StrCat(kind, "[", i, "].");
      c.Real(at + "bandwidth", l.bandwidth(), 0, 1)
          .Rule(at + "bandwidth", l.bandwidth() > 0,
                "must be > 0: a link down is a failure (shardsim goodput), "
                "not a slow link")
          .Rule(at + "ranks",
                !l.ranks().empty() || !l.nodes().empty() || !l.rails().empty(),
                "give the ranks, nodes or rails of these links");
      for (int r : l.ranks()) c.Count(at + "ranks", r, 0, kMaxGpus - 1);
      for (int n : l.nodes()) c.Count(at + "nodes", n, 0, kMaxGpus - 1);
      for (int r : l.rails()) c.Count(at + "rails", r, 0, kMaxNicsPerNode - 1);
      c.Rule(at + "rails",
             l.rails().empty() || std::string_view(kind) == "nics",
             "rails are NICs' (degraded.nics)");
    }
  }
  const Degraded::Drawn& r = d.drawn();
  c.Real("drawn.gpu_speed_sigma", r.gpu_speed_sigma(), 0, 1)
      .Real("drawn.nic_fraction", r.nic_fraction(), 0, 1)
      .Real("drawn.nic_bandwidth", r.nic_bandwidth(), 0, 1)
      .Rule("drawn.nic_bandwidth",
            (r.nic_fraction() > 0) == (r.nic_bandwidth() > 0),
            "is given with nic_fraction, and only with it")
      .Rule("drawn.seed",
            r.seed() == 0 || r.gpu_speed_sigma() > 0 || r.nic_fraction() > 0,
            "draws nothing without gpu_speed_sigma or nic_fraction");
  return c.status();
}

}  // namespace

absl::Status ValidatePlatform(const Platform& p, absl::string_view where) {
  FieldCheck c(where);
  c.Text("name", p.name())
      .Text("gpu_model", p.gpu_model())
      .Text("gpu.name", p.gpu().name());
  for (int i = 0; i < p.protocols_size(); ++i) {
    c.Text(absl::StrCat("protocols[", i, "].name"), p.protocols(i).name());
  }
  c.Count("gpus_per_node", p.gpus_per_node(), 1, kMaxGpusPerNode)
      .Count("nodes", p.nodes(), 0, kMaxGpus)
      .Count("channels", p.channels(), 1, kMaxChannels);
  CheckGpu(p.gpu(), c);
  CheckNetwork(p, c);
  CheckProtocols(p, c);
  CheckEfficiency(p.efficiency(), c);
  CheckKernels(p.kernels(), c);
  c.Rule(
      "kernels.fp8_gemm_efficiency",
      (p.gpu().fp8_peak_flops() > 0) == (p.kernels().fp8_gemm_efficiency() > 0),
      "is given with gpu.fp8_peak_flops, and only with it (a GPU with FP8 "
      "tensor cores has both)");
  CheckInterference(p.interference(), p.gpu().sms(), c);
  CheckHost(p.host(), c);
  const Reliability& r = p.reliability();
  c.Real("reliability.gpu_failures_per_hour", r.gpu_failures_per_hour(), 0, 1)
      .Real("reliability.node_failures_per_hour", r.node_failures_per_hour(), 0,
            1)
      .Real("reliability.nic_failures_per_hour", r.nic_failures_per_hour(), 0,
            1)
      .Real("reliability.switch_failures_per_hour",
            r.switch_failures_per_hour(), 0, 1)
      .Real("reliability.software_failures_per_hour",
            r.software_failures_per_hour(), 0, 1)
      .Real("reliability.relaunch_s", r.relaunch_s(), 0, 1e6)
      .Real("reliability.init_s", r.init_s(), 0, 1e6)
      .Real("storage.node_write_bytes_per_s",
            p.storage().node_write_bytes_per_s(), 0, kMaxBandwidth)
      .Real("storage.node_read_bytes_per_s",
            p.storage().node_read_bytes_per_s(), 0, kMaxBandwidth);
  if (!c.ok()) return c.status();
  return CheckDegraded(p.degraded(), where);
}

absl::Status ValidateScenario(const Scenario& s, absl::string_view where) {
  FieldCheck c(where);
  c.Text("name", s.name())
      .Text("model", s.model())
      .Text("platform", s.platform());
  for (const std::string& spec : s.strategies()) c.Text("strategies", spec);
  c.Rule("strategies", !s.strategies().empty(),
         "at least one strategy is needed")
      .Rule("gpus", !s.gpus().empty(), "at least one GPU count is needed");
  for (int gpus : s.gpus()) c.Count("gpus", gpus, 1, kMaxGpus);
  c.Count("micro_batch_size", s.micro_batch_size(), 1, kMaxTokensPerMicroBatch)
      .Count("seq_len", s.seq_len(), 1, kMaxSeqLen);
  const int64_t tokens = int64_t{s.micro_batch_size()} * s.seq_len();
  c.Rule("micro_batch_size", tokens <= kMaxTokensPerMicroBatch,
         absl::StrCat("micro_batch_size x seq_len = ", tokens,
                      " tokens, beyond the limit of ", kMaxTokensPerMicroBatch,
                      " per micro-batch"));
  c.Rule("micro_batches",
         s.global_batch_tokens() == 0 || s.micro_batches() == 0,
         "give micro_batches or global_batch_tokens, not both")
      .Count("global_batch_tokens", s.global_batch_tokens(), 0,
             kMaxGlobalBatchTokens);
  if (s.global_batch_tokens() == 0) {
    c.Count("micro_batches", s.micro_batches(), 1, kMaxMicroBatches);
  }
  c.Real("optimizer_bytes_per_param", s.optimizer_bytes_per_param(), 0,
         kMaxOptimizerBytesPerParam)
      .Rule("optimizer_bytes_per_param", s.optimizer_bytes_per_param() != 0,
            "must be > 0 (12 for mixed-precision Adam)");
  const Parallelism& p = s.parallelism();
  c.Count("parallelism.tp", p.tp(), 0, kMaxGpusPerNode)
      .Count("parallelism.pp", p.pp(), 0, kMaxLayers)
      .Count("parallelism.vpp", p.vpp(), 0, 64)
      .Count("parallelism.cp", p.cp(), 0, kMaxGpus);
  for (int n : p.stage_layers()) {
    c.Count("parallelism.stage_layers", n, 0, kMaxLayers);
  }
  // The pipeline's own fields mean nothing without stages: refused, not
  // ignored.
  const bool staged = p.pp() > 1;
  c.Rule("parallelism.vpp", p.vpp() <= 1 || staged,
         "model chunks per stage need a pipeline: pp > 1")
      .Rule("parallelism.stage_layers", p.stage_layers().empty() || staged,
            "blocks per stage need a pipeline: pp > 1")
      .Rule("parallelism.pipeline_schedule",
            p.pipeline_schedule() == PIPELINE_SCHEDULE_UNSPECIFIED || staged,
            "a pipeline schedule needs a pipeline: pp > 1")
      .Rule("execution.pipeline_scatter_gather",
            !s.execution().pipeline_scatter_gather() || staged,
            "splits a pipeline's sends: needs pp > 1")
      .Rule("execution.pipeline_scatter_gather",
            !s.execution().pipeline_scatter_gather() || !p.sequence_parallel(),
            "is not modelled with parallelism.sequence_parallel, whose "
            "boundary the tensor-parallel ranks hold split already");
  c.Rule("parallelism.sequence_parallel", !p.sequence_parallel() || p.tp() > 1,
         "sequence parallelism splits along tp: needs tp > 1")
      .Count("recompute_every_layers", s.recompute_every_layers(), 0,
             kMaxLayers)
      .Rule("recompute_granularity",
            s.recompute_granularity() == RECOMPUTE_GRANULARITY_UNSPECIFIED ||
                !s.recompute() || s.recompute_granularity() == RECOMPUTE_FULL,
            absl::StrCat("recompute: true is full recomputation; it disagrees "
                         "with recompute_granularity ",
                         RecomputeGranularity_Name(s.recompute_granularity())))
      .Rule("recompute_every_layers",
            (s.recompute_granularity() == RECOMPUTE_SELECTIVE_LAYER) ==
                (s.recompute_every_layers() > 0),
            "is the K of RECOMPUTE_SELECTIVE_LAYER (every K-th block): "
            "given with it, and only with it");
  // Context parallelism as Megatron runs it: Transformer Engine's ring
  // attention is a flash-attention path (HF's eager attention has no cp),
  // and the load-balanced causal split cuts every sequence into 2 x cp
  // chunks (megatron/core/utils.py, get_batch_on_this_cp_rank).
  c.Rule("kernels.float8.enabled",
         !s.kernels().float8().enabled() || std::max(1, p.tp()) == 1,
         "FP8 linear layers under tensor parallelism (torchao's "
         "Float8ColwiseParallel) are not modelled: tp must be 1")
      .Rule("kernels.float8.fsdp_all_gather",
            !s.kernels().float8().fsdp_all_gather() ||
                s.kernels().float8().enabled(),
            "gathers the float8 layers' weights in float8: needs "
            "kernels.float8.enabled");
  const int cp = std::max(1, p.cp());
  c.Rule("flash_attention", cp == 1 || s.flash_attention(),
         "context parallelism (parallelism.cp > 1) runs Transformer Engine's "
         "ring attention: needs flash_attention: true")
      .Rule("seq_len", cp == 1 || s.seq_len() % (2 * cp) == 0,
            absl::StrCat("must be a multiple of 2 x parallelism.cp = ", 2 * cp,
                         " (the load-balanced causal split's chunks)"));
  return c.status();
}

}  // namespace shardsim

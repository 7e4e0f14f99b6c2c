#include "sim/results/results.h"

#include <algorithm>
#include <fstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/type_resolver_util.h"

namespace shardsim {
namespace {

// Data sent is counted in GB (1e9 bytes), as link rates are (GB/s);
// memory in GiB (2^30 bytes), as GPUs are sized.
double GB(int64_t bytes) { return bytes / 1e9; }
double GiB(int64_t bytes) { return bytes / 1073741824.0; }

// "yes (80.0)" or "OOM (80.0)": whether the peak fits the GPU's memory,
// with that memory in GiB; "host OOM (80.0)" where the GPU's peak fits but
// the node's host memory does not hold what offload keeps there.
std::string Fits(const ResultRow& r) {
  const bool host_only =
      r.host_oom() && r.peak_memory_bytes() <= r.gpu_memory_bytes();
  return absl::StrFormat("%s (%.1f)",
                         host_only ? "host OOM"
                         : r.oom() ? "OOM"
                                   : "yes",
                         GiB(r.gpu_memory_bytes()));
}

}  // namespace

std::string FormatMemoryTable(const Results& results) {
  std::string out = absl::StrFormat(
      "peak memory per GPU, GiB (2^30 bytes); fits: within the GPU's memory "
      "(GiB)\n%-34s %6s %8s %8s %8s %8s %8s %8s %8s  %s\n",
      "strategy", "gpus", "P", "G", "OS", "act", "buffers", "reserve", "total",
      "fits");
  for (const ResultRow& r : results.rows()) {
    absl::StrAppendFormat(
        &out, "%-34s %6d %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f  %s\n",
        r.strategy(), r.gpus(), GiB(r.param_bytes()), GiB(r.grad_bytes()),
        GiB(r.optimizer_bytes()), GiB(r.activation_bytes()),
        GiB(r.buffer_bytes()), GiB(r.reserved_bytes()),
        GiB(r.peak_memory_bytes()), Fits(r));
  }
  // What offload keeps in host memory, per node.
  for (const ResultRow& r : results.rows()) {
    if (!r.has_host_memory_bytes()) continue;
    absl::StrAppendFormat(&out,
                          "%s at %d GPUs: host memory %.2f GiB per node "
                          "(optimizer states and offload buffers)%s\n",
                          r.strategy(), r.gpus(), GiB(r.host_memory_bytes()),
                          r.host_oom() ? ", more than the node has" : "");
  }
  return out;
}

std::string FormatVolumeTable(const Results& results, bool detail) {
  std::string out = absl::StrFormat(
      "bytes sent in one step, GB (1e9 bytes): total over all GPUs, and per "
      "GPU\n%-34s %6s %10s %10s %10s %10s\n",
      "strategy", "gpus", "intra tot", "inter tot", "intra/GPU", "inter/GPU");
  for (const ResultRow& r : results.rows()) {
    absl::StrAppendFormat(&out, "%-34s %6d %10.2f %10.2f %10.3f %10.3f\n",
                          r.strategy(), r.gpus(), GB(r.intra_node_bytes()),
                          GB(r.inter_node_bytes()),
                          GB(r.intra_node_bytes()) / r.gpus(),
                          GB(r.inter_node_bytes()) / r.gpus());
    if (!detail) continue;
    for (const TrafficEntry& e : r.traffic()) {
      absl::StrAppendFormat(
          &out,
          "    %-8s %-14s %-10s over %-14s %-8s %5d x %9.3f MB %10.2f %10.2f\n",
          absl::AsciiStrToLower(Phase_Name(e.phase())),
          e.op() == OP_UNSPECIFIED ? "SEND" : CollectiveOp_Name(e.op()),
          e.tensor(),
          e.op() == OP_UNSPECIFIED ? "rank pairs" : GroupName(e.group()),
          e.op() == OP_UNSPECIFIED
              ? "direct"
              : absl::AsciiStrToLower(Algorithm_Name(e.algorithm())),
          e.calls(), e.bytes_per_call() / 1e6, GB(e.intra_node_bytes()),
          GB(e.inter_node_bytes()));
    }
  }
  return out;
}

std::string FormatRunTable(const Results& results) {
  // The strategy column fits the longest name (34 at least).
  int w = 34;
  for (const ResultRow& r : results.rows()) {
    w = std::max(w, static_cast<int>(r.strategy().size()));
  }
  bool estimates = false;
  for (const ResultRow& r : results.rows()) estimates |= r.estimate();
  std::string out = absl::StrFormat(
      "%sone training step per strategy and GPU count; MFU and TFLOP/s count "
      "model FLOPs (forward + backward, no recomputation); intra/inter: GB "
      "sent in the step, total over all GPUs; mem: peak per GPU, GiB\n"
      "%-*s %6s %9s %12s %8s %6s %9s %9s %9s %8s  %s\n",
      estimates ? "rows marked estimate: the step's times estimated from the "
                  "models without the engine (shardsim estimate), not "
                  "simulated\n"
                : "",
      w, "strategy", "gpus", "step s", "tokens/s/GPU", "TFLOP/s", "MFU",
      "exposed s", "intra GB", "inter GB", "mem GiB", "fits");
  for (const ResultRow& r : results.rows()) {
    if (r.oom() || !r.has_step_time_s()) {
      absl::StrAppendFormat(
          &out, "%-*s %6d %9s %12s %8s %6s %9s %9.1f %9.1f %8.1f  %s\n", w,
          r.strategy(), r.gpus(), "-", "-", "-", "-", "-",
          GB(r.intra_node_bytes()), GB(r.inter_node_bytes()),
          GiB(r.peak_memory_bytes()), Fits(r));
      continue;
    }
    absl::StrAppendFormat(
        &out,
        "%-*s %6d %9.4f %12.0f %8.1f %5.1f%% %9.4f %9.1f %9.1f %8.1f  %s%s\n",
        w, r.strategy(), r.gpus(), r.step_time_s(), r.tokens_per_gpu_per_s(),
        r.tflops_per_gpu(), 100 * r.mfu(), r.exposed_comm_s(),
        GB(r.intra_node_bytes()), GB(r.inter_node_bytes()),
        GiB(r.peak_memory_bytes()), Fits(r), r.estimate() ? "  estimate" : "");
  }
  return out;
}

std::string PlanPointName(const ResultRow& row) {
  if (!row.has_settings()) return row.strategy();
  const SearchSettings& s = row.settings();
  std::string knobs = s.recompute() ? ", recompute" : "";
  const Execution& e = s.execution();
  if (e.has_reduce_bucket_elements()) {
    absl::StrAppendFormat(&knobs, ", reduce bucket %d",
                          e.reduce_bucket_elements());
  }
  if (e.has_prefetch_bucket_elements()) {
    absl::StrAppendFormat(&knobs, ", prefetch bucket %d",
                          e.prefetch_bucket_elements());
  }
  if (e.has_prefetch_units()) {
    absl::StrAppendFormat(&knobs, ", prefetch %d", e.prefetch_units());
  }
  if (e.has_forward_prefetch()) {
    absl::StrAppend(&knobs, e.forward_prefetch() ? ", forward prefetch"
                                                 : ", no forward prefetch");
  }
  if (s.has_parallelism()) {
    const Parallelism& l = s.parallelism();
    for (const auto& [name, size] : {std::pair<const char*, int>{"tp", l.tp()},
                                     {"pp", l.pp()},
                                     {"vpp", l.vpp()},
                                     {"cp", l.cp()}}) {
      if (size > 1) absl::StrAppendFormat(&knobs, ", %s %d", name, size);
    }
  }
  return absl::StrFormat("%s [%d x %d%s]", row.strategy(), s.micro_batch_size(),
                         s.micro_batches(), knobs);
}

std::string FormatPlanTable(const SearchResults& plan) {
  // Each row named by PlanPointName, " (research)" after a point no
  // mainstream framework runs (ResultRow.deployable).
  auto table = [](const google::protobuf::RepeatedPtrField<ResultRow>& rows) {
    Results r;
    for (const ResultRow& row : rows) {
      ResultRow* named = r.add_rows();
      *named = row;
      named->set_strategy(PlanPointName(row));
      if (row.has_deployable() && !row.deployable()) {
        named->set_strategy(named->strategy() + " (research)");
      }
    }
    return FormatRunTable(r);
  };
  std::string out = absl::StrFormat(
      "plan: %d GPUs, peak memory cap %.2f GiB: %d candidates (%d specs, "
      "each with those of %d settings its framework has), %d filtered by "
      "memory; with their algorithms %d points, %d "
      "unplannable, %d pruned by the lower bound, %d simulated (%d of them "
      "the same schedule as one before, which they took the times of)\n"
      "a point is its strategy [sequences per micro-batch x micro-batches, "
      "recompute, execution knobs away from the framework's defaults]\n",
      plan.gpus(), plan.memory_cap_bytes() / (1024.0 * 1024 * 1024),
      plan.candidates(), plan.specs(), plan.settings(), plan.filtered(),
      plan.points(), plan.unplannable(), plan.pruned(), plan.simulated(),
      plan.same_step());
  // The mark is explained where some row carries it.
  bool research = false;
  for (const auto* rows : {&plan.best(), &plan.presets(),
                           &plan.pruned_presets(), &plan.pareto()}) {
    for (const ResultRow& r : *rows) {
      research = research || (r.has_deployable() && !r.deployable());
    }
  }
  if (research) {
    absl::StrAppend(&out,
                    "(research): no mainstream framework runs the point as "
                    "configured\n");
  }
  if (!plan.complete()) {
    absl::StrAppendFormat(
        &out,
        "INCOMPLETE: the time limit (--time-limit) stopped the search with %d "
        "of the points bounded neither simulated nor pruned (and any "
        "candidate not yet bounded); the rows are the best of those %s\n",
        plan.points() - plan.unplannable() - plan.pruned() - plan.simulated(),
        plan.simulated() > 0 ? "simulated"
                             : "bounded, by the estimate (none was simulated)");
  }
  absl::StrAppend(&out, "\nbest first (tokens/s per GPU):\n",
                  table(plan.best()));
  if (plan.ties() > 1) {
    absl::StrAppendFormat(
        &out,
        "ranks 1 to %d are ties: within %g%% of the best step, less than the "
        "models' own error\n",
        plan.ties(), 100 * plan.tie_fraction());
  }
  for (const SearchResults::Equivalent& e : plan.equivalents()) {
    absl::StrAppend(&out, "rank ", e.rank(),
                    " also stands for (the same step, memory and traffic): ",
                    absl::StrJoin(e.points(), "; "), "\n");
  }
  if (plan.has_best_deployable() &&
      (plan.best().empty() || !plan.best(0).deployable())) {
    google::protobuf::RepeatedPtrField<ResultRow> one;
    *one.Add() = plan.best_deployable();
    absl::StrAppendFormat(&out, "the best deployable point, rank %d:\n%s",
                          plan.best_deployable().rank(), table(one));
  }
  absl::StrAppend(&out, "\nthe named presets that fit:\n",
                  table(plan.presets()));
  for (const ResultRow& r : plan.pruned_presets()) {
    const bool mark = r.has_deployable() && !r.deployable();
    absl::StrAppendFormat(&out,
                          "%-34s %6d  pruned: step >= %.4f s (its lower "
                          "bound), %.1f GiB\n",
                          PlanPointName(r) + (mark ? " (research)" : ""),
                          r.gpus(), r.step_lower_bound_s(),
                          GiB(r.peak_memory_bytes()));
  }
  absl::StrAppend(&out,
                  "\nPareto front, peak memory against tokens/s per GPU:\n",
                  table(plan.pareto()));
  return out;
}

std::string FormatBreakdownTable(const Results& results) {
  // Pipelines add their bubble and point-to-point columns, tensor and
  // context parallelism theirs.
  bool piped = false, split = false, offload = false, straggler = false;
  for (const ResultRow& r : results.rows()) {
    const Breakdown& b = r.breakdown();
    piped = piped || b.pipeline_bubble_s() > 0 || b.point_to_point_s() > 0;
    split = split || b.tensor_parallel_s() > 0 || b.context_parallel_s() > 0;
    offload = offload || b.offload_s() > 0;
    straggler = straggler || b.straggler_s() > 0;
  }
  std::string out = absl::StrFormat(
      "why: the critical path of each step, seconds per cause (they add up "
      "to the step)\n%-34s %6s %8s | %8s %8s %8s | %8s %8s %8s %8s %8s | "
      "%s%s%s%s",
      "strategy", "gpus", "step s", "compute", "slowdown", "optim", "bandwdth",
      "latency", "launch", "prefetch", "mem-lim",
      straggler ? absl::StrFormat("%8s | ", "straggle") : "",
      piped ? absl::StrFormat("%8s %8s | ", "bubble", "p2p") : "",
      split ? absl::StrFormat("%8s %8s | ", "tp comm", "cp comm") : "",
      offload ? absl::StrFormat("%8s | ", "offload") : "");
  absl::StrAppend(&out, "most exposed collectives\n");
  for (const ResultRow& r : results.rows()) {
    if (!r.has_breakdown()) continue;
    const Breakdown& b = r.breakdown();
    std::vector<ExposedCollective> top(b.by_collective().begin(),
                                       b.by_collective().end());
    std::sort(top.begin(), top.end(), [](const auto& x, const auto& y) {
      return x.seconds() > y.seconds() ||
             (x.seconds() == y.seconds() && x.collective() < y.collective());
    });
    std::string exposed;
    for (size_t i = 0; i < top.size() && i < 3; ++i) {
      absl::StrAppendFormat(&exposed, "%s%s %.3f", i ? ", " : "",
                            top[i].collective(), top[i].seconds());
    }
    // The ranks the step waited on, the longest wait first.
    std::vector<Stragglers::Wait> waits(b.waited_on().waits().begin(),
                                        b.waited_on().waits().end());
    std::sort(waits.begin(), waits.end(), [](const auto& x, const auto& y) {
      return x.seconds() > y.seconds() ||
             (x.seconds() == y.seconds() && x.rank() < y.rank());
    });
    for (size_t i = 0; i < waits.size() && i < 3; ++i) {
      absl::StrAppendFormat(&exposed, "%swaiting on rank %d %.3f",
                            exposed.empty() ? "" : ", ", waits[i].rank(),
                            waits[i].seconds());
    }
    absl::StrAppendFormat(
        &out,
        "%-34s %6d %8.4f | %8.4f %8.4f %8.4f | %8.4f %8.4f %8.4f %8.4f %8.4f | "
        "%s%s%s%s%s\n",
        r.strategy(), r.gpus(), r.step_time_s(), b.compute_s(),
        b.compute_slowdown_s(), b.optimizer_s(), b.bandwidth_s(), b.latency_s(),
        b.launch_overhead_s(), b.prefetch_wait_s(), b.prefetch_depth_s(),
        straggler ? absl::StrFormat("%8.4f | ", b.straggler_s()) : "",
        piped ? absl::StrFormat("%8.4f %8.4f | ", b.pipeline_bubble_s(),
                                b.point_to_point_s())
              : "",
        split ? absl::StrFormat("%8.4f %8.4f | ", b.tensor_parallel_s(),
                                b.context_parallel_s())
              : "",
        offload ? absl::StrFormat("%8.4f | ", b.offload_s()) : "", exposed);
  }
  return out;
}

std::string FormatGoodputTable(const Results& results) {
  constexpr double kDay = 86400, kHour = 3600;
  bool monte_carlo = false;
  for (const ResultRow& r : results.rows()) {
    monte_carlo = monte_carlo || r.goodput().has_monte_carlo();
  }
  std::string out = absl::StrFormat(
      "goodput: the run's expected wall time on parts that fail (platform "
      "reliability), checkpointing every `ckpt every` of work; lost time by "
      "cause, hours\n%-34s %6s %8s %8s %8s %8s %8s | %10s %9s %9s %7s | "
      "%8s %8s %8s %8s%s\n",
      "strategy", "gpus", "step s", "MTBF h", "ckpt GB", "write s", "restart",
      "ckpt every", "work days", "wall days", "goodput", "ckpt", "rework",
      "restart", "straggle",
      monte_carlo ? absl::StrFormat(" | %8s %8s %8s", "p50 days", "p90 days",
                                    "p99 days")
                  : "");
  for (const ResultRow& r : results.rows()) {
    if (!r.has_goodput()) {
      absl::StrAppendFormat(&out, "%-34s %6d  -: %s\n", r.strategy(), r.gpus(),
                            r.oom() ? "out of memory" : "not simulated");
      continue;
    }
    const GoodputResult& g = r.goodput();
    absl::StrAppendFormat(
        &out,
        "%-34s %6d %8.4f %8.2f %8.0f %8.1f %8.0f | %6.1f min %9.2f %9.2f "
        "%6.1f%% | %8.1f %8.1f %8.1f %8.1f%s\n",
        r.strategy(), r.gpus(), r.step_time_s(), g.mtbf_s() / kHour,
        g.checkpoint_bytes() / 1e9, g.checkpoint_write_s(), g.restart_s(),
        g.interval_s() / 60, g.work_s() / kDay, g.wall_s() / kDay,
        100 * g.goodput(), g.checkpoint_s() / kHour, g.rework_s() / kHour,
        g.lost_restart_s() / kHour, g.straggler_s() / kHour,
        g.has_monte_carlo() ? absl::StrFormat(" | %8.2f %8.2f %8.2f",
                                              g.monte_carlo().p50_s() / kDay,
                                              g.monte_carlo().p90_s() / kDay,
                                              g.monte_carlo().p99_s() / kDay)
                            : "");
  }
  // How each point was set up: the same for every row but its counts.
  for (const ResultRow& r : results.rows()) {
    if (!r.has_goodput()) continue;
    const GoodputResult& g = r.goodput();
    absl::StrAppendFormat(
        &out,
        "\n%s at %d GPUs: checkpoint interval %s; %s checkpoints (the step "
        "blocks %.1f s each); a restart costs %.0f s; expected failures:",
        r.strategy(), r.gpus(), g.interval_rule(),
        g.async_checkpoint() ? "asynchronous" : "synchronous",
        g.checkpoint_block_s(), g.restart_s());
    for (const GoodputResult::Part& part : g.parts()) {
      absl::StrAppendFormat(&out, " %s %.1f (of %.0f)", part.part(),
                            part.failures(), part.count());
    }
    if (g.has_monte_carlo()) {
      absl::StrAppendFormat(
          &out,
          "; Monte Carlo of %d runs (seed %d): mean %.2f "
          "days, sd %.2f, min %.2f, max %.2f",
          g.monte_carlo().trials(), g.monte_carlo().seed(),
          g.monte_carlo().mean_s() / kDay, g.monte_carlo().stddev_s() / kDay,
          g.monte_carlo().min_s() / kDay, g.monte_carlo().max_s() / kDay);
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::string FormatCollectiveTable(const CollectiveResults& r) {
  // Simulated sweeps move fp32 (nccl-tests' default) and say which wire
  // protocol the engine chose; measured ones move int64 elements, which
  // the data check can compare exactly, and count the wrong ones.
  const bool measured = r.has_measured();
  const std::string source =
      measured
          ? absl::StrCat("measured, ", r.measured().transport(), " transport")
          : "simulated";
  std::string out = absl::StrFormat(
      "# %s %s on %d %s of %s, %d channels (%s)\n"
      "#%11s %12s %8s %10s %10s %10s %s\n"
      "#%11s %12s %8s %10s %10s %10s\n",
      CollectiveOp_Name(r.op()), Algorithm_Name(r.algorithm()), r.gpus(),
      measured ? "ranks" : "GPUs", r.platform(), r.channels(), source, "size",
      "count", "type", "time", "algbw", "busbw",
      measured ? "  #wrong" : " protocol", "(B)", "(elements)", "", "(us)",
      "(GB/s)", "(GB/s)");
  int64_t wrong = 0;
  for (const CollectiveRow& row : r.rows()) {
    absl::StrAppendFormat(
        &out, " %11d %12d %8s %10.1f %10.2f %10.2f %s\n", row.size_bytes(),
        measured ? (row.size_bytes() + 7) / 8 : row.size_bytes() / 4,
        measured ? "int64" : "float", row.time_us(), row.algbw_gbps(),
        row.busbw_gbps(),
        measured ? absl::StrFormat("%8d", row.wrong())
                 : absl::StrCat(" ", row.protocol()));
    wrong += row.wrong();
  }
  if (measured) {
    absl::StrAppendFormat(&out, "# Out of bounds values : %d %s\n", wrong,
                          wrong == 0 ? "OK" : "FAILED");
  }
  return out;
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message,
                                   bool whitespace) {
  // MessageToJsonString prints map fields (a Struct's keys among them) in
  // the map's own order, which differs from run to run. Serialized
  // deterministically, map entries are sorted by key; printing that binary
  // keeps the order.
  std::string binary;
  {
    google::protobuf::io::StringOutputStream raw(&binary);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    if (!message.SerializeToCodedStream(&coded)) {
      return absl::InternalError("json: the message does not serialize");
    }
  }
  static google::protobuf::util::TypeResolver* const resolver =
      google::protobuf::util::NewTypeResolverForDescriptorPool(
          "type.googleapis.com",
          google::protobuf::DescriptorPool::generated_pool());
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = whitespace;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  if (auto s = google::protobuf::util::BinaryToJsonString(
          resolver,
          absl::StrCat("type.googleapis.com/",
                       message.GetDescriptor()->full_name()),
          binary, &json, options);
      !s.ok()) {
    return absl::InternalError(absl::StrCat("json: ", s.ToString()));
  }
  return json;
}

absl::Status WriteJson(const google::protobuf::Message& results,
                       const std::string& path) {
  absl::StatusOr<std::string> json = ToJson(results);
  if (!json.ok()) return json.status();
  std::ofstream out(path);
  out << *json;
  if (!out) return absl::UnavailableError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

}  // namespace shardsim

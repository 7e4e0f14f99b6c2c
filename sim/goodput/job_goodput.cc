#include "sim/goodput/job_goodput.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/base/fat_tree.h"
#include "sim/model/model.h"

namespace shardsim {
namespace {

absl::Status Missing(const Job& job, const std::string& fields,
                     const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("platform ", job.platform.name(), ": ", fields, " ", why,
                   " (shardsim goodput needs it; the shipped platforms give "
                   "it with its sources)"));
}

}  // namespace

int64_t FatTreeSwitches(const Platform& platform, int nodes) {
  // The leaves as the engine lays the NICs out (rails on leaves of their
  // own where rail-optimised), with static routing: adaptive routing is
  // modelled as one switch, but its leaves are there all the same.
  Platform physical = platform;
  physical.mutable_network()->set_adaptive_routing(false);
  const FatTreeLayout layout(physical, nodes);
  if (layout.one_switch() || layout.leaves() == 1) return 1;
  return layout.leaves() + LeafUplinksOf(physical).count;
}

absl::StatusOr<GoodputResult> PointGoodput(const Job& job, const ResultRow& row,
                                           double uniform_step_s,
                                           const GoodputOptions& options) {
  const Platform& p = job.platform;
  const Reliability& rel = p.reliability();
  if (rel.gpu_failures_per_hour() == 0 && rel.node_failures_per_hour() == 0 &&
      rel.nic_failures_per_hour() == 0 && rel.switch_failures_per_hour() == 0 &&
      rel.software_failures_per_hour() == 0) {
    return Missing(job, "reliability.*_failures_per_hour", "are all 0");
  }
  if (p.storage().node_write_bytes_per_s() <= 0 ||
      p.storage().node_read_bytes_per_s() <= 0) {
    return Missing(job,
                   "storage.node_write_bytes_per_s and node_read_bytes_per_s",
                   "must be > 0");
  }
  if (options.async_checkpoint && p.host().pcie_bytes_per_s() <= 0) {
    return Missing(job, "host.pcie_bytes_per_s",
                   "must be > 0 for an asynchronous checkpoint's copy");
  }
  if (!row.has_step_time_s() || row.step_time_s() <= 0 || uniform_step_s <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(row.strategy(), " at ", row.gpus(),
                     " GPUs: no simulated step (out of memory?)"));
  }
  GoodputResult out;
  const double step = row.step_time_s();
  const double tokens_per_step = row.tokens_per_gpu_per_s() * row.gpus() * step;
  out.set_uniform_step_s(uniform_step_s);
  out.set_steps(options.days > 0 ? options.days * 86400 / uniform_step_s
                                 : options.tokens / tokens_per_step);
  out.set_work_s(out.steps() * uniform_step_s);

  const int per_node = std::min(row.gpus(), p.gpus_per_node());
  const int nodes = (row.gpus() + per_node - 1) / per_node;
  const double bytes = static_cast<double>(TotalParams(job.model)) *
                       (2 + job.scenario.optimizer_bytes_per_param());
  out.set_checkpoint_bytes(bytes);
  // Every node writes its share of the states at once.
  out.set_checkpoint_write_s(bytes /
                             (nodes * p.storage().node_write_bytes_per_s()));
  out.set_async_checkpoint(options.async_checkpoint);
  // What one GPU holds of the states: its parameter and optimizer-state
  // lines of the memory model (a shard, or a replica).
  const double held =
      static_cast<double>(row.param_bytes() + row.optimizer_bytes());
  out.set_checkpoint_block_s(options.async_checkpoint
                                 ? held / p.host().pcie_bytes_per_s()
                                 : out.checkpoint_write_s());
  // On a restart every GPU reads back what it holds (replicas included),
  // a node's GPUs together at the node's rate.
  out.set_restart_s(rel.relaunch_s() + rel.init_s() +
                    held * per_node / p.storage().node_read_bytes_per_s());

  GoodputInput in;
  in.work_s = out.work_s();
  in.restart_s = out.restart_s();
  in.checkpoint_block_s = out.checkpoint_block_s();
  in.checkpoint_write_s =
      options.async_checkpoint ? out.checkpoint_write_s() : 0;
  in.interval_s = options.interval_s;
  in.straggler_s_per_work_s = std::max(0.0, step / uniform_step_s - 1);
  const double nics = double{1} * nodes * p.network().nics_per_node();
  in.failures = {
      {"gpu", static_cast<double>(row.gpus()), rel.gpu_failures_per_hour()},
      {"node", static_cast<double>(nodes), rel.node_failures_per_hour()},
      {"nic", nics, rel.nic_failures_per_hour()},
      {"switch", static_cast<double>(FatTreeSwitches(p, nodes)),
       rel.switch_failures_per_hour()},
      {"software", static_cast<double>(nodes),
       rel.software_failures_per_hour()},
  };
  absl::StatusOr<Goodput> g = ExpectedGoodput(in);
  if (!g.ok()) return g.status();
  out.set_interval_s(g->interval_s);
  out.set_interval_rule(g->interval_rule);
  out.set_mtbf_s(g->mtbf_s);
  for (size_t i = 0; i < in.failures.size(); ++i) {
    GoodputResult::Part* part = out.add_parts();
    part->set_part(in.failures[i].name);
    part->set_count(in.failures[i].count);
    part->set_failures(g->failures_by_source[i].second);
  }
  out.set_wall_s(g->wall_s);
  out.set_goodput(g->goodput);
  out.set_checkpoint_s(g->lost.checkpoint_s);
  out.set_rework_s(g->lost.rework_s);
  out.set_lost_restart_s(g->lost.restart_s);
  out.set_straggler_s(g->lost.straggler_s);
  if (options.trials > 0) {
    absl::StatusOr<Distribution> d =
        MonteCarloGoodput(in, options.trials, options.seed);
    if (!d.ok()) return d.status();
    GoodputResult::Distribution* m = out.mutable_monte_carlo();
    m->set_trials(d->trials);
    m->set_seed(options.seed);
    m->set_mean_s(d->mean_s);
    m->set_stddev_s(d->stddev_s);
    m->set_p50_s(d->p50_s);
    m->set_p90_s(d->p90_s);
    m->set_p99_s(d->p99_s);
    m->set_min_s(d->min_s);
    m->set_max_s(d->max_s);
  }
  return out;
}

}  // namespace shardsim

#include "sim/schedule/host_cost.h"

#include <algorithm>

#include "sim/model/kernels.h"
#include "sim/schedule/lower.h"

namespace shardsim {
namespace {

int Launches(const KernelList& kernels) {
  int n = 0;
  for (const Kernel& k : kernels.kernels()) n += KernelLaunches(k);
  return n;
}

}  // namespace

std::vector<double> HostCosts(const StepOps& ops, const Platform& p) {
  const Schedule& s = ops.base();
  std::vector<int> launches;  // per kernel list
  for (const KernelList& l : s.kernel_lists()) launches.push_back(Launches(l));
  std::vector<double> cost(ops.size(), 0);
  for (int id = 0; id < ops.size(); ++id) {
    const Op& op = ops.op(id);
    if (op.has_compute()) {
      KernelsOf(s, op.compute());  // checks the index
      cost[id] =
          launches[op.compute().kernel_list()] * p.kernels().host_launch_s();
    } else if (op.has_collective()) {
      cost[id] = op.collective().launch_overhead_s();
    }
  }
  return cost;
}

std::vector<double> HostCosts(const Schedule& s, const Platform& p) {
  return HostCosts(StepOps(s), p);
}

}  // namespace shardsim

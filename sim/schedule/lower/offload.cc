#include "sim/schedule/lower/offload.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "sim/model/kernels.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace lower {
namespace {

// A compute op of the host side, on `stream`.
int HostOp(Step* step, Stream stream, int layer, const std::string& kind,
           const std::string& where, int list, std::vector<int> deps) {
  const int id =
      step->Compute(UPDATE, -1, layer, kind, where, list, std::move(deps));
  step->mutable_op(id)->set_stream(stream);
  return id;
}

}  // namespace

int OffloadedUpdate(Step* step, int norm) {
  const std::vector<Layer>& layers = step->layers();
  const int os = FactorSize(step->strategy().os());
  // Copied out in the order they are reduced (backward's: the head's
  // first), so each copy can follow its reduction.
  std::vector<int> order(layers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return step->reduced[a] < step->reduced[b];
  });
  std::vector<int> out;
  int64_t shard = 0;
  for (int i : order) {
    const int64_t params = CeilDiv(layers[i].params, os);
    if (params == 0) continue;  // a tied head: its matrix is the embedding's
    shard += params;
    const int list =
        step->KernelListOf({"offload out", i, false, 0}, [&](KernelList* l) {
          for (const Kernel& k : OffloadGradientKernels(params)) {
            *l->add_kernels() = k;
          }
        });
    out.push_back(HostOp(step, OFFLOAD, i, "offload", layers[i].name, list,
                         {step->reduced[i]}));
  }
  const int adam =
      step->KernelListOf({"cpu optimizer", -1, false, 0},
                         // The job's ranks on a node share its CPUs.
                         [&](KernelList* l) {
                           *l->add_kernels() = HostOptimizerKernel(
                               shard, step->layout().mesh().gpus_per_node);
                         });
  if (norm >= 0) out.push_back(norm);
  const int update =
      HostOp(step, HOST, -1, "cpu optimizer", "shard", adam, out);
  // The host thread runs the CPU's step: it issues nothing until it ends.
  const int back = step->KernelListOf(
      {"offload in", -1, false, 0},
      [&](KernelList* l) { *l->add_kernels() = OffloadParamsKernel(shard); });
  const int in =
      HostOp(step, OFFLOAD, -1, "offload", "P shard", back, {update});
  step->mutable_op(in)->add_host_waits(update);
  return in;
}

}  // namespace lower
}  // namespace shardsim

// Toy platforms and schedules whose times are derived by hand: the lower
// bound's tests (search_test.cc) and the estimate's (estimate_test.cc).
#ifndef SHARDSIM_TESTS_UTIL_TOY_STEP_H_
#define SHARDSIM_TESTS_UTIL_TOY_STEP_H_

#include <utility>
#include <vector>

#include "sim/base/group.h"
#include "sim/schema/platform.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

// Two GPUs of one node, 100 GB/s NVSwitch ports, fractions 1 but the best
// wire protocol's 0.5: a byte leaves a GPU at 50 GB/s at best.
inline Platform TwoGpuNode() {
  Platform p;
  p.set_name("bound");
  p.set_gpus_per_node(2);
  p.set_channels(1);
  p.mutable_nvswitch()->set_bandwidth(100e9);
  p.mutable_network()->set_nic_bandwidth(25e9);
  p.mutable_efficiency()->set_nvlink_fraction(1);
  p.mutable_efficiency()->set_nvlink_direct_fraction(0.5);
  p.mutable_efficiency()->set_network_fraction(1);
  p.add_protocols()->set_bandwidth_fraction(0.25);
  p.add_protocols()->set_bandwidth_fraction(0.5);
  return p;
}

// A 1 GB ring all-gather over the two GPUs of one node, on `stream`.
inline Op* AllGather(Schedule* s, Stream stream, std::vector<int> deps) {
  Op* op = s->add_ops();
  op->set_id(s->ops_size() - 1);
  op->set_stream(stream);
  for (int d : deps) op->add_deps(d);
  CollectiveCall* c = op->mutable_collective();
  c->set_op(ALL_GATHER);
  c->set_algorithm(RING);
  *c->mutable_group() = MakeGroup(2, 1, 1, 1);
  c->set_bytes(1'000'000'000);
  return op;
}

// The same all-gather, as one op, over the GPUs of one local rank in
// every node of `mesh` (InterGroup): across the network.
inline Schedule InterNodeAllGather(const Mesh& mesh) {
  Schedule s;
  *AllGather(&s, GATHER, {})->mutable_collective()->mutable_group() =
      InterGroup(mesh);
  return s;
}

// TwoGpuNode whose better protocol (fraction 0.5) pays 2 ms of base
// latency and 1 ms per step: 13 ms for the 1 GB all-gather, against the
// other's 20 ms.
inline Platform LatentTwoGpuNode() {
  Platform p = TwoGpuNode();
  p.mutable_protocols(1)->set_base_latency_s(0.002);
  p.mutable_protocols(1)->set_intra_alpha_s(0.001);
  return p;
}

// Two all-gathers on two streams, each costing the host 5 ms to launch.
inline Schedule TwoLaunchedAllGathers() {
  Schedule two;
  AllGather(&two, GATHER, {})
      ->mutable_collective()
      ->set_launch_overhead_s(0.005);
  AllGather(&two, REDUCE, {})
      ->mutable_collective()
      ->set_launch_overhead_s(0.005);
  return two;
}

// A compute op of one kernel on the compute stream.
inline void Compute(Schedule* s, Kernel kernel) {
  Op* op = s->add_ops();
  op->set_id(s->ops_size() - 1);
  op->set_stream(COMPUTE);
  op->mutable_compute()->set_kernel_list(s->kernel_lists_size());
  *s->add_kernel_lists()->add_kernels() = std::move(kernel);
}

// TwoGpuNode with a GPU of 1e15 FLOP/s and 1e13 B/s of HBM, 100 SMs of
// which a collective holds 10: a GEMM runs at 1 / (1 + 2 x 10/100) = 1/1.2
// of its speed meanwhile, a memory-bound kernel at 1 / (1 + 0.5 x 10/100)
// = 1/1.05; NVLink at full speed under compute.
inline Platform SlowedTwoGpuNode() {
  Platform p = TwoGpuNode();
  p.mutable_gpu()->set_peak_flops(1e15);
  p.mutable_gpu()->set_hbm_bytes_per_s(1e13);
  p.mutable_gpu()->set_sms(100);
  KernelModel* km = p.mutable_kernels();
  km->set_gemm_efficiency(1);
  km->set_gemm_tile_m(1);
  km->set_gemm_tile_n(1);
  km->set_vector_fraction(1);
  km->set_general_fraction(1);
  p.mutable_interference()->set_collective_sms(10);
  p.mutable_interference()->set_compute_slowdown(2);
  p.mutable_interference()->set_memory_slowdown(0.5);
  p.mutable_interference()->set_nvlink_under_compute(1);
  return p;
}

// 2 x 1000 x 1000 x 1e7 FLOP = 20 ms on SlowedTwoGpuNode (its 4e10 B:
// 4 ms).
inline Kernel TwentyMsGemm() {
  Kernel gemm;
  gemm.mutable_gemm()->set_m(1000);
  gemm.mutable_gemm()->set_n(1000);
  gemm.mutable_gemm()->set_k(10'000'000);
  return gemm;
}

// 5e10 B at 1e13 B/s = 5 ms on SlowedTwoGpuNode.
inline Kernel FiveMsVector() {
  Kernel vector;
  vector.mutable_memory()->set_vector_bytes(50'000'000'000);
  vector.mutable_memory()->set_launches(1);
  return vector;
}

}  // namespace shardsim

#endif  // SHARDSIM_TESTS_UTIL_TOY_STEP_H_

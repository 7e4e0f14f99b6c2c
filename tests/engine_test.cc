// The timing engine against numbers derived by hand: the alpha-beta closed
// form where nothing is shared, max-min sharing of one link, channels
// spreading a ring over NICs, HO-Ring against a flat ring on the public
// cloud of docs/strategies.md §5, the fast and per-step modes against each
// other, and run-to-run determinism. Every SimGrid use runs in a child process
// (SimulateCollective and SimulateJob fork; the flow probe uses
// RunIsolated): SimGrid allows one engine per process.
#include <algorithm>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <simgrid/s4u.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "sim/analyze/analyze.h"
#include "sim/engine/fabric.h"
#include "sim/engine/replay.h"
#include "sim/model/model.h"
#include "sim/results/trace.h"
#include "sim/runner/isolate.h"
#include "sim/scenario/scenario.h"
#include "sim/schedule/lower.h"
#include "sim/simulate/simulate.h"
#include "sim/strategy/execution.h"
#include "sim/strategy/strategy.h"
#include "sim/traffic/traffic.h"
#include "tests/util/replay.h"
#include "tests/util/test_util.h"

namespace sg4 = simgrid::s4u;

namespace shardsim {
namespace {

using test::Replay;
using test::Replayed;

using test::Knobs;
using test::TestPlatform;

// dgx_a100's link rates and NCCL's Simple latencies with efficiencies 1:
// NVSwitch 300e9, NIC 25e9 B/s; base 8.4 us, 3.4 us per NVSwitch step,
// 9.6 us per network step.
Knobs DgxLike() {
  Knobs k;
  k.nvlink = 300e9;
  k.nic = 25e9;
  k.base = 8.4e-6;
  k.alpha_intra = 3.4e-6;
  k.alpha_inter = 9.6e-6;
  return k;
}

// Four nodes of one GPU and one 10 GB/s NIC each (the rest TestPlatform's).
Platform FourNodes() {
  Knobs k;
  k.gpus_per_node = 1;
  k.nics_per_node = 1;
  return TestPlatform(k);
}

Platform Shipped(const std::string& name) {
  absl::StatusOr<Platform> p = LoadPlatform(name, "");
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Platform();
}

absl::StatusOr<CollectiveResults> Sweep(const Platform& p, CollectiveOp op,
                                        Algorithm algorithm, int gpus,
                                        int channels, int64_t min_bytes,
                                        int64_t max_bytes, double factor,
                                        FlowMode mode = FlowMode::kFast) {
  CollectiveSweep s;
  s.set_op(op);
  s.set_algorithm(algorithm);
  s.set_channels(channels);
  s.set_min_bytes(min_bytes);
  s.set_max_bytes(max_bytes);
  s.set_step_factor(factor);
  EngineOptions options;
  options.mode = mode;
  return SimulateCollective(p, gpus, s, options);
}

double Seconds(const CollectiveRow& row) { return row.time_us() * 1e-6; }

std::vector<double> ParseDoubles(const std::string& text) {
  std::vector<double> out;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    double v = 0;
    EXPECT_TRUE(absl::SimpleAtod(word, &v)) << word;
    out.push_back(v);
  }
  return out;
}

// Runs `body` in a child process with SimGrid started and `p` built for
// `mesh`; its answer, or the build's error.
absl::StatusOr<std::string> OnFabric(
    const Platform& p, const Mesh& mesh,
    const std::function<absl::StatusOr<std::string>(Fabric&)>& body) {
  return RunIsolated({[&]() -> absl::StatusOr<std::string> {
                       StartSimGrid();
                       absl::StatusOr<std::unique_ptr<Fabric>> f =
                           Fabric::Build(p, mesh);
                       if (!f.ok()) return f.status();
                       return body(**f);
                     }},
                     1)[0];
}

// A collective call of `bytes` over `group`.
CollectiveCall Call(CollectiveOp op, Algorithm algorithm, int64_t bytes,
                    const Group& group) {
  CollectiveCall call;
  call.set_op(op);
  call.set_algorithm(algorithm);
  call.set_bytes(bytes);
  *call.mutable_group() = group;
  return call;
}

// Seconds `call` takes alone on `p` built for `mesh`.
absl::StatusOr<double> CallAlone(const Platform& p, const Mesh& mesh,
                                 const CollectiveCall& call) {
  absl::StatusOr<std::string> r =
      OnFabric(p, mesh, [&](Fabric& f) -> absl::StatusOr<std::string> {
        CollectiveEngine engine(f, FlowMode::kFast, 1);
        if (absl::Status s = engine.Prepare(call); !s.ok()) return s;
        double seconds = 0;
        sg4::Actor::create("x", f.gpu(0),
                           [&] { seconds = engine.Run(call).seconds; });
        sg4::Engine::get_instance()->run();
        return absl::StrFormat("%.17g", seconds);
      });
  if (!r.ok()) return r.status();
  return ParseDoubles(*r)[0];
}

constexpr CollectiveOp kRingOps[] = {ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE};

// Ring steps: p - 1 for all-gather and reduce-scatter, 2 (p - 1) for
// all-reduce (reduce-scatter then all-gather on the same ring).
int RingSteps(CollectiveOp op, int p) {
  return op == ALL_REDUCE ? 2 * (p - 1) : p - 1;
}

// ---- a. alpha-beta closed form where nothing is shared ----------------------
//
// A ring over p members moves, per step, one chunk of S/p bytes from every
// member to the next; with one channel every member sends on its own link
// and receives on another, so no link is shared, and every step costs
// alpha + S/(p beta) on the slowest hop:
//   t = base + (p - 1)(alpha + S/(p beta))     all-gather, reduce-scatter
//   t = base + 2(p - 1)(alpha + S/(p beta))    all-reduce
// Sizes 1 MiB, 16 MiB, 256 MiB: S/p is whole for p = 4, 8, 16; at 1 MiB the
// alpha term dominates, at 256 MiB the beta term.

// Ring all-gather, reduce-scatter and all-reduce of 1, 16 and 256 MiB over
// `gpus`, one channel: each within 1% of steps x (alpha + S/(p beta)).
void ExpectRingClosedForm(const Platform& p, int gpus, double alpha,
                          double beta) {
  for (CollectiveOp op : kRingOps) {
    SCOPED_TRACE(CollectiveOp_Name(op));
    absl::StatusOr<CollectiveResults> r =
        Sweep(p, op, RING, gpus, 1, 1 << 20, 1 << 28, 16);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->rows_size(), 3);
    for (const CollectiveRow& row : r->rows()) {
      const double s = static_cast<double>(row.size_bytes());
      const double want = RingSteps(op, gpus) * (alpha + s / (gpus * beta));
      EXPECT_NEAR(Seconds(row), want, 0.01 * want) << row.size_bytes();
    }
  }
}

TEST(EngineClosedForm, RingInsideOneNodeIsAlphaBetaOverNvSwitch) {
  const Knobs k;  // NVSwitch 100e9 B/s, alpha_intra 5 us, base 0
  const Platform p = TestPlatform(k);
  // e.g. all-gather of 1 MiB: 7 x (5 us + 1048576 / (8 x 100e9)) =
  // 7 x 6.311 us = 44.18 us.
  ExpectRingClosedForm(p, 8, k.alpha_intra, k.nvlink);
}

TEST(EngineClosedForm, RingOverOneGpuNodesIsAlphaBetaOverNics) {
  // 4 nodes of 1 GPU with 1 NIC each: ring 0 -> 1 -> 2 -> 3 -> 0, every
  // hop through the network, each NIC sending one flow and receiving one.
  Knobs k;
  k.gpus_per_node = 1;
  k.nics_per_node = 1;
  const Platform p = TestPlatform(k);
  // e.g. all-gather of 256 MiB: 3 x (20 us + 268435456 / (4 x 10e9)) =
  // 3 x 6.731 ms = 20.19 ms.
  ExpectRingClosedForm(p, 4, k.alpha_inter, k.nic);
}

TEST(EngineClosedForm, RingAcrossTwoNodesIsBoundByItsNetworkHop) {
  // 2 nodes x 8 GPUs, 1 channel: the ring 0..7, 8..15 has two hops that
  // leave a node (7 -> 8 and 15 -> 0), on different NICs and directions,
  // and 14 over NVSwitch. Every hop carries (p - 1) chunks of S/p. The
  // network hop costs alpha_inter + S/(p beta_nic) = 20 us + S/(16 x 10e9)
  // per step, the NVSwitch hops 5 us + S/(16 x 100e9): the ring moves at the
  // pace of its network hop, so
  //   t = (p - 1)(alpha_inter + S/(p beta_nic)), p = 16 (x 2 for all-reduce).
  const Knobs k;
  const Platform p = TestPlatform(k);
  // e.g. all-reduce of 16 MiB: 30 x (20 us + 16777216 / 16e10) =
  // 30 x 124.86 us = 3.746 ms.
  ExpectRingClosedForm(p, 16, k.alpha_inter, k.nic);
}

// ---- b. max-min sharing of one link ----------------------------------------

TEST(EngineSharing, TwoFlowsOnOneLinkEachGetHalf) {
  // a800-like: 8 GPUs and 4 NICs of 25e9 B/s per node (GPUs 2i and 2i+1
  // share NIC i), NVSwitch 200e9 B/s, 2 nodes, efficiencies 1.
  Knobs k;
  k.nics_per_node = 4;
  k.nic = 25e9;
  k.nvlink = 200e9;
  const Platform p = TestPlatform(k);
  constexpr double kB = 1e9;
  absl::StatusOr<std::string> r =
      OnFabric(p, Mesh{8, 2}, [&](Fabric& fab) -> absl::StatusOr<std::string> {
        std::string out;
        auto record = [&](const std::vector<sg4::CommPtr>& comms,
                          double start) {
          for (const sg4::CommPtr& c : comms) {
            absl::StrAppend(
                &out, absl::StrFormat("%.17g ", c->get_finish_time() - start));
          }
        };
        auto run = [&](std::vector<std::pair<sg4::Host*, sg4::Host*>> flows) {
          const double start = sg4::Engine::get_clock();
          std::vector<sg4::CommPtr> comms;
          for (auto [from, to] : flows) {
            comms.push_back(sg4::Comm::sendto_async(from, to, kB));
          }
          sg4::Comm::wait_all(comms);
          record(comms, start);
        };
        sg4::Actor::create("probe", fab.gpu(0), [&] {
          // 1. One flow alone: GPU 0 -> GPU 8 over NIC 0 -> NIC 4.
          run({{fab.nic(0), fab.nic(8)}});
          // 2. GPUs 0 and 1 (both behind NIC 0) to GPUs 8 and 10 (NICs 4
          //    and 5): they share NIC 0's up-link only.
          run({{fab.nic(0), fab.nic(8)}, {fab.nic(1), fab.nic(10)}});
          // 3. GPUs 2 and 4 (NICs 1 and 2) to GPU 8 (NIC 4): they share
          //    NIC 4's down-link only.
          run({{fab.nic(2), fab.nic(8)}, {fab.nic(4), fab.nic(8)}});
          // 4. Opposite directions on one NIC pair: split-duplex, no
          //    sharing.
          run({{fab.nic(0), fab.nic(8)}, {fab.nic(8), fab.nic(0)}});
          // 5. NVSwitch: GPU 0 to GPUs 1 and 2 share GPU 0's port.
          run({{fab.gpu(0), fab.gpu(1)}, {fab.gpu(0), fab.gpu(2)}});
          // 6. NVSwitch alone: GPU 0 -> GPU 1.
          run({{fab.gpu(0), fab.gpu(1)}});
        });
        sg4::Engine::get_instance()->run();
        return out;
      });
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<double> t = ParseDoubles(*r);
  ASSERT_EQ(t.size(), 10u);
  const double nic_alone = kB / k.nic;          // 1e9 / 25e9 = 40 ms
  const double nic_shared = 2 * kB / k.nic;     // two flows at 12.5e9: 80 ms
  const double nvl_alone = kB / k.nvlink;       // 1e9 / 200e9 = 5 ms
  const double nvl_shared = 2 * kB / k.nvlink;  // 10 ms
  auto near = [](double got, double want) {
    EXPECT_NEAR(got, want, 1e-4 * want);
  };
  near(t[0], nic_alone);
  near(t[1], nic_shared);  // shared up-link
  near(t[2], nic_shared);
  near(t[3], nic_shared);  // shared down-link
  near(t[4], nic_shared);
  near(t[5], nic_alone);  // opposite directions
  near(t[6], nic_alone);
  near(t[7], nvl_shared);  // shared NVSwitch port
  near(t[8], nvl_shared);
  near(t[9], nvl_alone);
}

// Compute slows NVSwitch ports, and they speed up again when it ends:
// flows in flight too, though SimGrid bounds a flow by its route's
// bandwidth at its start (Fabric::OpenNvlink). A ring all-gather of S =
// 4e8 B over the 2 GPUs of one node, 100e9 B/s ports: each GPU sends its
// 2e8 B to the other, 2 ms alone, then one step's 5 us of alpha. The
// ports run at half speed from the start until 0.5 ms (2.5e7 B moved),
// then at full speed: 1.75e8 B in 1.75 ms more, 2.255 ms in all. Slowed
// again at 0.5 ms instead, from full speed: 5e7 B moved, 1.5e8 B at 50e9
// B/s in 3 ms, 3.505 ms.
TEST(EngineSharing, NvswitchFlowsFollowThePortsSpeedBothWays) {
  Knobs k;
  k.gpus_per_node = 2;
  k.nics_per_node = 1;
  const Platform p = TestPlatform(k);
  const Mesh mesh{2, 1};
  struct Case {
    double from;  // the ports' scale until 0.5 ms
    double to;    // and from then on
    double want;  // the call's seconds
  };
  for (const Case c : {Case{0.5, 1.0, 2.255e-3}, Case{1.0, 0.5, 3.505e-3}}) {
    SCOPED_TRACE(absl::StrCat(c.from, " then ", c.to));
    absl::StatusOr<std::string> r =
        OnFabric(p, mesh, [&](Fabric& f) -> absl::StatusOr<std::string> {
          CollectiveEngine engine(f, FlowMode::kFast, 1);
          const CollectiveCall call =
              Call(ALL_GATHER, RING, 400'000'000, GlobalGroup(mesh));
          if (absl::Status s = engine.Prepare(call); !s.ok()) return s;
          double t = 0;
          sg4::Actor::create("compute", f.gpu(0), [&] {
            engine.SetNvlinkScale(c.from);
            sg4::Actor::create("call", f.gpu(0), [&] {
              const double start = sg4::Engine::get_clock();
              engine.Run(call);
              t = sg4::Engine::get_clock() - start;
            });
            sg4::this_actor::sleep_for(0.5e-3);
            engine.SetNvlinkScale(c.to);
          });
          sg4::Engine::get_instance()->run();
          return absl::StrFormat("%.17g", t);
        });
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_NEAR(ParseDoubles(*r)[0], c.want, 1e-9);
  }
}

// ---- c. channels spread a flat ring over NICs
// ----------------------------------

TEST(EngineChannels, KChannelsUseKNics) {
  // dgx_a100-like, efficiencies 1: 8 GPUs and 8 NICs of 25e9 B/s per node,
  // NVSwitch 300e9 B/s, NCCL's Simple latencies (base 8.4 us, 3.4 us per
  // NVSwitch step, 9.6 us per network step). All-gather of S = 2^30 B over
  // 16 GPUs.
  //
  // Channel c moves S/k of the buffer on its own ring; ring c leaves node 0
  // from local (c - 1) mod 8 and enters node 1 at local c (ring.h), so for
  // k <= 8 each channel's two network hops use NICs no other channel uses,
  // and each network hop carries (15/16)(S/k):
  //   t_k = base + 15 alpha_inter + (15/16)(S/k) / 25e9
  //   t_1 = 8.4 us + 144 us + 40.265 ms = 40.418 ms
  //   t_8 = 8.4 us + 144 us +  5.033 ms =  5.186 ms
  // For k = 16 channels c and c + 8 use the same NICs: each NIC carries two
  // flows of (15/16)(S/16), the bytes of k = 8, so t_16 = t_8.
  // NVSwitch is not the bound: a GPU's port carries at most all k channels'
  // hops, k x (15/16)(S/k) / 300e9 = 3.36 ms < 5.03 ms.
  Knobs k = DgxLike();
  k.channels = 8;
  const Platform p = TestPlatform(k);
  constexpr int64_t kS = int64_t{1} << 30;
  const double alphas = k.base + 15 * k.alpha_inter;
  std::vector<double> t;
  for (int channels : {1, 2, 4, 8, 16}) {
    SCOPED_TRACE(channels);
    absl::StatusOr<CollectiveResults> r =
        Sweep(p, ALL_GATHER, RING, 16, channels, kS, kS, 2);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->rows_size(), 1);
    EXPECT_EQ(r->channels(), channels);
    const double want = alphas + 15.0 / 16 * kS / std::min(channels, 8) / k.nic;
    EXPECT_NEAR(Seconds(r->rows(0)), want, 0.01 * want);
    t.push_back(Seconds(r->rows(0)));
  }
  // The bandwidth part scales as 1/k up to 8 NICs: (t_1 - alphas) / (t_k -
  // alphas) = k, and the whole time within 5% of t_1 / k (alphas are 3% of
  // t_8).
  const int ks[] = {1, 2, 4, 8};
  for (int i = 1; i < 4; ++i) {
    EXPECT_NEAR((t[0] - alphas) / (t[i] - alphas), ks[i], 0.01 * ks[i]);
    EXPECT_NEAR(t[0] / t[i], ks[i], 0.05 * ks[i]);
  }
  EXPECT_NEAR(t[4], t[3], 0.001 * t[3]);  // 16 channels: no ninth NIC
}

// ---- d. HO-Ring against a flat ring on the public cloud
// (docs/strategies.md §5)
// --------------

TEST(EngineHoRing, BeatsFlatRingOnTwoCloudNodes) {
  // cloud_a100: per GPU a 14e9 B/s virtual NIC, per node 4 x 14e9 = 56e9 B/s
  // of up-links (platforms/cloud_a100.textproto), NVSwitch 300e9 x 0.783 =
  // 234.9e9 B/s reachable, network_fraction 1. All-gather of S = 1e9 B over
  // 16 GPUs (2 nodes), the platform's 8 channels. NCCL's Simple protocol
  // (payload fraction 1, base 8.4 us, 3.4 us per NVSwitch step, 9.6 us per
  // network step) is the fastest at 1 GB.
  const Platform cloud = Shipped("cloud_a100");
  constexpr double kS = 1e9;
  const double uplink = 56e9;
  const double base = 8.4e-6, a_intra = 3.4e-6, a_inter = 9.6e-6;

  // Flat ring: every channel's ring crosses from node 0 to node 1 once and
  // back once; each crossing carries (15/16) of the channel's S/8, so each
  // direction of a node's up-links carries (15/16) S in all:
  //   t_ring >= (15/16) S / 56e9 = 16.741 ms,
  // and with nothing else in the way (the 8 crossings of one direction go
  // to 8 different NICs, spread over the 4 up-links by d-mod-k routing;
  // each virtual NIC's share, (15/16) S/8 / 14e9 = 8.37 ms, is lower):
  //   t_ring <= 16.741 ms + base + 15 alpha_inter = 16.893 ms.
  const double ring_lo = 15.0 / 16 * kS / uplink;
  const double ring_hi = ring_lo + base + 15 * a_inter;
  absl::StatusOr<CollectiveResults> ring =
      Sweep(cloud, ALL_GATHER, RING, 16, 0, kS, kS, 2);
  ASSERT_TRUE(ring.ok()) << ring.status();
  ASSERT_EQ(ring->rows_size(), 1);
  EXPECT_EQ(ring->rows(0).protocol(), "Simple");
  const double t_ring = Seconds(ring->rows(0));
  EXPECT_GE(t_ring, ring_lo);
  EXPECT_LE(t_ring, ring_hi * 1.001);

  // HO-Ring: every GPU sends its one chunk S/16 across on its column ring
  // (g - 1 = 1 step): 8 GPUs x S/16 = S/2 per direction of a node's
  // up-links, 8.929 ms; and every GPU forwards 2 rows x 7 chunks of S/16
  // over NVSwitch as point-to-point copies, at nvlink_direct_fraction:
  // 300e9 x 0.709 = 212.7e9 B/s, (14/16) S / 212.7e9 = 4.114 ms. No
  // schedule can beat the larger of the two:
  //   t_horing >= max(S/2 / 56e9, (14/16) S / direct) = 8.929 ms.
  // The plan is step-synchronous: row 1 (node n-1's chunks) can only start
  // after the column step delivered them, so at worst everything on
  // NVSwitch waits for the column step; with g + M - 2 = 8 steps, each at
  // most alpha_inter:
  //   t_horing <= base + S/2 / 56e9 + (14/16) S / 212.7e9 + 8 alpha_inter
  //             = 13.128 ms.
  const double direct = 300e9 * 0.709;
  const double horing_lo = std::max(kS / 2 / uplink, 14.0 / 16 * kS / direct);
  const double horing_hi =
      base + kS / 2 / uplink + 14.0 / 16 * kS / direct + 8 * a_inter;
  absl::StatusOr<CollectiveResults> horing =
      Sweep(cloud, ALL_GATHER, HORING, 16, 0, kS, kS, 2);
  ASSERT_TRUE(horing.ok()) << horing.status();
  ASSERT_EQ(horing->rows_size(), 1);
  EXPECT_EQ(horing->rows(0).protocol(), "Simple");
  const double t_horing = Seconds(horing->rows(0));
  EXPECT_GE(t_horing, horing_lo);
  EXPECT_LE(t_horing, horing_hi);
  EXPECT_LT(t_horing, ring_lo);  // beats any flat ring, not just this one
  // Where the engine lands inside the bracket: the data flow of the plan.
  // Row 0 (the node's own chunks) needs nothing from the other node, so its
  // 7 intra steps (7 chunks of S/16 per GPU over NVSwitch, 2.057 ms) run
  // beside the column step (S/2 per node direction, 8.929 ms). Row 1 needs
  // the chunks the column step delivers, so its 7 intra steps follow it:
  //   t = base + (S/2 / 56e9 + alpha_inter) + 7 (S/16 / direct + alpha_intra)
  //     = 8.4 us + 8.9382 ms + 2.0807 ms = 11.027 ms.
  const double dataflow =
      base + kS / 2 / uplink + a_inter + 7 * (kS / 16 / direct + a_intra);
  EXPECT_NEAR(t_horing, dataflow, 0.01 * dataflow);
  // Per-step mode runs each intra link's steps in order, so row 0's steps
  // 1..6 queue behind row 1's, which wait for the column step: 13 chunks
  // of S/16 per GPU after it (lock-step):
  //   t = base + (S/2 / 56e9 + alpha_inter) + (13/16) S / direct
  //       + 7 alpha_intra = 8.4 us + 8.9382 ms + 3.8200 ms + 23.8 us
  //     = 12.790 ms.
  absl::StatusOr<CollectiveResults> in_order =
      Sweep(cloud, ALL_GATHER, HORING, 16, 0, kS, kS, 2, FlowMode::kPerStep);
  ASSERT_TRUE(in_order.ok()) << in_order.status();
  const double lockstep =
      base + kS / 2 / uplink + a_inter + 13.0 / 16 * kS / direct + 7 * a_intra;
  EXPECT_NEAR(Seconds(in_order->rows(0)), lockstep, 0.01 * lockstep);
}

// ---- e. fast and per-step modes agree
// -----------------------------------------

void ExpectModesAgree(const Platform& p, CollectiveOp op, Algorithm algorithm,
                      int channels, double tolerance) {
  SCOPED_TRACE(absl::StrCat(Algorithm_Name(algorithm), " ",
                            CollectiveOp_Name(op), " channels ", channels));
  // 1 MiB .. 256 MiB, x4.
  absl::StatusOr<CollectiveResults> fast = Sweep(
      p, op, algorithm, 16, channels, 1 << 20, 1 << 28, 4, FlowMode::kFast);
  absl::StatusOr<CollectiveResults> step = Sweep(
      p, op, algorithm, 16, channels, 1 << 20, 1 << 28, 4, FlowMode::kPerStep);
  ASSERT_TRUE(fast.ok()) << fast.status();
  ASSERT_TRUE(step.ok()) << step.status();
  ASSERT_EQ(fast->rows_size(), 5);
  ASSERT_EQ(step->rows_size(), 5);
  for (int i = 0; i < 5; ++i) {
    const CollectiveRow& f = fast->rows(i);
    const CollectiveRow& s = step->rows(i);
    EXPECT_EQ(f.size_bytes(), s.size_bytes());
    EXPECT_EQ(f.protocol(), s.protocol());
    EXPECT_NEAR(f.time_us(), s.time_us(), tolerance * s.time_us())
        << f.size_bytes() << " B: fast " << f.time_us() << " us, per-step "
        << s.time_us() << " us";
  }
}

TEST(EngineModes, RingFastAndPerStepAgreeWithinATenthOfAPercent) {
  const Platform p = Shipped("dgx_a100");  // 2 nodes x 8 GPUs below
  for (int channels : {1, 4}) {
    for (CollectiveOp op : kRingOps) {
      ExpectModesAgree(p, op, RING, channels, 0.001);
    }
  }
}

// Hierarchical algorithms run phase after phase. Fast mode ends a phase
// when its last flow ends everywhere; per-step lets each GPU start its next
// phase as soon as its own inputs are in, which is up to a few % sooner.
TEST(EngineModes, Torus2dAllGatherFastAndPerStepAgreeWithinFivePercent) {
  const Platform p = Shipped("dgx_a100");
  for (int channels : {1, 4}) {
    ExpectModesAgree(p, ALL_GATHER, TORUS2D, channels, 0.05);
  }
}

// HO-Ring's modes bracket the truth rather than agree. Fast mode places
// each row where its data is ready (row 0 beside the column step), as an
// implementation that forwards rows out of order would run. Per-step mode
// runs each connection's steps in order, as an NCCL channel does, so on an
// intra link row 0's later steps queue behind row 1's first, which waits
// for the column step: per-step is the lock-step schedule. On cloud_a100
// at 1 GB that is 10.83 ms against 12.43 ms (both derived in
// EngineHoRing); on dgx_a100 over 1..256 MiB fast mode is 0.74-0.85 of
// per-step. Measure the real HO-Ring with shardsim-hw to know which it is.
TEST(EngineModes, HoRingPerStepIsTheInOrderBoundOfFastMode) {
  const Platform p = Shipped("dgx_a100");
  for (int channels : {1, 4}) {
    SCOPED_TRACE(channels);
    absl::StatusOr<CollectiveResults> fast =
        Sweep(p, ALL_GATHER, HORING, 16, channels, 1 << 20, 1 << 28, 4,
              FlowMode::kFast);
    absl::StatusOr<CollectiveResults> step =
        Sweep(p, ALL_GATHER, HORING, 16, channels, 1 << 20, 1 << 28, 4,
              FlowMode::kPerStep);
    ASSERT_TRUE(fast.ok() && step.ok());
    for (int i = 0; i < fast->rows_size(); ++i) {
      const double f = fast->rows(i).time_us(), s = step->rows(i).time_us();
      EXPECT_LE(f, s * 1.001) << fast->rows(i).size_bytes();
      EXPECT_GE(f, s * 0.7) << fast->rows(i).size_bytes();
    }
  }
}

// HRING all-gather, per-step, against its schedule derived by hand. On
// 2 nodes x 8 GPUs of the dgx_a100-like test platform (NVSwitch 300e9,
// NIC 25e9, efficiencies 1, 1 channel, alphas 3.4 / 9.6 us, base 8.4 us),
// S = 256 MiB:
//   1. intra ring all-gather of the node's 8 chunks: 7 steps of S/16 per GPU
//      on its own port: 7 (alpha_intra + S/16 / 300e9)
//   2. the 2 leaders exchange node blocks S/2 (1 step, NIC 0 of each node):
//      alpha_inter + S/2 / 25e9
//   3. each leader passes the other node's block S/2 down the chain
//      0 -> 1 -> ... -> 7 as ONE piece: 7 hops one after another,
//      7 (alpha_intra + S/2 / 300e9)
//   t = 8.4 + 7 (3.4 + 55.92) + (9.6 + 5368.7) + 7 (3.4 + 447.4) us
//     = 8.958 ms.
TEST(EngineModes, HringAllGatherPerStepFollowsItsChain) {
  const Knobs k = DgxLike();
  const Platform p = TestPlatform(k);
  constexpr double kS = 1 << 28;
  const double want = k.base + 7 * (k.alpha_intra + kS / 16 / k.nvlink) +
                      (k.alpha_inter + kS / 2 / k.nic) +
                      7 * (k.alpha_intra + kS / 2 / k.nvlink);
  absl::StatusOr<CollectiveResults> r = Sweep(
      p, ALL_GATHER, HRING, 16, 1, 1 << 28, 1 << 28, 2, FlowMode::kPerStep);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rows_size(), 1);
  EXPECT_NEAR(Seconds(r->rows(0)), want, 0.01 * want);
}

// Disabled: the fast mode runs a stage's hops as concurrent flows, one per
// hop with all its bytes, which is exact for a ring pass (every hop busy at
// every step) but not for HRING's in-node chain broadcast of a single piece
// (phase 3 above): the fast mode prices it as one hop's time, S/2 / 300e9,
// instead of 7 of them: 6.253 ms where the per-step mode gives 8.958 ms on
// the test platform above (dgx_a100 at 256 MiB, 4 channels: 6.768 ms
// against 10.217 ms). Enable when sim/collective/plan_summary.cc /
// collective_engine.cc account for pipeline fill (see the report of this test's
// author). As the 2D torus: phase by phase, within a few %.
TEST(EngineModes, HringAllGatherFastAndPerStepAgreeWithinFivePercent) {
  ExpectModesAgree(Shipped("dgx_a100"), ALL_GATHER, HRING, 1, 0.05);
  ExpectModesAgree(Shipped("dgx_a100"), ALL_GATHER, HRING, 4, 0.05);
}

// ---- f. determinism, and refusals
// -----------------------------------------------

TEST(EngineDeterminism, CollectiveSweepIsIdenticalRunToRun) {
  const Platform p = Shipped("dgx_a100");
  for (FlowMode mode : {FlowMode::kFast, FlowMode::kPerStep}) {
    absl::StatusOr<CollectiveResults> a =
        Sweep(p, ALL_REDUCE, RING, 16, 0, 1 << 20, 1 << 26, 4, mode);
    absl::StatusOr<CollectiveResults> b =
        Sweep(p, ALL_REDUCE, RING, 16, 0, 1 << 20, 1 << 26, 4, mode);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_EQ(a->rows_size(), 4);
    EXPECT_EQ(a->SerializeAsString(), b->SerializeAsString());
  }
}

// LLaMA-7B cut to 2 layers on dgx_a100, micro-batches of 1 sequence of
// 512 tokens: whole steps in a second or two.
absl::StatusOr<Job> TwoLayerJob(const std::vector<std::string>& strategies,
                                int gpus, int micro_batches,
                                const std::string& platform = "dgx_a100") {
  absl::StatusOr<Model> model = BuiltinModel("llama-7b");
  if (!model.ok()) return model.status();
  Scenario sc;
  sc.set_name("engine_test");
  *sc.mutable_model_def() = *model;
  sc.mutable_model_def()->set_layers(2);
  sc.set_platform(platform);
  for (const std::string& s : strategies) sc.add_strategies(s);
  sc.add_gpus(gpus);
  sc.set_micro_batch_size(1);
  sc.set_micro_batches(micro_batches);
  sc.set_seq_len(512);
  sc.set_flash_attention(true);
  sc.set_optimizer_bytes_per_param(12);
  return ResolveJob("engine_test.textproto", sc);
}

TEST(EngineDeterminism, JobIsIdenticalRunToRun) {
  // LLaMA-7B cut to 2 layers, two strategies, 16 GPUs of dgx_a100.
  absl::StatusOr<Job> job = TwoLayerJob({"zero3", "zero2"}, 16, 2);
  ASSERT_TRUE(job.ok()) << job.status();
  EngineOptions options;
  options.jobs = 2;
  absl::StatusOr<Results> a = SimulateJob(*job, options);
  absl::StatusOr<Results> b = SimulateJob(*job, options);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->rows_size(), 2);
  for (const ResultRow& row : a->rows()) {
    EXPECT_FALSE(row.oom()) << row.strategy();
    EXPECT_TRUE(row.has_step_time_s()) << row.strategy();
    EXPECT_GT(row.step_time_s(), 0) << row.strategy();
  }
  EXPECT_EQ(a->SerializeAsString(), b->SerializeAsString());
}

TEST(EngineRefusals, BadPointFailsBeforeAnyIsSimulated) {
  // The bad strategy comes last: it must be refused before the first point
  // is handed to the runner.
  absl::StatusOr<Job> job = TwoLayerJob({"zero3", "zero9"}, 16, 2);
  ASSERT_TRUE(job.ok()) << job.status();
  EngineOptions options;
  int runs = 0;
  options.run_tasks = [&runs](const std::vector<ChildTask>& tasks,
                              const IsolateOptions& isolate) {
    ++runs;
    return RunIsolated(tasks, isolate);
  };
  absl::StatusOr<Results> r = SimulateJob(*job, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(runs, 0);
  EXPECT_NE(r.status().message().find("engine_test.textproto: field "
                                      "strategies: \"zero9\" at 16 GPUs"),
            absl::string_view::npos)
      << r.status().message();
}

TEST(EngineRefusals, SharpOnAPlatformWithoutSharp) {
  absl::StatusOr<CollectiveResults> r = Sweep(
      Shipped("a800_lins"), ALL_REDUCE, SHARP, 16, 0, 1 << 20, 1 << 20, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("network.sharp"), absl::string_view::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("a800_lins"), absl::string_view::npos)
      << r.status().message();
}

// ---- f. the step: prefetch, interference, why
// --------------------------------

// One GPU per node on a 10 GB/s network, kernels at peak (1e15 FLOP/s),
// nothing in the way of HBM: every time below is in sight.
Platform StepPlatform() {
  Knobs k;
  k.gpus_per_node = 1;
  k.nics_per_node = 1;
  k.nic = 10e9;
  k.base = 20e-6;
  k.alpha_inter = 100e-6;
  Platform p = TestPlatform(k);
  p.mutable_gpu()->set_hbm_bytes_per_s(1e18);
  return p;
}

// A GEMM of `seconds` at peak on a 1e15 FLOP/s GPU: 1000 x 1000 x k.
Kernel GemmOf(double seconds) {
  Kernel g;
  g.set_name("gemm");
  g.mutable_gemm()->set_m(1000);
  g.mutable_gemm()->set_n(1000);
  g.mutable_gemm()->set_k(std::llround(seconds * 1e15 / 2e6));
  return g;
}

TEST(EngineStep, DeepSpeedBucketUnderABlockExposesEachGather) {
  // Three blocks of two modules, 1e7 parameters each, on 4 GPUs of 4 nodes.
  // Each module computes C = 1.6 ms forward (3.2 ms backward). Its
  // all-gather of 2e7 bytes is a ring over 4 GPUs: base 20 us + 3 steps x
  // 100 us + 3/4 x 2e7 B / 10e9 B/s = 1.82 ms = G.
  // DeepSpeed with a prefetch bucket of one element (under a block's 2e7)
  // prefetches one module at each hook; the host, with nothing to wait for,
  // issues them all at once, so they run back to back on the gather stream:
  // module k's gather ends at (k + 1) G. Its compute starts then (the one
  // before ended at k G + C, earlier): after the first, each module's
  // compute waits G - C = 0.22 ms, the part of its gather left exposed.
  constexpr int64_t kParams = 10'000'000;
  constexpr double C = 1.6e-3, G = 20e-6 + 3 * 100e-6 + 0.75 * 2e7 / 10e9;
  std::vector<Layer> layers;
  for (int i = 0; i < 3; ++i) {
    Layer layer;
    layer.name = absl::StrCat("block ", i);
    for (const char* name : {"a", "b"}) {
      Unit u;
      u.name = name;
      u.params = kParams;
      u.forward = {GemmOf(C)};
      u.backward = {GemmOf(2 * C)};
      layer.units.push_back(u);
      layer.params += kParams;
    }
    layers.push_back(layer);
  }
  const Mesh mesh{1, 4};
  absl::StatusOr<Strategy> st = ParseStrategy("zero3", mesh);
  ASSERT_TRUE(st.ok()) << st.status();
  Execution ex;
  ex.set_prefetch_bucket_elements(1);
  ex.set_max_live_elements(0);
  ex.set_persistence_threshold(0);
  ex.set_max_inflight_fetches(0);
  ex.set_fetch_overhead_s(0);
  ex.set_launch_overhead_s(0);
  ex.set_reduce_bucket_elements(int64_t{1} << 40);  // one reduction, last
  ex.set_sync_after_backward(false);
  ASSERT_TRUE(ResolveExecution(ex, 4096, &*st).ok());
  Scenario sc;
  sc.set_micro_batches(1);
  sc.set_micro_batch_size(1);
  sc.set_seq_len(1);
  sc.set_optimizer_bytes_per_param(12);
  absl::StatusOr<OwnedSchedule> s = LowerStep(layers, *st, mesh, sc);
  ASSERT_TRUE(s.ok()) << s.status();
  const Replayed r = Replay(**s, StepPlatform(), mesh);
  std::vector<std::pair<double, double>> forward;
  for (const Op& op : (*s)->ops()) {
    if (op.has_compute() && op.phase() == FORWARD)
      forward.push_back(r.ops[op.id()]);
  }
  ASSERT_EQ(forward.size(), 6u);
  EXPECT_NEAR(forward[0].first, G, 1e-9);
  for (size_t k = 1; k < forward.size(); ++k) {
    EXPECT_NEAR(forward[k].first - forward[k - 1].second, G - C, 1e-9) << k;
    EXPECT_NEAR(forward[k].second - forward[k].first, C, 1e-9) << k;
  }
}

// Two ops side by side: a compute op of `compute_s` on the compute stream
// and an all-gather of `bytes` on the reduce stream, no dependency.
Schedule SideBySide(std::vector<Kernel> kernels, int64_t bytes) {
  Schedule s;
  Op* c = s.add_ops();
  c->set_id(0);
  c->set_stream(COMPUTE);
  c->set_label("compute");
  c->mutable_compute()->set_kind("forward");
  c->mutable_compute()->set_kernel_list(0);
  KernelList* list = s.add_kernel_lists();
  for (Kernel& k : kernels) *list->add_kernels() = k;
  Op* g = s.add_ops();
  g->set_id(1);
  g->set_stream(REDUCE);
  g->set_label("AG P");
  CollectiveCall* call = g->mutable_collective();
  call->set_op(ALL_GATHER);
  *call->mutable_group() = MakeGroup(2, 1, 1, 1);  // fixed below per mesh
  call->set_bytes(bytes);
  call->set_algorithm(RING);
  call->set_tensor("P");
  return s;
}

// Tensor parallelism over the 2 one-GPU nodes of StepPlatform: each
// all-reduce inside a layer blocks the compute stream, the kernels after
// it waiting for it, and takes at least a ring all-reduce's bandwidth
// time, 2(n-1)/n x bytes over the 10 GB/s NIC (= bytes / 10 GB/s, n = 2).
TEST(EngineStep, TensorParallelAllReducesBlockTheComputeStream) {
  Model m;
  m.set_name("tp-test");
  m.set_layers(2);
  m.set_hidden(256);
  m.set_heads(4);
  m.set_ffn_hidden(1024);
  m.set_vocab(1024);
  m.set_mlp(Model::GELU);
  m.set_norm(Model::LAYERNORM);
  Batch batch;
  batch.micro_batch_size = 1;
  batch.seq_len = 64;
  batch.tp = 2;
  const Mesh mesh{1, 2};
  absl::StatusOr<Strategy> st = ParseStrategy("ddp", Mesh{1, 1});
  ASSERT_TRUE(st.ok()) << st.status();
  Scenario sc;
  sc.set_micro_batches(1);
  sc.set_micro_batch_size(1);
  sc.set_seq_len(64);
  sc.set_optimizer_bytes_per_param(12);
  sc.mutable_parallelism()->set_tp(2);
  ASSERT_TRUE(ResolveExecution(sc.execution(), 4096, &*st).ok());
  absl::StatusOr<OwnedSchedule> s =
      LowerStep(ModelLayers(m, batch), *st, mesh, sc);
  ASSERT_TRUE(s.ok()) << s.status();
  const Replayed r = Replay(**s, StepPlatform(), mesh);
  ASSERT_EQ(r.ops.size(), static_cast<size_t>((*s)->ops_size()));
  int collectives = 0;
  for (const Op& op : (*s)->ops()) {
    for (int d : op.deps()) {
      EXPECT_GE(r.ops[op.id()].first, r.ops[d].second - 1e-12) << op.label();
    }
    if (!op.has_collective()) continue;
    ++collectives;
    const double ring = op.collective().bytes() / 10e9;
    EXPECT_GE(r.ops[op.id()].second - r.ops[op.id()].first, ring) << op.label();
  }
  // Per block 2 forward and 2 backward; the embedding's 1; the head's 1
  // backward and the loss's 3.
  EXPECT_EQ(collectives, 2 * 4 + 1 + 4);
}

TEST(EngineStep, CollectivesSlowComputeByTheModelledShare) {
  // Two nodes of one GPU; the all-gather of 1.2e7 B takes 1/2 x 1.2e7 /
  // 10e9 + base 20 us + alpha 100 us = 0.72 ms. While it runs it holds 10
  // of 100 SMs: a compute-bound op runs at 1 / (1 + 2.0 x 10/100) of its
  // speed, a memory-bound one at 1 / (1 + 0.5 x 10/100).
  Platform p = StepPlatform();
  p.mutable_interference()->set_collective_sms(10);
  p.mutable_interference()->set_compute_slowdown(2.0);
  p.mutable_interference()->set_memory_slowdown(0.5);
  const double d = 0.5 * 1.2e7 / 10e9 + 20e-6 + 100e-6;
  const Mesh mesh{1, 2};
  // A 1 ms GEMM: 0.72 ms at 1/1.2 does 0.6 ms of its work; 0.4 ms remain:
  // it ends at 1.12 ms, 0.12 ms of it the slowdown.
  Schedule s = SideBySide({GemmOf(1e-3)}, 12'000'000);
  *s.mutable_ops(1)->mutable_collective()->mutable_group() =
      MakeGroup(1, 1, 2, 1);
  Replayed r = Replay(s, p, mesh);
  EXPECT_NEAR(r.ops[1].second, d, 1e-9);
  EXPECT_NEAR(r.ops[0].second, d + (1e-3 - d / 1.2), 1e-9);
  EXPECT_NEAR(r.breakdown.compute_s(), 1e-3, 1e-9);
  EXPECT_NEAR(r.breakdown.compute_slowdown_s(), d - d / 1.2, 1e-9);
  // A memory-bound op of 1 ms (2.7e-3 x ... bytes at HBM): slowed by 5%.
  Platform slow_hbm = p;
  slow_hbm.mutable_gpu()->set_hbm_bytes_per_s(1e12);
  Kernel m;
  m.mutable_memory()->set_vector_bytes(1'000'000'000);  // 1 ms at 1e12 B/s
  m.mutable_memory()->set_launches(1);
  s = SideBySide({m}, 12'000'000);
  *s.mutable_ops(1)->mutable_collective()->mutable_group() =
      MakeGroup(1, 1, 2, 1);
  r = Replay(s, slow_hbm, mesh);
  EXPECT_NEAR(r.ops[0].second, d + (1e-3 - d / 1.05), 1e-9);
}

TEST(EngineStep, NvlinkRunsSlowerWhileComputeRuns) {
  // Two GPUs of one node: an all-gather of 1.2e8 B moves 6e7 B each way
  // over NVSwitch ports of 100e9 B/s: 0.6 ms alone. Beside a 2 ms GEMM the
  // ports run at nvlink_under_compute = 0.5: 1.2 ms (+ 5 us alpha).
  Platform p = StepPlatform();
  Knobs k;
  k.gpus_per_node = 2;
  k.nics_per_node = 2;
  k.nvlink = 100e9;
  k.alpha_intra = 5e-6;
  p = TestPlatform(k);
  p.mutable_gpu()->set_hbm_bytes_per_s(1e18);
  p.mutable_interference()->set_nvlink_under_compute(0.5);
  Schedule s = SideBySide({GemmOf(2e-3)}, 120'000'000);
  const Replayed r = Replay(s, p, Mesh{2, 1});
  EXPECT_NEAR(r.ops[1].second, 0.6e-3 / 0.5 + 5e-6, 1e-9);
  EXPECT_NEAR(r.ops[0].second, 2e-3, 1e-9);  // no SMs held: unslowed
}

TEST(EngineStep, BreakdownAddsUpToTheStep) {
  // Every named strategy on 16 GPUs of dgx_a100, LLaMA-7B cut to 4 layers,
  // 2 micro-batches, data parallel, as a 2-stage pipeline (every
  // strategy, as a what-if where its framework refuses pipelines) and with
  // tp 2 x cp 2: the causes add up to the step, and the exposed collectives
  // and sends add up to the exposed communication charged to them.
  struct Dims {
    int pp, tp, cp;
  };
  for (const auto [pp, tp, cp] :
       {Dims{1, 1, 1}, Dims{2, 1, 1}, Dims{1, 2, 2}}) {
    Scenario sc;
    sc.set_name("why");
    *sc.mutable_model_def() = *BuiltinModel("llama-7b");
    sc.mutable_model_def()->set_layers(4);
    sc.set_platform("dgx_a100");
    // Those whose factors fit the dp x cp ranks of a node (8 / tp).
    for (const std::string& s : NamedStrategies()) {
      if (ParseStrategy(s, Mesh{8 / tp, 2}).ok()) sc.add_strategies(s);
    }
    sc.add_gpus(16);
    sc.set_micro_batch_size(2);
    sc.set_micro_batches(2);
    // tp x cp GPUs share a sequence: as many tokens a GPU.
    sc.set_seq_len(512 * tp * cp);
    sc.set_optimizer_bytes_per_param(12);
    sc.mutable_parallelism()->set_pp(pp);
    sc.mutable_parallelism()->set_tp(tp);
    sc.mutable_parallelism()->set_cp(cp);
    sc.set_flash_attention(cp > 1);
    sc.set_what_if(true);
    absl::StatusOr<Job> job = ResolveJob("engine_test.textproto", sc);
    ASSERT_TRUE(job.ok()) << job.status();
    absl::StatusOr<Results> r = SimulateJob(*job, EngineOptions());
    ASSERT_TRUE(r.ok()) << r.status();
    for (const ResultRow& row : r->rows()) {
      if (row.oom()) continue;
      SCOPED_TRACE(
          absl::StrCat(row.strategy(), " pp ", pp, " tp ", tp, " cp ", cp));
      const Breakdown& b = row.breakdown();
      const double parts = b.compute_s() + b.compute_slowdown_s() +
                           b.optimizer_s() + b.bandwidth_s() + b.latency_s() +
                           b.launch_overhead_s() + b.prefetch_wait_s() +
                           b.prefetch_depth_s() + b.pipeline_bubble_s() +
                           b.point_to_point_s() + b.tensor_parallel_s() +
                           b.context_parallel_s() + b.offload_s();
      EXPECT_NEAR(parts, row.step_time_s(), 1e-9 * row.step_time_s());
      double exposed = 0;
      for (const ExposedCollective& e : b.by_collective()) {
        exposed += e.seconds();
      }
      EXPECT_NEAR(exposed,
                  b.bandwidth_s() + b.latency_s() + b.prefetch_wait_s() +
                      b.prefetch_depth_s() + b.point_to_point_s() +
                      b.tensor_parallel_s() + b.context_parallel_s(),
                  1e-9 * row.step_time_s());
      EXPECT_GT(b.compute_s(), 0);
      // A pipeline's first stage waits for the last one's backward: a
      // bubble on the path whenever there are stages.
      EXPECT_EQ(b.pipeline_bubble_s() > 0, pp > 1);
      // Tensor parallelism's collectives, and context parallelism's
      // reduce-scatter, block the compute stream: on the path whenever
      // there is tp or cp.
      EXPECT_EQ(b.tensor_parallel_s() > 0, tp > 1);
      EXPECT_EQ(b.context_parallel_s() > 0, cp > 1);
    }
  }
}

}  // namespace
}  // namespace shardsim

namespace shardsim {
namespace {

// A platform that escaped validation (every protocol's latency infinite):
// protocol selection is an error naming the platform, not a null protocol.
TEST(EngineProtocol, NoFiniteEstimateIsAnErrorNotACrash) {
  Platform p = TestPlatform(Knobs{});
  for (Protocol& proto : *p.mutable_protocols()) {
    proto.set_base_latency_s(std::numeric_limits<double>::infinity());
  }
  auto task = [&]() -> absl::StatusOr<std::string> {
    StartSimGrid();
    const Mesh mesh{8, 2};
    absl::StatusOr<std::unique_ptr<Fabric>> fabric = Fabric::Build(p, mesh);
    if (!fabric.ok()) return fabric.status();
    CollectiveEngine engine(**fabric, FlowMode::kFast, 1);
    CollectiveCall call;
    call.set_op(ALL_GATHER);
    call.set_algorithm(RING);
    call.set_bytes(1 << 20);
    *call.mutable_group() = GlobalGroup(mesh);
    absl::Status s = engine.Prepare(call);
    if (s.ok()) return std::string("prepared");
    return s;
  };
  absl::StatusOr<std::string> r = RunIsolated({task}, 1)[0];
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(
                "platform test: no wire protocol gives a finite time for "
                "ALL_GATHER of 1048576 bytes"),
            std::string::npos)
      << r.status();
}

// Replaces `p`'s protocols by A, all of the wire payload, and B, 90%, with
// `a` and `b` seconds a step over NVSwitch and the network, no base.
void ProtocolsAB(Platform* p, double a, double b) {
  p->clear_protocols();
  for (const auto& [name, alpha, fraction] :
       std::vector<std::tuple<std::string, double, double>>{{"A", a, 1.0},
                                                            {"B", b, 0.9}}) {
    Protocol* proto = p->add_protocols();
    proto->set_name(name);
    proto->set_intra_alpha_s(alpha);
    proto->set_inter_alpha_s(alpha);
    proto->set_bandwidth_fraction(fraction);
  }
}

// The wire protocol is chosen on the rates the engine runs at: two GPUs
// share each NIC of 10e9 B/s. A ring all-gather of 1e8 B over the
// inter-node groups of 2 nodes of 2 GPUs: each hop carries 5e7 B in one
// step, and both GPUs of a node send theirs through its NIC at once, 1e8 B.
// Protocol A: all of the wire is payload, 0.9 ms a network step; B: 90%,
// 0.1 ms. The NIC takes A 1e8 / 10e9 + 0.9 ms = 10.9 ms, B 1e8 / 9e9 +
// 0.1 ms = 11.21 ms: A. Taken one hop at a NIC's full rate, B looked
// faster (5.66 against 5.9 ms) and the call ran 11.21 ms.
TEST(EngineProtocol, ChosenOnTheRatesTheEngineRuns) {
  Knobs k;
  k.gpus_per_node = 2;
  k.nics_per_node = 1;
  Platform p = TestPlatform(k);
  ProtocolsAB(&p, 0.9e-3, 0.1e-3);
  const Mesh mesh{2, 2};
  absl::StatusOr<double> t =
      CallAlone(p, mesh, Call(ALL_GATHER, RING, 100'000'000, InterGroup(mesh)));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(*t, 10.9e-3, 1e-9);
}

// And on the up-links of an oversubscribed leaf. The ring all-gather of
// AnUplinkCarriesItsShareOfTheLeaf at 4:1: 3e8 B over hops 1 -> 2 and
// 3 -> 0 on up-links of 5e9 B/s, 3 steps. Protocol A: all payload, 2.1 ms
// a step, 60 + 6.3 = 66.3 ms; B: 90%, 0.1 ms, 66.67 + 0.3 = 66.97 ms: A.
// At a NIC's 10e9 B/s B looked faster (33.63 against 36.3 ms).
TEST(EngineProtocol, ChosenOnTheUplinksTheEngineRuns) {
  Platform p = FourNodes();
  p.mutable_network()->set_nics_per_leaf(2);
  p.mutable_network()->set_oversubscription(4);
  ProtocolsAB(&p, 2.1e-3, 0.1e-3);
  const Mesh mesh{1, 4};
  absl::StatusOr<double> t = CallAlone(
      p, mesh, Call(ALL_GATHER, RING, 400'000'000, GlobalGroup(mesh)));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(*t, 66.3e-3, 1e-9);
}

// a800_lins with its NVSwitch twice as fast, 400e9 B/s: a ring all-gather
// of 430 MB over 32 GPUs ran with LL128 in 4811 us, slower than with the
// shipped NVSwitch (Simple, 4690.9 us), because the estimate took each
// network hop at a whole NIC, where two GPUs share each.
TEST(EngineProtocol, AFasterNvSwitchIsNeverSlower) {
  Platform fast = Shipped("a800_lins");
  fast.mutable_nvswitch()->set_bandwidth(400e9);
  absl::StatusOr<CollectiveResults> shipped =
      Sweep(Shipped("a800_lins"), ALL_GATHER, RING, 32, 8, 430'000'000,
            430'000'000, 2);
  absl::StatusOr<CollectiveResults> faster =
      Sweep(fast, ALL_GATHER, RING, 32, 8, 430'000'000, 430'000'000, 2);
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  ASSERT_TRUE(faster.ok()) << faster.status();
  EXPECT_EQ(faster->rows(0).protocol(), "Simple");
  EXPECT_LE(faster->rows(0).time_us(), shipped->rows(0).time_us());
}

// The other way: cloud_a100 with its NICs twice as fast ran a ring
// all-gather of 1,679,616 B over 16 GPUs with LL in 100.3 us, against
// LL128's 100.0 us at the shipped rate: the estimate missed that a
// node's 8 NICs share 4 up-links.
TEST(EngineProtocol, AFasterNicIsNeverSlower) {
  Platform fast = Shipped("cloud_a100");
  fast.mutable_network()->set_nic_bandwidth(2 * fast.network().nic_bandwidth());
  absl::StatusOr<CollectiveResults> shipped = Sweep(
      Shipped("cloud_a100"), ALL_GATHER, RING, 16, 0, 1'679'616, 1'679'616, 2);
  absl::StatusOr<CollectiveResults> faster =
      Sweep(fast, ALL_GATHER, RING, 16, 0, 1'679'616, 1'679'616, 2);
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  ASSERT_TRUE(faster.ok()) << faster.status();
  EXPECT_LE(faster->rows(0).time_us(), shipped->rows(0).time_us());
}

// A tree all-gather of 4 B over the inter-node group of 2 nodes of 2 GPUs,
// one NIC per node. Each of the two trees has one edge: its root sends its
// child the half the child lacks, 2 B, at step 1 (step 0 moves nothing, a
// leaf's own chunk lying in the other tree's half). The stage runs as its
// hops, and its floor's one step is the NIC's load: 4 B, both GPUs of the
// node sending as that member of their own groups, where one member sends
// 2 B.
TEST(EngineTree, OnTwoNodesItSendsHalfTheRingsNetworkBytes) {
  // NCCL's tree on two nodes (connect.cc): a chain in each node, one edge
  // between them per channel and tree. Each node sends the whole buffer S
  // out over its NICs (each tree's half up or down), where a ring over 16
  // GPUs sends 2 x 15/16 x S: so the tree is faster than the ring on two
  // DGX A100s (NVIDIA/nccl#946: "up to ~2x the network speed"), and no
  // faster than S over the node's NICs at their reachable rate. On eight
  // nodes each inner node's NICs carry more than on two, and the tree is
  // no longer ahead by much.
  const Platform p = Shipped("dgx_a100");
  const double gib = 1 << 30;
  const double nics = p.network().nics_per_node() *
                      p.network().nic_bandwidth() *
                      p.efficiency().network_fraction();
  for (int gpus : {16, 64}) {
    SCOPED_TRACE(gpus);
    absl::StatusOr<CollectiveResults> tree =
        Sweep(p, ALL_REDUCE, TREE, gpus, 0, gib, gib, 2);
    absl::StatusOr<CollectiveResults> ring =
        Sweep(p, ALL_REDUCE, RING, gpus, 0, gib, gib, 2);
    ASSERT_TRUE(tree.ok() && ring.ok());
    const double t_tree = Seconds(tree->rows(0));
    const double t_ring = Seconds(ring->rows(0));
    EXPECT_GE(t_tree, gib / nics);
    if (gpus == 16) {
      EXPECT_LT(t_tree, t_ring);
    } else {
      EXPECT_GT(t_tree, 0.8 * t_ring);
    }
  }
}

TEST(EngineFloor, ATreeStepLoadsItsNicWithEveryGpuOnIt) {
  Knobs k;
  k.gpus_per_node = 2;
  k.nics_per_node = 1;
  const Platform p = TestPlatform(k);
  const Mesh mesh{2, 2};
  absl::StatusOr<std::string> r =
      OnFabric(p, mesh, [&](Fabric& f) -> absl::StatusOr<std::string> {
        CollectiveEngine engine(f, FlowMode::kFast, 1);
        const CollectiveCall call = Call(ALL_GATHER, TREE, 4, InterGroup(mesh));
        if (absl::Status s = engine.Prepare(call); !s.ok()) return s;
        std::string out;
        for (const Stage& stage : engine.summary(call).stages) {
          for (const StepLoad& step : stage.steps) {
            absl::StrAppend(&out, step.intra, " ", step.inter, " ",
                            step.via_switch, "; ");
          }
          absl::StrAppend(&out, stage.by_step.size(), " by step");
        }
        return out;
      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "0 4 0; 0 by step");
}

// Runs the simulation to its end; then the four times `t` it filled and
// `engine`'s replay counts: recorded, replayed, disturbed.
std::string RunThenReport(const CollectiveEngine& engine,
                          const std::vector<double>& t) {
  sg4::Engine::get_instance()->run();
  const CollectiveEngine::ReplayCounts c = engine.replay_counts();
  return absl::StrFormat("%.17g %.17g %.17g %.17g %d %d %d", t[0], t[1], t[2],
                         t[3], c.recorded, c.replayed, c.disturbed);
}

// ---- g. a lone inter-node stage replayed, and disturbed ---------------------

// An all-gather of S = 4e8 B (`algorithm`) over 4 nodes of one GPU and one
// NIC of 10e9 B/s, run three times in a row (X), with or without replays;
// an identical call B starts `offset` into the third run. The four runs'
// times, then the replays' counts: recorded, replayed, disturbed.
absl::StatusOr<std::vector<double>> ThirdRunDisturbed(Algorithm algorithm,
                                                      bool replay,
                                                      double offset) {
  Knobs k;
  k.gpus_per_node = 1;
  k.nics_per_node = 1;
  const Platform p = TestPlatform(k);
  const Mesh mesh{1, 4};
  absl::StatusOr<std::string> r =
      OnFabric(p, mesh, [&](Fabric& f) -> absl::StatusOr<std::string> {
        CollectiveEngine engine(f, FlowMode::kFast, 1);
        engine.set_replay_stages(replay);
        const CollectiveCall call =
            Call(ALL_GATHER, algorithm, 400'000'000, GlobalGroup(mesh));
        if (absl::Status s = engine.Prepare(call); !s.ok()) return s;
        std::vector<double> t(4);
        auto timed = [&](double* out) {
          const double start = sg4::Engine::get_clock();
          engine.Run(call);
          *out = sg4::Engine::get_clock() - start;
        };
        sg4::Actor::create("x", f.gpu(0), [&] {
          timed(&t[0]);
          timed(&t[1]);
          const double third = sg4::Engine::get_clock();
          sg4::Actor::create("b", f.gpu(0), [&, third] {
            sg4::this_actor::sleep_until(third + offset);
            timed(&t[3]);
          });
          timed(&t[2]);
        });
        return RunThenReport(engine, t);
      });
  if (!r.ok()) return r.status();
  return ParseDoubles(*r);
}

// A ring all-gather of S = 4e8 B over 4 nodes of one GPU and one NIC of
// 10e9 B/s: every hop's flow carries 3S/4 = 3e8 B over its own NIC pair,
// 30 ms, then 3 x 20 us of alpha: 30.06 ms, base 0. Run 1 is recorded, run 2
// replays it. Run 3 is replayed until a second identical call B starts 10 ms
// into it: X's flows then have 2e8 B left and share every up-link with B's
// at 5e9 B/s, so X's end after 40 ms more (50 ms in all); B's have moved
// 2e8 by then and take their last 1e8 alone, 10 ms: 50 ms too. Both calls
// take 50.06 ms, with the replays and without.
TEST(EngineLoneStages, ReplayedAndDisturbedAsIfRun) {
  for (bool replay : {true, false}) {
    SCOPED_TRACE(replay ? "replays" : "no replays");
    absl::StatusOr<std::vector<double>> r =
        ThirdRunDisturbed(RING, replay, 0.010);
    ASSERT_TRUE(r.ok()) << r.status();
    const std::vector<double>& v = *r;
    ASSERT_EQ(v.size(), 7u);
    EXPECT_NEAR(v[0], 0.03006, 1e-9);
    EXPECT_NEAR(v[1], 0.03006, 1e-9);
    EXPECT_NEAR(v[2], 0.05006, 1e-9);
    EXPECT_NEAR(v[3], 0.05006, 1e-9);
    // Recorded once (run 1), replayed twice (runs 2 and 3), run 3 disturbed.
    EXPECT_EQ(v[4], replay ? 1 : 0);
    EXPECT_EQ(v[5], replay ? 2 : 0);
    EXPECT_EQ(v[6], replay ? 1 : 0);
  }
}

// An all-gather of S = 4e8 B (ring) over `group` (of `program`, with
// `programs`; none: one program) on one node of `gpus` GPUs, 100e9 B/s
// ports, 5 us per step, run three times in a row, with or without replays;
// `disturb` starts 1 ms into the third run and returns seconds of its own
// (or 0). The three runs' times, the disturber's, then the replays'
// counts: recorded, replayed, disturbed.
absl::StatusOr<std::vector<double>> ThirdNvswitchRunDisturbed(
    int gpus, bool replay, std::vector<std::vector<int>> programs,
    const Group& group, int program,
    const std::function<double(CollectiveEngine&)>& disturb) {
  Knobs k;
  k.gpus_per_node = gpus;
  k.nics_per_node = 1;
  const Platform p = TestPlatform(k);
  const Mesh mesh{gpus, 1};
  absl::StatusOr<std::string> r =
      OnFabric(p, mesh, [&](Fabric& f) -> absl::StatusOr<std::string> {
        CollectiveEngine engine(f, FlowMode::kFast, 1);
        engine.set_replay_stages(replay);
        if (!programs.empty()) engine.SetPrograms(programs);
        const CollectiveCall call = Call(ALL_GATHER, RING, 400'000'000, group);
        if (absl::Status s = engine.Prepare(call, program); !s.ok()) return s;
        engine.UseSymmetry();
        std::vector<double> t(4);
        sg4::Actor::create("x", f.gpu(gpus - 1), [&] {
          for (int run = 0; run < 3; ++run) {
            const double start = sg4::Engine::get_clock();
            if (run == 2) {
              sg4::Actor::create("disturb", f.gpu(0), [&, start] {
                sg4::this_actor::sleep_until(start + 1e-3);
                t[3] = disturb(engine);
              });
            }
            engine.Run(call, nullptr, program);
            t[run] = sg4::Engine::get_clock() - start;
          }
        });
        return RunThenReport(engine, t);
      });
  if (!r.ok()) return r.status();
  return ParseDoubles(*r);
}

// ThirdNvswitchRunDisturbed's answer where the disturbance leaves the
// third run 3.005 ms long (runs 1 and 2: 2.005 ms): one record, two
// replays, the second disturbed; none without replays.
void ExpectThirdRunAt3005us(const std::vector<double>& v, bool replay) {
  ASSERT_EQ(v.size(), 7u);
  EXPECT_NEAR(v[0], 2.005e-3, 1e-9);
  EXPECT_NEAR(v[1], 2.005e-3, 1e-9);
  EXPECT_NEAR(v[2], 3.005e-3, 1e-9);
  EXPECT_EQ(v[4], replay ? 1 : 0);
  EXPECT_EQ(v[5], replay ? 2 : 0);
  EXPECT_EQ(v[6], replay ? 1 : 0);
}

// NVSwitch stages are replayed too, and a change of the ports' speed
// disturbs a replay as flows would. A ring all-gather of S = 4e8 B over
// the 2 GPUs of one node: 2e8 B each way, 2 ms, then 5 us of alpha. Run 1
// is recorded, run 2 replays it; compute slows the ports to half 1 ms
// into run 3: the last 1e8 B take 2 ms, 3.005 ms in all.
TEST(EngineLoneStages, NvswitchReplayDisturbedByComputeAsIfRun) {
  for (bool replay : {true, false}) {
    SCOPED_TRACE(replay ? "replays" : "no replays");
    absl::StatusOr<std::vector<double>> r = ThirdNvswitchRunDisturbed(
        2, replay, {}, GlobalGroup(Mesh{2, 1}), 0, [](CollectiveEngine& e) {
          e.SetNvlinkScale(0.5);
          return 0.0;
        });
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectThirdRunAt3005us(*r, replay);
  }
}

// With several programs a send disturbs the replays of the ports it
// reaches. One node of 4 GPUs: program 0 is GPUs 0, 1 and program 1 GPUs
// 2, 3, whose pair runs the all-gather (ThirdNvswitchRunDisturbed: 2.005
// ms alone). 1 ms into run 3, program 0 sends 1e8 B from GPU 0 to 2 and
// from 1 to 3: each send shares a receiving port with a ring flow that has
// 1e8 B left, at 50e9 B/s each, so both end 2 ms later. The ring takes
// 3.005 ms, the send 2.005 ms (no base latency), with replays and without;
// a replay the send did not disturb would end the ring at 2.005 ms and the
// send at 1.005.
TEST(EngineLoneStages, ASendDisturbsTheReplayOfItsPeersPorts) {
  Group pair;
  pair.set_intra_size(2);
  pair.set_intra_stride(1);
  pair.set_inter_size(1);
  pair.set_inter_stride(1);
  PointToPoint send;
  send.set_bytes(100'000'000);
  send.set_peer_program(1);
  for (bool replay : {true, false}) {
    SCOPED_TRACE(replay ? "replays" : "no replays");
    absl::StatusOr<std::vector<double>> r = ThirdNvswitchRunDisturbed(
        4, replay, {{0, 1}, {2, 3}}, pair, 1, [&](CollectiveEngine& e) {
          return e.RunSend(send, {0, 1}, {2, 3}).seconds;
        });
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectThirdRunAt3005us(*r, replay);
    EXPECT_NEAR((*r)[3], 2.005e-3, 1e-9);  // the send
  }
}

// A direct all-gather (ThirdRunDisturbed): 3 steps, in step t member m
// sends its 1e8 B to m + t, each flow alone on its NIC pair: 10 ms, then
// 20 us of alpha, 30.06 ms in all. Run 1 records the 3 steps, run 2
// replays them as one chain.
//
// B starts 15 ms into X, in X's step 2 (m to m + 2, from 10.02 ms), which
// has 5.02e7 B left. B's step 1 (m to m + 1) shares each of X's up-links
// and down-links: 5e9 B/s each. X's flows end at 25.04 ms; B, alone 20 us
// (2e5 B), has 4.96e7 B left when X's step 3 (m to m + 3) starts at 25.06;
// B's flows end at 34.98, X alone 20 us, B's step 2 from 35.00: X's last
// 5.02e7 B end at 45.04, 45.06 ms with the alpha. B's step 2 has moved
// 5.02e7 B by then and ends alone at 50.02; its step 3, alone, at 60.06:
// 45.06 ms. Replays: X's steps 1 and 2 (disturbed) and B's step 3 alone.
TEST(EngineLoneStages, AChainDisturbedInAStepRunsOnAsIfRun) {
  for (bool replay : {true, false}) {
    SCOPED_TRACE(replay ? "replays" : "no replays");
    absl::StatusOr<std::vector<double>> v =
        ThirdRunDisturbed(DIRECT, replay, 0.015);
    ASSERT_TRUE(v.ok()) << v.status();
    ASSERT_EQ(v->size(), 7u);
    EXPECT_NEAR((*v)[0], 0.03006, 1e-9);
    EXPECT_NEAR((*v)[1], 0.03006, 1e-9);
    EXPECT_NEAR((*v)[2], 0.04506, 1e-9);
    EXPECT_NEAR((*v)[3], 0.04506, 1e-9);
    EXPECT_EQ((*v)[4], replay ? 3 : 0);
    EXPECT_EQ((*v)[5], replay ? 3 + 2 + 1 : 0);
    EXPECT_EQ((*v)[6], replay ? 1 : 0);
  }
}

// B starts 10.01 ms into X, in the alpha after X's first step, when the
// tree is idle: B alone at 10e9 B/s until X's step 2 starts at 10.02 ms
// (1e5 B). Then they share, 5e9 B/s each: B's flows end at 30.00 with
// X's 1e5 B left, which end alone at 30.01; X's step 3 from 30.03. B's
// step 2 from 30.02 is alone 10 us (1e5 B), then shares with X's step 3:
// B's ends at 50.01, X's last 1e5 B alone at 50.02, 50.04 ms with the
// alpha. B's step 3 from 50.03, alone: 60.05, 50.04 ms after its start.
// Replays: X's step 1 (its chain cut in the alpha), B's steps 1 and 2
// (each disturbed by X's next step) and 3 (alone).
TEST(EngineLoneStages, AChainCutBetweenStepsLeavesTheTreeIdle) {
  for (bool replay : {true, false}) {
    SCOPED_TRACE(replay ? "replays" : "no replays");
    absl::StatusOr<std::vector<double>> v =
        ThirdRunDisturbed(DIRECT, replay, 0.01001);
    ASSERT_TRUE(v.ok()) << v.status();
    ASSERT_EQ(v->size(), 7u);
    EXPECT_NEAR((*v)[2], 0.05004, 1e-9);
    EXPECT_NEAR((*v)[3], 0.05004, 1e-9);
    EXPECT_EQ((*v)[4], replay ? 3 : 0);
    EXPECT_EQ((*v)[5], replay ? 3 + 1 + 3 : 0);
    EXPECT_EQ((*v)[6], replay ? 2 : 0);
  }
}

// SimGrid's time resolution: it ends every action due within
// surf/precision (1e-9 s by default, src/kernel/lmm/System.cpp in 3.32) of
// the current event with it. So two runs that differ in flows that do not
// change the outcome (a replay's, a twin's) can differ by that much where
// one has an event the other lacks.
constexpr double kSimGridResolutionS = 1e-9;

// Two simulations of one job that must agree: the same rows, each timed
// one's step to 1e-9 of it (or to SimGrid's resolution, for short steps),
// and its breakdown cause by cause and collective by collective.
void ExpectSameSteps(const Results& a, const Results& b,
                     const std::string& where) {
  ASSERT_EQ(a.rows_size(), b.rows_size());
  for (int i = 0; i < a.rows_size(); ++i) {
    const ResultRow& x = a.rows(i);
    const ResultRow& y = b.rows(i);
    SCOPED_TRACE(absl::StrCat(x.strategy(), " ", where));
    ASSERT_EQ(x.has_step_time_s(), y.has_step_time_s());
    if (!y.has_step_time_s()) continue;  // out of memory
    const double tol = std::max(1e-9 * y.step_time_s(), kSimGridResolutionS);
    EXPECT_NEAR(x.step_time_s(), y.step_time_s(), tol);
    const Breakdown& p = x.breakdown();
    const Breakdown& q = y.breakdown();
    EXPECT_NEAR(p.compute_slowdown_s(), q.compute_slowdown_s(), tol);
    EXPECT_NEAR(p.bandwidth_s(), q.bandwidth_s(), tol);
    EXPECT_NEAR(p.latency_s(), q.latency_s(), tol);
    EXPECT_NEAR(p.prefetch_wait_s(), q.prefetch_wait_s(), tol);
    ASSERT_EQ(p.by_collective_size(), q.by_collective_size());
    for (int c = 0; c < q.by_collective_size(); ++c) {
      EXPECT_EQ(p.by_collective(c).collective(),
                q.by_collective(c).collective());
      EXPECT_NEAR(p.by_collective(c).seconds(), q.by_collective(c).seconds(),
                  tol);
    }
  }
}

// A job simulated with the default engine options, and again with the
// option `off` points at turned off.
struct TwoRuns {
  Results with;
  Results without;
};
absl::StatusOr<TwoRuns> WithAndWithout(const Job& job,
                                       bool EngineOptions::*off) {
  EngineOptions options;
  absl::StatusOr<Results> with = SimulateJob(job, options);
  if (!with.ok()) return with.status();
  options.*off = false;
  absl::StatusOr<Results> without = SimulateJob(job, options);
  if (!without.ok()) return without.status();
  return TwoRuns{*std::move(with), *std::move(without)};
}

// Whole steps, replays against none: every named strategy at 64 GPUs and
// ZeRO++ (qgZ's inter-node all-to-all) at 256, LLaMA-7B cut to 2 layers,
// 3 micro-batches on dgx_a100. The same step to 1e-9 and the same breakdown.
TEST(EngineLoneStages, StepsAreTheSameWithoutReplays) {
  for (int gpus : {64, 256}) {
    absl::StatusOr<Job> job = TwoLayerJob(
        gpus == 64 ? NamedStrategies() : std::vector<std::string>{"zeropp"},
        gpus, 3);
    ASSERT_TRUE(job.ok()) << job.status();
    absl::StatusOr<TwoRuns> r =
        WithAndWithout(*job, &EngineOptions::replay_stages);
    ASSERT_TRUE(r.ok()) << r.status();
    const Results& with = r->with;
    const Results& without = r->without;
    ExpectSameSteps(with, without, absl::StrCat("at ", gpus, " GPUs"));
    int64_t replayed = 0;
    for (int i = 0; i < with.rows_size(); ++i) {
      const ResultRow& a = with.rows(i);
      SCOPED_TRACE(absl::StrCat(a.strategy(), " at ", gpus, " GPUs"));
      ASSERT_TRUE(a.has_step_time_s());
      EXPECT_EQ(without.rows(i).replay().stages_replayed(), 0);
      replayed += a.replay().stages_replayed();
      if (a.strategy() == "zeropp") {
        EXPECT_GT(a.replay().stages_replayed(), 0);
      }
    }
    EXPECT_GT(replayed, 0);
  }
}

// Several programs: each program's NVSwitch ports are a domain of their
// own. LLaMA-7B cut to 4 layers, tp 2 x pp 2 x dp 4 at 16 GPUs of
// dgx_a100, 4 micro-batches: with Megatron's order each stage is a node
// (sends cross the fat tree, the data-parallel reductions stay in a node);
// with pp inside the tp pair's node ("tp-pp-dp") the stages share every
// node (sends cross NVSwitch ports of two programs, the reductions cross
// the tree). The same steps with replays and without.
TEST(EngineLoneStages, PipelineStepsAreTheSameWithoutReplays) {
  for (const std::string order : {"tp-cp-dp-pp", "tp-pp-cp-dp"}) {
    absl::StatusOr<Job> job = TwoLayerJob({"zero1", "ddp", "zero3"}, 16, 4);
    ASSERT_TRUE(job.ok()) << job.status();
    job->scenario.mutable_model_def()->set_layers(4);
    job->scenario.set_what_if(true);  // ZeRO-3's gathers beside the sends
    Parallelism* par = job->scenario.mutable_parallelism();
    par->set_tp(2);
    par->set_pp(2);
    par->set_sequence_parallel(true);
    par->set_order(order);
    // Stage 0 runs ahead (1 block against 3): its sends reach stage 1
    // while stage 1's collectives run.
    par->add_stage_layers(1);
    par->add_stage_layers(3);
    par->set_pipeline_schedule(GPIPE);
    job = ResolveJob("engine_test.textproto", job->scenario);
    ASSERT_TRUE(job.ok()) << job.status();
    absl::StatusOr<TwoRuns> r =
        WithAndWithout(*job, &EngineOptions::replay_stages);
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectSameSteps(r->with, r->without, order);
    for (int i = 0; i < r->with.rows_size(); ++i) {
      SCOPED_TRACE(absl::StrCat(r->with.rows(i).strategy(), " ", order));
      EXPECT_EQ(r->without.rows(i).replay().stages_replayed(), 0);
      EXPECT_GT(r->with.rows(i).replay().stages_replayed(), 0);
    }
  }
}

// Network symmetry (collective_engine.h, UseSymmetry): four nodes of one
// GPU and one 10 GB/s NIC each, 20 us a network step, nothing else.
struct SymmetryRun {
  std::vector<int> periods;  // NetworkPeriod() of each engine, in turn
  double seconds = 0;        // the last engine's call, run with UseSymmetry
  int network_nodes = 0;
};

// One engine per list of calls, each prepared; the last list's last call
// is then run.
absl::StatusOr<SymmetryRun> RunSymmetry(
    const Platform& p, const std::vector<std::vector<CollectiveCall>>& sets) {
  absl::StatusOr<std::string> r =
      OnFabric(p, Mesh{1, 4}, [&](Fabric& f) -> absl::StatusOr<std::string> {
        std::string out;
        std::vector<std::unique_ptr<CollectiveEngine>> engines;
        for (const std::vector<CollectiveCall>& calls : sets) {
          engines.push_back(
              std::make_unique<CollectiveEngine>(f, FlowMode::kFast, 1));
          for (const CollectiveCall& c : calls) {
            if (absl::Status s = engines.back()->Prepare(c); !s.ok()) return s;
          }
          absl::StrAppend(&out, engines.back()->NetworkPeriod(), " ");
        }
        CollectiveEngine& last = *engines.back();
        last.UseSymmetry();
        double seconds = 0;
        sg4::Actor::create("x", f.gpu(0), [&] {
          seconds = last.Run(sets.back().back()).seconds;
        });
        sg4::Engine::get_instance()->run();
        return absl::StrFormat("%s%.17g %d", out, seconds,
                               last.network_nodes());
      });
  if (!r.ok()) return r.status();
  const std::vector<double> v = ParseDoubles(*r);
  SymmetryRun out;
  for (size_t i = 0; i + 2 < v.size(); ++i) {
    out.periods.push_back(static_cast<int>(v[i]));
  }
  out.seconds = v[v.size() - 2];
  out.network_nodes = static_cast<int>(v.back());
  return out;
}

// The least shift, in nodes, under which each set of flows is itself:
//  - a ring all-gather of 4e8 B over the 4 nodes: hops n -> n+1 (mod 4),
//    3e8 B each: 1 node;
//  - with a ring over pairs of nodes too: hops 0 -> 1 -> 0, 2 -> 3 -> 2,
//    which shifted by one node would be 1 -> 2: 2 nodes;
//  - a ring all-gather of 6 B: chunks 2, 2, 1, 1, and the hop into member
//    m carries all but m's, 4, 4, 5, 5 B: no shift short of 4;
//  - a ring broadcast from member 0: the chain 0 -> 1 -> 2 -> 3, never
//    back to 0: none.
// The 4e8 B ring then runs on one node's NIC halves: its hop carries 3e8 B
// at 10e9 B/s, 30 ms, and 3 steps of 20 us: 30.06 ms, as on all four.
TEST(EngineNetworkSymmetry, TheLeastShiftThatLeavesTheFlowsAlone) {
  const Mesh mesh{1, 4};
  const Group all = GlobalGroup(mesh);
  const Group pairs = MakeGroup(1, 1, 2, 1);
  const CollectiveCall ring = Call(ALL_GATHER, RING, 400'000'000, all);
  absl::StatusOr<SymmetryRun> r = RunSymmetry(
      FourNodes(), {{Call(ALL_GATHER, RING, 6, all)},
                    {Call(BROADCAST, RING, 400'000'000, all)},
                    {ring, Call(ALL_GATHER, RING, 400'000'000, pairs)},
                    {ring}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->periods, (std::vector<int>{4, 4, 2, 1}));
  EXPECT_NEAR(r->seconds, 0.03006, 1e-9);
  EXPECT_EQ(r->network_nodes, 1);
}

// Leaves of two NICs with one up-link each (oversubscription 2): nodes 0
// and 1 on one leaf, 2 and 3 on the other. A direct all-gather of 4e8 B
// shifts its members by t in step t, the same flows shifted by any node:
// but in step 2, 0 -> 2 and 1 -> 3 share leaf 0's up-link (and 2 -> 0,
// 3 -> 1 leaf 1's), two senders and two receivers on one link, which may
// then limit them. So every node runs: steps 1 and 3 move a 1e8 B chunk
// per flow alone, 10 ms each; step 2 two per up-link at 5e9 B/s, 20 ms;
// with 3 x 20 us, 40.06 ms (one node's NIC halves would say 30.06). A
// ring's up-links carry one flow each (1 -> 2, 3 -> 0): one node runs.
TEST(EngineNetworkSymmetry, ALinkTwoSendersShareKeepsEveryNode) {
  Platform p = FourNodes();
  p.mutable_network()->set_nics_per_leaf(2);
  p.mutable_network()->set_oversubscription(2);
  const Group all = GlobalGroup(Mesh{1, 4});
  absl::StatusOr<SymmetryRun> r =
      RunSymmetry(p, {{Call(ALL_GATHER, RING, 400'000'000, all)},
                      {Call(ALL_GATHER, DIRECT, 400'000'000, all)}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->periods, (std::vector<int>{1, 4}));
  EXPECT_NEAR(r->seconds, 0.04006, 1e-9);
  EXPECT_EQ(r->network_nodes, 4);
}

// A leaf's up-links carry nics_per_leaf / oversubscription NICs' worth,
// whatever the ratio. Leaves of two NICs, static routing: nodes 0 and 1 on
// one leaf, 2 and 3 on the other. A ring all-gather of 4e8 B over the 4
// nodes sends 3e8 B over each hop n -> n + 1 in 3 steps of 20 us; hops
// 1 -> 2 and 3 -> 0 cross the leaves, one flow each way on each leaf's
// up-link. At 2:1 the leaf has one up-link of a NIC, 10e9 B/s: 30 ms +
// 60 us. At 4:1, half an up-link's worth: one up-link at 5e9 B/s, 60.06 ms
// (it ran as 2:1 when the count was floored to one up-link). At 3:1, two
// thirds: 45.06 ms.
TEST(EngineFabric, AnUplinkCarriesItsShareOfTheLeaf) {
  const Group all = GlobalGroup(Mesh{1, 4});
  const CollectiveCall ring = Call(ALL_GATHER, RING, 400'000'000, all);
  for (const auto& [ratio, want] : std::vector<std::pair<double, double>>{
           {2, 30.06e-3}, {3, 45.06e-3}, {4, 60.06e-3}}) {
    Platform p = FourNodes();
    p.mutable_network()->set_nics_per_leaf(2);
    p.mutable_network()->set_oversubscription(ratio);
    absl::StatusOr<double> t = CallAlone(p, Mesh{1, 4}, ring);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_NEAR(*t, want, 1e-9) << "at " << ratio << ":1";
  }
}

// A job on part of a leaf has the leaf's up-links, not a share of them by
// its own NICs. Two nodes of 2 GPUs and 2 NICs, rail-optimised, leaves of
// 4 ports at 2:1: each rail's leaf holds its NIC of both nodes (2 of its 4
// ports) and has 2 up-links. A flat ring all-gather of 4e8 B over the 4
// GPUs, 0 -> 1 -> 2 -> 3 -> 0, crosses from rail 1 to rail 0 twice (1 -> 2
// and 3 -> 0), to the leaf's two ports, whose up-links differ (d-mod-k):
// 3e8 B each at a NIC's 10e9 B/s, 3 steps of 20 us, 30.06 ms. With the
// up-links counted from the job's 2 ports (one), they shared it: 60.06 ms.
TEST(EngineFabric, AJobOnPartOfALeafHasAllItsUplinks) {
  Knobs k;
  k.gpus_per_node = 2;
  k.nics_per_node = 2;
  Platform p = TestPlatform(k);
  p.mutable_network()->set_nics_per_leaf(4);
  p.mutable_network()->set_oversubscription(2);
  p.mutable_network()->set_rail_optimized(true);
  const Mesh mesh{2, 2};
  absl::StatusOr<double> t = CallAlone(
      p, mesh, Call(ALL_GATHER, RING, 400'000'000, GlobalGroup(mesh)));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(*t, 30.06e-3, 1e-9);
}

// Whole steps at the ratio the file gives: dgx_a100 with static routing,
// LLaMA-7B cut to 2 layers, ZeRO-3, 2 micro-batches. At 3 nodes a rail's
// leaf holds 3 of its 20 ports; its up-links were counted from those 3,
// so 4:1 and 16:1 both had one and gave the same step. Now 5 up-links
// against 2 of 5/8 of a NIC: 16:1 is slower. At 7 nodes, 4:1 had
// floor(7 / 4) = 1 up-link, as 7:1 has: now 5 against 3.
TEST(EngineFabric, TheRatioIsTheFabricsNotTheJobs) {
  for (const auto& [gpus, low, high] :
       std::vector<std::tuple<int, double, double>>{{24, 4, 16}, {56, 4, 7}}) {
    std::vector<double> steps;
    for (double ratio : {low, high}) {
      absl::StatusOr<Job> job = TwoLayerJob({"zero3"}, gpus, 2);
      ASSERT_TRUE(job.ok()) << job.status();
      Network* n = job->platform.mutable_network();
      n->set_adaptive_routing(false);
      n->set_oversubscription(ratio);
      absl::StatusOr<Results> r = SimulateJob(*job, EngineOptions());
      ASSERT_TRUE(r.ok()) << r.status();
      steps.push_back(r->rows(0).step_time_s());
    }
    EXPECT_LT(steps[0], steps[1])
        << gpus << " GPUs at " << low << ":1 and " << high << ":1";
  }
}

// Leaves of two NICs at 4:1: each leaf's one up-link runs at half a NIC
// (AnUplinkCarriesItsShareOfTheLeaf). A ring's up-links carry one flow
// each, which on NIC halves would run at a NIC's speed, 30.06 ms: an
// up-link slower than a NIC keeps every node, and the ring its 60.06 ms.
TEST(EngineNetworkSymmetry, AnUplinkSlowerThanANicKeepsEveryNode) {
  Platform p = FourNodes();
  p.mutable_network()->set_nics_per_leaf(2);
  p.mutable_network()->set_oversubscription(4);
  const Group all = GlobalGroup(Mesh{1, 4});
  absl::StatusOr<SymmetryRun> r =
      RunSymmetry(p, {{Call(ALL_GATHER, RING, 400'000'000, all)}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->periods, (std::vector<int>{4}));
  EXPECT_NEAR(r->seconds, 0.06006, 1e-9);
  EXPECT_EQ(r->network_nodes, 4);
}

// Whole steps, symmetry against none: every named strategy at 64 GPUs of
// dgx_a100, dgx_h100 and a800_lins (LLaMA-7B cut to 2 layers, 3
// micro-batches), and ZeRO-3 and MiCS over 2-node shards at 256 GPUs of
// dgx_h100. The same steps (ExpectSameSteps), and most of them on the
// network flows of fewer nodes than the job's. MiCS's shard groups are
// pairs of nodes, whose rings (n -> n + 1 -> n) repeat every 2 nodes, and
// its replicas' all-reduce rings every node: it runs 2 nodes' flows.
TEST(EngineNetworkSymmetry, StepsAreTheSameOnEveryNode) {
  // The shipped IB platforms are one switch (adaptive routing); dgx_a100
  // with static routing keeps its rail leaves, whose routes the check reads.
  struct Case {
    std::string platform;
    int gpus;
    bool static_routing = false;
  };
  for (const Case& c : std::vector<Case>{{"dgx_a100", 64},
                                         {"dgx_a100", 64, true},
                                         {"dgx_h100", 64},
                                         {"a800_lins", 64},
                                         {"dgx_h100", 256}}) {
    const std::string& platform = c.platform;
    const int gpus = c.gpus;
    absl::StatusOr<Job> job = TwoLayerJob(
        gpus == 64 ? NamedStrategies()
                   : std::vector<std::string>{"zero3", "mics:shard_size=16"},
        gpus, 3, platform);
    ASSERT_TRUE(job.ok()) << job.status();
    if (c.static_routing) {
      job->platform.mutable_network()->set_adaptive_routing(false);
    }
    absl::StatusOr<TwoRuns> r =
        WithAndWithout(*job, &EngineOptions::network_symmetry);
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectSameSteps(r->with, r->without,
                    absl::StrCat("at ", gpus, " GPUs of ", platform,
                                 c.static_routing ? ", static routing" : ""));
    int fewer = 0;
    for (int i = 0; i < r->with.rows_size(); ++i) {
      if (!r->with.rows(i).has_step_time_s()) continue;
      EXPECT_EQ(r->without.rows(i).replay().network_nodes(), gpus / 8);
      if (r->with.rows(i).replay().network_nodes() < gpus / 8) ++fewer;
      if (r->with.rows(i).strategy() == "mics:shard_size=16") {
        EXPECT_EQ(r->with.rows(i).replay().network_nodes(), 2);
      }
    }
    EXPECT_GT(fewer, 0);
  }
}

// Calls prepared before the simulations, as `shardsim plan` prepares them
// (EngineOptions::prepared), among them another strategy's trees across
// nodes, whose flows repeat under no shift of nodes: every point's step is
// the one it has with calls of its own, its network symmetry judged on its
// own calls only (ZeRO-3's flows are every node's alike, MiCS's every 2
// nodes', the trees' only every 8).
TEST(EnginePreparedCalls, SharedCallsChangeNoStep) {
  absl::StatusOr<Job> job =
      TwoLayerJob({"zero3", "mics:shard_size=16"}, 64, 3, "dgx_h100");
  ASSERT_TRUE(job.ok()) << job.status();
  PreparedCalls calls(Mesh{8, 8}, job->platform, FlowMode::kFast,
                      job->platform.channels());
  for (const char* spec : {"zero3@both=tree", "zero3", "mics:shard_size=16"}) {
    absl::StatusOr<Point> p = LowerPoint(*job, spec, 64);
    ASSERT_TRUE(p.ok()) << p.status();
    for (const Op& op : p->schedule->ops()) {
      if (op.has_collective()) {
        ASSERT_TRUE(calls.Get(op.collective()).ok()) << spec;
      }
    }
  }
  EngineOptions shared;
  shared.prepared = &calls;
  absl::StatusOr<Results> with = SimulateJob(*job, shared);
  absl::StatusOr<Results> without = SimulateJob(*job, EngineOptions());
  ASSERT_TRUE(with.ok()) << with.status();
  ASSERT_TRUE(without.ok()) << without.status();
  ASSERT_EQ(with->rows_size(), 2);
  EXPECT_EQ(with->SerializeAsString(), without->SerializeAsString());
  EXPECT_EQ(with->rows(0).replay().network_nodes(), 1);
  EXPECT_EQ(with->rows(1).replay().network_nodes(), 2);
}

}  // namespace
}  // namespace shardsim

// ---- g. programs per rank role: point-to-point sends between them ------

namespace shardsim {
namespace {

// A compute op of `seconds` (a GEMM at peak) on `program`'s compute
// stream, after `deps`.
Op* AddCompute(Schedule* s, int program, double seconds,
               std::vector<int> deps) {
  Op* op = s->add_ops();
  op->set_id(s->ops_size() - 1);
  op->set_program(program);
  op->set_stream(COMPUTE);
  op->set_label(absl::StrCat("compute ", op->id()));
  op->mutable_compute()->set_kind("forward");
  op->mutable_compute()->set_kernel_list(s->kernel_lists_size());
  *s->add_kernel_lists()->add_kernels() = GemmOf(seconds);
  for (int d : deps) op->add_deps(d);
  return op;
}

// Program 0 (ranks `from`) computes for 1 ms, then sends `bytes` to
// program 1 (ranks `to`), which computes for 0.5 ms once they arrived.
Schedule ComputeSendCompute(const std::vector<int>& from,
                            const std::vector<int>& to, int64_t bytes) {
  Schedule s;
  Program* p0 = s.add_programs();
  p0->set_role("stage 0");
  for (int r : from) p0->add_ranks(r);
  Program* p1 = s.add_programs();
  p1->set_role("stage 1");
  for (int r : to) p1->add_ranks(r);
  AddCompute(&s, 0, 1e-3, {});
  Op* send = s.add_ops();
  send->set_id(1);
  send->set_program(0);
  send->set_stream(REDUCE);
  send->set_label("send activations");
  send->add_deps(0);
  send->mutable_send()->set_bytes(bytes);
  send->mutable_send()->set_dtype(BF16);
  send->mutable_send()->set_tensor("act");
  send->mutable_send()->set_peer_program(1);
  AddCompute(&s, 1, 0.5e-3, {1});
  return s;
}

// Checks the times of ComputeSendCompute against the transfer's, `T`.
void ExpectComputeSendCompute(const Replayed& r, double T) {
  ASSERT_EQ(r.ops.size(), 3u);
  EXPECT_NEAR(r.ops[0].second, 1e-3, 1e-12);
  EXPECT_NEAR(r.ops[1].first, 1e-3, 1e-12);  // the send, after compute
  EXPECT_NEAR(r.ops[1].second - r.ops[1].first, T, 1e-12);
  // The receiver's op starts exactly when the transfer ends.
  EXPECT_EQ(r.ops[2].first, r.ops[1].second);
  EXPECT_NEAR(r.ops[2].second - r.ops[2].first, 0.5e-3, 1e-12);
  EXPECT_NEAR(r.step, 1e-3 + T + 0.5e-3, 1e-12);
  // The critical path crosses into the sender through the send: the
  // sender's compute (its program computes the most), the send, and the
  // receiver's compute, which the sender waits through (the bubble).
  EXPECT_NEAR(r.breakdown.compute_s(), 1e-3, 1e-12);
  EXPECT_NEAR(r.breakdown.pipeline_bubble_s(), 0.5e-3, 1e-12);
  EXPECT_NEAR(r.breakdown.point_to_point_s(), T, 1e-12);
  EXPECT_NEAR(r.breakdown.compute_s() + r.breakdown.pipeline_bubble_s() +
                  r.breakdown.point_to_point_s() +
                  r.breakdown.launch_overhead_s(),
              r.step, 1e-12);
  ASSERT_EQ(r.breakdown.by_collective_size(), 1);
  EXPECT_EQ(r.breakdown.by_collective(0).collective(), "SEND act");
  EXPECT_NEAR(r.breakdown.by_collective(0).seconds(), T, 1e-12);
}

TEST(EnginePrograms, ASendInsideANodeRunsOverNvSwitch) {
  // Two GPUs of one node, a program each. 1e8 B over one NVSwitch port of
  // 100e9 B/s (GPU 0's up, GPU 1's down): 1 ms; with the protocol's base
  // latency 20 us and one NVSwitch step's alpha 5 us, T = 1.025 ms.
  Knobs k;
  k.gpus_per_node = 2;
  k.nics_per_node = 2;
  k.nvlink = 100e9;
  k.base = 20e-6;
  k.alpha_intra = 5e-6;
  Platform p = TestPlatform(k);
  p.mutable_gpu()->set_hbm_bytes_per_s(1e18);
  const double T = 20e-6 + 1e8 / 100e9 + 5e-6;
  const Replayed r =
      Replay(ComputeSendCompute({0}, {1}, 100'000'000), p, Mesh{2, 1});
  ExpectComputeSendCompute(r, T);
}

TEST(EnginePrograms, ASendAcrossNodesRunsOverTheNics) {
  // Two nodes of one GPU and one 10 GB/s NIC (StepPlatform): 1e7 B NIC to
  // NIC is 1 ms; base 20 us and one network step's alpha 100 us:
  // T = 1.12 ms.
  const double T = 20e-6 + 1e7 / 10e9 + 100e-6;
  const Replayed r = Replay(ComputeSendCompute({0}, {1}, 10'000'000),
                            StepPlatform(), Mesh{1, 2});
  ExpectComputeSendCompute(r, T);
}

TEST(EnginePrograms, RankIOfOneProgramSendsToRankIOfTheOther) {
  // Two nodes of two GPUs, a program per node, each of its GPUs sending
  // 1e7 B to its twin on the other node through its own 10 GB/s NIC: the
  // pairs share no link, so T is one pair's, 1.12 ms (as above).
  Knobs k;
  k.gpus_per_node = 2;
  k.nics_per_node = 2;
  k.nic = 10e9;
  k.base = 20e-6;
  k.alpha_inter = 100e-6;
  Platform p = TestPlatform(k);
  p.mutable_gpu()->set_hbm_bytes_per_s(1e18);
  const double T = 20e-6 + 1e7 / 10e9 + 100e-6;
  const Replayed r =
      Replay(ComputeSendCompute({0, 1}, {2, 3}, 10'000'000), p, Mesh{2, 2});
  ExpectComputeSendCompute(r, T);
  // Crossed pairs (0 to 3, 1 to 2) take the same links: the same time.
  const Replayed x =
      Replay(ComputeSendCompute({0, 1}, {3, 2}, 10'000'000), p, Mesh{2, 2});
  ExpectComputeSendCompute(x, T);
}

TEST(EnginePrograms, ACollectiveRunsTheGroupsOfItsProgram) {
  // Two nodes of two GPUs, a program per node. Program 0 all-gathers over
  // its node before it sends: its node's group only, which takes what the
  // same call takes alone (each node's NVSwitch carries its own group).
  Knobs k;
  k.gpus_per_node = 2;
  k.nics_per_node = 2;
  Platform p = TestPlatform(k);
  p.mutable_gpu()->set_hbm_bytes_per_s(1e18);
  const Mesh mesh{2, 2};
  Schedule s = ComputeSendCompute({0, 1}, {2, 3}, 1000);
  Op* ag = s.add_ops();
  ag->set_id(3);
  ag->set_program(0);
  ag->set_stream(GATHER);
  ag->set_label("AG P");
  const CollectiveCall call =
      Call(ALL_GATHER, RING, 100'000'000, MakeGroup(2, 1, 1, 1));
  *ag->mutable_collective() = call;
  const Replayed r = Replay(s, p, mesh);
  absl::StatusOr<double> alone = CallAlone(p, mesh, call);
  ASSERT_TRUE(alone.ok()) << alone.status();
  ASSERT_EQ(r.ops.size(), 4u);
  EXPECT_NEAR(r.ops[3].second - r.ops[3].first, *alone, 1e-12);
  // A group that holds ranks of both programs is refused.
  Schedule crossed = ComputeSendCompute({0, 2}, {1, 3}, 1000);
  *crossed.add_ops() = *ag;
  absl::StatusOr<Replayed> t = test::ReplayOrError(crossed, p, mesh);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("holds ranks of programs 0 and 1"),
            absl::string_view::npos)
      << t.status().message();
}

TEST(EnginePrograms, ProgramsDependOnEachOtherThroughSendsOnly) {
  Schedule s = ComputeSendCompute({0}, {1}, 1000);
  s.mutable_ops(2)->add_deps(0);  // program 1 on program 0's compute
  absl::StatusOr<Replayed> t =
      test::ReplayOrError(s, StepPlatform(), Mesh{1, 2});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("through sends only"),
            absl::string_view::npos)
      << t.status().message();
  // A schedule of one program sends nothing.
  Schedule one = ComputeSendCompute({0}, {1}, 1000);
  one.clear_programs();
  one.mutable_ops(2)->set_program(0);
  t = test::ReplayOrError(one, StepPlatform(), Mesh{1, 2});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("a send in a schedule of one program"),
            absl::string_view::npos)
      << t.status().message();
}

TEST(EnginePrograms, TheTraceHasAProcessPerProgramWithItsOps) {
  const Schedule s = ComputeSendCompute({0}, {1}, 1000);
  std::vector<TraceProcess> procs(2);
  for (int p = 0; p < 2; ++p) {
    procs[p].name = absl::StrCat("program ", p);
    procs[p].program = p;
    for (int id = 0; id < s.ops_size(); ++id) {
      procs[p].times.push_back({id * 1e-3, (id + 1) * 1e-3});
    }
  }
  const std::string path = test::TestTempDir() + "/programs_trace.json";
  ASSERT_TRUE(WriteChromeTrace(s, procs, "test", path).ok());
  std::ifstream in(path);
  const std::string json((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  google::protobuf::Struct root;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &root).ok());
  std::vector<std::pair<int, std::string>> slices;  // pid, name
  for (const google::protobuf::Value& v :
       root.fields().at("traceEvents").list_value().values()) {
    const auto& f = v.struct_value().fields();
    if (f.at("ph").string_value() != "X") continue;
    slices.emplace_back(static_cast<int>(f.at("pid").number_value()),
                        f.at("name").string_value());
  }
  const std::vector<std::pair<int, std::string>> want = {
      {0, "compute 0"}, {0, "send activations"}, {1, "compute 2"}};
  EXPECT_EQ(slices, want);
}

TEST(EnginePrograms, TrafficCountsSendsInsideAndAcrossNodes) {
  Knobs k;
  k.gpus_per_node = 3;
  k.nics_per_node = 3;
  const Platform p = TestPlatform(k);
  // Two nodes of three: 0 to 2 and 3 to 5 inside a node, 1 to 4 across.
  Schedule s = ComputeSendCompute({0, 1, 3}, {2, 4, 5}, 1000);
  absl::StatusOr<std::vector<TrafficEntry>> t = CountTraffic(s, Mesh{3, 2}, p);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ((*t)[0].op(), OP_UNSPECIFIED);  // a send
  EXPECT_EQ((*t)[0].calls(), 1);
  EXPECT_EQ((*t)[0].bytes_per_call(), 1000);
  EXPECT_EQ((*t)[0].intra_node_bytes(), 2000);
  EXPECT_EQ((*t)[0].inter_node_bytes(), 1000);
}

}  // namespace
}  // namespace shardsim

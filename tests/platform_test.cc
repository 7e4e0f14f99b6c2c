// Shipped platforms load and validate; the SimGrid fabric builds for them
// at small and large scale with the right NIC mapping; malformed platforms
// are refused with the field named. Every SimGrid use runs in a child
// process (sim/runner/isolate.h): SimGrid allows one engine per process.
#include <fstream>
#include <memory>
#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "sim/base/bandwidth.h"
#include "sim/base/fat_tree.h"
#include "sim/engine/fabric.h"
#include "sim/runner/isolate.h"
#include "sim/scenario/scenario.h"
#include "sim/simulate/simulate.h"
#include "tests/util/test_util.h"

namespace sg4 = simgrid::s4u;

namespace shardsim {
namespace {

const char* const kShipped[] = {"dgx_a100", "dgx_h100", "a800_lins",
                                "cloud_a100"};

// Runs `task` in a child process and returns what it returned.
absl::StatusOr<std::string> InChild(ChildTask task) {
  return RunIsolated({std::move(task)}, 1)[0];
}

std::vector<double> ParseDoubles(const std::string& text) {
  std::vector<double> out;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    double v = 0;
    EXPECT_TRUE(absl::SimpleAtod(word, &v)) << word;
    out.push_back(v);
  }
  return out;
}

TEST(PlatformShipped, EveryPlatformLoadsAndPassesEngineValidation) {
  for (const char* name : kShipped) {
    SCOPED_TRACE(name);
    absl::StatusOr<Platform> p = LoadPlatform(name, "");
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->name(), name);
    const absl::Status s = ValidatePlatform(*p, name);
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(PlatformShipped, FieldsTheFilesStateFromTheirSources) {
  // A800: 400 GB/s bidirectional NVLink = 200e9 per direction; 4 HDR NICs
  // of 200 Gb/s = 25e9 B/s; no SHARP (docs/strategies.md §6).
  const Platform a800 = test::ShippedPlatform("a800_lins");
  EXPECT_EQ(a800.gpus_per_node(), 8);
  EXPECT_DOUBLE_EQ(a800.nvswitch().bandwidth(), 400e9 / 2);
  EXPECT_EQ(a800.network().nics_per_node(), 4);
  EXPECT_DOUBLE_EQ(a800.network().nic_bandwidth(), 200e9 / 8);
  EXPECT_FALSE(a800.network().sharp());
  // H100: NVLink4 900 GB/s bidirectional; ConnectX-7 400 Gb/s = 50e9 B/s.
  const Platform h100 = test::ShippedPlatform("dgx_h100");
  EXPECT_DOUBLE_EQ(h100.nvswitch().bandwidth(), 900e9 / 2);
  EXPECT_DOUBLE_EQ(h100.network().nic_bandwidth(), 400e9 / 8);
  EXPECT_EQ(h100.network().nics_per_node(), 8);
  EXPECT_TRUE(h100.network().sharp());
  // Cloud (docs/strategies.md §5): 8 virtual NICs of 14 GB/s (middle of
  // 10-18 GB/s), and a node's up-links 8 / oversubscription x 14e9 = 56e9
  // B/s: 4 up-links of a NIC's speed (LeafUplinksOf).
  const Platform cloud = test::ShippedPlatform("cloud_a100");
  const Network& n = cloud.network();
  EXPECT_DOUBLE_EQ(n.nic_bandwidth() * cloud.efficiency().network_fraction(),
                   (10e9 + 18e9) / 2);
  EXPECT_EQ(n.nics_per_leaf(), cloud.gpus_per_node());  // a node is a leaf
  const LeafUplinks up = LeafUplinksOf(cloud);
  EXPECT_EQ(up.count, 4);
  EXPECT_DOUBLE_EQ(up.bandwidth, NicBandwidth(cloud));
  EXPECT_DOUBLE_EQ(up.count * up.bandwidth, 56e9);
  EXPECT_FALSE(n.sharp());
  EXPECT_FALSE(n.rail_optimized());
}

// A leaf's up-links are its switch's: nics_per_leaf / oversubscription
// NICs' worth, as whole up-links of a NIC's speed where the ratio divides
// the ports, else as many as it rounds up to, each slower. dgx_a100's
// HDR leaves (20 down-ports, NICs of 25e9 x 0.95 B/s): at 4:1, 5 up-links
// of a NIC; at 3:1, 7 of 20/21 of a NIC; 2 ports at 4:1, one of half.
TEST(PlatformFatTree, UplinksAreTheSwitchesWorth) {
  Platform p = test::ShippedPlatform("dgx_a100");
  const double nic = 25e9 * 0.95;
  p.mutable_network()->set_oversubscription(4);
  LeafUplinks up = LeafUplinksOf(p);
  EXPECT_EQ(up.count, 5);
  EXPECT_DOUBLE_EQ(up.bandwidth, nic);
  p.mutable_network()->set_oversubscription(3);
  up = LeafUplinksOf(p);
  EXPECT_EQ(up.count, 7);
  EXPECT_DOUBLE_EQ(up.bandwidth, nic * 20 / 21);
  p.mutable_network()->set_oversubscription(4);
  p.mutable_network()->set_nics_per_leaf(2);
  up = LeafUplinksOf(p);
  EXPECT_EQ(up.count, 1);
  EXPECT_DOUBLE_EQ(up.bandwidth, nic / 2);
}

// Where a job's NICs sit. dgx_a100 with static routing, 7 nodes: rail-
// optimised, rail i's leaf holds NIC i of all 7 (7 of its 20 ports), 8
// leaves; NIC i of node n is at port 7i + n. Plain cabling, 3 nodes of 8
// NICs on leaves of 20: NICs 0-19 on leaf 0, 20-23 on leaf 1. Adaptive
// routing: one switch, no up-links.
TEST(PlatformFatTree, LeavesOfRailsAndOfNodes) {
  Platform p = test::ShippedPlatform("dgx_a100");
  p.mutable_network()->set_adaptive_routing(false);
  const FatTreeLayout rails(p, 7);
  EXPECT_TRUE(rails.has_uplinks());
  EXPECT_EQ(rails.leaves(), 8);
  EXPECT_EQ(rails.per_leaf(), 7);
  EXPECT_EQ(rails.LeafOfNic(3 * 8 + 5), 5);  // node 3, NIC 5
  EXPECT_EQ(rails.NicAt(7 * 5 + 3), 3 * 8 + 5);
  p.mutable_network()->set_rail_optimized(false);
  const FatTreeLayout plain(p, 3);
  EXPECT_EQ(plain.leaves(), 2);
  EXPECT_EQ(plain.LeafOfNic(19), 0);
  EXPECT_EQ(plain.LeafOfNic(20), 1);
  EXPECT_EQ(plain.NicAt(24), -1);  // a spare port
  p.mutable_network()->set_adaptive_routing(true);
  EXPECT_FALSE(FatTreeLayout(p, 7).has_uplinks());
}

// Builds `platform` for `gpus` GPUs in a child; returns each GPU's NIC
// index and NIC host name, "i:name" separated by spaces.
absl::StatusOr<std::string> BuildAndMapNics(const Platform& platform, int gpus,
                                            int ranks_to_report) {
  absl::StatusOr<Mesh> mesh = JobMesh(platform, gpus);
  if (!mesh.ok()) return mesh.status();
  return InChild([&platform, m = *mesh,
                  ranks_to_report]() -> absl::StatusOr<std::string> {
    StartSimGrid();
    absl::StatusOr<std::unique_ptr<Fabric>> f = Fabric::Build(platform, m);
    if (!f.ok()) return f.status();
    std::string out =
        absl::StrCat(sg4::Engine::get_instance()->get_host_count(), " ");
    for (int r = 0; r < ranks_to_report; ++r) {
      absl::StrAppend(&out, (*f)->NicOf(r), ":", (*f)->nic(r)->get_name(), " ");
    }
    return out;
  });
}

TEST(PlatformFabric, DgxA100BuildsAt16GpusWithOneNicPerGpu) {
  absl::StatusOr<std::string> r =
      BuildAndMapNics(test::ShippedPlatform("dgx_a100"), 16, 16);
  ASSERT_TRUE(r.ok()) << r.status();
  // Hosts: 16 GPU hosts + 16 NIC hosts (one leaf of 20 ports holds all 16
  // NICs: a one-level tree, no spare ports) + the sending and receiving
  // halves of node 0's 8 NICs (network symmetry runs at most nodes / 2).
  std::string want = "48 ";
  for (int i = 0; i < 16; ++i) absl::StrAppend(&want, i, ":nic", i, " ");
  EXPECT_EQ(*r, want);
}

// dgx_a100 with static routing: the fat tree's leaves as cabled.
Platform StaticRouting(Platform p) {
  p.mutable_network()->set_adaptive_routing(false);
  return p;
}

TEST(PlatformFabric, DgxA100BuildsAt16384Gpus) {
  // Hosts: 16384 GPUs + the leaves' ports + 2 halves of each NIC of the
  // first 1024 nodes (16384). Rail-optimised, each of the 8 rails takes
  // ceil(2048 / 20) = 103 leaves of 20 ports, 2060 (12 spare, with
  // placeholder hosts): 16480. In all 49248.
  absl::StatusOr<std::string> r = BuildAndMapNics(
      StaticRouting(test::ShippedPlatform("dgx_a100")), 16384, 10);
  ASSERT_TRUE(r.ok()) << r.status();
  std::string want = "49248 ";
  for (int i = 0; i < 10; ++i) absl::StrAppend(&want, i, ":nic", i, " ");
  EXPECT_EQ(*r, want);
  // With adaptive routing (as shipped), one switch of 16384 ports: no
  // spare port, 16384 + 16384 + 16384 = 49152 hosts.
  r = BuildAndMapNics(test::ShippedPlatform("dgx_a100"), 16384, 10);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->substr(0, 6), "49152 ");
}

// `p` built for `mesh`: its host count, then the links of the route
// between each pair of NICs.
absl::StatusOr<std::string> HostsAndRoutes(
    const Platform& p, const Mesh& mesh,
    const std::vector<std::pair<int, int>>& pairs) {
  return InChild([&]() -> absl::StatusOr<std::string> {
    StartSimGrid();
    absl::StatusOr<std::unique_ptr<Fabric>> f = Fabric::Build(p, mesh);
    if (!f.ok()) return f.status();
    std::string out =
        absl::StrCat(sg4::Engine::get_instance()->get_host_count());
    for (const auto& [a, b] : pairs) {
      std::vector<sg4::Link*> route;
      (*f)->nic(a)->route_to((*f)->nic(b), route, nullptr);
      absl::StrAppend(&out, " ", route.size());
    }
    return out;
  });
}

// dgx_a100 at 64 GPUs, 8 nodes: rail-optimised, leaf i holds NIC i of the
// 8 nodes (a DGX SuperPOD's scalable unit has a leaf per rail), so 8 leaves
// of 8 NICs, 8 up-links each, no spare port. A flow along a rail stays in
// its leaf: the NIC's up-link and the other NIC's down-link. A flow from
// rail 7 to rail 0, as a ring's hop from GPU 7 of one node to GPU 0 of the
// next, goes up to a spine and down: 4 links. So does one from rail 0 to
// rail 1, which the leaves of 20 NICs in a row (rails 0, 1 and half of 2
// on the first) kept on one leaf. Hosts: 64 GPUs + 64 NICs + the halves of
// the first 4 nodes' 32 NICs = 192.
TEST(PlatformFabric, ARailOptimisedLeafHoldsOneRail) {
  absl::StatusOr<std::string> r =
      HostsAndRoutes(StaticRouting(test::ShippedPlatform("dgx_a100")),
                     Mesh{8, 8}, {{0, 8}, {8, 56}, {7, 8}, {15, 16}, {0, 9}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "192 2 2 4 4 4");
}

// With adaptive routing a non-blocking fat tree is one switch
// (fabric.cc): every route between two NICs is their own two links, on a
// rail (0 -> 8), across rails (7 -> 8) or across what would be leaves.
TEST(PlatformFabric, AdaptiveRoutingIsOneSwitch) {
  const Platform p = test::ShippedPlatform("dgx_a100");
  ASSERT_TRUE(p.network().adaptive_routing());
  // 32 nodes of 8 GPUs (ranks: GPU 0 of node 0 to GPU 0 of node 1, ...).
  // Hosts: 256 GPUs + 256 NICs + both halves of the first 16 nodes' 128.
  absl::StatusOr<std::string> r =
      HostsAndRoutes(p, Mesh{8, 32}, {{0, 8}, {7, 8}, {0, 255}, {255, 1}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "768 2 2 2 2");
}

TEST(PlatformFabric, A800TwoGpusShareEachNic) {
  // 4 NICs for 8 GPUs: GPU l uses NIC l / 2 of its node; node 1's NICs are
  // 4..7.
  absl::StatusOr<std::string> r =
      BuildAndMapNics(test::ShippedPlatform("a800_lins"), 16, 16);
  ASSERT_TRUE(r.ok()) << r.status();
  // 16 GPU hosts + 8 NIC hosts + 2 halves of node 0's 4 NICs.
  std::string want = "32 ";
  for (int rank = 0; rank < 16; ++rank) {
    const int nic = (rank / 8) * 4 + (rank % 8) / 2;
    absl::StrAppend(&want, nic, ":nic", nic, " ");
  }
  EXPECT_EQ(*r, want);
  // The first pairs spelled out: GPUs 0 and 1 on NIC 0, 2 and 3 on NIC 1.
  EXPECT_EQ(r->substr(0, 28), "32 0:nic0 0:nic0 1:nic1 1:ni");
}

// docs/strategies.md §5's numbers as the fabric delivers them: one GPU alone
// reaches its 14 GB/s virtual NIC; the 8 GPUs of a node together share the
// node's 4 x 14 GB/s up-links, 56 GB/s, 7 GB/s each.
TEST(PlatformFabric, CloudA100OneGpu14GBpsAndANode56GBps) {
  const Platform cloud = test::ShippedPlatform("cloud_a100");
  absl::StatusOr<Mesh> mesh = JobMesh(cloud, 16);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  constexpr double kBytes = 1e9;
  absl::StatusOr<std::string> r = InChild([&]() -> absl::StatusOr<std::string> {
    StartSimGrid();
    absl::StatusOr<std::unique_ptr<Fabric>> f = Fabric::Build(cloud, *mesh);
    if (!f.ok()) return f.status();
    const Fabric& fab = **f;
    std::string out;
    sg4::Actor::create("probe", fab.gpu(0), [&] {
      // One GPU alone: GPU 0 -> GPU 8.
      double start = sg4::Engine::get_clock();
      sg4::Comm::sendto_async(fab.nic(0), fab.nic(8), kBytes)->wait();
      absl::StrAppend(
          &out, absl::StrFormat("%.17g ", sg4::Engine::get_clock() - start));
      // All 8 GPUs of node 0 to their peers on node 1 at once.
      start = sg4::Engine::get_clock();
      std::vector<sg4::CommPtr> comms;
      for (int l = 0; l < 8; ++l) {
        comms.push_back(
            sg4::Comm::sendto_async(fab.nic(l), fab.nic(8 + l), kBytes));
      }
      sg4::Comm::wait_all(comms);
      for (const sg4::CommPtr& c : comms) {
        absl::StrAppend(
            &out, absl::StrFormat("%.17g ", c->get_finish_time() - start));
      }
    });
    sg4::Engine::get_instance()->run();
    return out;
  });
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<double> t = ParseDoubles(*r);
  ASSERT_EQ(t.size(), 9u);
  // Alone: 1e9 B / 14e9 B/s = 71.43 ms.
  EXPECT_NEAR(t[0], kBytes / 14e9, 1e-4 * kBytes / 14e9);
  // Together: 8 x 1e9 B over 56e9 B/s = 142.9 ms, every flow at 7 GB/s.
  for (int l = 1; l <= 8; ++l) {
    EXPECT_NEAR(t[l], 8 * kBytes / 56e9, 1e-4 * 8 * kBytes / 56e9) << l;
  }
}

TEST(PlatformMesh, UserPlatformWithTwoNodesRefuses32Gpus) {
  Platform p = test::ShippedPlatform("dgx_a100");
  p.set_name("two_node_lab");
  p.set_nodes(2);
  const std::string path = test::TestTempDir() + "/two_node_lab.textproto";
  {
    std::ofstream out(path);
    out << p.DebugString();
  }
  absl::StatusOr<Platform> loaded = LoadPlatform(path, "");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->nodes(), 2);
  // 16 GPUs = 2 nodes fit.
  absl::StatusOr<Mesh> fits = JobMesh(*loaded, 16);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->nodes, 2);
  // 32 GPUs = 4 nodes of 8 do not.
  absl::StatusOr<Mesh> mesh = JobMesh(*loaded, 32);
  ASSERT_FALSE(mesh.ok());
  EXPECT_EQ(mesh.status().message(),
            "32 GPUs need 4 nodes; platform two_node_lab has 2");
  // A collective sweep names its field, whoever called it (a flag of
  // `shardsim collective`, a scenario file, validate/).
  CollectiveSweep sweep;
  sweep.set_op(ALL_GATHER);
  sweep.set_algorithm(RING);
  sweep.set_min_bytes(1 << 20);
  sweep.set_max_bytes(1 << 20);
  sweep.set_step_factor(2);
  absl::StatusOr<CollectiveResults> r =
      SimulateCollective(*loaded, 32, sweep, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "collective sweep: field gpus: 32 GPUs need 4 nodes; platform "
            "two_node_lab has 2");
}

// A valid platform with one field broken must fail ValidatePlatform
// with that field named.
void ExpectFieldError(const Platform& p, const std::string& field) {
  const absl::Status s = ValidatePlatform(p, "bad.textproto");
  ASSERT_FALSE(s.ok()) << "expected an error naming " << field;
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(absl::StrCat("bad.textproto: field ", field, ":")),
            absl::string_view::npos)
      << s.message();
}

TEST(PlatformValidation, BadFieldsAreNamed) {
  const Platform good = test::ShippedPlatform("dgx_a100");
  ASSERT_TRUE(ValidatePlatform(good, "good").ok());

  Platform p = good;
  p.mutable_network()->set_nics_per_node(3);  // 8 GPUs cannot share 3 NICs
  ExpectFieldError(p, "network.nics_per_node");

  p = good;
  p.mutable_network()->set_nic_bandwidth(0);
  ExpectFieldError(p, "network.nic_bandwidth");

  p = good;
  p.clear_protocols();
  ExpectFieldError(p, "protocols");

  p = good;
  p.mutable_network()->set_oversubscription(0.5);
  ExpectFieldError(p, "network.oversubscription");

  p = good;
  p.mutable_efficiency()->set_nvlink_fraction(1.5);
  ExpectFieldError(p, "efficiency.nvlink_fraction");

  p = good;
  p.mutable_efficiency()->set_network_fraction(1.5);
  ExpectFieldError(p, "efficiency.network_fraction");
}

}  // namespace
}  // namespace shardsim

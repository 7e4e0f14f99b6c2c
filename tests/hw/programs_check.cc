// A pipeline of several programs (tests/hw/pipeline_schedule.h) replayed on
// shardsim-hw's CPU transport, one MPI rank per GPU: every rank runs its
// stage's ops, its sends move real bytes to the rank of the same index in
// the next (or previous) stage, and every received byte is checked against
// the sender's pattern. Per rank, the bytes received and sent must equal
// what the schedule's sends carry, counted by hand; the stage's all-reduce
// is also run data-checked over the stage's own ranks.
//
// usage: mpirun -np S*R programs_check S R GPUS_PER_NODE [split]
//   S stages of R ranks on nodes of GPUS_PER_NODE. Stage k holds ranks
//   k*R .. k*R+R-1, or with `split` R/nodes ranks of every node (stage k
//   the k-th block of each node), so its sends stay inside the nodes.
// Exit 0: every rank right; 1: a wrong count or byte (rank 0 says which).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hw/cpu/cpu_backend.h"
#include "hw/runtime/runtime.h"
#include "sim/base/group.h"
#include "tests/hw/pipeline_schedule.h"

namespace shardsim::hw {
namespace {

struct Layout {
  int stages = 0, ranks = 0, gpus_per_node = 0;
  bool split = false;
};

// The stages' ranks and the group shape of one stage.
absl::StatusOr<Pipeline> PipelineOf(const Layout& l) {
  const int world = l.stages * l.ranks;
  if (world % l.gpus_per_node != 0 && world > l.gpus_per_node) {
    return absl::InvalidArgumentError("not whole nodes");
  }
  const int nodes = std::max(1, world / l.gpus_per_node);
  Pipeline p;
  p.micro_batches = 3;
  for (int k = 0; k < l.stages; ++k) {
    std::vector<int>& mine = p.ranks.emplace_back();
    for (int i = 0; i < l.ranks; ++i) {
      if (!l.split) {
        mine.push_back(k * l.ranks + i);
      } else {
        const int per_node = l.ranks / nodes;  // this stage's, each node
        mine.push_back((i / per_node) * l.gpus_per_node + k * per_node +
                       i % per_node);
      }
    }
  }
  if (l.split) {
    const int per_node = l.ranks / nodes;
    if (per_node * nodes != l.ranks || per_node * l.stages != l.gpus_per_node) {
      return absl::InvalidArgumentError(
          "split: each node must hold R / nodes ranks of every stage");
    }
    p.group = MakeGroup(per_node, 1, nodes, 1);
  } else if (l.ranks <= l.gpus_per_node) {
    p.group = MakeGroup(l.ranks, 1, 1, 1);
  } else {
    p.group = MakeGroup(l.gpus_per_node, 1, l.ranks / l.gpus_per_node, 1);
  }
  return p;
}

// Bytes rank `rank` must receive and send per step, by hand: stage k gets
// each micro-batch's activations from k - 1 (activation_bytes + m) and
// gradients from k + 1 (gradient_bytes + m); it sends the other two.
TransferCounts Expected(const Pipeline& p, int stage) {
  const int m = p.micro_batches;
  const int64_t shift = static_cast<int64_t>(m) * (m - 1) / 2;  // 0+..+m-1
  const int64_t act = m * p.activation_bytes + shift;
  const int64_t grad = m * p.gradient_bytes + shift;
  const int last = static_cast<int>(p.ranks.size()) - 1;
  TransferCounts want;
  want.received_bytes = (stage > 0 ? act : 0) + (stage < last ? grad : 0);
  want.sent_bytes = (stage < last ? act : 0) + (stage > 0 ? grad : 0);
  want.checked_bytes = want.received_bytes;
  want.wrong_bytes = 0;
  return want;
}

int StageOf(const Pipeline& p, int rank) {
  for (size_t k = 0; k < p.ranks.size(); ++k) {
    for (int r : p.ranks[k]) {
      if (r == rank) return static_cast<int>(k);
    }
  }
  return -1;
}

// Replays two steps (counters restart with each) and checks the last.
absl::Status RunRank(const Layout& l, const Pipeline& p, int rank) {
  const int world = l.stages * l.ranks;
  const Mesh mesh{std::min(world, l.gpus_per_node),
                  std::max(1, world / l.gpus_per_node)};
  CpuOptions options;
  options.watchdog_s = 60;
  options.channels = 1;  // the empty platform names none
  absl::StatusOr<std::unique_ptr<Backend>> b =
      MakeCpuBackend(mesh, Platform(), options);
  if (!b.ok()) return b.status();
  const Schedule s = PipelineSchedule(p);
  for (int step = 0; step < 2; ++step) {
    absl::StatusOr<std::vector<OpTiming>> t = ReplaySchedule(s, b->get());
    if (!t.ok()) return t.status();
  }
  const TransferCounts got = (*b)->Transfers();
  const TransferCounts want = Expected(p, StageOf(p, rank));
  if (got.received_bytes != want.received_bytes ||
      got.sent_bytes != want.sent_bytes ||
      got.checked_bytes != want.checked_bytes || got.wrong_bytes != 0) {
    return absl::InternalError(absl::StrCat(
        "stage ", StageOf(p, rank), ": received ", got.received_bytes,
        " bytes (want ", want.received_bytes, "), sent ", got.sent_bytes,
        " (want ", want.sent_bytes, "), checked ", got.checked_bytes,
        ", wrong ", got.wrong_bytes));
  }
  // The stage's all-reduce, data-checked over its own group.
  CollectiveCall call = s.ops(s.ops_size() - 1).collective();
  absl::StatusOr<CheckResult> c = (*b)->RunChecked(call, 1);
  if (!c.ok()) return c.status();
  if (c->checked == 0 || c->wrong != 0) {
    return absl::InternalError(
        absl::StrCat("the stages' all-reduce: ", c->wrong, " of ", c->checked,
                     " elements wrong"));
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  MpiSession mpi(&argc, &argv);
  if (argc < 4) {
    if (mpi.rank() == 0) {
      std::fprintf(stderr, "usage: programs_check S R GPUS_PER_NODE [split]\n");
    }
    return 2;
  }
  Layout l{std::atoi(argv[1]), std::atoi(argv[2]), std::atoi(argv[3]),
           argc > 4 && std::string(argv[4]) == "split"};
  absl::Status st;
  absl::StatusOr<Pipeline> p = PipelineOf(l);
  if (!p.ok()) {
    st = p.status();
  } else if (mpi.size() != l.stages * l.ranks) {
    st = absl::InvalidArgumentError(
        absl::StrCat("launch ", l.stages * l.ranks, " ranks"));
  } else {
    st = RunRank(l, *p, mpi.rank());
  }
  if (AnyFailed(mpi.rank(), st)) return 1;
  if (mpi.rank() == 0) {
    std::printf(
        "programs_check: %d stages x %d ranks%s on nodes of %d: every "
        "rank's sent and received bytes as counted by hand, every byte "
        "checked, none wrong\n",
        l.stages, l.ranks, l.split ? " (split over the nodes)" : "",
        l.gpus_per_node);
  }
  return 0;
}

}  // namespace
}  // namespace shardsim::hw

int main(int argc, char** argv) { return shardsim::hw::Main(argc, argv); }

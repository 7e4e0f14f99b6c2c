// How shardsim-hw replays a schedule of several programs on one rank,
// decided before any transport moves a byte: which ops the rank issues,
// where it posts each receive and from whom, and what it refuses (a send
// between programs of different sizes, sends that would deadlock, a
// collective across programs). A recording backend stands in for the
// transports; tests/hw/programs_check.cc runs the same schedules on the
// CPU transport under MPI.
#include "hw/runtime/runtime.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "hw/runtime/rank_schedule.h"
#include "sim/memory/allocation.h"
#include "tests/hw/pipeline_schedule.h"

namespace shardsim::hw {
namespace {

// Records every call as a line: "op 3", "send 3 to 4", "recv 3 from 0",
// "wait 3 on COMPUTE".
class RecordingBackend : public Backend {
 public:
  RecordingBackend(const Mesh& mesh, int rank) : mesh_(mesh), rank_(rank) {}
  std::string name() const override { return "recording"; }
  int rank() const override { return rank_; }
  const Mesh& mesh() const override { return mesh_; }
  absl::Status Start() override { return absl::OkStatus(); }
  absl::Status Compute(int op_id, const KernelList&, Stream) override {
    return Log(absl::StrCat("op ", op_id));
  }
  absl::Status Collective(int op_id, const CollectiveCall&, Stream) override {
    return Log(absl::StrCat("op ", op_id));
  }
  absl::Status Memory(int op_id, const MemoryOp&, Stream) override {
    return Log(absl::StrCat("op ", op_id));
  }
  absl::Status Send(int op_id, const PointToPoint& send, int peer,
                    Stream) override {
    counts_.sent_bytes += send.bytes();
    return Log(absl::StrCat("send ", op_id, " to ", peer));
  }
  absl::Status Recv(int op_id, const PointToPoint& send, int peer,
                    Stream) override {
    counts_.received_bytes += send.bytes();
    return Log(absl::StrCat("recv ", op_id, " from ", peer));
  }
  absl::Status SendRecv(int op_id, const PointToPoint& send, int peer, Stream,
                        const std::vector<PostedRecv>& recvs) override {
    counts_.sent_bytes += send.bytes();
    std::string line = absl::StrCat("send ", op_id, " to ", peer);
    for (const PostedRecv& r : recvs) {
      counts_.received_bytes += r.send->bytes();
      absl::StrAppend(&line, " + recv ", r.op_id, " from ", r.peer);
    }
    return Log(line);
  }
  TransferCounts Transfers() const override { return counts_; }
  absl::Status WaitFor(int op_id, Stream stream) override {
    return Log(absl::StrCat("wait ", op_id, " on ", Stream_Name(stream)));
  }
  absl::StatusOr<std::vector<OpTiming>> Finish() override {
    return std::vector<OpTiming>();
  }
  absl::StatusOr<CheckResult> RunChecked(const CollectiveCall&, int) override {
    return absl::UnimplementedError("not in these tests");
  }
  absl::StatusOr<double> TimeCollective(const CollectiveCall&, int, int,
                                        int) override {
    return absl::UnimplementedError("not in these tests");
  }
  std::vector<std::pair<std::string, std::string>> Environment()
      const override {
    return {};
  }
  const std::vector<std::string>& log() const { return log_; }

 private:
  absl::Status Log(std::string line) {
    log_.push_back(std::move(line));
    return absl::OkStatus();
  }
  Mesh mesh_;
  int rank_;
  TransferCounts counts_;
  std::vector<std::string> log_;
};

// Two programs of one rank each on a node of two GPUs: program 0 computes
// (op 0) and sends 1000 bytes (op 1) to program 1, whose compute (op 2)
// depends on the send.
Schedule ComputeSendCompute() {
  Schedule s;
  s.add_programs()->add_ranks(0);
  s.add_programs()->add_ranks(1);
  s.add_kernel_lists();
  Op* c0 = AddOp(&s, 0, COMPUTE, "forward");
  c0->mutable_compute()->set_kernel_list(0);
  Op* send = AddOp(&s, 0, REDUCE, "send");
  send->add_deps(0);
  send->mutable_send()->set_bytes(1000);
  send->mutable_send()->set_peer_program(1);
  Op* c1 = AddOp(&s, 1, COMPUTE, "forward");
  c1->mutable_compute()->set_kernel_list(0);
  c1->add_deps(1);
  return s;
}

std::vector<std::string> Replayed(const Schedule& s, const Mesh& mesh,
                                  int rank) {
  RecordingBackend b(mesh, rank);
  absl::StatusOr<std::vector<OpTiming>> t = ReplaySchedule(s, &b);
  EXPECT_TRUE(t.ok()) << t.status();
  return b.log();
}

std::string ReplayError(const Schedule& s, const Mesh& mesh, int rank) {
  RecordingBackend b(mesh, rank);
  absl::StatusOr<std::vector<OpTiming>> t = ReplaySchedule(s, &b);
  EXPECT_FALSE(t.ok());
  EXPECT_TRUE(b.log().empty()) << "refused after the backend was used";
  return std::string(t.status().message());
}

TEST(ReplaySchedule, EachRankRunsItsOwnProgramAndReceivesBeforeTheDependent) {
  const Schedule s = ComputeSendCompute();
  const Mesh mesh{2, 1};
  // The sender: its own ops, the send to rank 1 after the compute, which
  // is on another stream.
  EXPECT_EQ(
      Replayed(s, mesh, 0),
      (std::vector<std::string>{"op 0", "wait 0 on REDUCE", "send 1 to 1"}));
  // The receiver: the receive from rank 0 first, then the compute waits
  // for the bytes.
  EXPECT_EQ(
      Replayed(s, mesh, 1),
      (std::vector<std::string>{"recv 1 from 0", "wait 1 on COMPUTE", "op 2"}));
}

TEST(ReplaySchedule, RankIOfAProgramPairsWithRankIOfItsPeer) {
  // Program 0 on ranks 3 and 0, program 1 on ranks 1 and 2 (listed order,
  // not rank order, pairs them): 3 with 1, 0 with 2.
  Schedule s = ComputeSendCompute();
  s.mutable_programs(0)->clear_ranks();
  s.mutable_programs(0)->add_ranks(3);
  s.mutable_programs(0)->add_ranks(0);
  s.mutable_programs(1)->clear_ranks();
  s.mutable_programs(1)->add_ranks(1);
  s.mutable_programs(1)->add_ranks(2);
  const Mesh mesh{4, 1};
  EXPECT_EQ(Replayed(s, mesh, 3).back(), "send 1 to 1");
  EXPECT_EQ(Replayed(s, mesh, 0).back(), "send 1 to 2");
  EXPECT_EQ(Replayed(s, mesh, 1).front(), "recv 1 from 3");
  EXPECT_EQ(Replayed(s, mesh, 2).front(), "recv 1 from 0");
}

TEST(ReplaySchedule, ASendNoOpWaitsForIsReceivedAfterTheLastOp) {
  Schedule s = ComputeSendCompute();
  s.mutable_ops(2)->clear_deps();
  EXPECT_EQ(Replayed(s, Mesh{2, 1}, 1),
            (std::vector<std::string>{"op 2", "recv 1 from 0"}));
}

TEST(ReplaySchedule, ASendBetweenProgramsOfDifferentSizesIsAClearError) {
  Schedule s = ComputeSendCompute();
  s.mutable_programs(1)->add_ranks(2);
  const std::string e = ReplayError(s, Mesh{3, 1}, 0);
  EXPECT_NE(e.find("program 0 has 1 ranks, the program it sends to (1) 2"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("a send pairs them one to one"), std::string::npos) << e;
}

// Two programs of one rank each, "stage 0" and "stage 1", and no ops.
Schedule TwoStages() {
  Schedule s;
  for (int p = 0; p < 2; ++p) {
    Program* prog = s.add_programs();
    prog->set_role(absl::StrCat("stage ", p));
    prog->add_ranks(p);
  }
  s.add_kernel_lists();
  return s;
}

void AddSend(Schedule* s, int from, const char* label, int64_t bytes) {
  Op* send = AddOp(s, from, COMPUTE, label);
  send->mutable_send()->set_bytes(bytes);
  send->mutable_send()->set_peer_program(1 - from);
}

void AddComputeAfter(Schedule* s, int program, int dep) {
  Op* c = AddOp(s, program, COMPUTE, "compute");
  c->mutable_compute()->set_kernel_list(0);
  c->add_deps(dep);
}

TEST(ReplaySchedule, SendsReceivedInAnotherOrderThanSentAreRefused) {
  // Stage 0 sends A (op 0), then B (op 1); stage 1 needs B first (op 2),
  // then A (op 3). With sends that wait for their receive, stage 0 waits in
  // A while stage 1 waits for B.
  Schedule s = TwoStages();
  AddSend(&s, 0, "send A", 64);
  AddSend(&s, 0, "send B", 10);
  AddComputeAfter(&s, 1, 1);
  AddComputeAfter(&s, 1, 0);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string e = ReplayError(s, Mesh{2, 1}, rank);
    EXPECT_NE(e.find("deadlock"), std::string::npos) << e;
    EXPECT_NE(e.find("program 0 (stage 0) waits to send op 0 (send A) to "
                     "program 1; program 1 (stage 1) waits to receive op 1 "
                     "(send B) from program 0"),
              std::string::npos)
        << e;
  }
  // Needed in the order sent, they run.
  s.mutable_ops(2)->set_deps(0, 0);
  s.mutable_ops(3)->set_deps(0, 1);
  EXPECT_EQ(
      Replayed(s, Mesh{2, 1}, 1),
      (std::vector<std::string>{"recv 0 from 0", "wait 0 on COMPUTE", "op 2",
                                "recv 1 from 0", "wait 1 on COMPUTE", "op 3"}));
}

TEST(ReplaySchedule, TwoProgramsThatBothSendFirstPostTheirTransfersTogether) {
  // Each stage sends to the other before it needs the other's send, as
  // 1F1B's steady state does: each posts its receive in one group with its
  // send (Megatron's send_forward_recv_backward), and both complete.
  Schedule s = TwoStages();
  AddSend(&s, 0, "send", 64);
  AddSend(&s, 1, "send", 64);
  AddComputeAfter(&s, 0, 1);
  AddComputeAfter(&s, 1, 0);
  EXPECT_EQ(Replayed(s, Mesh{2, 1}, 0),
            (std::vector<std::string>{"send 0 to 1 + recv 1 from 1",
                                      "wait 1 on COMPUTE", "op 2"}));
  EXPECT_EQ(Replayed(s, Mesh{2, 1}, 1),
            (std::vector<std::string>{"send 1 to 0 + recv 0 from 0",
                                      "wait 0 on COMPUTE", "op 3"}));
  // Stage 1 computing on stage 0's bytes before it sends is a pipeline:
  // its receive comes first, alone; stage 0's receive joins its send.
  Schedule ok = TwoStages();
  AddSend(&ok, 0, "send", 64);
  AddComputeAfter(&ok, 1, 0);
  AddSend(&ok, 1, "send back", 64);
  AddComputeAfter(&ok, 0, 2);
  EXPECT_EQ(Replayed(ok, Mesh{2, 1}, 1),
            (std::vector<std::string>{"recv 0 from 0", "wait 0 on COMPUTE",
                                      "op 1", "send 2 to 0"}));
  EXPECT_EQ(Replayed(ok, Mesh{2, 1}, 0),
            (std::vector<std::string>{"send 0 to 1 + recv 2 from 1",
                                      "wait 2 on COMPUTE", "op 3"}));
}

TEST(ReplaySchedule, ARingOfStagesThatAllSendFirstIsRefused) {
  // Three stages, each sending to the next, then needing the previous
  // one's bytes: a receive joins a send only to the same program, so each
  // waits in its send while no receive is posted.
  Schedule s;
  for (int p = 0; p < 3; ++p) {
    Program* prog = s.add_programs();
    prog->set_role(absl::StrCat("stage ", p));
    prog->add_ranks(p);
  }
  s.add_kernel_lists();
  for (int p = 0; p < 3; ++p) {
    Op* send = AddOp(&s, p, COMPUTE, "send");
    send->mutable_send()->set_bytes(64);
    send->mutable_send()->set_peer_program((p + 1) % 3);
  }
  for (int p = 0; p < 3; ++p) AddComputeAfter(&s, p, (p + 2) % 3);
  const std::string e = ReplayError(s, Mesh{3, 1}, 0);
  EXPECT_NE(e.find("deadlock"), std::string::npos) << e;
  EXPECT_NE(e.find("program 0 (stage 0) waits to send op 0 (send) to "
                   "program 1"),
            std::string::npos)
      << e;
}

TEST(ReplaySchedule, ACollectiveAcrossProgramsIsRefused) {
  // Ranks 0 and 1 are programs 0 and 1; a collective over the node's two
  // GPUs would hold both.
  Schedule s = ComputeSendCompute();
  Op* ar = AddOp(&s, 0, REDUCE, "AR");
  ar->mutable_collective()->set_op(ALL_REDUCE);
  ar->mutable_collective()->set_bytes(64);
  ar->mutable_collective()->set_algorithm(RING);
  *ar->mutable_collective()->mutable_group() = MakeGroup(2, 1, 1, 1);
  const std::string e = ReplayError(s, Mesh{2, 1}, 0);
  EXPECT_NE(e.find("holds ranks of programs 0 and 1"), std::string::npos) << e;
}

TEST(ReplaySchedule, OneProgramRunsEveryOpAndSendsNothing) {
  Schedule s = ComputeSendCompute();
  s.clear_programs();
  s.mutable_ops(2)->set_program(0);
  EXPECT_NE(ReplayError(s, Mesh{2, 1}, 0)
                .find("a send in a schedule of one "
                      "program"),
            std::string::npos);
  s.mutable_ops(1)->clear_send();
  s.mutable_ops(1)->mutable_compute()->set_kernel_list(0);
  s.mutable_ops(1)->set_stream(COMPUTE);
  EXPECT_EQ(Replayed(s, Mesh{2, 1}, 1),
            (std::vector<std::string>{"op 0", "op 1", "op 2"}));
}

// The pipeline of tests/hw/pipeline_schedule.h at `stages` x `ranks`:
// per rank, the bytes it sends and receives, by hand: stage k receives
// every micro-batch's activations from k - 1 (activation_bytes + m) and
// gradients from k + 1 (gradient_bytes + m), and sends the others.
void ExpectPipelineBytes(int stages, int ranks) {
  Pipeline p;
  for (int k = 0; k < stages; ++k) {
    p.ranks.emplace_back();
    for (int i = 0; i < ranks; ++i) p.ranks[k].push_back(k * ranks + i);
  }
  p.group = MakeGroup(ranks, 1, 1, 1);
  p.micro_batches = 3;
  const Schedule s = PipelineSchedule(p);
  const Mesh mesh{stages * ranks, 1};
  // Over micro-batches 0, 1, 2: 3 x bytes + 0 + 1 + 2.
  const int64_t act = 3 * p.activation_bytes + 3;
  const int64_t grad = 3 * p.gradient_bytes + 3;
  for (int k = 0; k < stages; ++k) {
    for (int r : p.ranks[k]) {
      RecordingBackend b(mesh, r);
      ASSERT_TRUE(ReplaySchedule(s, &b).ok()) << "rank " << r;
      const int64_t from_left = k > 0 ? act : 0;
      const int64_t from_right = k + 1 < stages ? grad : 0;
      const int64_t to_right = k + 1 < stages ? act : 0;
      const int64_t to_left = k > 0 ? grad : 0;
      EXPECT_EQ(b.Transfers().received_bytes, from_left + from_right)
          << "rank " << r;
      EXPECT_EQ(b.Transfers().sent_bytes, to_right + to_left) << "rank " << r;
    }
  }
}

TEST(ReplaySchedule, PipelineRanksMoveTheBytesOfTheirSends) {
  ExpectPipelineBytes(2, 4);
  ExpectPipelineBytes(4, 2);
}

TEST(PlanAllocations, EachProgramPlansItsOwnMemoryOps) {
  // Stage k holds (k + 1) x 1000 bytes per micro-batch, every micro-batch's
  // at once (all forwards before any backward): 3 x (k + 1) x 1000.
  Pipeline p;
  p.ranks = {{0}, {1}, {2}};
  p.group = MakeGroup(1, 1, 1, 1);
  p.micro_batches = 3;
  const Schedule s = PipelineSchedule(p);
  for (int k = 0; k < 3; ++k) {
    absl::StatusOr<AllocationPlan> plan = PlanAllocations(s, k);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->peak_bytes, 3 * (k + 1) * 1000) << "stage " << k;
    EXPECT_EQ(plan->allocations.size(), 3u);
  }
}

TEST(PlannedPeaks, EachRankHasItsProgramsPlan) {
  // Stages of ranks {0, 3}, {1, 4}, {2, 5}: stage k's ranks plan
  // 2 micro-batches x (k + 1) x 1000 bytes.
  Pipeline p;
  p.ranks = {{0, 3}, {1, 4}, {2, 5}};
  p.group = MakeGroup(1, 1, 2, 1);
  absl::StatusOr<std::vector<int64_t>> peaks =
      PlannedPeaks(PipelineSchedule(p), Mesh{3, 2});
  ASSERT_TRUE(peaks.ok()) << peaks.status();
  EXPECT_EQ(*peaks, (std::vector<int64_t>{2000, 4000, 6000, 2000, 4000, 6000}));
  // One program: every rank the whole schedule's plan.
  Schedule one;
  Op* a = AddOp(&one, 0, COMPUTE, "alloc");
  a->mutable_memory()->set_delta_bytes(700);
  a->mutable_memory()->set_buffer("P shard");
  peaks = PlannedPeaks(one, Mesh{2, 1});
  ASSERT_TRUE(peaks.ok()) << peaks.status();
  EXPECT_EQ(*peaks, (std::vector<int64_t>{700, 700}));
}

}  // namespace
}  // namespace shardsim::hw

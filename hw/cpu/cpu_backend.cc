#include "hw/cpu/cpu_backend.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hw/runtime/fault.h"
#include "hw/runtime/rank_program.h"
#include "hw/runtime/watchdog.h"
#include "sim/collective/check_data.h"
#include "sim/collective/plan.h"
#include "sim/collective/plan_cache.h"
#include "sim/compute/kernel_time.h"

namespace shardsim::hw {
namespace {

constexpr int kTagSpan = 32000;  // MPI guarantees tags up to 32767

// How many collective runs the tags tell apart: what MPI_TAG_UB leaves
// above kTagSpan (Open MPI: 2^31 - 1, so 67108; the minimum, 32767: 1).
int64_t SeqSpan() {
  int* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  const int64_t tag_ub = flag && ub != nullptr ? *ub : 32767;
  return std::max<int64_t>(1, (tag_ub + 1) / kTagSpan);
}

// Point-to-point payloads are MPI_BYTE messages of at most this many
// bytes (an MPI count is an int); a larger send is several, in order.
constexpr int64_t kChunkBytes = int64_t{1} << 30;

// Byte `i` of what world rank `sender` writes for send op `op_id`: a
// splitmix64 hash of the three, so a payload landing from the wrong sender,
// of the wrong op, or shifted by any number of bytes is seen as wrong.
uint8_t PatternByte(int sender, int op_id, int64_t i) {
  uint64_t z = (static_cast<uint64_t>(sender) << 48) ^
               (static_cast<uint64_t>(op_id) << 24) ^
               static_cast<uint64_t>(i / 8);
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<uint8_t>(z >> (8 * (i % 8)));
}

// What a collective run waits on, for the watchdog's message.
std::string CallName(const CollectiveCall& call) {
  return absl::StrCat(CollectiveOp_Name(call.op()), " ",
                      Algorithm_Name(call.algorithm()), " of ", call.bytes(),
                      " bytes over group ", GroupName(call.group()));
}

// This rank's part of one plan: the rank program (hw/runtime/rank_program.h)
// and where each of its transfers sits in its step's payload buffer (every
// transfer is staged there, sends and local moves included).
struct RankPlan {
  CollectiveOp op = OP_UNSPECIFIED;
  int64_t count = 0;
  int member = 0;  // this rank's index in its group
  int size = 0;
  int root = 0;
  std::vector<int> members;  // world rank of each member
  RankProgram program;
  std::vector<std::vector<int64_t>> slots;  // by step, by transfer
  std::vector<int64_t> payload;             // elements, by step
};

class CpuBackend : public Backend {
 public:
  CpuBackend(const Mesh& mesh, const Platform& platform,
             const CpuOptions& options, int rank)
      : mesh_(mesh),
        platform_(platform),
        options_(options),
        rank_(rank),
        seq_span_(SeqSpan()),
        fault_(options.fault, rank),
        plans_(mesh_, platform_,
               [this](const CollectiveCall& call, Plan plan) {
                 return MakeRankPlan(call, plan);
               }),
        watchdog_(rank, options.watchdog_s) {
    MPI_Comm_dup(MPI_COMM_WORLD, &p2p_);  // every rank makes its backend
  }
  ~CpuBackend() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && p2p_ != MPI_COMM_NULL) MPI_Comm_free(&p2p_);
  }

  std::string name() const override { return "cpu"; }
  int rank() const override { return rank_; }
  const Mesh& mesh() const override { return mesh_; }

  absl::Status Start() override {
    timings_.clear();
    done_.clear();
    transfers_ = TransferCounts{0, 0, 0, 0, 0, 0};
    {
      ArmScope arm(&watchdog_, "the barrier that starts a step");
      MPI_Barrier(MPI_COMM_WORLD);
    }
    t0_ = MPI_Wtime();
    return absl::OkStatus();
  }

  absl::Status Compute(int op_id, const KernelList& kernels, Stream) override {
    const double start = MPI_Wtime() - t0_;
    const double s =
        ComputeOpCost(kernels, platform_).seconds * options_.compute_scale;
    if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
    timings_.push_back({op_id, start, MPI_Wtime() - t0_, {}});
    done_.insert(op_id);
    return absl::OkStatus();
  }

  absl::Status Collective(int op_id, const CollectiveCall& call,
                          Stream) override {
    const double start = MPI_Wtime() - t0_;
    const int channels =
        options_.channels > 0 ? options_.channels : platform_.channels();
    absl::StatusOr<const RankPlan*> plan = PlanFor(call, channels);
    if (!plan.ok()) return plan.status();
    // Every collective of the step carries the oracle's values (int64,
    // exact) and is checked where it lands, as the sweeps' RunChecked
    // does; the counts are this rank's, summed over ranks by the caller.
    const RankPlan& rp = **plan;
    std::vector<int64_t>& buffer = Buffer(rp.count);
    const DataCheck check(rp.op, rp.size, rp.root, rp.count,
                          CheckValues::Exact());
    check.Fill(rp.member, buffer.data());
    if (absl::Status s = Execute(
            rp, &buffer, absl::StrCat("op ", op_id, ": ", CallName(call)));
        !s.ok()) {
      return s;
    }
    const DataCheck::Count c = check.Verify(rp.member, buffer.data());
    transfers_.checked_elements += c.checked;
    transfers_.wrong_elements += c.wrong;
    timings_.push_back({op_id, start, MPI_Wtime() - t0_, {}});
    done_.insert(op_id);
    return absl::OkStatus();
  }

  // Host buffers only: the allocation plan (sim/memory/allocation.h) is
  // reported from the schedule; no device memory is allocated here.
  absl::Status Memory(int op_id, const MemoryOp&, Stream) override {
    done_.insert(op_id);
    return absl::OkStatus();
  }

  // Synchronous sends (MPI_Issend: done only once the receiver has
  // matched the message): the rendezvous that the runtime's ordering rule
  // is proven against, so a schedule it let through that could still hang
  // hangs here too (and the watchdog names it) rather than passing on
  // buffered sends. Receives land in host buffers, every byte checked
  // against the sender's pattern.
  absl::Status Send(int op_id, const PointToPoint& send, int peer,
                    Stream) override {
    return Exchange({{op_id, &send, peer, true}});
  }
  absl::Status Recv(int op_id, const PointToPoint& send, int peer,
                    Stream) override {
    return Exchange({{op_id, &send, peer, false}});
  }
  absl::Status SendRecv(int op_id, const PointToPoint& send, int peer, Stream,
                        const std::vector<PostedRecv>& recvs) override {
    std::vector<P2p> group = {{op_id, &send, peer, true}};
    for (const PostedRecv& r : recvs) {
      group.push_back({r.op_id, r.send, r.peer, false});
    }
    return Exchange(group);
  }

  TransferCounts Transfers() const override { return transfers_; }

  absl::Status WaitFor(int op_id, Stream) override {
    // Streams are serialized: an op enqueued earlier is already done.
    if (!done_.count(op_id)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cpu backend: wait for op ", op_id, ", which was never enqueued"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<OpTiming>> Finish() override { return timings_; }

  absl::StatusOr<CheckResult> RunChecked(const CollectiveCall& call,
                                         int channels) override {
    absl::StatusOr<const RankPlan*> got = PlanFor(call, channels);
    if (!got.ok()) return got.status();
    const RankPlan& plan = **got;
    const int64_t n = plan.count;
    const int m = plan.member, p = plan.size;
    // The oracle every executor of plans uses (check_data.h), int64 values.
    const DataCheck check(plan.op, p, plan.root, n, CheckValues::Exact());
    std::vector<int64_t> buffer(n);
    check.Fill(m, buffer.data());
    const std::string what = absl::StrCat("checked ", CallName(call));
    if (absl::Status s = Execute(plan, &buffer, what); !s.ok()) return s;
    // Expected values need no communication: every input is known.
    if (!DataCheck::Supports(plan.op)) {
      return absl::InvalidArgumentError("cpu backend: unknown op");
    }
    const DataCheck::Count c = check.Verify(m, buffer.data());
    int64_t counts[2] = {c.checked, c.wrong};
    int64_t total[2];
    ArmScope arm(&watchdog_,
                 absl::StrCat("the sum of checked counts after ", what));
    MPI_Allreduce(counts, total, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    return CheckResult{total[0], total[1]};
  }

  absl::StatusOr<double> TimeCollective(const CollectiveCall& call,
                                        int channels, int warmup,
                                        int iters) override {
    if (iters < 1) return absl::InvalidArgumentError("--iters: must be >= 1");
    absl::StatusOr<const RankPlan*> plan = PlanFor(call, channels);
    if (!plan.ok()) return plan.status();
    std::vector<int64_t> buffer((*plan)->count, 1);
    const std::string what = absl::StrCat("timed ", CallName(call));
    for (int i = 0; i < warmup; ++i) {
      if (absl::Status s = Execute(**plan, &buffer, what); !s.ok()) return s;
    }
    {
      ArmScope arm(&watchdog_, absl::StrCat("the barrier before ", what));
      MPI_Barrier(MPI_COMM_WORLD);
    }
    const double start = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
      if (absl::Status s = Execute(**plan, &buffer, what); !s.ok()) return s;
    }
    double mine = (MPI_Wtime() - start) / iters, worst = 0;
    ArmScope arm(&watchdog_, absl::StrCat("the max of times after ", what));
    MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
  }

  std::vector<std::pair<std::string, std::string>> Environment()
      const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string mpi(version, len);
    while (!mpi.empty() && (mpi.back() == '\n' || mpi.back() == '\0')) {
      mpi.pop_back();
    }
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Get_processor_name(host, &len);
    return {{"backend", "cpu (MPI host buffers, int64 elements)"},
            {"mpi", mpi},
            {"host", std::string(host, len)},
            {"ranks", absl::StrCat(mesh_.gpus())},
            {"mesh", absl::StrCat(mesh_.nodes, " nodes x ", mesh_.gpus_per_node,
                                  " ranks")},
            {"compute_scale", absl::StrCat(options_.compute_scale)}};
  }

 private:
  std::vector<int64_t>& Buffer(int64_t count) {
    if (static_cast<int64_t>(scratch_.size()) < count) scratch_.resize(count);
    scratch_.resize(count);
    return scratch_;
  }

  // int64 elements: the data check compares them exactly.
  absl::StatusOr<const RankPlan*> PlanFor(const CollectiveCall& call,
                                          int channels) {
    const int64_t count = std::max<int64_t>(1, (call.bytes() + 7) / 8);
    return plans_.Get(call, count, channels);
  }

  absl::StatusOr<RankPlan> MakeRankPlan(const CollectiveCall& call,
                                        const Plan& plan) const {
    const std::vector<int> members = GroupMembers(call.group(), mesh_, rank_);
    RankPlan mine;
    mine.op = call.op();
    mine.count = plan.count;
    mine.size = static_cast<int>(members.size());
    mine.root = call.root();
    for (int i = 0; i < mine.size; ++i) {
      if (members[i] == rank_) mine.member = i;
    }
    mine.members = members;
    mine.program = BuildRankProgram(plan, mine.member);
    for (size_t k = 0; k < mine.program.steps.size(); ++k) {
      std::vector<int64_t> slots;
      int64_t payload = 0;
      for (const RankOp& op : mine.program.steps[k]) {
        if (op.offset < 0 || op.offset + op.count > plan.count) {
          return absl::InternalError(
              absl::StrCat("cpu backend: plan range outside the buffer at "
                           "step ",
                           mine.program.step_ids[k]));
        }
        slots.push_back(payload);
        payload += op.count;
      }
      mine.slots.push_back(std::move(slots));
      mine.payload.push_back(payload);
    }
    return mine;
  }

  // One side of a point-to-point transfer.
  struct P2p {
    int op_id;
    const PointToPoint* send;
    int peer;
    bool sending;
  };

  // Posts every transfer of `group` at once (receives first), on the
  // point-to-point communicator in chunks of kChunkBytes, and waits for
  // all; the tag is the send op's id, so a receive never takes another
  // op's bytes.
  absl::Status Exchange(const std::vector<P2p>& group) {
    const double start = MPI_Wtime() - t0_;
    payloads_.resize(group.size());
    std::string what;
    for (size_t g = 0; g < group.size(); ++g) {
      const P2p& t = group[g];
      std::vector<uint8_t>& data = payloads_[g];
      data.assign(t.send->bytes(), 0);
      if (t.sending) {
        for (int64_t i = 0; i < t.send->bytes(); ++i) {
          data[i] = PatternByte(rank_, t.op_id, i);
        }
      }
      absl::StrAppend(&what, what.empty() ? "" : ", ",
                      t.sending ? "sending op " : "receiving op ", t.op_id,
                      "'s ", t.send->bytes(), " bytes of ", t.send->tensor(),
                      t.sending ? " to rank " : " from rank ", t.peer);
    }
    ArmScope arm(&watchdog_, what);
    requests_.clear();
    for (bool sending : {false, true}) {
      for (size_t g = 0; g < group.size(); ++g) {
        if (group[g].sending != sending) continue;
        if (absl::Status s = Post(group[g], &payloads_[g]); !s.ok()) return s;
      }
    }
    if (MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(),
                    MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
      return absl::InternalError(
          absl::StrCat("cpu backend: MPI_Waitall failed ", what));
    }
    for (size_t g = 0; g < group.size(); ++g) {
      const P2p& t = group[g];
      if (t.sending) {
        transfers_.sent_bytes += t.send->bytes();
      } else {
        int64_t wrong = 0;
        for (int64_t i = 0; i < t.send->bytes(); ++i) {
          wrong += payloads_[g][i] != PatternByte(t.peer, t.op_id, i) ? 1 : 0;
        }
        transfers_.received_bytes += t.send->bytes();
        transfers_.checked_bytes += t.send->bytes();
        transfers_.wrong_bytes += wrong;
      }
      timings_.push_back({t.op_id, start, MPI_Wtime() - t0_, {}});
      done_.insert(t.op_id);
    }
    return absl::OkStatus();
  }

  // Posts one transfer's chunks into requests_.
  absl::Status Post(const P2p& t, std::vector<uint8_t>* data) {
    const int tag = t.op_id % (kTagSpan + 1);
    const int64_t n = static_cast<int64_t>(data->size());
    // One message at least: a send of 0 bytes is still matched.
    const int64_t chunks =
        std::max<int64_t>(1, (n + kChunkBytes - 1) / kChunkBytes);
    for (int64_t k = 0; k < chunks; ++k) {
      const int64_t at = k * kChunkBytes;
      const int count = static_cast<int>(std::min(kChunkBytes, n - at));
      uint8_t* bytes = data->data() + at;
      requests_.emplace_back();
      const int rc = t.sending ? MPI_Issend(bytes, count, MPI_BYTE, t.peer, tag,
                                            p2p_, &requests_.back())
                               : MPI_Irecv(bytes, count, MPI_BYTE, t.peer, tag,
                                           p2p_, &requests_.back());
      if (rc != MPI_SUCCESS) {
        return absl::InternalError(
            absl::StrCat("cpu backend: op ", t.op_id, ": MPI ",
                         t.sending ? "send to" : "receive from", " rank ",
                         t.peer, " failed"));
      }
    }
    return absl::OkStatus();
  }

  // One collective run; `what` names it for the watchdog.
  absl::Status Execute(const RankPlan& plan, std::vector<int64_t>* buffer,
                       const std::string& what) {
    // Every rank numbers its runs alike, skipped ones included.
    const int64_t seq = seq_++ % seq_span_;
    if (fault_.SkipThisRun()) return absl::OkStatus();
    ArmScope arm(&watchdog_, what);
    int64_t* buf = buffer->data();
    const RankProgram& prog = plan.program;
    if (prog.uses_switch) switch_.assign(plan.count, 0);  // member 0 only
    for (size_t k = 0; k < prog.steps.size(); ++k) {
      const std::vector<RankOp>& ops = prog.steps[k];
      const std::vector<int64_t>& slot = plan.slots[k];
      if (static_cast<int64_t>(payload_.size()) < plan.payload[k]) {
        payload_.resize(plan.payload[k]);
      }
      int64_t* pay = payload_.data();
      // Snapshot: everything this rank sends leaves before anything lands.
      for (size_t i = 0; i < ops.size(); ++i) {
        const RankOp& op = ops[i];
        if (op.kind == RankOp::kRecv) continue;
        const int64_t* src = op.src_switch ? switch_.data() : buf;
        std::memcpy(pay + slot[i], src + op.offset, op.count * sizeof(int64_t));
      }
      requests_.clear();
      for (size_t i = 0; i < ops.size(); ++i) {
        const RankOp& op = ops[i];
        if (op.kind == RankOp::kLocal) continue;
        const int peer = plan.members[op.peer];
        const int tag = static_cast<int>(seq * kTagSpan + op.index % kTagSpan);
        requests_.emplace_back();
        int rc = op.kind == RankOp::kSend
                     ? MPI_Isend(pay + slot[i], static_cast<int>(op.count),
                                 MPI_INT64_T, peer, tag, MPI_COMM_WORLD,
                                 &requests_.back())
                     : MPI_Irecv(pay + slot[i], static_cast<int>(op.count),
                                 MPI_INT64_T, peer, tag, MPI_COMM_WORLD,
                                 &requests_.back());
        if (rc != MPI_SUCCESS) {
          return absl::InternalError(absl::StrCat(
              "cpu backend: MPI send/recv to rank ", peer, " failed"));
        }
      }
      if (!requests_.empty() &&
          MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(),
                      MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
        return absl::InternalError("cpu backend: MPI_Waitall failed");
      }
      for (size_t i = 0; i < ops.size(); ++i) {
        const RankOp& op = ops[i];
        if (op.kind == RankOp::kSend) continue;
        int64_t* dst = (op.dst_switch ? switch_.data() : buf) + op.offset;
        const int64_t* src = pay + slot[i];
        if (op.reduce) {
          // Unsigned adds: timed runs repeat on the same buffer and may wrap.
          for (int64_t e = 0; e < op.count; ++e) {
            dst[e] = static_cast<int64_t>(static_cast<uint64_t>(dst[e]) +
                                          static_cast<uint64_t>(src[e]));
          }
        } else {
          std::memcpy(dst, src, op.count * sizeof(int64_t));
        }
      }
    }
    if (fault_.CorruptThisRun()) {
      for (int64_t& v : *buffer) ++v;
    }
    return absl::OkStatus();
  }

  Mesh mesh_;
  Platform platform_;
  CpuOptions options_;
  int rank_ = 0;
  const int64_t seq_span_;
  int64_t seq_ = 0;  // collective runs so far
  FaultInjector fault_;
  double t0_ = 0;
  std::vector<OpTiming> timings_;
  std::unordered_set<int> done_;
  PlanCache<RankPlan> plans_;
  std::vector<int64_t> scratch_, switch_, payload_;
  std::vector<MPI_Request> requests_;
  // Point-to-point sends match on their own communicator (a duplicate of
  // MPI_COMM_WORLD), never with a collective's messages of the same tag.
  MPI_Comm p2p_ = MPI_COMM_NULL;
  std::vector<std::vector<uint8_t>> payloads_;  // per transfer of a group
  TransferCounts transfers_;
  Watchdog watchdog_;  // last: its thread stops before the rest goes
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> MakeCpuBackend(
    const Mesh& mesh, const Platform& platform, const CpuOptions& options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    return absl::FailedPreconditionError("cpu backend: MPI is not initialized");
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != mesh.gpus()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cpu backend: the MPI world has ", size, " ranks but the mesh has ",
        mesh.gpus(), " GPUs (", mesh.nodes, " nodes x ", mesh.gpus_per_node,
        "); launch one rank per GPU"));
  }
  if (options.compute_scale < 0) {
    return absl::InvalidArgumentError("--compute-scale: must be >= 0");
  }
  if (!(options.watchdog_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--watchdog-s: must be > 0, got ", options.watchdog_s));
  }
  return std::unique_ptr<Backend>(
      new CpuBackend(mesh, platform, options, rank));
}

}  // namespace shardsim::hw

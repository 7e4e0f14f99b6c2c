#include "hw/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hw/cuda/check.h"
#include "hw/cuda/environment.h"
#include "hw/cuda/kernel_runner.h"
#include "hw/cuda/kernels.h"
#include "hw/runtime/fault.h"
#include "hw/runtime/kernel_work.h"
#include "hw/runtime/rank_program.h"
#include "hw/runtime/watchdog.h"
#include "sim/collective/check_data.h"
#include "sim/collective/plan.h"
#include "sim/collective/plan_cache.h"

namespace shardsim::hw {
namespace {

// How one element of a call moves and adds.
struct ElemInfo {
  ncclDataType_t nccl;
  ElemType elem;
  int bytes;
};

ElemInfo InfoOf(DType dtype) {
  switch (dtype) {
    case FP32:
      return {ncclFloat32, ElemType::kFloat32, 4};
    case INT8:
      return {ncclInt8, ElemType::kInt8, 1};
    // Two int4 values a byte: moved (and, meaninglessly, summed) as bytes.
    case INT4:
      return {ncclUint8, ElemType::kUint8, 1};
    case BF16:
    default:
      return {ncclBfloat16, ElemType::kBfloat16, 2};
  }
}
// Checked runs use float: small integer inputs add exactly.
constexpr ElemInfo kCheckInfo = {ncclFloat32, ElemType::kFloat32, 4};

// Streams: COMPUTE, GATHER, REDUCE, CONTEXT.
constexpr int kStreams = 4;

absl::StatusOr<int> StreamIndex(Stream s) {
  switch (s) {
    case COMPUTE:
      return 0;
    case GATHER:
      return 1;
    case REDUCE:
      return 2;
    case CONTEXT:
      return 3;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("stream ", Stream_Name(s),
                       " is not COMPUTE, GATHER, REDUCE or CONTEXT"));
  }
}

// What a collective waits on, for the watchdog's message.
std::string CallName(const CollectiveCall& call) {
  return absl::StrCat(CollectiveOp_Name(call.op()), " ",
                      Algorithm_Name(call.algorithm()), " of ", call.bytes(),
                      " bytes over group ", GroupName(call.group()));
}

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
};

class CudaBackend : public Backend {
 public:
  CudaBackend(const Mesh& mesh, const Platform& platform,
              const CudaOptions& options, int rank, int world)
      : mesh_(mesh),
        platform_(platform),
        options_(options),
        rank_(rank),
        world_(world),
        fault_(options.fault, rank),
        programs_(mesh_, platform_,
                  [this](const CollectiveCall& call, Plan plan) {
                    return MakeProgram(call, plan);
                  }) {}
  ~CudaBackend() override;

  absl::Status Init(int local_rank);

  std::string name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  const Mesh& mesh() const override { return mesh_; }

  absl::Status Start() override;
  absl::Status Prepare(const Schedule& schedule) override;
  absl::Status Compute(int op_id, const KernelList& kernels,
                       Stream stream) override;
  absl::Status Memory(int op_id, const MemoryOp& op, Stream stream) override;
  MemoryUse MeasuredMemory() const override { return memory_use_; }
  absl::Status Collective(int op_id, const CollectiveCall& call,
                          Stream stream) override;
  absl::Status Send(int op_id, const PointToPoint& send, int peer,
                    Stream stream) override;
  absl::Status Recv(int op_id, const PointToPoint& send, int peer,
                    Stream stream) override;
  absl::Status SendRecv(int op_id, const PointToPoint& send, int peer,
                        Stream stream,
                        const std::vector<PostedRecv>& recvs) override;
  TransferCounts Transfers() const override { return transfers_; }
  absl::Status WaitFor(int op_id, Stream stream) override;
  absl::StatusOr<std::vector<OpTiming>> Finish() override;
  absl::StatusOr<CheckResult> RunChecked(const CollectiveCall& call,
                                         int channels) override;
  absl::StatusOr<double> TimeCollective(const CollectiveCall& call,
                                        int channels, int warmup,
                                        int iters) override;
  std::vector<std::pair<std::string, std::string>> Environment() const override;

 private:
  struct GroupComm {
    ncclComm_t comm = nullptr;
    int size = 0;
    int member = 0;  // this rank's index = its plan member index
  };
  struct OpEvents {
    int op_id;
    cudaEvent_t start;
    cudaEvent_t end;
    std::vector<cudaEvent_t> kernels;  // kernel_timeline: start, end pairs
  };
  // Per stream: the collective data, receive staging and switch buffers.
  struct StreamBuffers {
    DeviceBuffer data, stage, sw;
  };

  absl::Status InitWorldComm();
  // Several programs: every communicator the schedule's collectives use,
  // and the point-to-point one, made before the first step.
  absl::Status PrepareComms(const Schedule& schedule);
  // Enqueues one transfer of `bytes` with world rank `peer` on the
  // point-to-point stream, between op `op_id`'s events.
  absl::Status EnqueueTransfer(int op_id, int64_t bytes, int peer, bool send);
  absl::StatusOr<GroupComm*> GetComm(const Group& group, int lane);
  absl::StatusOr<const RankProgram*> GetProgram(const CollectiveCall& call,
                                                int channels, int64_t count);
  // This rank's part of a call's plan (its member index from the mesh, as
  // GetComm's communicator has it).
  absl::StatusOr<RankProgram> MakeProgram(const CollectiveCall& call,
                                          const Plan& plan) const;
  absl::Status Ensure(DeviceBuffer* b, size_t bytes, cudaStream_t stream);
  // Enqueues one collective on stream `si` over `count` elements of the
  // stream's data buffer (allocated by the caller).
  absl::Status Enqueue(const CollectiveCall& call, int si, const ElemInfo& ei,
                       int64_t count, int channels);
  absl::Status EnqueuePlan(const RankProgram& prog, int si, const ElemInfo& ei,
                           int64_t count, GroupComm* main, GroupComm* aux);
  absl::Status NewOpEvents(int op_id, OpEvents** out);
  int64_t LiveBytes() const;
  absl::Status Synchronize();
  void AbortAll();
  std::string AsyncError();

  const Mesh mesh_;
  const Platform platform_;
  const CudaOptions options_;
  const int rank_;
  const int world_;
  int device_ = -1;
  FaultInjector fault_;

  ncclComm_t world_comm_ = nullptr;
  std::mutex comms_mu_;  // guards comms_ against the watchdog
  std::map<std::tuple<int, int, int, int, int>, GroupComm> comms_;
  PlanCache<RankProgram> programs_;

  cudaStream_t streams_[kStreams] = {};
  cudaStream_t aux_streams_[kStreams] = {};  // HO-Ring's inter-node ring
  cudaEvent_t fork_[kStreams] = {};
  cudaEvent_t join_[kStreams] = {};
  cublasHandle_t cublas_[kStreams] = {};
  StreamBuffers buffers_[kStreams];
  std::vector<void*> retired_;            // grown-out buffers, freed once idle
  std::unique_ptr<KernelRunner> runner_;  // the COMPUTE stream's kernels
  cudaMemPool_t pool_ = nullptr;          // the plan's buffers
  std::map<int, void*> live_;             // alloc op id -> its buffer
  std::map<int, int64_t> live_bytes_;     // alloc op id -> its bytes
  MemoryUse memory_use_;

  // Point-to-point transfers: one communicator over the world (its ranks
  // are world ranks) and one stream, so sends and receives run in the
  // order the runtime posts them (rank_schedule.h's ordering rule).
  ncclComm_t p2p_comm_ = nullptr;
  cudaStream_t p2p_stream_ = nullptr;
  cudaEvent_t p2p_fork_ = nullptr;
  DeviceBuffer p2p_send_, p2p_recv_;
  TransferCounts transfers_{0, 0, -1, -1, -1, -1};  // no data check here

  cudaEvent_t start_event_ = nullptr;
  bool started_ = false;
  std::vector<OpEvents> events_;
  std::map<int, size_t> event_index_;  // op id -> events_ index

  std::unique_ptr<Watchdog> watchdog_;
};

CudaBackend::~CudaBackend() {
  watchdog_.reset();
  if (device_ >= 0) {
    cudaDeviceSynchronize();
    for (auto& [key, gc] : comms_) ncclCommDestroy(gc.comm);
    if (p2p_comm_ != nullptr) ncclCommDestroy(p2p_comm_);
    if (world_comm_ != nullptr) ncclCommDestroy(world_comm_);
    cudaFree(p2p_send_.ptr);
    cudaFree(p2p_recv_.ptr);
    if (p2p_fork_ != nullptr) cudaEventDestroy(p2p_fork_);
    if (p2p_stream_ != nullptr) cudaStreamDestroy(p2p_stream_);
    for (OpEvents& e : events_) {
      cudaEventDestroy(e.start);
      cudaEventDestroy(e.end);
      for (cudaEvent_t k : e.kernels) cudaEventDestroy(k);
    }
    if (start_event_ != nullptr) cudaEventDestroy(start_event_);
    for (void* p : retired_) cudaFree(p);
    for (StreamBuffers& b : buffers_) {
      cudaFree(b.data.ptr);
      cudaFree(b.stage.ptr);
      cudaFree(b.sw.ptr);
    }
    for (auto& [id, p] : live_) cudaFree(p);
    runner_.reset();
    if (pool_ != nullptr) cudaMemPoolDestroy(pool_);
    for (int i = 0; i < kStreams; ++i) {
      if (cublas_[i] != nullptr) cublasDestroy(cublas_[i]);
      if (fork_[i] != nullptr) cudaEventDestroy(fork_[i]);
      if (join_[i] != nullptr) cudaEventDestroy(join_[i]);
      if (streams_[i] != nullptr) cudaStreamDestroy(streams_[i]);
      if (aux_streams_[i] != nullptr) cudaStreamDestroy(aux_streams_[i]);
    }
  }
}

absl::Status CudaBackend::Init(int local_rank) {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank_, ": no CUDA device visible (cudaGetDeviceCount: ",
        e != cudaSuccess ? cudaGetErrorString(e) : "0 devices", ")"));
  }
  const int device = local_rank % devices;
  CUDA_CHECK(cudaSetDevice(device));
  device_ = device;
  for (int i = 0; i < kStreams; ++i) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&streams_[i], cudaStreamNonBlocking));
    CUDA_CHECK(
        cudaStreamCreateWithFlags(&aux_streams_[i], cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&fork_[i], cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&join_[i], cudaEventDisableTiming));
    CUBLAS_CHECK(cublasCreate(&cublas_[i]));
    CUBLAS_CHECK(cublasSetStream(cublas_[i], streams_[i]));
  }
  CUDA_CHECK(cudaStreamCreateWithFlags(&p2p_stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&p2p_fork_, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreate(&start_event_));
  absl::StatusOr<std::unique_ptr<KernelRunner>> runner =
      KernelRunner::Create(streams_[0], cublas_[0], rank_);
  if (!runner.ok()) return runner.status();
  runner_ = *std::move(runner);
  // The plan's buffers come from their own pool, which keeps what it has
  // (release threshold: all) so that its high-water mark is the step's.
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device_;
  CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
  uint64_t keep_all = UINT64_MAX;
  CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold,
                                     &keep_all));

  watchdog_ = std::make_unique<Watchdog>(
      rank_, options_.watchdog_s,
      Watchdog::Hooks{[this] { AbortAll(); }, [this] { return AsyncError(); }});
  return absl::OkStatus();
}

// The world communicator, on first use (every rank's first collective) and
// not in Init: a rank whose device setup failed then fails the setup that
// all ranks agree on (AnyFailed), instead of leaving the others waiting on
// it in ncclCommInitRank.
absl::Status CudaBackend::InitWorldComm() {
  if (world_comm_ != nullptr) return absl::OkStatus();
  ArmScope arm(watchdog_.get(), "the NCCL world communicator's setup");
  ncclUniqueId id;
  if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD));
  ncclComm_t comm = nullptr;
  NCCL_CHECK(ncclCommInitRank(&comm, world_, id, rank_));
  std::lock_guard<std::mutex> l(comms_mu_);
  world_comm_ = comm;
  return absl::OkStatus();
}

void CudaBackend::AbortAll() {
  std::lock_guard<std::mutex> l(comms_mu_);
  for (auto& [key, gc] : comms_) ncclCommAbort(gc.comm);
  if (p2p_comm_ != nullptr) ncclCommAbort(p2p_comm_);
  if (world_comm_ != nullptr) ncclCommAbort(world_comm_);
}

std::string CudaBackend::AsyncError() {
  std::lock_guard<std::mutex> l(comms_mu_);
  auto check = [](ncclComm_t c) -> std::string {
    ncclResult_t r = ncclSuccess;
    if (ncclCommGetAsyncError(c, &r) != ncclSuccess) return "";
    if (r == ncclSuccess || r == ncclInProgress) return "";
    return ncclGetErrorString(r);
  };
  if (world_comm_ != nullptr) {
    if (std::string s = check(world_comm_); !s.empty()) return s;
  }
  if (p2p_comm_ != nullptr) {
    if (std::string s = check(p2p_comm_); !s.empty()) return s;
  }
  for (auto& [key, gc] : comms_) {
    if (std::string s = check(gc.comm); !s.empty()) return s;
  }
  return "";
}

// One communicator per group shape and lane (lanes 0..2: the streams'
// collectives; 3..5: HO-Ring's inter-node transfers of stream lane - 3), so
// that concurrent streams never share a communicator. Created on first use,
// in program order, which every rank shares: ncclCommSplit is collective
// over the world communicator.
absl::StatusOr<CudaBackend::GroupComm*> CudaBackend::GetComm(const Group& group,
                                                             int lane) {
  const auto key =
      std::make_tuple(group.intra_size(), group.intra_stride(),
                      group.inter_size(), group.inter_stride(), lane);
  {
    std::lock_guard<std::mutex> l(comms_mu_);
    auto it = comms_.find(key);
    if (it != comms_.end()) return &it->second;
  }
  if (absl::Status s = ValidateGroup(group, mesh_); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank_, ": group ", GroupName(group), ": ", s.message()));
  }
  HW_RETURN_IF_ERROR(InitWorldComm());
  const std::vector<int> members = GroupMembers(group, mesh_, rank_);
  const int color = GroupFirstMember(group, mesh_, rank_);
  GroupComm gc;
  NCCL_CHECK(ncclCommSplit(world_comm_, color, rank_, &gc.comm, nullptr));
  NCCL_CHECK(ncclCommCount(gc.comm, &gc.size));
  NCCL_CHECK(ncclCommUserRank(gc.comm, &gc.member));
  const int expected = static_cast<int>(
      std::find(members.begin(), members.end(), rank_) - members.begin());
  if (gc.size != static_cast<int>(members.size()) || gc.member != expected) {
    return absl::InternalError(
        absl::StrCat("rank ", rank_, ": communicator of group ",
                     GroupName(group), " has rank ", gc.member, " of ", gc.size,
                     ", expected member ", expected, " of ", members.size()));
  }
  std::lock_guard<std::mutex> l(comms_mu_);
  return &comms_.emplace(key, gc).first->second;
}

absl::StatusOr<const RankProgram*> CudaBackend::GetProgram(
    const CollectiveCall& call, int channels, int64_t count) {
  absl::StatusOr<const RankProgram*> program =
      programs_.Get(call, count, channels);
  if (!program.ok()) {
    return absl::Status(
        program.status().code(),
        absl::StrCat("rank ", rank_, ": ", program.status().message()));
  }
  return program;
}

absl::StatusOr<RankProgram> CudaBackend::MakeProgram(const CollectiveCall& call,
                                                     const Plan& plan) const {
  const std::vector<int> members = GroupMembers(call.group(), mesh_, rank_);
  if (plan.shape.size() != static_cast<int>(members.size())) {
    return absl::InternalError(absl::StrCat("group of ", members.size(),
                                            " members, plan shape of ",
                                            plan.shape.size()));
  }
  const int member = static_cast<int>(
      std::find(members.begin(), members.end(), rank_) - members.begin());
  return BuildRankProgram(plan, member);
}

// Grows a buffer, zeroed on `stream` (the stream that will use it; a plain
// cudaMemset would not be ordered with non-blocking streams). The old one
// may still be used by enqueued work, so it is kept until the next
// Synchronize().
absl::Status CudaBackend::Ensure(DeviceBuffer* b, size_t bytes,
                                 cudaStream_t stream) {
  if (b->bytes >= bytes) return absl::OkStatus();
  if (b->ptr != nullptr) retired_.push_back(b->ptr);
  b->ptr = nullptr;
  b->bytes = 0;
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, bytes));
  // Zeros: timed runs of bf16 sums never meet NaNs.
  CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream));
  b->ptr = p;
  b->bytes = bytes;
  return absl::OkStatus();
}

absl::Status CudaBackend::Enqueue(const CollectiveCall& call, int si,
                                  const ElemInfo& ei, int64_t count,
                                  int channels) {
  absl::StatusOr<GroupComm*> gc = GetComm(call.group(), si);
  if (!gc.ok()) return gc.status();
  const int p = (*gc)->size;
  const int me = (*gc)->member;
  if (call.op() == BROADCAST && (call.root() < 0 || call.root() >= p)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": BROADCAST root ", call.root(),
                     " outside group of ", p));
  }
  if (fault_.SkipThisRun()) return absl::OkStatus();
  if (count <= 0) return absl::OkStatus();
  cudaStream_t s = streams_[si];
  char* buf = static_cast<char*>(buffers_[si].data.ptr);
  ncclComm_t comm = (*gc)->comm;
  // NCCL's collectives need equal chunks; other counts run the RING plan.
  const bool native =
      call.algorithm() == RING && (call.op() == BROADCAST || count % p == 0);
  if (native) {
    const int64_t per = count / p;
    switch (call.op()) {
      case ALL_GATHER:
        NCCL_CHECK(ncclAllGather(buf + me * per * ei.bytes, buf, per, ei.nccl,
                                 comm, s));
        return absl::OkStatus();
      case REDUCE_SCATTER:
        NCCL_CHECK(ncclReduceScatter(buf, buf + me * per * ei.bytes, per,
                                     ei.nccl, ncclSum, comm, s));
        return absl::OkStatus();
      case ALL_REDUCE:
        NCCL_CHECK(ncclAllReduce(buf, buf, count, ei.nccl, ncclSum, comm, s));
        return absl::OkStatus();
      case BROADCAST:
        NCCL_CHECK(
            ncclBroadcast(buf, buf, count, ei.nccl, call.root(), comm, s));
        return absl::OkStatus();
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("rank ", rank_, ": collective op ",
                         CollectiveOp_Name(call.op()), " unknown"));
    }
  }
  absl::StatusOr<const RankProgram*> prog = GetProgram(call, channels, count);
  if (!prog.ok()) return prog.status();
  GroupComm* aux = nullptr;
  if ((*prog)->split_streams) {
    absl::StatusOr<GroupComm*> a = GetComm(call.group(), kStreams + si);
    if (!a.ok()) return a.status();
    aux = *a;
  }
  return EnqueuePlan(**prog, si, ei, count, *gc, aux);
}

absl::Status CudaBackend::EnqueuePlan(const RankProgram& prog, int si,
                                      const ElemInfo& ei, int64_t count,
                                      GroupComm* main, GroupComm* aux) {
  StreamBuffers& b = buffers_[si];
  const size_t esz = ei.bytes;
  cudaStream_t s = streams_[si];
  cudaStream_t as = aux_streams_[si];
  HW_RETURN_IF_ERROR(
      Ensure(&b.stage, std::max<int64_t>(prog.stage_elems, 1) * esz, s));
  if (prog.uses_switch) {
    HW_RETURN_IF_ERROR(Ensure(&b.sw, count * esz, s));
  }
  char* data = static_cast<char*>(b.data.ptr);
  char* stage = static_cast<char*>(b.stage.ptr);
  char* sw = static_cast<char*>(b.sw.ptr);
  if (prog.uses_switch) {
    CUDA_CHECK(cudaMemsetAsync(sw, 0, count * esz, s));
  }
  auto src_of = [&](const RankOp& op) {
    return (op.src_switch ? sw : data) + op.offset * esz;
  };
  auto dst_of = [&](const RankOp& op) {
    return (op.dst_switch ? sw : data) + op.offset * esz;
  };
  // Posts the sends and receives of `ops` with inter == `inter` (all of them
  // when `inter` < 0) as one NCCL group.
  auto post = [&](const std::vector<RankOp>& ops, int inter, ncclComm_t comm,
                  cudaStream_t stream) -> absl::Status {
    bool any = false;
    for (const RankOp& op : ops) {
      if (op.kind != RankOp::kLocal && (inter < 0 || op.inter == (inter == 1)))
        any = true;
    }
    if (!any) return absl::OkStatus();
    NCCL_CHECK(ncclGroupStart());
    for (const RankOp& op : ops) {
      if (op.kind == RankOp::kLocal) continue;
      if (inter >= 0 && op.inter != (inter == 1)) continue;
      if (op.kind == RankOp::kSend) {
        const ncclResult_t r =
            ncclSend(src_of(op), op.count, ei.nccl, op.peer, comm, stream);
        if (r != ncclSuccess) {
          ncclGroupEnd();
          NCCL_CHECK(r);
        }
      } else {
        const ncclResult_t r = ncclRecv(stage + op.stage_off * esz, op.count,
                                        ei.nccl, op.peer, comm, stream);
        if (r != ncclSuccess) {
          ncclGroupEnd();
          NCCL_CHECK(r);
        }
      }
    }
    NCCL_CHECK(ncclGroupEnd());
    return absl::OkStatus();
  };

  for (const std::vector<RankOp>& ops : prog.steps) {
    // Sources are read as the step found them: sends read the buffers
    // directly, because every write of the step comes after the NCCL kernel
    // (receives land in staging); local moves are snapshot first.
    for (const RankOp& op : ops) {
      if (op.kind != RankOp::kLocal) continue;
      CUDA_CHECK(cudaMemcpyAsync(stage + op.stage_off * esz, src_of(op),
                                 op.count * esz, cudaMemcpyDeviceToDevice, s));
    }
    if (aux != nullptr) {
      // HO-Ring: intra-node transfers on the stream, inter-node ones on the
      // auxiliary stream and communicator, both in flight at once.
      CUDA_CHECK(cudaEventRecord(fork_[si], s));
      CUDA_CHECK(cudaStreamWaitEvent(as, fork_[si], 0));
      HW_RETURN_IF_ERROR(post(ops, 0, main->comm, s));
      HW_RETURN_IF_ERROR(post(ops, 1, aux->comm, as));
      CUDA_CHECK(cudaEventRecord(join_[si], as));
      CUDA_CHECK(cudaStreamWaitEvent(s, join_[si], 0));
    } else {
      HW_RETURN_IF_ERROR(post(ops, -1, main->comm, s));
    }
    // Then write: copies overwrite, reduces add (never both on one element
    // in one step, so the order does not matter).
    for (const RankOp& op : ops) {
      if (op.kind == RankOp::kSend) continue;
      const char* from = stage + op.stage_off * esz;
      if (op.reduce) {
        CUDA_CHECK(LaunchAdd(ei.elem, dst_of(op), from, op.count, s));
      } else {
        CUDA_CHECK(cudaMemcpyAsync(dst_of(op), from, op.count * esz,
                                   cudaMemcpyDeviceToDevice, s));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Start() {
  ArmScope arm(watchdog_.get(), "the streams and barrier that start a step");
  HW_RETURN_IF_ERROR(Synchronize());
  for (OpEvents& e : events_) {
    CUDA_CHECK(cudaEventDestroy(e.start));
    CUDA_CHECK(cudaEventDestroy(e.end));
    for (cudaEvent_t k : e.kernels) CUDA_CHECK(cudaEventDestroy(k));
  }
  events_.clear();
  uint64_t zero = 0;
  CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero));
  runner_->Rewind();
  event_index_.clear();
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  CUDA_CHECK(cudaEventRecord(start_event_, streams_[0]));
  // Every stream starts after the start event.
  for (int i = 1; i < kStreams; ++i) {
    CUDA_CHECK(cudaStreamWaitEvent(streams_[i], start_event_, 0));
  }
  CUDA_CHECK(cudaStreamWaitEvent(p2p_stream_, start_event_, 0));
  transfers_.sent_bytes = 0;
  transfers_.received_bytes = 0;
  started_ = true;
  return absl::OkStatus();
}

absl::Status CudaBackend::NewOpEvents(int op_id, OpEvents** out) {
  if (!started_) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank_, ": op ", op_id, " before Start()"));
  }
  if (event_index_.count(op_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": op ", op_id, " enqueued twice"));
  }
  OpEvents e{op_id, nullptr, nullptr, {}};
  CUDA_CHECK(cudaEventCreate(&e.start));
  CUDA_CHECK(cudaEventCreate(&e.end));
  event_index_[op_id] = events_.size();
  events_.push_back(e);
  *out = &events_.back();
  return absl::OkStatus();
}

// The kernel workspace is sized once, before any step is timed.
absl::Status CudaBackend::Prepare(const Schedule& schedule) {
  HW_RETURN_IF_ERROR(runner_->Reserve(WorkspaceBytes(schedule)));
  if (schedule.programs_size() <= 1) return absl::OkStatus();
  return PrepareComms(schedule);
}

// ncclCommSplit is collective over the world communicator, so every rank
// must split in one order. With one program every rank meets the shapes in
// the same order (GetComm splits on first use); with several, a rank sees
// only its own program's ops, and programs meet shapes in different orders.
// So every rank splits here, for every collective of every program, in the
// schedule's order (a rank of another program gets a communicator of its
// own group of that shape, which it never uses), then the point-to-point
// communicator.
absl::Status CudaBackend::PrepareComms(const Schedule& schedule) {
  ArmScope arm(watchdog_.get(), "the communicators of a schedule's programs");
  for (const Op& op : schedule.ops()) {
    if (!op.has_collective()) continue;
    absl::StatusOr<int> si = StreamIndex(op.stream());
    if (!si.ok()) return si.status();
    const Group& g = op.collective().group();
    if (absl::StatusOr<GroupComm*> c = GetComm(g, *si); !c.ok()) {
      return c.status();
    }
    // HO-Ring's plans run their inter-node transfers on a second lane
    // (BuildRankProgram's split_streams).
    if (op.collective().algorithm() == HORING) {
      if (absl::StatusOr<GroupComm*> c = GetComm(g, kStreams + *si); !c.ok()) {
        return c.status();
      }
    }
  }
  HW_RETURN_IF_ERROR(InitWorldComm());
  ncclComm_t comm = nullptr;
  NCCL_CHECK(ncclCommSplit(world_comm_, 0, rank_, &comm, nullptr));
  int me = -1;
  NCCL_CHECK(ncclCommUserRank(comm, &me));
  std::lock_guard<std::mutex> l(comms_mu_);
  p2p_comm_ = comm;
  if (me != rank_) {
    return absl::InternalError(absl::StrCat("rank ", rank_,
                                            ": the point-to-point "
                                            "communicator has it as rank ",
                                            me));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::EnqueueTransfer(int op_id, int64_t bytes, int peer,
                                          bool send) {
  if (p2p_comm_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank_, ": op ", op_id,
        ": a point-to-point transfer before Prepare() made its communicator"));
  }
  OpEvents* ev = nullptr;
  HW_RETURN_IF_ERROR(NewOpEvents(op_id, &ev));
  DeviceBuffer* buf = send ? &p2p_send_ : &p2p_recv_;
  HW_RETURN_IF_ERROR(Ensure(buf, std::max<int64_t>(bytes, 1), p2p_stream_));
  CUDA_CHECK(cudaEventRecord(ev->start, p2p_stream_));
  // One transfer per NCCL call, outside any group: each is matched by the
  // peer's next transfer with this rank on this communicator, in the order
  // both post them (rank_schedule.h proves that order cannot deadlock).
  if (send) {
    NCCL_CHECK(
        ncclSend(buf->ptr, bytes, ncclUint8, peer, p2p_comm_, p2p_stream_));
    transfers_.sent_bytes += bytes;
  } else {
    NCCL_CHECK(
        ncclRecv(buf->ptr, bytes, ncclUint8, peer, p2p_comm_, p2p_stream_));
    transfers_.received_bytes += bytes;
  }
  CUDA_CHECK(cudaEventRecord(ev->end, p2p_stream_));
  return absl::OkStatus();
}

// The send runs as if on its own stream: after what that stream has
// enqueued, and before what it enqueues next.
absl::Status CudaBackend::Send(int op_id, const PointToPoint& send, int peer,
                               Stream stream) {
  absl::StatusOr<int> si = StreamIndex(stream);
  if (!si.ok()) return si.status();
  cudaStream_t s = streams_[*si];
  ArmScope arm(
      watchdog_.get(),
      absl::StrCat("op ", op_id, ": enqueueing a send to rank ", peer));
  CUDA_CHECK(cudaEventRecord(p2p_fork_, s));
  CUDA_CHECK(cudaStreamWaitEvent(p2p_stream_, p2p_fork_, 0));
  HW_RETURN_IF_ERROR(EnqueueTransfer(op_id, send.bytes(), peer, true));
  CUDA_CHECK(cudaStreamWaitEvent(s, events_[event_index_.at(op_id)].end, 0));
  return absl::OkStatus();
}

// The receive waits for nothing of this rank's; the ops that need its bytes
// wait for it (WaitFor(op_id, their stream)).
absl::Status CudaBackend::Recv(int op_id, const PointToPoint& send, int peer,
                               Stream) {
  ArmScope arm(
      watchdog_.get(),
      absl::StrCat("op ", op_id, ": enqueueing a receive from rank ", peer));
  return EnqueueTransfer(op_id, send.bytes(), peer, false);
}

// One NCCL group (ncclGroupStart/ncclGroupEnd) of the send and the
// receives, as torch.distributed.batch_isend_irecv issues Megatron's
// batched calls: every op's events span the group.
absl::Status CudaBackend::SendRecv(int op_id, const PointToPoint& send,
                                   int peer, Stream stream,
                                   const std::vector<PostedRecv>& recvs) {
  absl::StatusOr<int> si = StreamIndex(stream);
  if (!si.ok()) return si.status();
  if (p2p_comm_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank_, ": op ", op_id,
        ": a point-to-point transfer before Prepare() made its communicator"));
  }
  cudaStream_t s = streams_[*si];
  ArmScope arm(watchdog_.get(),
               absl::StrCat("op ", op_id, ": enqueueing a send to rank ", peer,
                            " with ", recvs.size(), " receive(s)"));
  CUDA_CHECK(cudaEventRecord(p2p_fork_, s));
  CUDA_CHECK(cudaStreamWaitEvent(p2p_stream_, p2p_fork_, 0));
  // Every op's events (looked up once all are made: events_ grows).
  std::vector<int> ids = {op_id};
  int64_t received = 0;
  for (const PostedRecv& r : recvs) {
    ids.push_back(r.op_id);
    received += r.send->bytes();
  }
  for (int id : ids) {
    OpEvents* ev = nullptr;
    HW_RETURN_IF_ERROR(NewOpEvents(id, &ev));
  }
  HW_RETURN_IF_ERROR(
      Ensure(&p2p_send_, std::max<int64_t>(send.bytes(), 1), p2p_stream_));
  HW_RETURN_IF_ERROR(
      Ensure(&p2p_recv_, std::max<int64_t>(received, 1), p2p_stream_));
  for (int id : ids) {
    CUDA_CHECK(
        cudaEventRecord(events_[event_index_.at(id)].start, p2p_stream_));
  }
  NCCL_CHECK(ncclGroupStart());
  NCCL_CHECK(ncclSend(p2p_send_.ptr, send.bytes(), ncclUint8, peer, p2p_comm_,
                      p2p_stream_));
  int64_t at = 0;
  for (const PostedRecv& r : recvs) {
    NCCL_CHECK(ncclRecv(static_cast<char*>(p2p_recv_.ptr) + at, r.send->bytes(),
                        ncclUint8, r.peer, p2p_comm_, p2p_stream_));
    at += r.send->bytes();
  }
  NCCL_CHECK(ncclGroupEnd());
  for (int id : ids) {
    CUDA_CHECK(cudaEventRecord(events_[event_index_.at(id)].end, p2p_stream_));
  }
  transfers_.sent_bytes += send.bytes();
  transfers_.received_bytes += received;
  CUDA_CHECK(cudaStreamWaitEvent(s, events_[event_index_.at(op_id)].end, 0));
  return absl::OkStatus();
}

absl::Status CudaBackend::Compute(int op_id, const KernelList& kernels,
                                  Stream stream) {
  if (stream != COMPUTE) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": compute op ", op_id, " on stream ",
                     Stream_Name(stream), "; kernels run on COMPUTE"));
  }
  cudaStream_t s = streams_[0];
  OpEvents* ev = nullptr;
  HW_RETURN_IF_ERROR(NewOpEvents(op_id, &ev));
  CUDA_CHECK(cudaEventRecord(ev->start, s));
  for (const Kernel& k : kernels.kernels()) {
    cudaEvent_t k0 = nullptr, k1 = nullptr;
    if (options_.kernel_timeline) {
      CUDA_CHECK(cudaEventCreate(&k0));
      CUDA_CHECK(cudaEventCreate(&k1));
      ev->kernels.push_back(k0);
      ev->kernels.push_back(k1);
      CUDA_CHECK(cudaEventRecord(k0, s));
    }
    HW_RETURN_IF_ERROR(runner_->Run(k));
    if (k1 != nullptr) CUDA_CHECK(cudaEventRecord(k1, s));
  }
  CUDA_CHECK(cudaEventRecord(ev->end, s));
  return absl::OkStatus();
}

absl::Status CudaBackend::Memory(int op_id, const MemoryOp& op, Stream stream) {
  absl::StatusOr<int> si = StreamIndex(stream);
  if (!si.ok()) return si.status();
  cudaStream_t s = streams_[*si];
  if (op.delta_bytes() < 0) {
    auto it = live_.find(op.frees());
    if (it == live_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank_, ": op ", op_id, " frees \"", op.buffer(),
                       "\" of op ", op.frees(), ", which holds no buffer"));
    }
    CUDA_CHECK(cudaFreeAsync(it->second, s));
    live_.erase(it);
    return absl::OkStatus();
  }
  void* p = nullptr;
  const cudaError_t e = cudaMallocFromPoolAsync(&p, op.delta_bytes(), pool_, s);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear it: the error is reported, not sticky
    // What the failed attempt left reserved in the pool goes back first, so
    // "free" is what the device really had.
    cudaStreamSynchronize(s);
    cudaMemPoolTrimTo(pool_, 0);
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "out of GPU memory: allocating \"%s\" wanted %d bytes (%.3f GB) "
        "with %d bytes (%.3f GB) free of %d; the plan's buffers held %d bytes "
        "(%.3f GB) (%s)",
        op.buffer(), op.delta_bytes(), op.delta_bytes() / 1e9, free, free / 1e9,
        total, LiveBytes(), LiveBytes() / 1e9, cudaGetErrorString(e)));
  }
  live_[op_id] = p;
  live_bytes_[op_id] = op.delta_bytes();
  if (op.buffer() == "OS shard") {
    // Adam's w, m and v: zeroed, so the first steps see finite values.
    CUDA_CHECK(cudaMemsetAsync(p, 0, op.delta_bytes(), s));
    runner_->SetOptimizerStates(p, op.delta_bytes());
  }
  return absl::OkStatus();
}

int64_t CudaBackend::LiveBytes() const {
  int64_t n = 0;
  for (const auto& [id, p] : live_) n += live_bytes_.at(id);
  return n;
}

absl::Status CudaBackend::Collective(int op_id, const CollectiveCall& call,
                                     Stream stream) {
  absl::StatusOr<int> si = StreamIndex(stream);
  if (!si.ok()) return si.status();
  // The first use of a shape splits a communicator, a collective call.
  ArmScope arm(watchdog_.get(),
               absl::StrCat("op ", op_id, ": enqueueing ", CallName(call)));
  OpEvents* ev = nullptr;
  HW_RETURN_IF_ERROR(NewOpEvents(op_id, &ev));
  const cudaEvent_t start = ev->start, end = ev->end;
  const ElemInfo ei = InfoOf(call.dtype());
  const int64_t count = call.bytes() / ei.bytes;
  const int channels = platform_.channels() > 0 ? platform_.channels() : 1;
  cudaStream_t s = streams_[*si];
  HW_RETURN_IF_ERROR(
      Ensure(&buffers_[*si].data, std::max<int64_t>(count, 1) * ei.bytes, s));
  CUDA_CHECK(cudaEventRecord(start, s));
  HW_RETURN_IF_ERROR(Enqueue(call, *si, ei, count, channels));
  CUDA_CHECK(cudaEventRecord(end, s));
  return absl::OkStatus();
}

absl::Status CudaBackend::WaitFor(int op_id, Stream stream) {
  absl::StatusOr<int> si = StreamIndex(stream);
  if (!si.ok()) return si.status();
  auto it = event_index_.find(op_id);
  if (it == event_index_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank_, ": WaitFor op ", op_id, ", which was not enqueued"));
  }
  CUDA_CHECK(cudaStreamWaitEvent(streams_[*si], events_[it->second].end, 0));
  return absl::OkStatus();
}

absl::Status CudaBackend::Synchronize() {
  for (int i = 0; i < kStreams; ++i) {
    CUDA_CHECK(cudaStreamSynchronize(streams_[i]));
    CUDA_CHECK(cudaStreamSynchronize(aux_streams_[i]));
  }
  CUDA_CHECK(cudaStreamSynchronize(p2p_stream_));
  for (void* p : retired_) CUDA_CHECK(cudaFree(p));
  retired_.clear();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<OpTiming>> CudaBackend::Finish() {
  ArmScope arm(watchdog_.get(), "the end of the step (every stream's work)");
  HW_RETURN_IF_ERROR(Synchronize());
  std::vector<OpTiming> out;
  out.reserve(events_.size());
  auto seconds = [&](cudaEvent_t e, double* t) -> absl::Status {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_event_, e));
    *t = ms * 1e-3;
    return absl::OkStatus();
  };
  for (const OpEvents& e : events_) {
    OpTiming t;
    t.op_id = e.op_id;
    HW_RETURN_IF_ERROR(seconds(e.start, &t.start_s));
    HW_RETURN_IF_ERROR(seconds(e.end, &t.end_s));
    for (size_t k = 0; k + 1 < e.kernels.size(); k += 2) {
      double k0 = 0, k1 = 0;
      HW_RETURN_IF_ERROR(seconds(e.kernels[k], &k0));
      HW_RETURN_IF_ERROR(seconds(e.kernels[k + 1], &k1));
      t.kernels.push_back({k0, k1});
    }
    out.push_back(std::move(t));
  }
  // What the step held at most, then give back what it kept (the model
  // states): the next step allocates them again from the pool.
  uint64_t high = 0;
  CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &high));
  size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  int64_t held = runner_->held_bytes();
  for (const StreamBuffers& b : buffers_) {
    held += b.data.bytes + b.stage.bytes + b.sw.bytes;
  }
  memory_use_.held_bytes = held;
  memory_use_.allocator_peak_bytes = static_cast<int64_t>(high) + held;
  memory_use_.device_used_bytes = static_cast<int64_t>(total - free);
  for (auto& [id, p] : live_) CUDA_CHECK(cudaFreeAsync(p, streams_[0]));
  live_.clear();
  live_bytes_.clear();
  HW_RETURN_IF_ERROR(Synchronize());
  started_ = false;
  return out;
}

absl::StatusOr<CheckResult> CudaBackend::RunChecked(const CollectiveCall& call,
                                                    int channels) {
  ArmScope arm(watchdog_.get(), absl::StrCat("checked ", CallName(call)));
  HW_RETURN_IF_ERROR(Synchronize());
  absl::StatusOr<GroupComm*> gc = GetComm(call.group(), 0);
  if (!gc.ok()) return gc.status();
  const int p = (*gc)->size;
  const int me = (*gc)->member;
  const int64_t n = call.bytes() / kCheckInfo.bytes;
  if (n <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": checked run of ", call.bytes(),
                     " bytes: fewer than one float element"));
  }
  // Float values whose sums stay exact (sim/collective/check_data.h).
  const DataCheck check(call.op(), p, call.root(), n, CheckValues::Float32(p));
  std::vector<float> host(n);
  check.Fill(me, host.data());
  StreamBuffers& b = buffers_[0];
  cudaStream_t s = streams_[0];
  HW_RETURN_IF_ERROR(Ensure(&b.data, n * kCheckInfo.bytes, s));
  CUDA_CHECK(cudaMemcpyAsync(b.data.ptr, host.data(), n * kCheckInfo.bytes,
                             cudaMemcpyHostToDevice, s));
  HW_RETURN_IF_ERROR(Synchronize());
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  HW_RETURN_IF_ERROR(Enqueue(call, 0, kCheckInfo, n, channels));
  CUDA_CHECK(cudaMemcpyAsync(host.data(), b.data.ptr, n * kCheckInfo.bytes,
                             cudaMemcpyDeviceToHost, s));
  HW_RETURN_IF_ERROR(Synchronize());

  if (!DataCheck::Supports(call.op())) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": collective op ",
                     CollectiveOp_Name(call.op()), " unknown"));
  }
  const DataCheck::Count c = check.Verify(me, host.data());
  int64_t counts[2] = {c.checked, c.wrong};
  int64_t total[2] = {0, 0};
  MPI_CHECK(
      MPI_Allreduce(counts, total, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
  CheckResult result;
  result.checked = total[0];
  result.wrong = total[1];
  return result;
}

absl::StatusOr<double> CudaBackend::TimeCollective(const CollectiveCall& call,
                                                   int channels, int warmup,
                                                   int iters) {
  if (iters < 1 || warmup < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_,
                     ": TimeCollective needs iters >= 1 and warmup >= 0, "
                     "got ",
                     iters, " and ", warmup));
  }
  ArmScope arm(watchdog_.get(), absl::StrCat("timed ", CallName(call)));
  HW_RETURN_IF_ERROR(Synchronize());
  const ElemInfo ei = InfoOf(call.dtype());
  const int64_t count = call.bytes() / ei.bytes;
  cudaStream_t s = streams_[0];
  HW_RETURN_IF_ERROR(
      Ensure(&buffers_[0].data, std::max<int64_t>(count, 1) * ei.bytes, s));
  for (int i = 0; i < warmup; ++i) {
    HW_RETURN_IF_ERROR(Enqueue(call, 0, ei, count, channels));
  }
  HW_RETURN_IF_ERROR(Synchronize());
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  cudaEvent_t t0 = nullptr, t1 = nullptr;
  CUDA_CHECK(cudaEventCreate(&t0));
  CUDA_CHECK(cudaEventCreate(&t1));
  absl::Status status = [&]() -> absl::Status {
    CUDA_CHECK(cudaEventRecord(t0, s));
    for (int i = 0; i < iters; ++i) {
      HW_RETURN_IF_ERROR(Enqueue(call, 0, ei, count, channels));
    }
    CUDA_CHECK(cudaEventRecord(t1, s));
    return Synchronize();
  }();
  float ms = 0;
  if (status.ok()) {
    status = cuda_check::Check(cudaEventElapsedTime(&ms, t0, t1), rank_,
                               "cudaEventElapsedTime(&ms, t0, t1)");
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  if (!status.ok()) return status;
  const double mean = ms * 1e-3 / iters;
  double max_mean = 0;
  MPI_CHECK(
      MPI_Allreduce(&mean, &max_mean, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return max_mean;
}

std::vector<std::pair<std::string, std::string>> CudaBackend::Environment()
    const {
  return CudaEnvironment(
      device_, rank_, world_, mesh_, cublas_[0],
#if defined(SHARDSIM_HAVE_CUDNN)
      "the IR's kernels: cuBLAS bf16 GEMMs, cuDNN fused attention, "
      "shardsim's memory-bound and Adam kernels"
#else
      "the IR's kernels: cuBLAS bf16 GEMMs, shardsim's memory-bound and Adam "
      "kernels (no cuDNN: fused attention refused)"
#endif
  );
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(
    const Mesh& mesh, const Platform& platform, const CudaOptions& options) {
  int rank_ = -1;  // MPI_CHECK names it
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  const int rank = rank_;
  int world = 0;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  if (world != mesh.gpus()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": ", world, " MPI ranks for a mesh of ",
                     mesh.gpus(), " GPUs (", mesh.nodes, " nodes x ",
                     mesh.gpus_per_node, "); launch one rank per GPU"));
  }
  if (options.watchdog_s <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": --watchdog-s: must be > 0, got ",
                     options.watchdog_s));
  }
  MPI_Comm local;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                                MPI_INFO_NULL, &local));
  int local_rank = 0;
  const absl::Status s = cuda_check::Check(
      cuda_check::MpiResult{MPI_Comm_rank(local, &local_rank)}, rank_,
      "MPI_Comm_rank(local, &local_rank)");
  MPI_Comm_free(&local);
  if (!s.ok()) return s;
  auto backend =
      std::make_unique<CudaBackend>(mesh, platform, options, rank, world);
  HW_RETURN_IF_ERROR(backend->Init(local_rank));
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace shardsim::hw

#include "sim/runner/distribute.h"

#include <climits>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#ifdef SHARDSIM_HAVE_MPI
// The C API only: Open MPI's (deprecated) C++ bindings stay out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace shardsim {
namespace {

// What a rank sends rank 0, one of:
//   'P' u64 points-in-its-sweep u64 count, then per point:
//       u64 index, u8 status code (0: OK), u64 length, row or message
//   'E' u8 status code, message    (it could not run the sweep)
// Integers little-endian, so that ranks need not share a byte order.
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

struct Reader {
  const std::string& in;
  size_t at = 0;
  bool ok = true;

  uint64_t U64() {
    if (in.size() - at < 8) {
      ok = false;
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) {
      v |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i]))
           << (8 * i);
    }
    at += 8;
    return v;
  }
  unsigned char U8() {
    if (at >= in.size()) {
      ok = false;
      return 0;
    }
    return static_cast<unsigned char>(in[at++]);
  }
  std::string Bytes(uint64_t n) {
    if (in.size() - at < n) {
      ok = false;
      return "";
    }
    std::string s = in.substr(at, n);
    at += n;
    return s;
  }
};

std::string EncodeError(const absl::Status& status) {
  std::string out = "E";
  out.push_back(static_cast<char>(status.code()));
  absl::StrAppend(&out, status.message());
  return out;
}

std::string EncodePoints(size_t points, const std::vector<size_t>& indices,
                         const std::vector<absl::StatusOr<std::string>>& rows) {
  std::string out = "P";
  PutU64(&out, points);
  PutU64(&out, rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    PutU64(&out, indices[i]);
    const absl::Status& s = rows[i].status();
    out.push_back(static_cast<char>(s.code()));
    const absl::string_view bytes =
        s.ok() ? absl::string_view(*rows[i]) : s.message();
    PutU64(&out, bytes.size());
    absl::StrAppend(&out, bytes);
  }
  return out;
}

// Rank `rank`'s part, decoded into `out` (every point of the sweep). An
// error when it could not run the sweep or does not agree on it.
absl::Status Decode(const std::string& in, int rank,
                    std::vector<absl::StatusOr<std::string>>* out) {
  auto from = [rank](absl::StatusCode code, absl::string_view message) {
    // Rank 0's own errors read as the serial run's.
    return rank == 0
               ? absl::Status(code, message)
               : absl::Status(code, absl::StrCat("rank ", rank, ": ", message));
  };
  Reader r{in};
  const unsigned char kind = r.U8();
  if (kind == 'E') {
    const auto code = static_cast<absl::StatusCode>(r.U8());
    return from(code, in.substr(r.at));
  }
  const uint64_t points = r.U64();
  const uint64_t count = r.U64();
  if (kind != 'P' || !r.ok) {
    return from(absl::StatusCode::kInternal, "sent unreadable results");
  }
  if (points != out->size()) {
    return from(absl::StatusCode::kFailedPrecondition,
                absl::StrCat("its sweep has ", points, " points, rank 0's has ",
                             out->size(),
                             "; every rank must read the same "
                             "scenario with the same flags"));
  }
  for (uint64_t i = 0; i < count && r.ok; ++i) {
    const uint64_t index = r.U64();
    const auto code = static_cast<absl::StatusCode>(r.U8());
    std::string bytes = r.Bytes(r.U64());
    if (!r.ok || index >= points) break;
    if (code == absl::StatusCode::kOk) {
      (*out)[index] = std::move(bytes);
    } else {
      (*out)[index] = absl::Status(code, bytes);
    }
  }
  if (!r.ok)
    return from(absl::StatusCode::kInternal, "sent unreadable results");
  return absl::OkStatus();
}

// A number from the environment, or -1.
int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  int n = -1;
  if (v == nullptr || !absl::SimpleAtoi(v, &n) || n < 0) return -1;
  return n;
}

}  // namespace

Launch DetectLaunch() {
  // Each launcher names this process's rank and the world's size in the
  // environment of every process it starts, checked in this order:
  //  - Open MPI's mpirun (mpirun(1), "Exported Environment Variables"):
  //    OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_RANK. First, because under
  //    Slurm mpirun starts its daemons with srun, whose SLURM_* variables
  //    describe that step of daemons, not the ranks.
  //  - Hydra (MPICH's and Intel MPI's mpiexec): PMI_SIZE, PMI_RANK. This
  //    shardsim's MPI is Open MPI and will not join such a world; Start
  //    says so rather than every process running the whole sweep.
  //  - srun (srun(1), "OUTPUT ENVIRONMENT VARIABLES"): SLURM_STEP_NUM_TASKS,
  //    SLURM_PROCID. Not SLURM_NTASKS: sbatch sets it, with SLURM_PROCID=0,
  //    for the batch script itself, where shardsim runs alone.
  // PMIX_RANK (Open MPI, srun --mpi=pmix) comes without the world's size,
  // and those launchers set one of the above as well.
  static constexpr const char* kVars[][2] = {
      {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
      {"PMI_SIZE", "PMI_RANK"},
      {"SLURM_STEP_NUM_TASKS", "SLURM_PROCID"},
  };
  // The first launcher found decides, even with one rank: mpirun -np 1
  // under Slurm still sees its daemons' SLURM_STEP_NUM_TASKS.
  for (const auto& [size_var, rank_var] : kVars) {
    const int size = EnvInt(size_var);
    if (size < 0) continue;
    const int rank = EnvInt(rank_var);
    if (size >= 1 && rank >= 0 && rank < size) return {rank, size};
    return {};
  }
  return {};
}

#ifdef SHARDSIM_HAVE_MPI

SweepRanks::~SweepRanks() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

absl::Status SweepRanks::Start() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // Later waves of a search fork after MPI_Init (distribute.h). Unset,
    // libibverbs registers memory that a fork would leave shared; set, it
    // calls ibv_fork_init (ibv_fork_init(3)). No effect without verbs.
    setenv("RDMAV_FORK_SAFE", "1", /*overwrite=*/0);
    MPI_Init(nullptr, nullptr);
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != launch_.rank || size != launch_.size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the launcher made this rank ", launch_.rank, " of ", launch_.size,
        ", but MPI (Open MPI) sees rank ", rank, " of ", size,
        ": start shardsim with Open MPI's mpirun or with srun"));
  }
  return absl::OkStatus();
}

std::vector<std::string> SweepRanks::Gather(const std::string& mine) {
  gathered_ = true;
  std::string send = mine;
  if (absl::Status s = Start(); !s.ok()) send = EncodeError(s);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Counts and displacements are ints: each rank's part must fit its share.
  const size_t cap = INT_MAX / static_cast<size_t>(size);
  if (send.size() > cap) {
    send = EncodeError(absl::ResourceExhaustedError(
        absl::StrCat("its rows are ", send.size(), " bytes, more than the ",
                     cap, " bytes one of ", size, " ranks can send")));
  }
  const int length = static_cast<int>(send.size());
  std::vector<int> lengths(size);
  MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT,
                MPI_COMM_WORLD);
  std::vector<int> offsets(lengths.size());
  int total = 0;
  for (size_t r = 0; r < lengths.size(); ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Allgatherv(send.data(), length, MPI_BYTE, all.data(), lengths.data(),
                 offsets.data(), MPI_BYTE, MPI_COMM_WORLD);
  std::vector<std::string> parts;
  for (size_t r = 0; r < lengths.size(); ++r) {
    parts.push_back(all.substr(offsets[r], lengths[r]));
  }
  return parts;
}

std::vector<absl::StatusOr<std::string>> SweepRanks::Run(
    const std::vector<ChildTask>& tasks, const IsolateOptions& options) {
  // Point i on rank i % size: neighbouring points (one strategy at growing
  // GPU counts) differ most in cost, so each rank gets a mix.
  std::vector<ChildTask> mine;
  std::vector<size_t> indices;
  IsolateOptions local = options;
  local.names.clear();
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (static_cast<int>(i % launch_.size) != launch_.rank) continue;
    mine.push_back(tasks[i]);
    indices.push_back(i);
    local.names.push_back(i < options.names.size() ? options.names[i] : i);
  }
  // One line on the terminal, not one per rank.
  local.progress = options.progress && is_root();
  const std::vector<std::string> parts =
      Gather(EncodePoints(tasks.size(), indices, RunIsolated(mine, local)));
  std::vector<absl::StatusOr<std::string>> out;
  for (size_t i = 0; i < tasks.size(); ++i) {
    out.push_back(absl::InternalError(
        absl::StrCat("no rank returned point ", i, " of ", tasks.size())));
  }
  for (size_t r = 0; r < parts.size(); ++r) {
    if (absl::Status s = Decode(parts[r], static_cast<int>(r), &out); !s.ok()) {
      return std::vector<absl::StatusOr<std::string>>(tasks.size(), s);
    }
  }
  return out;
}

absl::Status SweepRanks::Finish(const absl::Status& status) {
  if (!gathered_) {
    Gather(EncodeError(status.ok()
                           ? absl::InternalError("stopped before the sweep")
                           : status));
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int ok = status.ok() ? 1 : 0;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  if (rank == 0) return status;
  return ok ? absl::OkStatus() : absl::AbortedError("rank 0 failed");
}

#else  // !SHARDSIM_HAVE_MPI

namespace {
absl::Status NoMpi() {
  return absl::FailedPreconditionError(
      "started by mpirun or srun with several ranks, but this shardsim was "
      "built without MPI: run it alone, or rebuild where CMake finds MPI");
}
}  // namespace

SweepRanks::~SweepRanks() = default;
absl::Status SweepRanks::Start() { return NoMpi(); }
std::vector<std::string> SweepRanks::Gather(const std::string&) { return {}; }

std::vector<absl::StatusOr<std::string>> SweepRanks::Run(
    const std::vector<ChildTask>& tasks, const IsolateOptions&) {
  gathered_ = true;
  return std::vector<absl::StatusOr<std::string>>(tasks.size(), NoMpi());
}

absl::Status SweepRanks::Finish(const absl::Status& status) {
  if (is_root()) return status.ok() ? NoMpi() : status;
  return NoMpi();
}

#endif  // SHARDSIM_HAVE_MPI

}  // namespace shardsim

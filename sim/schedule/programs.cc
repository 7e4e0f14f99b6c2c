#include "sim/schedule/programs.h"

#include "absl/strings/str_cat.h"

namespace shardsim {
namespace {

std::string OpName(const Op& op) {
  return absl::StrCat("schedule op ", op.id(), " (", op.label(), ")");
}

// Checks the contract of schedule.proto for several programs.
absl::Status CheckSeveral(const Schedule& s, const Programs& p) {
  const int n = static_cast<int>(p.list.size());
  std::vector<int> program_of(s.ops_size(), -1);
  for (int id = 0; id < s.ops_size(); ++id) {
    const Op& op = s.ops(id);
    if (op.id() != id) {
      return absl::InvalidArgumentError(absl::StrCat(
          "schedule: op ", id, " has id ", op.id(),
          ": ids are global, one per op, in the order ops are listed"));
    }
    if (op.program() < 0 || op.program() >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat(OpName(op), ": program ", op.program(), " of ", n));
    }
    program_of[id] = op.program();
  }
  for (const Op& op : s.ops()) {
    const int mine = op.program();
    for (int d : op.deps()) {
      if (d < 0 || d >= op.id()) {
        return absl::InvalidArgumentError(absl::StrCat(
            OpName(op), ": depends on op ", d, ", which is not an earlier op"));
      }
      if (program_of[d] == mine) continue;
      const Op& dep = s.ops(d);
      if (!dep.has_send() || dep.send().peer_program() != mine) {
        return absl::InvalidArgumentError(absl::StrCat(
            OpName(op), " of program ", mine, ": depends on op ", d,
            " of program ", program_of[d], ", which is not a send to program ",
            mine, ": programs depend on each other through sends only"));
      }
    }
    for (int w : op.host_waits()) {
      if (w < 0 || w >= op.id() || program_of[w] != mine) {
        return absl::InvalidArgumentError(
            absl::StrCat(OpName(op), ": its host waits for op ", w,
                         ", not an earlier op of its own program ", mine));
      }
    }
    if (!op.has_send()) continue;
    const int peer = op.send().peer_program();
    if (peer < 0 || peer >= n || peer == mine) {
      return absl::InvalidArgumentError(
          absl::StrCat(OpName(op), ": sends to program ", peer, " of ", n,
                       " (from program ", mine, ")"));
    }
    if (p.list[peer].ranks.size() != p.list[mine].ranks.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          OpName(op), ": program ", mine, " has ", p.list[mine].ranks.size(),
          " ranks, the program it sends to (", peer, ") ",
          p.list[peer].ranks.size(), ": a send pairs them one to one"));
    }
    if (op.send().bytes() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(OpName(op), ": sends ", op.send().bytes(), " bytes"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Programs> ReadPrograms(const Schedule& s, const Mesh& mesh) {
  Programs p;
  const int gpus = mesh.gpus();
  std::vector<int> owner(gpus, -1);
  for (int k = 0; k < s.programs_size(); ++k) {
    const Program& program = s.programs(k);
    if (program.ranks().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "schedule: program ", k, " (", program.role(), ") has no ranks"));
    }
    for (int r : program.ranks()) {
      if (r < 0 || r >= gpus) {
        return absl::InvalidArgumentError(
            absl::StrCat("schedule: program ", k, " (", program.role(),
                         ") lists rank ", r, " of a job of ", gpus, " GPUs"));
      }
      if (owner[r] >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("schedule: rank ", r, " is in programs ", owner[r],
                         " and ", k, ": a rank runs one program"));
      }
      owner[r] = k;
    }
  }
  if (s.programs_size() > 0) {
    for (int r = 0; r < gpus; ++r) {
      if (owner[r] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("schedule: rank ", r,
                         " is in no program: the programs cover "
                         "every rank of the job"));
      }
    }
  }
  if (s.programs_size() <= 1) {
    ProgramInfo& one = p.list.emplace_back();
    if (s.programs_size() == 1) one.role = s.programs(0).role();
    one.ranks.resize(gpus);
    for (int r = 0; r < gpus; ++r) one.ranks[r] = r;
    one.ops.reserve(s.ops_size());
    for (const Op& op : s.ops()) {
      if (op.program() != 0 || op.has_send()) {
        return absl::InvalidArgumentError(absl::StrCat(
            OpName(op), ": ", op.has_send() ? "a send" : "program ",
            op.has_send() ? "" : absl::StrCat(op.program()),
            " in a schedule of one program"));
      }
      one.ops.push_back(op.id());
    }
    return p;
  }
  for (const Program& program : s.programs()) {
    ProgramInfo& info = p.list.emplace_back();
    info.role = program.role();
    info.ranks.assign(program.ranks().begin(), program.ranks().end());
  }
  if (absl::Status st = CheckSeveral(s, p); !st.ok()) return st;
  for (const Op& op : s.ops()) p.list[op.program()].ops.push_back(op.id());
  return p;
}

absl::Status GroupWithinProgram(const Group& shape,
                                const std::vector<int>& group,
                                const std::vector<int>& program_of,
                                int program) {
  for (int rank : group) {
    if (program_of[rank] == program) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "its group (", GroupName(shape), ") of rank ", group[0],
        " holds ranks of programs ", program, " and ", program_of[rank],
        " (rank ", rank,
        "): a collective runs within one program; programs exchange "
        "data by point-to-point sends"));
  }
  return absl::OkStatus();
}

}  // namespace shardsim

#include "hw/runtime/rank_schedule.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace shardsim::hw {
namespace {

// Indices into Schedule.ops of `program`'s ops, in issue order. With one
// program that is every op, whatever its id (the lowering's schedules);
// with several, ids are indices (ReadPrograms checks it).
std::vector<int> OpsOf(const Schedule& s, const Programs& programs,
                       int program) {
  if (!programs.several()) {
    std::vector<int> all(s.ops_size());
    for (int i = 0; i < s.ops_size(); ++i) all[i] = i;
    return all;
  }
  return programs.list[program].ops;
}

// Sends of other programs to `program`, by op index.
std::vector<bool> SendsTo(const Schedule& s, int program) {
  std::vector<bool> to(s.ops_size(), false);
  for (int i = 0; i < s.ops_size(); ++i) {
    const Op& op = s.ops(i);
    to[i] = op.has_send() && op.send().peer_program() == program &&
            op.program() != program;
  }
  return to;
}

std::string OpName(const Op& op) {
  return absl::StrCat("op ", op.id(), " (", op.label(), ")");
}

// What program `p`, stopped at `step`, waits for.
std::string Waiting(const Schedule& s, const Programs& programs, int p,
                    const RankStep& step) {
  const Op& op = s.ops(step.op);
  const std::string me =
      absl::StrCat("program ", p, " (", programs.list[p].role, ")");
  if (step.kind == RankStep::kRecv) {
    return absl::StrCat(me, " waits to receive ", OpName(op), " from program ",
                        op.program());
  }
  return absl::StrCat(me, " waits to send ", OpName(op), " to program ",
                      op.send().peer_program());
}

// Moves program `p` as far as it goes alone or with the receives its
// sends meet; true if it moved.
bool Advance(const Schedule& s, const std::vector<std::vector<RankStep>>& steps,
             int p, std::vector<size_t>* at) {
  bool moved = false;
  while ((*at)[p] < steps[p].size()) {
    const RankStep& step = steps[p][(*at)[p]];
    if (step.kind == RankStep::kRecv) break;  // its sender moves it
    const Op& op = s.ops(step.op);
    if (op.has_send()) {
      const int q = op.send().peer_program();
      const size_t there = (*at)[q];
      if (there >= steps[q].size() || steps[q][there].kind != RankStep::kRecv ||
          steps[q][there].op != step.op) {
        break;  // the receive is not posted yet
      }
      ++(*at)[q];
    }
    ++(*at)[p];
    moved = true;
  }
  return moved;
}

}  // namespace

std::vector<RankStep> ProgramSteps(const Schedule& s, const Programs& programs,
                                   int program) {
  std::vector<RankStep> out;
  const std::vector<bool> to_me = SendsTo(s, program);
  std::vector<bool> received(s.ops_size(), false);
  for (int i : OpsOf(s, programs, program)) {
    std::vector<int> deps(s.ops(i).deps().begin(), s.ops(i).deps().end());
    std::sort(deps.begin(), deps.end());  // several at once: op id order
    for (int d : deps) {
      if (d < 0 || d >= s.ops_size() || !to_me[d] || received[d]) continue;
      out.push_back({RankStep::kRecv, d});
      received[d] = true;
    }
    out.push_back({RankStep::kOp, i});
  }
  // Bytes no op waits for still arrive: after the program's last op.
  for (int i = 0; i < s.ops_size(); ++i) {
    if (to_me[i] && !received[i]) out.push_back({RankStep::kRecv, i});
  }
  return out;
}

absl::Status CheckSendOrder(const Schedule& s, const Programs& programs,
                            const std::vector<std::vector<RankStep>>& steps) {
  const int n = static_cast<int>(steps.size());
  std::vector<size_t> at(n, 0);
  // Rendezvous is deterministic: any order of moves reaches the same end.
  for (bool moved = true; moved;) {
    moved = false;
    for (int p = 0; p < n; ++p) moved = Advance(s, steps, p, &at) || moved;
  }
  std::string stuck;
  for (int p = 0; p < n; ++p) {
    if (at[p] == steps[p].size()) continue;
    absl::StrAppend(&stuck, stuck.empty() ? "" : "; ",
                    Waiting(s, programs, p, steps[p][at[p]]));
  }
  if (stuck.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "schedule: its sends deadlock in the order shardsim-hw posts them (a "
      "program issues its ops in order and posts a send's receive at the "
      "first op that depends on it; a send completes only once its receive "
      "is posted): ",
      stuck));
}

absl::StatusOr<RankSchedule> ScheduleOfRank(const Schedule& s, const Mesh& mesh,
                                            int rank) {
  absl::StatusOr<Programs> programs = ReadPrograms(s, mesh);
  if (!programs.ok()) return programs.status();
  RankSchedule out;
  out.programs = *std::move(programs);
  const std::vector<ProgramInfo>& list = out.programs.list;
  std::vector<int> program_of(mesh.gpus(), -1);
  for (size_t p = 0; p < list.size(); ++p) {
    for (size_t i = 0; i < list[p].ranks.size(); ++i) {
      program_of[list[p].ranks[i]] = static_cast<int>(p);
      if (list[p].ranks[i] == rank) {
        out.program = static_cast<int>(p);
        out.index = static_cast<int>(i);
      }
    }
  }
  std::vector<std::vector<RankStep>> all(list.size());
  for (size_t p = 0; p < list.size(); ++p) {
    all[p] = ProgramSteps(s, out.programs, static_cast<int>(p));
  }
  if (absl::Status st = CheckSendOrder(s, out.programs, all); !st.ok()) {
    return st;
  }
  out.steps = std::move(all[out.program]);
  for (const RankStep& step : out.steps) {
    const Op& op = s.ops(step.op);
    if (op.has_collective() && out.programs.several()) {
      const Group& g = op.collective().group();
      absl::Status st = ValidateGroup(g, mesh);
      if (st.ok()) {
        st = GroupWithinProgram(g, GroupMembers(g, mesh, rank), program_of,
                                out.program);
      }
      if (!st.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("schedule ", OpName(op), ": ", st.message()));
      }
    }
    int peer = -1;
    if (step.kind == RankStep::kRecv) {
      peer = list[op.program()].ranks[out.index];
    } else if (op.has_send()) {
      peer = list[op.send().peer_program()].ranks[out.index];
    }
    out.peers.push_back(peer);
  }
  return out;
}

}  // namespace shardsim::hw

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

// The steps [begin, end) a program posts at once from `begin`: a send
// with the receives grouped with it, or one step.
size_t UnitEnd(const std::vector<RankStep>& steps, size_t begin) {
  size_t end = begin + 1;
  while (end < steps.size() && steps[end].grouped) ++end;
  return end;
}

// Every program's position and the transfers of its current unit that are
// complete; Match completes what the posted units allow.
struct Rendezvous {
  const Schedule& s;
  const std::vector<std::vector<RankStep>>& steps;
  std::vector<size_t> at;
  std::vector<std::vector<bool>> done;  // per program, per step of its unit

  Rendezvous(const Schedule& sched,
             const std::vector<std::vector<RankStep>>& all)
      : s(sched), steps(all), at(all.size(), 0), done(all.size()) {
    for (size_t p = 0; p < all.size(); ++p) Reset(p);
  }

  void Reset(size_t p) {
    done[p].assign(
        at[p] < steps[p].size() ? UnitEnd(steps[p], at[p]) - at[p] : 0, false);
  }

  // The position in program q's current unit of its receive of `send`, or
  // -1 when it is not posted there (or already complete).
  int PostedRecv(size_t q, int send) const {
    if (at[q] >= steps[q].size()) return -1;
    const size_t end = UnitEnd(steps[q], at[q]);
    for (size_t k = at[q]; k < end; ++k) {
      if (steps[q][k].kind == RankStep::kRecv && steps[q][k].op == send &&
          !done[q][k - at[q]]) {
        return static_cast<int>(k - at[q]);
      }
    }
    return -1;
  }

  // Completes what program p's unit can, and moves p past complete units;
  // true if anything changed.
  bool Advance(size_t p) {
    bool moved = false;
    while (at[p] < steps[p].size()) {
      const size_t end = UnitEnd(steps[p], at[p]);
      for (size_t k = at[p]; k < end; ++k) {
        const RankStep& step = steps[p][k];
        if (done[p][k - at[p]]) continue;
        if (step.kind == RankStep::kRecv) continue;  // its sender moves it
        const Op& op = s.ops(step.op);
        if (!op.has_send()) {
          done[p][k - at[p]] = true;
          moved = true;
          continue;
        }
        const size_t q = op.send().peer_program();
        const int there = PostedRecv(q, step.op);
        if (there < 0) continue;  // the receive is not posted yet
        done[q][there] = true;
        done[p][k - at[p]] = true;
        moved = true;
      }
      for (size_t k = 0; k < done[p].size(); ++k) {
        if (!done[p][k]) return moved;
      }
      at[p] = end;
      Reset(p);
      moved = true;
    }
    return moved;
  }
};

}  // namespace

std::vector<RankStep> ProgramSteps(const Schedule& s, const Programs& programs,
                                   int program) {
  std::vector<RankStep> out;
  const std::vector<bool> to_me = SendsTo(s, program);
  std::vector<bool> received(s.ops_size(), false);
  // The program's last send, while no op has taken receives since it:
  // where it is in `out` (its group's end) and whom it went to.
  int group_end = -1, group_peer = -1;
  for (int i : OpsOf(s, programs, program)) {
    std::vector<int> deps(s.ops(i).deps().begin(), s.ops(i).deps().end());
    std::sort(deps.begin(), deps.end());  // several at once: op id order
    bool took = false;
    for (int d : deps) {
      if (d < 0 || d >= s.ops_size() || !to_me[d] || received[d]) continue;
      received[d] = true;
      took = true;
      if (group_end >= 0 && s.ops(d).program() == group_peer) {
        out.insert(out.begin() + group_end, {RankStep::kRecv, d, true});
        ++group_end;
      } else {
        out.push_back({RankStep::kRecv, d});
      }
    }
    if (took) group_end = group_peer = -1;
    out.push_back({RankStep::kOp, i});
    if (s.ops(i).has_send()) {
      group_end = static_cast<int>(out.size());
      group_peer = s.ops(i).send().peer_program();
    }
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
  Rendezvous r(s, steps);
  // Rendezvous is deterministic: any order of moves reaches the same end.
  for (bool moved = true; moved;) {
    moved = false;
    for (int p = 0; p < n; ++p) moved = r.Advance(p) || moved;
  }
  std::string stuck;
  for (int p = 0; p < n; ++p) {
    if (r.at[p] == steps[p].size()) continue;
    // The first transfer of its unit still waiting.
    size_t k = r.at[p];
    while (k + 1 < UnitEnd(steps[p], r.at[p]) && r.done[p][k - r.at[p]]) ++k;
    absl::StrAppend(&stuck, stuck.empty() ? "" : "; ",
                    Waiting(s, programs, p, steps[p][k]));
  }
  if (stuck.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "schedule: its sends deadlock in the order shardsim-hw posts them (a "
      "program issues its ops in order and posts a send's receive at the "
      "first op that depends on it, or with its own last send to the same "
      "program; a send completes only once its receive is posted): ",
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

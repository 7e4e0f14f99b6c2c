#include "sim/schedule/periodic.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace shardsim {
namespace {

// `later` refers to `earlier` shifted by `shift`, or to the same op before
// `block_start` (an op every block depends on alike).
bool SameRef(int earlier, int later, int shift, int block_start) {
  return later == earlier + shift ||
         (later == earlier && earlier < block_start);
}

bool SameRefs(const google::protobuf::RepeatedField<int32_t>& a,
              const google::protobuf::RepeatedField<int32_t>& b, int shift,
              int block_start) {
  if (a.size() != b.size()) return false;
  for (int i = 0; i < a.size(); ++i) {
    if (!SameRef(a[i], b[i], shift, block_start)) return false;
  }
  return true;
}

// Op `b` is op `a` one block later (`shift` ops and `stride` micro-batches
// on; a's block starts at `block_start`).
bool Repeat(const Op& a, const Op& b, int shift, int block_start,
            int stride = 1) {
  if (a.program() != b.program() || a.stream() != b.stream() ||
      a.phase() != b.phase() || a.layer() != b.layer() ||
      a.label() != b.label() || a.limited_by() != b.limited_by() ||
      a.body_case() != b.body_case()) {
    return false;
  }
  if (a.micro_batch() < 0 ? b.micro_batch() >= 0
                          : b.micro_batch() != a.micro_batch() + stride) {
    return false;
  }
  if (!SameRefs(a.deps(), b.deps(), shift, block_start) ||
      !SameRefs(a.host_waits(), b.host_waits(), shift, block_start)) {
    return false;
  }
  switch (a.body_case()) {
    case Op::kCompute:
      return a.compute().SerializeAsString() == b.compute().SerializeAsString();
    case Op::kCollective:
      return a.collective().SerializeAsString() ==
             b.collective().SerializeAsString();
    case Op::kSend:
      return a.send().SerializeAsString() == b.send().SerializeAsString();
    case Op::kMemory:
      return a.memory().delta_bytes() == b.memory().delta_bytes() &&
             a.memory().buffer() == b.memory().buffer() &&
             (a.memory().delta_bytes() >= 0 ||
              SameRef(a.memory().frees(), b.memory().frees(), shift,
                      block_start));
    default:
      return true;
  }
}

}  // namespace

namespace {

// The longest run of repeating blocks of `stride` micro-batches each, or
// nullopt. first[k]: the first op of micro-batch k, in order.
std::optional<Repeats> RepeatsBy(const Schedule& s,
                                 const std::vector<int>& first, int stride) {
  const int micro_batches = static_cast<int>(first.size());
  // Block k (k <= blocks - 2) is [start[k], start[k + 1]); the last block
  // runs to the end and never repeats.
  const int blocks = (micro_batches + stride - 1) / stride;
  auto start = [&](int k) { return first[k * stride]; };
  auto next_repeats = [&](int k) {
    const int len = start(k + 1) - start(k);
    if (k + 2 >= blocks || start(k + 2) - start(k + 1) != len) return false;
    for (int i = 0; i < len; ++i) {
      if (!Repeat(s.ops(start(k) + i), s.ops(start(k + 1) + i), len, start(k),
                  stride)) {
        return false;
      }
    }
    return true;
  };
  std::optional<Repeats> best;
  for (int k = 0; k + 2 < blocks;) {
    if (!next_repeats(k)) {
      ++k;
      continue;
    }
    int end = k;  // blocks k..end + 1 repeat
    while (end + 1 + 2 < blocks && next_repeats(end + 1)) ++end;
    if (!best || end + 1 - k > best->hi - best->lo) {
      best = Repeats{k, end + 1, start(k), start(k + 1) - start(k), stride};
    }
    k = end + 1;
  }
  return best;
}

}  // namespace

std::optional<Repeats> FindRepeats(const Schedule& s, std::string* why) {
  int micro_batches = 0;
  for (const Op& op : s.ops()) {
    micro_batches = std::max(micro_batches, op.micro_batch() + 1);
  }
  // first[k]: the first op of micro-batch k in issue order.
  std::vector<int> first(micro_batches, -1);
  for (int i = 0; i < s.ops_size(); ++i) {
    const int mb = s.ops(i).micro_batch();
    if (s.ops(i).id() != i) {
      *why = absl::StrCat("op ", i, " has id ", s.ops(i).id());
      return std::nullopt;
    }
    if (mb >= 0 && first[mb] < 0) first[mb] = i;
  }
  for (int k = 1; k < micro_batches; ++k) {
    if (first[k] <= first[k - 1]) {
      *why =
          absl::StrCat("micro-batch ", k, " starts before micro-batch ", k - 1);
      return std::nullopt;
    }
  }
  std::optional<Repeats> best = RepeatsBy(s, first, 1);
  // Interleaved 1F1B runs a pipeline's micro-batches by groups of as many
  // as it has stages (order.h): a block of one group each.
  if (const int stages = s.programs_size(); stages > 1) {
    auto covers = [](const std::optional<Repeats>& r) {
      return r ? (r->hi - r->lo + 1) * r->stride : 0;
    };
    std::optional<Repeats> groups = RepeatsBy(s, first, stages);
    if (covers(groups) > covers(best)) best = groups;
  }
  if (!best) {
    *why = micro_batches < 3
               ? absl::StrCat(micro_batches, " micro-batches: none repeats")
               : "no micro-batch repeats the one before it";
  }
  return best;
}

std::optional<Shortened> DropBlocks(const Schedule& s, const Repeats& r,
                                    int keep, std::string* why) {
  return DropBlocks(StepOps(s), r, keep, why);
}

std::optional<Fold> FoldOf(const Schedule& base, int copies,
                           int64_t tokens_per_step, std::string* why) {
  std::optional<Repeats> r = FindRepeats(base, why);
  if (!r) return std::nullopt;
  return Fold{*r, copies, tokens_per_step};
}

int StepOps::Base(int id) const {
  if (id < block_end_) return id;
  if (id < tail_) return block_ + (id - block_) % period_;
  return id - copies_ * period_;
}

int StepOps::Copies(int id) const {
  if (id < block_end_) return 0;
  if (id < tail_) return (id - block_) / period_;
  return copies_;
}

// A copy's reference shifts with it unless the block before (the base
// block's image one block back) made the same one; the tail's references
// into the repeating blocks shift with the tail.
int StepOps::ShiftRef(int id, int ref, int ref_a_block_before) const {
  const int k = Copies(id);
  if (k == 0) return ref;
  if (InTail(id)) return ref >= fold_->r.first_op ? ref + k * period_ : ref;
  return ref == ref_a_block_before ? ref : ref + k * period_;
}

StepOps::Refs StepOps::Shift(int id, Field field) const {
  const int b = Base(id);
  const auto& refs = (s_->ops(b).*field)();
  Refs out(refs.begin(), refs.end());
  if (Copies(id) == 0) return out;
  for (int i = 0; i < refs.size(); ++i) {
    const int before = InTail(id) ? -1 : (s_->ops(b - period_).*field)()[i];
    out[i] = ShiftRef(id, refs[i], before);
  }
  return out;
}

int StepOps::Multiplicity(int base_id) const {
  return base_id >= block_ && base_id < block_end_ ? 1 + copies_ : 1;
}

int StepOps::FirstId(int base_id) const {
  return base_id < block_end_ ? base_id : base_id + copies_ * period_;
}

int StepOps::micro_batch(int id) const {
  const int mb = op(id).micro_batch();
  return mb < 0 || !fold_ ? mb : mb + Copies(id) * fold_->r.stride;
}

int StepOps::micro_batches() const {
  int n = 0;
  for (int b = 0; b < s_->ops_size(); ++b) {
    const int last = FirstId(b) + (Multiplicity(b) - 1) * period_;
    n = std::max(n, micro_batch(last) + 1);
  }
  return n;
}

int StepOps::frees(int id) const {
  const int b = Base(id);
  const int ref = s_->ops(b).memory().frees();
  if (Copies(id) == 0) return ref;
  const int before = InTail(id) ? -1 : s_->ops(b - period_).memory().frees();
  return ShiftRef(id, ref, before);
}

OwnedSchedule Unfold(const StepOps& ops) {
  OwnedSchedule out;
  Schedule& o = *out.mutable_schedule();
  const Schedule& s = ops.base();
  o.set_strategy(s.strategy());
  o.set_gpus(s.gpus());
  o.set_gpus_per_node(s.gpus_per_node());
  o.set_tokens_per_step(ops.tokens_per_step());
  o.set_host_bytes_per_gpu(s.host_bytes_per_gpu());
  *o.mutable_kernel_lists() = s.kernel_lists();
  *o.mutable_programs() = s.programs();
  o.mutable_ops()->Reserve(ops.size());
  for (int id = 0; id < ops.size(); ++id) {
    Op* n = o.add_ops();
    *n = ops.op(id);
    n->set_id(id);
    n->set_micro_batch(ops.micro_batch(id));
    const StepOps::Refs deps = ops.deps(id);
    n->mutable_deps()->Assign(deps.begin(), deps.end());
    const StepOps::Refs waits = ops.host_waits(id);
    n->mutable_host_waits()->Assign(waits.begin(), waits.end());
    if (n->has_memory() && n->memory().delta_bytes() < 0) {
      n->mutable_memory()->set_frees(ops.frees(id));
    }
  }
  return out;
}

std::optional<Repeats> FindRepeats(const StepOps& ops, std::string* why) {
  if (!ops.fold()) return FindRepeats(ops.base(), why);
  Repeats r = ops.fold()->r;
  r.hi += ops.fold()->copies;
  return r;
}

std::optional<Shortened> DropBlocks(const StepOps& ops, const Repeats& r,
                                    int keep, std::string* why) {
  if (keep >= r.hi) {
    *why =
        absl::StrCat("block ", keep, " is not below the last repeating ", r.hi);
    return std::nullopt;
  }
  const int drop_from = r.BlockStart(keep + 1);
  const int tail = r.BlockStart(r.hi + 1);
  const int shift = tail - drop_from;
  const Schedule& s = ops.base();
  Shortened out;
  Schedule& o = *out.schedule.mutable_schedule();
  o.set_strategy(s.strategy());
  o.set_gpus(s.gpus());
  o.set_gpus_per_node(s.gpus_per_node());
  o.set_tokens_per_step(ops.tokens_per_step());
  *o.mutable_kernel_lists() = s.kernel_lists();  // indices stay valid
  *o.mutable_programs() = s.programs();
  const int P = r.period_ops;
  auto map = [&](int ref, bool in_tail) {
    if (!in_tail || ref < drop_from) {
      if (in_tail) out.pinned.push_back(ref);
      return ref;
    }
    const int mapped = ref - shift;
    // An op more blocks before the tail than are kept (a pipeline's
    // cool-down needs the activations of its last stages' micro-batches):
    // its copy in the first repeating block, which the collapse checks is
    // done before the tail begins, as the op itself is then.
    if (mapped < r.first_op) return r.first_op + (ref - r.first_op) % P;
    return mapped;
  };
  // Read through `ops`: a folded step's copies are never stored.
  auto add = [&](int id) {
    const bool in_tail = id >= tail;
    Op* n = o.add_ops();
    *n = ops.op(id);
    n->set_id(in_tail ? id - shift : id);
    n->set_micro_batch(ops.micro_batch(id));
    n->clear_deps();
    for (int d : ops.deps(id)) n->add_deps(map(d, in_tail));
    n->clear_host_waits();
    for (int w : ops.host_waits(id)) n->add_host_waits(map(w, in_tail));
    if (n->has_memory() && n->memory().delta_bytes() < 0) {
      n->mutable_memory()->set_frees(map(ops.frees(id), in_tail));
    }
  };
  o.mutable_ops()->Reserve(drop_from + ops.size() - tail);
  for (int id = 0; id < drop_from; ++id) add(id);
  for (int id = tail; id < ops.size(); ++id) add(id);
  std::sort(out.pinned.begin(), out.pinned.end());
  out.pinned.erase(std::unique(out.pinned.begin(), out.pinned.end()),
                   out.pinned.end());
  return out;
}

}  // namespace shardsim

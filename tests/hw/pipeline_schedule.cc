#include "tests/hw/pipeline_schedule.h"

#include "absl/strings/str_cat.h"

namespace shardsim::hw {
namespace {

Op* AddSend(Schedule* s, int from, int to, int64_t bytes, const char* tensor,
            int dep) {
  Op* op = AddOp(s, from, COMPUTE, tensor);
  op->add_deps(dep);
  op->mutable_send()->set_bytes(bytes);
  op->mutable_send()->set_dtype(BF16);
  op->mutable_send()->set_tensor(tensor);
  op->mutable_send()->set_peer_program(to);
  return op;
}

Op* AddCompute(Schedule* s, int program, const char* kind) {
  Op* op = AddOp(s, program, COMPUTE, kind);
  op->mutable_compute()->set_kind(kind);
  op->mutable_compute()->set_kernel_list(0);
  return op;
}

}  // namespace

Op* AddOp(Schedule* s, int program, Stream stream, const char* label) {
  Op* op = s->add_ops();
  op->set_id(s->ops_size() - 1);
  op->set_program(program);
  op->set_stream(stream);
  op->set_label(label);
  return op;
}

Schedule PipelineSchedule(const Pipeline& p) {
  Schedule s;
  const int stages = static_cast<int>(p.ranks.size());
  for (int k = 0; k < stages; ++k) {
    Program* prog = s.add_programs();
    prog->set_role(absl::StrCat("stage ", k));
    for (int r : p.ranks[k]) prog->add_ranks(r);
  }
  s.add_kernel_lists();  // compute ops run no kernels: the CPU sleeps 0
  const int m_count = p.micro_batches;
  // Per stage and micro-batch: the activation buffer's alloc op, the last
  // activation send to it (-1: none) and the last gradient send.
  std::vector<std::vector<int>> alloc(stages, std::vector<int>(m_count));
  std::vector<std::vector<int>> act(stages, std::vector<int>(m_count, -1));
  for (int m = 0; m < m_count; ++m) {
    for (int k = 0; k < stages; ++k) {
      Op* mem = AddOp(&s, k, COMPUTE, "alloc activations");
      mem->mutable_memory()->set_delta_bytes((k + 1) * p.activation_memory);
      mem->mutable_memory()->set_buffer("activations");
      alloc[k][m] = mem->id();
      Op* fwd = AddCompute(&s, k, "forward");
      if (k > 0) fwd->add_deps(act[k - 1][m]);
      if (k + 1 < stages) {
        act[k][m] = AddSend(&s, k, k + 1, p.activation_bytes + m, "activations",
                            fwd->id())
                        ->id();
      }
    }
  }
  std::vector<int> grad(stages, -1);
  for (int m = 0; m < m_count; ++m) {
    for (int k = stages - 1; k >= 0; --k) {
      Op* bwd = AddCompute(&s, k, "backward");
      if (k + 1 < stages) bwd->add_deps(grad[k + 1]);
      Op* mem = AddOp(&s, k, COMPUTE, "free activations");
      mem->mutable_memory()->set_delta_bytes(-(k + 1) * p.activation_memory);
      mem->mutable_memory()->set_buffer("activations");
      mem->mutable_memory()->set_frees(alloc[k][m]);
      if (k > 0) {
        grad[k] = AddSend(&s, k, k - 1, p.gradient_bytes + m,
                          "activation grads", bwd->id())
                      ->id();
      }
    }
  }
  for (int k = 0; k < stages; ++k) {
    Op* ar = AddOp(&s, k, REDUCE, "all-reduce G");
    ar->mutable_collective()->set_op(ALL_REDUCE);
    *ar->mutable_collective()->mutable_group() = p.group;
    ar->mutable_collective()->set_bytes(p.allreduce_bytes);
    ar->mutable_collective()->set_dtype(BF16);
    ar->mutable_collective()->set_algorithm(RING);
    ar->mutable_collective()->set_tensor("G");
  }
  return s;
}

}  // namespace shardsim::hw

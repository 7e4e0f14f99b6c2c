// The collapsed replay (sim/engine/replay.h) against the full one, and the
// repeating blocks it relies on (sim/schedule/periodic.h). Each replay runs
// in a child process (RunIsolated): SimGrid allows one engine per process.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "sim/engine/fabric.h"
#include "sim/engine/isolate.h"
#include "sim/engine/replay.h"
#include "sim/engine/simulate.h"
#include "sim/model/model.h"
#include "sim/results/results.h"
#include "sim/scenario/scenario.h"
#include "sim/schedule/periodic.h"

namespace shardsim {
namespace {

// Every named strategy of the quickstart scenario.
const char* const kStrategies[] = {
    "ddp",  "zero1", "zero2", "zero3", "fsdp:FULL_SHARD", "fsdp:SHARD_GRAD_OP",
    "fsdp:HYBRID_SHARD", "fsdp:_HYBRID_SHARD_ZERO2", "mics", "zeropp",
    "paro-IGG", "paro-IIG", "paro-NIG", "lins:p=1x1:g=1x1:os=8x1"};

// LLaMA-7B's shapes cut to 2 layers, on 2 DGX A100 nodes.
Job SmallJob(int micro_batches) {
  Scenario sc;
  sc.set_name("collapse_test");
  absl::StatusOr<Model> model = BuiltinModel("llama-7b");
  EXPECT_TRUE(model.ok()) << model.status();
  *sc.mutable_model_def() = *model;
  sc.mutable_model_def()->set_layers(2);
  sc.set_platform("dgx_a100");
  for (const char* s : kStrategies) sc.add_strategies(s);
  sc.add_gpus(16);
  sc.set_micro_batch_size(2);
  sc.set_micro_batches(micro_batches);
  sc.set_seq_len(512);
  sc.set_flash_attention(true);
  sc.set_optimizer_bytes_per_param(12);
  absl::StatusOr<Job> job = ResolveJob("collapse_test.textproto", sc);
  EXPECT_TRUE(job.ok()) << job.status();
  return *job;
}

struct Replayed {
  double step = 0;
  bool collapsed = false;
  std::string full_because;
  std::vector<double> times;  // start, end, host_start, host_end per op
  std::vector<std::string> causes;
};

void Put(double v, std::string* out) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

Replayed ReplayPoint(const Job& job, const std::string& spec, bool collapse) {
  absl::StatusOr<Point> point = AnalyzePoint(job, spec, 16);
  EXPECT_TRUE(point.ok()) << point.status();
  ChildTask task = [&]() -> absl::StatusOr<std::string> {
    StartSimGrid();
    absl::StatusOr<std::unique_ptr<Fabric>> fabric =
        Fabric::Build(job.platform, point->mesh);
    if (!fabric.ok()) return fabric.status();
    CollectiveEngine engine(**fabric, FlowMode::kFast, job.platform.channels());
    absl::StatusOr<StepTiming> t =
        ReplayStep(point->schedule, fabric->get(), &engine, collapse);
    if (!t.ok()) return t.status();
    std::string out;
    Put(t->step_time_s, &out);
    Put(t->replay.collapsed() ? 1 : 0, &out);
    for (const OpTime& o : t->ops) {
      Put(o.start, &out);
      Put(o.end, &out);
      Put(o.host_start, &out);
      Put(o.host_end, &out);
    }
    std::string text;
    for (const OpTime& o : t->ops) absl::StrAppend(&text, o.cause, "\n");
    absl::StrAppend(&text, t->replay.full_because());
    Put(static_cast<double>(text.size()), &out);
    return out + text;
  };
  absl::StatusOr<std::string> r = RunIsolated({task}, 1)[0];
  Replayed rep;
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return rep;
  auto get = [&](size_t i) {
    double v;
    std::memcpy(&v, r->data() + i * sizeof v, sizeof v);
    return v;
  };
  const size_t ops = point->schedule.ops_size();
  rep.step = get(0);
  rep.collapsed = get(1) != 0;
  for (size_t i = 0; i < 4 * ops; ++i) rep.times.push_back(get(2 + i));
  const size_t text_at = (3 + 4 * ops) * sizeof(double);
  std::vector<std::string> lines =
      absl::StrSplit(r->substr(text_at), '\n');
  EXPECT_EQ(lines.size(), ops + 1);
  if (lines.size() != ops + 1) return rep;
  rep.full_because = lines.back();
  rep.causes.assign(lines.begin(), lines.end() - 1);
  return rep;
}

// Same step, same trace: every op's four times to 1e-9 of the step, the
// same cause on every op of the critical path.
TEST(Collapse, EveryStrategyMatchesTheFullReplay) {
  int collapsed = 0;
  for (int mb : {4, 5, 17}) {
    const Job job = SmallJob(mb);
    for (const char* spec : kStrategies) {
      SCOPED_TRACE(absl::StrCat(spec, ", ", mb, " micro-batches"));
      const Replayed full = ReplayPoint(job, spec, /*collapse=*/false);
      const Replayed fast = ReplayPoint(job, spec, /*collapse=*/true);
      ASSERT_GT(full.step, 0);
      EXPECT_FALSE(full.collapsed);
      EXPECT_NEAR(fast.step, full.step, 1e-9 * full.step);
      ASSERT_EQ(fast.times.size(), full.times.size());
      for (size_t i = 0; i < full.times.size(); ++i) {
        ASSERT_NEAR(fast.times[i], full.times[i], 1e-9 * full.step)
            << "op " << i / 4 << " time " << i % 4;
      }
      EXPECT_EQ(fast.causes, full.causes);
      collapsed += fast.collapsed;
      // Collapsing needs more repeating micro-batches than 4 or 5 give.
      if (mb < 17) EXPECT_FALSE(fast.collapsed) << fast.full_because;
    }
  }
  // ZeRO-3 and its kin wait on their gathers: their state repeats.
  EXPECT_GE(collapsed, 4);
}

// Hand-built: a prologue op, then per micro-batch a compute op that
// depends on the previous one, then an update after the last.
Schedule Chain(int micro_batches) {
  Schedule s;
  auto add = [&](int mb, const char* label, std::vector<int> deps) {
    Op* op = s.add_ops();
    op->set_id(s.ops_size() - 1);
    op->set_stream(COMPUTE);
    op->set_micro_batch(mb);
    op->set_layer(-1);
    op->set_label(label);
    op->mutable_compute()->set_kind("forward");
    for (int d : deps) op->add_deps(d);
    return op->id();
  };
  int prev = add(-1, "prologue", {});
  const int first = prev;
  for (int mb = 0; mb < micro_batches; ++mb) {
    prev = add(mb, "work", mb == 0 ? std::vector<int>{prev}
                                    : std::vector<int>{prev, first});
  }
  add(-1, "update", {prev});
  return s;
}

TEST(Repeats, ChainRepeatsFromItsSecondMicroBatch) {
  // Block 0 depends on the prologue alone, blocks 1..5 on the block before
  // and the prologue (the same op every time); block 6 runs to the end.
  std::string why;
  std::optional<Repeats> r = FindRepeats(Chain(7), &why);
  ASSERT_TRUE(r.has_value()) << why;
  EXPECT_EQ(r->lo, 1);
  EXPECT_EQ(r->hi, 5);
  EXPECT_EQ(r->first_op, 2);
  EXPECT_EQ(r->period_ops, 1);
  EXPECT_EQ(r->BlockStart(6), 7);
}

TEST(Repeats, DroppingBlocksShiftsTheTail) {
  std::string why;
  const Schedule s = Chain(7);  // ops: 0 prologue, 1..7 work, 8 update
  std::optional<Repeats> r = FindRepeats(s, &why);
  ASSERT_TRUE(r.has_value()) << why;
  // Keep blocks up to 2 (ops 0..3), drop 3..5 (ops 4..6), the tail (ops
  // 7, 8) becomes ops 4, 5; op 7 depended on op 6 (dropped, block 5),
  // which is block 2's op 3 after the shift; and on op 0, pinned.
  std::optional<Shortened> cut = DropBlocks(s, *r, 2, &why);
  ASSERT_TRUE(cut.has_value()) << why;
  ASSERT_EQ(cut->schedule.ops_size(), 6);
  EXPECT_EQ(cut->schedule.ops(4).id(), 4);
  EXPECT_EQ(cut->schedule.ops(4).micro_batch(), 6);
  ASSERT_EQ(cut->schedule.ops(4).deps_size(), 2);
  EXPECT_EQ(cut->schedule.ops(4).deps(0), 3);
  EXPECT_EQ(cut->schedule.ops(4).deps(1), 0);
  EXPECT_EQ(cut->schedule.ops(5).deps(0), 4);
  EXPECT_EQ(cut->pinned, std::vector<int>{0});
}

TEST(Repeats, TooFewMicroBatchesSayWhy) {
  std::string why;
  EXPECT_FALSE(FindRepeats(Chain(2), &why).has_value());
  EXPECT_NE(why.find("2 micro-batches"), std::string::npos) << why;
}

}  // namespace
}  // namespace shardsim

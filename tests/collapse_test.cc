// The collapsed replay (sim/engine/replay.h) against the full one, and the
// repeating blocks it relies on (sim/schedule/periodic.h). Each replay runs
// in a child process (RunIsolated): SimGrid allows one engine per process.
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "sim/analyze/analyze.h"
#include "sim/compute/kernel_time.h"
#include "sim/engine/fabric.h"
#include "sim/engine/replay.h"
#include "sim/model/model.h"
#include "sim/results/results.h"
#include "sim/runner/isolate.h"
#include "sim/scenario/scenario.h"
#include "sim/schedule/periodic.h"
#include "sim/simulate/simulate.h"
#include "sim/strategy/strategy.h"
#include "sim/traffic/traffic.h"
#include "tests/util/replay.h"

namespace shardsim {
namespace {

// LLaMA-7B's shapes cut to `layers`, on 2 DGX A100 nodes (16 GPUs), with
// `strategies`.
Scenario SmallScenario(int layers, const std::vector<std::string>& strategies,
                       int micro_batch_size, int micro_batches) {
  Scenario sc;
  sc.set_name("collapse_test");
  absl::StatusOr<Model> model = BuiltinModel("llama-7b");
  EXPECT_TRUE(model.ok()) << model.status();
  *sc.mutable_model_def() = *model;
  sc.mutable_model_def()->set_layers(layers);
  sc.set_platform("dgx_a100");
  for (const std::string& s : strategies) sc.add_strategies(s);
  sc.add_gpus(16);
  sc.set_micro_batch_size(micro_batch_size);
  sc.set_micro_batches(micro_batches);
  sc.set_seq_len(512);
  sc.set_flash_attention(true);
  sc.set_optimizer_bytes_per_param(12);
  return sc;
}

Job Resolved(const Scenario& sc) {
  absl::StatusOr<Job> job = ResolveJob("collapse_test.textproto", sc);
  EXPECT_TRUE(job.ok()) << job.status();
  return *job;
}

// 2 layers, every named strategy.
Job SmallJob(int micro_batches) {
  return Resolved(SmallScenario(2, NamedStrategies(), 2, micro_batches));
}

struct Replayed {
  double step = 0;
  bool collapsed = false;
  std::string full_because;
  std::vector<double> times;  // start, end, host_start, host_end per op
  std::vector<std::string> causes;
  Breakdown breakdown;
};

void Put(double v, std::string* out) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

Replayed ReplaySchedule(const Job& job, const Mesh& mesh, const StepOps& step,
                        bool collapse) {
  ChildTask task = [&]() -> absl::StatusOr<std::string> {
    StartSimGrid();
    absl::StatusOr<std::unique_ptr<Fabric>> fabric =
        Fabric::Build(job.platform, mesh);
    if (!fabric.ok()) return fabric.status();
    CollectiveEngine engine(**fabric, FlowMode::kFast, job.platform.channels());
    absl::StatusOr<StepTiming> t =
        ReplayStep(step, fabric->get(), &engine, collapse);
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
    for (const OpTime& o : t->ops) text.append(o.cause).append("\n");
    absl::StrAppend(&text, t->replay.full_because());
    Put(static_cast<double>(text.size()), &out);
    return out + text + t->breakdown.SerializeAsString();
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
  const size_t ops = step.size();
  rep.step = get(0);
  rep.collapsed = get(1) != 0;
  for (size_t i = 0; i < 4 * ops; ++i) rep.times.push_back(get(2 + i));
  const size_t text_at = (3 + 4 * ops) * sizeof(double);
  const size_t text_size = static_cast<size_t>(get(2 + 4 * ops));
  EXPECT_TRUE(rep.breakdown.ParseFromString(r->substr(text_at + text_size)));
  std::vector<std::string> lines =
      absl::StrSplit(r->substr(text_at, text_size), '\n');
  EXPECT_EQ(lines.size(), ops + 1);
  if (lines.size() != ops + 1) return rep;
  rep.full_because = lines.back();
  rep.causes.assign(lines.begin(), lines.end() - 1);
  return rep;
}

// Collapsed, the step as `run` gives it to the engine: folded where it can
// be (analyze.h); in full, every op stored.
Replayed ReplayPoint(const Job& job, const std::string& spec, bool collapse) {
  absl::StatusOr<Point> point = AnalyzePoint(
      job, spec, 16, collapse ? Storage::kFolded : Storage::kWhole);
  EXPECT_TRUE(point.ok()) << point.status();
  if (!point.ok()) return {};
  return ReplaySchedule(job, point->mesh, point->ops(), collapse);
}

void ExpectSameTimes(const Replayed& fast, const Replayed& full) {
  ASSERT_GT(full.step, 0);
  EXPECT_NEAR(fast.step, full.step, 1e-9 * full.step);
  ASSERT_EQ(fast.times.size(), full.times.size());
  for (size_t i = 0; i < full.times.size(); ++i) {
    ASSERT_NEAR(fast.times[i], full.times[i], 1e-9 * full.step)
        << "op " << i / 4 << " time " << i % 4;
  }
  EXPECT_EQ(fast.causes, full.causes);
  // The same breakdown: each cause's seconds, and each collective's.
  const google::protobuf::Descriptor* d = Breakdown::descriptor();
  const google::protobuf::Reflection* fields = Breakdown::GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (f->is_repeated() ||
        f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE) {
      continue;
    }
    EXPECT_NEAR(fields->GetDouble(fast.breakdown, f),
                fields->GetDouble(full.breakdown, f), 1e-9 * full.step)
        << f->name();
  }
  ASSERT_EQ(fast.breakdown.by_collective_size(),
            full.breakdown.by_collective_size());
  for (int i = 0; i < full.breakdown.by_collective_size(); ++i) {
    const ExposedCollective& a = fast.breakdown.by_collective(i);
    const ExposedCollective& b = full.breakdown.by_collective(i);
    EXPECT_EQ(a.collective(), b.collective());
    EXPECT_NEAR(a.seconds(), b.seconds(), 1e-9 * full.step) << b.collective();
  }
  const Stragglers& a = fast.breakdown.waited_on();
  const Stragglers& b = full.breakdown.waited_on();
  ASSERT_EQ(a.waits_size(), b.waits_size());
  for (int i = 0; i < b.waits_size(); ++i) {
    EXPECT_EQ(a.waits(i).rank(), b.waits(i).rank());
    EXPECT_NEAR(a.waits(i).seconds(), b.waits(i).seconds(), 1e-9 * full.step);
  }
}

// With a slow GPU (platform.proto Degraded: its class replayed alone), the
// collapsed step is the full one too, its wait on the straggler included.
TEST(Collapse, AStepWithASlowGpuMatchesTheFullReplay) {
  Job job = SmallJob(17);
  Degraded::Gpus* slow = job.platform.mutable_degraded()->add_gpus();
  slow->add_ranks(9);
  slow->set_speed(0.7);
  for (const std::string spec : {"zero2", "zero3"}) {
    SCOPED_TRACE(spec);
    const Replayed full = ReplayPoint(job, spec, /*collapse=*/false);
    const Replayed fast = ReplayPoint(job, spec, /*collapse=*/true);
    EXPECT_TRUE(fast.collapsed) << fast.full_because;
    ExpectSameTimes(fast, full);
    EXPECT_GT(full.breakdown.straggler_s(), 0);
    ASSERT_EQ(full.breakdown.waited_on().waits_size(), 1);
    EXPECT_EQ(full.breakdown.waited_on().waits(0).rank(), 9);
  }
}

// Same step, same trace: every op's four times to 1e-9 of the step, the
// same cause on every op of the critical path.
TEST(Collapse, EveryStrategyMatchesTheFullReplay) {
  for (int mb : {4, 5, 17}) {
    const Job job = SmallJob(mb);
    for (const std::string& spec : NamedStrategies()) {
      SCOPED_TRACE(absl::StrCat(spec, ", ", mb, " micro-batches"));
      const Replayed full = ReplayPoint(job, spec, /*collapse=*/false);
      const Replayed fast = ReplayPoint(job, spec, /*collapse=*/true);
      EXPECT_FALSE(full.collapsed);
      ExpectSameTimes(fast, full);
      // Collapsing needs four repeating micro-batches (the state at the
      // second boundary comes back at the third, and a block later the
      // tail): 4 give at most three, the last never repeating. At 5, ZeRO-2
      // repeats from its first (it reduces at the last only): four.
      const std::string name = spec;
      if (mb == 4) {
        EXPECT_FALSE(fast.collapsed) << fast.full_because;
      }
      if (mb == 5 && name == "zero2") {
        EXPECT_TRUE(fast.collapsed) << fast.full_because;
      }
      // At 17 the state repeats, at the host or on the GPU, unless a
      // stream's backlog grows without end (then there is no steady state).
      if (mb == 17 && !fast.collapsed) {
        EXPECT_NE(fast.full_because.find("falls further behind"),
                  std::string::npos)
            << fast.full_because;
      }
      // Both kinds collapse: the host waits on the GPU every micro-batch
      // in ZeRO-3 and FSDP FULL_SHARD (prefetch); it never waits inside a
      // micro-batch in DDP and ZeRO-1/2 (host runs ahead).
      if (mb == 17 && (name == "zero3" || name == "fsdp:FULL_SHARD" ||
                       name == "ddp" || name == "zero1" || name == "zero2")) {
        EXPECT_TRUE(fast.collapsed) << fast.full_because;
      }
    }
  }
}

// A point lowered whole and folded count the same traffic, row for row.
void ExpectSameTraffic(const Point& whole, const Point& fold,
                       const Platform& platform) {
  absl::StatusOr<std::vector<TrafficEntry>> a =
      CountTraffic(*whole.schedule, whole.mesh, platform);
  absl::StatusOr<std::vector<TrafficEntry>> b =
      CountTraffic(fold.ops(), fold.mesh, platform);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].SerializeAsString(), (*b)[i].SerializeAsString());
  }
}

// A folded step is the step lowered whole: every op, byte for byte, and
// the same repeating blocks and shortened schedule for the engine. Every
// named strategy with enough micro-batches to fold, at two counts.
TEST(Fold, EveryStrategyUnfoldsToTheWholeStep) {
  for (int mb : {kFoldAt + 2, 33}) {
    const Job job = SmallJob(mb);
    int folded = 0;
    for (const std::string& spec : NamedStrategies()) {
      SCOPED_TRACE(absl::StrCat(spec, ", ", mb, " micro-batches"));
      absl::StatusOr<Point> whole = LowerPoint(job, spec, 16);
      absl::StatusOr<Point> fold = LowerPoint(job, spec, 16, Storage::kFolded);
      ASSERT_TRUE(whole.ok() && fold.ok());
      if (!fold->fold) continue;
      ++folded;
      EXPECT_EQ(fold->fold->copies, mb - kFoldAt);
      EXPECT_EQ((*fold->schedule).ops_size() +
                    (mb - kFoldAt) * fold->fold->r.period_ops,
                (*whole->schedule).ops_size());
      const StepOps step = fold->ops();
      EXPECT_EQ(Unfold(step)->SerializeAsString(),
                whole->schedule->SerializeAsString());
      std::string why;
      const std::optional<Repeats> r = FindRepeats(*whole->schedule, &why);
      const std::optional<Repeats> rf = FindRepeats(step, &why);
      ASSERT_TRUE(r && rf);
      EXPECT_EQ(std::make_tuple(r->lo, r->hi, r->first_op, r->period_ops),
                std::make_tuple(rf->lo, rf->hi, rf->first_op, rf->period_ops));
      // Kept blocks within the base's repeating ones, the collapse's
      // (lo + 3: past the base's at kFoldAt), and up to the step's last.
      for (int keep : {r->lo, r->lo + 1, r->lo + 3, r->hi - 1}) {
        if (keep >= r->hi) continue;
        SCOPED_TRACE(absl::StrCat("keep ", keep));
        const std::optional<Shortened> a =
            DropBlocks(*whole->schedule, *r, keep, &why);
        const std::optional<Shortened> b = DropBlocks(step, *rf, keep, &why);
        ASSERT_TRUE(a && b) << why;
        EXPECT_EQ(a->schedule->SerializeAsString(),
                  b->schedule->SerializeAsString());
        EXPECT_EQ(a->pinned, b->pinned);
      }
      ExpectSameTraffic(*whole, *fold, job.platform);
    }
    // Every named strategy's micro-batches repeat from the third on.
    EXPECT_EQ(folded, static_cast<int>(NamedStrategies().size()));
  }
}

// Folding is refused, and the whole step lowered, below kFoldAt + 2
// micro-batches: nothing would be saved.
TEST(Fold, FewMicroBatchesAreLoweredWhole) {
  const Job job = SmallJob(kFoldAt + 1);
  absl::StatusOr<Point> p = LowerPoint(job, "zero3", 16, Storage::kFolded);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->fold);
  EXPECT_EQ(p->ops().size(), (*p->schedule).ops_size());
}

// A pipeline of `pp` stages (`vpp` chunks) over 16 GPUs of 2 DGX A100
// nodes: LLaMA-7B's shapes cut to 8 layers.
Job PipelineJob(int pp, int vpp, int tp, int micro_batches) {
  Scenario sc =
      SmallScenario(8, {"ddp", "zero1", "fsdp:FULL_SHARD"}, 1, micro_batches);
  sc.mutable_parallelism()->set_pp(pp);
  sc.mutable_parallelism()->set_vpp(vpp);
  sc.mutable_parallelism()->set_tp(tp);
  return Resolved(sc);
}

// A pipeline's step folds as one stage's does (its stages listed block by
// block, blocks of pp micro-batches where interleaved): the fold is the
// step lowered whole, op for op, with the same repeating blocks, memory
// and traffic, and the engine replays it to the same times, its collapse
// included.
TEST(Fold, PipelinesUnfoldToTheWholeStep) {
  struct Case {
    int pp, vpp, tp, m;
  };
  int collapsed = 0;
  for (const Case& c : {Case{2, 1, 1, 40}, Case{4, 1, 2, 64}, Case{2, 2, 2, 64},
                        Case{4, 2, 1, 128}}) {
    const Job job = PipelineJob(c.pp, c.vpp, c.tp, c.m);
    const int base = FoldBase(c.pp, c.vpp);
    const int stride = FoldStride(c.pp, c.vpp);
    ASSERT_TRUE(FoldsAt(job.scenario));
    for (const std::string& spec : job.scenario.strategies()) {
      SCOPED_TRACE(absl::StrCat(spec, ", pp ", c.pp, " vpp ", c.vpp, " tp ",
                                c.tp, ", ", c.m, " micro-batches"));
      absl::StatusOr<Point> whole = LowerPoint(job, spec, 16);
      absl::StatusOr<Point> fold = LowerPoint(job, spec, 16, Storage::kFolded);
      ASSERT_TRUE(whole.ok() && fold.ok());
      ASSERT_TRUE(fold->fold.has_value());
      EXPECT_EQ(fold->fold->copies, (c.m - base) / stride);
      EXPECT_EQ(fold->fold->r.stride, stride);
      const StepOps step = fold->ops();
      EXPECT_EQ(step.micro_batches(), c.m);
      EXPECT_EQ(Unfold(step)->SerializeAsString(),
                whole->schedule->SerializeAsString());
      std::string why;
      const std::optional<Repeats> r = FindRepeats(*whole->schedule, &why);
      const std::optional<Repeats> rf = FindRepeats(step, &why);
      ASSERT_TRUE(r && rf);
      EXPECT_EQ(
          std::make_tuple(r->lo, r->hi, r->first_op, r->period_ops, r->stride),
          std::make_tuple(rf->lo, rf->hi, rf->first_op, rf->period_ops,
                          rf->stride));
      EXPECT_EQ(fold->row.SerializeAsString(), whole->row.SerializeAsString());
      ExpectSameTraffic(*whole, *fold, job.platform);
      if (spec != "zero1") continue;  // one replay a layout
      const test::Replayed a = test::Replay(step, job.platform, fold->mesh);
      const test::Replayed b =
          test::Replay(*whole->schedule, job.platform, whole->mesh);
      EXPECT_EQ(a.replay.SerializeAsString(), b.replay.SerializeAsString());
      collapsed += a.replay.collapsed();
      EXPECT_EQ(a.step, b.step);
      EXPECT_EQ(a.breakdown.SerializeAsString(),
                b.breakdown.SerializeAsString());
      ASSERT_EQ(a.ops.size(), b.ops.size());
      for (size_t id = 0; id < a.ops.size(); ++id) {
        ASSERT_EQ(a.ops[id], b.ops[id]) << "op " << id;
      }
      // Replayed in full, as where the collapse finds no repeating state:
      // the fold unfolded, every op issued by its program.
      const test::Replayed full_a =
          test::Replay(step, job.platform, fold->mesh, /*every_class=*/false,
                       /*collapse=*/false);
      const test::Replayed full_b =
          test::Replay(*whole->schedule, job.platform, whole->mesh,
                       /*every_class=*/false, /*collapse=*/false);
      EXPECT_EQ(full_a.step, full_b.step);
      ASSERT_EQ(full_a.ops.size(), full_b.ops.size());
      for (size_t id = 0; id < full_a.ops.size(); ++id) {
        ASSERT_EQ(full_a.ops[id], full_b.ops[id]) << "op " << id;
      }
    }
  }
  // The 1F1B layouts' replays collapse (through the fold).
  EXPECT_GE(collapsed, 2);
}

// Where a pipeline's stages settle into a cycle of several blocks (no
// block's start state is the next one's, but every fourth one's is), the
// collapse takes the cycle's blocks together and stands for the full
// replay as with one: LLaMA-2-70B's shapes cut to 40 layers, tp 8 x pp 4
// x cp 2 with FSDP on 256 H100s, 32 micro-batches.
TEST(Collapse, AStateThatComesBackEveryFewBlocksCollapsesInBlocksOfThem) {
  Scenario sc;
  sc.set_name("cycle");
  absl::StatusOr<Model> model = BuiltinModel("llama-2-70b");
  ASSERT_TRUE(model.ok()) << model.status();
  *sc.mutable_model_def() = *model;
  sc.mutable_model_def()->set_layers(40);
  sc.set_platform("dgx_h100");
  sc.add_strategies("fsdp:FULL_SHARD");
  sc.add_gpus(256);
  sc.set_micro_batch_size(1);
  sc.set_seq_len(4096);
  sc.set_global_batch_tokens(32 * 4 * 4096);  // 32 micro-batches at dp 4
  sc.set_flash_attention(true);
  sc.set_optimizer_bytes_per_param(12);
  sc.mutable_parallelism()->set_tp(8);
  sc.mutable_parallelism()->set_pp(4);
  sc.mutable_parallelism()->set_cp(2);
  sc.mutable_parallelism()->set_sequence_parallel(true);
  const Job job = Resolved(sc);
  absl::StatusOr<Point> p =
      LowerPoint(job, "fsdp:FULL_SHARD", 256, Storage::kFolded);
  ASSERT_TRUE(p.ok()) << p.status();
  const StepOps step = p->ops();
  ASSERT_EQ(step.micro_batches(), 32);
  const test::Replayed fast = test::Replay(step, job.platform, p->mesh);
  const test::Replayed full = test::Replay(step, job.platform, p->mesh,
                                           /*every_class=*/false,
                                           /*collapse=*/false);
  EXPECT_TRUE(fast.replay.collapsed()) << fast.replay.full_because();
  EXPECT_LT(fast.replay.micro_batches_simulated(), 32);
  EXPECT_NEAR(fast.step, full.step, 1e-9 * full.step);
  ASSERT_EQ(fast.ops.size(), full.ops.size());
  for (size_t id = 0; id < full.ops.size(); ++id) {
    ASSERT_NEAR(fast.ops[id].first, full.ops[id].first, 1e-9 * full.step)
        << "op " << id;
    ASSERT_NEAR(fast.ops[id].second, full.ops[id].second, 1e-9 * full.step)
        << "op " << id;
  }
}

// A pipeline below kFoldGain bases is lowered whole: lowering the base
// twice would cost more than it saves.
TEST(Fold, ShortPipelinesAreLoweredWhole) {
  const Job job = PipelineJob(4, 1, 1, kFoldGain * FoldBase(4, 1) - 1);
  EXPECT_FALSE(FoldsAt(job.scenario));
  absl::StatusOr<Point> p = LowerPoint(job, "zero1", 16, Storage::kFolded);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->fold);
}

// A forward compute op on the compute stream, next in `s`, running kernel
// list `kernels` after `deps`; returns its id.
int AddForward(Schedule* s, int mb, const char* label, int kernels,
               const std::vector<int>& deps) {
  Op* op = s->add_ops();
  op->set_id(s->ops_size() - 1);
  op->set_stream(COMPUTE);
  op->set_micro_batch(mb);
  op->set_layer(-1);
  op->set_label(label);
  op->mutable_compute()->set_kind("forward");
  op->mutable_compute()->set_kernel_list(kernels);
  for (int d : deps) op->add_deps(d);
  return op->id();
}

// Hand-built, for a host that runs ahead: a prologue, then per
// micro-batch one compute op of `launches` kernel launches that takes twice
// as long on the GPU as on the host, then `tail_launches` launches of
// next to no GPU work, then an update. The host never waits, so its lead
// grows by half a micro-batch per micro-batch and only the GPU's state
// repeats.
Schedule RunawayHost(const Platform& p, int micro_batches, int tail_launches) {
  const int launches = 10;
  const double host_s = launches * p.kernels().host_launch_s();
  KernelList probe;  // GPU seconds per byte of a plain memory kernel
  probe.add_kernels()->mutable_memory()->set_general_bytes(int64_t{1} << 30);
  const double per_byte = ComputeOpCost(probe, p).seconds / (1 << 30);
  Schedule s;
  auto list = [&](int64_t bytes, int n) {
    MemoryKernel* k = s.add_kernel_lists()->add_kernels()->mutable_memory();
    k->set_general_bytes(bytes);
    k->set_launches(n);
    return s.kernel_lists_size() - 1;
  };
  const int small = list(1 << 20, 1);
  const int work = list(static_cast<int64_t>(2 * host_s / per_byte), launches);
  int prev = AddForward(&s, -1, "prologue", small, {});
  for (int mb = 0; mb < micro_batches; ++mb) {
    prev = AddForward(&s, mb, "work", work, {prev});
  }
  if (tail_launches > 0) {
    prev = AddForward(&s, -1, "launch-bound", list(1, tail_launches), {prev});
  }
  AddForward(&s, -1, "update", small, {prev});
  return s;
}

// RunawayHost at 17 micro-batches (the mesh of SmallJob's DDP point):
// replayed collapsed, then in full.
std::pair<Replayed, Replayed> ReplayRunaway(int tail_launches) {
  const Job job = SmallJob(17);
  absl::StatusOr<Point> point = AnalyzePoint(job, "ddp", 16);
  EXPECT_TRUE(point.ok()) << point.status();
  if (!point.ok()) return {};
  const Schedule s = RunawayHost(job.platform, 17, tail_launches);
  return {ReplaySchedule(job, point->mesh, StepOps(s), true),
          ReplaySchedule(job, point->mesh, StepOps(s), false)};
}

TEST(Collapse, HostThatRunsAheadCollapsesOnTheGpuState) {
  const auto [fast, full] = ReplayRunaway(0);
  EXPECT_TRUE(fast.collapsed) << fast.full_because;
  ExpectSameTimes(fast, full);
}

// The same, with a tail the host takes 200 launches (20 micro-batches of
// host time) to issue. In the shortened run the host reaches it 4 x 0.5
// micro-batches of GPU time ahead and holds it back; in the full step, 17 x
// 0.5 ahead, by less. Shifting the shortened tail would be wrong: the
// engine must see the host disagree and replay in full.
TEST(Collapse, HostThatHoldsTheTailBackAtAnotherPointReplaysInFull) {
  const auto [fast, full] = ReplayRunaway(200);
  EXPECT_FALSE(fast.collapsed);
  EXPECT_NE(fast.full_because.find("host issues op 18 (launch-bound)"),
            std::string::npos)
      << fast.full_because;
  ExpectSameTimes(fast, full);
}

// Hand-built: a prologue op, then per micro-batch a compute op that
// depends on the previous one, then an update after the last.
Schedule Chain(int micro_batches) {
  Schedule s;
  s.add_kernel_lists();  // none: nothing here is replayed
  auto add = [&](int mb, const char* label, std::vector<int> deps) {
    return AddForward(&s, mb, label, 0, deps);
  };
  int prev = add(-1, "prologue", {});
  const int first = prev;
  for (int mb = 0; mb < micro_batches; ++mb) {
    prev =
        add(mb, "work",
            mb == 0 ? std::vector<int>{prev} : std::vector<int>{prev, first});
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

TEST(Fold, ChainFoldedIsTheLongerChain) {
  // Chain(7) repeats blocks 1..5, one op each (ops 2..6). Folded by 3
  // copies of block 5 (op 6): ops 7..9 are op 6 one, two, three blocks on,
  // each on the op before it (shifted) and on the prologue (op 0, the same
  // in every block); the tail (op 7 work, op 8 update) becomes ops 10, 11,
  // micro-batch 6 + 3. That is Chain(10), op for op.
  std::string why;
  const Schedule base = Chain(7);
  std::optional<Fold> f = FoldOf(base, 3, 0, &why);
  ASSERT_TRUE(f.has_value()) << why;
  const StepOps step(base, *f);
  ASSERT_EQ(step.size(), 12);
  EXPECT_EQ(step.micro_batch(9), 8);
  EXPECT_EQ(step.deps(9), (StepOps::Refs{8, 0}));
  EXPECT_EQ(step.micro_batch(10), 9);
  EXPECT_EQ(step.deps(10), (StepOps::Refs{9, 0}));
  EXPECT_EQ(step.deps(11), (StepOps::Refs{10}));
  EXPECT_EQ(Unfold(step)->SerializeAsString(), Chain(10).SerializeAsString());
  // Micro-batches 0..9 (op 10 is the last work op); whole, Chain(7) has 7.
  EXPECT_EQ(step.micro_batches(), 10);
  EXPECT_EQ(StepOps(base).micro_batches(), 7);
}

// A collapsed replay's times, stored for the simulated ops only: 6 of 9,
// blocks of one op from op 1, block 2 (op 3) repeated by ops 4..6 at 10 s
// a block, and the tail (ops 4, 5 simulated) 3 blocks later as ops 7, 8.
TEST(StepTimes, RepeatedOpsAreTheSimulatedOnesLater) {
  std::vector<OpTime> simulated(6);
  for (int i = 0; i < 6; ++i) {
    simulated[i].start = i;
    simulated[i].end = i + 0.5;
  }
  // near_end, far_end, first_op, period_ops, lo, first_repeated, dropped,
  // period_s
  const StepTimes::Repeat r{3, 7, 1, 1, 0, 2, 3, 10};
  StepTimes t(simulated, 9, r);
  ASSERT_EQ(t.size(), 9);
  const double start[] = {0, 1, 2, 3, 13, 23, 33, 34, 35};
  for (int id = 0; id < 9; ++id) {
    EXPECT_DOUBLE_EQ(t[id].start, start[id]) << id;
    EXPECT_DOUBLE_EQ(t[id].end, start[id] + 0.5) << id;
  }
  t.set_cause(5, "bandwidth");
  EXPECT_EQ(t[5].cause, "bandwidth");
  EXPECT_TRUE(t[4].cause.empty());
  int n = 0;
  for (const OpTime& o : t) EXPECT_DOUBLE_EQ(o.start, start[n++]);
  EXPECT_EQ(n, 9);
}

// The critical path of a collapsed step walks its simulated blocks and
// skips the far ones it would cross the same way (replay.cc, PathWalk).
// Hand-built: a prologue, 20 ops each after the one before, an update;
// op i runs [i, i + 1) on the GPU, the host issued everything at 0. As
// collapsed: blocks of one op from op 2 (lo 1), block 3 (op 4) repeated
// by ops 5..17 a second apart, ops 18..21 the simulated 5..8 13 s later.
// The path is every op, back to back: 22 s of compute, each op marked, as
// walked over the same times stored whole.
TEST(StepTimes, CriticalPathSkipsTheRepeatedBlocksExactly) {
  Schedule s;
  s.add_kernel_lists();
  int prev = AddForward(&s, -1, "prologue", 0, {});
  for (int mb = 0; mb < 20; ++mb) prev = AddForward(&s, mb, "work", 0, {prev});
  AddForward(&s, -1, "update", 0, {prev});
  auto at = [](int i) {
    OpTime t;
    t.start = i;
    t.end = i + 1;
    t.base_s = t.gpu_s = 1;
    return t;
  };
  std::vector<OpTime> simulated, all;
  for (int i = 0; i < 9; ++i) simulated.push_back(at(i));
  for (int i = 0; i < 22; ++i) all.push_back(at(i));
  // near_end, far_end, first_op, period_ops, lo, first_repeated, dropped,
  // period_s (as in RepeatedOpsAreTheSimulatedOnesLater)
  const StepTimes::Repeat r{4, 18, 2, 1, 1, 3, 13, 1};
  StepTimes collapsed(simulated, 22, r);
  StepTimes whole(all);
  const Breakdown a = CriticalPathBreakdown(StepOps(s), &collapsed);
  const Breakdown b = CriticalPathBreakdown(StepOps(s), &whole);
  EXPECT_DOUBLE_EQ(a.compute_s(), 22);
  EXPECT_DOUBLE_EQ(a.launch_overhead_s(), 0);
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  for (int id = 0; id < 22; ++id) {
    EXPECT_DOUBLE_EQ(collapsed[id].start, id);
    EXPECT_EQ(collapsed.cause(id), "compute") << id;
    EXPECT_EQ(whole.cause(id), "compute") << id;
  }
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
  ASSERT_EQ(cut->schedule->ops_size(), 6);
  EXPECT_EQ(cut->schedule->ops(4).id(), 4);
  EXPECT_EQ(cut->schedule->ops(4).micro_batch(), 6);
  ASSERT_EQ(cut->schedule->ops(4).deps_size(), 2);
  EXPECT_EQ(cut->schedule->ops(4).deps(0), 3);
  EXPECT_EQ(cut->schedule->ops(4).deps(1), 0);
  EXPECT_EQ(cut->schedule->ops(5).deps(0), 4);
  EXPECT_EQ(cut->pinned, std::vector<int>{0});
}

TEST(Repeats, TooFewMicroBatchesSayWhy) {
  std::string why;
  EXPECT_FALSE(FindRepeats(Chain(2), &why).has_value());
  EXPECT_NE(why.find("2 micro-batches"), std::string::npos) << why;
}

}  // namespace
}  // namespace shardsim

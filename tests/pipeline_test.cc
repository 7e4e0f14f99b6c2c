// Pipeline parallelism: the schedules' order (Megatron's, by hand), the
// bubble that falls out of replaying the stages, and the activations each
// stage keeps in flight.
#include "sim/schedule/pipeline/pipeline.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/base/layout.h"
#include "sim/memory/allocation.h"
#include "sim/model/model.h"
#include "sim/scenario/scenario.h"
#include "sim/schedule/lower.h"
#include "sim/schedule/pipeline/order.h"
#include "sim/strategy/execution.h"
#include "sim/strategy/strategy.h"
#include "tests/util/replay.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

std::string Text(const std::vector<PipeStep>& order) {
  std::string out;
  for (const PipeStep& p : order) {
    out += (p.forward ? "F" : "B") + std::to_string(p.mb);
    if (p.chunk > 0) out += "." + std::to_string(p.chunk);
    out += " ";
  }
  return out;
}

std::vector<PipeStep> Order(PipelineSchedule s, int stages, int chunks,
                            int micro_batches, int stage) {
  absl::StatusOr<std::vector<PipeStep>> o =
      StageOrder(s, stages, chunks, micro_batches, stage);
  EXPECT_TRUE(o.ok()) << o.status();
  return o.ok() ? *o : std::vector<PipeStep>{};
}

// 4 stages, 6 micro-batches: stage s warms up with 3 - s forwards
// (schedules.py: num_warmup_microbatches = pp - rank - 1).
TEST(PipelineOrder, OneForwardOneBackwardWarmsUpByStage) {
  EXPECT_EQ(Text(Order(ONE_F_ONE_B, 4, 1, 6, 0)),
            "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5 ");
  EXPECT_EQ(Text(Order(ONE_F_ONE_B, 4, 1, 6, 3)),
            "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 ");
  EXPECT_EQ(Text(Order(GPIPE, 4, 1, 3, 2)), "F0 F1 F2 B0 B1 B2 ");
  // Fewer micro-batches than warm-up: every forward first.
  EXPECT_EQ(Text(Order(ONE_F_ONE_B, 4, 1, 2, 0)), "F0 F1 B0 B1 ");
}

// 2 stages, 2 chunks, 4 micro-batches (Megatron's interleaving): groups of
// 2 micro-batches go through chunk 0 then chunk 1 forward, chunk 1 then 0
// backward. Stage 0 warms up with (2 - 0 - 1) * 2 + (2 - 1) * 2 = 4
// forwards, stage 1 with 2, of the 8 passes each way.
TEST(PipelineOrder, InterleavedFollowsMegatronsGroups) {
  EXPECT_EQ(Text(Order(INTERLEAVED_1F1B, 2, 2, 4, 0)),
            "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3 ");
  EXPECT_EQ(Text(Order(INTERLEAVED_1F1B, 2, 2, 4, 1)),
            "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3 ");
  // micro_batches == stages: every forward first.
  EXPECT_EQ(Text(Order(INTERLEAVED_1F1B, 2, 2, 2, 1)),
            "F0 F1 F0.1 F1.1 B0.1 B1.1 B0 B1 ");
  EXPECT_FALSE(StageOrder(INTERLEAVED_1F1B, 4, 2, 6, 0).ok());
  EXPECT_FALSE(StageOrder(ONE_F_ONE_B, 4, 2, 8, 0).ok());
}

// Every schedule runs each pass once, a micro-batch's backward after its
// forward, at every stage.
TEST(PipelineOrder, EveryPassOnceBackwardAfterForward) {
  for (auto [s, chunks] :
       std::vector<std::pair<PipelineSchedule, int>>{{GPIPE, 1},
                                                     {ONE_F_ONE_B, 1},
                                                     {INTERLEAVED_1F1B, 2},
                                                     {INTERLEAVED_1F1B, 3}}) {
    for (int stages : {1, 2, 4}) {
      for (int m : {4, 8, 12}) {
        for (int stage = 0; stage < stages; ++stage) {
          std::set<std::tuple<bool, int, int>> seen;
          for (const PipeStep& p : Order(s, stages, chunks, m, stage)) {
            EXPECT_TRUE(seen.insert({p.forward, p.mb, p.chunk}).second);
            if (!p.forward) {
              EXPECT_TRUE(seen.count({true, p.mb, p.chunk}));
            }
          }
          EXPECT_EQ(seen.size(), static_cast<size_t>(2 * m * chunks));
        }
      }
    }
  }
}

TEST(PipelineLayers, EmbeddingFirstHeadLastBlocksSplit) {
  absl::StatusOr<std::vector<std::vector<int>>> v =
      VirtualStageLayers(8, 2, 2, {});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, (std::vector<std::vector<int>>{
                    {0, 1, 2}, {3, 4}, {5, 6}, {7, 8, 9}}));
  v = VirtualStageLayers(7, 2, 1, {3, 4});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7, 8}}));
  EXPECT_FALSE(VirtualStageLayers(7, 2, 1, {}).ok());
  EXPECT_FALSE(VirtualStageLayers(7, 2, 1, {3, 3}).ok());
}

// ---- the bubble, replayed --------------------------------------------

// A GPT-like model whose embedding and head are a sliver of a block (a
// vocabulary of 64 against hidden 4096): stages of blocks alone are alike.
Model Uniform(int layers) {
  Model m;
  m.set_name("uniform");
  m.set_layers(layers);
  m.set_hidden(4096);
  m.set_heads(32);
  m.set_kv_heads(32);
  m.set_ffn_hidden(4 * 4096);
  m.set_vocab(64);
  m.set_mlp(Model::GELU);
  m.set_norm(Model::LAYERNORM);
  return m;
}

struct Piped {
  OwnedSchedule schedule;
  std::vector<Layer> layers;
};

Piped Lower(const Model& model, int pp, int vpp, PipelineSchedule schedule,
            int micro_batches, const std::string& spec = "ddp", int dp = 1,
            const Execution& ex = Execution(), int tp = 1, int nodes = 1) {
  Scenario s = test::Training(micro_batches, 2048);
  s.set_flash_attention(true);
  s.mutable_parallelism()->set_pp(pp);
  s.mutable_parallelism()->set_vpp(vpp);
  s.mutable_parallelism()->set_pipeline_schedule(schedule);
  if (tp > 1) s.mutable_parallelism()->set_tp(tp);
  Piped out;
  out.layers = ModelLayers(model, ScenarioBatch(s));
  // tp x dp GPUs a stage, on one node or on `nodes`.
  const Mesh mesh{pp * dp * tp / nodes, nodes};
  // The data-parallel ranks of a node: those of its tensor-parallel groups.
  const int dp_per_node = std::min(dp, std::max(1, mesh.gpus_per_node / tp));
  absl::StatusOr<Strategy> st =
      ParseStrategy(spec, Mesh{dp_per_node, dp / dp_per_node});
  EXPECT_TRUE(st.ok()) << st.status();
  EXPECT_TRUE(ResolveExecution(ex, model.hidden(), &*st).ok());
  absl::StatusOr<OwnedSchedule> lowered = LowerStep(out.layers, *st, mesh, s);
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  if (lowered.ok()) out.schedule = *std::move(lowered);
  return out;
}

// Seconds program `p`'s compute ops of one micro-batch run: forward (the
// same for every micro-batch), backward of micro-batch 0 and of the others
// (which also add their gradients into those kept: DDP's no_sync
// accumulation); and the span from the first forward to the last backward
// of any program.
struct Times {
  double forward = 0, backward0 = 0, backward = 0, span = 0;
};
Times Measure(const Schedule& s, const test::Replayed& r, int p) {
  Times t;
  double first = 1e30, last = 0;
  for (const Op& op : s.ops()) {
    if (!op.has_compute()) continue;
    const auto [start, end] = r.ops[op.id()];
    if (op.phase() == FORWARD) first = std::min(first, start);
    if (op.phase() == BACKWARD) last = std::max(last, end);
    if (op.program() != p || op.micro_batch() > 1) continue;
    if (op.phase() == FORWARD && op.micro_batch() == 1)
      t.forward += end - start;
    if (op.phase() == BACKWARD) {
      (op.micro_batch() == 0 ? t.backward0 : t.backward) += end - start;
    }
  }
  t.span = last - first;
  return t;
}

// With every stage alike and sends next to free, 1F1B and GPipe both take
// (p - 1)(tf + tb) + m tf + tb0 + (m - 1) tb from the first forward to the
// last backward: the last stage busy with every micro-batch after p - 1
// forwards reach it, then the last backward back through p - 1 stages. With
// one backward time that is (m + p - 1)(tf + tb): a bubble of
// (p - 1)/(m + p - 1) (Narayanan et al. 2021, section 2.2.1). The times are
// a middle stage's (blocks only). The slack allowed, 2%, is the sends
// (16 MiB over NVSwitch, about 0.1 ms each, 2(p - 1) of them on the path),
// the embedding and head, and micro-batch 0's shorter backward, which
// leaves its successors waiting on the next stage's sends; a bubble
// missing, or not divided by the chunks below, is off by 9% or more.
TEST(PipelineBubble, OneForwardOneBackwardAndGpipeFallOutOfTheReplay) {
  const Platform a100 = test::ShippedPlatform("dgx_a100");
  for (PipelineSchedule schedule : {ONE_F_ONE_B, GPIPE}) {
    const int p = 4, m = 8;
    Piped piped = Lower(Uniform(8), p, 1, schedule, m);
    const test::Replayed r = test::Replay(*piped.schedule, a100, Mesh{p, 1});
    ASSERT_FALSE(r.ops.empty());
    const Times t = Measure(*piped.schedule, r, 1);
    const double expect = (p - 1) * (t.forward + t.backward) + m * t.forward +
                          t.backward0 + (m - 1) * t.backward;
    EXPECT_NEAR(t.span / expect, 1.0, 0.02)
        << PipelineSchedule_Name(schedule) << ": tf " << t.forward << " tb0 "
        << t.backward0 << " tb " << t.backward << " span " << t.span;
  }
}

// Interleaving v chunks a stage cuts the bubble to (p - 1)(tf + tb)/v
// (Narayanan et al. 2021, section 2.2.2), tf and tb a whole stage's.
TEST(PipelineBubble, InterleavingDividesItByTheChunks) {
  const Platform a100 = test::ShippedPlatform("dgx_a100");
  const int p = 4, v = 2, m = 8;
  Piped piped = Lower(Uniform(8), p, v, INTERLEAVED_1F1B, m);
  const test::Replayed r = test::Replay(*piped.schedule, a100, Mesh{p, 1});
  ASSERT_FALSE(r.ops.empty());
  const Times t = Measure(*piped.schedule, r, 1);
  const double busy = m * t.forward + t.backward0 + (m - 1) * t.backward;
  const double expect = busy + (p - 1) * (t.forward + t.backward) / v;
  EXPECT_NEAR(t.span / expect, 1.0, 0.02)
      << "tf " << t.forward << " tb0 " << t.backward0 << " tb " << t.backward
      << " span " << t.span;
}

// ---- the collapse ----------------------------------------------------

// 1F1B's steady state repeats across every stage: the collapsed replay
// (sim/engine/replay.h) simulates its first blocks and the cool-down,
// each stage's first node standing for its others (node symmetry, where
// stages hold whole nodes), and stands for the full replay with every
// node's flows exactly, whatever the layout and strategy: the
// same step, breakdown and every op's times, to rounding; the interleaved
// schedule too, its blocks a group of pp micro-batches each. GPipe has no
// repeating block (its backwards all follow the last forward) and says
// why.
TEST(PipelineCollapse, StandsForTheFullReplayExactly) {
  const Platform a100 = test::ShippedPlatform("dgx_a100");
  struct Case {
    int pp, vpp;
    PipelineSchedule schedule;
    int m;
    std::string spec;
    int dp, tp, nodes;
    bool collapses;
  };
  const std::vector<Case> cases = {
      {2, 1, ONE_F_ONE_B, 12, "ddp", 1, 1, 1, true},
      {4, 1, ONE_F_ONE_B, 32, "ddp", 1, 1, 1, true},
      {4, 1, ONE_F_ONE_B, 32, "zero1", 2, 1, 1, true},
      {2, 1, ONE_F_ONE_B, 12, "zero1", 2, 2, 2, true},  // tp 2, two nodes
      {2, 1, ONE_F_ONE_B, 12, "zero1", 2, 2, 4, true},  // two nodes a stage
      // ZeRO-3 prefetches the next micro-batch's parameters before a stage
      // sends its output: its stages are listed by groups of pp blocks.
      {2, 1, ONE_F_ONE_B, 24, "zero3", 2, 1, 2, true},
      {2, 1, ONE_F_ONE_B, 12, "fsdp:FULL_SHARD", 2, 2, 2, true},
      {4, 1, ONE_F_ONE_B, 32, "zero2", 2, 1, 4, true},  // a stage a node
      // Interleaved: blocks of a group of pp micro-batches.
      {2, 2, INTERLEAVED_1F1B, 32, "ddp", 2, 2, 2, true},
      // The same on one node, and at 4 stages: the state does not repeat
      // within the blocks two tries keep (engine.md §9), a full replay.
      {2, 2, INTERLEAVED_1F1B, 48, "ddp", 1, 1, 1, false},
      {4, 2, INTERLEAVED_1F1B, 64, "zero1", 2, 1, 2, false},
      {2, 1, GPIPE, 8, "ddp", 1, 1, 1, false},
  };
  for (const Case& c : cases) {
    const std::string what = absl::StrCat(
        PipelineSchedule_Name(c.schedule), " pp ", c.pp, " vpp ", c.vpp, " m ",
        c.m, " ", c.spec, " dp ", c.dp, " tp ", c.tp, " nodes ", c.nodes);
    Piped piped = Lower(Uniform(8), c.pp, c.vpp, c.schedule, c.m, c.spec, c.dp,
                        Execution(), c.tp, c.nodes);
    const Mesh mesh{c.pp * c.dp * c.tp / c.nodes, c.nodes};
    const test::Replayed fast = test::Replay(*piped.schedule, a100, mesh);
    // Every micro-batch, every node's flows.
    const test::Replayed full =
        test::Replay(*piped.schedule, a100, mesh, false, /*collapse=*/false,
                     /*symmetry=*/false);
    ASSERT_EQ(fast.ops.size(), full.ops.size()) << what;
    ASSERT_FALSE(full.ops.empty()) << what;
    EXPECT_EQ(fast.replay.collapsed(), c.collapses)
        << what << ": " << fast.replay.full_because();
    if (c.collapses) {
      EXPECT_LT(fast.replay.micro_batches_simulated(), c.m) << what;
    } else {
      EXPECT_FALSE(fast.replay.full_because().empty()) << what;
    }
    EXPECT_NEAR(fast.step, full.step, 1e-9 * full.step) << what;
    for (size_t id = 0; id < full.ops.size(); ++id) {
      ASSERT_NEAR(fast.ops[id].first, full.ops[id].first, 1e-9 * full.step)
          << what << ": op " << id;
      ASSERT_NEAR(fast.ops[id].second, full.ops[id].second, 1e-9 * full.step)
          << what << ": op " << id;
    }
    const Breakdown& a = fast.breakdown;
    const Breakdown& b = full.breakdown;
    EXPECT_NEAR(a.compute_s(), b.compute_s(), 1e-9 * full.step) << what;
    EXPECT_NEAR(a.pipeline_bubble_s(), b.pipeline_bubble_s(), 1e-9 * full.step)
        << what;
    EXPECT_NEAR(a.optimizer_s(), b.optimizer_s(), 1e-9 * full.step) << what;
  }
}

// ---- the breakdown ---------------------------------------------------

// The critical path of a pipeline is its busiest stage's: every second of
// the step is that stage's own work or a wait on the others. With alike
// stages and no data parallelism nothing else keeps its compute stream
// idle, so the bubble (with the host's launch gaps, a few microseconds)
// is exactly the seconds that stream does nothing, for 1F1B and
// interleaved alike; optim is that stage's update kernels (all on the
// path: the step ends with them) and compute its other kernels.
TEST(PipelineBreakdown, BubbleIsTheBusiestStagesIdleTime) {
  const Platform a100 = test::ShippedPlatform("dgx_a100");
  const int p = 4, m = 8;
  for (const auto& [schedule, v] :
       {std::pair{ONE_F_ONE_B, 1}, std::pair{INTERLEAVED_1F1B, 2}}) {
    Piped piped = Lower(Uniform(8), p, v, schedule, m);
    const test::Replayed r = test::Replay(*piped.schedule, a100, Mesh{p, 1});
    ASSERT_FALSE(r.ops.empty());
    std::vector<double> kernels(p, 0), busy(p, 0), update(p, 0);
    for (const Op& op : piped.schedule->ops()) {
      if (op.stream() != COMPUTE) continue;
      const double d = r.ops[op.id()].second - r.ops[op.id()].first;
      busy[op.program()] += d;
      if (!op.has_compute()) continue;
      kernels[op.program()] += d;
      if (op.phase() == UPDATE) update[op.program()] += d;
    }
    const int b = static_cast<int>(
        std::max_element(kernels.begin(), kernels.end()) - kernels.begin());
    const Breakdown& w = r.breakdown;
    const std::string what = PipelineSchedule_Name(schedule);
    EXPECT_NEAR(w.pipeline_bubble_s() + w.launch_overhead_s(), r.step - busy[b],
                1e-9 * r.step)
        << what;
    EXPECT_LT(w.launch_overhead_s(), 1e-3 * r.step) << what;
    EXPECT_NEAR(w.optimizer_s(), update[b], 1e-9 * r.step) << what;
    EXPECT_GT(w.optimizer_s(), 0) << what;
    EXPECT_NEAR(w.compute_s() + w.compute_slowdown_s() + w.optimizer_s(),
                kernels[b], 1e-9 * r.step)
        << what;
  }
}

// FSDP2 under a pipeline, as torchtitan runs it (reshard_after_forward
// False, no reshard and no gradient sync after any backward but the last):
// each stage gathers each unit once a step and reduce-scatters it once,
// where FULL_SHARD gathers it for every forward and backward and reduces
// it every micro-batch. Held through the step, a stage's peak buffers are
// all its units whole, parameters and accumulated gradients: 2 + 2 bytes a
// parameter.
TEST(PipelineMemory, FsdpHeldThroughTheStepGathersAndReducesOnce) {
  const int p = 2, m = 4, dp = 2;
  Execution held;
  held.set_hold_params_through_step(true);
  held.set_reduce_every_micro_batch(false);
  Piped once =
      Lower(Uniform(8), p, 1, ONE_F_ONE_B, m, "fsdp:FULL_SHARD", dp, held);
  Piped every = Lower(Uniform(8), p, 1, ONE_F_ONE_B, m, "fsdp:FULL_SHARD", dp);
  absl::StatusOr<std::vector<std::vector<int>>> stages =
      VirtualStageLayers(8, p, 1, {});
  ASSERT_TRUE(stages.ok());
  // The parameters' gathers ("P") and the gradients' reductions ("G").
  auto count = [](const Schedule& s, int program, CollectiveOp kind) {
    const std::string tensor = kind == ALL_GATHER ? "P" : "G";
    int n = 0;
    for (const Op& op : s.ops()) {
      n += op.program() == program && op.has_collective() &&
           op.collective().op() == kind && op.collective().tensor() == tensor;
    }
    return n;
  };
  for (int s = 0; s < p; ++s) {
    const int units = static_cast<int>((*stages)[s].size());
    int64_t params = 0;
    for (int l : (*stages)[s]) params += once.layers[l].params;
    EXPECT_EQ(count(*once.schedule, s, ALL_GATHER), units) << s;
    EXPECT_EQ(count(*every.schedule, s, ALL_GATHER), 2 * m * units) << s;
    EXPECT_EQ(count(*once.schedule, s, REDUCE_SCATTER), units) << s;
    EXPECT_EQ(count(*every.schedule, s, REDUCE_SCATTER), m * units) << s;
    absl::StatusOr<AllocationPlan> plan = PlanAllocations(*once.schedule, s);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->own_peak.buffers, (2 + 2) * params) << s;
  }
}

// Megatron's --overlap-grad-reduce buckets: max(reduce_bucket_elements,
// per rank x dp) parameters, filled in backward order (head 270,336,
// blocks 201,342,976 each, embedding 262,144) and reduced when the next
// segment would overflow: at 2 x 150M = 300M the head goes with block 7
// and the embedding with block 0, 8 buckets; at 2 x 250M = 500M, {head,
// 7, 6}, {5, 4}, {3, 2}, {1, 0, embedding}: 4; a bucket of one element
// reduces every segment alone: 10.
TEST(PipelineMemory, MegatronBucketsGrowWithTheDataParallelRanks) {
  auto buckets = [](int64_t per_rank) {
    Execution ex;
    ex.set_overlap_comm(true);
    ex.set_reduce_bucket_elements(1);
    ex.set_reduce_bucket_elements_per_rank(per_rank);
    Piped step = Lower(Uniform(8), 1, 1, PIPELINE_SCHEDULE_UNSPECIFIED, 2,
                       "megatron:DISTRIBUTED_OPTIMIZER", 2, ex);
    int n = 0;
    for (const Op& op : step.schedule->ops()) {
      n += op.has_collective() && op.collective().op() == REDUCE_SCATTER &&
           op.stream() == REDUCE;
    }
    return n;
  };
  EXPECT_EQ(buckets(150'000'000), 8);
  EXPECT_EQ(buckets(250'000'000), 4);
  EXPECT_EQ(buckets(0), 10);
}

// Under 1F1B stage s holds min(p - s, m) micro-batches' activations at
// once, under GPipe all m: the activation line's own peak of each stage is
// that many times the stage's layers' activations of one micro-batch.
TEST(PipelineMemory, ActivationsInFlightPerStage) {
  const int p = 4, m = 6;
  for (PipelineSchedule schedule : {ONE_F_ONE_B, GPIPE}) {
    Piped piped = Lower(Uniform(8), p, 1, schedule, m);
    absl::StatusOr<std::vector<std::vector<int>>> stages =
        VirtualStageLayers(8, p, 1, {});
    ASSERT_TRUE(stages.ok());
    for (int s = 0; s < p; ++s) {
      int64_t one = 0;
      for (int l : (*stages)[s]) one += piped.layers[l].activation_bytes;
      const int in_flight = schedule == GPIPE ? m : std::min(p - s, m);
      absl::StatusOr<AllocationPlan> plan = PlanAllocations(*piped.schedule, s);
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(plan->own_peak.activations, in_flight * one)
          << PipelineSchedule_Name(schedule) << " stage " << s;
    }
  }
}

// Interleaved 1F1B: stage s warms up with 2(p - s - 1) + (v - 1)p chunk
// passes (schedules.py, forward_backward_pipelining_with_interleaving),
// so it holds one more than that, each a chunk of L/(pv) blocks, whatever
// the micro-batch count (of at least 2p; with m = p every forward runs
// first, p v chunk passes). Stage 0 then holds 2(p - 1) + (v - 1)p + 1 =
// pv + p - 1 chunks where 1F1B holds p stages' worth (pv chunks): 1F1B's
// activations x (1 + (p - 1)/(pv)), Korthikanti et al. 2022 section 4.2.3.
TEST(PipelineMemory, InterleavedHoldsItsWarmUpWhateverTheMicroBatches) {
  const int p = 4, layers = 16;
  const Model model = Uniform(layers);
  for (int v : {2, 4}) {
    const int per_chunk = layers / (p * v);
    for (int m : {2 * p, 4 * p, 8 * p, 16 * p}) {
      Piped piped = Lower(model, p, v, INTERLEAVED_1F1B, m);
      Piped flat = Lower(model, p, 1, ONE_F_ONE_B, m);
      const int64_t block = piped.layers[1].activation_bytes;
      for (int s = 0; s < p; ++s) {
        absl::StatusOr<AllocationPlan> plan =
            PlanAllocations(*piped.schedule, s);
        ASSERT_TRUE(plan.ok()) << plan.status();
        const int in_flight = 2 * (p - s - 1) + (v - 1) * p + 1;
        if (s > 0 && s < p - 1) {  // blocks only: exact
          EXPECT_EQ(plan->own_peak.activations,
                    int64_t{in_flight} * per_chunk * block)
              << "v " << v << " m " << m << " stage " << s;
        }
        if (s != 0) continue;
        absl::StatusOr<AllocationPlan> one = PlanAllocations(*flat.schedule, 0);
        ASSERT_TRUE(one.ok()) << one.status();
        // The embedding's activations (a vocabulary of 64) are a sliver.
        EXPECT_NEAR(static_cast<double>(plan->own_peak.activations) /
                        one->own_peak.activations,
                    1.0 + (p - 1.0) / (p * v), 1e-3)
            << "v " << v << " m " << m;
      }
    }
  }
}

}  // namespace
}  // namespace shardsim

namespace shardsim {
namespace {

// ---- what crosses between stages -----------------------------------------

// Megatron-LM's scatter-gather of pipeline tensors (p2p_communication.py at
// 6985e58): each of the tp ranks sends 1/tp of the boundary, 2 s h bytes
// of one micro-batch (16 MiB at seq 2048, hidden 4096: 8 MiB each at tp
// 2), and the receiving stage all-gathers the whole boundary over its
// tensor-parallel group before the pass that needs it, once for each
// forward stage 1 receives and each backward stage 0 receives: m each.
// Without it every rank sends the whole boundary and nothing is gathered.
TEST(PipelineSends, ScatterGatherSendsATpthAndGathersItAtTheReceiver) {
  const int p = 2, m = 4, tp = 2;
  const int64_t boundary = int64_t{2} * 2048 * 4096;
  for (bool split : {false, true}) {
    Execution ex;
    ex.set_pipeline_scatter_gather(split);
    Piped piped = Lower(Uniform(8), p, 1, ONE_F_ONE_B, m, "ddp", 1, ex, tp);
    ASSERT_EQ(piped.layers[1].output_bytes, boundary);
    const Schedule& s = *piped.schedule;
    std::map<std::pair<int, std::string>, int> gathers;  // (program, tensor)
    int sends = 0;
    for (const Op& op : s.ops()) {
      if (op.has_send()) {
        ++sends;
        EXPECT_EQ(op.send().bytes(), split ? boundary / tp : boundary);
      }
      if (!op.has_collective() || op.collective().op() != ALL_GATHER) continue;
      EXPECT_EQ(op.collective().bytes(), boundary) << op.label();
      EXPECT_EQ(GroupSize(op.collective().group()), tp) << op.label();
      // It waits for the other stage's send.
      bool waits = false;
      for (int d : op.deps()) {
        waits = waits ||
                (s.ops(d).has_send() && s.ops(d).program() != op.program());
      }
      EXPECT_TRUE(waits) << op.label();
      ++gathers[{op.program(), op.collective().tensor()}];
    }
    EXPECT_EQ(sends, 2 * m);
    if (split) {
      EXPECT_EQ((gathers[{1, "received activations"}]), m);
      EXPECT_EQ((gathers[{0, "received activation grads"}]), m);
      EXPECT_EQ(gathers.size(), 2u);
    } else {
      EXPECT_TRUE(gathers.empty());
    }
  }
}

// Megatron-LM reduces its gradients after the pipeline schedule
// (finalize_model_grads), so a stage's reduction never holds back the
// gradients it sends to the stage before: in every stage but the first
// the data-parallel all-reduce is issued after the last send and starts
// after it has left. (Issued before it, the reductions ran one stage after
// another down the pipeline, p of them on the path where one is.)
TEST(PipelineSends, TheReductionAfterTheScheduleWaitsForTheLastSend) {
  const int p = 4, m = 8, dp = 2;
  Piped piped = Lower(Uniform(8), p, 1, ONE_F_ONE_B, m, "megatron:DDP", dp);
  const Schedule& s = *piped.schedule;
  const test::Replayed r =
      test::Replay(s, test::ShippedPlatform("dgx_a100"), Mesh{p * dp, 1});
  for (int stage = 1; stage < p; ++stage) {
    int last_send = -1, reduce = -1;
    for (const Op& op : s.ops()) {
      if (op.program() != stage) continue;
      if (op.has_send()) last_send = op.id();
      if (op.has_collective() && op.collective().op() == ALL_REDUCE &&
          op.collective().tensor() == "G") {
        reduce = op.id();
      }
    }
    ASSERT_GE(last_send, 0) << stage;
    ASSERT_GE(reduce, 0) << stage;
    EXPECT_GT(reduce, last_send) << stage;
    EXPECT_GE(r.ops[reduce].first, r.ops[last_send].second - 1e-12) << stage;
  }
}

// The scatter-gather needs a pipeline to split and is not modelled with
// sequence parallelism: each refused, naming the field.
TEST(PipelineSends,
     ScatterGatherRefusedWithoutAPipelineOrWithSequenceParallel) {
  Scenario s = test::TinyStep("ddp", 8);
  s.mutable_execution()->set_pipeline_scatter_gather(true);
  s.mutable_parallelism()->set_tp(2);
  absl::Status v = ValidateScenario(s, "sg.textproto");
  EXPECT_FALSE(v.ok());
  EXPECT_NE(v.message().find("execution.pipeline_scatter_gather"),
            std::string::npos)
      << v;
  EXPECT_NE(v.message().find("pp > 1"), std::string::npos) << v;
  s.mutable_parallelism()->set_pp(2);
  EXPECT_TRUE(ValidateScenario(s, "sg.textproto").ok());
  s.mutable_parallelism()->set_sequence_parallel(true);
  v = ValidateScenario(s, "sg.textproto");
  EXPECT_FALSE(v.ok());
  EXPECT_NE(v.message().find("sequence_parallel"), std::string::npos) << v;
}

}  // namespace
}  // namespace shardsim

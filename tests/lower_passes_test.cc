// The lowering's passes (sim/schedule/lower/): the walk's host order, where
// recomputes go, and the order RunPasses calls the passes' hooks in, which
// decides every op's id.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/schedule/lower/pass.h"
#include "sim/schedule/lower/recompute.h"
#include "sim/schedule/lower/step.h"
#include "sim/schedule/lower/walk.h"
#include "sim/strategy/execution.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace lower {
namespace {

// Two layers of one unit each; layer 1 recomputes.
std::vector<Layer> TwoLayers() {
  std::vector<Layer> layers(2);
  for (int i = 0; i < 2; ++i) {
    layers[i].name = absl::StrCat("block ", i);
    layers[i].params = 1000;
    Unit linear;
    linear.name = "linear";
    linear.params = 1000;
    layers[i].units.push_back(linear);
  }
  layers[1].recompute_flops = 1;
  return layers;
}

std::string Names(const std::vector<Visit>& visits) {
  std::string s;
  for (const Visit& v : visits) {
    absl::StrAppend(&s,
                    v.recompute() ? "R"
                    : v.forward() ? "F"
                                  : "B",
                    v.recompute() ? v.layer : v.seg, v.mb, " ");
  }
  return s;
}

class LowerPasses : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Strategy> st = ParseStrategy("ddp", mesh_);
    ASSERT_TRUE(st.ok()) << st.status();
    strategy_ = *st;
    ASSERT_TRUE(ResolveExecution(scenario_.execution(), 4096, &strategy_).ok());
    scenario_.set_micro_batches(2);
    scenario_.set_optimizer_bytes_per_param(12);
  }

  const Mesh mesh_{8, 1};
  const Layout layout_ = Layout::DataParallel(mesh_);
  const std::vector<Layer> layers_ = TwoLayers();
  Strategy strategy_;
  Scenario scenario_;
  Schedule out_;
};

TEST_F(LowerPasses, WalkRunsEachMicroBatchForwardThenBackward) {
  Step step(layers_, strategy_, layout_, scenario_, &out_);
  step.segments = BuildSegments(layers_, strategy_.execution(), false);
  ASSERT_EQ(step.segments.size(), 2u);
  EXPECT_EQ(Names(WalkMicroBatches(step.segments, 2)),
            "F00 F10 B10 B00 F01 F11 B11 B01 ");
}

TEST_F(LowerPasses, ARecomputeComesJustBeforeItsLayersBackward) {
  Step step(layers_, strategy_, layout_, scenario_, &out_);
  step.segments = BuildSegments(layers_, strategy_.execution(), false);
  step.visits = WalkMicroBatches(step.segments, 2);
  InsertRecomputes(&step);
  EXPECT_EQ(Names(step.visits), "F00 F10 R10 B10 B00 F01 F11 R11 B11 B01 ");
}

// Adds one allocation per hook, named after the pass and the hook.
class Recorder : public Pass {
 public:
  Recorder(Step* step, std::string name) : step_(*step), name_(name) {}
  void Begin() override { Add("begin", -1); }
  void BeforeCompute(int v, std::vector<int>* /*deps*/) override {
    Add("before", v);
  }
  void AfterCompute(int v, int op) override {
    EXPECT_EQ(step_.visit_ops.at(v), op);
    Add("after", v);
  }
  void End() override { Add("end", -1); }

 private:
  void Add(const std::string& hook, int v) {
    step_.Alloc(COMPUTE, FORWARD, -1, -1, 1, absl::StrCat(name_, hook, v));
  }
  Step& step_;
  const std::string name_;
};

TEST_F(LowerPasses, HooksRunInThePassesOrderAroundEachComputeOp) {
  scenario_.set_micro_batches(1);
  Step step(layers_, strategy_, layout_, scenario_, &out_);
  step.segments = BuildSegments(layers_, strategy_.execution(), false);
  step.visits = WalkMicroBatches(step.segments, 1);
  step.visits.resize(1);  // the first forward only
  Recorder a(&step, "a"), b(&step, "b");
  RunPasses({&a, &b}, &step);
  std::vector<std::string> ops;
  for (const Op& op : out_.ops()) {
    ops.push_back(op.has_memory() ? op.memory().buffer() : op.label());
  }
  EXPECT_EQ(ops,
            (std::vector<std::string>{"abegin-1", "bbegin-1", "abefore0",
                                      "bbefore0", "forward block 0", "aafter0",
                                      "bafter0", "aend-1", "bend-1"}));
}

}  // namespace
}  // namespace lower
}  // namespace shardsim

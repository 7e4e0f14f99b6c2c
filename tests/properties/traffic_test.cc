// Traffic relations: a ring's volumes are their closed forms, inside and
// between nodes, for any shape, size and channel count; and ZeRO++'s
// quantized, hierarchical collectives send fewer bytes between nodes than
// ZeRO-3's, for any model, platform and job of several nodes.
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "sim/analyze/analyze.h"
#include "sim/collective/plan.h"
#include "sim/model/model.h"
#include "tests/properties/property.h"

namespace shardsim::property {
namespace {

// A ring of p = per_node x nodes members moves (p - 1) / p of the buffer
// over each of its p hops per pass (all-gather, reduce-scatter: one pass;
// all-reduce: two), and every channel's ring crosses between nodes
// `nodes` times when there are several: of its p hops, `nodes` leave a
// node. With count a multiple of p x channels, every chunk is whole.
TEST(Traffic, RingVolumesAreTheirClosedForms) {
  Check(500, [] {
    const CollectiveOp op =
        *rc::gen::element(ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE);
    const PlanShape shape{*rc::gen::inRange(1, 9), *rc::gen::inRange(1, 17)};
    const int p = shape.size();
    RC_PRE(p > 1);
    const int channels = *rc::gen::inRange(1, 9);
    const int64_t count =
        int64_t{p} * channels * *rc::gen::inRange<int64_t>(1, 1 << 16);
    RC_LOG() << CollectiveOp_Name(op) << " ring over " << shape.nodes
             << " nodes x " << shape.per_node << ", " << channels
             << " channels, " << count << " elements\n";
    const absl::StatusOr<Plan> plan =
        MakePlan(PlanRequest{op, RING, shape, count, channels});
    RC_ASSERT(plan.ok());
    const PlanVolume v = CountVolume(*plan);
    const int64_t passes = op == ALL_REDUCE ? 2 : 1;
    const int64_t per_hop = passes * (p - 1) * (count / p);
    const int64_t crossing = shape.nodes > 1 ? shape.nodes : 0;
    RC_ASSERT(v.inter_node == crossing * per_hop);
    RC_ASSERT(v.intra_node == (p - crossing) * per_hop);
    RC_ASSERT(v.from_switch == 0);
  });
}

TEST(Traffic, ZeroPlusPlusSendsLessBetweenNodesThanZero3) {
  Check(150, [] {
    const std::string model = *rc::gen::elementOf(BuiltinModelNames());
    const std::string platform = *rc::gen::elementOf(ShippedPlatforms());
    const int gpus = 16 << *rc::gen::inRange(0, 5);
    RC_LOG() << model << " on " << gpus << " GPUs of " << platform << "\n";
    Scenario sc;
    sc.set_name("property");
    sc.set_model(model);
    sc.set_platform(platform);
    sc.add_strategies("zero3");
    sc.add_strategies("zeropp");
    sc.add_gpus(gpus);
    sc.set_micro_batch_size(*rc::gen::inRange(1, 5));
    sc.set_micro_batches(*rc::gen::inRange(1, 5));
    sc.set_seq_len(*rc::gen::element(512, 1024, 2048));
    sc.set_optimizer_bytes_per_param(12);
    absl::StatusOr<Job> job = ResolveJob("property.textproto", sc);
    RC_ASSERT(job.ok());
    absl::StatusOr<Results> r = AnalyzeJob(*job, Analysis::kMemoryAndTraffic);
    RC_ASSERT(r.ok());
    RC_LOG() << "zero3 " << r->rows(0).inter_node_bytes() << " B, zeropp "
             << r->rows(1).inter_node_bytes() << " B between nodes\n";
    RC_ASSERT(r->rows(1).inter_node_bytes() < r->rows(0).inter_node_bytes());
  });
}

}  // namespace
}  // namespace shardsim::property

#include "tests/util/replay.h"

#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "sim/engine/collective_engine.h"
#include "sim/engine/fabric.h"
#include "sim/engine/replay.h"
#include "sim/runner/isolate.h"
#include "sim/simulate/simulate.h"

namespace shardsim {
namespace test {

absl::StatusOr<Replayed> ReplayOrError(const StepOps& step,
                                       const Platform& platform,
                                       const Mesh& mesh, bool every_class,
                                       bool collapse, bool symmetry) {
  ChildTask task = [&]() -> absl::StatusOr<std::string> {
    StartSimGrid();
    absl::StatusOr<std::unique_ptr<Fabric>> fabric =
        Fabric::Build(platform, mesh, /*drop_dominated=*/!every_class);
    if (!fabric.ok()) return fabric.status();
    CollectiveEngine engine(**fabric, FlowMode::kFast, platform.channels());
    engine.set_node_symmetry(symmetry);
    engine.set_network_symmetry(symmetry);
    absl::StatusOr<StepTiming> t =
        ReplayStep(step, fabric->get(), &engine, collapse);
    if (!t.ok()) return t.status();
    Results r;
    ResultRow* row = r.add_rows();
    row->set_step_time_s(t->step_time_s);
    *row->mutable_breakdown() = t->breakdown;
    *row->mutable_replay() = t->replay;
    for (const OpTime& o : t->ops) {
      TrafficEntry* e = row->add_traffic();  // a carrier for two doubles
      e->set_calls(static_cast<int64_t>(std::llround(o.start * 1e15)));
      e->set_bytes_per_call(static_cast<int64_t>(std::llround(o.end * 1e15)));
    }
    return r.SerializeAsString();
  };
  absl::StatusOr<std::string> out = RunIsolated({task}, 1)[0];
  if (!out.ok()) return out.status();
  Results r;
  if (!r.ParseFromString(*out)) {
    return absl::InternalError("replay: unreadable results");
  }
  const ResultRow& row = r.rows(0);
  Replayed rep;
  rep.step = row.step_time_s();
  rep.breakdown = row.breakdown();
  rep.replay = row.replay();
  for (const TrafficEntry& e : row.traffic()) {
    rep.ops.push_back({e.calls() * 1e-15, e.bytes_per_call() * 1e-15});
  }
  return rep;
}

Replayed Replay(const StepOps& step, const Platform& platform, const Mesh& mesh,
                bool every_class, bool collapse, bool symmetry) {
  absl::StatusOr<Replayed> r =
      ReplayOrError(step, platform, mesh, every_class, collapse, symmetry);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : Replayed();
}

}  // namespace test
}  // namespace shardsim

// Property tests: relations that must hold whatever the parameters, each
// checked on cases RapidCheck generates, and a failure shrunk to a
// smallest counterexample that the message prints with the seed that
// reproduces it. The seed comes from RC_PARAMS ("seed=N"), which ctest
// fixes (CMakeLists.txt), so that CI runs the same cases every time; run
// the binary with another seed to draw new ones.
//
// The cases are small jobs (a model cut to 2 layers, up to 128 GPUs) on
// the shipped platforms, and the hardware knobs that a faster machine
// turns: what one case costs decides how many a property gets.
#ifndef SHARDSIM_TESTS_PROPERTIES_PROPERTY_H_
#define SHARDSIM_TESTS_PROPERTIES_PROPERTY_H_

#include <rapidcheck.h>

#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "sim/scenario/scenario.h"
#include "sim/schema/platform.pb.h"

namespace shardsim::property {

// Checks `prop` on `cases` generated cases (RapidCheck's maxSuccess), the
// rest of RapidCheck's settings from RC_PARAMS. Prints the count on
// success ("N cases" in the log), the shrunk counterexample on failure.
template <typename Testable>
void Check(int cases, Testable&& prop) {
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata metadata;
  metadata.id = std::string(info->test_suite_name()) + "/" + info->name();
  metadata.description = info->name();
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = cases;
  const rc::detail::TestResult result =
      rc::detail::checkTestable(std::forward<Testable>(prop), metadata, params);
  std::ostringstream message;
  rc::detail::printResultMessage(result, message);
  if (result.template is<rc::detail::SuccessResult>()) {
    std::cout << "property " << metadata.id << ": " << message.str() << "\n";
  } else {
    ADD_FAILURE() << metadata.id << " (seed " << params.seed << "):\n"
                  << message.str();
  }
}

// The shipped platforms.
const std::vector<std::string>& ShippedPlatforms();

// A shipped platform by name; a failed load fails the case.
Platform Shipped(const std::string& name);

// One of the shipped platforms, drawn; with static routing and an
// oversubscribed fabric (leaves of 4 to 32 NICs at 1:1 to 8:1, cabled by
// rail or by node) in half the cases, so that up-links matter.
Platform AnyPlatform();

// A hardware knob and how much faster it is: a factor on a bandwidth or a
// FLOP rate, or a share of a link's or a kernel's peak moved towards 1.
struct Speedup {
  std::string knob;
  double factor = 1;
};

// The knobs that a faster machine turns: NIC and NVSwitch bandwidth, the
// reachable shares of each, peak FLOP/s, HBM bandwidth, the kernels'
// efficiencies and NVLink's share under compute. `step`: every knob; else
// the network's and NVSwitch's only (a collective alone runs no kernel).
rc::Gen<Speedup> AnySpeedup(bool step);

// `p` with `s` applied: every rate at least as high as in `p`.
Platform Faster(const Platform& p, const Speedup& s);

// LLaMA-7B cut to 2 layers on `platform` (inline), one strategy, one GPU
// count: a step of a real model's shapes that simulates in a tenth of a
// second.
absl::StatusOr<Job> SmallJob(const Platform& platform,
                             const std::string& strategy, int gpus,
                             int micro_batch_size, int micro_batches,
                             int seq_len);

// The named strategies (NamedStrategies), drawn.
rc::Gen<std::string> AnyNamedStrategy();

// Shows a platform's knobs in a counterexample.
std::string Describe(const Platform& p);

}  // namespace shardsim::property

#endif  // SHARDSIM_TESTS_PROPERTIES_PROPERTY_H_

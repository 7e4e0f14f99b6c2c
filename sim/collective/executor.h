// Runs a plan on real data, step by step, with the semantics plan.h states.
// The in-memory executor holds every member's buffer in one process; it
// proves plans correct in tests and is the CPU transport's reference.
#ifndef SHARDSIM_SIM_COLLECTIVE_EXECUTOR_H_
#define SHARDSIM_SIM_COLLECTIVE_EXECUTOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "sim/collective/plan.h"

namespace shardsim {

// buffers[m] is member m's buffer of plan.count elements. Fails (naming the
// transfer) on a transfer outside the buffer or the group.
absl::Status ExecutePlan(const Plan& plan,
                         std::vector<std::vector<int64_t>>* buffers);

// Fills inputs the contract of plan.h asks for with distinct values, runs
// the plan, and compares every element with the expected result. Elements
// outside a member's input are filled with a poison value so that a plan
// that forgets to send them is caught. Returns the first mismatch. The
// values and expected results are check_data.h's (CheckValues::Exact).
absl::Status CheckPlan(const Plan& plan);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_COLLECTIVE_EXECUTOR_H_

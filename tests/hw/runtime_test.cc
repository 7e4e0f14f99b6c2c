// What shardsim-hw refuses before any rank touches a GPU: a schedule of
// several programs (schedule.proto Program), which it does not run yet.
#include "hw/runtime/runtime.h"

#include <string>

#include "gtest/gtest.h"

namespace shardsim::hw {
namespace {

TEST(ReplaySchedule, SeveralProgramsAreAClearError) {
  Schedule s;
  s.add_programs()->add_ranks(0);
  s.add_programs()->add_ranks(1);
  Op* send = s.add_ops();
  send->mutable_send()->set_bytes(1000);
  send->mutable_send()->set_peer_program(1);
  // Refused before the backend is used: none is needed.
  absl::StatusOr<std::vector<OpTiming>> t = ReplaySchedule(s, nullptr);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(std::string(t.status().message())
                .find("shardsim-hw runs schedules of one program"),
            std::string::npos)
      << t.status().message();
}

}  // namespace
}  // namespace shardsim::hw

#include "sim/strategy/strategy.h"
namespace shardsim {
absl::StatusOr<Strategy> ParseStrategy(absl::string_view, const Mesh&, absl::string_view) { return absl::UnimplementedError("placeholder"); }
absl::Status ValidateStrategy(const Strategy&, const Mesh&) { return absl::UnimplementedError("placeholder"); }
std::vector<std::string> NamedStrategies() { return {}; }
std::string FactorName(const Factor& f) { return ""; }
}  // namespace shardsim

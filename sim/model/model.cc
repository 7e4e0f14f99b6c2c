#include "sim/model/model.h"
namespace shardsim {
std::vector<std::string> BuiltinModelNames() { return {}; }
absl::StatusOr<Model> BuiltinModel(absl::string_view) { return absl::UnimplementedError("placeholder"); }
absl::Status ValidateModel(const Model&) { return absl::UnimplementedError("placeholder"); }
std::vector<Layer> ModelLayers(const Model&, const Batch&) { return {}; }
int64_t TotalParams(const Model&) { return 0; }
double ModelFlopsPerMicroBatch(const Model&, const Batch&) { return 0; }
}  // namespace shardsim

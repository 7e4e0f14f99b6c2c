// Scenario files: read a .textproto, apply command-line overrides, resolve
// the model and platform it names, and validate every field. Errors name
// the file, the field and the reason.
#ifndef SHARDSIM_SIM_SCENARIO_SCENARIO_H_
#define SHARDSIM_SIM_SCENARIO_SCENARIO_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/base/group.h"
#include "sim/model/model.h"
#include "sim/schema/collective.pb.h"
#include "sim/schema/model.pb.h"
#include "sim/schema/platform.pb.h"
#include "sim/schema/scenario.pb.h"

namespace shardsim {

// A scenario with everything it refers to loaded.
struct Job {
  std::string path;      // the scenario file, for messages
  std::string base_dir;  // its directory: relative paths start here
  Scenario scenario;
  Model model;
  Platform platform;
  // What the job was told but does not model (allow_unmodelled), each
  // naming its file and key; also in the results' `warnings`.
  std::vector<std::string> warnings;
};

// Parses a text-format scenario; a syntax error gives file:line:column.
absl::StatusOr<Scenario> ReadScenario(const std::string& path);
absl::StatusOr<CollectiveScenario> ReadCollectiveScenario(
    const std::string& path);

// The directory of `path`: relative paths in the file start there.
std::string DirOf(const std::string& path);

// Loads the model and platform `scenario` names (paths relative to the
// directory of `path`) and validates all fields.
absl::StatusOr<Job> ResolveJob(const std::string& path, Scenario scenario);

// Checks every field of a platform, or of a scenario's own fields (not the
// model or platform it names), against sim/schema/limits.h. Errors read
// "WHERE: field NAME: ...".
absl::Status ValidatePlatform(const Platform& platform,
                              absl::string_view where);
absl::Status ValidateScenario(const Scenario& scenario,
                              absl::string_view where);

// A built-in model name or a model .textproto.
absl::StatusOr<Model> LoadModel(absl::string_view name_or_path,
                                absl::string_view base_dir);
// A shipped platform name (platforms/NAME.textproto) or a path.
absl::StatusOr<Platform> LoadPlatform(absl::string_view name_or_path,
                                      absl::string_view base_dir);

// The data-parallel mesh of `gpus` GPUs on `platform`: whole nodes, or part
// of one node when gpus < GPUs per node.
absl::StatusOr<Mesh> JobMesh(const Platform& platform, int gpus);

// The scenario as it runs on `gpus` GPUs: micro_batches set from
// global_batch_tokens where that is given.
absl::StatusOr<Scenario> ScenarioAt(const Scenario& scenario, int gpus);

// Whether `job` can run on `gpus` GPUs: a mesh of whole nodes, a whole
// number of micro-batches (global_batch_tokens) that its pipeline schedule
// runs (CheckStageOrder), and a schedule within limits::kMaxLayerPasses.
// Errors name job.path and the field at fault.
absl::Status CheckGpuCount(const Job& job, int gpus);

// The micro-batch one GPU runs.
Batch ScenarioBatch(const Scenario& scenario);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCENARIO_SCENARIO_H_

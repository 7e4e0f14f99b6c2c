// Where the shipped data is: platforms/ (and its gpus/), scenarios/ and
// reports/. Found from this executable's own path, never from where it was
// built, so an installed, packaged or moved build finds it:
//   $SHARDSIM_DATA_DIR, when set (a tree laid out like the source's);
//   BIN/../share/shardsim (cmake --install, the Debian package);
//   BIN/share/shardsim (a build tree: CMake links it to the sources).
#ifndef SHARDSIM_SIM_SCENARIO_DATA_DIR_H_
#define SHARDSIM_SIM_SCENARIO_DATA_DIR_H_

#include <string>

#include "absl/status/statusor.h"

namespace shardsim {

// The first of the places above that has platforms/; an error naming every
// place looked at when none has (or when $SHARDSIM_DATA_DIR has not).
absl::StatusOr<std::string> DataDir();

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCENARIO_DATA_DIR_H_

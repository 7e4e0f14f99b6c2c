// Fits a platform's communication parameters to measured collectives.
//
// Per tier (intra-node sets: gpus <= gpus_per_node -> NVSwitch; the rest ->
// network) the engine's ring time is, per wire protocol p,
//   t(S) = base_p + steps * alpha_p + bottleneck_hop_bytes(S) / (bw * f)
// with steps = p-1 (all-gather, reduce-scatter) or 2(p-1) (all-reduce) and
// hop bytes (p-1)/p S per step sequence (twice for all-reduce). The
// bandwidth term is taken from the engine itself (time on the current
// platform minus base and steps x alpha), so channels, rails and NIC
// sharing need no re-derivation; a weighted (1/t^2: relative error) linear
// least-squares fit over all of a tier's points then gives one bandwidth
// scale g (f_new = f / g) and, per protocol the engine picks, an alpha
// shift (intercept change / steps). Protocol choice depends on the
// parameters, so the fit is repeated on the updated platform (4 rounds).
#ifndef SHARDSIM_VALIDATE_CALIBRATE_H_
#define SHARDSIM_VALIDATE_CALIBRATE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/schema/platform.pb.h"
#include "validate/measurements.h"
#include "validate/validate.h"

namespace shardsim {

struct FittedParameter {
  std::string name;      // e.g. "efficiency.network_fraction"
  double base = 0;       // the base platform's value
  double value = 0;      // calibrated (== base when not identified)
  double std_error = 0;  // from the fit's covariance; 0 when not fitted
  bool identified = false;
  std::string why;  // how, or why not
  std::vector<std::string> files;
  int points = 0;
  int64_t min_size = 0, max_size = 0;
};

struct CalibrationResult {
  Platform platform;
  std::vector<FittedParameter> parameters;
  std::vector<std::string> notes;     // what was not identified, and why
  std::vector<FileError> fit_errors;  // per file, on the calibrated platform
  // Per file and size bucket: median measured / simulated time.
  std::vector<std::string> efficiency_curve;
  std::string comment;  // '#' lines for the top of the .textproto
};

absl::StatusOr<CalibrationResult> Calibrate(
    const Platform& base, const std::vector<MeasurementSet>& sets);

}  // namespace shardsim

#endif  // SHARDSIM_VALIDATE_CALIBRATE_H_

// Results rows: what a job costs per strategy and GPU count, as tables and
// as JSON (protobuf's mapping with the proto field names).
#ifndef SHARDSIM_SIM_RESULTS_RESULTS_H_
#define SHARDSIM_SIM_RESULTS_RESULTS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/scenario/scenario.h"
#include "sim/schema/results.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

std::string FormatMemoryTable(const Results& results);
// Totals per row; with `detail`, one line per kind of collective call.
std::string FormatVolumeTable(const Results& results, bool detail);

// Timed rows: step time, throughput, MFU, exposed communication, traffic,
// memory; OOM rows say so and carry no times.
std::string FormatRunTable(const Results& results);

// Why each timed step takes what it takes: its breakdown (results.proto),
// seconds per cause, and the collectives left most exposed.
std::string FormatBreakdownTable(const Results& results);

// `shardsim goodput`: per point, the run's expected wall time, its goodput
// and the lost time by cause (ResultRow.goodput), then the failures by
// part.
std::string FormatGoodputTable(const Results& results);

// `shardsim plan`: the counts, then the best rows, the presets and the
// Pareto front, each as FormatRunTable lays rows out, each point named by
// PlanPointName.
std::string FormatPlanTable(const SearchResults& plan);

// A plan row's strategy with its settings, if set: "zero3 [10 x 4]" runs
// 4 micro-batches of 10 sequences, "zero3 [10 x 4, recompute]" recomputes
// activations too, "zero3 [10 x 4, reduce bucket 16777216]" sets that
// execution knob away from its default.
std::string PlanPointName(const ResultRow& row);

// nccl-tests' table layout, so it can be laid beside a real log.
std::string FormatCollectiveTable(const CollectiveResults& results);

// Any message as JSON with the proto field names (protobuf's JSON
// mapping, indented unless told otherwise), map keys sorted: the same
// message gives the same bytes in every run.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message,
                                   bool whitespace = true);
absl::Status WriteJson(const google::protobuf::Message& results,
                       const std::string& path);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_RESULTS_RESULTS_H_

#include "sim/results/trace.h"

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "sim/base/group.h"
#include "sim/results/results.h"
#include "sim/schedule/lower.h"

namespace shardsim {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

Value Str(const std::string& s) {
  Value v;
  v.set_string_value(s);
  return v;
}
Value Num(double d) {
  Value v;
  v.set_number_value(d);
  return v;
}

Struct ThreadName(int pid, int tid, const std::string& name) {
  Struct e;
  (*e.mutable_fields())["ph"] = Str("M");
  (*e.mutable_fields())["name"] = Str("thread_name");
  (*e.mutable_fields())["pid"] = Num(pid);
  (*e.mutable_fields())["tid"] = Num(tid);
  (*(*e.mutable_fields())["args"]
        .mutable_struct_value()
        ->mutable_fields())["name"] = Str(name);
  return e;
}

}  // namespace

namespace {

// A kernel in protobuf's JSON mapping, as a Value (what `shardsim
// calibrate` reads back).
Value KernelValue(const Kernel& k) {
  std::string json;
  Value v;
  if (google::protobuf::util::MessageToJsonString(k, &json).ok()) {
    (void)google::protobuf::util::JsonStringToMessage(json,
                                                      v.mutable_struct_value());
  }
  return v;
}

// The compute stream's kernels, one by one, below the streams.
constexpr int kKernelTid = 4;

}  // namespace

absl::Status WriteChromeTrace(const Schedule& schedule,
                              const std::vector<TraceProcess>& processes,
                              const std::string& title,
                              const std::string& path) {
  Struct root;
  auto* events = (*root.mutable_fields())["traceEvents"].mutable_list_value();
  for (size_t pid = 0; pid < processes.size(); ++pid) {
    const TraceProcess& proc = processes[pid];
    Struct process;
    (*process.mutable_fields())["ph"] = Str("M");
    (*process.mutable_fields())["name"] = Str("process_name");
    (*process.mutable_fields())["pid"] = Num(pid);
    (*(*process.mutable_fields())["args"]
          .mutable_struct_value()
          ->mutable_fields())["name"] =
        Str(absl::StrCat(proc.name, " - ", title));
    *events->add_values()->mutable_struct_value() = process;
    for (int s = COMPUTE; s <= REDUCE; ++s) {
      *events->add_values()->mutable_struct_value() = ThreadName(
          pid, s, absl::AsciiStrToLower(Stream_Name(static_cast<Stream>(s))));
    }
    constexpr int kHostTid = 0;
    bool any_kernels = false;
    for (const auto& k : proc.kernels) any_kernels |= !k.empty();
    if (any_kernels) {
      *events->add_values()->mutable_struct_value() =
          ThreadName(pid, kKernelTid, "kernels (compute, one by one)");
    }
    if (!proc.host.empty()) {
      *events->add_values()->mutable_struct_value() =
          ThreadName(pid, kHostTid, "host (framework issuing ops)");
    }
    for (const Op& op : schedule.ops()) {
      if (op.body_case() == Op::kMemory) continue;
      if (op.id() >= static_cast<int>(proc.times.size())) continue;
      if (proc.program >= 0 && op.program() != proc.program) continue;
      const auto& [start, end] = proc.times[op.id()];
      Struct e;
      auto& f = *e.mutable_fields();
      f["name"] = Str(op.label());
      f["ph"] = Str("X");
      f["pid"] = Num(pid);
      f["tid"] = Num(op.stream());
      f["ts"] = Num(start * 1e6);  // microseconds
      f["dur"] = Num((end - start) * 1e6);
      auto& args = *f["args"].mutable_struct_value()->mutable_fields();
      args["op_id"] = Num(op.id());
      args["phase"] = Str(absl::AsciiStrToLower(Phase_Name(op.phase())));
      args["micro_batch"] = Num(op.micro_batch());
      if (op.id() < static_cast<int>(proc.causes.size()) &&
          !proc.causes[op.id()].empty()) {
        args["critical_path"] = Str(proc.causes[op.id()]);
      }
      if (op.has_compute()) {
        args["flops"] = Num(op.compute().flops());
        // The kernels with their shapes, so that `shardsim calibrate` can
        // fit the kernel model to measured timelines.
        auto* list = args["kernel_list"].mutable_list_value();
        for (const Kernel& k : KernelsOf(schedule, op.compute()).kernels()) {
          *list->add_values() = KernelValue(k);
        }
      } else if (op.has_collective()) {
        const CollectiveCall& c = op.collective();
        args["op"] = Str(CollectiveOp_Name(c.op()));
        args["bytes"] = Num(static_cast<double>(c.bytes()));
        args["group"] = Str(GroupName(c.group()));
        args["algorithm"] = Str(Algorithm_Name(c.algorithm()));
      } else if (op.has_send()) {
        const PointToPoint& send = op.send();
        args["op"] = Str("SEND");
        args["bytes"] = Num(static_cast<double>(send.bytes()));
        args["tensor"] = Str(send.tensor());
        args["peer_program"] = Num(send.peer_program());
      }
      *events->add_values()->mutable_struct_value() = std::move(e);
      if (op.has_compute() && op.id() < static_cast<int>(proc.kernels.size())) {
        const auto& times = proc.kernels[op.id()];
        const KernelList& kernels = KernelsOf(schedule, op.compute());
        for (int k = 0;
             k < kernels.kernels_size() && k < static_cast<int>(times.size());
             ++k) {
          const Kernel& kernel = kernels.kernels(k);
          Struct ke;
          auto& kf = *ke.mutable_fields();
          kf["name"] = Str(kernel.name());
          kf["ph"] = Str("X");
          kf["pid"] = Num(pid);
          kf["tid"] = Num(kKernelTid);
          kf["ts"] = Num(times[k].first * 1e6);
          kf["dur"] = Num((times[k].second - times[k].first) * 1e6);
          auto& kargs = *kf["args"].mutable_struct_value()->mutable_fields();
          kargs["op_id"] = Num(op.id());
          *kargs["kernel_list"].mutable_list_value()->add_values() =
              KernelValue(kernel);
          *events->add_values()->mutable_struct_value() = std::move(ke);
        }
      }
      if (op.id() < static_cast<int>(proc.host.size())) {
        const auto& [h0, h1] = proc.host[op.id()];
        if (h1 > h0) {
          Struct h;
          auto& hf = *h.mutable_fields();
          hf["name"] = Str(absl::StrCat("issue ", op.label()));
          hf["ph"] = Str("X");
          hf["pid"] = Num(pid);
          hf["tid"] = Num(kHostTid);
          hf["ts"] = Num(h0 * 1e6);
          hf["dur"] = Num((h1 - h0) * 1e6);
          (*hf["args"].mutable_struct_value()->mutable_fields())["op_id"] =
              Num(op.id());
          *events->add_values()->mutable_struct_value() = std::move(h);
        }
      }
    }
  }
  absl::StatusOr<std::string> json = ToJson(root, /*whitespace=*/false);
  if (!json.ok()) return json.status();
  std::ofstream out(path);
  out << *json;
  if (!out) return absl::UnavailableError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

}  // namespace shardsim

#include "sim/scenario/overrides.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace shardsim {

absl::Status ApplyOverrides(const ScenarioOverrides& o, Scenario* s) {
  if (o.model) {
    s->clear_model_def();
    s->set_model(*o.model);
  }
  if (o.platform) {
    s->clear_platform_def();
    s->set_platform(*o.platform);
  }
  if (o.strategies) {
    s->clear_strategies();
    for (const std::string& spec : *o.strategies) s->add_strategies(spec);
  }
  if (o.gpus) {
    s->clear_gpus();
    for (absl::string_view n :
         absl::StrSplit(*o.gpus, ',', absl::SkipEmpty())) {
      int gpus;
      if (!absl::SimpleAtoi(n, &gpus)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--gpus: \"", n, "\" is not a number"));
      }
      s->add_gpus(gpus);
    }
  }
  if (o.micro_batches) s->set_micro_batches(*o.micro_batches);
  if (o.micro_batch_size) s->set_micro_batch_size(*o.micro_batch_size);
  if (o.seq_len) s->set_seq_len(*o.seq_len);
  if (o.recompute) s->set_recompute(*o.recompute);
  return absl::OkStatus();
}

}  // namespace shardsim

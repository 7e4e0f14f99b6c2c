// `shardsim platform`: a platform as the simulator reads it, bases
// merged and the GPU model filled in, in text format.
#include <cstdio>
#include <string>

#include "sim/cli/commands.h"
#include "sim/cli/options.h"
#include "sim/scenario/platform_file.h"

namespace shardsim {

int PlatformMain(const Invocation& inv) {
  if (inv.args.size() != 1) {
    std::fprintf(stderr, "shardsim platform: give one platform\n\n%s",
                 UsageText().c_str());
    return 2;
  }
  const absl::StatusOr<std::string> text = PlatformText(inv.args[0]);
  if (!text.ok()) return Fail(text.status());
  std::fputs(text->c_str(), stdout);
  return 0;
}

}  // namespace shardsim

// `shardsim help [COMMAND]`: the overview, or one command's flags.
#include <cstdio>

#include "sim/cli/commands.h"
#include "sim/cli/options.h"

namespace shardsim {

int HelpMain(const Invocation& inv) {
  if (inv.args.size() > 1) {
    std::fputs(UsageText().c_str(), stderr);
    return 2;
  }
  if (inv.args.size() == 1) {
    const Command* c = FindCommand(inv.args[0]);
    if (c == nullptr) {
      std::fprintf(stderr, "shardsim help: unknown command \"%s\"%s\n",
                   inv.args[0].c_str(), CommandHint(inv.args[0]).c_str());
      return 2;
    }
    std::fputs(CommandHelp(*c).c_str(), stdout);
    return 0;
  }
  std::fputs(UsageText().c_str(), stdout);
  return 0;
}

}  // namespace shardsim
